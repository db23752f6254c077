//! `/metrics`: the Prometheus text exposition of a node's state, one
//! function per family of metrics.

use std::fmt::Write as _;
use std::sync::Arc;

use axum::extract::State;
use axum::http::header;
use axum::response::IntoResponse;

use crate::peer_book::PeerState;
use crate::reduce::{CacheReport, PeerCacheStats};
use crate::state::{ConfiguredPeerStatus, NodeState, PeerStatus, Status};
use crate::transport::datagram::{FecStatus, PathStatus};
use crate::transport::handshakes::HandshakeCounts;

pub(super) async fn metrics(State(state): State<Arc<NodeState>>) -> impl IntoResponse {
    (
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
        render_metrics(&state),
    )
}

/// Renders the Prometheus text exposition of a node's state.
pub fn render_metrics(state: &NodeState) -> String {
    let s = state.status();
    let mut m = Exposition {
        out: String::new(),
        role: s.role.name(),
    };
    node_gauges(&mut m, &s);
    config_metrics(&mut m, &s);
    configured_peer_metrics(&mut m, &s);
    tunnel_metrics(&mut m, &s);
    path_metrics(&mut m, &s);
    fec_metrics(&mut m, &s);
    traffic_metrics(&mut m, &s);
    flow_metrics(&mut m, &s);
    flow_path_metrics(&mut m, &state.flows_on_paths(&s));
    udp_metrics(&mut m, &s);
    handshake_metrics(&mut m, state.handshakes.counts());
    cache_metrics(&mut m, &state.cache_report());
    m.out
}

/// The text being written, and the node's role (a label of every sample).
struct Exposition {
    out: String,
    role: &'static str,
}

impl Exposition {
    /// One metric: its help, its type and its samples (extra labels, value).
    fn metric(&mut self, name: &str, kind: &str, help: &str, samples: &[(String, f64)]) {
        let (out, role) = (&mut self.out, self.role);
        let _ = writeln!(out, "# HELP wanopt_{name} {help}");
        let _ = writeln!(out, "# TYPE wanopt_{name} {kind}");
        for (labels, value) in samples {
            let _ = writeln!(out, "wanopt_{name}{{role=\"{role}\"{labels}}} {value}");
        }
    }
}

/// A peer's labels, the same on every metric of a peer: `peer`, its
/// public key (its address until the tunnel has authenticated it), and
/// `address`, where this node reaches it.
fn peer_labels(p: &PeerStatus) -> String {
    let key = p.key.as_deref().unwrap_or(&p.address);
    format!(",peer=\"{key}\",address=\"{}\"", p.address)
}

/// One sample per peer that has a value.
fn per_peer(s: &Status, value: impl Fn(&PeerStatus) -> Option<f64>) -> Vec<(String, f64)> {
    s.peers
        .iter()
        .filter_map(|p| Some((peer_labels(p), value(p)?)))
        .collect()
}

/// The node is up; its budget of flow receive windows.
fn node_gauges(m: &mut Exposition, s: &Status) {
    m.metric(
        "up",
        "gauge",
        "Always 1 while the node runs.",
        &[(String::new(), 1.0)],
    );
    m.metric(
        "window_granted_bytes",
        "gauge",
        "Flow receive windows granted now from the node-wide budget (--window-budget): what peers may have sent and the node's receivers not yet taken.",
        &[(String::new(), s.window_granted_bytes as f64)],
    );
    m.metric(
        "window_budget_bytes",
        "gauge",
        "The node-wide budget of flow receive windows (--window-budget).",
        &[(String::new(), s.window_budget_bytes as f64)],
    );
}

/// The configuration's hash and the reloads so far.
fn config_metrics(m: &mut Exposition, s: &Status) {
    m.metric(
        "config_reloads_total",
        "counter",
        "Reloads of the configuration (SIGHUP, POST /reload), by result: applied, or refused (the running configuration was kept).",
        &[
            (",result=\"applied\"".into(), s.reloads as f64),
            (",result=\"refused\"".into(), s.reload_failures as f64),
        ],
    );
    if let Some(hash) = &s.config_hash {
        m.metric(
            "config_info",
            "gauge",
            "Always 1; its hash label is the running configuration's (blake3 of the command line and the config file).",
            &[(format!(",hash=\"{hash}\""), 1.0)],
        );
    }
}

