//! Putting fragmented UDP datagrams together again, within fixed bounds.
//!
//! A tunnel's peer chooses how many fragments it sends and when, so the
//! receiver must not hold what it is sent without limit: at most
//! [`GROUPS_PER_FLOW`] incomplete datagrams per flow (the oldest goes
//! first), [`MAX_GROUPS`] in all, [`MAX_HELD_BYTES`] of fragments in all,
//! each for at most [`REASSEMBLY_TIMEOUT`] after its first fragment. A
//! datagram that loses a fragment is lost, as it would be on an IP path.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::time::{Duration, Instant};

use super::{FlowDatagram, Fragment, MAX_FRAGMENTS};

/// How long an incomplete datagram waits for its other fragments.
pub const REASSEMBLY_TIMEOUT: Duration = Duration::from_millis(500);
/// Incomplete datagrams held per flow.
pub const GROUPS_PER_FLOW: usize = 4;
/// Incomplete datagrams held in all.
pub const MAX_GROUPS: usize = 4096;
/// Fragment bytes held in all.
pub const MAX_HELD_BYTES: usize = 4 << 20;

/// What the reassembler did, since it was made.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReassemblyStats {
    /// Datagrams put together from their fragments.
    pub completed: u64,
    /// Incomplete datagrams dropped after [`REASSEMBLY_TIMEOUT`].
    pub expired: u64,
    /// Incomplete datagrams dropped to make room (per flow or in all).
    pub evicted: u64,
    /// Fragments that arrived again, or whose count disagreed with their
    /// datagram's first fragment, ignored.
    pub ignored: u64,
}

/// One incomplete datagram.
#[derive(Debug)]
struct Group {
    first_at: Instant,
    serial: u64,
    count: u8,
    pieces: [Option<Vec<u8>>; MAX_FRAGMENTS],
    have: u8,
    bytes: usize,
}

/// Key of an incomplete datagram: its flow and number.
type Key = (u64, u32);

/// Fragments held until their datagram is whole (sans-IO: the caller passes
/// the time).
#[derive(Debug, Default)]
pub struct Reassembler {
    groups: HashMap<Key, Group>,
    /// Incomplete datagrams by age: (first fragment's time, serial).
    order: BTreeMap<(Instant, u64), Key>,
    /// Each flow's incomplete datagrams, oldest first.
    per_flow: HashMap<u64, VecDeque<u32>>,
    held: usize,
    serial: u64,
    stats: ReassemblyStats,
}

impl Reassembler {
    /// An empty reassembler.
    pub fn new() -> Self {
        Self::default()
    }

    /// Takes one received frame: a whole datagram's payload comes back at
    /// once, a fragment's when it completes its datagram.
    pub fn handle<T: AsRef<[u8]>>(
        &mut self,
        now: Instant,
        datagram: &FlowDatagram<T>,
    ) -> Option<Vec<u8>> {
        self.expire(now);
        let Some(Fragment { index, count }) = datagram.fragment() else {
            return Some(datagram.payload().to_vec());
        };
        let key = (datagram.flow(), datagram.seq());
        let payload = datagram.payload();
        if !self.groups.contains_key(&key) {
            self.make_room(key.0, payload.len());
            self.serial += 1;
            self.groups.insert(
                key,
                Group {
                    first_at: now,
                    serial: self.serial,
                    count,
                    pieces: Default::default(),
                    have: 0,
                    bytes: 0,
                },
            );
            self.order.insert((now, self.serial), key);
            self.per_flow.entry(key.0).or_default().push_back(key.1);
        } else if self.held + payload.len() > MAX_HELD_BYTES {
            self.make_room(key.0, payload.len());
            if !self.groups.contains_key(&key) {
                // Its own datagram was the oldest and made the room.
                return None;
            }
        }
        let group = self.groups.get_mut(&key)?;
        let slot = &mut group.pieces[usize::from(index)];
        if group.count != count || slot.is_some() {
            self.stats.ignored += 1;
            return None;
        }
        *slot = Some(payload.to_vec());
        group.have += 1;
        group.bytes += payload.len();
        self.held += payload.len();
        if group.have < group.count {
            return None;
        }
        let group = self.remove(key)?;
        self.stats.completed += 1;
        let mut whole = Vec::with_capacity(group.bytes);
        for piece in group.pieces.into_iter().flatten() {
            whole.extend_from_slice(&piece);
        }
        Some(whole)
    }

