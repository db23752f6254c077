//! Chunk retention: the referenced chunks kept in memory to answer the
//! peer's `NeedChunk` without reading the store.

use std::collections::VecDeque;

use crate::fingerprint::Fingerprint;
use crate::store::index::FingerprintMap;

/// Bounded FIFO of chunk data by fingerprint.
#[derive(Debug, Default)]
pub(super) struct Retained {
    pub(super) data: FingerprintMap<Vec<u8>>,
    pub(super) order: VecDeque<Fingerprint>,
    pub(super) bytes: usize,
}

impl Retained {
    pub(super) fn insert(&mut self, fp: Fingerprint, chunk: &[u8], limit: usize) {
        if self.data.contains_key(&fp) {
            return;
        }
        while self.bytes + chunk.len() > limit {
            let Some(old) = self.order.pop_front() else {
                break;
            };
            if let Some(v) = self.data.remove(&old) {
                self.bytes -= v.len();
            }
        }
        if chunk.len() <= limit {
            self.data.insert(fp, chunk.to_vec());
            self.order.push_back(fp);
            self.bytes += chunk.len();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fingerprint(n: u8) -> Fingerprint {
        Fingerprint::of(&[n])
    }

    #[test]
    fn retained_chunks_are_evicted_oldest_first_within_the_limit() {
        let mut retained = Retained::default();
        for n in 0..4 {
            retained.insert(fingerprint(n), &[n; 100], 300);
        }
        // The fourth evicted the first; the bytes stay within the limit.
        assert_eq!(retained.bytes, 300);
        assert!(!retained.data.contains_key(&fingerprint(0)));
        for n in 1..4 {
            assert_eq!(retained.data[&fingerprint(n)], vec![n; 100]);
        }
        // A chunk held already moves nothing; one larger than the limit
        // is not kept (and evicts everything on its way).
        retained.insert(fingerprint(1), &[1; 100], 300);
        assert_eq!(retained.order.front(), Some(&fingerprint(1)));
        retained.insert(fingerprint(9), &[9; 301], 300);
        assert!(!retained.data.contains_key(&fingerprint(9)));
        assert_eq!(retained.bytes, 0);
        assert!(retained.data.is_empty());
    }
}
