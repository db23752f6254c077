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
