//! What the peer's decoder is guaranteed to hold: the encoder's side of the
//! safety protocol.
//!
//! Entries come only from the peer's `Ack` frames, which it sends after
//! appending a chunk to its store. They are keyed by the peer's cache
//! identity and epoch, and pruned by the store positions the peer reports
//! (FIFO eviction moves its low-water mark; a `Hello` bounds `low..high`).
//! The view can be saved to a file and loaded after a restart; loaded
//! entries are unusable until a `Hello` with the same identity and epoch
//! confirms them. A view opened from a file ([`PeerView::open`]) also
//! journals every change as it happens (`peer-view.journal.N` files beside
//! the snapshot; the format is in `journal.rs`), so a crash between
//! two saves loses nothing.

mod journal;

use std::collections::VecDeque;
use std::fs;
use std::io::{self, Write};
use std::path::Path;

use crate::control::{CacheId, Hello};
use crate::fingerprint::{Fingerprint, FINGERPRINT_LEN};
use crate::store::index::FingerprintMap;

/// The snapshot before it named a journal generation (read, not written).
const FILE_MAGIC_V1: [u8; 4] = *b"WOV1";
const FILE_MAGIC: [u8; 4] = *b"WOV2";

/// What [`PeerView::open`] found on disk.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ViewLoad {
    /// The snapshot was there but did not check out (a bad checksum, a
    /// cut or unknown file): nothing of it was used.
    pub snapshot_damaged: bool,
    /// Journaled changes replayed on the snapshot.
    pub journal_records: u64,
    /// Journal bytes after the last good record of their file (a write
    /// cut short by a power cut, or damage): those changes were lost.
    pub journal_dropped_bytes: u64,
}

/// The encoder's knowledge of the peer's cache.
#[derive(Debug)]
pub struct PeerView {
    peer: Option<(CacheId, u64)>,
    confirmed: bool,
    low_water: u64,
    positions: FingerprintMap<u64>,
    order: VecDeque<(Fingerprint, u64)>,
    max_entries: usize,
    /// Where changes are journaled (a view from [`PeerView::open`]).
    journal: Option<journal::Journal>,
    /// What [`PeerView::open`] found.
    loaded: ViewLoad,
}

impl PeerView {
    /// An empty view holding at most `max_entries` fingerprints.
    pub fn new(max_entries: usize) -> Self {
        PeerView {
            peer: None,
            confirmed: false,
            low_water: 0,
            positions: FingerprintMap::default(),
            order: VecDeque::new(),
            max_entries: max_entries.max(1),
            journal: None,
            loaded: ViewLoad::default(),
        }
    }

    /// The view saved at `path` ([`PeerView::save`]) with every change
    /// journaled since, replayed; later changes are journaled too. The
    /// result is unconfirmed, like [`PeerView::load`]'s.
    pub fn open(path: &Path, max_entries: usize) -> PeerView {
        let (mut view, snapshot) = Self::load_snapshot(path, max_entries);
        let existing = journal::generations(path);
        let from = match snapshot {
            Snapshot::Missing => 0,
            Snapshot::Damaged => {
                view.loaded.snapshot_damaged = true;
                0
            }
            Snapshot::Covers(mark) => mark,
            // Written by a node that did not journal: every journal file
            // left from before is older than it.
            Snapshot::Unjournaled => u64::MAX,
        };
        // Generations before the snapshot's mark are in it already.
        journal::remove_before(path, from);
        let mut next = if from == u64::MAX { 0 } else { from };
        for &generation in existing.iter().filter(|&&g| g >= from) {
            let (records, dropped) = journal::read(path, generation);
            view.loaded.journal_records += records.len() as u64;
            view.loaded.journal_dropped_bytes += dropped as u64;
            for record in records {
                view.replay(record);
            }
            next = generation + 1;
        }
        view.journal = Some(journal::Journal::create(path, next));
        if snapshot == Snapshot::Unjournaled {
            // Say which generations the snapshot covers before anything
            // is journaled: read as unjournaled again, it would have the
            // next open drop them. (Should this fail, a crash before the
            // first checkpoint loses the journal, not a byte.)
            let _ = Self::write(path, view.encode().as_deref());
        }
        view
    }

