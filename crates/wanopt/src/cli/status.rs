//! `wanopt status` and `wanopt flows`: read a node's control API.

use std::io::Write as _;
use std::net::SocketAddr;

use anyhow::Context;
use clap::Args;

use wanopt_node::control::token::ControlToken;
use wanopt_node::state::{Role, Status};
use wanopt_path::rate_text;

use super::outcome::stdout;

/// Default control address of `status` and `flows`.
pub const DEFAULT_CONTROL: &str = "127.0.0.1:7447";

/// Options of `wanopt status` and `wanopt flows`.
#[derive(Debug, Args)]
pub struct QueryArgs {
    /// The node's control address (its --control).
    #[arg(long, value_name = "ADDR", default_value = DEFAULT_CONTROL)]
    pub control: SocketAddr,
    /// Print the raw JSON.
    #[arg(long)]
    pub json: bool,
}

fn agent() -> ureq::Agent {
    ureq::Agent::config_builder()
        .timeout_global(Some(std::time::Duration::from_secs(30)))
        .http_status_as_error(false)
        .build()
        .into()
}

/// A node's refusal of a request: its HTTP status and its own one-line
/// message.
#[derive(Debug)]
pub(crate) struct Refused {
    /// The HTTP status (401: no or wrong control token).
    pub status: u16,
    /// The node's message.
    pub message: String,
}

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Refused {}

/// POSTs to the control API with the node's control token (when found); a
/// refusal (4xx/5xx) is a [`Refused`] error with the node's own message.
pub(crate) fn post(
    control: SocketAddr,
    path: &str,
    token: Option<&ControlToken>,
) -> anyhow::Result<String> {
    call(control, path, Some(token))
}

/// GETs from the control API (reading needs no token).
pub(crate) fn fetch(control: SocketAddr, path: &str) -> anyhow::Result<String> {
    call(control, path, None)
}

/// A GET when `post` is `None`, else a POST with the token it holds.
fn call(
    control: SocketAddr,
    path: &str,
    post: Option<Option<&ControlToken>>,
) -> anyhow::Result<String> {
    let url = format!("http://{control}{path}");
    let sent = match post {
        Some(Some(token)) => agent()
            .post(&url)
            .header("authorization", format!("Bearer {}", token.as_str()))
            .send_empty(),
        Some(None) => agent().post(&url).send_empty(),
        None => agent().get(&url).call(),
    };
    let mut response = sent.with_context(|| {
        format!("cannot reach the control API at {control} (is a node running with --control {control}?)")
    })?;
    let status = response.status();
    let plain_text = response
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("text/plain"));
    let body = response
        .body_mut()
        .read_to_string()
        .with_context(|| format!("bad answer from {url}"))?;
    if !status.is_success() {
        match refusal(&body, plain_text) {
            Some(message) => {
                return Err(Refused {
                    status: status.as_u16(),
                    message: message.to_owned(),
                }
                .into())
            }
            None => anyhow::bail!(
                "{url} answered HTTP {status}, not as a wanopt node does (is a node's --control there?)"
            ),
        }
    }
    Ok(body)
}

/// A node refuses with one short line of plain text; anything else (an
/// HTML error page, an empty body) came from something that is not a
/// node's control API and is not worth printing.
fn refusal(body: &str, plain_text: bool) -> Option<&str> {
    let message = body.trim();
    (plain_text && !message.is_empty() && message.len() <= 4096 && !message.contains('\n'))
        .then_some(message)
}

