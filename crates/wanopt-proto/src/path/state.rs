//! What a node knows of its paths: the types [`super::PathMonitor`] gives
//! out and [`super::Selector`] reads.

use std::time::{Duration, Instant};

use super::wire::PathId;

/// Which end of the connection this node is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    /// The connection's client (the edge): it numbers the paths and sends
    /// BIND probes.
    Client,
    /// The connection's server (the core): it learns paths from BIND
    /// probes.
    Server,
}

/// What a node knows of one path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PathState {
    /// No echo yet.
    Unknown,
    /// Echoes advance.
    Up,
    /// No echo advanced for two intervals; still used.
    Suspect,
    /// No echo advanced for the down bound.
    Down,
}

impl PathState {
    /// The state's name as status prints it.
    pub fn name(self) -> &'static str {
        match self {
            PathState::Unknown => "unknown",
            PathState::Up => "up",
            PathState::Suspect => "suspect",
            PathState::Down => "down",
        }
    }
}

/// A path as [`super::select::Selector`] sees it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PathView {
    /// The path.
    pub id: PathId,
    /// Its state.
    pub state: PathState,
    /// Its smoothed RTT, once measured.
    pub rtt: Option<Duration>,
    /// Its loss toward the peer (0 to 1), once measured.
    pub loss: Option<f64>,
    /// When it last came up from unknown or down (a suspect spell does not
    /// reset it); `None` while it is down or unknown.
    pub up_since: Option<Instant>,
    /// Its loss the worse way, over the longer windows an SLA is judged
    /// by (0 to 1), once measured.
    pub sla_loss: Option<f64>,
    /// The interarrival jitter of the peer's probes on it (RFC 3550),
    /// once two arrived.
    pub jitter: Option<Duration>,
}

/// Loss on a path each way, 0 to 1, once measured.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Loss {
    /// Of this node's probes, toward the peer.
    pub to_peer: Option<f64>,
    /// Of the peer's probes, toward this node.
    pub from_peer: Option<f64>,
}

/// Counts of one path's probes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ProbeStats {
    /// Probes sent.
    pub sent: u64,
    /// Probes accepted.
    pub received: u64,
    /// Probes dropped as replays.
    pub replays: u64,
    /// Echoes that named no probe this node sent recently.
    pub unmatched_echoes: u64,
}

/// A path's change of state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StateChange {
    /// The path.
    pub path: PathId,
    /// Its state before.
    pub from: PathState,
    /// Its state now.
    pub to: PathState,
    /// When it changed.
    pub at: Instant,
}
