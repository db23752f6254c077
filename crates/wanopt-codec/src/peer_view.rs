//! What the peer's decoder is guaranteed to hold: the encoder's side of the
//! safety protocol.
//!
//! Entries come only from the peer's `Ack` frames, which it sends after
//! appending a chunk to its store. They are keyed by the peer's cache
//! identity and epoch, and pruned by the store positions the peer reports
//! (FIFO eviction moves its low-water mark; a `Hello` bounds `low..high`).
//! The view can be saved to a file and loaded after a restart; loaded
//! entries are unusable until a `Hello` with the same identity and epoch
//! confirms them.

use std::collections::VecDeque;
use std::fs;
use std::io::{self, Write};
use std::path::Path;

use crate::control::{CacheId, Hello};
use crate::fingerprint::{Fingerprint, FINGERPRINT_LEN};
use crate::store::index::FingerprintMap;

const FILE_MAGIC: [u8; 4] = *b"WOV1";

/// The encoder's knowledge of the peer's cache.
#[derive(Debug)]
pub struct PeerView {
    peer: Option<(CacheId, u64)>,
    confirmed: bool,
    low_water: u64,
    positions: FingerprintMap<u64>,
    order: VecDeque<(Fingerprint, u64)>,
    max_entries: usize,
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
        }
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
        if self.peer != Some((hello.cache_id, hello.epoch)) {
            self.positions.clear();
            self.order.clear();
            self.peer = Some((hello.cache_id, hello.epoch));
        }
        self.low_water = hello.low;
        let (low, high) = (hello.low, hello.high);
        self.order.retain(|(_, pos)| (low..high).contains(pos));
        self.positions.retain(|_, pos| (low..high).contains(pos));
        self.confirmed = true;
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
        let mut file = fs::File::create(&tmp)?;
        file.write_all(bytes)?;
        file.sync_all()?;
        fs::rename(&tmp, path)
    }

    /// The file [`PeerView::save`] writes; `None` when there is no
    /// confirmed peer to describe.
    pub fn encode(&self) -> Option<Vec<u8>> {
        let (id, epoch) = self.peer?;
        let mut bytes = Vec::with_capacity(40 + self.order.len() * 24);
        bytes.extend_from_slice(&FILE_MAGIC);
        bytes.extend_from_slice(&id.0);
        bytes.extend_from_slice(&epoch.to_be_bytes());
        bytes.extend_from_slice(&self.low_water.to_be_bytes());
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

    /// Load a view saved by [`PeerView::save`]; a missing or damaged file
    /// gives an empty view. The result is unconfirmed.
    pub fn load(path: &Path, max_entries: usize) -> PeerView {
        let mut view = PeerView::new(max_entries);
        let Ok(bytes) = fs::read(path) else {
            return view;
        };
        let parsed = (|| {
            let body_len = bytes.len().checked_sub(4)?;
            let (body, crc) = bytes.split_at(body_len);
            if crc32fast::hash(body) != u32::from_be_bytes(crc.try_into().ok()?) {
                return None;
            }
            if body.get(..4)? != FILE_MAGIC
                || body.len() < 36
                || !(body.len() - 36).is_multiple_of(24)
            {
                return None;
            }
            let id = CacheId(body.get(4..20)?.try_into().ok()?);
            let epoch = u64::from_be_bytes(body.get(20..28)?.try_into().ok()?);
            let low = u64::from_be_bytes(body.get(28..36)?.try_into().ok()?);
            let entries: Vec<_> = body[36..]
                .chunks_exact(FINGERPRINT_LEN + 8)
                .filter_map(|e| {
                    let fp = Fingerprint::from_slice(e)?;
                    let pos = u64::from_be_bytes(e[FINGERPRINT_LEN..].try_into().ok()?);
                    Some((fp, pos))
                })
                .collect();
            Some((id, epoch, low, entries))
        })();
        if let Some((id, epoch, low, entries)) = parsed {
            view.peer = Some((id, epoch));
            view.low_water = low;
            for (fp, pos) in entries.into_iter().rev().take(view.max_entries).rev() {
                view.positions.insert(fp, pos);
                view.order.push_back((fp, pos));
            }
        }
        view
    }
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
