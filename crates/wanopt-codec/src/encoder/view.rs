//! The flow's view of what the peer holds: the peer's cache (its view of
//! the peer's store, shared by the flows with that peer, and the local
//! store) and the chunks sent in full on this flow, which the peer stores
//! before it reads the next frame. What this flow sent and kept in the
//! local store is told to the peer (`Sent`), so that it may refer to it
//! back.

use std::collections::VecDeque;

use crate::cache::PeerCache;
use crate::control::{sent_entries, ControlRepr};
use crate::fingerprint::Fingerprint;
use crate::stats::EncoderStats;
use crate::store::index::FingerprintMap;

use super::config::EncoderConfig;

/// Where a chunk is held, as the flow sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Holding {
    /// The peer holds it: it acknowledged storing it, or it was sent in
    /// full on this flow.
    pub(super) peer: bool,
    /// Where in the peer's store, for spans: when acknowledged, and not
    /// sent on this flow (such a chunk may not be acknowledged yet, and is
    /// referred to on its own).
    pub(super) position: Option<u64>,
    /// The peer holds it and the local store too, far enough from
    /// eviction to read a repair from.
    pub(super) local: bool,
}

/// The flow's view of what the peer holds.
#[derive(Debug)]
pub(super) struct FlowView {
    cache: PeerCache,
    /// The chunks sent in full on this flow, and their order (the oldest
    /// forgotten first beyond `max_sent`).
    sent: FingerprintMap<()>,
    sent_order: VecDeque<Fingerprint>,
    max_sent: usize,
    /// Keep the chunks sent in full in the local store, and tell the peer.
    store_sent: bool,
    /// Those stored since the last `Sent`, at their local store positions.
    stored: Vec<(Fingerprint, u64)>,
}

impl FlowView {
    /// The view of a new flow to the peer of `cache`.
    pub(super) fn new(cache: PeerCache, config: &EncoderConfig) -> Self {
        FlowView {
            cache,
            sent: FingerprintMap::default(),
            sent_order: VecDeque::new(),
            max_sent: config.max_flow_chunks,
            store_sent: config.store_sent,
            stored: Vec::new(),
        }
    }

    /// Whether the peer holds the chunk (or was sent it in this flow).
    pub(super) fn peer_holds(&self, fingerprint: &Fingerprint) -> bool {
        self.sent.contains_key(fingerprint)
            || self.cache.lock().peer.position(fingerprint).is_some()
    }

    /// Where the chunk is held; locally only if the store could take
    /// `margin` bytes of appends before it might evict it.
    pub(super) fn locate(&self, fingerprint: &Fingerprint, margin: u64) -> Holding {
        let in_flow = self.sent.contains_key(fingerprint);
        let shared = self.cache.lock();
        let position = if in_flow {
            None
        } else {
            shared.peer.position(fingerprint)
        };
        let peer = in_flow || position.is_some();
        Holding {
            peer,
            position,
            local: peer && shared.store.holds_for(fingerprint, margin),
        }
    }

    /// A base for a delta of `chunk`: the chunk stored after `after`
    /// when the stream last passed, or a stored chunk with the same first
    /// or last 64 bytes.
    pub(super) fn delta_base(
        &self,
        after: Option<Fingerprint>,
        chunk: &[u8],
    ) -> Option<Fingerprint> {
        let shared = self.cache.lock();
        after
            .and_then(|c| shared.store.successor(&c))
            .or_else(|| shared.store.similar(chunk))
    }

    /// Read `base` from the local store into `out` (verified) if the peer
    /// holds it too, so a delta against it can be sent.
    pub(super) fn read_base(&self, base: &Fingerprint, out: &mut Vec<u8>) -> bool {
        let mut shared = self.cache.lock();
        (self.sent.contains_key(base) || shared.peer.holds(base))
            && shared.store.get(base, out).unwrap_or(false)
    }

    /// Read the chunk from the local store into `out` (verified).
    pub(super) fn read_local(&self, fingerprint: &Fingerprint, out: &mut Vec<u8>) -> bool {
        matches!(self.cache.lock().store.get(fingerprint, out), Ok(true))
    }

    /// The peer lacks the chunk: no later flow may refer to it until the
    /// peer acknowledges storing it again.
    pub(super) fn forget(&self, fingerprint: &Fingerprint) {
        self.cache.lock().peer.forget(fingerprint);
    }

    /// The peer acknowledged storing `entries`.
    pub(super) fn handle_ack(&self, low_water: u64, entries: &[(Fingerprint, u64)]) {
        self.cache.lock().peer.handle_ack(low_water, entries);
    }

