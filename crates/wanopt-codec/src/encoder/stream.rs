//! The flow's compression stream (`StreamRun` frames): its engine, the
//! chunks in its window, and the engine [`Compression::Max`] picks per run.

use std::collections::VecDeque;

use crate::compress::{stream_engine, Codec, Engine, Role, STREAM_WINDOW_LOG};
use crate::fingerprint::Fingerprint;
use crate::store::index::FingerprintMap;

use super::compression::{text_share, Compression, PPMD_KEEP_SHARE, PPMD_TEXT_SHARE};

/// The compressing side of a flow's stream (`StreamRun` frames).
pub(super) struct LiteralStream {
    /// The setting the stream was started for (zstd, LZMA2 or both LZMA2
    /// and PPMd).
    compression: Compression,
    engine: Box<dyn Engine>,
    /// The next run starts the stream (anew).
    fresh: bool,
    /// Bytes through the stream since it started.
    fed: u64,
    /// The chunks in the compressor's window: where each starts in the
    /// stream, oldest first, and by fingerprint.
    window: VecDeque<(Fingerprint, u64)>,
    in_window: FingerprintMap<u64>,
    /// Compressed over raw bytes of the stream's last run, since it
    /// started: what a chunk is likely to cost in the next run.
    ratio: Option<f64>,
}

impl std::fmt::Debug for LiteralStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LiteralStream")
            .field("compression", &self.compression)
            .field("fresh", &self.fresh)
            .finish_non_exhaustive()
    }
}

impl LiteralStream {
    /// A stream for `compression` whose first run is `first`.
    pub(super) fn new(compression: Compression, first: &[u8]) -> Option<Self> {
        let engine = match compression {
            Compression::Zstd { level } => Self::engine(Codec::Zstd, level)?,
            Compression::Lzma { preset } => Self::lzma(preset)?,
            Compression::Max { preset } => match text_share(first) >= PPMD_TEXT_SHARE {
                true => Self::engine(Codec::Ppmd, 0)?,
                false => Self::lzma(preset)?,
            },
            Compression::Off | Compression::Lz4 => return None,
        };
        Some(LiteralStream {
            compression,
            engine,
            fresh: true,
            fed: 0,
            window: VecDeque::new(),
            in_window: FingerprintMap::default(),
            ratio: None,
        })
    }

    fn engine(codec: Codec, level: i32) -> Option<Box<dyn Engine>> {
        stream_engine(codec, Role::Compress { level }).ok()
    }

    fn lzma(preset: u32) -> Option<Box<dyn Engine>> {
        Self::engine(Codec::Lzma, i32::try_from(preset).ok()?)
    }

    /// The setting the stream was started for.
    pub(super) fn compression(&self) -> Compression {
        self.compression
    }

    /// Whether the next run starts the stream (anew).
    pub(super) fn is_fresh(&self) -> bool {
        self.fresh
    }

    /// Compressed over raw bytes of the stream's last run since it
    /// started (`None` before one): what a chunk is likely to cost in the
    /// next run.
    pub(super) fn ratio(&self) -> Option<f64> {
        self.ratio
    }

    /// A run of `raw_len` bytes, the chunks (fingerprint, length) `chunks`,
    /// went out compressed to `compressed_len` bytes: the stream goes on.
    pub(super) fn sent(
        &mut self,
        compressed_len: usize,
        raw_len: usize,
        chunks: impl Iterator<Item = (Fingerprint, usize)>,
    ) {
        self.fresh = false;
        self.ratio = Some(compressed_len as f64 / raw_len as f64);
        self.fed(chunks);
    }

    /// Bytes the compression context holds.
    pub(super) fn context_bytes(&self) -> usize {
        self.engine.state_bytes()
    }

    /// The codec of the stream's runs.
    pub(super) fn codec(&self) -> Codec {
        self.engine.codec()
    }

