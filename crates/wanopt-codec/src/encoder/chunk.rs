//! The choice for each chunk: a reference when the peer holds it (or was
//! sent it on this flow), else a delta against a chunk like it, else a
//! literal; and what is kept of a chunk once it is sent.

use crate::fingerprint::Fingerprint;
use crate::frame::DataRepr;

use super::state::Core;

/// Bytes of appends the local store must be able to take before it could
/// evict a referenced chunk for the encoder to rely on reading a repair
/// from it instead of keeping a copy: far more than a round trip's worth.
const REPAIR_MARGIN: u64 = 128 << 20;

impl Core {
    /// What a delta of `chunk` would be against: what followed the
    /// previous chunk when this stream last passed, or a stored chunk with
    /// the same first or last 64 bytes.
    pub(super) fn delta_base(&self, chunk: &[u8]) -> Option<Fingerprint> {
        let shared = self.cache.lock();
        self.cursor
            .and_then(|c| shared.store.successor(&c))
            .or_else(|| shared.store.similar(chunk))
    }

    /// Whether the peer holds the chunk (or was sent it in this flow).
    pub(super) fn peer_holds(&self, fingerprint: &Fingerprint) -> bool {
        self.flow_sent.contains_key(fingerprint)
            || self.cache.lock().peer.position(fingerprint).is_some()
    }

    pub(super) fn encode_chunk(&mut self, chunk: &[u8], out: &mut Vec<u8>) {
        let fingerprint = Fingerprint::of(chunk);
        self.stats.chunks += 1;
        // Where the peer holds it (for spans); a chunk first sent in this
        // flow may not be acknowledged yet, and is referred to on its own.
        let in_flow = self.flow_sent.contains_key(&fingerprint);
        let (position, held_locally) = {
            let shared = self.cache.lock();
            let position = if in_flow {
                None
            } else {
                shared.peer.position(&fingerprint)
            };
            let held = (in_flow || position.is_some())
                && shared.store.holds_for(&fingerprint, REPAIR_MARGIN);
            (position, held)
        };
        let peer_holds = in_flow || position.is_some();
        if self.pieces_sent > 0 {
            // Its start is out as pieces: the rest completes it, by
            // reference when the peer holds the chunk and there is a rest.
            let sent = self.pieces_sent.min(chunk.len());
            self.pieces_sent -= sent;
            if peer_holds && sent < chunk.len() {
                self.flush_pending(out);
                DataRepr::PieceRef {
                    fingerprint,
                    raw_len: chunk.len() as u32,
                }
                .emit(out);
                self.retain_reference(fingerprint, chunk, held_locally);
                self.stats.referenced_bytes -= sent as u64;
                return;
            }
            // Or a delta against a chunk like it (an upload of a file just
            // downloaded, behind its own request line).
            let base = (sent < chunk.len())
                .then(|| self.delta_base(chunk))
                .flatten();
            self.cursor = base;
            if !base.is_some_and(|base| self.try_delta(fingerprint, base, chunk, sent, out)) {
                if sent < chunk.len() && self.streams_next_literal() {
                    // The rest goes into the flow's stream with what
                    // follows (compressed alone, a response's first chunk
                    // behind its header cost up to 1.2% of the file).
                    self.flush_span(out);
                    self.flush_run(out);
                    self.run_rest = Some(chunk.len() as u32);
                    self.gather(fingerprint, &chunk[sent..], out);
                } else {
                    self.piece(chunk.len() as u32, &chunk[sent..], out);
                }
            }
            self.note_sent(fingerprint, chunk);
            return;
        }
        if peer_holds {
            self.flush_run(out);
            self.reference(fingerprint, chunk.len(), position, out);
            self.retain_reference(fingerprint, chunk, held_locally);
            return;
        }
        // What followed the previous chunk when this stream last passed:
        // likely the version of this chunk before an edit.
        // Or, at the start of a stream or after another literal, a stored
        // chunk with the same first or last 64 bytes.
        let base = self.delta_base(chunk);
        self.cursor = base;
        if !base.is_some_and(|base| self.try_delta(fingerprint, base, chunk, 0, out)) {
            self.literal(fingerprint, chunk, out);
        }
        self.note_sent(fingerprint, chunk);
    }

