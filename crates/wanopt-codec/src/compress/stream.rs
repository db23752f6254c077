//! The decoding side of a flow's compression stream (`StreamRun` frames).

use super::engine::{Codec, CompressError, Engine, Role};
use super::stream_engine;

/// The decoding side of a flow's compression stream (`StreamRun` frames):
/// one decompression engine, zstd, LZMA2 or PPMd, its window capped at
/// [`super::STREAM_WINDOW_LOG`].
#[derive(Default)]
pub struct StreamDecoder {
    engine: Option<Box<dyn Engine>>,
}

impl std::fmt::Debug for StreamDecoder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StreamDecoder")
            .field("engine", &self.engine.as_ref().map(|engine| engine.codec()))
            .finish()
    }
}

impl StreamDecoder {
    /// Whether the stream's engine decodes at tens of MB/s rather than
    /// GB/s (PPMd about 20 MB/s per core, LZMA2 somewhat faster; zstd
    /// is not): milliseconds per run.
    pub fn is_slow(&self) -> bool {
        self.engine
            .as_ref()
            .is_some_and(|engine| matches!(engine.codec(), Codec::Ppmd | Codec::Lzma))
    }

    /// Bytes held by the decompression context (0 before a stream starts).
    pub fn context_bytes(&self) -> usize {
        self.engine
            .as_ref()
            .map_or(0, |engine| engine.state_bytes())
    }

    /// Decode a run of `codec`'s stream into `out` (appended): `out` grows
    /// by exactly `raw_len` on success and is unchanged on error. A run
    /// that does not start a stream (`fresh`) needs one started before it,
    /// with the same engine; after an error the stream is dropped (the
    /// flow cannot go on anyway).
    pub fn decode_run(
        &mut self,
        fresh: bool,
        codec: Codec,
        input: &[u8],
        raw_len: usize,
        out: &mut Vec<u8>,
    ) -> Result<(), CompressError> {
        let result = self.decode(fresh, codec, input, raw_len, out);
        if result.is_err() {
            self.engine = None;
        }
        result
    }

    fn decode(
        &mut self,
        fresh: bool,
        codec: Codec,
        input: &[u8],
        raw_len: usize,
        out: &mut Vec<u8>,
    ) -> Result<(), CompressError> {
        if fresh {
            match &mut self.engine {
                // The engine of the stream before is restarted (a zstd
                // context is reused); another engine goes.
                Some(engine) if engine.codec() == codec => engine.restart()?,
                slot => {
                    *slot = None;
                    *slot = Some(stream_engine(codec, Role::Decompress)?);
                }
            }
        }
        match &mut self.engine {
            Some(engine) if engine.codec() == codec => engine.decompress(input, raw_len, out),
            // No stream, or one of the other engine.
            _ => Err(CompressError::Unsupported(codec.name())),
        }
    }
}