/// The `reduce` line of a node that runs it: what it saved, or why it
/// saved nothing (no optimized flow ran it: the peer runs `--no-reduce`,
/// or the edge's `--no-reduce-to` matched).
fn reduce_line(s: &Status) -> String {
    let optimized = s.flows_total.saturating_sub(s.flows_passed_through);
    if optimized > 0 && s.flows_reduced == 0 {
        let why = match s.role {
            Role::Core => "its edge runs --no-reduce, or the edge's --no-reduce-to matched",
            Role::Edge => "the core runs --no-reduce, or --no-reduce-to matched",
            Role::EdgeCore => "a peer runs --no-reduce, or no-reduce-to matched",
        };
        return format!(
            "on, but none of {} ran it ({why})",
            counted(optimized, "optimized flow", "optimized flows")
        );
    }
    let share = if s.flows_reduced < optimized {
        format!(
            " ({} of {optimized} optimized flows ran it)",
            s.flows_reduced
        )
    } else {
        String::new()
    };
    // Acknowledgements of the peer's data cost a little: a node that
    // only received reads "more", not "-0.4% less".
    let (share_of_lan, less_or_more) = if s.reduction < 0.0 {
        (-s.reduction, "more")
    } else {
        (s.reduction, "less")
    };
    format!(
        "on: {:.1}% {less_or_more} on the WAN{share}, {} sent, {}",
        share_of_lan * 100.0,
        counted(s.references, "reference", "references"),
        counted(s.cache_hits, "cache hit", "cache hits")
    )
}

pub(crate) fn human_bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KB", "MB", "GB", "TB"];
    let mut v = n as f64;
    let mut unit = 0;
    while v >= 1000.0 && unit + 1 < UNITS.len() {
        v /= 1000.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{n} B")
    } else {
        format!("{v:.1} {}", UNITS[unit])
    }
}

