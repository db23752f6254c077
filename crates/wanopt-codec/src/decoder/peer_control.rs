//! Control frames exchanged with the peer. To the peer's encoder: `Ack`s
//! of the chunks stored, asks (`NeedChunk`, `NeedSpan`) and `Done`. From
//! the peer, for the local encoder: its decoder's frames, and its
//! encoder's `Sent`, named from the chunks decoded last.

use std::collections::VecDeque;

use crate::cache::PeerCache;
use crate::control::{ControlRepr, RecentChunks, MAX_ACK_ENTRIES};
use crate::fingerprint::Fingerprint;
use crate::stats::DecoderStats;

use super::error::DecodeError;

/// Control frames for the peer's encoder, waiting to be polled.
#[derive(Debug, Default)]
pub(super) struct ToPeer {
    /// Chunks stored since the last `Ack`, at their store positions.
    acks: Vec<(Fingerprint, u64)>,
    /// Asks and `Done`, in order.
    queue: VecDeque<ControlRepr>,
}

impl ToPeer {
    /// The chunk `fingerprint` was stored (buffered) at `position`: the
    /// next `Ack` names it.
    pub(super) fn stored(&mut self, fingerprint: Fingerprint, position: u64) {
        self.acks.push((fingerprint, position));
    }

    /// Queue `control` (an ask, or `Done`).
    pub(super) fn push(&mut self, control: ControlRepr) {
        self.queue.push_back(control);
    }

    /// The next frame: first an `Ack` of what was stored (written to the
    /// store's file first; what the store no longer indexes where it was
    /// stored is left out), then the others in order.
    pub(super) fn poll(
        &mut self,
        cache: &PeerCache,
        stats: &mut DecoderStats,
    ) -> Option<ControlRepr> {
        if !self.acks.is_empty() {
            let low_water = {
                let mut shared = cache.lock();
                // The literals stored since the last Ack reach the file
                // (one write) before the peer hears we hold them.
                if shared.store.flush_announced(&mut self.acks).is_err() {
                    stats.store_errors += 1;
                }
                shared.store.low()
            };
            if !self.acks.is_empty() {
                let take = self.acks.len().min(MAX_ACK_ENTRIES);
                let entries: Vec<_> = self.acks.drain(..take).collect();
                return Some(ControlRepr::Ack { low_water, entries });
            }
        }
        self.queue.pop_front()
    }
}

/// Control frames from the peer for the local encoder, bounded.
#[derive(Debug)]
pub(super) struct FromPeer {
    queue: VecDeque<ControlRepr>,
    /// Bound on the frames waiting.
    limit: usize,
    /// The chunks decoded last, for the peer's `Sent` frames.
    recent: RecentChunks,
}

impl FromPeer {
    /// No frames yet; at most `limit` wait.
    pub(super) fn new(limit: usize) -> Self {
        FromPeer {
            queue: VecDeque::new(),
            limit,
            recent: RecentChunks::default(),
        }
    }

    /// The chunk `fingerprint` was decoded: a `Sent` may name it.
    pub(super) fn decoded(&mut self, fingerprint: Fingerprint) {
        self.recent.push(fingerprint);
    }

    /// Queue `control` for the local encoder. The peer's encoder's `Sent`
    /// (it stored what it just sent) becomes the `Ack` of the chunks it
    /// names; entries that name none are dropped and counted.
    pub(super) fn push(
        &mut self,
        control: ControlRepr,
        stats: &mut DecoderStats,
    ) -> Result<(), DecodeError> {
        if self.queue.len() >= self.limit {
            return Err(DecodeError::ControlOverflow);
        }
        let control = match control {
            ControlRepr::Sent { low_water, entries } => {
                let (entries, dropped) = self.recent.resolve(&entries);
                stats.sent_unresolved += dropped as u64;
                ControlRepr::Ack { low_water, entries }
            }
            other => other,
        };
        self.queue.push_back(control);
        Ok(())
    }

    /// The next frame for the local encoder.
    pub(super) fn poll(&mut self) -> Option<ControlRepr> {
        self.queue.pop_front()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cache::CacheConfig;
    use crate::control::{sent_entries, CacheId};

    #[test]
    fn acks_of_what_was_stored_go_first_in_batches_then_the_rest_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let cache = PeerCache::open(dir.path(), CacheConfig::default(), CacheId([1; 16])).unwrap();
        let mut stats = DecoderStats::default();
        let mut to_peer = ToPeer::default();
        let need = ControlRepr::NeedChunk {
            fingerprint: Fingerprint::of(b"lost"),
        };
        to_peer.push(need.clone());
        to_peer.push(ControlRepr::Done);
        let mut stored = Vec::new();
        for n in 0..MAX_ACK_ENTRIES as u32 + 1 {
            let chunk = n.to_be_bytes();
            let fingerprint = Fingerprint::of(&chunk);
            let position = cache
                .lock()
                .store
                .insert_buffered(fingerprint, &chunk)
                .unwrap();
            to_peer.stored(fingerprint, position);
            stored.push((fingerprint, position));
        }
        let mut acked = Vec::new();
        for batch in [MAX_ACK_ENTRIES, 1] {
            match to_peer.poll(&cache, &mut stats) {
                Some(ControlRepr::Ack { entries, .. }) => {
                    assert_eq!(entries.len(), batch);
                    acked.extend(entries);
                }
                other => panic!("{other:?}"),
            }
        }
        assert_eq!(acked, stored);
        assert_eq!(to_peer.poll(&cache, &mut stats), Some(need));
        assert_eq!(to_peer.poll(&cache, &mut stats), Some(ControlRepr::Done));
        assert_eq!(to_peer.poll(&cache, &mut stats), None);
        assert_eq!(stats.store_errors, 0);
    }

    #[test]
    fn a_sent_becomes_the_ack_of_the_chunks_decoded_and_the_queue_is_bounded() {
        let mut stats = DecoderStats::default();
        let mut from_peer = FromPeer::new(2);
        let known = Fingerprint::of(b"decoded");
        from_peer.decoded(known);
        let unknown = Fingerprint::of(b"never decoded");
        let entries = sent_entries(&[(known, 10), (unknown, 20)]);
        from_peer
            .push(
                ControlRepr::Sent {
                    low_water: 5,
                    entries,
                },
                &mut stats,
            )
            .unwrap();
        from_peer.push(ControlRepr::Done, &mut stats).unwrap();
        assert_eq!(
            from_peer.push(ControlRepr::Done, &mut stats),
            Err(DecodeError::ControlOverflow)
        );
        assert_eq!(stats.sent_unresolved, 1);
        assert_eq!(
            from_peer.poll(),
            Some(ControlRepr::Ack {
                low_water: 5,
                entries: vec![(known, 10)],
            })
        );
        assert_eq!(from_peer.poll(), Some(ControlRepr::Done));
        assert_eq!(from_peer.poll(), None);
    }
}
