//! The live flow table: each flow's identity, state and counters, the
//! node's totals, and the sampler that keeps their rates and idle times.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde::Serialize;

use super::abort::{Abort, ResetCounters};
use super::counters::{reduction, PeerTraffic, ReduceCounters, ReduceTotals};
use super::why::WhyState;

/// The flow table gives freed memory back to the system once this many
/// flows ended since the most it held.
const TRIM_AFTER_FLOWS: usize = 1000;

/// Where a flow is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
#[repr(u8)]
pub enum FlowState {
    /// Waiting for the tunnel or for the far side to connect.
    Connecting = 0,
    /// Data flows both ways.
    Open = 1,
    /// The client finished sending; the server may still send.
    ClientDone = 2,
    /// The server finished sending; the client may still send.
    ServerDone = 3,
    /// Ending.
    Closing = 4,
}

impl FlowState {
    fn from_u8(raw: u8) -> FlowState {
        match raw {
            0 => FlowState::Connecting,
            1 => FlowState::Open,
            2 => FlowState::ClientDone,
            3 => FlowState::ServerDone,
            _ => FlowState::Closing,
        }
    }
}

/// A UDP flow's datagrams: carried each way, and lost on the way to this
/// node (each node counts the direction it receives: the edge toward the
/// client, the core toward the server).
#[derive(Debug, Default)]
pub struct DatagramCounters {
    /// Datagrams client to server.
    pub to_server: AtomicU64,
    /// Datagrams server to client.
    pub to_client: AtomicU64,
    /// Datagrams toward the server that did not reach this node (core).
    pub lost_to_server: AtomicU64,
    /// Datagrams toward the client that did not reach this node (edge).
    pub lost_to_client: AtomicU64,
}

/// One flow's live counters.
#[derive(Debug)]
pub struct Flow {
    /// Identifier, unique within the node's run.
    pub id: u64,
    /// The client's address.
    pub source: SocketAddr,
    /// The destination, as requested.
    pub destination: String,
    /// Services applied: `tcp-opt` for tunnelled flows, `pass` for flows
    /// carried directly.
    pub services: Vec<&'static str>,
    /// The tunnel peer carrying the flow, if any.
    pub peer: Option<SocketAddr>,
    /// Its traffic class (`--class`), at the edge, when one matched.
    class: std::sync::OnceLock<Arc<str>>,
    /// The configured peer it is counted to, once known.
    peer_traffic: std::sync::OnceLock<Arc<PeerTraffic>>,
    /// What its directions wait on, and what binds them.
    pub why: WhyState,
    state: AtomicU8,
    /// Payload bytes from client to server.
    pub to_server: AtomicU64,
    /// Payload bytes from server to client.
    pub to_client: AtomicU64,
    /// Bytes of this flow on the WAN (tunnel stream, after data reduction)
    /// from client to server.
    pub wan_to_server: AtomicU64,
    /// WAN bytes from server to client.
    pub wan_to_client: AtomicU64,
    /// Data-reduction counters (zero without `reduce`).
    pub reduce: ReduceCounters,
    /// A UDP flow's datagram counters (zero for TCP flows).
    pub datagrams: DatagramCounters,
    started: Instant,
    rate: Mutex<RateSample>,
    /// Told when the flow has carried no byte either way for the node's
    /// `--flow-idle-timeout`: its pumps end it with [`Abort::Idle`].
    idle: tokio::sync::Notify,
    /// Told when a reload no longer permits the flow: its pumps end it
    /// with [`Abort::Revoked`].
    revoked: tokio::sync::Notify,
}

#[derive(Debug, Default, Clone, Copy)]
struct RateSample {
    at: Option<Instant>,
    /// When the flow last carried a byte (as sampled).
    active_at: Option<Instant>,
    to_server: u64,
    to_client: u64,
    bps_to_server: f64,
    bps_to_client: f64,
}

impl Flow {
    /// Records the flow's traffic class (once; later calls are ignored).
    pub fn set_class(&self, class: &str) {
        let _ = self.class.set(Arc::from(class));
    }

    /// Its traffic class, if one matched.
    pub fn class(&self) -> Option<&str> {
        self.class.get().map(|c| &**c)
    }

