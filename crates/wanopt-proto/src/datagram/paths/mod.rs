//! The path table: for each peer reached over several WAN paths, its
//! canonical address (the one quinn sees), its paths (a local IP and a
//! remote address each), their monitor and selector, and the reverse map
//! from a path's remote address to its peer.
//!
//! quinn always sees one address per peer: a `Transmit` to it is sent on
//! the selected path ([`PathTable::route`]) and a datagram from any known
//! path is handed to quinn as if it came from the canonical address
//! ([`PathTable::map`]). The edge configures its paths (`--path`); the
//! core learns each from the edge's BIND probes. Probes are verified with
//! the connection's exporter key and never reach quinn.

use std::collections::{HashMap, VecDeque};
use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::event::{Event, ProbeDropped};

mod bond;
mod realtime;
mod shape;

use crate::dedup::{fingerprint, DuplicateFilter};
use crate::path::wire::MAX_PATH;
use crate::path::{
    PathId, PathKey, PathMode, PathMonitor, PathSet, PathState, PathView, Preference, Probe,
    ProbeBytes, ProbeRepr, Selector, Side, Sla, SlaSelector,
};
pub(super) use bond::is_bond;
pub use bond::{BondBudget, BondPathStatus, BondStatus};
pub use realtime::RealtimeStatus;
pub use shape::{PathSpec, BOND_SHARE, QUIC_SHARE};

/// Whether a datagram is a path probe (it may still be forged).
pub(super) use crate::path::looks_like_probe as is_probe;

/// One path: where it leaves from and goes to, and what it carried.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Route {
    /// The local address datagrams leave from (`None`: the kernel's
    /// choice).
    pub(super) local: Option<IpAddr>,
    /// The peer's address on this path.
    pub(super) remote: SocketAddr,
    pub(super) tx_bytes: u64,
    pub(super) rx_bytes: u64,
    /// Of `tx_bytes`, those sent as copies of another path's (duplicate).
    pub(super) copy_bytes: u64,
    /// Of `tx_bytes`, FEC repairs for another path's data (spread-fec).
    pub(super) repair_bytes: u64,
    /// The most this node sends on it, bits per second of IP packets (the
    /// edge's `up=`; on the core, what the edge's probes ask).
    pub(super) send_bps: Option<u64>,
    /// The most this node asks the peer to send on it (the edge's
    /// `down=`), carried by its probes.
    pub(super) ask_bps: Option<u64>,
}

impl Route {
    fn hop(&self) -> Hop {
        Hop {
            destination: self.remote,
            src_ip: self.local,
        }
    }

    fn new(local: Option<IpAddr>, remote: SocketAddr) -> Route {
        Route {
            local,
            remote,
            tx_bytes: 0,
            rx_bytes: 0,
            copy_bytes: 0,
            repair_bytes: 0,
            send_bps: None,
            ask_bps: None,
        }
    }
}

/// Where a datagram to a canonical address goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Hop {
    /// The peer's address on the path.
    pub destination: SocketAddr,
    /// The local address it leaves from (`None`: the kernel's choice).
    pub src_ip: Option<IpAddr>,
}

/// A peer reached over several paths.
#[derive(Debug)]
struct PeerPaths {
    canonical: SocketAddr,
    /// The local address quinn's connection uses (the core's), handed to
    /// quinn with every mapped datagram.
    canonical_local: Option<IpAddr>,
    side: Side,
    /// The lane's mode: the edge's `--path-mode`; the core follows the
    /// mode the edge's probes carry.
    mode: PathMode,
    routes: [Option<Route>; MAX_PATH as usize],
    /// The connection's probe key; `None` while no connection is up.
    key: Option<PathKey>,
    monitor: PathMonitor,
    selector: Selector,
    /// The data path: the selector's choice, or before any the path the
    /// handshake goes on.
    primary: Option<PathId>,
    /// Where datagrams that carry the tunnel's UDP flows go (duplicate:
    /// every path not down; else the primary).
    data: PathSet,
    /// Where FEC repairs go (spread-fec: another path that is up).
    repairs: Option<PathId>,
    /// Drops the second copy of what came over two paths (duplicate).
    filter: Option<DuplicateFilter>,
    /// The path a handshake goes on before probes say anything (the
    /// edge's: rotated after a failed attempt).
    fallback: Option<PathId>,
    /// Switches of earlier connections.
    switches_before: u64,
    views: Vec<PathView>,
    /// Seeds the duplicate filter of a lane that turns to duplicate (and
    /// its bond's controllers).
    filter_seed: u64,
    /// The lane's bond, in bond mode while the connection is up.
    bond: Option<Box<bond::Bond>>,
    /// The client's choice of a path for real-time datagrams, by the
    /// edge's SLA.
    sla: Option<SlaSelector>,
    /// The path real-time datagrams take (the client's SLA choice; on the
    /// server, the path the client's probes name); `None`: as the mode
    /// sends them.
    realtime: Option<PathId>,
    /// The client's clock (µs) on the newest probe the server followed
    /// for `realtime`.
    realtime_sent_us: Option<u32>,
}

