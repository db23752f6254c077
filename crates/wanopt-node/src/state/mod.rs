//! What a node knows about itself: its role, its tunnel peers and its flows.
//! The control plane renders this; the data plane updates it.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use serde::{Deserialize, Serialize};

use crate::flow::{reduction, Flow, FlowTable};
use crate::peer_book::{PeerBook, PeerRecord};
use crate::reduce::{CacheReport, Caches};
use crate::transport::datagram::{DatagramHandle, DuplicationMode, PathSample};
use crate::transport::handshakes::Handshakes;
use crate::transport::identity::{peer_key, PublicKey};
use crate::transport::model;
use crate::transport::tunnel::{Congestion, ReceiveBudget, Transport};

mod flow_why;
mod status;

pub use flow_why::{DirectionWhy, FlowDetail};
pub use status::{BbrStatus, ConfiguredPeerStatus, PeerStatus, Status};

/// A reload asked for over the control API: the reply is what changed,
/// or why nothing did.
pub(crate) type ReloadRequest = tokio::sync::oneshot::Sender<Result<String, String>>;

/// A node's role.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// Intercepts clients and opens tunnel streams.
    Edge,
    /// Accepts tunnel streams and connects to servers.
    Core,
    /// Both: dials some peers and accepts others (`wanopt run`).
    #[serde(rename = "edge+core")]
    EdgeCore,
}

impl Role {
    /// Its name in `/status`, `/metrics` and logs.
    pub fn name(self) -> &'static str {
        match self {
            Role::Edge => "edge",
            Role::Core => "core",
            Role::EdgeCore => "edge+core",
        }
    }
}

#[derive(Debug)]
struct PeerEntry {
    connection: Option<quinn::Connection>,
    key: Option<PublicKey>,
    since: Instant,
    reconnects: u64,
    /// Dials of this peer that failed (handshakes that timed out or were
    /// refused), counted while it is unreachable too.
    dial_failures: u64,
    ever_up: bool,
    last_error: Option<String>,
    last_sample: Option<(Instant, u64, u64)>,
    tx_bps: f64,
    rx_bps: f64,
    /// What carries the tunnel, and why (kept while it is down).
    transport: Option<(Transport, String)>,
    /// The configured peer the tunnel is to, once its key is known.
    record: Option<Arc<PeerRecord>>,
    /// The controller's full rounds at the last sample, and whether the
    /// tunnel's sender waited for its window since the one before.
    filled: Option<(u64, bool)>,
}

/// Whether a tunnel to the configured peer `record` is up in `peers`.
fn any_up(peers: &BTreeMap<SocketAddr, PeerEntry>, record: &Arc<PeerRecord>) -> bool {
    peers.values().any(|e| {
        e.connection.is_some() && e.record.as_ref().is_some_and(|o| Arc::ptr_eq(o, record))
    })
}

/// Shared state of a running node.
#[derive(Debug)]
pub struct NodeState {
    /// Role.
    pub role: Role,
    /// Congestion controller of the tunnel.
    pub congestion: Congestion,
    /// Live flows and totals.
    pub flows: Arc<FlowTable>,
    /// The byte caches of the `reduce` service (`None` with `--no-reduce`).
    pub caches: Option<Arc<Caches>>,
    /// The datagram layer under the tunnel (the endpoint's socket): tail
    /// duplication, FEC, paths.
    pub datagrams: DatagramHandle,
    /// Incoming tunnel handshakes (a core's; an edge accepts none).
    pub handshakes: Arc<Handshakes>,
    /// UDP flow counters.
    pub udp: Arc<crate::flow::udp::UdpTotals>,
    /// The flow receive windows granted from the node-wide budget.
    window_budget: std::sync::OnceLock<Arc<ReceiveBudget>>,
    /// Where `POST /reload` asks for a reload, when the node can reload.
    reloads: std::sync::OnceLock<tokio::sync::mpsc::Sender<ReloadRequest>>,
    started: Instant,
    peers: Mutex<BTreeMap<SocketAddr, PeerEntry>>,
    /// The peers of the configuration, up or down.
    pub book: PeerBook,
    /// The configuration's hash and the reloads so far.
    config: Mutex<ConfigRecord>,
    /// Set when the node begins to shut down (no new tunnels or flows).
    closing: std::sync::atomic::AtomicBool,
}

