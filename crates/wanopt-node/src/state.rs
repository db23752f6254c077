//! What a node knows about itself: its role, its tunnel peers and its flows.
//! The control plane renders this; the data plane updates it.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use serde::{Deserialize, Serialize};

use crate::flow::{reduction, FlowTable};
use crate::reduce::{CacheReport, Caches};
use crate::transport::datagram::{
    DatagramHandle, DuplicationMode, DuplicationStatus, FecStatus, PathSample, PathsStatus,
};
use crate::transport::handshakes::Handshakes;
use crate::transport::identity::{peer_key, PublicKey};
use crate::transport::model;
use crate::transport::tunnel::{Congestion, ReceiveBudget, Transport};

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
    /// Set when the node begins to shut down (no new tunnels or flows).
    closing: std::sync::atomic::AtomicBool,
}

/// One tunnel peer as `/status` shows it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PeerStatus {
    /// The peer's UDP address.
    pub address: String,
    /// `up`, or `down` while (re)connecting.
    pub state: String,
    /// The peer's pinned public key, once authenticated.
    pub key: Option<String>,
    /// Smoothed round-trip time, milliseconds.
    pub rtt_ms: Option<f64>,
    /// The controller's estimate of what the path carries, Mbit/s of UDP
    /// payload: BBR's bottleneck bandwidth estimate, or the window over
    /// the RTT for CUBIC and NewReno.
    pub bandwidth_estimate_mbps: Option<f64>,
    /// BBR's model of the path (the sending direction), when the tunnel
    /// runs wanopt's BBR.
    #[serde(default)]
    pub bbr: Option<BbrStatus>,
    /// Measured UDP send rate over the last second, Mbit/s.
    pub send_rate_mbps: f64,
    /// Measured UDP receive rate over the last second, Mbit/s.
    pub receive_rate_mbps: f64,
    /// Congestion window, bytes.
    pub cwnd_bytes: Option<u64>,
    /// Current path MTU (UDP payload), bytes.
    pub mtu: Option<u16>,
    /// Packets sent on the path.
    pub sent_packets: Option<u64>,
    /// Packets declared lost on the path.
    pub lost_packets: Option<u64>,
    /// UDP flows' datagrams dropped unsent after waiting
    /// [`crate::transport::tunnel::UDP_MAX_QUEUE_DELAY`].
    #[serde(default)]
    pub datagrams_expired: Option<u64>,
    /// Congestion events.
    pub congestion_events: Option<u64>,
    /// Tail duplication on this path (what this node sends).
    #[serde(default)]
    pub duplication: Option<DuplicationStatus>,
    /// Continuous FEC on this path, both directions.
    #[serde(default)]
    pub fec: Option<FecStatus>,
    /// The WAN paths to the peer (`--path`), when it has several.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub paths: Option<PathsStatus>,
    /// Seconds in the current state.
    pub state_secs: f64,
    /// Reconnections so far.
    pub reconnects: u64,
    /// Dials that failed so far (while the peer is unreachable too).
    #[serde(default)]
    pub dial_failures: u64,
    /// The last connection error, if any.
    pub last_error: Option<String>,
    /// What carries the tunnel: `quic` (UDP) or `tcp`.
    #[serde(default)]
    pub transport: Option<String>,
    /// Why that transport (the edge's choice, as it said it).
    #[serde(default)]
    pub transport_why: Option<String>,
}

/// wanopt's BBR as it models the path in this node's sending direction.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct BbrStatus {
    /// `startup`, `drain`, `probe_bw` or `probe_rtt`.
    pub mode: String,
    /// Bottleneck bandwidth estimate, Mbit/s of UDP payload (0 before the
    /// first delivery-rate sample).
    pub bandwidth_mbps: f64,
    /// The rate the sender is paced at, Mbit/s.
    pub pacing_mbps: Option<f64>,
    /// Propagation delay estimate (the windowed min RTT), milliseconds.
    pub min_rtt_ms: Option<f64>,
    /// Whether the path's rate is judged to move (a cellular link).
    #[serde(default)]
    pub moving: bool,
}

impl BbrStatus {
    /// The BBR state of `conn`'s controller, if it is wanopt's BBR.
    fn of(conn: &quinn::Connection) -> Option<BbrStatus> {
        let bbr = model::bbr(conn)?;
        let mbps = |bytes_per_sec: u64| bytes_per_sec as f64 * 8.0 / 1e6;
        Some(BbrStatus {
            mode: bbr.mode.name().to_owned(),
            bandwidth_mbps: mbps(bbr.bandwidth),
            pacing_mbps: bbr.pacing_rate.map(mbps),
            min_rtt_ms: bbr.min_rtt.map(|r| r.as_secs_f64() * 1e3),
            moving: bbr.moving,
        })
    }
}

