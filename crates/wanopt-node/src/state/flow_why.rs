//! Each flow's "why": the limit that binds it on this node, judged from
//! its directions' last second ([`crate::flow::why`]) with the tunnel
//! that carries it and the node's window budget, and said in one line
//! with its figure (`/flows`, `wanopt flows --why`); everything about one
//! flow (`GET /flows/ID`, `wanopt flow ID`).

use serde::{Deserialize, Serialize};

use super::{NodeState, PeerStatus, Status};
use crate::flow::why::{judge, Leg, Limit, Second, TcpCounts, TunnelView};
use crate::flow::{Flow, FlowInfo};

/// One direction of a flow as `GET /flows/ID` shows it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DirectionWhy {
    /// `to_server` or `to_client`.
    pub direction: String,
    /// `lan_to_tunnel` (this node reads the LAN socket) or
    /// `tunnel_to_lan`.
    pub leg: String,
    /// What binds it (see [`Limit`]).
    pub limit: Limit,
    /// That limit in one line, with its figure.
    pub why: String,
    /// Bits per second over the last second.
    pub rate_bps: u64,
    /// Share of the second spent waiting on the LAN socket, percent.
    pub waited_lan_percent: f64,
    /// Share spent waiting on the tunnel stream, percent.
    pub waited_tunnel_percent: f64,
    /// Share spent in the codec, percent.
    pub codec_percent: f64,
}

/// Everything about one flow (`GET /flows/ID`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct FlowDetail {
    /// The flow as `/flows` lists it.
    pub flow: FlowInfo,
    /// Its two directions, to the server then to the client.
    pub directions: Vec<DirectionWhy>,
    /// The kernel's counts of its LAN socket (times over the last second).
    pub lan_socket: Option<TcpCounts>,
    /// The tunnel that carries it.
    pub tunnel: Option<PeerStatus>,
    /// The node's window budget: granted now and its limit, bytes.
    pub window_budget: (u64, u64),
}

/// The budget counts as spent above this share of it.
const BUDGET_SPENT: f64 = 0.95;

impl NodeState {
    /// The live flows, each with the limit that binds it now.
    pub fn flows_explained(&self) -> Vec<FlowInfo> {
        let status = self.status();
        self.flows
            .live_flows()
            .iter()
            .map(|flow| {
                let mut info = flow.info(std::time::Instant::now());
                wan_path(&mut info, &status);
                if let Some((limit, why)) = overall(&explain(flow, &info, &status)) {
                    info.limit = Some(limit.name().to_owned());
                    info.why = Some(why);
                }
                info
            })
            .collect()
    }

    /// The live flows with their WAN path (no limit judged), from a
    /// `status` already taken.
    pub fn flows_on_paths(&self, status: &Status) -> Vec<FlowInfo> {
        let now = std::time::Instant::now();
        self.flows
            .live_flows()
            .iter()
            .map(|flow| {
                let mut info = flow.info(now);
                wan_path(&mut info, status);
                info
            })
            .collect()
    }

    /// Everything about the flow `id`, if it is live.
    pub fn flow_detail(&self, id: u64) -> Option<FlowDetail> {
        let flow = self.flows.live_flows().into_iter().find(|f| f.id == id)?;
        let status = self.status();
        let mut info = flow.info(std::time::Instant::now());
        wan_path(&mut info, &status);
        let directions = explain(&flow, &info, &status);
        if let Some((limit, why)) = overall(&directions) {
            info.limit = Some(limit.name().to_owned());
            info.why = Some(why);
        }
        Some(FlowDetail {
            tunnel: tunnel_of(&info, &status).cloned(),
            lan_socket: flow.why.recent().1,
            flow: info,
            directions,
            window_budget: (status.window_granted_bytes, status.window_budget_bytes),
        })
    }
}

/// Which WAN path the flow `info`'s tunnel packets take, and why, when
/// its peer has several paths: real-time datagrams by the SLA's choice,
/// or as the mode sends them.
fn wan_path(info: &mut FlowInfo, status: &Status) {
    let Some(paths) = tunnel_of(info, status).and_then(|p| p.paths.as_ref()) else {
        return;
    };
    let realtime = info.services.iter().any(|s| s == "realtime");
    if let Some((path, reason, why)) = wan_path_of(realtime, paths) {
        info.wan_path = Some(path);
        info.wan_path_why = Some(why);
        info.wan_path_reason = Some(reason.to_owned());
    }
}

