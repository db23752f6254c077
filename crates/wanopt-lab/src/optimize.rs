//! `--optimize`: a wanopt edge in `edge` (transparent interception of the
//! client's TCP: iptables `REDIRECT` in nat PREROUTING on the client-facing
//! interface, the edge reads `SO_ORIGINAL_DST`) and a wanopt core in `core`
//! that may connect only to the server LAN. Keys are made for the lab with
//! `wanopt keygen` and kept in the lab's state directory.
//!
//! With `lab up --sites N` every site's edge runs its own `wanopt edge`
//! with its own key (`wanopt-edgeK`, key `edgeK.key`, cache `cache-edgeK`)
//! and the one core pins every edge's key.
//!
//! With `lab up --cores N` the director `core` runs no node: each replica
//! `coreK` runs `wanopt-coreK` with the one core key (the replicas are one
//! core to the edges), listening on `0.0.0.0:4433`, advertising its own
//! address (`--advertise 198.18.5.(10+K):4433`: edges redial it directly),
//! its control API on that address, port 7002 (keepalived's health check),
//! and a short `--tunnel-timeout` on both sides, so an edge leaves a dead
//! replica quickly. The edges start once keepalived has reported every
//! replica healthy, so their first tunnels follow the full bucket map.
//!
//! With `lab up --edges 2` edge B runs its own `wanopt edge` too
//! (`wanopt-edgeb`, key `edgeb.key`, cache `cache-edgeb`, `--core` at the
//! core's address on its own link), both edges with the cluster's short
//! `--tunnel-timeout` (the core too), and each edge's interception adds
//! rules that answer a TCP packet of a connection its conntrack does not
//! know (not a SYN: a flow that was open through the other edge) with a
//! reset, so nothing is left half-open after a VRRP takeover.
//!
//! Data reduction (the `reduce` service: compression and the persistent
//! byte cache) is on unless the caller asks for TCP optimization only; each
//! node keeps its cache in the lab's state directory (`cache-edge`,
//! `cache-core`), so it lives and dies with the lab.

use std::path::Path;
use std::process::Command;
use std::thread;
use std::time::{Duration, Instant};

use crate::cluster::{Cluster, ClusterError, Replica, TUNNEL_TIMEOUT};
use crate::edge_pair::Edges;
use crate::sites::Sites;
use crate::topology::{output, Lab, Node, TopologyError, CORE_WAN_ADDR, EDGE_LAN_IF};

/// Errors starting the wanopt nodes of the lab.
#[derive(Debug, thiserror::Error)]
pub enum OptimizeError {
    /// This executable has no node of a role.
    #[error("wanopt mode unavailable: this build has no `wanopt {role}` (the accelerator node is not built in)")]
    NoNode {
        /// `edge` or `core`.
        role: &'static str,
    },
    /// iptables (for the interception rule) is missing.
    #[error("wanopt mode unavailable: iptables is not installed (apt-get install iptables)")]
    NoIptables,
    /// This executable's nodes have no data reduction.
    #[error("this build's nodes have no data reduction (no --cache-dir)")]
    NoReduce,
    /// The key directory could not be made.
    #[error("{}: {source}", path.display())]
    KeyDirectory {
        /// The directory.
        path: std::path::PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// `wanopt keygen` failed.
    #[error(transparent)]
    Keygen(TopologyError),
    /// `wanopt keygen` printed no public key.
    #[error("wanopt keygen printed no public key")]
    NoPublicKey,
    /// A node could not be started.
    #[error(transparent)]
    Spawn(TopologyError),
    /// The interception rule could not be installed.
    #[error("cannot install the interception rule: {0}")]
    Interception(TopologyError),
    /// A node exited while starting.
    #[error("{daemon} exited: {log}")]
    Exited {
        /// The node's process name.
        daemon: String,
        /// The end of its log.
        log: String,
    },
    /// The core cluster's replicas did not come up healthy.
    #[error(transparent)]
    Cluster(ClusterError),
    /// A node did not listen in time.
    #[error("{name} is not listening on port {port}: {log}")]
    NotListening {
        /// The node's process name.
        name: String,
        /// The port it should listen on.
        port: u16,
        /// The end of its log.
        log: String,
    },
}

pub use crate::node::TUNNEL_PORT;
/// TCP port of the edge's transparent listener.
pub const TRANSPARENT_PORT: u16 = 7000;
/// Control address of the edge (inside `edge`).
pub const EDGE_CONTROL: &str = "127.0.0.1:7001";
/// Control address of the core (inside `core`).
pub const CORE_CONTROL: &str = "127.0.0.1:7002";

/// A node's `/status` as JSON (`wanopt status --json` in its namespace,
/// `control` its control address).
pub fn node_status(
    lab: &Lab,
    exe: &Path,
    node: Node,
    control: &str,
) -> Result<serde_json::Value, String> {
    let mut cmd = lab.command(node, &exe.to_string_lossy());
    cmd.args(["status", "--control", control, "--json"]);
    let out = cmd.output().map_err(|e| e.to_string())?;
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).trim().to_string());
    }
    serde_json::from_slice(&out.stdout).map_err(|e| e.to_string())
}

