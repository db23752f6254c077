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
