//! `wanopt flows`: a node's live flows, one line each (where from and
//! to, its peer, its bytes and rates, its services), and each path's FEC;
//! `wanopt flows --why`: the limit that binds each flow on the node;
//! `wanopt flow ID`: everything about one.

use std::io::Write as _;

use anyhow::Context;
use clap::Args;

use wanopt_node::control::Flows;
use wanopt_node::state::Role;
use wanopt_path::rate_text;

use super::outcome::stdout;
use super::status::{fec_lines, fetch, human_bytes, human_secs, QueryArgs};

/// A flow's services; a UDP flow's datagrams each way and the loss this
/// node counted (the direction it receives).
fn services_text(flow: &wanopt_node::flow::FlowInfo, role: Role) -> String {
    let mut services = flow.services.join(",");
    if let Some(class) = &flow.class {
        services = format!("{services} [{class}]");
    }
    if let Some(path) = &flow.wan_path {
        services = format!("{services} via {}", path_word(path));
    }
    if !flow.services.iter().any(|s| s == "udp") {
        return services;
    }
    // Each node counts the loss of the direction it receives.
    let lost = match role {
        Role::Edge => format!("lost {} down", flow.lost_to_client),
        Role::Core => format!("lost {} up", flow.lost_to_server),
        Role::EdgeCore => format!(
            "lost {} toward the client, {} toward the server",
            flow.lost_to_client, flow.lost_to_server
        ),
    };
    format!(
        "{services} ({} up, {} down datagrams; {lost})",
        flow.datagrams_to_server, flow.datagrams_to_client
    )
}

/// Options of `wanopt flows`.
#[derive(Debug, Args)]
pub struct FlowsArgs {
    #[command(flatten)]
    pub query: QueryArgs,
    /// One line per flow: the limit that binds it on this node now (the
    /// client's or server's window, a slow sender or reader, the tunnel's
    /// window, the stream's window, the node's window budget, the codec's
    /// CPU, the policy) and its figure.
    #[arg(long)]
    pub why: bool,
}

/// Options of `wanopt flow`.
#[derive(Debug, Args)]
pub struct FlowArgs {
    /// The flow's ID (the first column of `wanopt flows`).
    pub id: u64,
    #[command(flatten)]
    pub query: QueryArgs,
}

/// Runs `wanopt flows`.
pub fn flows(args: &FlowsArgs) -> anyhow::Result<()> {
    let body = fetch(args.query.control, "/flows")?;
    let mut out = stdout();
    if args.query.json {
        writeln!(out, "{body}")?;
        return Ok(());
    }
    let f: Flows = serde_json::from_str(&body).context("the control API sent malformed flows")?;
    if args.why {
        return why_lines(&f, &mut out);
    }
    let (up, down) = lan_columns(f.role);
    writeln!(
                out,
        "{:>6}  {:<22} {:<24} {:<16} {:<12} {:>11} {:>11} {:>10} {:>10} {:>6} {:>13} {:>13} {:>7}  SERVICES",
        "ID",
        "SOURCE",
        "DESTINATION",
        "PEER",
        "STATE",
        up,
        down,
        "WAN-UP",
        "WAN-DOWN",
        "SAVED",
        "RATE-UP",
        "RATE-DOWN",
        "AGE"
    )?;
    for flow in &f.flows {
        let state = serde_json::to_value(flow.state)?;
        writeln!(
                out,
            "{:>6}  {:<22} {:<24} {:<16} {:<12} {:>11} {:>11} {:>10} {:>10} {:>5.0}% {:>13} {:>13} {:>7}  {}",
            flow.id,
            flow.source,
            flow.destination,
            peer_column(flow.peer_name.as_deref()),
            state.as_str().unwrap_or("?"),
            human_bytes(flow.bytes_to_server),
            human_bytes(flow.bytes_to_client),
            human_bytes(flow.wan_bytes_to_server),
            human_bytes(flow.wan_bytes_to_client),
            flow.reduction * 100.0,
            rate_text(flow.rate_to_server_bps as f64),
            rate_text(flow.rate_to_client_bps as f64),
            human_secs(flow.age_secs),
            services_text(flow, f.role)
        )?;
    }
    if f.flows.is_empty() {
        writeln!(out, "(no live flows)")?;
    } else if f.role == Role::Edge {
        writeln!(
            out,
            "(FROM-CLIENT: taken from the client into the tunnel; an upload has reached the server once the core's TO-SERVER shows it)"
        )?;
    }
    for path in &f.paths {
        if let Some(fec) = &path.fec {
            for line in fec_lines(fec) {
                writeln!(out, "path {}  fec {line}", path.peer)?;
            }
        }
    }
    Ok(())
}

/// A flow's WAN path as the flows table says it: `path 2`, `bond`,
/// `every path`.
fn path_word(path: &str) -> String {
    match path {
        "bond" => "bond".to_owned(),
        "every" => "every path".to_owned(),
        n => format!("path {n}"),
    }
}

