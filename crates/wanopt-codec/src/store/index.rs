//! In-memory index of a store: fingerprint -> where the record lives.
//!
//! Fingerprints are BLAKE3 outputs, uniformly distributed and not
//! choosable by an attacker, so the hash map uses their first 8 bytes as
//! the hash instead of running SipHash again.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

use crate::fingerprint::Fingerprint;

/// Where a record is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Location {
    /// Segment number.
    pub segment: u32,
    /// Offset of the record header in the segment.
    pub offset: u32,
    /// Data length.
    pub len: u32,
}

impl Location {
    /// Store position: segment number in the high 32 bits, offset in the
    /// low 32 bits. Positions only grow as records are appended.
    pub fn position(&self) -> u64 {
        (u64::from(self.segment) << 32) | u64::from(self.offset)
    }
}

/// Hasher that takes the first 8 bytes of an already-random key.
#[derive(Default)]
pub struct PrefixHasher(u64);

impl Hasher for PrefixHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut word = [0u8; 8];
            word[..chunk.len()].copy_from_slice(chunk);
            self.0 = self.0.rotate_left(5) ^ u64::from_le_bytes(word);
        }
    }
}

/// Hash map keyed by fingerprints.
pub type FingerprintMap<V> = HashMap<Fingerprint, V, BuildHasherDefault<PrefixHasher>>;

/// The index: one location per stored fingerprint.
#[derive(Debug, Default)]
pub struct Index {
    map: FingerprintMap<Location>,
}

impl Index {
    /// Location of `fingerprint`.
    pub fn get(&self, fingerprint: &Fingerprint) -> Option<Location> {
        self.map.get(fingerprint).copied()
    }

    /// Record a location (the newest wins).
    pub fn insert(&mut self, fingerprint: Fingerprint, location: Location) {
        self.map.insert(fingerprint, location);
    }

    /// Forget `fingerprint` if it points into `segment`.
    pub fn remove_in_segment(&mut self, fingerprint: &Fingerprint, segment: u32) {
        if self
            .map
            .get(fingerprint)
            .is_some_and(|l| l.segment == segment)
        {
            self.map.remove(fingerprint);
        }
    }

    /// Forget `fingerprint`.
    pub fn remove(&mut self, fingerprint: &Fingerprint) {
        self.map.remove(fingerprint);
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// True when empty.
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// Drop every entry.
    pub fn clear(&mut self) {
        self.map.clear();
    }
}