/// Waits until the edge's `/status` passes `ready` (the tunnel up, a path
/// carrying the data), at most `within`; the error says what it last saw.
pub fn wait_edge(
    lab: &Lab,
    exe: &Path,
    within: Duration,
    what: &str,
    ready: impl Fn(&serde_json::Value) -> bool,
) -> Result<(), String> {
    let deadline = Instant::now() + within;
    loop {
        let status = node_status(lab, exe, Node::Edge, EDGE_CONTROL);
        if status.as_ref().is_ok_and(&ready) {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(format!(
                "{what} within {} s ({})",
                within.as_secs(),
                match status {
                    Ok(s) => format!("tunnel {}", s["tunnel"]),
                    Err(e) => e,
                }
            ));
        }
        thread::sleep(Duration::from_millis(100));
    }
}

/// Waits until the edge's tunnel is up (UDP sent before is dropped).
pub fn wait_tunnel_up(lab: &Lab, exe: &Path) -> Result<(), String> {
    wait_edge(
        lab,
        exe,
        Duration::from_secs(15),
        "the tunnel did not come up",
        |s| s["tunnel"] == "up",
    )
}

/// Whether this executable has the wanopt nodes (`wanopt edge`, `wanopt core`).
pub fn available(exe: &Path) -> Result<(), OptimizeError> {
    for role in ["edge", "core"] {
        let ok = Command::new(exe)
            .args([role, "--help"])
            .output()
            .map(|o| o.status.success())
            .unwrap_or(false);
        if !ok {
            return Err(OptimizeError::NoNode { role });
        }
    }
    if Command::new("iptables").arg("--version").output().is_err() {
        return Err(OptimizeError::NoIptables);
    }
    Ok(())
}

fn keygen(exe: &Path, path: &Path) -> Result<String, OptimizeError> {
    let _ = std::fs::remove_file(path);
    let mut cmd = Command::new(exe);
    cmd.arg("keygen").arg("--out").arg(path);
    let out = output(cmd).map_err(OptimizeError::Keygen)?;
    out.lines()
        .rev()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .map(str::to_string)
        .ok_or(OptimizeError::NoPublicKey)
}

/// Bound on each node's byte cache in the lab (the state directory is on
/// a RAM file system).
pub const CACHE_SIZE: &str = "512MiB";

/// Whether this executable's nodes have data reduction (`--cache-dir`,
/// `--no-reduce`).
pub fn supports_reduce(exe: &Path) -> bool {
    Command::new(exe)
        .args(["edge", "--help"])
        .output()
        .map(|o| {
            let help = String::from_utf8_lossy(&o.stdout);
            o.status.success() && help.contains("--cache-dir") && help.contains("--no-reduce")
        })
        .unwrap_or(false)
}

/// The byte cache directory of `node` (`edge` or `core`) in `lab`.
pub fn cache_dir(lab: &Lab, node: Node) -> std::path::PathBuf {
    lab.state_dir().join(format!("cache-{}", node.name()))
}

/// The node options for data reduction: a cache in the lab's state
/// directory, and `--no-reduce` unless `reduce`. Empty for a build whose
/// nodes have no data reduction (nothing to turn off).
fn reduce_args(lab: &Lab, node: Node, reduce: bool, supported: bool) -> Vec<String> {
    if !supported {
        return Vec::new();
    }
    let mut args = vec![
        "--cache-dir".to_string(),
        cache_dir(lab, node).to_string_lossy().into_owned(),
        "--cache-size".to_string(),
        CACHE_SIZE.to_string(),
    ];
    if !reduce {
        args.push("--no-reduce".into());
    }
    args
}