/// The configuration a node runs, and its reloads.
#[derive(Debug, Default)]
struct ConfigRecord {
    hash: Option<String>,
    reloads: u64,
    failures: u64,
}

impl NodeState {
    /// A fresh state for a node of `role`.
    pub fn new(
        role: Role,
        congestion: Congestion,
        duplication: DuplicationMode,
        caches: Option<Arc<Caches>>,
    ) -> Arc<NodeState> {
        Arc::new(NodeState {
            role,
            congestion,
            flows: Arc::new(FlowTable::default()),
            caches,
            datagrams: DatagramHandle::new(duplication),
            handshakes: Arc::default(),
            udp: Arc::default(),
            window_budget: std::sync::OnceLock::new(),
            reloads: std::sync::OnceLock::new(),
            started: Instant::now(),
            peers: Mutex::new(BTreeMap::new()),
            book: PeerBook::default(),
            config: Mutex::default(),
            closing: std::sync::atomic::AtomicBool::new(false),
        })
    }

    /// The budget of flow receive windows the node's tunnels grant from,
    /// shown in `/status` and `/metrics`.
    pub fn set_window_budget(&self, budget: Arc<ReceiveBudget>) {
        let _ = self.window_budget.set(budget);
    }

    /// Lets `POST /reload` ask for reloads on `requests`.
    pub(crate) fn set_reloads(&self, requests: tokio::sync::mpsc::Sender<ReloadRequest>) {
        let _ = self.reloads.set(requests);
    }

    /// Where reloads are asked for, when the node can reload.
    pub(crate) fn reloads(&self) -> Option<&tokio::sync::mpsc::Sender<ReloadRequest>> {
        self.reloads.get()
    }

    fn peers(&self) -> std::sync::MutexGuard<'_, BTreeMap<SocketAddr, PeerEntry>> {
        self.peers.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Records that the tunnel to `address` is down (or connecting).
    pub fn peer_down(&self, address: SocketAddr, error: Option<String>) {
        let mut peers = self.peers();
        let entry = peers.entry(address).or_insert_with(|| PeerEntry {
            connection: None,
            key: None,
            since: Instant::now(),
            reconnects: 0,
            dial_failures: 0,
            ever_up: false,
            last_error: None,
            last_sample: None,
            tx_bps: 0.0,
            rx_bps: 0.0,
            transport: None,
            record: None,
            filled: None,
        });
        let was_up = entry.connection.take().is_some();
        if was_up {
            entry.since = Instant::now();
        }
        let record = entry.record.clone().filter(|_| was_up);
        let error_text = error.clone();
        if error.is_some() {
            entry.last_error = error;
        }
        entry.tx_bps = 0.0;
        entry.rx_bps = 0.0;
        if let Some(record) = record.filter(|r| !any_up(&peers, r)) {
            record.down(error_text.as_deref().unwrap_or("the tunnel closed"));
        }
    }

    /// Another host (IP address) from which a tunnel authenticated as
    /// `key` is up, besides `address`'s (one edge's second tunnel, over
    /// TCP beside QUIC, comes from its own IP and is not counted).
    pub fn key_also_at(&self, key: PublicKey, address: SocketAddr) -> Option<SocketAddr> {
        self.peers()
            .iter()
            .find(|(at, e)| at.ip() != address.ip() && e.key == Some(key) && e.connection.is_some())
            .map(|(at, _)| *at)
    }

    /// Records a dial of the peer at `address` that failed, and why.
    pub fn dial_failed(&self, address: SocketAddr, error: String) {
        self.peer_down(address, Some(error));
        if let Some(entry) = self.peers().get_mut(&address) {
            entry.dial_failures += 1;
        }
    }