/// `n` and the noun that goes with it: `1 reference`, `2 references`.
pub fn counted(n: u64, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

pub(super) fn human_secs(secs: f64) -> String {
    let s = secs as u64;
    match s {
        0..=59 => format!("{secs:.1}s"),
        60..=3599 => format!("{}m{:02}s", s / 60, s % 60),
        _ => format!("{}h{:02}m", s / 3600, (s % 3600) / 60),
    }
}

/// Runs `wanopt status`.
pub fn status(args: &QueryArgs) -> anyhow::Result<()> {
    let body = fetch(args.control, "/status")?;
    let mut out = stdout();
    if args.json {
        writeln!(out, "{body}")?;
        return Ok(());
    }
    let s: Status = serde_json::from_str(&body).context("the control API sent malformed status")?;
    for line in head_lines(&s)?.into_iter().chain(configured_lines(&s)) {
        writeln!(out, "{line}")?;
    }
    for p in &s.peers {
        writeln!(
            out,
            "peer        {} {} for {}",
            p.address,
            p.state,
            human_secs(p.state_secs)
        )?;
        if let Some(key) = &p.key {
            writeln!(out, "  key       {key}")?;
        }
        if let Some(transport) = &p.transport {
            match &p.transport_why {
                Some(why) if !why.is_empty() => writeln!(out, "  over      {transport} ({why})")?,
                _ => writeln!(out, "  over      {transport}")?,
            }
        }
        if let Some(rtt) = p.rtt_ms {
            writeln!(out, "  rtt       {rtt:.2} ms")?;
        }
        match (&p.bbr, p.cwnd_bytes, p.bandwidth_estimate_mbps) {
            (Some(bbr), Some(cwnd), _) => {
                writeln!(out, "  window    {}", human_bytes(cwnd))?;
                let pacing = bbr
                    .pacing_mbps
                    .map_or_else(|| "-".to_owned(), |r| rate_text(r * 1e6));
                let min_rtt = bbr
                    .min_rtt_ms
                    .map_or_else(|| "-".to_owned(), |r| format!("{r:.2} ms"));
                writeln!(
                    out,
                    "  bbr       {}, bottleneck {}, pacing {pacing}, min rtt {min_rtt}{}",
                    bbr.mode,
                    rate_text(bbr.bandwidth_mbps * 1e6),
                    if bbr.moving {
                        ", rate moving (a cellular link)"
                    } else {
                        ""
                    }
                )?;
            }
            (None, Some(cwnd), Some(bw)) => writeln!(
                out,
                "  window    {} (cwnd/rtt {})",
                human_bytes(cwnd),
                rate_text(bw * 1e6)
            )?,
            _ => {}
        }
        writeln!(
            out,
            "  rate      send {}, receive {}",
            rate_text(p.send_rate_mbps * 1e6),
            rate_text(p.receive_rate_mbps * 1e6)
        )?;
        path_lines(&mut out, p)?;
    }
    let limited = match s.flows_limited {
        0 => String::new(),
        n => format!(", {n} over --max-flows limits"),
    };
    writeln!(
        out,
        "flows       {} active, {} total, {} refused, {} passed through{limited}",
        s.flows_active, s.flows_total, s.flows_refused, s.flows_passed_through
    )?;
    writeln!(out, "resets      {}", resets_line(&s.flow_resets))?;
    if s.window_budget_bytes > 0 {
        writeln!(
            out,
            "windows     {} of {} granted to flows (--window-budget)",
            human_bytes(s.window_granted_bytes),
            human_bytes(s.window_budget_bytes)
        )?;
    }
    writeln!(
        out,
        "bytes       {} to servers, {} to clients",
        human_bytes(s.bytes_to_server),
        human_bytes(s.bytes_to_client)
    )?;
    writeln!(
        out,
        "wan bytes   {} to servers, {} to clients",
        human_bytes(s.wan_bytes_to_server),
        human_bytes(s.wan_bytes_to_client)
    )?;
    if s.reduce {
        writeln!(out, "reduce      {}", reduce_line(&s))?;
        if s.pieces > 0 {
            writeln!(
                out,
                "            {} sent early (a trickling source's held bytes)",
                counted(s.pieces, "piece", "pieces")
            )?;
        }
        if s.cache_misses + s.repairs > 0 {
            writeln!(
                out,
                "            {} asked of the peer, {} sent",
                counted(s.cache_misses, "cache miss", "cache misses"),
                counted(s.repairs, "repair", "repairs")
            )?;
        }
        if s.compressor_bytes + s.decompressor_bytes > 0 {
            writeln!(
                out,
                "            {} of stream compressors (sending flows), {} of decompressors (receiving)",
                human_bytes(s.compressor_bytes),
                human_bytes(s.decompressor_bytes)
            )?;
        }
        if s.compressor_reserved + s.compressor_step_downs > 0 {
            writeln!(
                out,
                "            compressor budget {} of {} reserved, {}",
                human_bytes(s.compressor_reserved),
                human_bytes(s.compressor_budget),
                counted(
                    s.compressor_step_downs,
                    "step down to a cheaper codec",
                    "step downs to a cheaper codec"
                )
            )?;
        }
    } else {
        writeln!(out, "reduce      off (--no-reduce)")?;
    }
    Ok(())
}

/// The node's role, version, uptime and tunnel.
fn head_lines(s: &Status) -> anyhow::Result<Vec<String>> {
    let role = serde_json::to_value(s.role)?;
    let congestion = serde_json::to_value(s.congestion)?;
    Ok(vec![
        format!("role        {}", role.as_str().unwrap_or("?")),
        format!("version     {}", s.version),
        format!("uptime      {}", human_secs(s.uptime_secs)),
        format!(
            "tunnel      {} ({} congestion control)",
            s.tunnel,
            congestion.as_str().unwrap_or("?")
        ),
    ])
}

/// The configuration's peers, up or down, one line each (state, since,
/// why, flows, bytes), and the configuration's hash and reloads.
fn configured_lines(s: &Status) -> Vec<String> {
    let mut lines = Vec::new();
    if let Some(hash) = &s.config_hash {
        let refused = match s.reload_failures {
            0 => String::new(),
            n => format!(", {n} refused"),
        };
        lines.push(format!(
            "config      hash {hash}, {}{refused}",
            counted(s.reloads, "reload", "reloads")
        ));
    }
    if s.configured_peers.is_empty() {
        return lines;
    }
    let up = s
        .configured_peers
        .iter()
        .filter(|p| p.state == wanopt_node::peer_book::PeerState::Up)
        .count();
    lines.push(format!(
        "peers       {} configured, {up} up",
        s.configured_peers.len()
    ));
    for p in &s.configured_peers {
        let at = match (&p.endpoint, p.tunnels.first()) {
            (_, Some(tunnel)) => format!(" at {tunnel}"),
            (Some(endpoint), None) => format!(" dialed at {endpoint}"),
            (None, None) => String::new(),
        };
        let why = p
            .why
            .as_deref()
            .map(|w| format!(": {w}"))
            .unwrap_or_default();
        lines.push(format!(
            "  {}{at} {} for {}{why}",
            p.label,
            p.state.name(),
            human_secs(p.state_secs)
        ));
        if p.flows_total > 0 {
            lines.push(format!(
                "    {} live, {} in all; {} to server, {} to client, {:.0}% saved",
                counted(p.flows_active, "flow", "flows"),
                p.flows_total,
                human_bytes(p.bytes_to_server),
                human_bytes(p.bytes_to_client),
                p.reduction * 100.0
            ));
        }
    }
    lines
}

/// A peer's packets, tail duplication, FEC, reconnections and last error.
fn path_lines(
    out: &mut impl std::io::Write,
    p: &wanopt_node::state::PeerStatus,
) -> std::io::Result<()> {
    if let (Some(mtu), Some(sent), Some(lost)) = (p.mtu, p.sent_packets, p.lost_packets) {
        writeln!(out, "  packets   {sent} sent, {lost} lost, path MTU {mtu}")?;
    }
    if let Some(d) = &p.duplication {
        writeln!(out, "  dup       {}", duplication_line(d))?;
    }
    if let Some(f) = &p.fec {
        for line in fec_lines(f) {
            writeln!(out, "  fec       {line}")?;
        }
    }
    if let Some(paths) = &p.paths {
        for line in paths_lines(paths) {
            writeln!(out, "  {line}")?;
        }
    }
    if p.dial_failures > 0 {
        writeln!(out, "  dial failures {}", p.dial_failures)?;
    }
    if p.reconnects > 0 {
        writeln!(out, "  reconnects {}", p.reconnects)?;
    }
    if let Some(err) = &p.last_error {
        writeln!(out, "  last error {err}")?;
    }
    Ok(())
}

/// Lines on a peer's WAN paths: one per path (its addresses, state, probe
/// RTT and loss each way, whether it carries data, FEC repairs
/// (spread-fec) or, in duplicate mode,
/// copies), then the switches (and the copies dropped).
fn paths_lines(paths: &wanopt_node::datagram::PathsStatus) -> Vec<String> {
    let percent = |l: Option<f64>| l.map_or_else(|| "-".to_owned(), |l| format!("{l:.1}%"));
    let mut lines: Vec<String> = paths
        .paths
        .iter()
        .map(|p| {
            format!(
                "path {}    {} -> {}  {}  rtt {}{}  loss {} up, {} down{}  {}{}",
                p.number,
                p.local.as_deref().unwrap_or("*"),
                p.remote,
                p.state,
                p.rtt_ms
                    .map_or_else(|| "-".to_owned(), |r| format!("{r:.2} ms")),
                p.jitter_ms
                    .map_or_else(String::new, |j| format!("  jitter {j:.1} ms")),
                percent(p.loss_to_peer_percent),
                percent(p.loss_from_peer_percent),
                p.send_mbps
                    .map_or_else(String::new, |r| format!("  sends at most {r:.1} Mbit/s")),
                if let Some(bond) = &p.bond {
                    format!(
                        "{}  {} sent, {} lost, {} stalls",
                        if bond.carrying { "bond" } else { "standby" },
                        bond.sent,
                        bond.lost,
                        bond.stalls
                    )
                } else if p.data {
                    "data".to_owned()
                } else if p.repairs {
                    "repairs".to_owned()
                } else if paths.mode == "duplicate" && p.state != "down" {
                    "copies".to_owned()
                } else {
                    "standby".to_owned()
                },
                if p.realtime { ", real-time" } else { "" }
            )
        })
        .collect();
    if let Some(rt) = &paths.realtime {
        lines.push(match (&rt.sla, &rt.why) {
            (Some(sla), Some(why)) => format!(
                "real-time on path {} by sla {sla}: {why} ({} moves)",
                rt.path, rt.moves
            ),
            _ => format!("real-time on path {} (the edge's SLA choice)", rt.path),
        });
    }
    let mut last = format!("switches  {} ({})", paths.switches, paths.mode);
    if paths.mode == "duplicate" {
        last.push_str(&format!(
            ", {} second copies dropped",
            paths.duplicates_dropped
        ));
    }
    if let Some(bond) = &paths.bond {
        last.push_str(&format!(
            ", reorder hold {:.0} ms, {} late, {} sent again after a stall, {} dropped",
            bond.hold_ms, bond.late, bond.reinjected, bond.dropped
        ));
    }
    lines.push(last);
    lines
}

/// Lines on a path's continuous FEC: what this node sends (the code, the
/// loss the peer measured, the overhead, what the peer rebuilt) and what
/// it receives (the loss, what it rebuilt, what was left).
pub(super) fn fec_lines(f: &wanopt_node::datagram::FecStatus) -> Vec<String> {
    let mut lines = Vec::new();
    let code = match &f.code {
        Some(code) => format!("on, {code} ({:.1}% repairs)", f.ratio_percent),
        None if f.mode == "off" => "off".to_owned(),
        None => "off for now".to_owned(),
    };
    lines.push(format!(
        "send {}: {code}; peer measures {:.2}% loss (bursts of {:.1}), {:.2}% after repair; \
         {} sources, {} repairs ({:.1}% overhead), {} rebuilt by the peer",
        f.mode,
        f.loss_percent,
        f.burst,
        f.residual_loss_percent,
        f.sources_sent,
        f.repairs_sent,
        f.overhead_percent,
        f.peer_recovered
    ));
    if f.received + f.lost > 0 {
        lines.push(format!(
            "receive: {} sources, {:.2}% lost, {} rebuilt from {} repairs, {:.2}% left",
            f.received,
            f.received_loss_percent,
            f.recovered,
            f.repairs_received,
            f.received_residual_percent
        ));
    }
    lines
}

/// One line on a path's tail duplication: the mode, whether it is on now
/// and why, and what it sent.
fn duplication_line(d: &wanopt_node::datagram::DuplicationStatus) -> String {
    use wanopt_node::datagram::DuplicationMode;
    let state = match (d.mode, d.active) {
        (DuplicationMode::Off, _) => "off".to_owned(),
        (mode, true) => format!(
            "{mode}: tails on (loss {:.2}%, quiet {:.1} ms, up to {} per burst)",
            d.loss_percent,
            d.quiet_ms.unwrap_or(0.0),
            human_bytes(d.tail_bytes.unwrap_or(0) as u64)
        ),
        (mode, false) if d.bulk => format!(
            "{mode}: tails off while the path carries bulk traffic (loss {:.2}%)",
            d.loss_percent
        ),
        (mode, false) => format!("{mode}: tails off (loss {:.2}%)", d.loss_percent),
    };
    let rebuilt = if d.rebuilt > 0 {
        format!("; {} datagrams rebuilt from the peer's parity", d.rebuilt)
    } else {
        String::new()
    };
    if d.datagrams == 0 {
        return state + &rebuilt;
    }
    let mut line = format!(
        "{state}; {} datagrams ({}) repeated in {} bursts",
        d.datagrams,
        human_bytes(d.bytes),
        d.bursts
    );
    if d.stream_ends > 0 {
        line.push_str(&format!(
            " ({} of them the end of a bulk transfer)",
            d.stream_ends
        ));
    }
    if d.parity_groups > 0 {
        line.push_str(&format!(", {} tails sent as parity", d.parity_groups));
    }
    if d.busy > 0 {
        line.push_str(&format!(", {} left out on a busy path", d.busy));
    }
    if d.stalled > 0 {
        line.push_str(&format!(
            ", {} left out while the sender waited for its window",
            d.stalled
        ));
    }
    if d.over_budget > 0 {
        line.push_str(&format!(", {} over budget", d.over_budget));
    }
    line + &rebuilt
}

/// `status`'s resets line: the total, then each reason that occurred;
/// codec errors (this node's or the peer's) are marked, they are defects.
fn resets_line(resets: &std::collections::BTreeMap<String, u64>) -> String {
    let total: u64 = resets.values().sum();
    if total == 0 {
        return "none".into();
    }
    let mut parts = Vec::new();
    for (reason, &n) in resets.iter().filter(|(_, &n)| n > 0) {
        let mark = match reason.as_str() {
            "codec" | "peer_codec" => " (codec error: see the node's log)",
            _ => "",
        };
        parts.push(format!("{n} {reason}{mark}"));
    }
    format!("{total}: {}", parts.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_path_gets_a_line_with_its_state_and_whether_it_carries_data() {
        use wanopt_node::datagram::{PathStatus, PathsStatus};
        let path = |number, state: &str, data| PathStatus {
            number,
            local: Some(format!("10.0.{number}.1")),
            remote: format!("192.0.2.{number}:4433"),
            state: state.to_owned(),
            rtt_ms: (state != "down").then_some(40.0),
            loss_to_peer_percent: Some(0.0),
            loss_from_peer_percent: None,
            data,
            sent_bytes: 0,
            received_bytes: 0,
            probes_sent: 0,
            probes_received: 0,
            copy_bytes: 0,
            repair_bytes: 0,
            repairs: false,
            bond: None,
            send_mbps: None,
            jitter_ms: None,
            realtime: false,
        };
        let lines = paths_lines(&PathsStatus {
            mode: "failover".into(),
            duplicates_dropped: 0,
            switches: 1,
            probes_dropped: 0,
            bond: None,
            realtime: None,
            paths: vec![path(1, "down", false), path(2, "up", true)],
        });
        assert_eq!(
            lines,
            [
                "path 1    10.0.1.1 -> 192.0.2.1:4433  down  rtt -  loss 0.0% up, - down  standby",
                "path 2    10.0.2.1 -> 192.0.2.2:4433  up  rtt 40.00 ms  loss 0.0% up, - down  data",
                "switches  1 (failover)",
            ]
        );
        let lines = paths_lines(&PathsStatus {
            mode: "duplicate".into(),
            duplicates_dropped: 12,
            switches: 0,
            probes_dropped: 0,
            bond: None,
            realtime: None,
            paths: vec![path(1, "up", true), path(2, "up", false)],
        });
        assert!(lines[1].ends_with("  copies"), "{}", lines[1]);
        assert_eq!(
            lines[2],
            "switches  0 (duplicate), 12 second copies dropped"
        );
        let mut repairs = path(2, "up", false);
        repairs.repairs = true;
        let lines = paths_lines(&PathsStatus {
            mode: "spread-fec".into(),
            duplicates_dropped: 0,
            switches: 0,
            probes_dropped: 0,
            bond: None,
            realtime: None,
            paths: vec![path(1, "up", true), repairs],
        });
        assert!(lines[1].ends_with("  repairs"), "{}", lines[1]);
        assert_eq!(lines[2], "switches  0 (spread-fec)");
        let mut bonded = path(1, "up", true);
        bonded.send_mbps = Some(19.4);
        bonded.bond = Some(wanopt_node::datagram::BondPathStatus {
            sent: 10,
            acked: 9,
            lost: 1,
            stalls: 0,
            carrying: true,
        });
        let lines = paths_lines(&PathsStatus {
            mode: "bond".into(),
            duplicates_dropped: 0,
            switches: 0,
            probes_dropped: 0,
            bond: Some(wanopt_node::datagram::BondStatus {
                hold_ms: 30.4,
                late: 2,
                reinjected: 5,
                ..Default::default()
            }),
            realtime: None,
            paths: vec![bonded],
        });
        assert!(
            lines[0].ends_with("  sends at most 19.4 Mbit/s  bond  10 sent, 1 lost, 0 stalls"),
            "{}",
            lines[0]
        );
        assert_eq!(
            lines[1],
            "switches  0 (bond), reorder hold 30 ms, 2 late, 5 sent again after a stall, 0 dropped"
        );
        let mut steered = path(2, "up", false);
        steered.realtime = true;
        steered.jitter_ms = Some(1.25);
        let lines = paths_lines(&PathsStatus {
            mode: "failover".into(),
            duplicates_dropped: 0,
            switches: 0,
            probes_dropped: 0,
            bond: None,
            realtime: Some(wanopt_node::datagram::RealtimeStatus {
                path: 2,
                sla: Some("latency<60ms".into()),
                meets: Some(true),
                why: Some("meets latency<60ms (path 1: latency 80 ms > 60 ms)".into()),
                moves: 1,
            }),
            paths: vec![path(1, "up", true), steered],
        });
        assert!(
            lines[1]
                .ends_with("rtt 40.00 ms  jitter 1.2 ms  loss 0.0% up, - down  standby, real-time"),
            "{}",
            lines[1]
        );
        assert_eq!(
            lines[2],
            "real-time on path 2 by sla latency<60ms: meets latency<60ms (path 1: latency 80 ms > 60 ms) (1 moves)"
        );
    }

    #[test]
    fn counts_take_the_noun_that_goes_with_them() {
        assert_eq!(counted(0, "time", "times"), "0 times");
        assert_eq!(counted(1, "cache miss", "cache misses"), "1 cache miss");
        assert_eq!(counted(207, "cache hit", "cache hits"), "207 cache hits");
    }

    #[test]
    fn the_reduce_line_says_when_no_flow_ran_reduce() {
        use wanopt_node::datagram::DuplicationMode;
        use wanopt_node::state::NodeState;
        use wanopt_node::tunnel::Congestion;
        let mut s =
            NodeState::new(Role::Core, Congestion::Bbr, DuplicationMode::Off, None).status();
        s.reduce = true;
        // Nothing yet: the usual line.
        assert!(reduce_line(&s).starts_with("on: 0.0% less on the WAN, 0 references"));
        // Three optimized flows (one more passed through), none reduced:
        // the edge ran --no-reduce.
        (s.flows_total, s.flows_passed_through) = (4, 1);
        let line = reduce_line(&s);
        assert!(
            line.starts_with("on, but none of 3 optimized flows ran it (its edge runs --no-reduce"),
            "{line}"
        );
        s.role = Role::Edge;
        assert!(reduce_line(&s).ends_with("(the core runs --no-reduce, or --no-reduce-to matched)"));
        s.role = Role::Core;
        // Some did: the share says over how many flows the figure is.
        (s.flows_reduced, s.reduction, s.references) = (2, 0.5, 7);
        assert_eq!(
            reduce_line(&s),
            "on: 50.0% less on the WAN (2 of 3 optimized flows ran it), 7 references sent, 0 cache hits"
        );
        s.flows_reduced = 3;
        assert_eq!(
            reduce_line(&s),
            "on: 50.0% less on the WAN, 7 references sent, 0 cache hits"
        );
        // A node that only received: its acknowledgements cost a little.
        s.reduction = -0.004;
        assert!(reduce_line(&s).starts_with("on: 0.4% more on the WAN"));
    }

    #[test]
    fn only_a_nodes_short_plain_refusal_is_printed() {
        let node = "the cache is busy: 2 flows are reducing";
        assert_eq!(refusal(node, true), Some(node));
        assert_eq!(refusal("  cleared \n", true), Some("cleared"));
        // Not a node: an HTML page, an empty or multi-line body, an essay.
        assert_eq!(refusal("<html><h1>404</h1></html>", false), None);
        assert_eq!(refusal("", true), None);
        assert_eq!(refusal("one\ntwo", true), None);
        assert_eq!(refusal(&"x".repeat(4097), true), None);
    }

    #[test]
    fn the_resets_line_names_each_reason_and_marks_codec_errors() {
        let mut resets = std::collections::BTreeMap::new();
        resets.insert("lan".to_owned(), 0);
        assert_eq!(resets_line(&resets), "none");
        resets.insert("lan".to_owned(), 3);
        resets.insert("codec".to_owned(), 1);
        resets.insert("tunnel".to_owned(), 0);
        assert_eq!(
            resets_line(&resets),
            "4: 1 codec (codec error: see the node's log), 3 lan"
        );
    }
}