/// `text` as part of a file name: letters, digits, `-` and `.` kept, any
/// run of other characters one `-`.
pub(crate) fn file_safe(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if c.is_ascii_alphanumeric() || c == '-' || c == '.' {
            out.push(c);
        } else if !out.ends_with('-') {
            out.push('-');
        }
    }
    out
}

/// Copies the edge's and core's logs of `lab` to
/// `dir/logs/{label}-edge.log` and `-core.log` (call it before the nodes
/// are stopped or the lab is rebuilt: the state directory goes with them).
/// Returns the files written.
pub fn save_logs(lab: &Lab, dir: &Path, label: &str) -> Vec<std::path::PathBuf> {
    let logs = dir.join("logs");
    if std::fs::create_dir_all(&logs).is_err() {
        return Vec::new();
    }
    let safe = file_safe(label);
    let mut written = Vec::new();
    let sites = crate::sites::Sites::new(crate::sites::MAX_SITES).unwrap_or_default();
    let site_edges = sites
        .extra()
        .map(|site| (site.edge_daemon(), format!("edge{}", site.number())));
    let replicas = (1..=crate::cluster::MAX_CORES)
        .filter_map(Replica::new)
        .map(|replica| (replica.daemon(), format!("core{}", replica.number())));
    let nodes = [("wanopt-edge", "edge"), ("wanopt-core", "core")]
        .map(|(name, role)| (name.to_string(), role.to_string()))
        .into_iter()
        .chain(site_edges)
        .chain(replicas)
        .chain([(
            crate::edge_pair::EDGE_B_DAEMON.to_string(),
            "edgeb".to_string(),
        )]);
    for (name, role) in nodes {
        let from = lab.state_dir().join(format!("{name}.log"));
        let to = logs.join(format!("{safe}-{role}.log"));
        if std::fs::copy(&from, &to).is_ok() {
            written.push(to);
        }
    }
    written
}

/// The flow resets the node logs at `paths` report: every WARN line that
/// names a flow and a reset (the node logs each flow reset for a protocol
/// or codec error so), quoted as `file: line`. A lab run with any of them
/// failed, whatever its figures say: an application saw its connection
/// reset.
pub fn flow_resets(paths: &[std::path::PathBuf]) -> Vec<String> {
    let mut found = Vec::new();
    for path in paths {
        let Ok(text) = std::fs::read_to_string(path) else {
            continue;
        };
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        for line in text.lines() {
            let lower = line.to_lowercase();
            if line.contains("WARN") && lower.contains("flow") && lower.contains("reset") {
                found.push(format!("{name}: {}", line.trim()));
            }
        }
    }
    found
}

/// Arguments for the nodes beyond the lab's own.
#[derive(Debug, Clone, Copy, Default)]
pub struct ExtraArgs<'a> {
    /// For both nodes (`lab up --node-arg`).
    pub both: &'a [String],
    /// For the edge only, after `both` (`lab up --edge-arg`, e.g.
    /// `--forward-udp`).
    pub edge: &'a [String],
    /// For the core only, after `both` (`lab up --core-arg`, e.g.
    /// `--allow-udp`).
    pub core: &'a [String],
    /// The lab has link 2: the edge gets a `--path` on each link (link 1
    /// first) and the core listens on every address.
    pub two_paths: bool,
    /// How many sites: each gets an edge, the core pins every edge's key
    /// (and listens on every address when there are several).
    pub sites: Sites,
    /// A core cluster: a core per replica instead of one in `core`.
    pub cluster: Option<Cluster>,
    /// Site 1's edges: with a pair, edge B runs an edge too and the core
    /// listens on every address.
    pub edges: Edges,
}