    /// Drops the incomplete datagrams whose first fragment came
    /// [`REASSEMBLY_TIMEOUT`] or longer before `now`; returns how many.
    pub fn expire(&mut self, now: Instant) -> usize {
        let mut dropped = 0;
        while let Some((&(first_at, _), &key)) = self.order.first_key_value() {
            if now.saturating_duration_since(first_at) < REASSEMBLY_TIMEOUT {
                break;
            }
            self.remove(key);
            dropped += 1;
        }
        self.stats.expired += dropped as u64;
        dropped
    }

    /// Drops a flow's incomplete datagrams (the flow ended).
    pub fn forget_flow(&mut self, flow: u64) {
        if let Some(seqs) = self.per_flow.remove(&flow) {
            for seq in seqs {
                if let Some(group) = self.groups.remove(&(flow, seq)) {
                    self.order.remove(&(group.first_at, group.serial));
                    self.held -= group.bytes;
                }
            }
        }
    }

    /// Fragment bytes held now.
    pub fn held_bytes(&self) -> usize {
        self.held
    }

    /// Incomplete datagrams held now.
    pub fn incomplete(&self) -> usize {
        self.groups.len()
    }

    /// What it did so far.
    pub fn stats(&self) -> ReassemblyStats {
        self.stats
    }

    /// Evicts the oldest incomplete datagrams until `flow` may start one
    /// more and `bytes` more fit.
    fn make_room(&mut self, flow: u64, bytes: usize) {
        while self
            .per_flow
            .get(&flow)
            .is_some_and(|seqs| seqs.len() >= GROUPS_PER_FLOW)
        {
            let Some(oldest) = self.per_flow.get(&flow).and_then(|s| s.front().copied()) else {
                break;
            };
            self.remove((flow, oldest));
            self.stats.evicted += 1;
        }
        while self.groups.len() >= MAX_GROUPS || self.held + bytes > MAX_HELD_BYTES {
            let Some((_, &key)) = self.order.first_key_value() else {
                break;
            };
            self.remove(key);
            self.stats.evicted += 1;
        }
    }

    /// Removes one incomplete datagram from every index.
    fn remove(&mut self, key: Key) -> Option<Group> {
        let group = self.groups.remove(&key)?;
        self.order.remove(&(group.first_at, group.serial));
        self.held -= group.bytes;
        if let Some(seqs) = self.per_flow.get_mut(&key.0) {
            seqs.retain(|s| *s != key.1);
            if seqs.is_empty() {
                self.per_flow.remove(&key.0);
            }
        }
        Some(group)
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::super::split;
    use super::*;

    fn frames(flow: u64, seq: u32, payload: &[u8], frame: usize) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        split(flow, seq, payload, frame, &mut out).unwrap();
        out
    }

    fn feed(r: &mut Reassembler, now: Instant, frame: &[u8]) -> Option<Vec<u8>> {
        r.handle(now, &FlowDatagram::new_checked(frame).unwrap())
    }

    #[test]
    fn whole_datagrams_pass_and_fragments_wait_for_their_datagram() {
        let now = Instant::now();
        let mut r = Reassembler::new();
        assert_eq!(
            feed(&mut r, now, &frames(1, 0, b"hi", 100)[0]),
            Some(b"hi".to_vec())
        );
        let payload: Vec<u8> = (0..250u8).collect();
        let pieces = frames(1, 1, &payload, 106);
        assert_eq!(pieces.len(), 3);
        assert_eq!(feed(&mut r, now, &pieces[2]), None);
        assert_eq!(feed(&mut r, now, &pieces[2]), None, "a repeated fragment");
        assert_eq!(feed(&mut r, now, &pieces[0]), None);
        assert_eq!(r.held_bytes(), 50 + 100);
        assert_eq!(feed(&mut r, now, &pieces[1]), Some(payload));
        assert_eq!((r.held_bytes(), r.incomplete()), (0, 0));
        let stats = r.stats();
        assert_eq!((stats.completed, stats.ignored), (1, 1));
    }

