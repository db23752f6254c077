//! The edge pair's VRRP: keepalived in each edge as a lab daemon
//! (`keepalived-edge`, `keepalived-edgeb`), one VRRP instance on `lan0`
//! holding the client's gateway 198.18.1.1/24, and what `lab status` shows
//! of it.
//!
//! VRRP version 3 (RFC 5798), which allows advertisements more often than
//! once a second: every [`ADVERT_INT`] s. A backup declares the master
//! dead after `3 x advert_int + skew` (RFC 5798 section 6.1, skew =
//! `(256 - priority) x advert_int / 256`): 0.68 s for edge B, so an edge
//! whose whole namespace stops answering is replaced within a second. An
//! edge that still runs but fails its `track_script` (its wanopt's `GET
//! /health`, every second, `fall 1`) goes to FAULT, drops the address and
//! sends an advertisement of priority 0, on which the backup takes over at
//! once (section 6.4.3). The new master sends gratuitous ARPs, so the
//! client's neighbour entry for 198.18.1.1 moves to it.
//!
//! Both instances start as BACKUP with `nopreempt`: edge A, at the higher
//! priority, wins the first election, and when it comes back after a
//! failure it stays backup (taking the address back would reset every
//! flow the other edge carries).
//!
//! Files, in `{state}/edgepair/`: `keepalived-edge.conf` and
//! `keepalived-edgeb.conf`, keepalived's own pid files per edge (labs with
//! other prefixes run their own), the notify script `vrrp-notify`, each
//! edge's last state (`state-edge`: `MASTER 1767000000123`) and
//! `notify.log` (one line per transition: unix ms, edge, state).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::thread;
use std::time::{Duration, Instant};

use super::{EdgePairError, EDGE_A_LAN_ADDR, EDGE_B_LAN_ADDR, VIRTUAL_ADDR};
use crate::optimize::EDGE_CONTROL;
use crate::topology::{output, Lab, Node, TopologyError, EDGE_LAN_IF};

/// The VRRP instance's virtual router id (the same on both edges).
pub const VIRTUAL_ROUTER_ID: u8 = 51;
/// Seconds between advertisements (VRRP version 3: centiseconds).
pub const ADVERT_INT: &str = "0.2";
/// Edge A's priority: the master at start.
pub const PRIORITY_A: u8 = 150;
/// Edge B's priority.
pub const PRIORITY_B: u8 = 100;

/// The notify script: records each transition of an edge's instance.
/// keepalived appends `INSTANCE NAME STATE PRIORITY` to the arguments it
/// is given (the edge's name, its state file and the log).
pub const NOTIFY_SCRIPT: &str = r#"#!/bin/sh
# keepalived's notify script for a wanopt lab edge:
#   vrrp-notify EDGE STATE_FILE LOG  INSTANCE|GROUP NAME STATE PRIORITY
edge=$1 file=$2 log=$3 state=$6
now=$(date +%s%3N)
printf '%s %s\n' "$state" "$now" > "$file.tmp" && mv "$file.tmp" "$file"
printf '%s %s %s\n' "$now" "$edge" "$state" >> "$log"
"#;

/// The edge pair's directory in the lab's state directory.
pub fn pair_dir(lab: &Lab) -> PathBuf {
    lab.state_dir().join("edgepair")
}

/// The two edges, A then B.
pub const EDGES: [Node; 2] = [Node::Edge, Node::EdgeB];

/// The name `edge`'s keepalived is recorded under.
pub fn daemon(edge: Node) -> String {
    format!("keepalived-{}", edge.name())
}

/// `edge`'s own address on the client LAN.
pub fn lan_addr(edge: Node) -> &'static str {
    if edge == Node::EdgeB {
        EDGE_B_LAN_ADDR
    } else {
        EDGE_A_LAN_ADDR
    }
}

/// `edge`'s VRRP priority.
pub fn priority(edge: Node) -> u8 {
    if edge == Node::EdgeB {
        PRIORITY_B
    } else {
        PRIORITY_A
    }
}