/// `flows --why`: one line per flow, its limit and why.
fn why_lines(f: &Flows, out: &mut impl std::io::Write) -> anyhow::Result<()> {
    writeln!(
        out,
        "{:>6}  {:<24} {:<16} {:<14}  WHY",
        "ID", "DESTINATION", "PEER", "LIMIT"
    )?;
    for flow in &f.flows {
        writeln!(
            out,
            "{:>6}  {:<24} {:<16} {:<14}  {}",
            flow.id,
            flow.destination,
            peer_column(flow.peer_name.as_deref()),
            flow.limit.as_deref().unwrap_or("-"),
            flow.why
                .as_deref()
                .unwrap_or("(not judged yet: a flow's first second, or a UDP flow)")
        )?;
        if let (Some(path), Some(why)) = (&flow.wan_path, &flow.wan_path_why) {
            writeln!(out, "{:>6}  via {}: {why}", "", path_word(path))?;
        }
    }
    if f.flows.is_empty() {
        writeln!(out, "(no live flows)")?;
    }
    Ok(())
}

/// Runs `wanopt flow ID`: the flow, then each direction's limit and what
/// it waited on, the LAN socket's counts and the tunnel.
pub fn flow(args: &FlowArgs) -> anyhow::Result<()> {
    let body = fetch(args.query.control, &format!("/flows/{}", args.id))?;
    let mut out = stdout();
    if args.query.json {
        writeln!(out, "{body}")?;
        return Ok(());
    }
    let d: wanopt_node::state::FlowDetail =
        serde_json::from_str(&body).context("the control API sent a malformed flow")?;
    let f = &d.flow;
    writeln!(
        out,
        "flow        {} {} -> {}",
        f.id, f.source, f.destination
    )?;
    let state = serde_json::to_value(f.state)?;
    writeln!(
        out,
        "state       {} for {}; services {}",
        state.as_str().unwrap_or("?"),
        human_secs(f.age_secs),
        f.services.join(",")
    )?;
    if let Some(peer) = &f.peer {
        writeln!(
            out,
            "peer        {} at {peer}",
            f.peer_name.as_deref().unwrap_or("?")
        )?;
    }
    writeln!(
        out,
        "bytes       {} to server, {} to client; on the WAN {} and {}",
        human_bytes(f.bytes_to_server),
        human_bytes(f.bytes_to_client),
        human_bytes(f.wan_bytes_to_server),
        human_bytes(f.wan_bytes_to_client)
    )?;
    if let (Some(path), Some(why)) = (&f.wan_path, &f.wan_path_why) {
        writeln!(out, "wan path    {}: {why}", path_word(path))?;
    }
    if let Some(why) = &f.why {
        writeln!(out, "why         {why}")?;
    }
    for dir in &d.directions {
        writeln!(
            out,
            "{:<11} {}: {} (waited: LAN {:.0}%, tunnel {:.0}%, codec {:.0}%)",
            dir.direction.replace('_', " "),
            rate_text(dir.rate_bps as f64),
            serde_json::to_value(dir.limit)?.as_str().unwrap_or("?"),
            dir.waited_lan_percent,
            dir.waited_tunnel_percent,
            dir.codec_percent
        )?;
        writeln!(out, "            {}", dir.why)?;
    }
    if let Some(tcp) = &d.lan_socket {
        writeln!(
            out,
            "lan socket  rtt {:.2} ms, its receiver's window {}, cwnd {}, unsent {}; last second: busy {} ms, of it {} ms held by the receiver's window, {} ms by the send buffer",
            f64::from(tcp.rtt_us) / 1e3,
            human_bytes(u64::from(tcp.receive_window)),
            human_bytes(tcp.cwnd),
            human_bytes(u64::from(tcp.unsent)),
            tcp.busy_us / 1000,
            tcp.rwnd_limited_us / 1000,
            tcp.sndbuf_limited_us / 1000
        )?;
    }
    if let Some(t) = &d.tunnel {
        writeln!(
            out,
            "tunnel      {} {}: rtt {} ms, window {}, {}",
            t.address,
            t.state,
            t.rtt_ms.map_or("-".into(), |r| format!("{r:.1}")),
            t.cwnd_bytes.map_or("-".into(), human_bytes),
            match t.window_full {
                Some(true) => "full (its sender waited for the window)",
                Some(false) => "not full",
                None => "fullness unknown (not wanopt's BBR)",
            }
        )?;
    }
    let (granted, limit) = d.window_budget;
    writeln!(
        out,
        "budget      {} of {} of receive windows granted",
        human_bytes(granted),
        human_bytes(limit)
    )?;
    Ok(())
}

/// A flow's peer in the flows table: its name, or its key cut to 15
/// characters and an ellipsis; `-` without one.
fn peer_column(label: Option<&str>) -> String {
    match label {
        None => "-".to_owned(),
        Some(l) if l.chars().count() <= 16 => l.to_owned(),
        Some(l) => format!("{}…", l.chars().take(15).collect::<String>()),
    }
}

/// The flow table's LAN byte columns as this node counts them: an edge
/// takes the client's bytes in and delivers the server's, a core
/// delivers the client's and takes the server's in.
fn lan_columns(role: Role) -> (&'static str, &'static str) {
    match role {
        Role::Edge => ("FROM-CLIENT", "TO-CLIENT"),
        Role::Core => ("TO-SERVER", "FROM-SERVER"),
        Role::EdgeCore => ("TO-SERVER", "TO-CLIENT"),
    }
}
