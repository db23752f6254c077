//! QUIC application error codes used by wanopt.
//!
//! A TCP reset on one side of the tunnel becomes a QUIC stream reset (and a
//! STOP_SENDING) carrying [`TCP_RESET`]; the far side turns it back into a TCP
//! reset. [`PROTOCOL`] marks a stream whose header could not be parsed;
//! [`CODEC_ERROR`] a flow whose reduced data did not decode.

/// The TCP connection on the other side was reset, or must be.
pub const TCP_RESET: u32 = 1;
/// The stream header was malformed; the stream is abandoned.
pub const PROTOCOL: u32 = 2;
/// The node is shutting down.
pub const SHUTDOWN: u32 = 3;
/// Connection close code: the peer's key is not pinned (logged by the refuser).
pub const NOT_PINNED: u32 = 4;
/// Stream reset and STOP_SENDING code: the reduced data from the peer did
/// not decode (or asked for chunks this node cannot supply); the far side
/// resets its TCP connection as for [`TCP_RESET`] and logs that its peer
/// could not decode its data.
pub const CODEC_ERROR: u32 = 5;
/// Connection close code: the TCP connection that carried the tunnel
/// (`carrier`) failed or closed; the reason says how.
pub const CARRIER_LOST: u32 = 6;