/// The file holding `edge`'s last VRRP state.
fn state_file(lab: &Lab, edge: Node) -> PathBuf {
    pair_dir(lab).join(format!("state-{}", edge.name()))
}

/// keepalived's configuration for `edge` of the lab `lab_name`: the
/// instance, and with `health` (`curl`'s path) the track script on the
/// edge's wanopt. `notify` is the notify command (script and its own
/// arguments).
pub fn keepalived_conf(lab_name: &str, edge: Node, health: Option<&str>, notify: &str) -> String {
    let name = edge.name();
    let mut conf = format!(
        "# keepalived in {name} of the wanopt lab's edge pair, written by\n\
         # `wanopt lab up --edges 2`. One VRRP instance on {EDGE_LAN_IF} holds the\n\
         # client's gateway {VIRTUAL_ADDR}.\n\
         global_defs {{\n\
         \x20 router_id wanopt-lab-{lab_name}-{name}\n\
         \x20 script_user root\n\
         \x20 enable_script_security\n\
         }}\n"
    );
    if let Some(curl) = health {
        let _ = write!(
            conf,
            "\nvrrp_script wanopt_health {{\n\
             \x20 script \"{curl} -fsS -m 1 -o /dev/null http://{EDGE_CONTROL}/health\"\n\
             \x20 interval 1\n\
             \x20 timeout 2\n\
             \x20 fall 1\n\
             \x20 rise 1\n\
             }}\n"
        );
    }
    let _ = write!(
        conf,
        "\nvrrp_instance branch_gateway {{\n\
         \x20 state BACKUP\n\
         \x20 nopreempt\n\
         \x20 interface {EDGE_LAN_IF}\n\
         \x20 version 3\n\
         \x20 virtual_router_id {VIRTUAL_ROUTER_ID}\n\
         \x20 priority {priority}\n\
         \x20 advert_int {ADVERT_INT}\n\
         \x20 virtual_ipaddress {{\n\
         \x20   {VIRTUAL_ADDR}/24 dev {EDGE_LAN_IF}\n\
         \x20 }}\n",
        priority = priority(edge),
    );
    if health.is_some() {
        conf.push_str("  track_script {\n    wanopt_health\n  }\n");
    }
    let _ = writeln!(conf, "  notify \"{notify}\"\n}}");
    conf
}

/// The first `program` on `PATH`, or the bare name.
fn on_path(program: &str) -> String {
    std::env::var_os("PATH")
        .into_iter()
        .flat_map(|paths| std::env::split_paths(&paths).collect::<Vec<_>>())
        .map(|dir| dir.join(program))
        .find(|path| path.is_file())
        .map_or_else(|| program.to_string(), |p| p.to_string_lossy().into_owned())
}

/// Whether `program --version` runs.
fn runs(program: &str) -> bool {
    Command::new(program)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

/// Writes the pair's files and starts keepalived in both edges; with
/// `track_health` (the edges run wanopt) each tracks its wanopt's health.
pub fn start(lab: &Lab, track_health: bool) -> Result<(), EdgePairError> {
    for program in ["keepalived", "curl"] {
        if !runs(program) {
            return Err(EdgePairError::Missing(program));
        }
    }
    let dir = pair_dir(lab);
    let state_error = |path: &Path| {
        let path = path.to_path_buf();
        move |cause| TopologyError::State { path, cause }
    };
    std::fs::create_dir_all(&dir).map_err(state_error(&dir))?;
    let notify = dir.join("vrrp-notify");
    std::fs::write(&notify, NOTIFY_SCRIPT).map_err(state_error(&notify))?;
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::Permissions::from_mode(0o755);
        std::fs::set_permissions(&notify, mode).map_err(state_error(&notify))?;
    }
    let lab_name = lab
        .state_dir()
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let curl = on_path("curl");
    let log = dir.join("notify.log");
    for edge in EDGES {
        let name = edge.name();
        let command = format!(
            "{} {name} {} {}",
            notify.display(),
            state_file(lab, edge).display(),
            log.display()
        );
        let conf = keepalived_conf(&lab_name, edge, track_health.then_some(&*curl), &command);
        let conf_path = dir.join(format!("keepalived-{name}.conf"));
        std::fs::write(&conf_path, conf).map_err(state_error(&conf_path))?;
        let s = |p: PathBuf| p.to_string_lossy().into_owned();
        let args: Vec<String> = vec![
            "--dont-fork".into(),
            "--log-console".into(),
            "--no-syslog".into(),
            "--vrrp".into(),
            "--use-file".into(),
            s(conf_path),
            "--pid".into(),
            s(dir.join(format!("keepalived-{name}.pid"))),
            "--vrrp_pid".into(),
            s(dir.join(format!("keepalived-{name}-vrrp.pid"))),
            "--checkers_pid".into(),
            s(dir.join(format!("keepalived-{name}-checkers.pid"))),
        ];
        lab.spawn_daemon(edge, &daemon(edge), Path::new("keepalived"), &args)?;
    }
    Ok(())
}

