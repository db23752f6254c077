//! The datagram layer under QUIC: the tunnel's UDP socket with tail
//! duplication and parity.
//!
//! `DupSocket` wraps the runtime's socket: every datagram quinn sends goes
//! out as before and, on paths where [`Duplication`] is switched on, a copy
//! of the burst's last datagrams goes out once more when the path falls
//! quiet (the policy is `wanopt_proto::dup::TailDup`). A small task sleeps
//! until the policy's next deadline and sends the copies; quinn on the far
//! side drops whichever copy of a packet arrives second.
//!
//! Flows tell it when their stream's last bytes are written
//! ([`StreamEnds::expect`]): until the peer has acknowledged them, the
//! path's tails are repeated even while it carries bulk traffic, so that
//! the loss of a transfer's last packet costs a copy's delay, not a probe
//! timeout; a longer tail then goes out as Reed-Solomon parity
//! (`wanopt_proto::fec`). On the receiving side the socket keeps the last
//! datagrams of each peer that sends parity, rebuilds what a parity group
//! shows lost, and hands the rebuilt datagrams to quinn as received; the
//! parity datagrams themselves never reach quinn.
//!
//! Continuous FEC (`wanopt_proto::fec_stream`, module `fec`) works in the
//! same socket: towards a peer whose policy turns it on, every datagram
//! goes out as a numbered source and each block's repairs follow; from a
//! peer that sends it, sources are unwrapped and handed on at once, lost
//! ones rebuilt from repairs, and the counts reported back to the peer,
//! whose policy sizes the code and whose controller is told of the
//! repairs.
//!
//! Files by concept: the node's handle (`duplication`), what it remembers
//! of each path (`path`), the receiving side of parity (`parity`),
//! stream ends (`ends`), the wrapped socket (`socket`) and what it shows
//! (`status`).
//!
//! Several WAN paths per peer (`--path`) live here too: the path table
//! (`paths`: each peer's canonical address, its paths, their probe
//! monitor and selector) and the socket's side of it (`multipath`). quinn
//! sees one address per peer; what it sends there leaves on the data path
//! the selector picked (failover), what arrives on any path is handed to
//! it as from that address, and the probes never reach it.

mod duplication;
mod ends;
mod fec;
mod multipath;
mod parity;
mod path;
mod path_api;
mod paths;
mod shared;
mod socket;
mod status;

pub use duplication::Duplication;
pub use ends::{StreamEnd, StreamEnds, STREAM_END_HOLD};
pub use fec::{flush_after, FecStatus, REPORT_INTERVAL};
pub use path::{PathSample, SAMPLE_INTERVAL};
pub use paths::{PathStatus, PathsStatus};
pub use status::{DuplicationMode, DuplicationStatus};
pub use wanopt_proto::fec_stream::FecMode;
pub use wanopt_proto::path::Side;
