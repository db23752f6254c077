//! Compression engines: LZ4, zstd, LZMA2 and PPMd behind one trait,
//! [`Engine`] (compress; decompress to a bounded length; restart a stream;
//! the engine's id and the memory it holds).
//!
//! An engine is made for one [`Role`] (compress or decompress) and one
//! [`Framing`]: *block* engines compress each payload on its own (LZ4 and
//! zstd, for `Literal`, `Named`, `Repair`, `Piece` and `Run` frames),
//! *stream* engines continue one stream per flow from run to run (zstd,
//! LZMA2 and PPMd, for `StreamRun` frames, see [`crate::frame`]). The
//! encoder picks which ([`crate::Compression`]); the decoder follows the
//! codec the frame names.
//!
//! Adding an engine: a file here implementing [`Engine`], its arm in
//! [`engine`], a [`Codec`] variant and its code on the wire (a codec byte
//! or a `StreamRun` flag, in `frame`).
//!
//! Every engine's decoder writes into a buffer of the length the frame
//! announces (plus one byte, to see a stream that holds more) and keeps a
//! fixed window: a hostile frame can neither allocate more nor write past
//! it.

mod engine;
mod lz4;
mod lzma;
mod ppmd;
mod stream;
mod zstd;

pub use self::engine::{Codec, CompressError, Engine, Framing, Role, STREAM_WINDOW_LOG};
pub use self::lz4::Lz4;
pub use self::lzma::{lzma_options, Lzma2, LZMA_DECODER_BYTES, LZMA_ENCODER_BYTES};
pub use self::ppmd::{Ppmd, PPMD_BYTES, PPMD_MEMORY, PPMD_ORDER};
pub use self::stream::StreamDecoder;
pub use self::zstd::{delta_compress, delta_decompress, ZstdBlock, ZstdStream};

/// The engine of `codec` for `framing` and `role`: the one place that
/// maps a wire codec to its implementation.
pub fn engine(
    codec: Codec,
    framing: Framing,
    role: Role,
) -> Result<Box<dyn Engine>, CompressError> {
    let level = match role {
        Role::Compress { level } => level,
        Role::Decompress => 0,
    };
    Ok(match (codec, framing) {
        (Codec::Lz4, Framing::Block) => Box::new(lz4::Lz4),
        (Codec::Zstd, Framing::Block) => Box::new(zstd::ZstdBlock::new(level)),
        (Codec::Zstd, Framing::Stream) => Box::new(zstd::ZstdStream::new(role)?),
        (Codec::Lzma, Framing::Stream) => Box::new(lzma::Lzma2::new(role)?),
        (Codec::Ppmd, Framing::Stream) => match role {
            Role::Compress { .. } => Box::new(ppmd::Ppmd::compressor()?),
            Role::Decompress => Box::new(ppmd::Ppmd::decompressor()),
        },
        (Codec::Raw, _)
        | (Codec::Lz4, Framing::Stream)
        | (Codec::Lzma | Codec::Ppmd, Framing::Block) => {
            return Err(CompressError::Unsupported(codec.name()))
        }
    })
}

/// The stream engine of `codec` for `role` ([`engine`] with
/// [`Framing::Stream`]).
pub fn stream_engine(codec: Codec, role: Role) -> Result<Box<dyn Engine>, CompressError> {
    engine(codec, Framing::Stream, role)
}

/// Decompress one block payload of `codec` into `out` (appended, exactly
/// `raw_len` bytes on success, unchanged on error) without making an
/// engine: the decoder's path for every literal. Raw bytes are copied;
/// codecs with no block framing are an error.
pub fn decompress_block(
    codec: Codec,
    input: &[u8],
    raw_len: usize,
    out: &mut Vec<u8>,
) -> Result<(), CompressError> {
    match codec {
        Codec::Raw => {
            out.extend_from_slice(input);
            Ok(())
        }
        Codec::Lz4 => lz4::Lz4.decompress(input, raw_len, out),
        Codec::Zstd => zstd::ZstdBlock::new(0).decompress(input, raw_len, out),
        Codec::Lzma | Codec::Ppmd => Err(CompressError::Unsupported(codec.name())),
    }
}
