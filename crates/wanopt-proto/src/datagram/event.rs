//! What the datagram layer tells its driver besides datagrams and
//! deadlines ([`super::DatagramLayer::poll_event`]): repairs the peer
//! reported, for the connection's controller, and what happened to paths
//! and probes, for the node's log.

use std::net::SocketAddr;

use crate::path::{PathId, PathMode, PathState};

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
        /// Why, as the log says it.
        reason: String,
    },
    /// A tail parity datagram was refused.
    ParityRefused {
        /// Where it came from.
        from: SocketAddr,
        /// Why, as the log says it.
        reason: String,
    },
    /// A continuous-FEC repair was refused.
    RepairRefused {
        /// Where it came from.
        from: SocketAddr,
        /// Why, as the log says it.
        reason: String,
    },
}
