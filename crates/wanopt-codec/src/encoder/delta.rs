//! Deltas: a chunk sent as its difference to a base chunk the peer holds,
//! when that beats the literal.

use crate::compress::{delta_compress, Codec};
use crate::fingerprint::Fingerprint;
use crate::frame::DataRepr;

use super::compression::Compression;
use super::state::Core;

impl Core {
    /// Send `chunk` as a delta against `base` if the peer holds `base` and
    /// the delta is smaller than the literal would be.
    /// `sent`: the chunk's first bytes already went as pieces (the delta
    /// then completes them, and must beat the rest sent alone).
    pub(super) fn try_delta(
        &mut self,
        fingerprint: Fingerprint,
        base: Fingerprint,
        chunk: &[u8],
        sent: usize,
        out: &mut Vec<u8>,
    ) -> bool {
        let level = match self.config.compression {
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
        let mut base_data = std::mem::take(&mut self.base_scratch);
        base_data.clear();
        let usable = {
            let mut shared = self.cache.lock();
            (self.flow_sent.contains_key(&base) || shared.peer.holds(&base))
                && shared.store.get(&base, &mut base_data).unwrap_or(false)
        };
        let mut delta = std::mem::take(&mut self.delta_scratch);
        let delta_len = if usable {
            delta_compress(chunk, &base_data, level, &mut delta)
        } else {
            None
        };
        self.base_scratch = base_data;
        let Some(delta_len) = delta_len else {
            self.delta_scratch = delta;
            return false;
        };
        // A delta frame carries 31 bytes more than a literal's header; it
        // must beat the literal. Tiny deltas need no comparison.
        let rest = &chunk[sent..];
        let worth = delta_len < rest.len() / 16 || {
            let alone = match self.compress(rest) {
                Codec::Raw => rest.len(),
                Codec::Lz4 | Codec::Zstd | Codec::Lzma | Codec::Ppmd => self.compressed_len,
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
                bytes: &delta[..delta_len],
                after_pieces: sent > 0,
            }
            .emit(out);
            // Kept for a repair: the peer asks for the chunk itself when
            // its copy of the base turns out damaged.
            self.retained
                .insert(fingerprint, chunk, self.config.retain_bytes);
            self.stats.deltas += 1;
            self.stats.delta_bytes += chunk.len() as u64;
        }
        self.delta_scratch = delta;
        worth
    }
}