    /// What [`PeerView::open`] found on disk.
    pub fn loaded(&self) -> ViewLoad {
        self.loaded
    }

    /// Applies a journaled change.
    fn replay(&mut self, record: journal::Record) {
        match record {
            journal::Record::Hello(hello) => self.apply_hello(&hello),
            journal::Record::Ack { low_water, entries } => self.apply_ack(low_water, &entries),
            journal::Record::Forget(fp) => {
                self.positions.remove(&fp);
            }
        }
    }

    /// Starts the journal's next generation and returns it: a snapshot
    /// encoded now ([`PeerView::encode`]) covers everything before it.
    /// Once that snapshot is written, [`PeerView::snapshot_written`]
    /// deletes the older generations. `None`, and nothing to save, when
    /// the view has not changed since the last call (or since it was
    /// opened), and for a view without a journal.
    pub fn rotate_journal(&mut self) -> Option<u64> {
        let journal = self.journal.as_mut().filter(|j| j.is_dirty())?;
        let next = journal.generation() + 1;
        journal.start(next);
        Some(next)
    }

    /// The snapshot encoded after [`PeerView::rotate_journal`] returned
    /// `mark` is on disk: the journal generations before it are deleted.
    pub fn snapshot_written(path: &Path, mark: u64) {
        journal::remove_before(path, mark);
    }

    /// Deletes the snapshot at `path` and its journal.
    pub fn remove_files(path: &Path) {
        let _ = fs::remove_file(path);
        journal::remove_before(path, u64::MAX);
    }

    /// Journal appends that failed since the view was opened (a full or
    /// failing disk): a crash would lose those changes.
    pub fn journal_write_errors(&self) -> u64 {
        self.journal.as_ref().map_or(0, |j| j.write_errors)
    }

    /// The last of them.
    pub fn journal_last_error(&self) -> Option<&str> {
        self.journal.as_ref()?.last_error.as_deref()
    }

    /// True when the peer holds `fingerprint` (as far as we are told).
    pub fn holds(&self, fingerprint: &Fingerprint) -> bool {
        self.position(fingerprint).is_some()
    }

    /// The store position at which the peer holds `fingerprint`, when it
    /// does ([`PeerView::holds`]).
    pub fn position(&self, fingerprint: &Fingerprint) -> Option<u64> {
        let &pos = self.positions.get(fingerprint)?;
        (self.confirmed && pos >= self.low_water).then_some(pos)
    }

    /// Whether a `Hello` confirmed the view on this tunnel.
    pub fn is_confirmed(&self) -> bool {
        self.confirmed
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.positions.len()
    }

    /// True when empty.
    pub fn is_empty(&self) -> bool {
        self.positions.is_empty()
    }

    /// Apply the peer's `Hello`: keep what is still valid, forget the rest.
    pub fn handle_hello(&mut self, hello: &Hello) {
        self.apply_hello(hello);
        self.confirmed = true;
        if let Some(journal) = self.journal.as_mut() {
            journal.append(&journal::Record::Hello(*hello));
        }
    }

    /// [`PeerView::handle_hello`] without confirming the view.
    fn apply_hello(&mut self, hello: &Hello) {
        if self.peer != Some((hello.cache_id, hello.epoch)) {
            self.positions.clear();
            self.order.clear();
            self.peer = Some((hello.cache_id, hello.epoch));
        }
        self.low_water = hello.low;
        let (low, high) = (hello.low, hello.high);
        self.order.retain(|(_, pos)| (low..high).contains(pos));
        self.positions.retain(|_, pos| (low..high).contains(pos));
    }

    /// Forget that a tunnel was up (call when it goes down): nothing is
    /// referenced again before the next `Hello`.
    pub fn handle_tunnel_down(&mut self) {
        self.confirmed = false;
    }

