//! What the datagram layer tells its driver besides datagrams and
//! deadlines ([`super::DatagramLayer::poll_event`]): repairs the peer
//! reported, for the connection's controller, and what happened to paths
//! and probes, for the node's log; and why a probe was dropped.

use std::net::SocketAddr;

use crate::fec::FecError;
use crate::fec_stream::StreamFecError;
use crate::path::{PathId, PathMode, PathState, ProbeError, ProbeRejected};

/// An event of the datagram layer.
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    /// The peer reported `packets` more of this node's datagrams rebuilt
    /// from repairs (both strands): the connection's controller counts
    /// them as lost (recovered is not received).
    Repaired {
        /// The peer's canonical address.
        peer: SocketAddr,
        /// Datagrams rebuilt since its previous report.
        packets: u64,
    },
    /// A path to a peer changed state.
    PathState {
        /// The peer's canonical address.
        canonical: SocketAddr,
        /// The path.
        path: PathId,
        /// Its state before.
        from: PathState,
        /// Its state now.
        to: PathState,
    },
    /// The data to a peer moved from one path to another.
    DataMoved {
        /// The peer's canonical address.
        canonical: SocketAddr,
        /// The path that carried it.
        from: PathId,
        /// The path that carries it now.
        to: PathId,
    },
    /// A peer's real-time datagrams moved to another path (an SLA's
    /// choice on the client; the client's probes say it on the server).
    RealtimeMoved {
        /// The peer's canonical address.
        canonical: SocketAddr,
        /// The path that carries them now; `None`: no path of their own
        /// any more (they follow the lane's mode again).
        to: Option<PathId>,
        /// Why (the SLA's choice; empty on the server).
        why: String,
    },
    /// The server's side follows the mode the client's probes carry.
    ModeFollowed {
        /// The peer's canonical address.
        canonical: SocketAddr,
        /// The mode from now on.
        mode: PathMode,
    },
    /// The server's side bound one of the client's paths to the address
    /// its probe came from.
    PathBound {
        /// The peer's canonical address.
        canonical: SocketAddr,
        /// The path.
        path: PathId,
        /// The peer's address on it.
        remote: SocketAddr,
    },
    /// A received probe was dropped (forged, replayed, unknown).
    ProbeDropped {
        /// Where it came from.
        from: SocketAddr,
        /// Why.
        error: ProbeDropped,
    },
    /// A tail parity datagram was refused.
    ParityRefused {
        /// Where it came from.
        from: SocketAddr,
        /// Why.
        error: FecError,
    },
    /// A continuous-FEC repair was refused.
    RepairRefused {
        /// Where it came from.
        from: SocketAddr,
        /// Why.
        error: StreamFecError,
    },
}

/// Why a received probe was dropped.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProbeDropped {
    /// Not a well-formed probe.
    #[error(transparent)]
    Malformed(#[from] ProbeError),
    /// No connection has the probe's token.
    #[error("no connection has token {0:#010x}")]
    UnknownToken(u32),
    /// The tag or a field did not verify.
    #[error("probe does not verify: {0}")]
    Verify(ProbeError),
    /// The address is no path of the peer's (the client's side).
    #[error("probe from {0}, which is no path")]
    UnknownAddress(SocketAddr),
    /// The monitor refused it (replay, reflection, unknown path).
    #[error(transparent)]
    Rejected(#[from] ProbeRejected),
}
