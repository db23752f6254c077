//! What `/status` returns: the node, its tunnel peers and the peers of
//! its configuration, up or down.

use std::collections::BTreeMap;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use serde::{Deserialize, Serialize};

use super::Role;
use crate::flow::{reduction, LiveTraffic};
use crate::peer_book::{self, PeerRecord, PeerState};
use crate::transport::datagram::{DuplicationStatus, FecStatus, PathsStatus};
use crate::transport::model;
use crate::transport::tunnel::Congestion;

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
    /// Whether the tunnel's sender had data waiting for its congestion
    /// window or pacing over the last second (wanopt's BBR: its rounds
    /// were full): the tunnel, not its flows' sources, bound the rate.
    #[serde(default)]
    pub window_full: Option<bool>,
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
    pub(super) fn of(conn: &quinn::Connection) -> Option<BbrStatus> {
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
    /// Tunnel peers (one per address a tunnel is or was up at).
    pub peers: Vec<PeerStatus>,
    /// Every peer of the configuration, up or down.
    #[serde(default)]
    pub configured_peers: Vec<ConfiguredPeerStatus>,
    /// Reloads applied since start.
    #[serde(default)]
    pub reloads: u64,
    /// Reloads refused (the running configuration was kept).
    #[serde(default)]
    pub reload_failures: u64,
    /// The running configuration's hash (blake3 of what it was read from,
    /// 16 hex digits), when known.
    #[serde(default)]
    pub config_hash: Option<String>,
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

/// A peer of the configuration as `/status` shows it, up or down.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ConfiguredPeerStatus {
    /// Its public key (the first, when one `--core` pins several).
    pub key: String,
    /// Its `name` in the configuration.
    pub name: Option<String>,
    /// How `flows` and logs name it: its name, or its key.
    pub label: String,
    /// Where the node dials it, if it does.
    pub endpoint: Option<String>,
    /// Whether the node dials it.
    pub dialed: bool,
    /// Whether the node accepts tunnels from it.
    pub accepted: bool,
    /// `up`, `connecting`, `down` or `refused`.
    pub state: PeerState,
    /// Seconds in the state.
    pub state_secs: f64,
    /// When it entered the state, seconds since the Unix epoch.
    pub since_unix_secs: f64,
    /// Why it is in the state: the last error, if any.
    pub why: Option<String>,
    /// The addresses of its tunnels in `peers`.
    pub tunnels: Vec<String>,
    /// Its live flows.
    pub flows_active: u64,
    /// Flows given to it since start.
    pub flows_total: u64,
    /// Payload bytes client to server of its flows.
    pub bytes_to_server: u64,
    /// Payload bytes server to client.
    pub bytes_to_client: u64,
    /// WAN bytes client to server (after data reduction).
    pub wan_bytes_to_server: u64,
    /// WAN bytes server to client.
    pub wan_bytes_to_client: u64,
    /// Fraction of its LAN bytes that did not cross the WAN.
    pub reduction: f64,
    /// Smoothed RTT of its tunnel, milliseconds, while up.
    pub rtt_ms: Option<f64>,
    /// Packets of its tunnels declared lost over those sent, percent.
    pub loss_percent: Option<f64>,
    /// Its tunnels' UDP send rate over the last second, Mbit/s.
    pub send_rate_mbps: f64,
    /// Its tunnels' UDP receive rate, Mbit/s.
    pub receive_rate_mbps: f64,
    /// Lost packets its tunnels' FEC rebuilt (received).
    pub fec_recovered: u64,
    /// Its WAN paths that are up, when it has several.
    pub paths_up: Option<u32>,
    /// Its WAN paths, when it has several.
    pub paths: Option<u32>,
}

impl ConfiguredPeerStatus {
    /// `record` as it is now, with its tunnels among `peers` and its
    /// flows' live traffic from `live`.
    pub(super) fn of(
        record: &Arc<PeerRecord>,
        peers: &[PeerStatus],
        live: &HashMap<usize, LiveTraffic>,
    ) -> ConfiguredPeerStatus {
        let view = record.view();
        let config = &view.config;
        let keys: Vec<String> = config.keys.iter().map(|k| k.to_string()).collect();
        let tunnels: Vec<&PeerStatus> = peers
            .iter()
            .filter(|p| p.key.as_ref().is_some_and(|k| keys.contains(k)))
            .collect();
        let up: Vec<&PeerStatus> = tunnels
            .iter()
            .copied()
            .filter(|p| p.state == "up")
            .collect();
        let (state, since, why) = match (up.is_empty(), view.state) {
            (false, _) => (PeerState::Up, view.since, None),
            // Told up, and no tunnel is: it closed unseen.
            (true, PeerState::Up) => (PeerState::Down, view.since, view.why),
            (true, state) => (state, view.since, view.why),
        };
        let traffic = &record.traffic;
        let now = live
            .get(&(Arc::as_ptr(traffic) as usize))
            .copied()
            .unwrap_or_default();
        let bytes: [u64; 4] = std::array::from_fn(|i| {
            traffic.finished[i].load(std::sync::atomic::Ordering::Relaxed) + now.bytes[i]
        });
        let sum = |f: fn(&PeerStatus) -> Option<u64>| up.iter().filter_map(|p| f(p)).sum::<u64>();
        let (sent, lost) = (sum(|p| p.sent_packets), sum(|p| p.lost_packets));
        let paths: Vec<_> = up.iter().filter_map(|p| p.paths.as_ref()).collect();
        ConfiguredPeerStatus {
            key: keys.first().cloned().unwrap_or_default(),
            name: config.name.clone(),
            label: config.label(),
            endpoint: config.endpoint.clone(),
            dialed: config.endpoint.is_some(),
            accepted: config.accepted,
            state,
            state_secs: Instant::now()
                .saturating_duration_since(since)
                .as_secs_f64(),
            since_unix_secs: peer_book::unix_secs(since),
            why,
            tunnels: tunnels.iter().map(|p| p.address.clone()).collect(),
            flows_active: now.flows,
            flows_total: traffic.flows.load(std::sync::atomic::Ordering::Relaxed),
            bytes_to_server: bytes[0],
            bytes_to_client: bytes[1],
            wan_bytes_to_server: bytes[2],
            wan_bytes_to_client: bytes[3],
            reduction: reduction(bytes[0] + bytes[1], bytes[2] + bytes[3]),
            rtt_ms: up.iter().filter_map(|p| p.rtt_ms).reduce(f64::min),
            loss_percent: (sent > 0).then(|| lost as f64 * 100.0 / sent as f64),
            send_rate_mbps: up.iter().map(|p| p.send_rate_mbps).sum(),
            receive_rate_mbps: up.iter().map(|p| p.receive_rate_mbps).sum(),
            fec_recovered: up
                .iter()
                .filter_map(|p| p.fec.as_ref())
                .map(|f| f.recovered)
                .sum(),
            paths_up: (!paths.is_empty()).then(|| {
                paths
                    .iter()
                    .flat_map(|p| &p.paths)
                    .filter(|p| p.state == "up")
                    .count() as u32
            }),
            paths: (!paths.is_empty()).then(|| paths.iter().map(|p| p.paths.len() as u32).sum()),
        }
    }
}