    /// For [`Compression::Max`]: put the engine `data` calls for in place
    /// (a change starts the stream anew); `false` if it cannot be made.
    fn pick_engine(&mut self, data: &[u8]) -> bool {
        let Compression::Max { preset } = self.compression else {
            return true;
        };
        let ppmd = self.engine.codec() == Codec::Ppmd;
        let share = text_share(data);
        let wants_ppmd = match ppmd {
            true => share >= PPMD_KEEP_SHARE,
            false => share >= PPMD_TEXT_SHARE,
        };
        if wants_ppmd == ppmd {
            return true;
        }
        let engine = match wants_ppmd {
            true => Self::engine(Codec::Ppmd, 0),
            false => Self::lzma(preset),
        };
        let Some(engine) = engine else {
            return false;
        };
        self.engine = engine;
        self.forget();
        true
    }

    /// Whether `fingerprint`'s chunk went through the stream within its
    /// window (the compressor can still match all of it).
    pub(super) fn holds(&self, fingerprint: &Fingerprint) -> bool {
        self.in_window.contains_key(fingerprint)
    }

    /// Chunks (fingerprint, length) that went through the stream. A PPMd
    /// model has no window to match in, but it has learned from them: a
    /// similar chunk costs less in the stream than as a delta against one
    /// of them (which gives up the stream's context), as with LZMA2.
    fn fed(&mut self, chunks: impl Iterator<Item = (Fingerprint, usize)>) {
        for (fingerprint, len) in chunks {
            self.window.push_back((fingerprint, self.fed));
            self.in_window.insert(fingerprint, self.fed);
            self.fed += len as u64;
        }
        let window = 1u64 << STREAM_WINDOW_LOG;
        while let Some(&(fingerprint, start)) = self.window.front() {
            if self.fed - start <= window {
                break;
            }
            self.window.pop_front();
            // Unless it went through again since.
            if self.in_window.get(&fingerprint) == Some(&start) {
                self.in_window.remove(&fingerprint);
            }
        }
    }

    /// Compress `data` into `out` (cleared first), flushed so the peer can
    /// decode all of it; `None` on failure (then [`LiteralStream::restart`]).
    pub(super) fn compress(&mut self, data: &[u8], out: &mut Vec<u8>) -> Option<usize> {
        out.clear();
        if !self.pick_engine(data) {
            return None;
        }
        self.engine.compress(data, out).ok()
    }

    /// The next run starts a new stream (the caller makes a new context).
    fn forget(&mut self) {
        self.fresh = true;
        self.fed = 0;
        self.ratio = None;
        self.window.clear();
        self.in_window.clear();
    }

    /// Forget the history: the next run starts a new stream. `false` when
    /// no new context could be made (drop the stream).
    pub(super) fn restart(&mut self) -> bool {
        self.forget();
        self.engine.restart().is_ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_stream_holds_the_chunks_within_its_window_only() {
        let mut stream = LiteralStream::new(Compression::ZSTD, b"first run").unwrap();
        let chunk = |n: u32| Fingerprint::of(&n.to_be_bytes());
        let len = 64 << 10;
        let in_window = (1usize << STREAM_WINDOW_LOG) / len;
        stream.fed((0..in_window as u32 + 2).map(|n| (chunk(n), len)));
        // The two oldest left the window; every later one is in it.
        assert!(!stream.holds(&chunk(0)) && !stream.holds(&chunk(1)));
        assert!((2..in_window as u32 + 2).all(|n| stream.holds(&chunk(n))));
        // A chunk that went through again stays as long as its last pass.
        stream.fed([(chunk(2), len)].into_iter());
        stream.fed((100..102).map(|n| (chunk(n), len)));
        assert!(stream.holds(&chunk(2)) && !stream.holds(&chunk(3)));
        // A restart forgets them all.
        assert!(stream.restart());
        assert!(!stream.holds(&chunk(2)) && stream.fresh);
    }
}