    /// Counts the flow to its configured peer (once; later calls are
    /// ignored): its bytes go to the peer's counters when it ends.
    pub fn count_to(&self, peer: Arc<PeerTraffic>) {
        if let Ok(()) = self.peer_traffic.set(peer.clone()) {
            peer.flows.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// The configured peer it is counted to, if any.
    pub fn peer_traffic(&self) -> Option<&Arc<PeerTraffic>> {
        self.peer_traffic.get()
    }

    /// Its byte counters: LAN to server and to client, WAN to server and
    /// to client.
    fn byte_counts(&self) -> [u64; 4] {
        [
            &self.to_server,
            &self.to_client,
            &self.wan_to_server,
            &self.wan_to_client,
        ]
        .map(|a| a.load(Ordering::Relaxed))
    }

    /// Current state.
    pub fn state(&self) -> FlowState {
        FlowState::from_u8(self.state.load(Ordering::Relaxed))
    }

    /// Moves to `state`; a half-close on both sides becomes `Closing`.
    pub fn set_state(&self, state: FlowState) {
        let _ = self
            .state
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |old| {
                let old = FlowState::from_u8(old);
                let new = match (old, state) {
                    (FlowState::ClientDone, FlowState::ServerDone)
                    | (FlowState::ServerDone, FlowState::ClientDone) => FlowState::Closing,
                    (FlowState::Closing, _) => FlowState::Closing,
                    (_, s) => s,
                };
                Some(new as u8)
            });
    }

    /// Updates the rate estimate from the byte counters (called about once a
    /// second by the table's sampler).
    /// Samples the flow's rates; how long it has carried no byte.
    fn sample(&self, now: Instant) -> Duration {
        let to_server = self.to_server.load(Ordering::Relaxed);
        let to_client = self.to_client.load(Ordering::Relaxed);
        let mut rate = self.rate.lock().unwrap_or_else(|e| e.into_inner());
        if rate.at.is_none() || (to_server, to_client) != (rate.to_server, rate.to_client) {
            rate.active_at = Some(now);
        }
        let idle = now.saturating_duration_since(rate.active_at.unwrap_or(self.started));
        let since = rate.at.unwrap_or(self.started);
        let secs = now.saturating_duration_since(since).as_secs_f64();
        if secs > 0.0 {
            rate.bps_to_server = (to_server - rate.to_server.min(to_server)) as f64 * 8.0 / secs;
            rate.bps_to_client = (to_client - rate.to_client.min(to_client)) as f64 * 8.0 / secs;
        }
        rate.at = Some(now);
        rate.to_server = to_server;
        rate.to_client = to_client;
        drop(rate);
        self.why.sample(now, [to_server, to_client]);
        idle
    }

    /// Resolves to [`Abort::Idle`] once the node's sampler finds the flow
    /// idle for its `--flow-idle-timeout`.
    pub(super) async fn idle_out(&self) -> Result<(), Abort> {
        self.idle.notified().await;
        Err(Abort::Idle)
    }

    /// Ends the flow: a reload no longer permits it (the permit is kept
    /// until its pumps or loop take it).
    pub fn revoke(&self) {
        self.revoked.notify_one();
    }

    /// Resolves once [`Flow::revoke`] was called.
    pub(crate) async fn revoked(&self) {
        self.revoked.notified().await;
    }

    /// Resolves to [`Abort::Revoked`] once [`Flow::revoke`] was called.
    pub(super) async fn revoked_out(&self) -> Result<(), Abort> {
        self.revoked().await;
        Err(Abort::Revoked)
    }

    /// A serializable snapshot.
    pub fn info(&self, now: Instant) -> FlowInfo {
        let rate = *self.rate.lock().unwrap_or_else(|e| e.into_inner());
        let reduce = self.reduce.load();
        FlowInfo {
            id: self.id,
            source: self.source.to_string(),
            destination: self.destination.clone(),
            state: self.state(),
            bytes_to_server: self.to_server.load(Ordering::Relaxed),
            bytes_to_client: self.to_client.load(Ordering::Relaxed),
            wan_bytes_to_server: self.wan_to_server.load(Ordering::Relaxed),
            wan_bytes_to_client: self.wan_to_client.load(Ordering::Relaxed),
            reduction: reduction(
                self.to_server.load(Ordering::Relaxed) + self.to_client.load(Ordering::Relaxed),
                self.wan_to_server.load(Ordering::Relaxed)
                    + self.wan_to_client.load(Ordering::Relaxed),
            ),
            references: reduce.references,
            cache_hits: reduce.cache_hits,
            cache_misses: reduce.cache_misses,
            repairs: reduce.repairs,
            pieces: reduce.pieces,
            datagrams_to_server: self.datagrams.to_server.load(Ordering::Relaxed),
            datagrams_to_client: self.datagrams.to_client.load(Ordering::Relaxed),
            lost_to_server: self.datagrams.lost_to_server.load(Ordering::Relaxed),
            lost_to_client: self.datagrams.lost_to_client.load(Ordering::Relaxed),
            rate_to_server_bps: rate.bps_to_server.round() as u64,
            rate_to_client_bps: rate.bps_to_client.round() as u64,
            age_secs: now.saturating_duration_since(self.started).as_secs_f64(),
            services: self.services.iter().map(|s| s.to_string()).collect(),
            class: self.class().map(str::to_owned),
            peer: self.peer.map(|p| p.to_string()),
            peer_name: self.peer_traffic().map(|t| t.label().to_string()),
            limit: None,
            why: None,
            wan_path: None,
            wan_path_why: None,
            wan_path_reason: None,
        }
    }
}

/// What `/flows` returns for one flow.
#[derive(Debug, Clone, Serialize, serde::Deserialize)]
pub struct FlowInfo {
    /// Identifier.
    pub id: u64,
    /// Client address.
    pub source: String,
    /// Destination.
    pub destination: String,
    /// State.
    pub state: FlowState,
    /// Payload bytes client to server.
    pub bytes_to_server: u64,
    /// Payload bytes server to client.
    pub bytes_to_client: u64,
    /// WAN bytes client to server (after data reduction).
    #[serde(default)]
    pub wan_bytes_to_server: u64,
    /// WAN bytes server to client (after data reduction).
    #[serde(default)]
    pub wan_bytes_to_client: u64,
    /// Fraction of LAN bytes that did not cross the WAN (0 without `reduce`;
    /// negative when framing cost more than reduction saved).
    #[serde(default)]
    pub reduction: f64,
    /// Chunks sent by this node as references.
    #[serde(default)]
    pub references: u64,
    /// References resolved by this node from its cache.
    #[serde(default)]
    pub cache_hits: u64,
    /// References and spans this node's cache could not resolve; it asked
    /// the peer for the chunks.
    #[serde(default)]
    pub cache_misses: u64,
    /// Chunks and chunk lists this node sent again at the peer's request.
    #[serde(default)]
    pub repairs: u64,
    /// Pieces sent: held bytes of a trickling source sent before their
    /// chunk's end.
    #[serde(default)]
    pub pieces: u64,
    /// UDP flows: datagrams client to server.
    #[serde(default)]
    pub datagrams_to_server: u64,
    /// UDP flows: datagrams server to client.
    #[serde(default)]
    pub datagrams_to_client: u64,
    /// UDP flows: datagrams toward the server lost in the tunnel (as the
    /// core counts them).
    #[serde(default)]
    pub lost_to_server: u64,
    /// UDP flows: datagrams toward the client lost in the tunnel (as the
    /// edge counts them).
    #[serde(default)]
    pub lost_to_client: u64,
    /// Recent rate client to server, bits per second.
    pub rate_to_server_bps: u64,
    /// Recent rate server to client, bits per second.
    pub rate_to_client_bps: u64,
    /// Seconds since the flow started.
    pub age_secs: f64,
    /// Services applied.
    pub services: Vec<String>,
    /// Traffic class (`--class`), when one matched (the edge's table).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub class: Option<String>,
    /// Tunnel peer, if tunnelled.
    pub peer: Option<String>,
    /// The tunnel peer's `name` from the configuration, or its key.
    #[serde(default)]
    pub peer_name: Option<String>,
    /// What binds its rate on this node now (`sender`, `reader`,
    /// `receive_window`, `tunnel`, `stream_window`, `peer`, `codec`,
    /// `policy`, ...; see [`super::why::Limit`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<String>,
    /// That limit in one line, with its figure.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub why: Option<String>,
    /// The WAN path its tunnel packets take when the peer has several:
    /// a path's number, `bond` or `every` (duplicate).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wan_path: Option<String>,
    /// Why that path (the path mode, or the SLA's choice).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wan_path_why: Option<String>,
    /// That reason as a word: `sla_meets`, `sla_best` (no path meets),
    /// `sla` (the core: the edge's choice), `duplicate`, `bond` or
    /// `data_path`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wan_path_reason: Option<String>,
}

impl<'de> serde::Deserialize<'de> for FlowState {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        Ok(match s.as_str() {
            "connecting" => FlowState::Connecting,
            "open" => FlowState::Open,
            "client-done" => FlowState::ClientDone,
            "server-done" => FlowState::ServerDone,
            _ => FlowState::Closing,
        })
    }
}