    /// Apply an `Ack`.
    pub fn handle_ack(&mut self, low_water: u64, entries: &[(Fingerprint, u64)]) {
        if !self.confirmed {
            return;
        }
        self.apply_ack(low_water, entries);
        if let Some(journal) = self.journal.as_mut() {
            journal.append(&journal::Record::Ack {
                low_water,
                entries: entries.to_vec(),
            });
        }
    }

    /// [`PeerView::handle_ack`] on a view confirmed or not.
    fn apply_ack(&mut self, low_water: u64, entries: &[(Fingerprint, u64)]) {
        self.low_water = self.low_water.max(low_water);
        for &(fp, pos) in entries {
            if pos < self.low_water {
                continue;
            }
            self.positions.insert(fp, pos);
            self.order.push_back((fp, pos));
        }
        while self.order.len() > self.max_entries
            || self.order.front().is_some_and(|&(_, p)| p < self.low_water)
        {
            let Some((fp, pos)) = self.order.pop_front() else {
                break;
            };
            if self.positions.get(&fp) == Some(&pos) {
                self.positions.remove(&fp);
            }
        }
    }

    /// Forget that the peer holds `fingerprint`: it asked for the chunk,
    /// so its copy is gone (damaged on its disk, or never stored). A later
    /// `Ack` (once it stores the repair) puts it back.
    pub fn forget(&mut self, fingerprint: &Fingerprint) {
        // Its `order` entry stays behind and is skipped when it comes up:
        // pruning removes a position only when it is still the same one.
        self.positions.remove(fingerprint);
        if let Some(journal) = self.journal.as_mut() {
            journal.append(&journal::Record::Forget(*fingerprint));
        }
    }

    /// Save to `path` (atomically, via a temporary file).
    pub fn save(&self, path: &Path) -> io::Result<()> {
        Self::write(path, self.encode().as_deref())
    }

    /// Write what [`PeerView::encode`] returned to `path` (atomically: a
    /// temporary file synced, then renamed); `None` removes the file.
    pub fn write(path: &Path, bytes: Option<&[u8]>) -> io::Result<()> {
        let Some(bytes) = bytes else {
            let _ = fs::remove_file(path);
            return Ok(());
        };
        let tmp = path.with_extension("tmp");
        let mut file = crate::private::create_file(&tmp, true)?;
        file.write_all(bytes)?;
        file.sync_all()?;
        fs::rename(&tmp, path)
    }

    /// The file [`PeerView::save`] writes; `None` when there is no
    /// confirmed peer to describe. It names the journal's current
    /// generation as the first it does not cover: for a journaled view,
    /// start a new generation just before ([`PeerView::rotate_journal`],
    /// under the same lock), as [`crate::PeerCache::checkpoint`] does.
    pub fn encode(&self) -> Option<Vec<u8>> {
        let (id, epoch) = self.peer?;
        let mut bytes = Vec::with_capacity(48 + self.order.len() * 24);
        bytes.extend_from_slice(&FILE_MAGIC);
        bytes.extend_from_slice(&id.0);
        bytes.extend_from_slice(&epoch.to_be_bytes());
        bytes.extend_from_slice(&self.low_water.to_be_bytes());
        // The first journal generation this snapshot does not cover.
        let mark = self.journal.as_ref().map_or(0, |j| j.generation());
        bytes.extend_from_slice(&mark.to_be_bytes());
        for (fp, pos) in &self.order {
            if self.positions.get(fp) == Some(pos) {
                bytes.extend_from_slice(fp.as_bytes());
                bytes.extend_from_slice(&pos.to_be_bytes());
            }
        }
        let crc = crc32fast::hash(&bytes);
        bytes.extend_from_slice(&crc.to_be_bytes());
        Some(bytes)
    }

    /// Load a view saved by [`PeerView::save`] (not its journal); a
    /// missing or damaged file gives an empty view. The result is
    /// unconfirmed.
    pub fn load(path: &Path, max_entries: usize) -> PeerView {
        Self::load_snapshot(path, max_entries).0
    }