/// Starts the wanopt edge and core of `lab` and the interception rule;
/// `reduce` turns data reduction on (when the build has it); `extra`
/// arguments go to the nodes after the lab's own.
pub fn start(lab: &Lab, exe: &Path, reduce: bool, extra: &ExtraArgs) -> Result<(), OptimizeError> {
    available(exe)?;
    let supported = supports_reduce(exe);
    let dir = lab.state_dir().join("keys");
    std::fs::create_dir_all(&dir).map_err(|source| OptimizeError::KeyDirectory {
        path: dir.clone(),
        source,
    })?;
    let core_key = dir.join("core.key");
    let core_pub = keygen(exe, &core_key)?;
    // Site 1's edge first, then each extra site's: (node, process, key).
    let mut edges = vec![(Node::Edge, "wanopt-edge".to_string(), dir.join("edge.key"))];
    if extra.edges.is_pair() {
        let daemon = crate::edge_pair::EDGE_B_DAEMON.to_string();
        edges.push((Node::EdgeB, daemon, dir.join("edgeb.key")));
    }
    for site in extra.sites.extra() {
        let key = dir.join(format!("edge{}.key", site.number()));
        edges.push((site.edge(), site.edge_daemon(), key));
    }
    let mut edge_pubs = Vec::with_capacity(edges.len());
    for (_, _, key) in &edges {
        edge_pubs.push(keygen(exe, key)?);
    }
    let s = |p: &Path| p.to_string_lossy().into_owned();
    // What every core gets, replicas included.
    let mut shared: Vec<String> = vec!["--key".into(), s(&core_key)];
    for edge_pub in edge_pubs {
        shared.extend(["--peer-key".into(), edge_pub]);
    }
    shared.extend(["--allow".into(), "198.18.3.0/24".into()]);
    let mut daemons = Vec::new();
    match extra.cluster {
        None => {
            let listen = if extra.two_paths || extra.sites > Sites::ONE || extra.edges.is_pair() {
                format!("0.0.0.0:{TUNNEL_PORT}")
            } else {
                format!("{CORE_WAN_ADDR}:{TUNNEL_PORT}")
            };
            let mut core_args: Vec<String> = vec!["core".into(), "--listen".into(), listen];
            core_args.extend(shared);
            core_args.extend(["--control".into(), CORE_CONTROL.into()]);
            if extra.edges.is_pair() {
                // A dead edge's flows end at the server within the timeout.
                core_args.extend(["--tunnel-timeout".into(), TUNNEL_TIMEOUT.into()]);
            }
            core_args.extend(reduce_args(lab, Node::Core, reduce, supported));
            core_args.extend(node_extra(extra.both, extra.core));
            lab.spawn_daemon(Node::Core, "wanopt-core", exe, &core_args)
                .map_err(OptimizeError::Spawn)?;
            daemons.push("wanopt-core".to_string());
        }
        Some(cluster) => {
            for replica in cluster.cores.replicas() {
                let mut args = replica_args(lab, replica, cluster.tunnel_timeout(), &shared);
                args.extend(reduce_args(lab, replica.node(), reduce, supported));
                args.extend(node_extra(extra.both, extra.core));
                crate::cluster::replicas::spawn(lab, replica, cluster.cpu.is_some(), exe, &args)
                    .map_err(OptimizeError::Spawn)?;
                daemons.push(replica.daemon());
            }
            for replica in cluster.cores.replicas() {
                let port = crate::cluster::CONTROL_PORT;
                wait_listening(lab, replica.node(), port, &replica.daemon(), &daemons)?;
            }
            crate::cluster::keepalived::wait_healthy(lab, cluster.cores, Duration::from_secs(10))
                .map_err(OptimizeError::Cluster)?;
        }
    }
    for (node, daemon, key) in &edges {
        let core_addr = match node {
            Node::SiteEdge(site) => site.core_wan_addr(),
            Node::EdgeB => crate::edge_pair::CORE_EDGE_B_ADDR.to_string(),
            _ => CORE_WAN_ADDR.to_string(),
        };
        let mut edge_args: Vec<String> = vec![
            "edge".into(),
            "--core".into(),
            format!("{core_addr}:{TUNNEL_PORT}"),
            "--key".into(),
            s(key),
            "--peer-key".into(),
            core_pub.clone(),
            "--transparent".into(),
            format!("0.0.0.0:{TRANSPARENT_PORT}"),
            // A flow that cannot use the tunnel is reset, never silently sent
            // direct: a "wanopt" measurement is always through wanopt.
            "--fail".into(),
            "closed".into(),
            "--control".into(),
            EDGE_CONTROL.into(),
        ];
        if let Some(cluster) = &extra.cluster {
            edge_args.extend(["--tunnel-timeout".into(), cluster.tunnel_timeout().into()]);
        } else if extra.edges.is_pair() {
            edge_args.extend(["--tunnel-timeout".into(), TUNNEL_TIMEOUT.into()]);
        }
        // Link 2 joins site 1's edge to the core (unless the caller gave
        // the edge its own `--path`s, e.g. with rates).
        let own_paths = extra
            .edge
            .iter()
            .any(|a| a == "--path" || a.starts_with("--path="));
        if extra.two_paths && *node == Node::Edge && !own_paths {
            for path in two_paths() {
                edge_args.extend(["--path".into(), path]);
            }
        }
        edge_args.extend(reduce_args(lab, *node, reduce, supported));
        edge_args.extend(node_extra(extra.both, extra.edge));
        lab.spawn_daemon(*node, daemon, exe, &edge_args)
            .map_err(OptimizeError::Spawn)?;
        intercept(lab, *node)?;
        if extra.edges.is_pair() && matches!(node, Node::Edge | Node::EdgeB) {
            reset_unknown(lab, *node)?;
        }
        daemons.push(daemon.clone());
    }
    for (node, daemon, _) in &edges {
        wait_listening(lab, *node, TRANSPARENT_PORT, daemon, &daemons)?;
    }
    Ok(())
}