/// Node-wide totals, kept after flows end.
#[derive(Debug, Default)]
pub struct Totals {
    /// Flows ever started.
    pub flows: AtomicU64,
    /// Flows that were refused or reset before carrying data end to end.
    pub refused: AtomicU64,
    /// Flows passed straight through (not optimized).
    pub passed_through: AtomicU64,
    /// Flows refused because the node or their source carried the most
    /// flows allowed (`--max-flows`, `--max-flows-per-source`).
    pub limited: AtomicU64,
    /// Flows that ran the `reduce` service.
    pub reduced: AtomicU64,
    /// Bytes client to server of finished flows.
    pub to_server: AtomicU64,
    /// Bytes server to client of finished flows.
    pub to_client: AtomicU64,
    /// WAN bytes client to server of finished flows.
    pub wan_to_server: AtomicU64,
    /// WAN bytes server to client of finished flows.
    pub wan_to_client: AtomicU64,
    /// Data-reduction counters of finished flows.
    pub reduce: ReduceCounters,
    /// Flows reset, by reason.
    pub resets: ResetCounters,
}

/// Byte counters over all flows, live and finished.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ByteTotals {
    /// LAN payload bytes client to server.
    pub to_server: u64,
    /// LAN payload bytes server to client.
    pub to_client: u64,
    /// WAN bytes client to server.
    pub wan_to_server: u64,
    /// WAN bytes server to client.
    pub wan_to_client: u64,
    /// Data-reduction counters.
    pub reduce: ReduceTotals,
}