/// A configured peer's labels: `peer`, its key (as on the tunnel
/// metrics), and `name`, its name in the configuration (empty without).
fn configured_labels(p: &ConfiguredPeerStatus) -> String {
    format!(
        ",peer=\"{}\",name=\"{}\"",
        p.key,
        p.name.as_deref().unwrap_or("")
    )
}

/// Every peer of the configuration, up or down: its state, its flows and
/// its bytes.
fn configured_peer_metrics(m: &mut Exposition, s: &Status) {
    let each = |value: &dyn Fn(&ConfiguredPeerStatus) -> f64| -> Vec<(String, f64)> {
        s.configured_peers
            .iter()
            .map(|p| (configured_labels(p), value(p)))
            .collect()
    };
    m.metric(
        "peer_up",
        "gauge",
        "1 while a tunnel to the configured peer is up, 0 while it is down, connecting or refused (every peer of the configuration is listed).",
        &each(&|p| f64::from(u8::from(p.state == PeerState::Up))),
    );
    let states: Vec<(String, f64)> = s
        .configured_peers
        .iter()
        .flat_map(|p| {
            PeerState::ALL.iter().map(move |state| {
                (
                    format!("{},state=\"{}\"", configured_labels(p), state.name()),
                    f64::from(u8::from(p.state == *state)),
                )
            })
        })
        .collect();
    m.metric(
        "peer_state",
        "gauge",
        "1 for the configured peer's state (up, connecting, down, refused), 0 for the others.",
        &states,
    );
    m.metric(
        "peer_state_seconds",
        "gauge",
        "Seconds the configured peer has been in its state.",
        &each(&|p| p.state_secs),
    );
    m.metric(
        "peer_flows_active",
        "gauge",
        "Live flows carried to or from the configured peer.",
        &each(&|p| p.flows_active as f64),
    );
    m.metric(
        "peer_flows_total",
        "counter",
        "Flows carried to or from the configured peer since the node started.",
        &each(&|p| p.flows_total as f64),
    );
    let directions = |lan: bool| -> Vec<(String, f64)> {
        s.configured_peers
            .iter()
            .flat_map(|p| {
                let (to_server, to_client) = match lan {
                    true => (p.bytes_to_server, p.bytes_to_client),
                    false => (p.wan_bytes_to_server, p.wan_bytes_to_client),
                };
                let labels = configured_labels(p);
                [
                    (
                        format!("{labels},direction=\"to_server\""),
                        to_server as f64,
                    ),
                    (
                        format!("{labels},direction=\"to_client\""),
                        to_client as f64,
                    ),
                ]
            })
            .collect()
    };
    m.metric(
        "peer_lan_bytes_total",
        "counter",
        "Payload bytes of the configured peer's flows, by direction.",
        &directions(true),
    );
    m.metric(
        "peer_wan_bytes_total",
        "counter",
        "Tunnel bytes of the configured peer's flows (after data reduction), by direction.",
        &directions(false),
    );
}