/// Site 1's edge's two `--path`s, link 1 then link 2 (`LOCAL=REMOTE`):
/// what the edge gets with a second link unless given its own.
pub fn two_paths() -> [String; 2] {
    [
        (crate::topology::EDGE_WAN_ADDR, CORE_WAN_ADDR),
        (
            crate::link::second::EDGE_WAN2_ADDR,
            crate::link::second::CORE_WAN2_ADDR,
        ),
    ]
    .map(|(local, remote)| format!("{local}={remote}:{TUNNEL_PORT}"))
}

/// A replica's own arguments: its listener, the address it advertises,
/// its control API (and token file) on its cluster address and the short
/// tunnel timeout, then the `shared` ones (key, peer keys, allow).
fn replica_args(lab: &Lab, replica: Replica, timeout: &str, shared: &[String]) -> Vec<String> {
    let token = crate::cluster::keepalived::cluster_dir(lab)
        .join(format!("control-core{}.token", replica.number()));
    let mut args: Vec<String> = vec![
        "core".into(),
        "--listen".into(),
        format!("0.0.0.0:{TUNNEL_PORT}"),
        "--advertise".into(),
        format!("{}:{TUNNEL_PORT}", replica.addr()),
        "--control".into(),
        replica.control(),
        "--control-token".into(),
        token.to_string_lossy().into_owned(),
        "--tunnel-timeout".into(),
        timeout.into(),
    ];
    args.extend(shared.iter().cloned());
    args
}

/// Sends the TCP that arrives on `edge`'s client-facing interface to its
/// transparent listener.
fn intercept(lab: &Lab, edge: Node) -> Result<(), OptimizeError> {
    let mut rule = lab.command(edge, "iptables");
    rule.args([
        "-t",
        "nat",
        "-A",
        "PREROUTING",
        "-i",
        EDGE_LAN_IF,
        "-p",
        "tcp",
        "-j",
        "REDIRECT",
        "--to-ports",
    ])
    .arg(TRANSPARENT_PORT.to_string());
    output(rule).map_err(OptimizeError::Interception)?;
    Ok(())
}

/// The rules that answer, on `edge`'s client-facing interface, a TCP
/// packet that conntrack takes for a new connection but that is no SYN
/// (or that it finds invalid) with a reset: a client's packet of a flow
/// that was open through the other edge of a pair. Without them the
/// kernel picks the flow up mid-stream (`nf_conntrack_tcp_loose`) and
/// forwards it unintercepted, or hands it to the listener, to whatever
/// answer either gives. `INPUT` sees those the REDIRECT rule sent to the
/// listener, `FORWARD` any other.
pub fn reset_rules() -> Vec<Vec<String>> {
    ["INPUT", "FORWARD"]
        .into_iter()
        .map(|chain| {
            [
                "-A",
                chain,
                "-i",
                EDGE_LAN_IF,
                "-p",
                "tcp",
                "-m",
                "conntrack",
                "--ctstate",
                "NEW,INVALID",
                "!",
                "--syn",
                "-j",
                "REJECT",
                "--reject-with",
                "tcp-reset",
            ]
            .map(String::from)
            .to_vec()
        })
        .collect()
}

/// Installs [`reset_rules`] in `edge`.
fn reset_unknown(lab: &Lab, edge: Node) -> Result<(), OptimizeError> {
    for rule in reset_rules() {
        let mut cmd = lab.command(edge, "iptables");
        cmd.args(rule);
        output(cmd).map_err(OptimizeError::Interception)?;
    }
    Ok(())
}

/// A node's extra arguments: those for both nodes, then its own.
fn node_extra(both: &[String], own: &[String]) -> Vec<String> {
    both.iter().chain(own).cloned().collect()
}