/// The table of live flows.
#[derive(Debug, Default)]
pub struct FlowTable {
    next_id: AtomicU64,
    flows: Mutex<HashMap<u64, Arc<Flow>>>,
    /// `--flow-idle-timeout` in milliseconds; 0: flows never time out.
    idle_timeout_ms: AtomicU64,
    /// Totals over the node's life.
    pub totals: Totals,
}

/// Removes its flow from the table when dropped, folding its bytes into the
/// totals.
#[derive(Debug)]
pub struct FlowGuard {
    table: Arc<FlowTable>,
    /// The flow.
    pub flow: Arc<Flow>,
}

impl Drop for FlowGuard {
    fn drop(&mut self) {
        let mut flows = self.table.flows.lock().unwrap_or_else(|e| e.into_inner());
        flows.remove(&self.flow.id);
        let (flow, totals) = (&self.flow, &self.table.totals);
        for (from, to) in [
            (&flow.to_server, &totals.to_server),
            (&flow.to_client, &totals.to_client),
            (&flow.wan_to_server, &totals.wan_to_server),
            (&flow.wan_to_client, &totals.wan_to_client),
        ] {
            to.fetch_add(from.load(Ordering::Relaxed), Ordering::Relaxed);
        }
        totals.reduce.add(flow.reduce.load());
        if let Some(peer) = flow.peer_traffic() {
            for (sum, n) in peer.finished.iter().zip(flow.byte_counts()) {
                sum.fetch_add(n, Ordering::Relaxed);
            }
        }
    }
}

/// What the live flows of one configured peer carry now.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LiveTraffic {
    /// Live flows.
    pub flows: u64,
    /// Their bytes: LAN to server and to client, WAN to server and to
    /// client.
    pub bytes: [u64; 4],
}

impl FlowTable {
    /// Registers a new flow. `id` is taken from the table unless given (the
    /// core reuses the edge's identifier so both tables agree).
    pub fn start(
        self: &Arc<Self>,
        id: Option<u64>,
        source: SocketAddr,
        destination: String,
        services: Vec<&'static str>,
        peer: Option<SocketAddr>,
    ) -> FlowGuard {
        let id = id.unwrap_or_else(|| self.next_id.fetch_add(1, Ordering::Relaxed) + 1);
        self.totals.flows.fetch_add(1, Ordering::Relaxed);
        if services.contains(&"reduce") {
            self.totals.reduced.fetch_add(1, Ordering::Relaxed);
        }
        let mut flows = self.flows.lock().unwrap_or_else(|e| e.into_inner());
        // Two edges may use the same id on a core; keep both by nudging.
        let mut key = id;
        while flows.contains_key(&key) {
            key = key.wrapping_add(1 << 48);
        }
        let flow = Arc::new(Flow {
            id: key,
            source,
            destination,
            services,
            peer,
            class: std::sync::OnceLock::new(),
            peer_traffic: std::sync::OnceLock::new(),
            why: WhyState::default(),
            state: AtomicU8::new(FlowState::Connecting as u8),
            to_server: AtomicU64::new(0),
            to_client: AtomicU64::new(0),
            wan_to_server: AtomicU64::new(0),
            wan_to_client: AtomicU64::new(0),
            reduce: ReduceCounters::default(),
            datagrams: DatagramCounters::default(),
            started: Instant::now(),
            rate: Mutex::new(RateSample::default()),
            idle: tokio::sync::Notify::new(),
            revoked: tokio::sync::Notify::new(),
        });
        flows.insert(key, flow.clone());
        drop(flows);
        FlowGuard {
            table: self.clone(),
            flow,
        }
    }