/// Per tunnel peer: state, the controller's model, losses, duplication.
fn tunnel_metrics(m: &mut Exposition, s: &Status) {
    m.metric(
        "tunnel_up",
        "gauge",
        "1 when the tunnel to the peer is up.",
        &per_peer(s, |p| Some(f64::from(u8::from(p.state == "up")))),
    );
    m.metric(
        "tunnel_over_tcp",
        "gauge",
        "1 while the tunnel to the peer is carried on TCP (UDP blocked or policed, or --transport tcp; the reason is in /status), 0 on QUIC over UDP.",
        &per_peer(s, |p| Some(f64::from(u8::from(p.transport.as_deref()? == "tcp")))),
    );
    m.metric(
        "tunnel_rtt_seconds",
        "gauge",
        "Smoothed round-trip time of the tunnel.",
        &per_peer(s, |p| p.rtt_ms.map(|r| r / 1e3)),
    );
    m.metric(
        "tunnel_cwnd_bytes",
        "gauge",
        "Congestion window of the tunnel.",
        &per_peer(s, |p| p.cwnd_bytes.map(|c| c as f64)),
    );
    m.metric(
        "tunnel_bandwidth_estimate_bytes_per_second",
        "gauge",
        "The congestion controller's estimate of the path's rate in the sending direction (BBR's bottleneck bandwidth; window over RTT for CUBIC and NewReno).",
        &per_peer(s, |p| p.bandwidth_estimate_mbps.map(|b| b * 1e6 / 8.0)),
    );
    m.metric(
        "tunnel_pacing_rate_bytes_per_second",
        "gauge",
        "BBR's pacing rate.",
        &per_peer(s, |p| Some(p.bbr.as_ref()?.pacing_mbps? * 1e6 / 8.0)),
    );
    m.metric(
        "tunnel_min_rtt_seconds",
        "gauge",
        "BBR's propagation delay estimate (windowed min RTT).",
        &per_peer(s, |p| Some(p.bbr.as_ref()?.min_rtt_ms? / 1e3)),
    );
    m.metric(
        "tunnel_rate_moving",
        "gauge",
        "1 while BBR judges the path's rate to move (a cellular link): it paces at least at the recent delivery rate and keeps an in-flight ceiling after congestive loss; else 0.",
        &per_peer(s, |p| Some(f64::from(u8::from(p.bbr.as_ref()?.moving)))),
    );
    m.metric(
        "tunnel_lost_packets_total",
        "counter",
        "Packets the tunnel declared lost.",
        &per_peer(s, |p| p.lost_packets.map(|c| c as f64)),
    );
    m.metric(
        "tunnel_datagrams_expired_total",
        "counter",
        "UDP flows' datagrams dropped unsent after waiting 300 ms in the tunnel's send queue.",
        &per_peer(s, |p| p.datagrams_expired.map(|c| c as f64)),
    );
    m.metric(
        "tunnel_duplicated_datagrams_total",
        "counter",
        "Datagrams sent a second time by tail duplication.",
        &per_peer(s, |p| Some(p.duplication.as_ref()?.datagrams as f64)),
    );
    m.metric(
        "tunnel_duplicated_bytes_total",
        "counter",
        "Bytes sent a second time by tail duplication.",
        &per_peer(s, |p| Some(p.duplication.as_ref()?.bytes as f64)),
    );
    m.metric(
        "tunnel_duplicated_stream_ends_total",
        "counter",
        "Bursts that began on a busy path, repeated because a stream was ending.",
        &per_peer(s, |p| Some(p.duplication.as_ref()?.stream_ends as f64)),
    );
    m.metric(
        "tunnel_rebuilt_datagrams_total",
        "counter",
        "Datagrams from the peer rebuilt from its parity (not retransmitted).",
        &per_peer(s, |p| Some(p.duplication.as_ref()?.rebuilt as f64)),
    );
    m.metric(
        "tunnel_duplication_active",
        "gauge",
        "1 while tail duplication is on for the path (see --duplication).",
        &per_peer(s, |p| {
            Some(f64::from(u8::from(p.duplication.as_ref()?.active)))
        }),
    );
    m.metric(
        "tunnel_reconnects_total",
        "counter",
        "Reconnections of the tunnel.",
        &per_peer(s, |p| Some(p.reconnects as f64)),
    );
    m.metric(
        "tunnel_dial_failures_total",
        "counter",
        "Dials of the peer that failed (timed out or refused), counted while it is unreachable too.",
        &per_peer(s, |p| Some(p.dial_failures as f64)),
    );
}