impl PeerPaths {
    fn new(
        now: Instant,
        canonical: SocketAddr,
        side: Side,
        mode: PathMode,
        filter_seed: u64,
    ) -> PeerPaths {
        PeerPaths {
            canonical,
            canonical_local: None,
            side,
            mode,
            routes: [None; MAX_PATH as usize],
            key: None,
            monitor: PathMonitor::new(now, side, mode),
            selector: Selector::new(mode, Preference::Listed),
            primary: None,
            data: PathSet::EMPTY,
            repairs: None,
            filter: filter_for(mode, filter_seed),
            fallback: None,
            switches_before: 0,
            views: Vec::new(),
            filter_seed,
            bond: None,
            sla: None,
            realtime: None,
            realtime_sent_us: None,
        }
    }

    /// Follows the client's mode (the server's side).
    fn follow_mode(&mut self, mode: PathMode, events: &mut VecDeque<Event>) {
        if mode != self.mode {
            events.push_back(Event::ModeFollowed {
                canonical: self.canonical,
                mode,
            });
            self.mode = mode;
            self.selector.set_mode(mode);
            if self.filter.is_none() {
                self.filter = filter_for(mode, self.filter_seed);
            }
        }
    }

    fn switches(&self) -> u64 {
        self.switches_before + self.selector.switches()
    }

    /// Re-runs the selector after the monitor changed, and tells the bond.
    fn reselect(&mut self, now: Instant, events: &mut VecDeque<Event>) {
        self.select(now, events);
        self.sync_bond(now);
    }

    fn select(&mut self, now: Instant, events: &mut VecDeque<Event>) {
        while let Some(change) = self.monitor.poll_event() {
            events.push_back(Event::PathState {
                canonical: self.canonical,
                path: change.path,
                from: change.from,
                to: change.to,
            });
        }
        if self.key.is_none() {
            self.primary = self.fallback;
            self.data = PathSet::EMPTY;
            self.repairs = None;
            return;
        }
        self.monitor.views(&mut self.views);
        // At a connection's start, the path the handshake took (or, on
        // the server, every path) keeps the data until it has an echo:
        // the first path to answer is not taken for a better one.
        let first_answer = match self.primary {
            Some(primary) => self
                .views
                .iter()
                .find(|v| v.id == primary)
                .is_some_and(|v| v.state == PathState::Unknown),
            None => self.views.iter().any(|v| v.state == PathState::Unknown),
        };
        if first_answer && self.selector.current().is_none() {
            return;
        }
        let selection = self.selector.select(now, &self.views);
        self.data = selection.data;
        self.repairs = selection.repairs;
        let primary = selection.primary.or(self.fallback);
        if primary != self.primary {
            if let (Some(from), Some(to)) = (self.primary, primary) {
                events.push_back(Event::DataMoved {
                    canonical: self.canonical,
                    from,
                    to,
                });
            }
            self.primary = primary;
        }
        self.select_realtime(now, events);
    }
}