    /// Records a tunnel that came up, `over` UDP or TCP, and why; how
    /// logs name the peer (its configured name, or its key).
    pub fn peer_up(
        &self,
        connection: &quinn::Connection,
        over: Transport,
        why: &str,
    ) -> Option<Arc<str>> {
        let address = connection.remote_address();
        let key = peer_key(connection);
        let record = key.and_then(|k| self.book.by_key(&k));
        if let Some(record) = &record {
            record.up();
        }
        let label = record.as_ref().map(|r| r.label());
        let mut peers = self.peers();
        let reconnects = peers
            .get(&address)
            .map_or(0, |e| e.reconnects + u64::from(e.ever_up));
        let dial_failures = peers.get(&address).map_or(0, |e| e.dial_failures);
        peers.insert(
            address,
            PeerEntry {
                connection: Some(connection.clone()),
                key,
                since: Instant::now(),
                reconnects,
                dial_failures,
                ever_up: true,
                last_error: None,
                last_sample: None,
                tx_bps: 0.0,
                rx_bps: 0.0,
                transport: Some((over, why.to_owned())),
                record,
                filled: None,
            },
        );
        label
    }

    /// Counts `flow`, carried by the tunnel at `address`, to its
    /// configured peer.
    pub fn count_flow(&self, flow: &Flow, address: SocketAddr) {
        let record = self.peers().get(&address).and_then(|e| e.record.clone());
        if let Some(record) = record {
            flow.count_to(record.traffic.clone());
        }
    }

    /// How logs name the peer whose tunnel is at `address`: its
    /// configured name or key, and the address.
    pub fn peer_label(&self, address: SocketAddr) -> String {
        match self.peers().get(&address).and_then(|e| e.record.clone()) {
            Some(record) => format!("{} at {address}", record.label()),
            None => address.to_string(),
        }
    }

    /// Records the configuration the node runs now: at start, and after
    /// each reload that applied (`reloaded`).
    pub fn config_applied(&self, hash: &str, reloaded: bool) {
        let mut config = self.config.lock().unwrap_or_else(|e| e.into_inner());
        config.hash = Some(hash.to_owned());
        config.reloads += u64::from(reloaded);
    }

    /// Counts a reload that was refused.
    pub fn reload_refused(&self) {
        self.config
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .failures += 1;
    }

    /// Closes the tunnels of the peers whose keys are `keys` (a reload
    /// removed them); returns how many.
    pub fn close_peers(&self, keys: &[PublicKey], reason: &[u8]) -> usize {
        let conns: Vec<quinn::Connection> = self
            .peers()
            .values()
            .filter(|e| e.key.is_some_and(|k| keys.contains(&k)))
            .filter_map(|e| e.connection.clone())
            .collect();
        for conn in &conns {
            conn.close(
                quinn::VarInt::from_u32(wanopt_proto::codes::SHUTDOWN),
                reason,
            );
        }
        conns.len()
    }

    /// Forgets the peer at `address` if its tunnel is not up (a reload
    /// removed it while it was down).
    pub fn forget_down_peer(&self, address: SocketAddr) {
        let mut peers = self.peers();
        if peers.get(&address).is_some_and(|e| e.connection.is_none()) {
            peers.remove(&address);
        }
    }

    /// Forgets a core-side peer whose connection ended.
    pub fn peer_gone(&self, connection: &quinn::Connection) {
        let mut peers = self.peers();
        if let Some(entry) = peers.get(&connection.remote_address()) {
            if entry
                .connection
                .as_ref()
                .is_some_and(|c| c.stable_id() == connection.stable_id())
            {
                let gone = peers.remove(&connection.remote_address());
                let record = gone.and_then(|e| e.record);
                if let Some(record) = record.filter(|r| !any_up(&peers, r)) {
                    record.down("the tunnel closed");
                }
                self.datagrams.remove_path(connection.remote_address());
                self.datagrams.unbind_paths(connection.remote_address());
            }
        }
    }

    /// Refreshes the peers' measured rates; call about once a second.
    pub fn sample_peers(&self) {
        let now = Instant::now();
        for entry in self.peers().values_mut() {
            let Some(conn) = &entry.connection else {
                continue;
            };
            let stats = conn.stats();
            let (tx, rx) = (stats.udp_tx.bytes, stats.udp_rx.bytes);
            if let Some((at, last_tx, last_rx)) = entry.last_sample {
                let secs = now.saturating_duration_since(at).as_secs_f64();
                if secs > 0.0 {
                    entry.tx_bps = tx.saturating_sub(last_tx) as f64 * 8.0 / secs;
                    entry.rx_bps = rx.saturating_sub(last_rx) as f64 * 8.0 / secs;
                }
            }
            entry.last_sample = Some((now, tx, rx));
            if let Some(bbr) = model::bbr(conn) {
                let before = entry.filled.map_or(bbr.filled_rounds, |(n, _)| n);
                let waited = bbr.filled_rounds > before
                    || bbr
                        .sender_blocked
                        .load(std::sync::atomic::Ordering::Relaxed);
                entry.filled = Some((bbr.filled_rounds, waited));
            }
        }
    }

