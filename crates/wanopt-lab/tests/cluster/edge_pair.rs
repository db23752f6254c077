//! An edge pair in a real lab (namespace prefix `${WANOPT_LAB_PREFIX}wep-`):
//! `lab up --edges 2 --optimize --rtt 20ms --rate 50mbit`, then, in each of
//! two cases (each its own lab),
//!
//! - a flow from the client to the server goes through edge A (its
//!   `/flows` has it, edge B's does not), and the client holds it open;
//! - edge A fails: its wanopt is killed (SIGKILL; its keepalived's track
//!   script sees `/health` fail and gives the address away), or its whole
//!   namespace goes silent (its keepalived killed, every frame in and out
//!   of its `lan0` dropped, so only edge B's VRRP timer notices);
//! - a new client connection to the server works through edge B within
//!   3 s of the failure (the time is printed) and edge B's `/flows` has it;
//! - the connection that was open through A ends with a reset at the
//!   client's next send (edge B answers a packet of a connection its
//!   conntrack does not know with a reset, it neither drops nor forwards
//!   it), within 2 s, and `ss -tn` in the client no longer shows it.
//!
//! A module of the `cluster` test binary, which is also the lab's
//! executable (`<this> lab status`) and finds the `wanopt` binary beside
//! it. About 15 s.

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::thread;
use std::time::{Duration, Instant};

use wanopt_lab::bringup::{self, UpConfig};
use wanopt_lab::edge_pair::{vrrp, Edges};
use wanopt_lab::link::LinkSpecs;
use wanopt_lab::topology::{Lab, Node};

use super::{echo, echo_server, enter, lab_command, wanopt_binary, Guard};

/// The echo server, in `server`.
const ECHO: &str = "198.18.3.2:6303";

/// How long a new connection may take to work after edge A fails.
const TAKEOVER_BOUND: Duration = Duration::from_secs(3);

fn prefix() -> String {
    format!(
        "{}wep-",
        std::env::var("WANOPT_LAB_PREFIX").unwrap_or_default()
    )
}

/// A connection from the client to the echo server, after one round
/// trip; each step within `timeout`. The socket stays in the client's
/// namespace (where it was made) whatever thread uses it.
fn connect(lab: &Lab, timeout: Duration) -> Result<TcpStream, String> {
    let lab = lab.clone();
    thread::spawn(move || {
        enter(&lab, Node::Client)?;
        let addr: SocketAddr = ECHO.parse().map_err(|e| format!("{e}"))?;
        let mut stream =
            TcpStream::connect_timeout(&addr, timeout).map_err(|e| format!("connect: {e}"))?;
        let _ = stream.set_read_timeout(Some(timeout));
        echo(&mut stream, b"a flow through the branch's gateway")?;
        Ok(stream)
    })
    .join()
    .unwrap_or_else(|_| Err("the connection's thread panicked".into()))
}

/// The flows `edge`'s wanopt carries, by its `/flows`: (client,
/// destination).
fn flows(lab: &Lab, edge: Node) -> Vec<(String, String)> {
    let out = lab
        .command(edge, "curl")
        .args(["-fsS", "-m", "2", "http://127.0.0.1:7001/flows"])
        .output();
    let text = out
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default();
    let doc: serde_json::Value = serde_json::from_str(&text).unwrap_or_default();
    doc["flows"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|f| {
            Some((
                f["source"].as_str()?.to_string(),
                f["destination"].as_str()?.to_string(),
            ))
        })
        .collect()
}

/// Whether `edge`'s wanopt carries the flow from the client's `local`
/// address (waiting up to a second for its `/flows` to show it).
fn carries(lab: &Lab, edge: Node, local: SocketAddr) -> bool {
    let deadline = Instant::now() + Duration::from_secs(1);
    loop {
        let found = flows(lab, edge)
            .iter()
            .any(|(source, destination)| *source == local.to_string() && destination == ECHO);
        if found || Instant::now() > deadline {
            return found;
        }
        thread::sleep(Duration::from_millis(50));
    }
}

/// The client's TCP connections to the echo server, by `ss -tn` (local
/// addresses).
fn client_connections(lab: &Lab) -> Result<Vec<String>, String> {
    let out = lab
        .command(Node::Client, "ss")
        .args(["-Htn", "dst", ECHO])
        .output()
        .map_err(|e| format!("ss: {e}"))?;
    Ok(String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|line| line.split_whitespace().nth(3).map(str::to_string))
        .collect())
}