/// Every peer's paths.
#[derive(Debug, Default)]
pub(super) struct PathTable {
    /// Peers with paths (the edge's configured ones; on the core, edges
    /// that sent a verified probe).
    peers: Vec<PeerPaths>,
    /// The core's connections whose edge has not probed (yet), by token:
    /// their canonical address, quinn's local address and the key.
    pending: HashMap<u32, (SocketAddr, Option<IpAddr>, PathKey)>,
    /// Probes dropped: unknown token, bad tag, replays, unknown paths.
    pub(super) probes_dropped: u64,
    /// What happened to paths and probes, for the layer's events.
    pub(super) events: VecDeque<Event>,
    /// Seeds duplicate filters (each lane's from the next value).
    seed: u64,
    /// The time of the last call that gave one (the bonds' timers are
    /// computed from it).
    clock: Option<Instant>,
    /// Datagrams bonds put back in order, waiting for QUIC.
    bond_ready: bond::Ready,
    /// Whether any lane ever turned to bond mode: until then the bonds'
    /// polls (after every transmit) look at no peer.
    bonding: bool,
    /// The SLA of the edge's real-time classes (the strictest).
    sla: Option<Sla>,
}

impl PathTable {
    /// An empty table whose duplicate filters are seeded from `seed`.
    pub(super) fn with_seed(seed: u64) -> PathTable {
        PathTable {
            seed,
            ..PathTable::default()
        }
    }

