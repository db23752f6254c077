//! The error of decoding the stream.

use thiserror::Error;

use crate::frame::FrameError;

/// Error decoding the stream. Every variant is fatal for the flow: reset
/// the stream (no byte is delivered wrong; none is delivered after this).
#[derive(Debug, Error, PartialEq, Eq)]
pub enum DecodeError {
    /// A frame is malformed.
    #[error(transparent)]
    Frame(#[from] FrameError),
    /// The stream does not start with a preamble.
    #[error("stream does not start with a codec preamble")]
    MissingPreamble,
    /// A second preamble.
    #[error("duplicate preamble")]
    DuplicatePreamble,
    /// A data frame after `End`.
    #[error("data frame after end of stream")]
    DataAfterEnd,
    /// A reference's length differs from the chunk it names.
    #[error("reference length does not match the cached chunk")]
    LengthMismatch,
    /// A repair's data does not match its fingerprint (or a span list its
    /// check).
    #[error("repair data does not match its fingerprint")]
    RepairMismatch,
    /// Too many bytes wait behind unresolved references.
    #[error("backlog behind unresolved references exceeds the limit")]
    BacklogFull,
    /// Too many control frames wait for the local encoder.
    #[error("too many unread control frames from the peer")]
    ControlOverflow,
    /// Pieces that do not add up: a cut beyond the bytes held, more held
    /// than a chunk can be, another frame carrying bytes of the stream
    /// (or its end) while a chunk's pieces are unfinished (control frames,
    /// repairs, span lists and `StreamEnd` may come between them), a
    /// `PieceRef`, `PieceDelta` or `PieceRest` without
    /// pieces or no longer than them, a chunk that does not begin with
    /// them, or a rest that does not make the length its `PieceRest` said.
    #[error("pieces of a chunk out of order")]
    PieceOrder,
}