    /// [`PeerView::load`], and what the file says of the journal.
    fn load_snapshot(path: &Path, max_entries: usize) -> (PeerView, Snapshot) {
        let mut view = PeerView::new(max_entries);
        let Ok(bytes) = fs::read(path) else {
            return (view, Snapshot::Missing);
        };
        let parsed = (|| {
            let body_len = bytes.len().checked_sub(4)?;
            let (body, crc) = bytes.split_at(body_len);
            if crc32fast::hash(body) != u32::from_be_bytes(crc.try_into().ok()?) {
                return None;
            }
            let header = match body.get(..4)? {
                m if m == FILE_MAGIC => 44,
                m if m == FILE_MAGIC_V1 => 36,
                _ => return None,
            };
            if body.len() < header || !(body.len() - header).is_multiple_of(24) {
                return None;
            }
            let id = CacheId(body.get(4..20)?.try_into().ok()?);
            let epoch = u64::from_be_bytes(body.get(20..28)?.try_into().ok()?);
            let low = u64::from_be_bytes(body.get(28..36)?.try_into().ok()?);
            let mark = match body.get(36..header) {
                Some(m) if m.len() == 8 => Snapshot::Covers(u64::from_be_bytes(m.try_into().ok()?)),
                _ => Snapshot::Unjournaled,
            };
            let entries: Vec<_> = body[header..]
                .chunks_exact(FINGERPRINT_LEN + 8)
                .filter_map(|e| {
                    let fp = Fingerprint::from_slice(e)?;
                    let pos = u64::from_be_bytes(e[FINGERPRINT_LEN..].try_into().ok()?);
                    Some((fp, pos))
                })
                .collect();
            Some((id, epoch, low, mark, entries))
        })();
        let Some((id, epoch, low, mark, entries)) = parsed else {
            return (view, Snapshot::Damaged);
        };
        view.peer = Some((id, epoch));
        view.low_water = low;
        for (fp, pos) in entries.into_iter().rev().take(view.max_entries).rev() {
            view.positions.insert(fp, pos);
            view.order.push_back((fp, pos));
        }
        (view, mark)
    }
}