/// `edge`'s last VRRP state as keepalived reported it (`MASTER`,
/// `BACKUP`, `FAULT`, `STOP`) and when (unix ms); `None` before its first
/// report.
pub fn state(lab: &Lab, edge: Node) -> Option<(String, u64)> {
    let text = std::fs::read_to_string(state_file(lab, edge)).ok()?;
    let mut words = text.split_whitespace();
    let state = words.next()?.to_string();
    let at = words.next().and_then(|w| w.parse().ok()).unwrap_or(0);
    Some((state, at))
}

/// Whether `edge` holds the virtual address on its LAN interface now.
pub fn holds_address(lab: &Lab, edge: Node) -> bool {
    let mut cmd = lab.command(edge, "ip");
    cmd.args(["-4", "-o", "addr", "show", "dev", EDGE_LAN_IF]);
    output(cmd).is_ok_and(|text| text.contains(&format!(" {VIRTUAL_ADDR}/")))
}

/// Waits until edge A is the master and holds the address (at most
/// `timeout`); fails at once if an edge's keepalived exits.
pub fn wait_master(lab: &Lab, timeout: Duration) -> Result<(), EdgePairError> {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(edge) = EDGES.into_iter().find(|&e| lab.daemon_exited(&daemon(e))) {
            return Err(EdgePairError::Vrrp(format!(
                "keepalived in {} exited: {}",
                edge.name(),
                lab.daemon_log(&daemon(edge))
            )));
        }
        let master = state(lab, Node::Edge).is_some_and(|(s, _)| s == "MASTER");
        if master && holds_address(lab, Node::Edge) {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(EdgePairError::Vrrp(format!(
                "edge has not become the VRRP master of {VIRTUAL_ADDR} within {} s (edge {:?}, edgeb {:?}; is its wanopt's /health answering 200?): {}",
                timeout.as_secs(),
                state(lab, Node::Edge).map(|s| s.0),
                state(lab, Node::EdgeB).map(|s| s.0),
                lab.daemon_log(&daemon(Node::Edge))
            )));
        }
        thread::sleep(Duration::from_millis(50));
    }
}

/// The notify log: (unix ms, edge name, state), oldest first.
pub fn transitions(lab: &Lab) -> Vec<(u64, String, String)> {
    let text = std::fs::read_to_string(pair_dir(lab).join("notify.log")).unwrap_or_default();
    text.lines()
        .filter_map(|line| {
            let mut words = line.split_whitespace();
            let at = words.next()?.parse().ok()?;
            Some((at, words.next()?.to_string(), words.next()?.to_string()))
        })
        .collect()
}