/// Per WAN path of a peer with several (`--path`): state, RTT, loss,
/// whether it carries data, bytes; and the peer's switches. Nothing for
/// a node without paths.
fn path_metrics(m: &mut Exposition, s: &Status) {
    if s.peers.iter().all(|p| p.paths.is_none()) {
        return;
    }
    let per_path = |value: &dyn Fn(&PathStatus) -> Option<f64>| -> Vec<(String, f64)> {
        let mut samples = Vec::new();
        for p in &s.peers {
            for path in p.paths.iter().flat_map(|ps| &ps.paths) {
                if let Some(v) = value(path) {
                    let labels = format!(
                        "{},path=\"{}\",remote=\"{}\"",
                        peer_labels(p),
                        path.number,
                        path.remote
                    );
                    samples.push((labels, v));
                }
            }
        }
        samples
    };
    m.metric(
        "path_up",
        "gauge",
        "1 while the path's probes are answered (up or suspect).",
        &per_path(&|p| Some(f64::from(u8::from(p.state == "up" || p.state == "suspect")))),
    );
    m.metric(
        "path_data",
        "gauge",
        "1 while the path carries this node's data.",
        &per_path(&|p| Some(f64::from(u8::from(p.data)))),
    );
    m.metric(
        "path_rtt_seconds",
        "gauge",
        "Smoothed round-trip time of the path's probes.",
        &per_path(&|p| p.rtt_ms.map(|r| r / 1e3)),
    );
    m.metric(
        "path_loss_ratio",
        "gauge",
        "Loss of this node's probes toward the peer on the path, recent.",
        &per_path(&|p| p.loss_to_peer_percent.map(|l| l / 100.0)),
    );
    m.metric(
        "path_rate_limit_bits_per_second",
        "gauge",
        "The most this node sends on the path (a declared rate: the edge's up=, or on the core the edge's down=), IP packets.",
        &per_path(&|p| p.send_mbps.map(|r| r * 1e6)),
    );
    m.metric(
        "path_jitter_seconds",
        "gauge",
        "Interarrival jitter of the peer's probes on the path (RFC 3550).",
        &per_path(&|p| p.jitter_ms.map(|j| j / 1e3)),
    );
    m.metric(
        "path_realtime",
        "gauge",
        "1 while real-time datagrams take the path by an SLA's choice (sla= in a class).",
        &per_path(&|p| Some(f64::from(u8::from(p.realtime)))),
    );
    m.metric(
        "realtime_sla_met",
        "gauge",
        "1 while the path real-time datagrams take meets the SLA, 0 while none does (the edge).",
        &per_peer(s, |p| {
            let meets = p.paths.as_ref()?.realtime.as_ref()?.meets?;
            Some(f64::from(u8::from(meets)))
        }),
    );
    m.metric(
        "realtime_path_moves_total",
        "counter",
        "Times real-time datagrams moved from one path to another by the SLA (the edge).",
        &per_peer(s, |p| {
            let rt = p.paths.as_ref()?.realtime.as_ref()?;
            rt.sla.as_ref().map(|_| rt.moves as f64)
        }),
    );
    m.metric(
        "path_sent_bytes_total",
        "counter",
        "Bytes sent on the path (datagrams and probes).",
        &per_path(&|p| Some(p.sent_bytes as f64)),
    );
    m.metric(
        "path_received_bytes_total",
        "counter",
        "Bytes received on the path.",
        &per_path(&|p| Some(p.received_bytes as f64)),
    );
    m.metric(
        "path_copy_bytes_total",
        "counter",
        "Of the bytes sent on the path, those sent as copies of the data path's (duplicate mode).",
        &per_path(&|p| Some(p.copy_bytes as f64)),
    );
    m.metric(
        "path_repair_bytes_total",
        "counter",
        "Of the bytes sent on the path, FEC repairs for the data path's datagrams (spread-fec mode).",
        &per_path(&|p| Some(p.repair_bytes as f64)),
    );
    m.metric(
        "path_duplicates_dropped_total",
        "counter",
        "Datagrams from the peer that came a second time, over another path, and were dropped.",
        &per_peer(s, |p| Some(p.paths.as_ref()?.duplicates_dropped as f64)),
    );
    m.metric(
        "path_switches_total",
        "counter",
        "Times the data path to the peer moved from one path to another.",
        &per_peer(s, |p| Some(p.paths.as_ref()?.switches as f64)),
    );
}