    /// After a reference to `chunk`: what a repair needs, and the cursor.
    pub(super) fn retain_reference(
        &mut self,
        fingerprint: Fingerprint,
        chunk: &[u8],
        held_locally: bool,
    ) {
        // A repair, should the peer need one, is read from the local
        // store when it holds the chunk far from eviction; only the
        // others are copied (a copy per chunk was a tenth of a warm
        // flow's encoding time).
        if !held_locally {
            self.retained
                .insert(fingerprint, chunk, self.config.retain_bytes);
        }
        self.stats.references += 1;
        self.stats.referenced_bytes += chunk.len() as u64;
        self.cursor = Some(fingerprint);
    }

    /// Keeps a chunk just sent in full (literal, delta or pieces) in the
    /// local store, to be named in the next `Sent`, and remembers it for
    /// the rest of the flow.
    pub(super) fn note_sent(&mut self, fingerprint: Fingerprint, chunk: &[u8]) {
        if self.config.store_sent {
            // The literal is in `out`, or in the run that goes out before
            // this call ends: the peer stores it on receipt;
            // our copy lets it reference the chunk back to us. Written with
            // the others of this call before the `Ack` (`emit_stored`).
            match self.cache.lock().store.insert_buffered(fingerprint, chunk) {
                Ok(position) => self.stored.push((fingerprint, position)),
                Err(_) => self.stats.store_errors += 1,
            }
        }
        if self.flow_sent.insert(fingerprint, ()).is_none() {
            self.flow_order.push_back(fingerprint);
            if self.flow_order.len() > self.config.max_flow_chunks {
                if let Some(old) = self.flow_order.pop_front() {
                    self.flow_sent.remove(&old);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::encoder::tests::{ack_in_order, frames, literals, noise, peers, references};
    use crate::{Compression, Encoder, EncoderConfig};

    /// Literals named, nothing stored locally: what crosses is what the
    /// peer's view alone decides.
    fn config() -> EncoderConfig {
        EncoderConfig {
            compression: Compression::Off,
            store_sent: false,
            ..EncoderConfig::default()
        }
    }

    fn send(encoder: &mut Encoder, data: &[u8]) -> Vec<u8> {
        let mut wire = Vec::new();
        encoder.push(data, &mut wire);
        encoder.finish(&mut wire);
        wire
    }

    #[test]
    fn a_chunk_sent_on_another_flow_is_referenced_only_once_the_peer_acknowledged_it() {
        let peers = peers();
        let data = noise(256 << 10, 1);
        let first = frames(&send(
            &mut Encoder::new(peers.local.clone(), config()).unwrap(),
            &data,
        ));
        let chunks: Vec<_> = literals(&first).map(|(_, name)| name.unwrap()).collect();
        assert!(chunks.len() > 4, "{} chunks", chunks.len());
        assert_eq!(references(&first), 0);

        // Another flow, before the peer's decoder acknowledged storing
        // them: they are sent again in full.
        let mut second = Encoder::new(peers.local.clone(), config()).unwrap();
        let before_ack = frames(&send(&mut second, &data));
        assert_eq!(references(&before_ack), 0, "{before_ack:?}");
        assert_eq!(literals(&before_ack).count(), chunks.len());

        // The peer's decoder stored them, one record after the other.
        let ack = ack_in_order(config().chunker, &data, &chunks);
        second.handle_peer(&ack, &mut Vec::new()).unwrap();

        let after_ack = frames(&send(
            &mut Encoder::new(peers.local.clone(), config()).unwrap(),
            &data,
        ));
        assert_eq!(literals(&after_ack).count(), 0, "{after_ack:?}");
        assert!(references(&after_ack) > 0);
        drop(peers.remote);
    }

    #[test]
    fn a_chunk_repeated_on_the_same_flow_is_a_reference_without_an_ack() {
        let peers = peers();
        let data = noise(256 << 10, 2);
        let mut encoder = Encoder::new(peers.local.clone(), config()).unwrap();
        let mut wire = Vec::new();
        encoder.push(&data, &mut wire);
        encoder.flush(&mut wire);
        let sent = literals(&frames(&wire)).count();
        let mut again = Vec::new();
        encoder.push(&data, &mut again);
        encoder.flush(&mut again);
        let again = frames(&again);
        assert_eq!(literals(&again).count(), 0, "{again:?}");
        assert_eq!(references(&again), sent);
    }
}
