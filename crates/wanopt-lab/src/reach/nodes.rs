//! What the `reach` scenario does to a running lab besides its
//! downloads: start the edge again (so that the first flow is timed from
//! the edge's start, with the path's rules already in place), read the
//! edge's `wanopt status --json` (the transport its tunnel uses, and why;
//! the flows it reset, by reason), and change the link's middlebox rules
//! while things run.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use crate::optimize::EDGE_CONTROL;
use crate::topology::{Lab, Node};

/// The lab's name for the edge's process.
const EDGE_DAEMON: &str = "wanopt-edge";

/// Whether this executable's edge takes `--transport` (the TCP transport
/// for paths that block or police UDP).
pub fn supports_transport(exe: &Path) -> bool {
    Command::new(exe)
        .args(["edge", "--help"])
        .output()
        .map(|o| o.status.success() && String::from_utf8_lossy(&o.stdout).contains("--transport"))
        .unwrap_or(false)
}

/// The edge's arguments for the `wanopt` mode: `--transport auto` when
/// the edge has it (without, the edge can only use QUIC, and the run says
/// so).
pub fn edge_args(transport: bool) -> Vec<String> {
    if transport {
        vec!["--transport".into(), "auto".into()]
    } else {
        Vec::new()
    }
}

/// A program and its arguments from `/proc/PID/cmdline` (NUL-separated).
fn command_line(raw: &[u8]) -> Option<(PathBuf, Vec<String>)> {
    let mut words = raw
        .split(|b| *b == 0)
        .filter(|w| !w.is_empty())
        .map(|w| String::from_utf8_lossy(w).into_owned());
    let program = PathBuf::from(words.next()?);
    Some((program, words.collect()))
}

/// Ends the lab's edge and starts it again with the same command line;
/// returns the moment just before the new one was spawned. The iptables
/// interception stays; flows that arrive in between are refused.
pub fn restart_edge(lab: &Lab) -> Result<Instant, String> {
    let pid = lab
        .running_pid(EDGE_DAEMON)
        .ok_or("the edge's wanopt is not running")?;
    let raw = std::fs::read(format!("/proc/{pid}/cmdline"))
        .map_err(|e| format!("the edge's command line: {e}"))?;
    let (program, args) = command_line(&raw).ok_or("the edge's command line is empty")?;
    lab.kill_recorded(EDGE_DAEMON);
    let started = Instant::now();
    lab.spawn_daemon(Node::Edge, EDGE_DAEMON, &program, &args)
        .map_err(|e| format!("starting the edge again: {e}"))?;
    Ok(started)
}

/// What the edge's status says of its tunnel and its flows.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct EdgeStatus {
    /// Whether a tunnel is up.
    pub up: bool,
    /// The transport of the tunnel new flows take (`quic` or `tcp`);
    /// `None` when no tunnel is up or the node does not say.
    pub transport: Option<String>,
    /// Why it uses that transport, as the node says it.
    pub transport_why: Option<String>,
    /// Flows reset since the node started, by reason.
    pub flow_resets: BTreeMap<String, u64>,
}

impl EdgeStatus {
    /// Reads it from a node's `/status` document: the first peer that is
    /// up carries new flows.
    pub fn from_json(doc: &serde_json::Value) -> EdgeStatus {
        let peer = doc["peers"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|p| p["state"] == "up");
        let text = |v: &serde_json::Value| v.as_str().map(str::to_string);
        EdgeStatus {
            up: peer.is_some(),
            transport: peer.and_then(|p| text(&p["transport"])),
            transport_why: peer.and_then(|p| text(&p["transport_why"])),
            flow_resets: doc["flow_resets"]
                .as_object()
                .into_iter()
                .flatten()
                .filter_map(|(k, v)| Some((k.clone(), v.as_u64()?)))
                .collect(),
        }
    }

    /// Whether new flows take `transport`.
    pub fn on(&self, transport: &str) -> bool {
        self.transport.as_deref() == Some(transport)
    }
}

/// The edge's status now.
pub fn edge_status(lab: &Lab, exe: &Path) -> Result<EdgeStatus, String> {
    let mut cmd = lab.command(Node::Edge, &exe.to_string_lossy());
    cmd.args(["status", "--json", "--control", EDGE_CONTROL]);
    let out = cmd.output().map_err(|e| e.to_string())?;
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).trim().to_string());
    }
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).map_err(|e| e.to_string())?;
    Ok(EdgeStatus::from_json(&doc))
}

/// The resets counted between two snapshots of the counters, by reason
/// (reasons that did not grow left out).
pub fn resets_since(
    before: &BTreeMap<String, u64>,
    after: &BTreeMap<String, u64>,
) -> BTreeMap<String, u64> {
    after
        .iter()
        .filter_map(|(reason, &n)| {
            let grown = n.saturating_sub(before.get(reason).copied().unwrap_or(0));
            (grown > 0).then(|| (reason.clone(), grown))
        })
        .collect()
}

/// Replaces link 1's middlebox rules (`""`: none) while the lab runs,
/// once both directions of its emulator apply them.
pub fn set_middlebox(lab: &Lab, rules: &str) -> Result<(), String> {
    crate::link::set_middlebox(lab, 1, rules)
        .map(drop)
        .map_err(|e| format!("middlebox {rules:?}: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_edge_is_started_again_with_its_own_command_line() {
        let mut raw = [
            "/run/wanopt-lab/bin/wanopt.7",
            "edge",
            "--core",
            "198.18.2.2:4433",
        ]
        .join("\0")
        .into_bytes();
        raw.push(0);
        let (program, args) = command_line(&raw).unwrap_or_default();
        assert_eq!(program, PathBuf::from("/run/wanopt-lab/bin/wanopt.7"));
        assert_eq!(args, ["edge", "--core", "198.18.2.2:4433"]);
        assert!(command_line(b"").is_none());
        assert_eq!(edge_args(true), ["--transport", "auto"]);
        assert!(edge_args(false).is_empty());
    }

    #[test]
    fn status_gives_the_transport_of_the_peer_that_is_up_and_resets_by_reason() {
        let doc = serde_json::json!({
            "tunnel": "up",
            "peers": [
                {"state": "connecting", "transport": "quic"},
                {"state": "up", "transport": "tcp", "transport_why": "no QUIC handshake in 3 s"}
            ],
            "flow_resets": {"tunnel_lost": 2, "lan": 1}
        });
        let status = EdgeStatus::from_json(&doc);
        assert!(status.up && status.on("tcp"));
        assert_eq!(
            status.transport_why.as_deref(),
            Some("no QUIC handshake in 3 s")
        );
        let before = BTreeMap::from([("lan".to_string(), 1)]);
        assert_eq!(
            resets_since(&before, &status.flow_resets),
            BTreeMap::from([("tunnel_lost".to_string(), 2)])
        );
        // A node without the transport fields: up, transport unknown.
        let old = EdgeStatus::from_json(&serde_json::json!({"peers": [{"state": "up"}]}));
        assert!(old.up && old.transport.is_none());
        assert_eq!(
            EdgeStatus::from_json(&serde_json::json!({})),
            EdgeStatus::default()
        );
    }
}