/// Live flows by the WAN path they take, their class and why (a peer
/// with several paths).
fn flow_path_metrics(m: &mut Exposition, flows: &[crate::flow::FlowInfo]) {
    let mut counts: std::collections::BTreeMap<String, f64> = Default::default();
    for f in flows {
        let (Some(path), Some(reason)) = (&f.wan_path, &f.wan_path_reason) else {
            continue;
        };
        let labels = format!(
            ",peer=\"{}\",wan_path=\"{path}\",class=\"{}\",reason=\"{reason}\"",
            f.peer.as_deref().unwrap_or(""),
            f.class.as_deref().unwrap_or("").replace(['"', '\\'], "_")
        );
        *counts.entry(labels).or_default() += 1.0;
    }
    if counts.is_empty() {
        return;
    }
    m.metric(
        "flows_by_wan_path",
        "gauge",
        "Live flows by the WAN path their tunnel packets take (a number, bond or every), their class and why (sla_meets, sla_best, sla, duplicate, bond, data_path).",
        &counts.into_iter().collect::<Vec<_>>(),
    );
}

/// Continuous FEC per peer and direction: `send` is what this node
/// sends (and what the peer reported of it), `receive` what it receives.
fn fec_metrics(m: &mut Exposition, s: &Status) {
    let both = |send: fn(&FecStatus) -> f64, receive: fn(&FecStatus) -> f64| {
        let mut samples = Vec::new();
        for p in &s.peers {
            if let Some(f) = &p.fec {
                let peer = peer_labels(p);
                samples.push((format!("{peer},direction=\"send\""), send(f)));
                samples.push((format!("{peer},direction=\"receive\""), receive(f)));
            }
        }
        samples
    };
    m.metric(
        "fec_loss_ratio",
        "gauge",
        "Loss before FEC repair, recent (send: as the peer measured it).",
        &both(
            |f| f.loss_percent / 100.0,
            |f| f.received_loss_percent / 100.0,
        ),
    );
    m.metric(
        "fec_residual_loss_ratio",
        "gauge",
        "Loss left after FEC repair (send: as the peer last reported it).",
        &both(
            |f| f.residual_loss_percent / 100.0,
            |f| f.received_residual_percent / 100.0,
        ),
    );
    m.metric(
        "fec_recovered_packets_total",
        "counter",
        "Packets rebuilt from FEC repairs (send: reported by the peer).",
        &both(|f| f.peer_recovered as f64, |f| f.recovered as f64),
    );
    m.metric(
        "fec_repair_packets_total",
        "counter",
        "FEC repair datagrams sent or received.",
        &both(|f| f.repairs_sent as f64, |f| f.repairs_received as f64),
    );
    m.metric(
        "fec_source_packets_total",
        "counter",
        "Datagrams sent or received as FEC sources.",
        &both(|f| f.sources_sent as f64, |f| f.received as f64),
    );
    let send = |value: fn(&FecStatus) -> f64| -> Vec<(String, f64)> {
        s.peers
            .iter()
            .filter_map(|p| {
                let f = p.fec.as_ref()?;
                Some((format!("{},direction=\"send\"", peer_labels(p)), value(f)))
            })
            .collect()
    };
    m.metric(
        "fec_code_ratio",
        "gauge",
        "Repairs per source of the FEC code in use (0 while off).",
        &send(|f| f.ratio_percent / 100.0),
    );
    m.metric(
        "fec_overhead_ratio",
        "gauge",
        "FEC repair bytes over source bytes sent so far.",
        &send(|f| f.overhead_percent / 100.0),
    );
    m.metric(
        "fec_burst_packets",
        "gauge",
        "Mean run of consecutive losses the peer measured, packets.",
        &send(|f| f.burst),
    );
}