    /// Keeps a chunk just sent in full (literal, delta or pieces) in the
    /// local store, to be named in the next `Sent`, and remembers it for
    /// the rest of the flow.
    pub(super) fn note_sent(
        &mut self,
        fingerprint: Fingerprint,
        chunk: &[u8],
        stats: &mut EncoderStats,
    ) {
        if self.store_sent {
            // The literal is in `out`, or in the run that goes out before
            // this call ends: the peer stores it on receipt;
            // our copy lets it reference the chunk back to us. Written with
            // the others of this call before the `Ack` (`emit_sent`).
            match self.cache.lock().store.insert_buffered(fingerprint, chunk) {
                Ok(position) => self.stored.push((fingerprint, position)),
                Err(_) => stats.store_errors += 1,
            }
        }
        if self.sent.insert(fingerprint, ()).is_none() {
            self.sent_order.push_back(fingerprint);
            if self.sent_order.len() > self.max_sent {
                if let Some(old) = self.sent_order.pop_front() {
                    self.sent.remove(&old);
                }
            }
        }
    }

    /// Write the literals stored since the last call to the store's file
    /// (one write) and tell the peer which we hold (one `Sent`: the peer
    /// has just decoded them, a fingerprint prefix names each).
    pub(super) fn emit_sent(&mut self, out: &mut Vec<u8>, stats: &mut EncoderStats) {
        if self.stored.is_empty() {
            return;
        }
        let low_water = {
            let mut shared = self.cache.lock();
            // Announce only what is written and still indexed where we
            // stored it.
            if shared.store.flush_announced(&mut self.stored).is_err() {
                stats.store_errors += 1;
            }
            shared.store.low()
        };
        if self.stored.is_empty() {
            return;
        }
        ControlRepr::Sent {
            low_water,
            entries: sent_entries(&self.stored),
        }
        .emit(out);
        self.stored.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::encoder::tests::peers;
    use crate::frame::Frame;

    fn config(max_flow_chunks: usize, store_sent: bool) -> EncoderConfig {
        EncoderConfig {
            max_flow_chunks,
            store_sent,
            ..EncoderConfig::default()
        }
    }

    #[test]
    fn the_flow_remembers_its_latest_chunks_and_the_acknowledged_ones() {
        let peers = peers();
        let mut view = FlowView::new(peers.local.clone(), &config(2, false));
        let mut stats = EncoderStats::default();
        let chunks: Vec<_> = (0..3u8).map(|n| Fingerprint::of(&[n])).collect();
        for (n, fp) in chunks.iter().enumerate() {
            view.note_sent(*fp, &[n as u8], &mut stats);
        }
        // The oldest of three was forgotten; sent on the flow, no position.
        assert!(!view.peer_holds(&chunks[0]));
        assert!(view.peer_holds(&chunks[1]) && view.peer_holds(&chunks[2]));
        let in_flow = view.locate(&chunks[2], 0);
        assert_eq!((in_flow.peer, in_flow.position), (true, None));
        // Nothing was kept locally.
        assert!(!in_flow.local);
        let mut out = Vec::new();
        view.emit_sent(&mut out, &mut stats);
        assert!(out.is_empty());

        // Acknowledged by the peer: held, at its position.
        view.handle_ack(0, &[(chunks[0], 40)]);
        assert_eq!(view.locate(&chunks[0], 0).position, Some(40));
        view.forget(&chunks[0]);
        assert!(!view.peer_holds(&chunks[0]));
    }

    #[test]
    fn the_chunks_sent_are_kept_locally_and_told_to_the_peer_once() {
        let peers = peers();
        let mut view = FlowView::new(peers.local.clone(), &config(16, true));
        let mut stats = EncoderStats::default();
        let chunk = b"a chunk sent in full";
        let fp = Fingerprint::of(chunk);
        view.note_sent(fp, chunk, &mut stats);
        let mut out = Vec::new();
        view.emit_sent(&mut out, &mut stats);
        let frame = Frame::new_checked(&out[..]).unwrap();
        let Some(ControlRepr::Sent { entries, .. }) = ControlRepr::parse(&frame).unwrap() else {
            panic!("not a Sent: {out:?}");
        };
        assert_eq!(entries.len(), 1);
        let len = out.len();
        view.emit_sent(&mut out, &mut stats);
        assert_eq!(out.len(), len);
        // Kept locally: a delta base (the peer holds it) and a repair.
        let mut read = Vec::new();
        assert!(view.read_base(&fp, &mut read));
        assert_eq!(read, chunk);
        read.clear();
        assert!(view.read_local(&fp, &mut read));
        assert!(view.locate(&fp, 0).local);
        assert_eq!(stats.store_errors, 0);
    }
}
