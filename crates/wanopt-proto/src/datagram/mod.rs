//! The datagram layer under QUIC, sans-IO: [`DatagramLayer`].
//!
//! The tunnel's QUIC connections send and receive through it. It takes
//! the time (`now`), quinn's transmits and the socket's received buffers
//! through `handle_*` methods and gives the datagrams to send, its next
//! deadline and its events through `poll_*` methods, like quinn-proto's
//! `Connection`; a thin adapter in the node owns the real socket, reads
//! the clock and drives the timer. Nothing here reads a clock, opens a
//! socket or draws an unseeded random number.
//!
//! What it does, by concept:
//!
//! - tail duplication (`crate::dup`): on paths where it is on, a copy of
//!   a burst's last datagrams goes out again when the path falls quiet,
//!   and a stream's end is protected even on a busy path; a longer tail
//!   goes out as Reed-Solomon parity (`crate::fec`), whose receiving side
//!   rebuilds what a parity group shows lost (`parity`). What each path's
//!   samples leave is in `sample`, the mode and status in `duplication`.
//! - continuous FEC (`crate::fec_stream`, module `fec`): towards a peer
//!   whose policy turns it on, every datagram goes out as a numbered
//!   source (in the call strand for real-time UDP flows, in the bulk
//!   strand for the rest) and each block's repairs follow; from a peer
//!   that sends it, sources are unwrapped, lost ones rebuilt from
//!   repairs, and the counts reported back; reported repairs come out as
//!   [`Event::Repaired`] for the connection's controller.
//! - several WAN paths per peer (`paths`): each peer's canonical address
//!   (the one quinn sees), its paths, their probe monitor and selector
//!   (failover, duplicate, spread-fec, bond); probes never reach quinn. In
//!   bond mode QUIC's datagrams go through the peer's bond (`crate::bond`),
//!   each on the path where it arrives first, and come back in order; the
//!   connection's controller follows [`DatagramLayer::bond_budget`].
//!
//! quinn marks which datagrams of a transmit carry UDP flows (the
//! `flagged` bit mask of [`DatagramLayer::handle_transmit`]).

mod duplication;
mod event;
mod fec;
mod fec_status;
mod layer;
mod parity;
mod paths;
mod receive;
mod sample;
mod transmit;

pub use duplication::{DuplicationMode, DuplicationStatus};
pub use event::{Event, ProbeDropped};
pub use fec::{flush_after, MEASURE_REPORT_INTERVAL, REPORT_INTERVAL};
pub use fec_status::FecStatus;
pub use layer::DatagramLayer;
pub use paths::{
    BondBudget, BondPathStatus, BondStatus, PathSpec, PathStatus, PathsStatus, RealtimeStatus,
    BOND_SHARE, QUIC_SHARE,
};
pub use sample::{PathSample, SAMPLE_INTERVAL};
pub use transmit::{Ecn, Received, Sending, Transmit};

#[cfg(test)]
mod simulation;
#[cfg(test)]
mod sla_simulation;
#[cfg(test)]
mod tests;
