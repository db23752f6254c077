//! The tunnel's UDP socket: quinn's `AsyncUdpSocket` over the datagram
//! layer under QUIC (`wanopt_proto::datagram::DatagramLayer`: tail
//! duplication and parity, continuous FEC, several WAN paths per peer).
//!
//! The layer is a state machine; this adapter drives it. The wrapped
//! socket ([`DatagramHandle::wrap`], module `socket`) owns the runtime's
//! real socket: it hands the layer what quinn sends and what arrives,
//! with `Instant::now()`, puts what the layer gives on the wire, and a
//! task of its own sleeps until the layer's next deadline. The node's
//! handle ([`DatagramHandle`], module `handle`) samples the tunnel's
//! connections into the layer, configures paths and FEC and reads their
//! status; flows say when their stream ends through [`StreamEnds`]
//! (module `ends`). The layer and what the adapter keeps beside it (the
//! controllers' flags and counters) sit behind one lock.

mod ends;
mod handle;
mod socket;

pub use ends::{StreamEnd, StreamEnds, STREAM_END_HOLD};
pub use handle::DatagramHandle;
pub use socket::DatagramSocket;
pub use wanopt_proto::datagram::{
    flush_after, BondPathStatus, BondStatus, DuplicationMode, DuplicationStatus, FecStatus,
    PathSample, PathStatus, PathsStatus, RealtimeStatus, REPORT_INTERVAL, SAMPLE_INTERVAL,
};
pub use wanopt_proto::fec_stream::FecMode;
pub use wanopt_proto::path::Side;
