//! The seam every compression engine implements: [`Engine`], its wire id
//! [`Codec`] and its error [`CompressError`].

use thiserror::Error;

/// Window of the stream that `StreamRun` frames continue (log2 of bytes):
/// the encoder's setting and the decoder's cap, 1 MiB per flow, for zstd
/// and LZMA2 alike.
pub const STREAM_WINDOW_LOG: u32 = 20;

/// Compression applied to a literal payload or a stream run: the id of its
/// engine on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Codec {
    /// Stored as is.
    Raw,
    /// LZ4 block format.
    Lz4,
    /// One zstd frame (slower than LZ4, about a third smaller on office
    /// documents: for links where the WAN, not the CPU, is the bottleneck).
    Zstd,
    /// Raw LZMA2, only as the engine of a `StreamRun` (its flags say so;
    /// no other frame carries it).
    Lzma,
    /// PPMd var. H, only as the engine of a `StreamRun`, like LZMA2.
    Ppmd,
}

impl Codec {
    /// The engine's name: `raw`, `lz4`, `zstd`, `lzma2` or `ppmd`.
    pub fn name(self) -> &'static str {
        match self {
            Codec::Raw => "raw",
            Codec::Lz4 => "lz4",
            Codec::Zstd => "zstd",
            Codec::Lzma => "lzma2",
            Codec::Ppmd => "ppmd",
        }
    }
}

/// What an engine is made for: one side of a flow compresses, the other
/// decompresses, each with its own state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// Compress at `level`, on the engine's own scale (a zstd level, an
    /// LZMA2 preset; LZ4 and PPMd have none and ignore it).
    Compress {
        /// The engine's level.
        level: i32,
    },
    /// Decompress.
    Decompress,
}

/// How an engine's output is framed on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Framing {
    /// Each payload on its own (`Literal`, `Named`, `Repair`, `Piece` and
    /// `Run` frames): no history between calls.
    Block,
    /// Each call continues the flow's stream (`StreamRun` frames): the
    /// history of the calls before is kept, [`STREAM_WINDOW_LOG`] bits of
    /// it at most.
    Stream,
}

/// Error of a compression engine.
#[derive(Debug, Error, PartialEq, Eq, Clone, Copy)]
pub enum CompressError {
    /// The engine's context could not be made (memory, or a setting out of
    /// the engine's range).
    #[error("{0} context could not be made")]
    Context(&'static str),
    /// The engine failed while compressing.
    #[error("{0} failed to compress")]
    Compress(&'static str),
    /// The input is corrupt, or does not decode to exactly its length from
    /// exactly its bytes.
    #[error("corrupt {0} input")]
    Corrupt(&'static str),
    /// The engine does not do this: no such framing for this codec, or a
    /// compressor asked to decompress (and the other way round).
    #[error("{0} cannot be used this way")]
    Unsupported(&'static str),
}

/// One compression engine, set up for one [`Role`] and one [`Framing`]
/// (see [`crate::compress`]): the only thing the encoder and the
/// decoder know of LZ4, zstd, LZMA2 or PPMd.
pub trait Engine: Send + std::fmt::Debug {
    /// The engine's id on the wire.
    fn codec(&self) -> Codec;

    /// The engine's name (for logs and examples).
    fn name(&self) -> &'static str {
        self.codec().name()
    }

    /// Compresses all of `data`; the compressed bytes are `out[..n]`, `n`
    /// returned. A stream engine clears `out` first and flushes, so that
    /// the peer decodes all of `data` from these bytes and the stream's
    /// history; a block engine writes from the start of `out`, growing it
    /// to its bound when shorter and leaving it longer than `n` (a scratch
    /// buffer keeps its size: it is not zeroed at each call).
    fn compress(&mut self, data: &[u8], out: &mut Vec<u8>) -> Result<usize, CompressError>;

    /// Decompresses `input` into `out` (appended): on success `out` grew
    /// by exactly `raw_len`, and `input` was all of the engine's bytes for
    /// them; on error `out` is unchanged. The output is bounded by
    /// `raw_len` whatever the input (no allocation beyond the engine's
    /// fixed state).
    fn decompress(
        &mut self,
        input: &[u8],
        raw_len: usize,
        out: &mut Vec<u8>,
    ) -> Result<(), CompressError>;

    /// Forgets the stream's history: the next call starts a new stream
    /// (with the same setting). Nothing to do for a block engine.
    fn restart(&mut self) -> Result<(), CompressError>;

    /// Bytes the engine's state holds.
    fn state_bytes(&self) -> usize;
}