    /// The seed of the next lane's duplicate filter (splitmix64).
    fn next_seed(&mut self) -> u64 {
        self.seed = self.seed.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.seed;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn peer(&self, canonical: SocketAddr) -> Option<&PeerPaths> {
        self.peers.iter().find(|p| p.canonical == canonical)
    }

    fn peer_mut(&mut self, canonical: SocketAddr) -> Option<&mut PeerPaths> {
        self.peers.iter_mut().find(|p| p.canonical == canonical)
    }

    /// Whether any peer has a path (the socket maps datagrams only then).
    pub(super) fn has_routes(&self) -> bool {
        self.peers
            .iter()
            .any(|p| p.routes.iter().any(Option::is_some))
    }

    /// The edge's paths to `canonical`, in preference order (path 1
    /// first). Replaces any paths it had.
    pub(super) fn configure(
        &mut self,
        now: Instant,
        canonical: SocketAddr,
        paths: &[PathSpec],
        mode: PathMode,
    ) {
        self.peers.retain(|p| p.canonical != canonical);
        let seed = self.next_seed();
        let mut peer = PeerPaths::new(now, canonical, Side::Client, mode, seed);
        for (i, spec) in paths.iter().enumerate().take(usize::from(MAX_PATH)) {
            let mut route = Route::new(Some(spec.local), spec.remote);
            route.send_bps = spec.up_bps;
            route.ask_bps = spec.down_bps;
            peer.routes[i] = Some(route);
        }
        peer.fallback = PathId::new(1).filter(|_| !paths.is_empty());
        peer.primary = peer.fallback;
        peer.sla = self.sla.map(SlaSelector::new);
        self.bonding |= mode == PathMode::Bond;
        self.peers.push(peer);
    }

    /// The SLA real-time datagrams' path is chosen by (the strictest of
    /// the edge's real-time classes'), or none: they go as the mode sends
    /// them. A changed SLA starts its choice over.
    pub(super) fn set_sla(&mut self, now: Instant, sla: Option<Sla>) {
        let sla = sla.filter(|s| !s.is_empty());
        if sla == self.sla {
            return;
        }
        self.sla = sla;
        for peer in self.peers.iter_mut().filter(|p| p.side == Side::Client) {
            peer.sla = sla.map(SlaSelector::new);
            if sla.is_none() && peer.realtime.take().is_some() {
                self.events.push_back(Event::RealtimeMoved {
                    canonical: peer.canonical,
                    to: None,
                    why: String::new(),
                });
            }
            peer.reselect(now, &mut self.events);
        }
    }

    /// A connection to `canonical` is up with `key`: probing starts (the
    /// client's configured paths; the server's as BIND probes arrive).
    pub(super) fn bind(
        &mut self,
        now: Instant,
        canonical: SocketAddr,
        local: Option<IpAddr>,
        key: PathKey,
        side: Side,
    ) {
        if side == Side::Server {
            // A peer without paths costs nothing per datagram: it joins
            // the table with its first verified probe.
            self.unbind(canonical);
            self.pending.insert(key.token(), (canonical, local, key));
            return;
        }
        let Some(peer) = self.peers.iter_mut().find(|p| p.canonical == canonical) else {
            // No --path for this peer: nothing to probe.
            return;
        };
        peer.switches_before = peer.switches();
        peer.canonical_local = local;
        peer.monitor = PathMonitor::new(now, peer.side, peer.mode);
        peer.selector = Selector::new(peer.mode, Preference::Listed);
        peer.sla = self.sla.map(SlaSelector::new);
        peer.realtime = None;
        for path in PathId::all() {
            if peer.routes[path.index()].is_some() {
                peer.monitor.add_path(now, path);
            }
        }
        peer.key = Some(key);
        peer.reselect(now, &mut self.events);
    }

    /// The connection to `canonical` is gone: probing stops; the server
    /// forgets the peer, the client keeps its paths and hands the next
    /// handshake to the path that carried data last.
    pub(super) fn unbind(&mut self, canonical: SocketAddr) {
        self.pending.retain(|_, (c, _, _)| *c != canonical);
        let Some(peer) = self.peer_mut(canonical) else {
            return;
        };
        if peer.side == Side::Server {
            self.peers.retain(|p| p.canonical != canonical);
            return;
        }
        peer.switches_before = peer.switches();
        peer.selector = Selector::new(peer.mode, Preference::Listed);
        peer.key = None;
        peer.bond = None;
        peer.realtime = None;
        peer.fallback = peer.primary.or(peer.fallback);
        peer.primary = peer.fallback;
    }

    /// A handshake to `canonical` failed: the next goes on the next path.
    pub(super) fn rotate_fallback(&mut self, canonical: SocketAddr) {
        let Some(peer) = self.peer_mut(canonical) else {
            return;
        };
        if peer.key.is_some() {
            return;
        }
        let current = peer.fallback.map_or(0, |p| p.get());
        let next = (1..=MAX_PATH)
            .map(|i| (current + i - 1) % MAX_PATH + 1)
            .find(|&n| peer.routes[usize::from(n) - 1].is_some());
        peer.fallback = next.and_then(PathId::new);
        peer.primary = peer.fallback;
    }

    /// Where a datagram quinn sends to `destination` goes: `None` for an
    /// address that is no peer's canonical one, or a peer with no path yet
    /// (sent unchanged). Counts `len` bytes on the path and tells the
    /// monitor the lane is sending. In duplicate mode, when `copy_len`
    /// bytes of it carry the tunnel's UDP flows, those also go on every
    /// other path in `copies` (their bytes counted there).
    pub(super) fn route(
        &mut self,
        now: Instant,
        destination: SocketAddr,
        len: usize,
        copy_len: usize,
        copies: &mut Vec<Hop>,
    ) -> Option<Hop> {
        let peer = self.peers.iter_mut().find(|p| p.canonical == destination)?;
        // Only real-time datagrams: on their own path, if they have one.
        let all_realtime = copy_len > 0 && copy_len == len;
        let own = if all_realtime {
            peer.realtime_path()
        } else {
            None
        };
        let path = own.or(peer.primary)?;
        let route = peer.routes[path.index()].as_mut()?;
        route.tx_bytes += len as u64;
        let hop = route.hop();
        if peer.key.is_some() {
            peer.monitor.on_data(now);
        }
        if copy_len > 0 && peer.mode == PathMode::Duplicate {
            for other in peer.data.iter().filter(|p| *p != path) {
                if let Some(route) = peer.routes[other.index()].as_mut() {
                    route.tx_bytes += copy_len as u64;
                    route.copy_bytes += copy_len as u64;
                    copies.push(route.hop());
                }
            }
        }
        Some(hop)
    }

    /// Where an FEC repair to `destination` goes: in spread-fec mode the
    /// repairs path (another that is up), else as [`PathTable::route`].
    pub(super) fn route_repair(
        &mut self,
        now: Instant,
        destination: SocketAddr,
        len: usize,
    ) -> Option<Hop> {
        let peer = self.peers.iter_mut().find(|p| p.canonical == destination)?;
        if peer.mode == PathMode::SpreadFec && peer.repairs != peer.primary {
            if let Some(route) = peer.repairs.and_then(|p| peer.routes[p.index()].as_mut()) {
                route.tx_bytes += len as u64;
                route.repair_bytes += len as u64;
                return Some(route.hop());
            }
        }
        self.route(now, destination, len, 0, &mut Vec::new())
    }

    /// Whether `datagram`, which came from the peer at `canonical`, is
    /// the first copy (always, outside duplicate mode).
    pub(super) fn first_copy(&mut self, canonical: SocketAddr, datagram: &[u8]) -> bool {
        let Some(filter) = self
            .peers
            .iter_mut()
            .find(|p| p.canonical == canonical)
            .and_then(|p| p.filter.as_mut())
        else {
            return true;
        };
        fingerprint(datagram).is_none_or(|f| filter.first_seen(f))
    }

    /// The mode of the paths to `canonical`, if it has any.
    pub(super) fn mode(&self, canonical: SocketAddr) -> Option<PathMode> {
        self.peer(canonical).map(|p| p.mode)
    }

    /// Whether datagrams from `canonical` go through the duplicate filter.
    pub(super) fn filters(&self, canonical: SocketAddr) -> bool {
        self.peer(canonical).is_some_and(|p| p.filter.is_some())
    }

    /// The canonical address (and quinn's local address) of a datagram
    /// from `from` to `dst_ip`, if `from` is a known path; counts `len`
    /// bytes on it.
    pub(super) fn map(
        &mut self,
        from: SocketAddr,
        dst_ip: Option<IpAddr>,
        len: usize,
    ) -> Option<(SocketAddr, Option<IpAddr>)> {
        let (index, path) = self.find(from, dst_ip)?;
        let peer = &mut self.peers[index];
        if let Some(route) = peer.routes[path.index()].as_mut() {
            route.rx_bytes += len as u64;
        }
        Some((peer.canonical, peer.canonical_local))
    }

    /// The peer and path whose remote address is `from` (and, when several
    /// share it, whose local address is `dst_ip`).
    fn find(&self, from: SocketAddr, dst_ip: Option<IpAddr>) -> Option<(usize, PathId)> {
        let mut found = None;
        for (index, peer) in self.peers.iter().enumerate() {
            for path in PathId::all() {
                let Some(route) = &peer.routes[path.index()] else {
                    continue;
                };
                if route.remote != from {
                    continue;
                }
                if dst_ip.is_none() || route.local.is_none() || route.local == dst_ip {
                    return Some((index, path));
                }
                found.get_or_insert((index, path));
            }
        }
        found
    }

    /// Takes a probe that arrived from `from` at `dst_ip`.
    pub(super) fn on_probe(
        &mut self,
        now: Instant,
        from: SocketAddr,
        dst_ip: Option<IpAddr>,
        datagram: &[u8],
    ) -> Result<(), ProbeDropped> {
        let result = self.take_probe(now, from, dst_ip, datagram);
        if let Err(e) = &result {
            self.probes_dropped += 1;
            self.events.push_back(Event::ProbeDropped {
                from,
                error: e.clone(),
            });
        }
        result
    }

    fn take_probe(
        &mut self,
        now: Instant,
        from: SocketAddr,
        dst_ip: Option<IpAddr>,
        datagram: &[u8],
    ) -> Result<(), ProbeDropped> {
        let probe = Probe::new_checked(datagram)?;
        let token = probe.token();
        let arrived = self.find(from, dst_ip);
        let known = self
            .peers
            .iter()
            .position(|p| p.key.as_ref().is_some_and(|k| k.token() == token));
        let index = match known {
            Some(index) => index,
            None => {
                let (_, _, key) = self
                    .pending
                    .get(&token)
                    .ok_or(ProbeDropped::UnknownToken(token))?;
                ProbeRepr::parse(&probe, key).map_err(ProbeDropped::Verify)?;
                let Some((canonical, local, key)) = self.pending.remove(&token) else {
                    return Err(ProbeDropped::UnknownToken(token));
                };
                let seed = self.next_seed();
                let mut peer =
                    PeerPaths::new(now, canonical, Side::Server, PathMode::Failover, seed);
                peer.canonical_local = local;
                peer.key = Some(key);
                self.peers.push(peer);
                self.peers.len() - 1
            }
        };
        let peer = &mut self.peers[index];
        let Some(key) = &peer.key else {
            return Err(ProbeDropped::UnknownToken(token));
        };
        let repr = ProbeRepr::parse(&probe, key).map_err(ProbeDropped::Verify)?;
        let path = match peer.side {
            Side::Client => match arrived {
                Some((i, path)) if i == index => path,
                _ => return Err(ProbeDropped::UnknownAddress(from)),
            },
            Side::Server => repr.path,
        };
        peer.monitor.on_probe(now, path, &repr)?;
        if peer.side == Side::Server {
            peer.follow_mode(repr.mode, &mut self.events);
            peer.follow_realtime(path, (repr.realtime, repr.sent_us), &mut self.events);
            self.bonding |= repr.mode == PathMode::Bond;
        }
        if peer.side == Side::Server && repr.bind {
            let route = &mut peer.routes[path.index()];
            let moved = route.is_some_and(|r| r.remote != from || r.local != dst_ip);
            if route.is_none() || moved {
                if moved {
                    peer.monitor.rebound(path);
                }
                self.events.push_back(Event::PathBound {
                    canonical: peer.canonical,
                    path,
                    remote: from,
                });
                *route = Some(Route::new(dst_ip, from));
            }
        }
        if peer.side == Side::Server {
            if let Some(route) = peer.routes[path.index()].as_mut() {
                route.send_bps = repr.rate_kbit.and_then(shape::from_kbit);
            }
        }
        peer.reselect(now, &mut self.events);
        Ok(())
    }

    /// The probes due at `now`, each with where it goes; updates states
    /// and selections. Returns when to look again.
    pub(super) fn poll(
        &mut self,
        now: Instant,
        out: &mut Vec<(Hop, ProbeBytes)>,
    ) -> Option<Instant> {
        let mut next: Option<Instant> = None;
        for peer in &mut self.peers {
            let Some(key) = peer.key.clone() else {
                continue;
            };
            peer.monitor.handle_timeout(now);
            while let Some(mut probe) = peer.monitor.poll_due(now) {
                if let Some(route) = &mut peer.routes[probe.path.index()] {
                    probe.rate_kbit = route.ask_bps.map(shape::to_kbit);
                    probe.realtime = peer.sla.is_some() && peer.realtime == Some(probe.path);
                    let bytes = probe.emit(&key);
                    route.tx_bytes += bytes.len() as u64;
                    out.push((route.hop(), bytes));
                }
            }
            peer.reselect(now, &mut self.events);
            if let Some(at) = peer.monitor.next_timeout() {
                next = Some(next.map_or(at, |n| n.min(at)));
            }
        }
        next
    }

    /// When [`PathTable::poll`] has something to do next, if ever.
    pub(super) fn next_timeout(&self) -> Option<Instant> {
        self.peers
            .iter()
            .filter(|p| p.key.is_some())
            .filter_map(|p| p.monitor.next_timeout())
            .min()
    }

    /// What the paths to `canonical` do, for status.
    pub(super) fn status(&self, canonical: SocketAddr) -> Option<PathsStatus> {
        let peer = self.peer(canonical)?;
        let paths = PathId::all()
            .filter_map(|path| {
                let route = peer.routes[path.index()]?;
                let ms = |d: Duration| d.as_secs_f64() * 1e3;
                let loss = peer.monitor.loss(path).unwrap_or_default();
                let stats = peer.monitor.stats(path).unwrap_or_default();
                Some(PathStatus {
                    number: path.get(),
                    local: route.local.map(|ip| ip.to_string()),
                    remote: route.remote.to_string(),
                    state: peer
                        .monitor
                        .state(path)
                        .filter(|_| peer.key.is_some())
                        .map_or("unknown", PathState::name)
                        .to_owned(),
                    rtt_ms: peer.monitor.rtt(path).map(ms),
                    jitter_ms: peer.monitor.jitter(path).map(ms),
                    loss_to_peer_percent: loss.to_peer.map(|l| l * 100.0),
                    loss_from_peer_percent: loss.from_peer.map(|l| l * 100.0),
                    data: peer.primary == Some(path),
                    sent_bytes: route.tx_bytes,
                    received_bytes: route.rx_bytes,
                    probes_sent: stats.sent,
                    probes_received: stats.received,
                    copy_bytes: route.copy_bytes,
                    repair_bytes: route.repair_bytes,
                    repairs: peer.mode == PathMode::SpreadFec
                        && peer.repairs == Some(path)
                        && peer.primary != Some(path),
                    bond: Self::bond_status(peer, path),
                    send_mbps: route.send_bps.map(|b| b as f64 / 1e6),
                    realtime: peer.realtime == Some(path),
                })
            })
            .collect();
        Some(PathsStatus {
            mode: peer.mode.name().to_owned(),
            duplicates_dropped: peer.filter.as_ref().map_or(0, DuplicateFilter::duplicates),
            switches: peer.switches(),
            probes_dropped: self.probes_dropped,
            bond: Self::bond_summary(peer),
            realtime: peer.realtime_status(),
            paths,
        })
    }
}

/// A duplicate filter for a lane in `mode` (none outside duplicate).
fn filter_for(mode: PathMode, seed: u64) -> Option<DuplicateFilter> {
    (mode == PathMode::Duplicate).then(|| DuplicateFilter::new(seed))
}

/// A peer's paths as `/status` shows them.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct PathsStatus {
    /// How the paths are used (`failover`, `duplicate`, `spread-fec`,
    /// `bond`).
    pub mode: String,
    /// Datagrams that came a second time, over another path, and were
    /// dropped (duplicate).
    #[serde(default)]
    pub duplicates_dropped: u64,
    /// Times the data path changed from one path to another.
    pub switches: u64,
    /// Probes this node dropped (unknown connection, bad tag, replays),
    /// all peers.
    pub probes_dropped: u64,
    /// The bond (bond mode, while the connection is up).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bond: Option<BondStatus>,
    /// Where real-time datagrams go when they have a path of their own
    /// (an SLA's choice).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub realtime: Option<RealtimeStatus>,
    /// The paths, by number.
    pub paths: Vec<PathStatus>,
}

