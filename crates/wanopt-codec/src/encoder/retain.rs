//! Chunk retention: the referenced chunks kept in memory to answer the
//! peer's `NeedChunk` without reading the store.

use std::collections::VecDeque;

use crate::fingerprint::Fingerprint;
use crate::store::index::FingerprintMap;

/// Bounded FIFO of chunk data by fingerprint.
#[derive(Debug)]
pub(super) struct Retained {
    data: FingerprintMap<Vec<u8>>,
    order: VecDeque<Fingerprint>,
    bytes: usize,
    /// Bound on `bytes`.
    limit: usize,
}

impl Retained {
    /// No chunks yet; at most `limit` bytes of them.
    pub(super) fn new(limit: usize) -> Self {
        Retained {
            data: FingerprintMap::default(),
            order: VecDeque::new(),
            bytes: 0,
            limit,
        }
    }

    /// Keep a copy of `chunk` (the oldest are dropped to make room; a
    /// chunk larger than the limit is not kept).
    pub(super) fn insert(&mut self, fp: Fingerprint, chunk: &[u8]) {
        if self.data.contains_key(&fp) {
            return;
        }
        while self.bytes + chunk.len() > self.limit {
            let Some(old) = self.order.pop_front() else {
                break;
            };
            if let Some(v) = self.data.remove(&old) {
                self.bytes -= v.len();
            }
        }
        if chunk.len() <= self.limit {
            self.data.insert(fp, chunk.to_vec());
            self.order.push_back(fp);
            self.bytes += chunk.len();
        }
    }

    /// The chunk `fp`, if kept.
    pub(super) fn get(&self, fp: &Fingerprint) -> Option<&[u8]> {
        self.data.get(fp).map(Vec::as_slice)
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
        let mut retained = Retained::new(300);
        for n in 0..4 {
            retained.insert(fingerprint(n), &[n; 100]);
        }
        // The fourth evicted the first; the bytes stay within the limit.
        assert_eq!(retained.bytes, 300);
        assert!(!retained.data.contains_key(&fingerprint(0)));
        for n in 1..4 {
            assert_eq!(retained.data[&fingerprint(n)], vec![n; 100]);
        }
        // A chunk held already moves nothing; one larger than the limit
        // is not kept (and evicts everything on its way).
        retained.insert(fingerprint(1), &[1; 100]);
        assert_eq!(retained.order.front(), Some(&fingerprint(1)));
        retained.insert(fingerprint(9), &[9; 301]);
        assert!(!retained.data.contains_key(&fingerprint(9)));
        assert_eq!(retained.bytes, 0);
        assert!(retained.data.is_empty());
    }
}
