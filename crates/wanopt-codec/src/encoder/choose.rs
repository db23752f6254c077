//! Compression choice per literal: compressed when that saves enough,
//! raw otherwise, with a backoff over incompressible data.

use crate::compress::{self, Codec, Framing, Role};

use super::compression::Compression;
use super::state::Core;

impl Core {
    /// Compress `chunk` into `scratch` when that pays; returns the codec.
    /// After a chunk that did not compress, the next 1, 2, 4 .. 16 chunks
    /// are sent raw without trying (incompressible streams stay fast).
    pub(super) fn compress(&mut self, chunk: &[u8]) -> Codec {
        let compression = self.config.compression;
        if compression == Compression::Off {
            return Codec::Raw;
        }
        if self.skip_compression > 0 {
            self.skip_compression -= 1;
            return Codec::Raw;
        }
        self.compress_now(chunk)
    }

    /// Compress `data` into `scratch` if that pays (whatever the backoff);
    /// a failure starts or doubles the backoff.
    pub(super) fn compress_now(&mut self, chunk: &[u8]) -> Codec {
        let compression = self.config.compression;
        let limit = chunk.len() - chunk.len() * usize::from(self.config.min_saving_percent) / 100;
        let packed = match compression {
            Compression::Off => None,
            Compression::Lz4 => self
                .compress_block(Codec::Lz4, 0, chunk)
                .map(|n| (n, Codec::Lz4)),
            other => other
                .zstd_level()
                .and_then(|level| self.compress_block(Codec::Zstd, level, chunk))
                .map(|n| (n, Codec::Zstd)),
        };
        match packed {
            Some((n, codec)) if n > 0 && n <= limit => {
                self.compressed_len = n;
                self.compress_backoff = 0;
                codec
            }
            _ => {
                self.compress_backoff = (self.compress_backoff * 2).clamp(1, 16);
                self.skip_compression = self.compress_backoff;
                Codec::Raw
            }
        }
    }

    /// Compress `chunk` into `scratch` with the block engine of `codec`
    /// at `level` (made anew when the setting changed).
    pub(super) fn compress_block(
        &mut self,
        codec: Codec,
        level: i32,
        chunk: &[u8],
    ) -> Option<usize> {
        if self
            .block
            .as_ref()
            .is_none_or(|(c, l, _)| (*c, *l) != (codec, level))
        {
            let engine = compress::engine(codec, Framing::Block, Role::Compress { level }).ok()?;
            self.block = Some((codec, level, engine));
        }
        let (_, _, engine) = self.block.as_mut()?;
        engine.compress(chunk, &mut self.scratch).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::encoder::tests::{frames, literals, noise, peers, text};
    use crate::{Encoder, EncoderConfig};

    fn core(compression: Compression) -> (crate::encoder::tests::Peers, Core) {
        let peers = peers();
        let config = EncoderConfig {
            compression,
            ..EncoderConfig::default()
        };
        let core = Core::new(peers.local.clone(), config);
        (peers, core)
    }

    #[test]
    fn a_literal_that_does_not_compress_is_sent_raw() {
        for compression in [Compression::Lz4, Compression::ZSTD] {
            let (_peers, mut core) = core(compression);
            assert_eq!(core.compress(&noise(16 << 10, 3)), Codec::Raw);
        }
        let (_peers, mut core) = core(Compression::Off);
        assert_eq!(core.compress(&text(16 << 10, 3)), Codec::Raw);

        // On the wire: raw literals.
        let peers = peers();
        let mut encoder = Encoder::new(peers.local.clone(), EncoderConfig::default()).unwrap();
        let mut wire = Vec::new();
        encoder.push(&noise(256 << 10, 9), &mut wire);
        encoder.finish(&mut wire);
        let sent: Vec<_> = literals(&frames(&wire)).collect();
        assert!(sent.len() > 4);
        assert!(
            sent.iter().all(|&(codec, _)| codec == Codec::Raw),
            "{sent:?}"
        );
    }

    #[test]
    fn a_literal_that_compresses_is_sent_compressed_with_its_setting() {
        let chunk = text(16 << 10, 4);
        for (compression, codec) in [
            (Compression::Lz4, Codec::Lz4),
            (Compression::ZSTD, Codec::Zstd),
            (Compression::Lzma { preset: 6 }, Codec::Zstd),
        ] {
            let (_peers, mut core) = core(compression);
            assert_eq!(core.compress(&chunk), codec, "{compression:?}");
            let payload = core.payload(codec, &chunk);
            assert!(payload.bytes.len() < chunk.len() / 2);
            let mut decoded = Vec::new();
            payload.decode_into(&mut decoded).unwrap();
            assert_eq!(decoded, chunk);
        }
    }

    #[test]
    fn after_a_literal_that_does_not_compress_the_next_are_sent_raw_untried() {
        let (_peers, mut core) = core(Compression::Lz4);
        let chunk = text(16 << 10, 5);
        assert_eq!(core.compress(&noise(16 << 10, 5)), Codec::Raw);
        // Backoff 1: one chunk raw without trying, then tried again.
        assert_eq!(core.compress(&chunk), Codec::Raw);
        assert_eq!(core.compress(&chunk), Codec::Lz4);
        // Twice in a row doubles it (1, then 2).
        assert_eq!(core.compress(&noise(16 << 10, 6)), Codec::Raw);
        assert_eq!(core.compress(&chunk), Codec::Raw);
        assert_eq!(core.compress(&noise(16 << 10, 7)), Codec::Raw);
        assert_eq!(core.compress(&chunk), Codec::Raw);
        assert_eq!(core.compress(&chunk), Codec::Raw);
        assert_eq!(core.compress(&chunk), Codec::Lz4);
    }
}