/// How many packets `edge`'s reset rules (a TCP packet of a connection
/// its conntrack does not know) have answered, by `iptables -L -v`.
fn reset_count(lab: &Lab, edge: Node) -> u64 {
    ["INPUT", "FORWARD"]
        .iter()
        .map(|chain| {
            let out = lab
                .command(edge, "iptables")
                .args(["-L", chain, "-v", "-x", "-n"])
                .output();
            let text = out
                .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
                .unwrap_or_default();
            text.lines()
                .filter(|l| l.contains("REJECT") && l.contains("reset"))
                .filter_map(|l| l.split_whitespace().next()?.parse::<u64>().ok())
                .sum::<u64>()
        })
        .sum()
}

/// How edge A fails.
#[derive(Debug, Clone, Copy)]
enum Failure {
    /// Its wanopt is killed: keepalived's track script gives the address away.
    Wanopt,
    /// Its keepalived is killed and its `lan0` drops every frame both ways.
    Silent,
}

/// The lab of both cases.
fn lab_up(exe: &std::path::Path) -> Result<Lab, String> {
    let lab = Lab::new(&prefix());
    let spec = "rtt 20ms rate 50mbit".to_string();
    let config = UpConfig {
        specs: LinkSpecs {
            up: spec.clone(),
            down: spec,
            seed: 1,
            middlebox: String::new(),
            mtu: None,
        },
        optimize: true,
        edges: Edges::PAIR,
        ..UpConfig::default()
    };
    let began = Instant::now();
    if let Err(e) = bringup::up(&lab, &config, exe) {
        let _ = lab.destroy();
        return Err(format!("lab up: {e}"));
    }
    println!("  lab up in {:.1} s", began.elapsed().as_secs_f64());
    Ok(lab)
}

/// Ends the process recorded under `name` in `lab` with SIGKILL.
fn sigkill(lab: &Lab, name: &str) -> Result<(), String> {
    let pid = lab
        .running_pid(name)
        .ok_or_else(|| format!("{name} is not running"))?;
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid),
        nix::sys::signal::Signal::SIGKILL,
    )
    .map_err(|e| format!("kill {name} ({pid}): {e}"))
}

/// Drops every frame into and out of edge A's `lan0`.
fn silence_edge_a(lab: &Lab) -> Result<(), String> {
    let rules = "table netdev wanopt_lab_silence {\n\
         \x20 chain ingress { type filter hook ingress device \"lan0\" priority 0; policy drop; }\n\
         \x20 chain egress { type filter hook egress device \"lan0\" priority 0; policy drop; }\n\
         }\n";
    let mut child = lab
        .command(Node::Edge, "nft")
        .args(["-f", "-"])
        .stdin(std::process::Stdio::piped())
        .spawn()
        .map_err(|e| format!("nft: {e}"))?;
    if let Some(mut stdin) = child.stdin.take() {
        stdin
            .write_all(rules.as_bytes())
            .map_err(|e| format!("nft: {e}"))?;
    }
    let status = child.wait().map_err(|e| format!("nft: {e}"))?;
    if !status.success() {
        return Err(format!("nft -f (netdev ingress and egress drop): {status}"));
    }
    Ok(())
}