/// One path as `/status` shows it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct PathStatus {
    /// The path's number (the edge's `--path` order, from 1).
    pub number: u8,
    /// The local address it leaves from.
    pub local: Option<String>,
    /// The peer's address on it.
    pub remote: String,
    /// `unknown`, `up`, `suspect` or `down`.
    pub state: String,
    /// Smoothed RTT of the probes, milliseconds.
    pub rtt_ms: Option<f64>,
    /// Interarrival jitter of the peer's probes (RFC 3550), milliseconds.
    #[serde(default)]
    pub jitter_ms: Option<f64>,
    /// Loss of this node's probes toward the peer, percent.
    pub loss_to_peer_percent: Option<f64>,
    /// Loss of the peer's probes toward this node, percent.
    pub loss_from_peer_percent: Option<f64>,
    /// Whether the path carries this node's data now.
    pub data: bool,
    /// Bytes sent on the path (datagrams and probes).
    pub sent_bytes: u64,
    /// Bytes received on it.
    pub received_bytes: u64,
    /// Probes sent on it.
    pub probes_sent: u64,
    /// Probes accepted from it.
    pub probes_received: u64,
    /// Of `sent_bytes`, those sent as copies of the data path's
    /// (duplicate).
    #[serde(default)]
    pub copy_bytes: u64,
    /// Of `sent_bytes`, FEC repairs for the data path's datagrams
    /// (spread-fec).
    #[serde(default)]
    pub repair_bytes: u64,
    /// Whether the path carries this node's FEC repairs now (spread-fec).
    #[serde(default)]
    pub repairs: bool,
    /// The most this node sends on it, Mbit/s of IP packets: the edge's
    /// declared `up=` rate, or on the core what the edge asked (`down=`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub send_mbps: Option<f64>,
    /// What the bond sent on it (bond mode).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bond: Option<BondPathStatus>,
    /// Whether real-time datagrams take this path (an SLA's choice).
    #[serde(default)]
    pub realtime: bool,
}

#[cfg(test)]
mod tests;