    #[test]
    fn an_incomplete_datagram_expires() {
        let t0 = Instant::now();
        let mut r = Reassembler::new();
        let pieces = frames(3, 9, &[1; 300], 106);
        feed(&mut r, t0, &pieces[0]);
        assert_eq!(r.expire(t0 + REASSEMBLY_TIMEOUT / 2), 0);
        assert_eq!(r.expire(t0 + REASSEMBLY_TIMEOUT), 1);
        assert_eq!((r.held_bytes(), r.incomplete()), (0, 0));
        // Its late fragments start a new group that never completes.
        assert_eq!(feed(&mut r, t0 + REASSEMBLY_TIMEOUT, &pieces[1]), None);
        assert_eq!(feed(&mut r, t0 + REASSEMBLY_TIMEOUT, &pieces[2]), None);
        assert_eq!(r.stats().expired, 1);
    }

    #[test]
    fn a_flow_holds_at_most_four_incomplete_datagrams_and_a_mismatched_count_is_ignored() {
        let now = Instant::now();
        let mut r = Reassembler::new();
        for seq in 0..6 {
            feed(&mut r, now, &frames(2, seq, &[0; 300], 106)[0]);
        }
        assert_eq!(r.incomplete(), GROUPS_PER_FLOW);
        assert_eq!(r.stats().evicted, 2);
        // The oldest two went: seq 0 cannot complete, seq 5 can.
        for piece in &frames(2, 0, &[0; 300], 106)[1..] {
            assert_eq!(feed(&mut r, now, piece), None);
        }
        let mut last = None;
        for piece in &frames(2, 5, &[0; 300], 106)[1..] {
            last = feed(&mut r, now, piece);
        }
        assert_eq!(last, Some(vec![0; 300]));
        // The same seq cut into another count is not mixed in.
        let other = frames(7, 1, &[5; 300], 106);
        feed(&mut r, now, &other[0]);
        assert_eq!(feed(&mut r, now, &frames(7, 1, &[5; 300], 60)[1]), None);
        assert!(r.stats().ignored >= 1);
        r.forget_flow(7);
        r.forget_flow(2);
        assert_eq!((r.held_bytes(), r.incomplete()), (0, 0));
    }

    #[test]
    fn held_bytes_stay_bounded() {
        let now = Instant::now();
        let mut r = Reassembler::new();
        let piece = 1300;
        // Many flows, each one first fragment of a 16-piece datagram.
        for flow in 0..5000u64 {
            let first = frames(flow, 0, &vec![1; piece * 16], piece + 6 + 8)[0].clone();
            feed(&mut r, now, &first);
            assert!(r.held_bytes() <= MAX_HELD_BYTES);
            assert!(r.incomplete() <= MAX_GROUPS);
        }
        assert!(r.stats().evicted > 0);
    }

    proptest! {
        /// Fragments in any order, interleaved with other datagrams' and
        /// repeated, give back each datagram exactly once.
        #[test]
        fn split_then_reassemble_in_any_order(
            payloads in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..1500), 1..6),
            frame in 40usize..1400,
            shuffle: u64,
            repeat in 0usize..3,
        ) {
            let now = Instant::now();
            let mut all = Vec::new();
            let mut expected = Vec::new();
            for (seq, payload) in payloads.iter().enumerate() {
                let mut out = Vec::new();
                // A flow each: one flow's limit of four is tested above.
                if split(seq as u64, seq as u32, payload, frame, &mut out).is_ok() {
                    expected.push(payload.clone());
                    all.extend(out);
                }
            }
            for i in 0..repeat.min(all.len()) {
                all.push(all[i].clone());
            }
            // A seeded Fisher-Yates shuffle.
            let mut state = shuffle | 1;
            for i in (1..all.len()).rev() {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                all.swap(i, (state % (i as u64 + 1)) as usize);
            }
            let mut r = Reassembler::new();
            let mut got: Vec<Vec<u8>> = all.iter().filter_map(|f| feed(&mut r, now, f)).collect();
            // A repeated whole datagram comes out again (dropping copies is
            // the duplicate filter's job, not this one's).
            got.sort();
            got.dedup();
            let mut want = expected.clone();
            want.sort();
            want.dedup();
            prop_assert_eq!(got, want);
            // Only repeats of completed datagrams' fragments are left, and
            // they expire.
            r.expire(now + REASSEMBLY_TIMEOUT);
            prop_assert_eq!((r.held_bytes(), r.incomplete()), (0, 0));
        }
    }
}
