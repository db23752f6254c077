//! A peer's paths in bond mode: QUIC's datagrams to it go through a
//! [`BondSender`] (each on the path where it arrives first, paced per
//! path), its bond datagrams come in through a [`BondReceiver`] (put back
//! in order), and each path's acks go back on that path.
//!
//! The bond starts once the connection's probe key is known and a path is
//! up, on both sides (the core follows the mode the edge's probes carry).
//! While no path is up for it, datagrams go unbonded on the primary path,
//! as in failover. FEC does not wrap a bonded peer's datagrams (its
//! repairs would have to follow the bond's order: not built), and tail
//! copies are not made of them.

use std::collections::VecDeque;
use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use wanopt_cc::BbrConfig;

use super::{Hop, PathTable, PeerPaths};
use crate::bond::wire::{Ack, AckRepr, ACK_KIND, DATA_KIND};
use crate::bond::{BondReceiver, BondSender};
use crate::path::{PathId, PathMode, PathSet, PathState};

/// The datagram size each path's controller counts in.
const MTU: u16 = 1500;
/// What QUIC may keep in flight beyond the paths' windows, in time at
/// their rates: enough to keep their queues from running dry between its
/// sends (its pacer's bursts, the receiver's hold).
const WINDOW_EXTRA: Duration = Duration::from_millis(20);

/// Whether `datagram` is a bond datagram (data or ack).
pub(in crate::datagram) fn is_bond(datagram: &[u8]) -> bool {
    matches!(datagram.first(), Some(&DATA_KIND) | Some(&ACK_KIND))
}

/// One peer's bond.
#[derive(Debug)]
pub(super) struct Bond {
    sender: BondSender,
    receiver: BondReceiver<Vec<u8>>,
    /// Bond datagrams from the peer that did not parse.
    refused: u64,
}

/// What the QUIC connection to a bonded peer may send: its window
/// (bytes) and pacing rate (bytes per second).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BondBudget {
    /// Bytes in flight.
    pub window: u64,
    /// Bytes per second.
    pub pacing_rate: u64,
}

/// A bond as `/status` shows it.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct BondStatus {
    /// QUIC datagrams the bond took to send.
    pub datagrams: u64,
    /// Datagrams it dropped: no path up, or every path's queue full.
    pub dropped: u64,
    /// Datagrams sent again on another path after theirs stalled.
    pub reinjected: u64,
    /// How long the receiver holds a gap now, ms.
    pub hold_ms: f64,
    /// Gaps the receiver gave up after the hold time.
    pub gaps_timed_out: u64,
    /// Datagrams that arrived after their gap was given up (QUIC sees
    /// them out of order).
    pub late: u64,
    /// Second copies dropped.
    pub duplicates: u64,
    /// Bond datagrams from the peer that did not parse.
    pub refused: u64,
}

/// One path of a bond as `/status` shows it.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct BondPathStatus {
    /// Datagrams sent on it.
    pub sent: u64,
    /// Of them, acknowledged.
    pub acked: u64,
    /// Of them, lost.
    pub lost: u64,
    /// Times it stalled (no ack while data waited).
    pub stalls: u64,
    /// Whether it carries data now.
    pub carrying: bool,
}

impl Bond {
    fn new(now: Instant, seed: u64) -> Bond {
        Bond {
            sender: BondSender::new(now, BbrConfig::default(), MTU, seed),
            receiver: BondReceiver::new(now),
            refused: 0,
        }
    }
}