/// The WAN path of a flow (`realtime`: a real-time UDP flow) over
/// `paths`: the path, the reason's word and why.
fn wan_path_of(
    realtime: bool,
    paths: &crate::transport::datagram::PathsStatus,
) -> Option<(String, &'static str, String)> {
    let data = paths.paths.iter().find(|p| p.data).map(|p| p.number);
    let (path, reason, why) = match (paths.mode.as_str(), &paths.realtime) {
        ("duplicate", _) if realtime => (
            "every".to_owned(),
            "duplicate",
            "duplicate: a copy on every path not down".to_owned(),
        ),
        (_, Some(rt)) if realtime => (
            rt.path.to_string(),
            match rt.meets {
                Some(true) => "sla_meets",
                Some(false) => "sla_best",
                None => "sla",
            },
            rt.why
                .clone()
                .unwrap_or_else(|| "the edge's SLA choice".to_owned()),
        ),
        ("bond", _) if realtime && paths.bond.is_some() => (
            "every".to_owned(),
            "bond",
            "bond: real-time datagrams go as a copy on every path up".to_owned(),
        ),
        ("bond", _) if paths.bond.is_some() => {
            let carrying: Vec<String> = paths
                .paths
                .iter()
                .filter(|p| p.bond.as_ref().is_some_and(|b| b.carrying))
                .map(|p| p.number.to_string())
                .collect();
            (
                "bond".to_owned(),
                "bond",
                format!(
                    "bond: over paths {}, each by what it carries",
                    carrying.join(",")
                ),
            )
        }
        (mode, _) => (
            data?.to_string(),
            "data_path",
            format!("{mode}: the data path"),
        ),
    };
    Some((path, reason, why))
}

/// The tunnel that carries the flow `info`, in `status`.
fn tunnel_of<'a>(info: &FlowInfo, status: &'a Status) -> Option<&'a PeerStatus> {
    let peer = info.peer.as_deref()?;
    status.peers.iter().find(|p| p.address == peer)
}

/// A flow's limit: its policy when passed through; else the busier
/// direction's, one that is not idle first; but when the busier one only
/// waits on the peer and the other carries at least half as much under a
/// limit of this node's, that one (an echo's return waits on the peer
/// because its client sends slowly).
fn overall(directions: &[DirectionWhy]) -> Option<(Limit, String)> {
    let busier = directions
        .iter()
        .max_by_key(|d| (d.limit != Limit::Idle, d.rate_bps))?;
    let local = directions.iter().find(|d| {
        !matches!(d.limit, Limit::Idle | Limit::Peer) && d.rate_bps * 2 >= busier.rate_bps
    });
    let chosen = match (busier.limit, local) {
        (Limit::Peer, Some(local)) => local,
        _ => busier,
    };
    Some((chosen.limit, chosen.why.clone()))
}

/// Both directions of `flow` judged: none for a flow whose pumps have not
/// begun or that has no LAN TCP socket (a UDP flow), the policy for one
/// passed through.
fn explain(flow: &Flow, info: &FlowInfo, status: &Status) -> Vec<DirectionWhy> {
    if info.services.iter().any(|s| s == "pass") {
        return vec![DirectionWhy {
            direction: "both".into(),
            leg: "lan_to_lan".into(),
            limit: Limit::Policy,
            why: "passed through, not optimized: it matches no --optimize rule (--pass-unmatched)"
                .into(),
            rate_bps: info.rate_to_server_bps.max(info.rate_to_client_bps),
            waited_lan_percent: 0.0,
            waited_tunnel_percent: 0.0,
            codec_percent: 0.0,
        }];
    }
    let Some(lan_is_client) = flow.why.lan_is_client() else {
        return Vec::new();
    };
    let (seconds, tcp) = flow.why.recent();
    let tunnel = tunnel_of(info, status);
    let view = TunnelView {
        full: tunnel.and_then(|t| t.window_full).unwrap_or(false),
        budget_spent: status.window_budget_bytes > 0
            && status.window_granted_bytes as f64
                >= status.window_budget_bytes as f64 * BUDGET_SPENT,
    };
    ["to_server", "to_client"]
        .iter()
        .zip(seconds)
        .map(|(direction, second)| {
            // The edge reads the client's bytes from its LAN socket; the
            // core reads the server's.
            let reads_lan = (*direction == "to_server") == lan_is_client;
            let leg = match reads_lan {
                true => Leg::LanToTunnel,
                false => Leg::TunnelToLan,
            };
            let limit = judge(leg, &second, tcp.as_ref(), &view);
            let span = second.span_us.max(1) as f64;
            let rate_bps = (second.bytes as f64 * 8e6 / span) as u64;
            let says = Saying {
                lan: if lan_is_client { "client" } else { "server" },
                rate_bps,
                tcp: tcp.as_ref(),
                tunnel,
                status,
                second: &second,
            };
            DirectionWhy {
                direction: (*direction).to_owned(),
                leg: match leg {
                    Leg::LanToTunnel => "lan_to_tunnel",
                    Leg::TunnelToLan => "tunnel_to_lan",
                }
                .into(),
                limit,
                why: says.line(limit),
                rate_bps,
                waited_lan_percent: second.waited[0] as f64 * 100.0 / span,
                waited_tunnel_percent: second.waited[1] as f64 * 100.0 / span,
                codec_percent: second.waited[2] as f64 * 100.0 / span,
            }
        })
        .collect()
}