    /// Re-decides tail duplication on each peer's path; call about every
    /// [`crate::transport::datagram::SAMPLE_INTERVAL`].
    pub fn sample_duplication(&self) {
        for (address, entry) in self.peers().iter() {
            let Some(conn) = &entry.connection else {
                continue;
            };
            let bbr = model::bbr(conn);
            let stats = conn.stats();
            self.datagrams.update_path(
                *address,
                &PathSample {
                    sent_packets: stats.path.sent_packets,
                    lost_packets: stats.path.lost_packets,
                    srtt: stats.path.rtt,
                    rate_estimate: model::estimated_rate_bps(conn).map(|bps| bps / 8.0),
                    udp_tx_bytes: stats.udp_tx.bytes,
                    udp_rx_bytes: stats.udp_rx.bytes,
                    mtu: stats.path.current_mtu,
                    datagrams_sent: stats.frame_tx.datagram,
                    congested_rounds: bbr.as_ref().map(|b| b.congested_rounds),
                    filled_rounds: bbr.as_ref().map(|b| b.filled_rounds),
                    random_loss: bbr.as_ref().map(|b| b.random_loss),
                    startup: bbr
                        .as_ref()
                        .is_some_and(|b| b.mode == wanopt_cc::Mode::Startup),
                },
            );
            if let Some(bbr) = bbr {
                self.datagrams.watch_sender(*address, bbr.sender_blocked);
                self.datagrams.watch_repairs(*address, bbr.repaired);
                self.datagrams.watch_bond(*address, bbr.bond);
            }
        }
    }

    /// What `/cache` returns: every open cache, or `enabled: false` with
    /// `--no-reduce`.
    pub fn cache_report(&self) -> CacheReport {
        match &self.caches {
            Some(caches) => caches.report(),
            None => CacheReport {
                enabled: false,
                dir: None,
                peers: Vec::new(),
                clears: 0,
            },
        }
    }

    /// Marks the node as shutting down: [`NodeState::health`] says so.
    pub fn set_closing(&self) {
        self.closing
            .store(true, std::sync::atomic::Ordering::Relaxed);
    }

    /// What `GET /health` answers: a core (or `run` node) is healthy
    /// while it accepts tunnels, that is until it begins to shut down; an
    /// edge while a tunnel to a core is up (what a VRRP pair tracks).
    /// `Err` holds the one-line reason.
    pub fn health(&self) -> Result<&'static str, &'static str> {
        if self.closing.load(std::sync::atomic::Ordering::Relaxed) {
            return Err("shutting down: no new tunnels or flows");
        }
        match self.role {
            Role::Core | Role::EdgeCore => Ok("accepting tunnels"),
            Role::Edge if self.tunnel_up() => Ok("tunnel up"),
            Role::Edge => Err("no tunnel to a core is up"),
        }
    }

    /// Whether any tunnel is up.
    pub fn tunnel_up(&self) -> bool {
        self.peers().values().any(|e| e.connection.is_some())
    }