/// The pair's lines of `lab status`: the address, who holds it, and each
/// edge's state, priority and (with `optimize`) its wanopt's health.
pub fn status_lines(lab: &Lab, optimize: bool) -> String {
    let holders: Vec<String> = EDGES
        .into_iter()
        .filter(|&e| holds_address(lab, e))
        .map(Node::name)
        .collect();
    let mut out = format!(
        "edges     2: VRRP address {VIRTUAL_ADDR} (virtual router {VIRTUAL_ROUTER_ID}, v3, every {ADVERT_INT} s), held by {}\n",
        if holders.is_empty() {
            "no edge".to_string()
        } else {
            holders.join(" and ")
        }
    );
    for edge in EDGES {
        let vrrp = match state(lab, edge) {
            Some((s, _)) => s.to_lowercase(),
            None if lab.daemon_exited(&daemon(edge)) => "stopped".into(),
            None => "unknown".into(),
        };
        let health = if optimize {
            let mut cmd = lab.command(edge, "curl");
            cmd.args(["-sS", "-m", "1", &format!("http://{EDGE_CONTROL}/health")]);
            let answer = output(cmd).map(|t| t.trim().to_string());
            format!(
                "  wanopt {}",
                answer.unwrap_or_else(|_| "not answering".into())
            )
        } else {
            String::new()
        };
        let _ = writeln!(
            out,
            "{:<9} {:<12} {:<7} priority {}{}{health}",
            edge.name(),
            lan_addr(edge),
            vrrp,
            priority(edge),
            if holds_address(lab, edge) {
                format!("  holds {VIRTUAL_ADDR}")
            } else {
                String::new()
            },
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn edge_a_outranks_edge_b_and_both_track_their_wanopt() {
        let a = keepalived_conf("wep", Node::Edge, Some("/usr/bin/curl"), "/n edge s l");
        let b = keepalived_conf("wep", Node::EdgeB, Some("/usr/bin/curl"), "/n edgeb s l");
        assert!(a.contains("priority 150") && b.contains("priority 100"));
        for conf in [&a, &b] {
            assert!(conf.contains("state BACKUP\n  nopreempt\n"));
            assert!(conf.contains("version 3\n"));
            assert!(conf.contains("advert_int 0.2\n"));
            assert!(conf.contains("virtual_router_id 51\n"));
            assert!(conf.contains("198.18.1.1/24 dev lan0"));
            assert!(conf.contains(
                "script \"/usr/bin/curl -fsS -m 1 -o /dev/null http://127.0.0.1:7001/health\""
            ));
            assert!(conf.contains("track_script {\n    wanopt_health\n  }"));
            assert_eq!(conf.matches('{').count(), conf.matches('}').count());
        }
        assert!(a.contains("router_id wanopt-lab-wep-edge\n"));
        assert!(b.contains("notify \"/n edgeb s l\""));
        // Without wanopt there is nothing to track.
        let plain = keepalived_conf("wep", Node::Edge, None, "/n edge s l");
        assert!(!plain.contains("track_script") && !plain.contains("vrrp_script"));
        assert_eq!(plain.matches('{').count(), plain.matches('}').count());
    }

    /// The notify script keeps the state keepalived appends and logs it.
    #[test]
    fn the_notify_script_records_the_state() {
        let dir = std::env::temp_dir().join(format!("wep-notify-{}", std::process::id()));
        let _ = std::fs::create_dir_all(&dir);
        let script = dir.join("vrrp-notify");
        let _ = std::fs::write(&script, NOTIFY_SCRIPT);
        let (file, log) = (dir.join("state-edge"), dir.join("notify.log"));
        for state in ["BACKUP", "MASTER"] {
            let status = Command::new("sh")
                .arg(&script)
                .arg("edge")
                .arg(&file)
                .arg(&log)
                .args(["INSTANCE", "branch_gateway", state, "150"])
                .status();
            assert!(status.is_ok_and(|s| s.success()));
        }
        let kept = std::fs::read_to_string(&file).unwrap_or_default();
        let logged = std::fs::read_to_string(&log).unwrap_or_default();
        let _ = std::fs::remove_dir_all(&dir);
        assert!(kept.starts_with("MASTER "), "{kept}");
        assert_eq!(logged.lines().count(), 2, "{logged}");
        assert!(logged.lines().all(|l| l.contains(" edge ")), "{logged}");
    }
}