/// Bytes on the LAN and the WAN, and flow resets by reason.
fn traffic_metrics(m: &mut Exposition, s: &Status) {
    m.metric(
        "lan_bytes_total",
        "counter",
        "Payload bytes carried, by direction.",
        &[
            (",direction=\"to_server\"".into(), s.bytes_to_server as f64),
            (",direction=\"to_client\"".into(), s.bytes_to_client as f64),
        ],
    );
    m.metric(
        "wan_bytes_total",
        "counter",
        "Bytes of optimized flows on the tunnel (after data reduction), by direction.",
        &[
            (
                ",direction=\"to_server\"".into(),
                s.wan_bytes_to_server as f64,
            ),
            (
                ",direction=\"to_client\"".into(),
                s.wan_bytes_to_client as f64,
            ),
        ],
    );
    m.metric(
        "flow_resets_total",
        "counter",
        "Flows reset, by reason: lan (the client or server reset), tunnel (the peer reset the stream), codec (this node could not decode the peer's data), peer_codec (the peer could not decode this node's), idle, policy, tunnel_lost (the tunnel died: a failed core replica, a cut longer than --tunnel-timeout).",
        &s.flow_resets
            .iter()
            .map(|(reason, n)| (format!(",reason=\"{reason}\""), *n as f64))
            .collect::<Vec<_>>(),
    );
}

/// The node's flows, data reduction and compressor memory.
/// UDP flows (`--forward-udp`, `--transparent-udp`): one sample each for the node.
fn udp_metrics(m: &mut Exposition, s: &Status) {
    let u = &s.udp;
    let node: [(&str, &str, f64); 8] = [
        ("udp_flows_total", "UDP flows opened through the tunnel.", u.flows as f64),
        (
            "udp_flows_refused_total",
            "UDP flows the core refused (--allow-udp, limits, destination).",
            u.refused as f64,
        ),
        (
            "udp_oversize_total",
            "UDP datagrams too large for 16 tunnel datagram frames, dropped.",
            u.oversize as f64,
        ),
        (
            "udp_fragmented_total",
            "UDP datagrams sent into the tunnel as fragments.",
            u.fragmented as f64,
        ),
        (
            "udp_dropped_total",
            "UDP datagrams dropped on the way into the tunnel (flow refused, queue or datagram buffer full, tunnel down) or out of it (a socket send buffer full).",
            u.dropped as f64,
        ),
        (
            "udp_unknown_flow_total",
            "Tunnel datagrams for no known UDP flow, dropped.",
            u.unknown_flow as f64,
        ),
        (
            "udp_unmatched_total",
            "Transparent UDP datagrams to destinations --optimize does not select, dropped.",
            u.unmatched as f64,
        ),
        (
            "udp_strangers_total",
            "UDP datagrams from a source a --forward-udp's from= list does not hold, dropped.",
            u.strangers as f64,
        ),
    ];
    for (name, help, value) in node {
        m.metric(name, "counter", help, &[(String::new(), value)]);
    }
}