    /// The full status.
    pub fn status(&self) -> Status {
        let now = Instant::now();
        let peers: Vec<PeerStatus> = self
            .peers()
            .iter()
            .map(|(address, e)| {
                let stats = e.connection.as_ref().map(|c| c.stats());
                let rtt = stats.as_ref().map(|s| s.path.rtt);
                let bbr = e.connection.as_ref().and_then(BbrStatus::of);
                let over = e.transport.as_ref().map(|(t, _)| *t);
                let layered = e
                    .connection
                    .as_ref()
                    .filter(|_| over != Some(Transport::Tcp));
                PeerStatus {
                    address: address.to_string(),
                    state: if e.connection.is_some() { "up" } else { "down" }.into(),
                    key: e.key.map(|k| k.to_string()),
                    rtt_ms: rtt.map(|r| r.as_secs_f64() * 1e3),
                    bandwidth_estimate_mbps: bbr.as_ref().map(|b| b.bandwidth_mbps).or_else(|| {
                        stats
                            .as_ref()
                            .map(|s| model::window_rate_bps(s.path.cwnd, s.path.rtt) / 1e6)
                    }),
                    bbr,
                    send_rate_mbps: e.tx_bps / 1e6,
                    receive_rate_mbps: e.rx_bps / 1e6,
                    cwnd_bytes: stats.as_ref().map(|s| s.path.cwnd),
                    mtu: stats.as_ref().map(|s| s.path.current_mtu),
                    sent_packets: stats.as_ref().map(|s| s.path.sent_packets),
                    lost_packets: stats.as_ref().map(|s| s.path.lost_packets),
                    datagrams_expired: stats.as_ref().map(|s| s.datagrams_expired),
                    congestion_events: stats.as_ref().map(|s| s.path.congestion_events),
                    duplication: layered.map(|_| self.datagrams.status(*address)),
                    fec: layered.map(|_| self.datagrams.fec_status(*address)),
                    transport: over.map(|t| t.name().to_owned()),
                    transport_why: e.transport.as_ref().map(|(_, why)| why.clone()),
                    paths: self.datagrams.paths_status(*address),
                    state_secs: now.saturating_duration_since(e.since).as_secs_f64(),
                    reconnects: e.reconnects,
                    dial_failures: e.dial_failures,
                    last_error: e.last_error.clone(),
                    window_full: e.filled.map(|(_, full)| full),
                }
            })
            .collect();
        let live = self.flows.live_by_peer();
        let configured_peers = self
            .book
            .list()
            .iter()
            .map(|r| ConfiguredPeerStatus::of(r, &peers, &live))
            .collect();
        let config = self.config.lock().unwrap_or_else(|e| e.into_inner());
        let (reloads, reload_failures, config_hash) =
            (config.reloads, config.failures, config.hash.clone());
        drop(config);
        let bytes = self.flows.bytes();
        let totals = &self.flows.totals;
        let budget = self.caches.as_ref().map(|c| c.budget());
        Status {
            role: self.role,
            version: env!("CARGO_PKG_VERSION").to_owned(),
            uptime_secs: now.saturating_duration_since(self.started).as_secs_f64(),
            tunnel: if peers.iter().any(|p| p.state == "up") {
                "up"
            } else {
                "down"
            }
            .into(),
            congestion: self.congestion,
            peers,
            configured_peers,
            reloads,
            reload_failures,
            config_hash,
            flows_active: self.flows.active() as u64,
            flows_total: totals.flows.load(Ordering::Relaxed),
            flows_refused: totals.refused.load(Ordering::Relaxed),
            flows_passed_through: totals.passed_through.load(Ordering::Relaxed),
            flows_limited: totals.limited.load(Ordering::Relaxed),
            flow_resets: totals
                .resets
                .snapshot()
                .into_iter()
                .map(|(reason, n)| (reason.name().to_owned(), n))
                .collect(),
            udp: self.udp.snapshot(),
            window_granted_bytes: self.window_budget.get().map_or(0, |b| b.granted()),
            window_budget_bytes: self.window_budget.get().map_or(0, |b| b.limit()),
            bytes_to_server: bytes.to_server,
            bytes_to_client: bytes.to_client,
            reduce: self.caches.is_some(),
            flows_reduced: totals.reduced.load(Ordering::Relaxed),
            wan_bytes_to_server: bytes.wan_to_server,
            wan_bytes_to_client: bytes.wan_to_client,
            reduction: reduction(
                bytes.to_server + bytes.to_client,
                bytes.wan_to_server + bytes.wan_to_client,
            ),
            references: bytes.reduce.references,
            cache_hits: bytes.reduce.cache_hits,
            cache_misses: bytes.reduce.cache_misses,
            repairs: bytes.reduce.repairs,
            pieces: bytes.reduce.pieces,
            compressor_bytes: bytes.reduce.compressor_bytes,
            decompressor_bytes: bytes.reduce.decompressor_bytes,
            compressor_budget: budget.map_or(0, |b| b.limit()),
            compressor_reserved: budget.map_or(0, |b| b.reserved()),
            compressor_step_downs: budget.map_or(0, |b| b.step_downs()),
        }
    }
}