/// What a snapshot file says of the journal beside it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Snapshot {
    /// No file: every journal generation counts.
    Missing,
    /// A file that did not check out: every generation counts, on an
    /// empty view.
    Damaged,
    /// It covers the generations before this one.
    Covers(u64),
    /// A snapshot from before the journal (`WOV1`): it covers them all.
    Unjournaled,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hello(id: u8, epoch: u64, low: u64, high: u64) -> Hello {
        Hello {
            cache_id: CacheId([id; 16]),
            epoch,
            low,
            high,
        }
    }

    #[test]
    fn a_forgotten_chunk_is_not_held_until_acked_again() {
        let mut v = PeerView::new(3);
        v.handle_hello(&hello(1, 1, 0, 0));
        let (a, b) = (
            Fingerprint([1; FINGERPRINT_LEN]),
            Fingerprint([2; FINGERPRINT_LEN]),
        );
        v.handle_ack(0, &[(a, 10), (b, 11)]);
        v.forget(&a);
        assert!(!v.holds(&a) && v.holds(&b));
        v.handle_ack(0, &[(a, 12)]);
        assert_eq!(v.position(&a), Some(12));
        // The stale order entry of its first position is skipped when it
        // is pruned: the new position stays.
        let c = Fingerprint([3; FINGERPRINT_LEN]);
        v.handle_ack(0, &[(c, 13)]);
        assert_eq!(v.position(&a), Some(12));
        assert!(v.holds(&c));
    }

    #[test]
    fn nothing_before_hello_and_reset_on_new_identity() {
        let a = Fingerprint::of(b"a");
        let mut view = PeerView::new(100);
        view.handle_ack(0, &[(a, 5)]);
        assert!(!view.holds(&a), "acks before hello are ignored");
        view.handle_hello(&hello(1, 0, 0, 10));
        view.handle_ack(0, &[(a, 5)]);
        assert!(view.holds(&a));
        // Same identity, the peer lost its tail past 4.
        view.handle_hello(&hello(1, 0, 0, 4));
        assert!(!view.holds(&a));
        view.handle_ack(0, &[(a, 6)]);
        assert!(view.holds(&a));
        // Eviction moves the low-water mark.
        view.handle_ack(7, &[]);
        assert!(!view.holds(&a));
        view.handle_ack(7, &[(a, 9)]);
        // Wiped peer: new identity.
        view.handle_hello(&hello(2, 0, 0, 100));
        assert!(!view.holds(&a));
    }

    #[test]
    fn save_load_needs_matching_hello() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("peer-view");
        let a = Fingerprint::of(b"a");
        let mut view = PeerView::new(100);
        view.handle_hello(&hello(1, 3, 0, 10));
        view.handle_ack(0, &[(a, 5)]);
        view.save(&path).unwrap();
        let mut loaded = PeerView::load(&path, 100);
        assert!(!loaded.holds(&a));
        loaded.handle_hello(&hello(1, 3, 0, 50));
        assert!(loaded.holds(&a));
        let mut other = PeerView::load(&path, 100);
        other.handle_hello(&hello(1, 4, 0, 50));
        assert!(!other.holds(&a), "epoch changed");
        std::fs::write(&path, b"garbage").unwrap();
        assert!(PeerView::load(&path, 100).is_empty());
    }

    /// What [`crate::PeerCache::checkpoint`] does with the view; with
    /// `written` false the process dies before the snapshot is on disk.
    fn checkpoint(view: &mut PeerView, path: &Path, written: bool) {
        // Nothing changed since the last checkpoint: nothing to save.
        let Some(mark) = view.rotate_journal() else {
            return;
        };
        if written {
            PeerView::write(path, view.encode().as_deref()).unwrap();
            PeerView::snapshot_written(path, mark);
        }
    }

    #[test]
    fn a_crash_between_checkpoints_loses_no_acknowledgement() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("peer-view");
        let fp = |n: u8| Fingerprint([n; FINGERPRINT_LEN]);
        let mut view = PeerView::open(&path, 100);
        view.handle_hello(&hello(1, 2, 0, 0));
        view.handle_ack(0, &[(fp(1), 1), (fp(2), 2)]);
        checkpoint(&mut view, &path, true);
        view.handle_ack(0, &[(fp(3), 3), (fp(4), 4)]);
        view.forget(&fp(2));
        // Killed: no checkpoint, no save.
        drop(view);
        let mut view = PeerView::open(&path, 100);
        assert!(!view.holds(&fp(1)), "unconfirmed until the peer's hello");
        view.handle_hello(&hello(1, 2, 0, 10));
        for (n, held) in [(1, true), (2, false), (3, true), (4, true)] {
            assert_eq!(view.holds(&fp(n)), held, "chunk {n}");
        }
        // Killed again between the journal's rotation and the snapshot:
        // both generations replay on the old snapshot.
        view.handle_ack(0, &[(fp(5), 5)]);
        checkpoint(&mut view, &path, false);
        view.handle_ack(0, &[(fp(6), 6)]);
        drop(view);
        let mut view = PeerView::open(&path, 100);
        view.handle_hello(&hello(1, 2, 0, 10));
        assert!([1, 3, 4, 5, 6].iter().all(|&n| view.holds(&fp(n))));
        // A clean checkpoint leaves one generation, the one after it.
        checkpoint(&mut view, &path, true);
        assert_eq!(journal::generations(&path).len(), 1);
        // The journal does not outlive a wiped peer: a new identity in
        // the journal forgets everything before it, as the hello did.
        view.handle_hello(&hello(9, 0, 0, 0));
        view.handle_ack(0, &[(fp(7), 0)]);
        drop(view);
        let mut view = PeerView::open(&path, 100);
        view.handle_hello(&hello(9, 0, 0, 1));
        assert!(view.holds(&fp(7)) && !view.holds(&fp(1)));
        // The files go with remove_files.
        PeerView::remove_files(&path);
        assert!(PeerView::open(&path, 100).is_empty());
    }

    /// One step of [`a_journaled_view_survives_crashes_like_one_that_never_crashed`].
    #[derive(Debug, Clone)]
    enum Op {
        /// The peer stores chunks (fingerprints of a small set) at its
        /// next positions and acknowledges them.
        Store(Vec<u8>),
        /// The peer evicts its oldest positions and says so in an `Ack`.
        Evict(u64),
        /// The peer sends its `Hello` (a reconnect).
        Hello,
        /// The peer lost its tail in a crash: a new epoch, then its `Hello`.
        PeerTornTail(u64),
        /// The peer's cache was wiped: a new identity, then its `Hello`.
        PeerWiped,
        /// The peer asked for a chunk.
        Forget(u8),
        /// This node checkpoints, finishing or not before it dies.
        Checkpoint { written: bool },
        /// This node is killed and restarts; the peer says `Hello` again.
        Crash,
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            6 => proptest::collection::vec(0u8..8, 0..4).prop_map(Op::Store),
            1 => (1u64..4).prop_map(Op::Evict),
            1 => Just(Op::Hello),
            1 => (0u64..3).prop_map(Op::PeerTornTail),
            1 => Just(Op::PeerWiped),
            1 => (0u8..8).prop_map(Op::Forget),
            2 => any::<bool>().prop_map(|written| Op::Checkpoint { written }),
            2 => Just(Op::Crash),
        ]
    }

    use proptest::prelude::*;

    proptest! {
        /// Any sequence of what a peer does (stores, evicts, reconnects,
        /// loses its tail, is wiped, asks for a chunk) and of this node's
        /// checkpoints (finished or cut short) and crashes: after each
        /// step the journaled view holds exactly what a view that never
        /// crashed holds (a crash is followed by the peer's `Hello`, as
        /// on reconnect).
        #[test]
        fn a_journaled_view_survives_crashes_like_one_that_never_crashed(
            ops in proptest::collection::vec(op(), 1..60)
        ) {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("peer-view");
            let fp = |n: u8| Fingerprint([n; FINGERPRINT_LEN]);
            let mut view = PeerView::open(&path, 1000);
            let mut model = PeerView::new(1000);
            // The peer's store: identity, epoch, low..high.
            let (mut id, mut epoch, mut low, mut high) = (1u8, 0u64, 0u64, 0u64);
            let peer_hello = |id, epoch, low, high| hello(id, epoch, low, high);
            view.handle_hello(&peer_hello(id, epoch, low, high));
            model.handle_hello(&peer_hello(id, epoch, low, high));
            for op in ops {
                let mut say_hello = false;
                match op {
                    Op::Store(chunks) => {
                        let entries: Vec<_> = chunks
                            .iter()
                            .map(|&n| {
                                high += 1;
                                (fp(n), high - 1)
                            })
                            .collect();
                        view.handle_ack(low, &entries);
                        model.handle_ack(low, &entries);
                    }
                    Op::Evict(n) => {
                        low = (low + n).min(high);
                        view.handle_ack(low, &[]);
                        model.handle_ack(low, &[]);
                    }
                    Op::Hello => say_hello = true,
                    Op::PeerTornTail(lost) => {
                        epoch += 1;
                        high = high.saturating_sub(lost).max(low);
                        say_hello = true;
                    }
                    Op::PeerWiped => {
                        (id, epoch, low, high) = (id + 1, 0, 0, 0);
                        say_hello = true;
                    }
                    Op::Forget(n) => {
                        view.forget(&fp(n));
                        model.forget(&fp(n));
                    }
                    Op::Checkpoint { written } => checkpoint(&mut view, &path, written),
                    Op::Crash => {
                        drop(view);
                        view = PeerView::open(&path, 1000);
                        prop_assert!(!view.is_confirmed());
                        say_hello = true;
                    }
                }
                if say_hello {
                    view.handle_hello(&peer_hello(id, epoch, low, high));
                    model.handle_hello(&peer_hello(id, epoch, low, high));
                }
                for n in 0..8 {
                    prop_assert_eq!(view.position(&fp(n)), model.position(&fp(n)), "chunk {}", n);
                }
            }
        }
    }

    #[test]
    fn what_open_found_is_reported_and_an_unchanged_view_is_not_saved_again() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("peer-view");
        let a = Fingerprint([1; FINGERPRINT_LEN]);
        let mut view = PeerView::open(&path, 100);
        assert_eq!(view.loaded(), ViewLoad::default());
        assert_eq!(view.rotate_journal(), None, "nothing changed yet");
        view.handle_hello(&hello(1, 0, 0, 0));
        view.handle_ack(0, &[(a, 1)]);
        checkpoint(&mut view, &path, true);
        assert_eq!(view.rotate_journal(), None, "nothing changed since");
        view.handle_ack(0, &[(Fingerprint([2; FINGERPRINT_LEN]), 2)]);
        drop(view);
        // A torn tail on the journal: reported, the records before kept.
        let generation = *journal::generations(&path).last().unwrap();
        let file = dir.path().join(format!("peer-view.journal.{generation}"));
        let mut bytes = fs::read(&file).unwrap();
        bytes.extend_from_slice(&[0, 0, 0, 9, 2, 0]);
        fs::write(&file, &bytes).unwrap();
        let view = PeerView::open(&path, 100);
        assert_eq!(
            view.loaded(),
            ViewLoad {
                snapshot_damaged: false,
                journal_records: 1,
                journal_dropped_bytes: 6,
            }
        );
        drop(view);
        // A damaged snapshot: reported, nothing of it used.
        let mut snapshot = fs::read(&path).unwrap();
        snapshot[10] ^= 1;
        fs::write(&path, &snapshot).unwrap();
        let mut view = PeerView::open(&path, 100);
        assert!(view.loaded().snapshot_damaged);
        view.handle_hello(&hello(1, 0, 0, 10));
        assert!(!view.holds(&a));
    }

    #[test]
    fn a_snapshot_from_before_the_journal_is_read_and_stale_journals_are_not() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("peer-view");
        let fp = |n: u8| Fingerprint([n; FINGERPRINT_LEN]);
        // A journal left by a journaling node (fingerprint 9 at position
        // 9), then a node without a journal that saved a WOV1 snapshot.
        let mut journaled = PeerView::open(&path, 100);
        journaled.handle_hello(&hello(1, 0, 0, 0));
        journaled.handle_ack(0, &[(fp(9), 9)]);
        drop(journaled);
        let mut v1 = b"WOV1".to_vec();
        v1.extend_from_slice(&[1; 16]);
        v1.extend_from_slice(&0u64.to_be_bytes());
        v1.extend_from_slice(&0u64.to_be_bytes());
        v1.extend_from_slice(&[1; FINGERPRINT_LEN]);
        v1.extend_from_slice(&5u64.to_be_bytes());
        let crc = crc32fast::hash(&v1);
        v1.extend_from_slice(&crc.to_be_bytes());
        fs::write(&path, &v1).unwrap();
        let mut view = PeerView::open(&path, 100);
        view.handle_hello(&hello(1, 0, 0, 20));
        assert!(view.holds(&fp(1)), "the old snapshot is read");
        assert!(!view.holds(&fp(9)), "the journal before it is not");
        // Changes journaled after the upgrade survive a crash before the
        // first checkpoint.
        view.handle_ack(0, &[(fp(2), 10)]);
        drop(view);
        let mut view = PeerView::open(&path, 100);
        view.handle_hello(&hello(1, 0, 0, 20));
        assert!(view.holds(&fp(1)) && view.holds(&fp(2)) && !view.holds(&fp(9)));
    }

    #[test]
    fn bounded() {
        let mut view = PeerView::new(3);
        view.handle_hello(&hello(1, 0, 0, 0));
        for i in 0..10u64 {
            view.handle_ack(0, &[(Fingerprint::of(&i.to_be_bytes()), i)]);
        }
        assert_eq!(view.len(), 3);
        assert!(view.holds(&Fingerprint::of(&9u64.to_be_bytes())));
        assert!(!view.holds(&Fingerprint::of(&0u64.to_be_bytes())));
    }
}