/// What `/status` returns.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Status {
    /// `edge` or `core`.
    pub role: Role,
    /// wanopt version.
    pub version: String,
    /// Seconds since the node started.
    pub uptime_secs: f64,
    /// `up` when at least one tunnel is up.
    pub tunnel: String,
    /// Congestion controller.
    pub congestion: Congestion,
    /// Tunnel peers.
    pub peers: Vec<PeerStatus>,
    /// Live flows.
    pub flows_active: u64,
    /// Flows since start.
    pub flows_total: u64,
    /// Flows refused or reset before data flowed end to end.
    pub flows_refused: u64,
    /// Flows passed straight through.
    pub flows_passed_through: u64,
    /// Flows refused by `--max-flows` or `--max-flows-per-source`.
    #[serde(default)]
    pub flows_limited: u64,
    /// Flows reset since start, by reason (`lan`, `tunnel`, `codec`,
    /// `peer_codec`, `idle`, `policy`, `tunnel_lost`; see
    /// [`crate::flow::ResetReason`]).
    #[serde(default)]
    pub flow_resets: BTreeMap<String, u64>,
    /// Flow receive windows granted now, bytes (`--window-budget`).
    #[serde(default)]
    pub window_granted_bytes: u64,
    /// The node-wide budget of flow receive windows, bytes.
    #[serde(default)]
    pub window_budget_bytes: u64,
    /// UDP flows (`--forward-udp`): opened, refused, datagrams dropped.
    #[serde(default)]
    pub udp: crate::flow::udp::UdpSnapshot,
    /// Payload bytes client to server.
    pub bytes_to_server: u64,
    /// Payload bytes server to client.
    pub bytes_to_client: u64,
    /// Whether the node runs the `reduce` service.
    #[serde(default)]
    pub reduce: bool,
    /// Flows since start that ran `reduce` (a node runs it only on flows
    /// its peer reduces too, and not to `--no-reduce-to` destinations).
    #[serde(default)]
    pub flows_reduced: u64,
    /// WAN bytes client to server (after data reduction).
    #[serde(default)]
    pub wan_bytes_to_server: u64,
    /// WAN bytes server to client (after data reduction).
    #[serde(default)]
    pub wan_bytes_to_client: u64,
    /// Fraction of LAN bytes that did not cross the WAN.
    #[serde(default)]
    pub reduction: f64,
    /// Chunks sent as references to the peer's cache.
    #[serde(default)]
    pub references: u64,
    /// References resolved from this node's cache.
    #[serde(default)]
    pub cache_hits: u64,
    /// References and spans this node's cache could not resolve (it asked
    /// the peer for the chunks: a damaged or lost record).
    #[serde(default)]
    pub cache_misses: u64,
    /// Chunks and chunk lists this node sent again at the peer's request.
    #[serde(default)]
    pub repairs: u64,
    /// Pieces sent: held bytes of a trickling source sent before their
    /// chunk's end.
    #[serde(default)]
    pub pieces: u64,
    /// Memory held now by the stream compressors (zstd or LZMA2) of
    /// sending flows.
    #[serde(default)]
    pub compressor_bytes: u64,
    /// Memory held now by the stream decompression contexts of receiving
    /// flows.
    #[serde(default)]
    pub decompressor_bytes: u64,
    /// The bound on flows' stream compressors (`--compressor-memory`).
    #[serde(default)]
    pub compressor_budget: u64,
    /// Of it, what flows have reserved now.
    #[serde(default)]
    pub compressor_reserved: u64,
    /// Times a flow got a cheaper codec than it wanted because the budget
    /// was spent.
    #[serde(default)]
    pub compressor_step_downs: u64,
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
        });
        if entry.connection.take().is_some() {
            entry.since = Instant::now();
        }
        if error.is_some() {
            entry.last_error = error;
        }
        entry.tx_bps = 0.0;
        entry.rx_bps = 0.0;
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

    /// Records a tunnel that came up, `over` UDP or TCP, and why.
    pub fn peer_up(&self, connection: &quinn::Connection, over: Transport, why: &str) {
        let address = connection.remote_address();
        let key = peer_key(connection);
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
            },
        );
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
                peers.remove(&connection.remote_address());
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
                        .is_some_and(|b| b.mode == crate::transport::bbr::Mode::Startup),
                },
            );
            if let Some(bbr) = bbr {
                self.datagrams.watch_sender(*address, bbr.sender_blocked);
                self.datagrams.watch_repairs(*address, bbr.repaired);
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
                }
            })
            .collect();
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
