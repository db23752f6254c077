//! Dropping the second copy of a datagram that came over two paths.
//!
//! When a lane duplicates, every datagram arrives once per path. QUIC would
//! drop the later copies itself (it tracks packet numbers), but only after
//! decrypting them; the filter drops them first, for the CPU and for clean
//! counters, never for correctness: a copy that slips through is still
//! dropped by QUIC, and a datagram wrongly taken for a copy (two distinct
//! datagrams with the same last 8 bytes) is a loss QUIC repairs.
//!
//! A datagram's fingerprint is its last 8 bytes ([`fingerprint`]): the end
//! of the AEAD tag of its last QUIC packet, or the end of an FEC repair's
//! shard. [`DuplicateFilter`] remembers the last [`CAPACITY`] fingerprints
//! it saw, in fixed memory: a FIFO of fingerprints and an open-addressing
//! table (linear probing, at most half full) of indexes into it. The table
//! hashes with a per-filter seed, so a sender cannot choose fingerprints
//! that collide.

/// Fingerprints a default filter remembers.
pub const CAPACITY: usize = 8192;

/// The fingerprint of `datagram`: its last 8 bytes, `None` when it is
/// shorter.
pub fn fingerprint(datagram: &[u8]) -> Option<u64> {
    let start = datagram.len().checked_sub(8)?;
    let tail: [u8; 8] = datagram[start..].try_into().ok()?;
    Some(u64::from_be_bytes(tail))
}

/// The last fingerprints seen, in fixed memory.
#[derive(Debug, Clone)]
pub struct DuplicateFilter {
    /// The fingerprints, oldest at `head` once full.
    fifo: Box<[u64]>,
    /// How many of `fifo` are in use.
    len: usize,
    /// The slot the next fingerprint goes to.
    head: usize,
    /// 0: empty; else 1 + an index into `fifo`.
    table: Box<[u16]>,
    seed: u64,
    duplicates: u64,
}

impl DuplicateFilter {
    /// A filter of [`CAPACITY`] fingerprints; `seed` keys its hash (take it
    /// from a random source).
    pub fn new(seed: u64) -> DuplicateFilter {
        DuplicateFilter::with_capacity(CAPACITY, seed)
    }

    /// A filter of `capacity` fingerprints.
    ///
    /// # Panics
    /// If `capacity` is not a power of two from 1 to 32,768 (a constant of
    /// the caller's).
    pub fn with_capacity(capacity: usize, seed: u64) -> DuplicateFilter {
        assert!(
            capacity.is_power_of_two() && capacity <= 1 << 15,
            "capacity {capacity}"
        );
        DuplicateFilter {
            fifo: vec![0; capacity].into_boxed_slice(),
            len: 0,
            head: 0,
            table: vec![0; 2 * capacity].into_boxed_slice(),
            seed,
            duplicates: 0,
        }
    }

    /// Whether `fingerprint` is new: it is remembered and `true` comes back;
    /// `false` if it was among the last [`DuplicateFilter::capacity`]
    /// fingerprints seen.
    pub fn first_seen(&mut self, fingerprint: u64) -> bool {
        if self.find(fingerprint).is_some() {
            self.duplicates += 1;
            return false;
        }
        if self.len == self.fifo.len() {
            let oldest = self.fifo[self.head];
            if let Some(slot) = self.find(oldest) {
                self.remove_slot(slot);
            }
        } else {
            self.len += 1;
        }
        self.fifo[self.head] = fingerprint;
        let mut slot = self.home(fingerprint);
        while self.table[slot] != 0 {
            slot = (slot + 1) & self.mask();
        }
        self.table[slot] = (self.head + 1) as u16;
        self.head = (self.head + 1) & (self.fifo.len() - 1);
        true
    }

    /// Fingerprints remembered.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether nothing is remembered.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Most fingerprints remembered.
    pub fn capacity(&self) -> usize {
        self.fifo.len()
    }

    /// Copies dropped so far.
    pub fn duplicates(&self) -> u64 {
        self.duplicates
    }

    /// Bytes the filter holds on the heap (fixed at creation).
    pub fn memory_bytes(&self) -> usize {
        std::mem::size_of_val(&*self.fifo) + std::mem::size_of_val(&*self.table)
    }

    fn mask(&self) -> usize {
        self.table.len() - 1
    }

    fn home(&self, fingerprint: u64) -> usize {
        let mixed = (fingerprint ^ self.seed).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        ((mixed ^ (mixed >> 29)).wrapping_mul(0xBF58_476D_1CE4_E5B9) >> 32) as usize & self.mask()
    }

    fn fingerprint_at(&self, slot: usize) -> Option<u64> {
        let index = usize::from(self.table[slot]).checked_sub(1)?;
        Some(self.fifo[index])
    }

