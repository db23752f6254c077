//! The error of a malformed frame.

use thiserror::Error;

/// Malformed frame.
#[derive(Debug, Error, PartialEq, Eq, Clone)]
pub enum FrameError {
    /// The buffer ends before the header or the body does.
    #[error("truncated frame")]
    Truncated,
    /// The body length is above [`MAX_FRAME_BODY`](crate::frame::MAX_FRAME_BODY).
    #[error("frame body of {0} bytes exceeds the limit")]
    TooLong(usize),
    /// The type code is unknown.
    #[error("unknown frame type {0:#04x}")]
    UnknownType(u8),
    /// The body does not have the layout its type requires.
    #[error("malformed body of frame type {0:#04x}")]
    Malformed(u8),
    /// The preamble magic is wrong.
    #[error("not a wanopt codec stream (bad magic)")]
    BadMagic,
    /// The preamble announces a version this crate does not speak.
    #[error("unsupported codec version {0}")]
    UnsupportedVersion(u8),
    /// A raw length is zero or above [`MAX_CHUNK_LEN`](crate::MAX_CHUNK_LEN).
    #[error("chunk length {0} out of range")]
    ChunkLength(u32),
    /// The compression codec byte is unknown.
    #[error("unknown compression codec {0}")]
    UnknownCodec(u8),
    /// A compressed payload does not decompress to its raw length.
    #[error("corrupt compressed payload")]
    Decompress,
}