/// What a direction's line is made of.
struct Saying<'a> {
    /// Who is on the LAN side: `client` or `server`.
    lan: &'static str,
    rate_bps: u64,
    tcp: Option<&'a TcpCounts>,
    tunnel: Option<&'a PeerStatus>,
    status: &'a Status,
    second: &'a Second,
}

fn mbit(bps: f64) -> String {
    format!("{:.1} Mbit/s", bps / 1e6)
}

fn kbytes(bytes: u64) -> String {
    match bytes {
        b if b >= 1 << 20 => format!("{:.1} MB", b as f64 / f64::from(1 << 20)),
        b => format!("{} KB", b.div_ceil(1024)),
    }
}

impl Saying<'_> {
    fn share(&self, waited: usize) -> f64 {
        self.second.waited[waited] as f64 * 100.0 / self.second.span_us.max(1) as f64
    }

    /// The tunnel's figures: its window, pacing, RTT, loss and BBR's
    /// estimate of the bottleneck.
    fn tunnel_figures(&self) -> String {
        let Some(t) = self.tunnel else {
            return "no tunnel".into();
        };
        // The loss the peer measures now (continuous FEC's count), else
        // the tunnel's since it came up.
        let loss = match (&t.fec, t.sent_packets, t.lost_packets) {
            (Some(fec), _, _) => fec.loss_percent,
            (None, Some(sent), Some(lost)) if sent > 0 => lost as f64 * 100.0 / sent as f64,
            _ => 0.0,
        };
        let mut parts = Vec::new();
        if let Some(cwnd) = t.cwnd_bytes {
            parts.push(format!("window {}", kbytes(cwnd)));
        }
        if let Some(pacing) = t.bbr.as_ref().and_then(|b| b.pacing_mbps) {
            parts.push(format!("pacing {pacing:.1} Mbit/s"));
        }
        if let Some(rtt) = t.rtt_ms {
            parts.push(format!("RTT {rtt:.0} ms"));
        }
        parts.push(format!("loss {loss:.2}%"));
        if let Some(bw) = t.bandwidth_estimate_mbps {
            parts.push(format!("bottleneck estimate {bw:.1} Mbit/s"));
        }
        parts.join(", ")
    }

    /// The window the LAN hop needs to carry what the tunnel carries: its
    /// bottleneck estimate over the LAN socket's RTT (`wanopt window`'s
    /// arithmetic).
    fn window_needed(&self) -> Option<u64> {
        let bw = self.tunnel?.bandwidth_estimate_mbps? * 1e6 / 8.0;
        let rtt = f64::from(self.tcp?.rtt_us) / 1e6;
        Some((bw * rtt) as u64)
    }

    fn line(&self, limit: Limit) -> String {
        let (lan, rate) = (self.lan, mbit(self.rate_bps as f64));
        match limit {
            Limit::Idle => format!("idle: nothing to carry (the {lan} or the peer's side sends nothing)"),
            Limit::Sender => format!(
                "the {lan} sends {rate}: the node waits on it {:.0}% of the second",
                self.share(0)
            ),
            Limit::Reader => format!(
                "the {lan} reads slowly or not at all: its receive window is {}, {rate} taken",
                kbytes(u64::from(self.tcp.map_or(0, |t| t.receive_window)))
            ),
            Limit::ReceiveWindow => {
                let tcp = self.tcp.copied().unwrap_or_default();
                let needs = self
                    .window_needed()
                    .map(|n| format!("; the tunnel's rate needs {} at that RTT", kbytes(n)))
                    .unwrap_or_default();
                format!(
                    "the {lan}'s receive window, {} at {:.1} ms, holds the flow to {rate}{needs}",
                    kbytes(u64::from(tcp.receive_window)),
                    f64::from(tcp.rtt_us) / 1e3
                )
            }
            Limit::SendBuffer => format!("this node's send buffer toward the {lan} ({rate})"),
            Limit::LanCongestion => format!(
                "the LAN hop's congestion window toward the {lan}, {} ({rate})",
                kbytes(self.tcp.map_or(0, |t| t.cwnd))
            ),
            Limit::Tunnel => format!(
                "the tunnel's congestion window and pacing ({rate}): {}",
                self.tunnel_figures()
            ),
            Limit::StreamWindow => format!(
                "the stream's flow-control window ({rate}): the tunnel has room, the peer's receiver holds the flow back (its flows --why says why)"
            ),
            Limit::WindowBudget => format!(
                "this node's window budget is spent ({} of {} granted): its peer may send no more ({rate})",
                kbytes(self.status.window_granted_bytes),
                kbytes(self.status.window_budget_bytes)
            ),
            Limit::Peer => {
                let t = self.tunnel;
                let rtt = t
                    .and_then(|t| t.rtt_ms)
                    .map_or(String::new(), |r| format!("; RTT {r:.0} ms"));
                let loss = t
                    .and_then(|t| t.fec.as_ref())
                    .map_or(String::new(), |f| {
                        format!(", {:.2}% of what arrives lost on the way", f.received_loss_percent)
                    });
                format!("the peer's side: {rate} arrive from the tunnel{rtt}{loss} (the peer's flows --why says why)")
            }
            Limit::Codec => format!(
                "the codec's CPU on this node: {:.0}% of the second encoding or decoding ({rate})",
                self.share(2)
            ),
            Limit::Policy => "passed through, not optimized".into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transport::datagram::PathsStatus;

    fn paths(mode: &str, realtime: Option<serde_json::Value>, bond: bool) -> PathsStatus {
        let path = |n: u8, data: bool| {
            serde_json::json!({
                "number": n, "local": null, "remote": "192.0.2.1:4433", "state": "up",
                "rtt_ms": 40.0, "loss_to_peer_percent": 0.0, "loss_from_peer_percent": 0.0,
                "data": data, "sent_bytes": 0, "received_bytes": 0, "probes_sent": 0,
                "probes_received": 0,
                "bond": bond.then(|| serde_json::json!({
                    "sent": 0, "acked": 0, "lost": 0, "stalls": 0, "carrying": true,
                })),
            })
        };
        serde_json::from_value(serde_json::json!({
            "mode": mode, "switches": 0, "probes_dropped": 0,
            "bond": bond.then(|| serde_json::to_value(
                wanopt_proto::datagram::BondStatus::default()
            ).unwrap()),
            "realtime": realtime,
            "paths": [path(1, true), path(2, false)],
        }))
        .unwrap()
    }

    #[test]
    fn a_flow_s_wan_path_says_the_sla_choice_the_bond_or_the_data_path() {
        let sla = serde_json::json!({
            "path": 2, "sla": "latency<60ms", "meets": true,
            "why": "meets latency<60ms (path 1: latency 80 ms > 60 ms)", "moves": 1,
        });
        let bonded = paths("bond", Some(sla.clone()), true);
        assert_eq!(
            wan_path_of(true, &bonded),
            Some((
                "2".into(),
                "sla_meets",
                "meets latency<60ms (path 1: latency 80 ms > 60 ms)".into()
            ))
        );
        assert_eq!(
            wan_path_of(false, &bonded),
            Some((
                "bond".into(),
                "bond",
                "bond: over paths 1,2, each by what it carries".into()
            ))
        );
        let copies = wan_path_of(true, &paths("bond", None, true)).unwrap();
        assert_eq!((copies.0.as_str(), copies.1), ("every", "bond"));
        let dup = wan_path_of(true, &paths("duplicate", None, false)).unwrap();
        assert_eq!((dup.0.as_str(), dup.1), ("every", "duplicate"));
        let failover = paths("failover", Some(serde_json::json!({"path": 2})), false);
        assert_eq!(
            wan_path_of(true, &failover),
            Some(("2".into(), "sla", "the edge's SLA choice".into()))
        );
        assert_eq!(
            wan_path_of(false, &failover),
            Some(("1".into(), "data_path", "failover: the data path".into()))
        );
    }
}