    /// The table slot holding `fingerprint`.
    fn find(&self, fingerprint: u64) -> Option<usize> {
        let mut slot = self.home(fingerprint);
        loop {
            match self.fingerprint_at(slot) {
                None => return None,
                Some(f) if f == fingerprint => return Some(slot),
                Some(_) => slot = (slot + 1) & self.mask(),
            }
        }
    }

    /// Empties `slot`, moving later entries of its run back so that every
    /// entry stays reachable from its home (deletion without tombstones).
    fn remove_slot(&mut self, mut hole: usize) {
        let mask = self.mask();
        let mut next = (hole + 1) & mask;
        while let Some(f) = self.fingerprint_at(next) {
            let home = self.home(f);
            // The entry may fill the hole if its home is not in the
            // (cyclic) range (hole, next].
            let distance_to_next = next.wrapping_sub(home) & mask;
            let distance_to_hole = next.wrapping_sub(hole) & mask;
            if distance_to_next >= distance_to_hole {
                self.table[hole] = self.table[next];
                hole = next;
            }
            next = (next + 1) & mask;
        }
        self.table[hole] = 0;
    }
}

#[cfg(test)]
mod tests {
    use std::collections::{HashSet, VecDeque};

    use proptest::prelude::*;

    use super::*;

    #[test]
    fn copies_are_dropped_and_new_datagrams_pass() {
        let mut filter = DuplicateFilter::new(7);
        let a = b"quic packet one, then its tag 12345678";
        let b = b"quic packet two, then its tag 87654321";
        let (fa, fb) = (fingerprint(a).unwrap(), fingerprint(b).unwrap());
        assert_eq!(fa, u64::from_be_bytes(*b"12345678"));
        assert!(filter.first_seen(fa));
        assert!(filter.first_seen(fb));
        assert!(!filter.first_seen(fa));
        assert!(!filter.first_seen(fb));
        assert_eq!((filter.len(), filter.duplicates()), (2, 2));
        assert_eq!(fingerprint(b"short"), None);
        // Zero is a fingerprint like any other.
        assert!(filter.first_seen(0));
        assert!(!filter.first_seen(0));
    }

    #[test]
    fn memory_is_fixed() {
        let mut filter = DuplicateFilter::new(1);
        let bytes = filter.memory_bytes();
        assert_eq!(bytes, CAPACITY * 8 + 2 * CAPACITY * 2);
        for n in 0..10 * CAPACITY as u64 {
            assert!(filter.first_seen(n.wrapping_mul(0x2545_F491_4F6C_DD1D)));
            assert!(filter.len() <= CAPACITY);
        }
        assert_eq!(filter.len(), CAPACITY);
        assert_eq!(filter.memory_bytes(), bytes);
        // The newest are remembered, the older forgotten.
        let last = 10 * CAPACITY as u64 - 1;
        assert!(!filter.first_seen(last.wrapping_mul(0x2545_F491_4F6C_DD1D)));
        assert!(filter.first_seen(0));
    }

    #[test]
    fn colliding_fingerprints_stay_reachable() {
        // A table of 8 slots: runs of neighbours and runs that wrap past
        // the end are common, and every eviction moves some back.
        let mut filter = DuplicateFilter::with_capacity(4, 0);
        for round in 0..100u64 {
            for n in 0..4 {
                let f = round * 4 + n;
                assert!(filter.first_seen(f), "{f}");
                assert!(!filter.first_seen(f), "{f}");
            }
        }
    }

    /// The filter's model: the last `capacity` distinct fingerprints.
    struct Model {
        set: HashSet<u64>,
        order: VecDeque<u64>,
        capacity: usize,
    }

    impl Model {
        fn first_seen(&mut self, f: u64) -> bool {
            if self.set.contains(&f) {
                return false;
            }
            if self.order.len() == self.capacity {
                let old = self.order.pop_front().unwrap();
                self.set.remove(&old);
            }
            self.order.push_back(f);
            self.set.insert(f);
            true
        }
    }

    proptest! {
        #[test]
        fn matches_a_set_of_the_last_fingerprints(
            log_capacity in 0u32..6,
            seed: u64,
            // A small alphabet, so that repeats and evicted repeats are
            // common.
            fingerprints in proptest::collection::vec(0u64..96, 0..600),
        ) {
            let capacity = 1 << log_capacity;
            let mut filter = DuplicateFilter::with_capacity(capacity, seed);
            let bytes = filter.memory_bytes();
            let mut model = Model { set: HashSet::new(), order: VecDeque::new(), capacity };
            for f in fingerprints {
                prop_assert_eq!(filter.first_seen(f), model.first_seen(f), "{}", f);
                prop_assert_eq!(filter.len(), model.order.len());
                prop_assert!(filter.len() <= capacity);
            }
            prop_assert_eq!(filter.memory_bytes(), bytes);
        }
    }
}