fn flow_metrics(m: &mut Exposition, s: &Status) {
    // One sample for the node.
    let node: [(&str, &str, &str, f64); 17] = [
        (
            "flows_active",
            "gauge",
            "Live flows.",
            s.flows_active as f64,
        ),
        (
            "flows_total",
            "counter",
            "Flows since start.",
            s.flows_total as f64,
        ),
        (
            "flows_refused_total",
            "counter",
            "Flows refused or reset before data flowed end to end.",
            s.flows_refused as f64,
        ),
        (
            "flows_limited_total",
            "counter",
            "Flows refused because the node or their source carried the most flows allowed (--max-flows, --max-flows-per-source).",
            s.flows_limited as f64,
        ),
        (
            "flows_passed_through_total",
            "counter",
            "Flows passed straight through, unoptimized.",
            s.flows_passed_through as f64,
        ),
        (
            "flows_reduced_total",
            "counter",
            "Flows that ran the reduce service.",
            s.flows_reduced as f64,
        ),
        (
            "reduction_ratio",
            "gauge",
            "Fraction of LAN bytes that did not cross the WAN, since start.",
            s.reduction,
        ),
        (
            "references_total",
            "counter",
            "Chunks sent as references to the peer's byte cache.",
            s.references as f64,
        ),
        (
            "pieces_total",
            "counter",
            "Pieces sent: held bytes of a trickling source sent before their chunk's end.",
            s.pieces as f64,
        ),
        (
            "cache_hits_total",
            "counter",
            "References resolved from this node's byte cache.",
            s.cache_hits as f64,
        ),
        (
            "cache_misses_total",
            "counter",
            "References and spans this node's byte cache could not resolve (the chunks were asked of the peer).",
            s.cache_misses as f64,
        ),
        (
            "repairs_total",
            "counter",
            "Chunks and chunk lists this node sent again at its peer's request.",
            s.repairs as f64,
        ),
        (
            "compressor_bytes",
            "gauge",
            "Memory held by the stream compressors (zstd or LZMA2) of flows sending now (freed after 1 s idle).",
            s.compressor_bytes as f64,
        ),
        (
            "decompressor_bytes",
            "gauge",
            "Memory held by the stream decompression contexts of flows receiving now (freed when the peer's compressor is).",
            s.decompressor_bytes as f64,
        ),
        (
            "compressor_budget_bytes",
            "gauge",
            "Bound on the memory of flows' stream compressors (--compressor-memory).",
            s.compressor_budget as f64,
        ),
        (
            "compressor_reserved_bytes",
            "gauge",
            "Memory of the compressor budget reserved by flows now.",
            s.compressor_reserved as f64,
        ),
        (
            "compressor_step_downs_total",
            "counter",
            "Times a flow got a cheaper codec than it wanted because the compressor budget was spent.",
            s.compressor_step_downs as f64,
        ),
    ];
    for (name, kind, help, value) in node {
        m.metric(name, kind, help, &[(String::new(), value)]);
    }
}

/// Incoming tunnel handshakes (a core's).
fn handshake_metrics(m: &mut Exposition, handshakes: HandshakeCounts) {
    for (name, kind, help, value) in [
        (
            "tunnel_handshakes_in_progress",
            "gauge",
            "Incoming tunnel handshakes in progress (peers that have not proved their key yet).",
            handshakes.in_progress,
        ),
        (
            "tunnel_handshakes_started_total",
            "counter",
            "Incoming tunnel handshakes started.",
            handshakes.started,
        ),
        (
            "tunnel_handshakes_failed_total",
            "counter",
            "Incoming tunnel handshakes that failed: a key that is not pinned, a timeout, a protocol error.",
            handshakes.failed,
        ),
        (
            "tunnel_handshakes_refused_total",
            "counter",
            "Incoming tunnel handshakes refused because the most that may be in progress at once were.",
            handshakes.refused,
        ),
        (
            "tunnel_handshakes_retried_total",
            "counter",
            "Incoming tunnel handshakes asked to validate their address first (QUIC Retry) because many were in progress.",
            handshakes.retried,
        ),
    ] {
        m.metric(name, kind, help, &[(String::new(), value as f64)]);
    }
}

/// The byte caches, by peer.
fn cache_metrics(m: &mut Exposition, cache: &CacheReport) {
    let per_peer = |value: fn(&PeerCacheStats) -> u64| {
        cache
            .peers
            .iter()
            .map(|p| (format!(",peer=\"{}\"", p.peer), value(p) as f64))
            .collect::<Vec<_>>()
    };
    m.metric(
        "cache_bytes",
        "gauge",
        "Bytes in the byte cache's store, by peer.",
        &per_peer(|p| p.store_bytes),
    );
    m.metric(
        "cache_chunks",
        "gauge",
        "Chunks in the byte cache's store, by peer.",
        &per_peer(|p| p.chunks),
    );
    m.metric(
        "cache_corrupt_total",
        "counter",
        "Damaged cache records found by verified reads (each was repaired from the peer).",
        &per_peer(|p| p.corrupt),
    );
    m.metric(
        "cache_write_errors_total",
        "counter",
        "Failed appends or flushes of the byte cache's store (a full or failing disk: that data is not cached), by peer.",
        &per_peer(|p| p.write_errors),
    );
}