fn takeover(failure: Failure) -> Result<(), String> {
    let exe = wanopt_binary()?;
    let lab = lab_up(&exe)?;
    let _guard = Guard(lab.clone());
    echo_server(&lab, ECHO)?;

    // Edge A is the gateway and carries the client's flows.
    let mut old = connect(&lab, Duration::from_secs(5)).map_err(|e| format!("first flow: {e}"))?;
    let old_local = old.local_addr().map_err(|e| e.to_string())?;
    if !carries(&lab, Node::Edge, old_local) || carries(&lab, Node::EdgeB, old_local) {
        return Err(format!(
            "the client's flow from {old_local} is not (only) on edge A: edge {:?}, edgeb {:?}",
            flows(&lab, Node::Edge),
            flows(&lab, Node::EdgeB)
        ));
    }
    println!("  the client's flow from {old_local} goes through edge A");
    let status = lab_command(&lab, &["status"])?;
    for want in [
        "held by edge\n",
        "edge      198.18.1.3   master",
        "edgeb     198.18.1.4   backup",
    ] {
        if !status.contains(want) {
            return Err(format!("lab status has no `{want}`:\n{status}"));
        }
    }

    let failed = Instant::now();
    match failure {
        Failure::Wanopt => sigkill(&lab, "wanopt-edge")?,
        Failure::Silent => {
            // Silent first: keepalived's last words (a priority 0
            // advertisement as it stops) must not reach edge B either.
            silence_edge_a(&lab)?;
            sigkill(&lab, &vrrp::daemon(Node::Edge))?;
        }
    }
    let mut new = loop {
        match connect(&lab, Duration::from_millis(300)) {
            Ok(stream) => break stream,
            Err(e) if failed.elapsed() > TAKEOVER_BOUND => {
                return Err(format!(
                    "no new connection within {} s of the failure ({failure:?}): {e}; VRRP: {:?}",
                    TAKEOVER_BOUND.as_secs(),
                    vrrp::transitions(&lab)
                ));
            }
            Err(_) => thread::sleep(Duration::from_millis(20)),
        }
    };
    let took = failed.elapsed();
    println!(
        "  {failure:?}: a new connection worked {} ms after the failure",
        took.as_millis()
    );
    let b_master = vrrp::transitions(&lab)
        .iter()
        .rev()
        .find(|(_, edge, state)| edge == "edgeb" && state == "MASTER")
        .map(|t| t.0);
    println!("  VRRP transitions: {:?}", vrrp::transitions(&lab));
    if b_master.is_none() || !vrrp::holds_address(&lab, Node::EdgeB) {
        return Err("edge B is not the master holding 198.18.1.1".into());
    }
    let new_local = new.local_addr().map_err(|e| e.to_string())?;
    if !carries(&lab, Node::EdgeB, new_local) {
        return Err(format!(
            "the new flow from {new_local} is not on edge B: {:?}",
            flows(&lab, Node::EdgeB)
        ));
    }
    echo(&mut new, b"through edge B").map_err(|e| format!("the new flow: {e}"))?;

    // The flow that was open through A: reset at the client's next send.
    // (A killed wanopt's sockets close: its kernel may have sent the client
    // a FIN first, which the client reads as the end of the stream.)
    let _ = old.set_read_timeout(Some(Duration::from_secs(3)));
    let sent = Instant::now();
    let outcome = old
        .write_all(b"still there?")
        .and_then(|()| old.read(&mut [0u8; 64]));
    let old_name = old_local.to_string();
    let gone = loop {
        let open = client_connections(&lab)?;
        if !open.contains(&old_name) {
            break sent.elapsed();
        }
        if sent.elapsed() > Duration::from_secs(2) {
            return Err(format!(
                "the old flow is still open 2 s after the client's next send ({outcome:?}): ss -tn shows {open:?}"
            ));
        }
        thread::sleep(Duration::from_millis(10));
    };
    // A reset in CLOSE_WAIT (after that FIN) reads as EPIPE, not ECONNRESET.
    let again = old.write_all(b"and now?");
    let resets = reset_count(&lab, Node::EdgeB);
    println!(
        "  the old flow: next send then read {outcome:?}, gone from ss -tn after {} ms, a further send {again:?}; edge B's reset rules answered {resets} packet(s)",
        gone.as_millis()
    );
    let reset = matches!(&outcome, Err(e) if e.kind() == ErrorKind::ConnectionReset)
        || matches!((&outcome, &again), (Ok(0), Err(e)) if e.kind() == ErrorKind::BrokenPipe);
    if !reset || resets == 0 {
        return Err(format!(
            "the old flow did not end with edge B's reset: read {outcome:?}, then send {again:?}, {resets} reset(s)"
        ));
    }
    let open = client_connections(&lab)?;
    if !open.contains(&new_local.to_string()) {
        return Err(format!(
            "ss -tn in the client shows {open:?}, not the new flow {new_local}"
        ));
    }
    println!("  ss -tn in the client: {open:?}, the old flow is gone");
    Ok(())
}

pub fn takeover_when_wanopt_dies() -> Result<(), String> {
    takeover(Failure::Wanopt)
}

pub fn takeover_when_edge_a_goes_silent() -> Result<(), String> {
    takeover(Failure::Silent)
}