impl PeerPaths {
    /// Starts, feeds or ends the bond after the paths changed: it runs in
    /// bond mode while the connection is up, and learns which paths are up
    /// and their round trips from the probes.
    pub(super) fn sync_bond(&mut self, now: Instant) {
        if self.mode != PathMode::Bond || self.key.is_none() {
            self.bond = None;
            return;
        }
        if self.bond.is_none() {
            let seed = self.filter_seed;
            self.bond = Some(Box::new(Bond::new(now, seed)));
        }
        let Some(bond) = self.bond.as_mut() else {
            return;
        };
        let mut up = PathSet::EMPTY;
        for path in PathId::all().filter(|p| self.routes[p.index()].is_some()) {
            // The core learns its paths as the edge's probes bind them.
            bond.sender.add_path(path);
            let state = self.monitor.state(path);
            let is_up = matches!(state, Some(PathState::Up | PathState::Suspect));
            bond.sender.set_up(now, path, is_up);
            if is_up {
                up.insert(path);
            }
            if let Some(rtt) = self.monitor.rtt(path) {
                bond.sender.set_probe_rtt(path, rtt);
            }
            let cap = self.routes[path.index()].and_then(|r| r.send_bps);
            bond.sender
                .set_rate_cap(path, cap.map(super::shape::bond_cap));
        }
        bond.receiver.set_up(now, up);
    }

    pub(super) fn bond_usable(&self) -> bool {
        self.bond
            .as_ref()
            .is_some_and(|b| PathId::all().any(|p| b.sender.usable(p)))
    }
}

impl PathTable {
    /// Whether datagrams to `canonical` go through its bond now.
    pub(in crate::datagram) fn bonded(&self, canonical: SocketAddr) -> bool {
        self.peer(canonical).is_some_and(PeerPaths::bond_usable)
    }

    /// Takes `datagram` (QUIC's, to `canonical`) into the bond; `realtime`
    /// when it carries UDP flows (its copies go on every path that is up,
    /// and the receiver hands it up at once). Returns whether the bond took
    /// it (if not, it goes as in failover).
    pub(in crate::datagram) fn bond_send(
        &mut self,
        now: Instant,
        canonical: SocketAddr,
        datagram: &[u8],
        realtime: bool,
    ) -> bool {
        self.clock = Some(now);
        let Some(peer) = self.peer_mut(canonical).filter(|p| p.bond_usable()) else {
            return false;
        };
        let own = if realtime { peer.realtime_path() } else { None };
        let Some(bond) = peer.bond.as_mut() else {
            return false;
        };
        if realtime {
            // On their own path (an SLA's), else a copy on every path up.
            let mut paths: PathSet = own.filter(|p| bond.sender.usable(*p)).into_iter().collect();
            if paths.is_empty() {
                paths = PathId::all().filter(|p| bond.sender.usable(*p)).collect();
            }
            bond.sender.handle_realtime(now, datagram, paths) > 0
        } else {
            // A datagram no path could take is lost to QUIC, which sends
            // its data again: taken all the same.
            let _ = bond.sender.handle_datagram(now, datagram.to_vec());
            true
        }
    }

    /// Takes a bond datagram that arrived from `from` at `dst_ip`, if it
    /// came on a bonded peer's path (`false`: not the bond's).
    pub(in crate::datagram) fn bond_receive(
        &mut self,
        now: Instant,
        from: SocketAddr,
        dst_ip: Option<IpAddr>,
        datagram: &[u8],
    ) -> bool {
        self.clock = Some(now);
        let Some((index, path)) = self.find(from, dst_ip) else {
            return false;
        };
        let peer = &mut self.peers[index];
        let (canonical, local) = (peer.canonical, peer.canonical_local);
        let Some(bond) = peer.bond.as_mut() else {
            return false;
        };
        if let Some(route) = peer.routes[path.index()].as_mut() {
            route.rx_bytes += datagram.len() as u64;
        }
        match datagram.first() {
            Some(&ACK_KIND) => match Ack::new_checked(datagram).and_then(|a| AckRepr::parse(&a)) {
                Ok(ack) => bond.sender.handle_ack(now, &ack),
                Err(_) => bond.refused += 1,
            },
            _ => {
                if bond
                    .receiver
                    .handle_data(now, path, datagram, <[u8]>::to_vec)
                    .is_err()
                {
                    bond.refused += 1;
                }
                while let Some(inner) = bond.receiver.poll_release() {
                    self.bond_ready.push_back((canonical, local, inner));
                }
            }
        }
        true
    }