/// Wait until `name` listens on `port`; fails at once if any of the
/// `daemons` has exited (a rejected flag, a bad key), with the last lines
/// of its log.
fn wait_listening(
    lab: &Lab,
    node: Node,
    port: u16,
    name: &str,
    daemons: &[String],
) -> Result<(), OptimizeError> {
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        for daemon in daemons {
            if lab.daemon_exited(daemon) {
                return Err(OptimizeError::Exited {
                    daemon: daemon.clone(),
                    log: lab.daemon_log(daemon),
                });
            }
        }
        let mut cmd = lab.command(node, "ss");
        cmd.args(["-Hltn", &format!("sport = :{port}")]);
        if output(cmd).map(|o| !o.trim().is_empty()).unwrap_or(false) {
            return Ok(());
        }
        thread::sleep(Duration::from_millis(50));
    }
    Err(OptimizeError::NotListening {
        name: name.to_string(),
        port,
        log: lab.daemon_log(name),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A WARN line about a flow reset (the format of the node's
    /// `abort::report`) is found and quoted; DEBUG lines and other
    /// warnings are not.
    #[test]
    fn flow_resets_are_the_warn_lines_naming_a_flow_reset() {
        let dir = std::env::temp_dir().join(format!("flow-resets-{}", std::process::id()));
        let _ = std::fs::create_dir_all(&dir);
        let log = dir.join("run1-edge.log");
        let text = "2026-11-26T12:00:00Z  INFO wanopt_node: tunnel up\n\
            2026-11-26T12:00:01Z DEBUG wanopt_node::flow: flow 7 reset: tunnel side\n\
            2026-11-26T12:00:02Z  WARN wanopt_node::flow: flow 9 198.18.1.2:5000 -> 198.18.3.2:445 reset: tunnel side: bad data from the peer: pieces of a chunk out of order; sent the peer a stream reset (codec error) and the client a TCP reset\n\
            2026-11-26T12:00:03Z  WARN wanopt_node::transport: path lost\n";
        let _ = std::fs::write(&log, text);
        let found = flow_resets(&[log.clone(), dir.join("missing.log")]);
        let _ = std::fs::remove_dir_all(&dir);
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(found[0].starts_with("run1-edge.log: "), "{found:?}");
        assert!(found[0].contains("flow 9") && found[0].contains("out of order"));
    }

    #[test]
    fn a_replica_listens_everywhere_and_advertises_its_own_address() {
        let lab = Lab::new("t9-");
        let replica = Replica::new(2).unwrap_or_else(|| panic!("replica 2"));
        let args = replica_args(&lab, replica, TUNNEL_TIMEOUT, &["--key".into(), "k".into()]);
        assert_eq!(
            args,
            [
                "core",
                "--listen",
                "0.0.0.0:4433",
                "--advertise",
                "198.18.5.12:4433",
                "--control",
                "198.18.5.12:7002",
                "--control-token",
                "/run/wanopt-lab/t9/cluster/control-core2.token",
                "--tunnel-timeout",
                "1500ms",
                "--key",
                "k"
            ]
        );
    }

    #[test]
    fn role_arguments_follow_the_shared_ones() {
        let both = vec!["--fec".to_string(), "auto".to_string()];
        let edge = vec!["--forward-udp=198.18.1.1:5004=198.18.3.2:5004".to_string()];
        assert_eq!(
            node_extra(&both, &edge),
            [
                "--fec",
                "auto",
                "--forward-udp=198.18.1.1:5004=198.18.3.2:5004"
            ]
        );
        assert_eq!(node_extra(&[], &edge), edge);
        assert_eq!(node_extra(&both, &[]), both);
    }

    #[test]
    fn nodes_get_a_cache_in_the_lab_and_no_reduce_on_request() {
        let lab = Lab::new("t9-");
        let on = reduce_args(&lab, Node::Edge, true, true);
        assert_eq!(
            on,
            [
                "--cache-dir",
                "/run/wanopt-lab/t9/cache-edge",
                "--cache-size",
                CACHE_SIZE
            ]
        );
        let off = reduce_args(&lab, Node::Core, false, true);
        assert_eq!(
            off.get(1).map(String::as_str),
            Some("/run/wanopt-lab/t9/cache-core")
        );
        assert_eq!(off.last().map(String::as_str), Some("--no-reduce"));
        // A build without data reduction gets no flags it would refuse.
        assert!(reduce_args(&lab, Node::Edge, false, false).is_empty());
    }
}