    /// The live flows, taken out of the lock.
    fn live(&self) -> Vec<Arc<Flow>> {
        self.flows
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .values()
            .cloned()
            .collect()
    }

    /// The live flows, oldest first.
    pub fn live_flows(&self) -> Vec<Arc<Flow>> {
        let mut flows = self.live();
        flows.sort_by_key(|f| f.id);
        flows
    }

    /// Number of live flows.
    pub fn active(&self) -> usize {
        self.flows.lock().unwrap_or_else(|e| e.into_inner()).len()
    }

    /// Snapshot of every live flow, oldest first.
    pub fn snapshot(&self) -> Vec<FlowInfo> {
        let now = Instant::now();
        let flows = self.live();
        let mut infos: Vec<FlowInfo> = flows.iter().map(|f| f.info(now)).collect();
        infos.sort_by_key(|f| f.id);
        infos
    }

    /// What the live flows carry now, by the configured peer they are
    /// counted to (keyed by the address of its [`PeerTraffic`]).
    pub fn live_by_peer(&self) -> HashMap<usize, LiveTraffic> {
        let mut by_peer: HashMap<usize, LiveTraffic> = HashMap::new();
        for flow in self.live() {
            let Some(peer) = flow.peer_traffic() else {
                continue;
            };
            let live = by_peer.entry(Arc::as_ptr(peer) as usize).or_default();
            live.flows += 1;
            for (sum, n) in live.bytes.iter_mut().zip(flow.byte_counts()) {
                *sum += n;
            }
        }
        by_peer
    }

    /// Byte counters over all flows, live and finished.
    pub fn bytes(&self) -> ByteTotals {
        let flows = self.flows.lock().unwrap_or_else(|e| e.into_inner());
        let load = |a: &AtomicU64| a.load(Ordering::Relaxed);
        let t = &self.totals;
        let mut sum = ByteTotals {
            to_server: load(&t.to_server),
            to_client: load(&t.to_client),
            wan_to_server: load(&t.wan_to_server),
            wan_to_client: load(&t.wan_to_client),
            reduce: t.reduce.load(),
        };
        for f in flows.values() {
            sum.to_server += load(&f.to_server);
            sum.to_client += load(&f.to_client);
            sum.wan_to_server += load(&f.wan_to_server);
            sum.wan_to_client += load(&f.wan_to_client);
            sum.reduce = sum.reduce.plus(f.reduce.load());
        }
        sum
    }

    /// Refreshes every flow's rate estimate once a second, forever.
    pub async fn run_sampler(self: Arc<Self>) {
        let mut tick = tokio::time::interval(Duration::from_secs(1));
        let mut peak = 0;
        loop {
            tick.tick().await;
            let now = Instant::now();
            let timeout = self.idle_timeout();
            let live = self.live();
            for flow in &live {
                let idle = flow.sample(now);
                if timeout.is_some_and(|t| idle >= t) {
                    flow.idle.notify_one();
                }
            }
            // Many flows ended since the most there were: give their
            // memory back (the allocator keeps it in its arenas).
            peak = peak.max(live.len());
            if peak - live.len() >= TRIM_AFTER_FLOWS {
                peak = live.len();
                drop(live);
                self.flows
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .shrink_to_fit();
                let _ = tokio::task::spawn_blocking(crate::process::release_free_memory).await;
            }
        }
    }

    /// Flows that carry no byte either way for `timeout` are reset (by
    /// the sampler, within a second of it); `None`: never.
    pub fn set_idle_timeout(&self, timeout: Option<Duration>) {
        let ms = timeout.map_or(0, |t| t.as_millis().clamp(1, u64::MAX as u128) as u64);
        self.idle_timeout_ms.store(ms, Ordering::Relaxed);
    }

    /// The idle timeout, if any.
    pub fn idle_timeout(&self) -> Option<Duration> {
        match self.idle_timeout_ms.load(Ordering::Relaxed) {
            0 => None,
            ms => Some(Duration::from_millis(ms)),
        }
    }
}