    /// The next datagram the bonds send (data, copies, acks), with its
    /// path; counts its bytes there.
    pub(in crate::datagram) fn bond_poll(&mut self, now: Instant) -> Option<(Hop, Vec<u8>)> {
        if !self.bonding {
            return None;
        }
        self.clock = Some(now);
        for peer in &mut self.peers {
            let Some(bond) = peer.bond.as_mut() else {
                continue;
            };
            let sent = match bond.receiver.poll_ack(now) {
                Some(ack) => Some((ack.path, ack.emit().to_vec())),
                None => bond.sender.poll_transmit(now),
            };
            if let Some((path, bytes)) = sent {
                let Some(route) = peer.routes[path.index()].as_mut() else {
                    continue;
                };
                route.tx_bytes += bytes.len() as u64;
                return Some((route.hop(), bytes));
            }
        }
        None
    }

    /// A datagram the bonds put back in order, for QUIC: the peer's
    /// canonical address, quinn's local address, the bytes.
    pub(in crate::datagram) fn bond_released(
        &mut self,
    ) -> Option<(SocketAddr, Option<IpAddr>, Vec<u8>)> {
        self.bond_ready.pop_front()
    }

    /// Whether datagrams put back in order wait for QUIC.
    pub(in crate::datagram) fn bond_ready(&self) -> bool {
        !self.bond_ready.is_empty()
    }

    /// Does what the bonds have due at `now` (losses, stalls, gaps given
    /// up).
    pub(in crate::datagram) fn bond_timeout(&mut self, now: Instant) {
        if !self.bonding {
            return;
        }
        self.clock = Some(now);
        let ready = &mut self.bond_ready;
        for peer in &mut self.peers {
            let (canonical, local) = (peer.canonical, peer.canonical_local);
            let Some(bond) = peer.bond.as_mut() else {
                continue;
            };
            bond.sender.handle_timeout(now);
            bond.receiver.handle_timeout(now);
            while let Some(inner) = bond.receiver.poll_release() {
                ready.push_back((canonical, local, inner));
            }
        }
    }

    /// When a bond has something to do next.
    pub(in crate::datagram) fn next_bond_timeout(&self) -> Option<Instant> {
        if !self.bonding {
            return None;
        }
        let now = self.clock?;
        self.peers
            .iter()
            .filter_map(|p| p.bond.as_ref())
            .flat_map(|b| [b.sender.poll_timeout(now), b.receiver.poll_timeout()])
            .flatten()
            .min()
    }

    /// What QUIC may send to `canonical` while it is bonded.
    pub(in crate::datagram) fn bond_budget(&self, canonical: SocketAddr) -> Option<BondBudget> {
        let peer = self.peer(canonical).filter(|p| p.bond_usable())?;
        let bond = peer.bond.as_ref()?;
        let extra = WINDOW_EXTRA + bond.receiver.hold();
        Some(BondBudget {
            window: bond.sender.window(extra),
            pacing_rate: bond.sender.pacing_rate(),
        })
    }

    /// The bond of `peer` and each of its paths, for status.
    pub(super) fn bond_status(peer: &PeerPaths, path: PathId) -> Option<BondPathStatus> {
        let bond = peer.bond.as_ref()?;
        let stats = bond.sender.path_stats(path)?;
        Some(BondPathStatus {
            sent: stats.sent,
            acked: stats.acked,
            lost: stats.lost,
            stalls: stats.stalls,
            carrying: bond.sender.usable(path),
        })
    }

    /// The bond of `peer`, for status.
    pub(super) fn bond_summary(peer: &PeerPaths) -> Option<BondStatus> {
        let bond = peer.bond.as_ref()?;
        let sent = bond.sender.stats();
        let reorder = bond.receiver.reorder_stats();
        Some(BondStatus {
            datagrams: sent.datagrams,
            dropped: sent.dropped,
            reinjected: sent.reinjected,
            hold_ms: bond.receiver.hold().as_secs_f64() * 1e3,
            gaps_timed_out: reorder.timed_out,
            late: reorder.late,
            duplicates: reorder.duplicates,
            refused: bond.refused,
        })
    }
}

/// The datagrams bonds put back in order, waiting for QUIC.
pub(super) type Ready = VecDeque<(SocketAddr, Option<IpAddr>, Vec<u8>)>;
