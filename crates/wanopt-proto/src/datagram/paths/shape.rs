//! Declared link rates (`--path LOCAL=REMOTE,rate=20mbit[,up=..][,down=..]`):
//! the most each path carries from this node, so that an ISP's policer or
//! a modem's buffer never sees the tunnel above what the link is sold at,
//! and the queue, if any, is in this node where real-time datagrams go
//! first.
//!
//! The edge knows both ways of each of its paths: it sends at most at the
//! up rate, and asks the core for at most the down rate in every probe
//! on that path (the probe's rate field, [`crate::path::ProbeRepr`]). The
//! core keeps what the newest probe on a path asked.
//!
//! Rates count IP packets, as links and policers do. How the cap is kept:
//!
//! - **Bond mode:** each path's pacer and controller run under
//!   [`BOND_SHARE`] of its rate (the bond's datagrams with their IP and
//!   UDP headers); the rest leaves room for its acks, probes and the
//!   pacer's 2 ms burst within any 100 ms (measured on the lab's emulator,
//!   which stamps a frame when it reads it: 97% let 103% through in one
//!   100 ms window of six).
//! - **The other modes:** the QUIC connection's controller runs under
//!   [`QUIC_SHARE`] of the data path's rate (the least of the paths that
//!   carry copies, in duplicate mode): quinn counts UDP payloads and its
//!   pacer sends bursts of ten datagrams or more.

use std::net::{IpAddr, SocketAddr};

use super::PathTable;
use crate::path::{PathId, PathMode, PathSet};

/// The share of a path's declared rate its bond pacer sends at.
pub const BOND_SHARE: f64 = 0.95;
/// The share of the data path's declared rate QUIC's controller is capped
/// at, outside bond mode.
pub const QUIC_SHARE: f64 = 0.92;

/// One of the edge's paths: where it leaves from and goes to, and the
/// rates declared for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PathSpec {
    /// The local address datagrams leave from.
    pub local: IpAddr,
    /// The core's address on it.
    pub remote: SocketAddr,
    /// The most it carries toward the core, bits per second of IP packets.
    pub up_bps: Option<u64>,
    /// The most it carries toward the edge (asked of the core).
    pub down_bps: Option<u64>,
}

impl PathSpec {
    /// A path from `local` to `remote` with no declared rate.
    pub fn new(local: IpAddr, remote: SocketAddr) -> PathSpec {
        PathSpec {
            local,
            remote,
            up_bps: None,
            down_bps: None,
        }
    }
}

/// `bps` as a probe's rate field, kbit/s (at least 1).
pub(super) fn to_kbit(bps: u64) -> u32 {
    (bps / 1000).clamp(1, u64::from(u32::MAX)) as u32
}

/// A probe's rate field as bits per second: 0 is no rate, anything else at
/// least [`MIN_RATE_BPS`] (a peer's mistake cannot silence a path).
pub(super) fn from_kbit(kbit: u32) -> Option<u64> {
    (kbit > 0).then(|| (u64::from(kbit) * 1000).max(MIN_RATE_BPS))
}

/// The least rate a probe may ask for, bits per second (the edge's own
/// `--path` refuses less).
pub const MIN_RATE_BPS: u64 = 64_000;

/// What a bond's path may send at, bytes per second of bond datagrams
/// with their IP and UDP headers, under a declared `bps`.
pub(super) fn bond_cap(bps: u64) -> u64 {
    (bps as f64 / 8.0 * BOND_SHARE) as u64
}

impl PathTable {
    /// The most QUIC's controller may send to `canonical` at, bytes per
    /// second of UDP payload, outside bond mode: [`QUIC_SHARE`] of the
    /// declared rate of the data path (in duplicate mode, the least of the
    /// paths that carry copies). `None`: no path of it has a rate, or its
    /// datagrams are bonded (each path's pacer keeps its own).
    pub(in crate::datagram) fn rate_cap(&self, canonical: SocketAddr) -> Option<u64> {
        let peer = self.peer(canonical)?;
        if peer.bond_usable() {
            return None;
        }
        // Before the selector chose, datagrams go to the canonical address.
        let primary = peer.primary.or_else(|| {
            PathId::all().find(|p| peer.routes[p.index()].is_some_and(|r| r.remote == canonical))
        })?;
        let copies = match peer.mode {
            PathMode::Duplicate => peer.data,
            _ => PathSet::EMPTY,
        };
        std::iter::once(primary)
            .chain(copies.iter())
            .filter_map(|p| peer.routes[p.index()]?.send_bps)
            .min()
            .map(|bps| (bps as f64 / 8.0 * QUIC_SHARE) as u64)
    }
}
