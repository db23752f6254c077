//! The choice for each chunk: a reference when the peer holds it (or was
//! sent it on this flow), else a delta against a chunk like it when that
//! beats the literal, else a literal; and what is kept of a chunk once it
//! is sent.

use crate::compress::Codec;
use crate::fingerprint::Fingerprint;
use crate::frame::DataRepr;

use super::compression::Compression;
use super::state::Core;

/// Bytes of appends the local store must be able to take before it could
/// evict a referenced chunk for the encoder to rely on reading a repair
/// from it instead of keeping a copy: far more than a round trip's worth.
const REPAIR_MARGIN: u64 = 128 << 20;

impl Core {
    /// Encode the chunk `chunk`, whose first `sent` bytes went out as
    /// pieces already.
    pub(super) fn encode_chunk(&mut self, chunk: &[u8], sent: usize, out: &mut Vec<u8>) {
        let fingerprint = Fingerprint::of(chunk);
        self.stats.chunks += 1;
        // Where the peer holds it (for spans); a chunk first sent in this
        // flow may not be acknowledged yet, and is referred to on its own.
        let holding = self.view.locate(&fingerprint, REPAIR_MARGIN);
        if sent > 0 {
            // Its start is out as pieces: the rest completes it, by
            // reference when the peer holds the chunk and there is a rest.
            if holding.peer && sent < chunk.len() {
                self.flush_pending(out);
                DataRepr::PieceRef {
                    fingerprint,
                    raw_len: chunk.len() as u32,
                }
                .emit(out);
                self.retain_reference(fingerprint, chunk, holding.local);
                self.stats.referenced_bytes -= sent as u64;
                return;
            }
            // Or a delta against a chunk like it (an upload of a file just
            // downloaded, behind its own request line).
            let base = (sent < chunk.len())
                .then(|| self.deltas.base_for(&self.view, chunk))
                .flatten();
            self.deltas.set_cursor(base);
            if !base.is_some_and(|base| self.try_delta(fingerprint, base, chunk, sent, out)) {
                if sent < chunk.len() && self.streams_next_literal() {
                    // The rest goes into the flow's stream with what
                    // follows (compressed alone, a response's first chunk
                    // behind its header cost up to 1.2% of the file).
                    self.flush_span(out);
                    self.flush_run(out);
                    self.run.begin_with_rest(chunk.len() as u32);
                    self.gather(fingerprint, &chunk[sent..], out);
                } else {
                    self.piece(chunk.len() as u32, &chunk[sent..], out);
                }
            }
            self.view.note_sent(fingerprint, chunk, &mut self.stats);
            return;
        }
        if holding.peer {
            self.flush_run(out);
            self.reference(fingerprint, chunk.len(), holding.position, out);
            self.retain_reference(fingerprint, chunk, holding.local);
            return;
        }
        // What followed the previous chunk when this stream last passed:
        // likely the version of this chunk before an edit.
        // Or, at the start of a stream or after another literal, a stored
        // chunk with the same first or last 64 bytes.
        let base = self.deltas.base_for(&self.view, chunk);
        self.deltas.set_cursor(base);
        if !base.is_some_and(|base| self.try_delta(fingerprint, base, chunk, 0, out)) {
            self.literal(fingerprint, chunk, out);
        }
        self.view.note_sent(fingerprint, chunk, &mut self.stats);
    }

    /// After a reference to `chunk`: what a repair needs, and the cursor.
    fn retain_reference(&mut self, fingerprint: Fingerprint, chunk: &[u8], held_locally: bool) {
        // A repair, should the peer need one, is read from the local
        // store when it holds the chunk far from eviction; only the
        // others are copied (a copy per chunk was a tenth of a warm
        // flow's encoding time).
        if !held_locally {
            self.retained.insert(fingerprint, chunk);
        }
        self.stats.references += 1;
        self.stats.referenced_bytes += chunk.len() as u64;
        self.deltas.set_cursor(Some(fingerprint));
    }

    /// Send `chunk` as a delta against `base` if the peer holds `base` and
    /// the delta is smaller than the literal would be.
    /// `sent`: the chunk's first bytes already went as pieces (the delta
    /// then completes them, and must beat the rest sent alone).
    fn try_delta(
        &mut self,
        fingerprint: Fingerprint,
        base: Fingerprint,
        chunk: &[u8],
        sent: usize,
        out: &mut Vec<u8>,
    ) -> bool {
        let level = match self.compressor.setting() {
            Compression::Off => return false,
            Compression::Lz4 => 1,
            other => other.zstd_level().unwrap_or(1),
        };
        if self.stream_holds(&base) {
            // The next run's compressor sees the base in its history and
            // everything else sent lately too: a delta (the base alone as
            // its dictionary) would cost more, and its own context.
            return false;
        }
        let Some(delta_len) = self.deltas.compute(&self.view, &base, chunk, level) else {
            return false;
        };
        // A delta frame carries 31 bytes more than a literal's header; it
        // must beat the literal. Tiny deltas need no comparison.
        let rest = &chunk[sent..];
        let worth = delta_len < rest.len() / 16 || {
            let alone = match self.compressor.compress(rest) {
                Codec::Raw => rest.len(),
                Codec::Lz4 | Codec::Zstd | Codec::Lzma | Codec::Ppmd => {
                    self.compressor.compressed().len()
                }
            };
            // In a stream run the chunk costs what the stream's runs cost
            // lately, often less than compressed alone: a delta against a
            // merely similar chunk gives up the stream's context for it.
            let in_stream = self
                .stream_ratio()
                .map_or(alone, |ratio| (ratio * rest.len() as f64).ceil() as usize);
            delta_len + 31 < alone.min(in_stream)
        };
        if worth {
            self.flush_pending(out);
            DataRepr::Delta {
                target: fingerprint,
                base,
                raw_len: chunk.len() as u32,
                bytes: self.deltas.delta(delta_len),
                after_pieces: sent > 0,
            }
            .emit(out);
            // Kept for a repair: the peer asks for the chunk itself when
            // its copy of the base turns out damaged.
            self.retained.insert(fingerprint, chunk);
            self.stats.deltas += 1;
            self.stats.delta_bytes += chunk.len() as u64;
        }
        worth
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
