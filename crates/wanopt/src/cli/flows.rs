//! `wanopt flows`: a node's live flows, one line each (where from and
//! to, its peer, its bytes and rates, its services), and each path's FEC.

use std::io::Write as _;

use anyhow::Context;

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

/// Runs `wanopt flows`.
pub fn flows(args: &QueryArgs) -> anyhow::Result<()> {
    let body = fetch(args.control, "/flows")?;
    let mut out = stdout();
    if args.json {
        writeln!(out, "{body}")?;
        return Ok(());
    }
    let f: Flows = serde_json::from_str(&body).context("the control API sent malformed flows")?;
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
