//! The error of handling a control frame from the peer's decoder.

use thiserror::Error;

use crate::fingerprint::Fingerprint;

/// Error handling a control frame from the peer's decoder.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum PeerControlError {
    /// The peer asked for a chunk that is neither retained nor readable
    /// from the local store. The flow cannot continue correctly: reset
    /// the stream.
    #[error(
        "peer needs chunk {0:?} which is neither retained nor in the local store; reset the flow"
    )]
    ChunkUnavailable(Fingerprint),
    /// The peer asked for the list of a span that is no longer remembered.
    #[error("peer needs span {0:?} which is no longer remembered; reset the flow")]
    SpanUnavailable(Fingerprint),
}
