//! The encoder's settings.

use crate::chunker::ChunkerConfig;

use super::compression::Compression;

/// Encoder settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct EncoderConfig {
    /// Chunk sizes.
    pub chunker: ChunkerConfig,
    /// How literals are compressed (see also [`Encoder::set_compression`](crate::Encoder::set_compression)).
    pub compression: Compression,
    /// Keep the literals this encoder sends in the local store and tell the
    /// peer so (an `Ack` on the stream), so that the peer's encoders may
    /// reference them in the other direction: a file downloaded once
    /// uploads as references.
    pub store_sent: bool,
    /// Send a literal compressed only if that saves at least this many
    /// percent of its size.
    pub min_saving_percent: u8,
    /// Bytes of referenced chunks kept in memory to answer `NeedChunk`
    /// (FIFO); beyond them, a repair is read from the local store.
    pub retain_bytes: usize,
    /// Fingerprints of this flow's literals remembered for in-flow
    /// references.
    pub max_flow_chunks: usize,
    /// With zstd, consecutive literals are compressed together, in `Run`
    /// frames of up to about this many raw bytes (0: each chunk on its
    /// own). Never held back waiting for input: a run ends with each push.
    /// LZ4, picked where the CPU rather than the link is the limit, stays
    /// chunk by chunk: on inputs of 64 KiB and more it is 10-15% slower
    /// (a larger match table) for about 6% fewer bytes.
    #[serde(default = "default_run_len")]
    pub run_len: usize,
    /// With zstd, each run continues one compression stream per flow
    /// (`StreamRun` frames: 1 MiB of history across runs, about 10 MiB of
    /// compressor state at levels 9 and up, until [`Encoder::finish`](crate::Encoder::finish) or
    /// [`Encoder::release_compressor`](crate::Encoder::release_compressor)) instead of starting afresh.
    #[serde(default = "default_stream_runs")]
    pub stream_runs: bool,
}

fn default_run_len() -> usize {
    DEFAULT_RUN_LEN
}

fn default_stream_runs() -> bool {
    true
}

/// Default [`EncoderConfig::run_len`]: at 128 KiB a compressor has most of
/// the context it can use on office documents (zstd level 3: 28-30% of
/// the Table 1 Word files against 35% chunk by chunk).
pub const DEFAULT_RUN_LEN: usize = 128 << 10;

impl Default for EncoderConfig {
    fn default() -> Self {
        EncoderConfig {
            chunker: ChunkerConfig::default(),
            compression: Compression::Lz4,
            store_sent: true,
            min_saving_percent: 3,
            retain_bytes: 32 << 20,
            max_flow_chunks: 1 << 16,
            run_len: DEFAULT_RUN_LEN,
            stream_runs: true,
        }
    }
}
