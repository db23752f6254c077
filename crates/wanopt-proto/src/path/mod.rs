//! Several WAN paths to one peer: the probe that measures each, the monitor
//! that turns probes into each path's state, RTT and loss, and the selector
//! that picks the paths a lane's datagrams go on.
//!
//! A node's path layer sits under QUIC: quinn sees one peer address, and
//! the layer sends each datagram on the paths [`Selector::select`] returns
//! and maps every path's packets back to that address. Both nodes send
//! [`ProbeRepr`]s on every path ([`wire`]); [`PathMonitor`] keeps each
//! path's state (unknown, up, suspect, down), RTT and loss from them
//! ([`monitor`]); [`Selector`] applies the lane's mode (failover, plain,
//! duplicate, spread-fec: [`select`]). Copies that arrive over two paths
//! are dropped by [`crate::dedup::DuplicateFilter`].
//!
//! Everything here is sans-IO: the caller passes `now` and the verified
//! probes, and sends what the monitor's polls return.

mod entry;
pub mod monitor;
pub mod select;
pub mod sla;
mod state;
pub mod wire;

pub use monitor::{PathMonitor, ProbeRejected};
pub use select::{PathSet, Preference, Selection, Selector, RECOVER_HOLD};
pub use sla::{Sla, SlaChoice, SlaError, SlaSelector};
pub use state::{Loss, PathState, PathView, ProbeStats, Side, StateChange};
pub use wire::{
    looks_like_probe, PathId, PathKey, PathMode, Probe, ProbeBytes, ProbeError, ProbeRepr,
    PROBE_LEN, PROBE_RATE_LEN,
};
