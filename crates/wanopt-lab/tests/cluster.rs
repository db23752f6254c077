//! A core cluster in a real lab (namespace prefix `${WANOPT_LAB_PREFIX}wcl-`):
//! `lab up --cores 3 --core-cpu 0.5 --sites 3 --optimize --rtt 20ms --rate
//! 100mbit`, then
//!
//! - the director's hash is the kernel's: each tunnel's conntrack mark (its
//!   bucket) is what `director::bucket_of` computes, and site K's edge is
//!   carried by replica K (every replica carries a tunnel, by its own
//!   control API's `/status`);
//! - each replica's wanopt runs in its cgroup, capped at half a CPU;
//! - SIGKILL of the replica that carries site 1's edge: keepalived takes
//!   its buckets away (the time is printed) and a new TCP flow from site
//!   1's client to the server works within 3 s (printed), while the flows
//!   that sites 2 and 3 keep open the whole time see no reset;
//! - the killed replica, started again, gets its buckets back; when the
//!   director then forgets site 1's tunnel (its conntrack entries deleted,
//!   so the edge's packets hash to the returned replica, which does not
//!   know them), the edge comes back to the replica it was on, by the
//!   address that replica advertised (`--advertise`: the node's job);
//! - `lab down` removes the replicas' namespaces and cgroups.
//!
//! And an edge pair at a branch ([`edge_pair`], its own prefix `wep-`).
//!
//! One test binary without the libtest harness, like `waas.rs`: the binary
//! is also the lab's executable (`<this> lab status`), and the wanopt
//! nodes are the `wanopt` binary beside the test's directory
//! (`target/release/wanopt`: `cargo build --release -p wanopt --bin
//! wanopt`). Needs root, iproute2, ethtool, iptables, keepalived,
//! nftables, conntrack and curl (`scripts/deps`). About 20 s.

use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use clap::{Parser, Subcommand};

use wanopt_lab::bringup::{self, UpConfig};
use wanopt_lab::cli::LabCommand;
use wanopt_lab::cluster::director::{bucket_of, bucket_owners, home_of, tunnels};
use wanopt_lab::cluster::{keepalived, replicas, Cluster, Cores, Replica};
use wanopt_lab::link::LinkSpecs;
use wanopt_lab::topology::{Lab, Node};

#[path = "cluster/edge_pair.rs"]
mod edge_pair;

#[derive(Parser)]
struct Cli {
    #[command(subcommand)]
    command: Top,
}

#[derive(Subcommand)]
enum Top {
    #[command(subcommand)]
    Lab(Box<LabCommand>),
}

/// Deletes the lab when dropped.
struct Guard(Lab);

impl Drop for Guard {
    fn drop(&mut self) {
        let _ = self.0.destroy();
    }
}

/// The echo server, in `server`.
const ECHO: &str = "198.18.3.2:6302";

fn prefix() -> String {
    format!(
        "{}wcl-",
        std::env::var("WANOPT_LAB_PREFIX").unwrap_or_default()
    )
}

/// The wanopt binary beside this test's directory, if its core has the
/// cluster's flags.
fn wanopt_binary() -> Result<PathBuf, String> {
    let me = std::env::current_exe().map_err(|e| e.to_string())?;
    let candidate = me
        .parent()
        .and_then(|d| d.parent())
        .map(|d| d.join("wanopt"))
        .ok_or("no target directory")?;
    let help = Command::new(&candidate)
        .args(["core", "--help"])
        .output()
        .map_err(|e| {
            format!(
                "{}: {e}: build it first (cargo build --release -p wanopt --bin wanopt)",
                candidate.display()
            )
        })?;
    let text = String::from_utf8_lossy(&help.stdout);
    if !text.contains("--advertise") || !text.contains("--tunnel-timeout") {
        return Err(format!(
            "{}: its core has no --advertise or --tunnel-timeout: rebuild it (cargo build --release -p wanopt --bin wanopt)",
            candidate.display()
        ));
    }
    Ok(candidate)
}

/// Moves this thread into the lab namespace `node`.
fn enter(lab: &Lab, node: Node) -> Result<(), String> {
    let path = format!("/run/netns/{}", lab.netns(node));
    let file = std::fs::File::open(&path).map_err(|e| format!("{path}: {e}"))?;
    nix::sched::setns(file, nix::sched::CloneFlags::CLONE_NEWNET)
        .map_err(|e| format!("setns {path}: {e}"))
}

/// An echo server in `server` on `addr`.
fn echo_server(lab: &Lab, addr: &'static str) -> Result<(), String> {
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    let lab = lab.clone();
    thread::spawn(move || {
        let listener = enter(&lab, Node::Server)
            .and_then(|()| TcpListener::bind(addr).map_err(|e| format!("bind {addr}: {e}")));
        let listener = match listener {
            Ok(l) => {
                let _ = ready_tx.send(Ok(()));
                l
            }
            Err(e) => {
                let _ = ready_tx.send(Err(e));
                return;
            }
        };
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            thread::spawn(move || {
                let mut buf = vec![0u8; 16 * 1024];
                while let Ok(n) = stream.read(&mut buf) {
                    if n == 0 || stream.write_all(&buf[..n]).is_err() {
                        break;
                    }
                }
            });
        }
    });
    ready_rx
        .recv_timeout(Duration::from_secs(5))
        .map_err(|e| format!("the echo server did not start: {e}"))?
}

/// One round trip of `message` through the echo server on `stream`.
fn echo(stream: &mut TcpStream, message: &[u8]) -> Result<(), String> {
    stream
        .write_all(message)
        .map_err(|e| format!("write: {e}"))?;
    let mut back = vec![0u8; message.len()];
    stream
        .read_exact(&mut back)
        .map_err(|e| format!("read: {e}"))?;
    if back != message {
        return Err("the echo differs".into());
    }
    Ok(())
}

/// A new TCP flow from `client` through the echo server: connect, one
/// round trip, each step within `timeout`.
fn new_flow(lab: &Lab, client: Node, timeout: Duration) -> Result<(), String> {
    let lab = lab.clone();
    thread::spawn(move || {
        enter(&lab, client)?;
        let addr: SocketAddr = ECHO.parse().map_err(|e| format!("{e}"))?;
        let mut stream =
            TcpStream::connect_timeout(&addr, timeout).map_err(|e| format!("connect: {e}"))?;
        let _ = stream.set_read_timeout(Some(timeout));
        echo(&mut stream, b"a new flow after the failover")
    })
    .join()
    .unwrap_or_else(|_| Err("the flow's thread panicked".into()))
}

/// A flow that `client` keeps open, one round trip every 50 ms until
/// `stop`; returns how many round trips it made, or the first error.
fn long_flow(
    lab: &Lab,
    client: Node,
    stop: Arc<AtomicBool>,
) -> thread::JoinHandle<Result<u64, String>> {
    let lab = lab.clone();
    thread::spawn(move || {
        enter(&lab, client)?;
        let addr: SocketAddr = ECHO.parse().map_err(|e| format!("{e}"))?;
        let mut stream = TcpStream::connect_timeout(&addr, Duration::from_secs(5))
            .map_err(|e| format!("{}: connect: {e}", client.name()))?;
        let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
        let mut trips = 0;
        while !stop.load(Ordering::Relaxed) {
            echo(&mut stream, &[trips as u8; 1000])
                .map_err(|e| format!("{} after {trips} round trips: {e}", client.name()))?;
            trips += 1;
            thread::sleep(Duration::from_millis(50));
        }
        Ok(trips)
    })
}

/// The tunnels a replica's wanopt core has up, by its own `/status`
/// (the peers' addresses).
fn carried_by(lab: &Lab, replica: Replica) -> Vec<String> {
    let out = lab
        .command(Node::Core, "curl")
        .args(["-fsS", "-m", "2"])
        .arg(format!("http://{}/status", replica.control()))
        .output();
    let text = out
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default();
    let doc: serde_json::Value = serde_json::from_str(&text).unwrap_or_default();
    doc["peers"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|p| p["state"] == "up")
        .filter_map(|p| p["address"].as_str().map(str::to_string))
        .collect()
}

/// The replica whose `/status` carries a tunnel from `edge`, waiting up
/// to `timeout` for one.
fn replica_of(lab: &Lab, cores: Cores, edge: &str, timeout: Duration) -> Option<Replica> {
    let deadline = Instant::now() + timeout;
    loop {
        let found = cores.replicas().find(|&replica| {
            carried_by(lab, replica)
                .iter()
                .any(|peer| peer.starts_with(&format!("{edge}:")))
        });
        if found.is_some() || Instant::now() > deadline {
            return found;
        }
        thread::sleep(Duration::from_millis(100));
    }
}

/// Site K's edge address (its WAN side: what the director hashes).
fn edge_addr(site: u8) -> String {
    match wanopt_lab::sites::Site::new(site) {
        Some(s) => s.edge_wan_addr(),
        None => wanopt_lab::topology::EDGE_WAN_ADDR.to_string(),
    }
}

fn cluster_failover() -> Result<(), String> {
    let exe = wanopt_binary()?;
    let lab = Lab::new(&prefix());
    let _guard = Guard(lab.clone());
    let cores = Cores::new(3).ok_or("3 cores")?;
    let spec = "rtt 20ms rate 100mbit".to_string();
    let config = UpConfig {
        specs: LinkSpecs {
            up: spec.clone(),
            down: spec,
            seed: 1,
            middlebox: String::new(),
            mtu: None,
        },
        profile: &wanopt_lab::profile::LINUX,
        optimize: true,
        reduce: true,
        node_args: Vec::new(),
        edge_args: Vec::new(),
        core_args: Vec::new(),
        link2: None,
        sites: wanopt_lab::sites::Sites::new(3).ok_or("3 sites")?,
        cluster: Some(Cluster {
            cores,
            cpu: "0.5".parse().ok(),
        }),
        edges: Default::default(),
    };
    let began = Instant::now();
    bringup::up(&lab, &config, &exe).map_err(|e| format!("lab up: {e}"))?;
    println!("  lab up in {:.1} s", began.elapsed().as_secs_f64());
    echo_server(&lab, ECHO)?;

    // Placement: the kernel's buckets are ours, site K is on replica K.
    for site in 1..=3u8 {
        new_flow(&lab, client(site), Duration::from_secs(5))
            .map_err(|e| format!("site {site}'s first flow: {e}"))?;
    }
    let conntrack = tunnels(&lab).map_err(|e| e.to_string())?;
    let marks = lab
        .command(Node::Core, "conntrack")
        .args(["-L", "-p", "udp", "--orig-port-dst", "4433"])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .map_err(|e| e.to_string())?;
    for site in 1..=3u8 {
        let edge = edge_addr(site);
        let ip: Ipv4Addr = edge.parse().map_err(|e| format!("{e}"))?;
        let bucket = bucket_of(ip);
        let line = marks
            .lines()
            .find(|l| l.contains(&format!("src={edge} ")))
            .ok_or_else(|| format!("no conntrack entry for site {site}'s edge: {marks}"))?;
        if !line.contains(&format!("mark={bucket} ")) {
            return Err(format!(
                "site {site}'s edge {edge}: the kernel's bucket differs from bucket_of's {bucket}: {line}"
            ));
        }
        let home = home_of(bucket, cores).ok_or("no home")?;
        let carrier = replica_of(&lab, cores, &edge, Duration::from_secs(3));
        println!(
            "  site {site}: edge {edge} bucket {bucket} -> core{} (carried by {:?})",
            home.number(),
            carrier.map(|r| r.number())
        );
        if home.number() != site || carrier != Some(home) {
            return Err(format!(
                "site {site}'s edge is on {carrier:?}, its bucket's home is core{} (conntrack: {conntrack:?})",
                home.number()
            ));
        }
    }
    let status = lab_command(&lab, &["status"])?;
    for want in ["core1     198.18.5.11  healthy", "buckets   1 2 3 1 2 3"] {
        if !status.contains(want) {
            return Err(format!("lab status has no `{want}`:\n{status}"));
        }
    }
    check_cgroups(&lab, cores)?;

    // Failover: kill the replica that carries site 1's edge.
    let stop = Arc::new(AtomicBool::new(false));
    let others: Vec<_> = [2u8, 3]
        .map(|site| (site, long_flow(&lab, client(site), stop.clone())))
        .into_iter()
        .collect();
    thread::sleep(Duration::from_millis(500));
    let victim = Replica::new(1).ok_or("replica 1")?;
    let pid = lab
        .running_pid(&victim.daemon())
        .ok_or("core1's wanopt is not running")?;
    let killed = Instant::now();
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid),
        nix::sys::signal::Signal::SIGKILL,
    )
    .map_err(|e| format!("kill {pid}: {e}"))?;
    let victim_ip: Ipv4Addr = victim.addr().parse().map_err(|e| format!("{e}"))?;
    let remapped = loop {
        let owners = bucket_owners(&lab).map_err(|e| e.to_string())?;
        if owners.iter().all(|o| *o != Some(victim_ip)) {
            break killed.elapsed();
        }
        if killed.elapsed() > Duration::from_secs(5) {
            return Err("keepalived did not take core1's buckets away within 5 s".into());
        }
        thread::sleep(Duration::from_millis(10));
    };
    println!(
        "  core1 killed: its buckets remapped after {} ms",
        remapped.as_millis()
    );
    let flowed = loop {
        match new_flow(&lab, Node::Client, Duration::from_millis(500)) {
            Ok(()) => break killed.elapsed(),
            Err(e) if killed.elapsed() > Duration::from_secs(3) => {
                return Err(format!(
                    "no new flow from site 1 within 3 s of the kill: {e}"
                ))
            }
            Err(_) => thread::sleep(Duration::from_millis(50)),
        }
    };
    println!(
        "  a new flow from site 1 worked {} ms after the kill",
        flowed.as_millis()
    );
    if remapped > Duration::from_secs(2) {
        return Err(format!(
            "remapping took {} ms: keepalived checks every second",
            remapped.as_millis()
        ));
    }
    thread::sleep(Duration::from_millis(500));
    stop.store(true, Ordering::Relaxed);
    for (site, flow) in others {
        let trips = flow
            .join()
            .unwrap_or_else(|_| Err("panicked".into()))
            .map_err(|e| format!("site {site}'s open flow broke during the failover: {e}"))?;
        println!("  site {site}'s open flow: {trips} round trips, none lost");
    }
    let interim = replica_of(&lab, cores, &edge_addr(1), Duration::from_secs(2))
        .ok_or("site 1's edge is on no replica after the failover")?;
    println!("  site 1's edge is now on core{}", interim.number());
    if interim == victim {
        return Err("site 1's edge is still on the killed replica".into());
    }

    // The replica comes back and gets its buckets back; site 1's edge, whose
    // tunnel the director forgets, comes back to the replica it is on.
    replicas::restart(&lab, victim).map_err(|e| format!("restart core1: {e}"))?;
    keepalived::wait_healthy(&lab, cores, Duration::from_secs(10)).map_err(|e| e.to_string())?;
    let owners = bucket_owners(&lab).map_err(|e| e.to_string())?;
    let homes: Vec<Option<Ipv4Addr>> = (0..64)
        .map(|b| home_of(b, cores).and_then(|r| r.addr().parse().ok()))
        .collect();
    if owners != homes {
        return Err(format!("core1 is healthy again but the map is {owners:?}"));
    }
    let deleted = lab
        .command(Node::Core, "conntrack")
        .args(["-D", "-s", &edge_addr(1), "-p", "udp"])
        .output()
        .map_err(|e| e.to_string())?;
    println!(
        "  the director forgets site 1's tunnel: {}",
        String::from_utf8_lossy(&deleted.stderr).trim()
    );
    let asked = Instant::now();
    let back = loop {
        let flow = new_flow(&lab, Node::Client, Duration::from_millis(1000));
        if flow.is_ok() {
            if let Some(replica) = replica_of(&lab, cores, &edge_addr(1), Duration::ZERO) {
                break replica;
            }
        }
        if asked.elapsed() > Duration::from_secs(8) {
            return Err(format!(
                "site 1 has no working tunnel 8 s after the director forgot it: {flow:?}"
            ));
        }
        thread::sleep(Duration::from_millis(100));
    };
    println!(
        "  site 1's edge came back to core{} in {} ms",
        back.number(),
        asked.elapsed().as_millis()
    );
    if back != interim {
        return Err(format!(
            "site 1's edge moved from core{} to core{}: a redial should go to the replica it was on (--advertise)",
            interim.number(),
            back.number()
        ));
    }
    let logs: Vec<PathBuf> = ["wanopt-edge2.log", "wanopt-edge3.log"]
        .iter()
        .map(|l| lab.state_dir().join(l))
        .collect();
    let resets = wanopt_lab::optimize::flow_resets(&logs);
    if !resets.is_empty() {
        return Err(format!("sites 2 and 3 reset flows: {resets:?}"));
    }

    let cgroups: Vec<PathBuf> = cores.replicas().map(|r| lab.replica_cgroup(r)).collect();
    let teardown = lab.destroy().map_err(|e| format!("lab down: {e}"))?;
    if let Some(left) = cgroups.iter().find(|c| c.exists()) {
        return Err(format!("lab down left {}", left.display()));
    }
    if let Some(left) = cores.replicas().find(|&r| lab.has_replica(r)) {
        return Err(format!("lab down left core{}", left.number()));
    }
    println!(
        "  lab down: {} namespaces, {} processes",
        teardown.removed.len(),
        teardown.processes
    );
    Ok(())
}

/// Site `site`'s client namespace.
fn client(site: u8) -> Node {
    wanopt_lab::sites::Site::new(site).map_or(Node::Client, |s| s.client())
}

/// Each replica's wanopt runs in its own cgroup, capped at half a CPU.
fn check_cgroups(lab: &Lab, cores: Cores) -> Result<(), String> {
    for replica in cores.replicas() {
        let dir = lab.replica_cgroup(replica);
        let read = |file: &str| std::fs::read_to_string(dir.join(file)).unwrap_or_default();
        let pid = lab
            .running_pid(&replica.daemon())
            .ok_or_else(|| format!("core{}'s wanopt is not running", replica.number()))?;
        let procs = read("cgroup.procs");
        if read("cpu.cfs_quota_us").trim() != "5000"
            || read("cpu.cfs_period_us").trim() != "10000"
            || !procs.lines().any(|l| l.trim() == pid.to_string())
        {
            return Err(format!(
                "{}: quota {:?}, processes {procs:?}, core{}'s pid {pid}",
                dir.display(),
                read("cpu.cfs_quota_us"),
                replica.number()
            ));
        }
    }
    Ok(())
}

/// `<this> lab ARGS` in the test's lab; its stdout.
fn lab_command(lab: &Lab, args: &[&str]) -> Result<String, String> {
    let me = std::env::current_exe().map_err(|e| e.to_string())?;
    let out = Command::new(me)
        .arg("lab")
        .args(args)
        .env("WANOPT_LAB_PREFIX", lab.prefix())
        .output()
        .map_err(|e| e.to_string())?;
    if !out.status.success() {
        return Err(format!(
            "lab {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("lab") {
        let cli = Cli::parse();
        let Top::Lab(command) = cli.command;
        let code = wanopt_lab::cli::run(*command).unwrap_or_else(|e| {
            eprintln!("lab: {e:#}");
            1
        });
        std::process::exit(code);
    }
    type Test = (&'static str, fn() -> Result<(), String>);
    let tests: [Test; 3] = [
        ("cluster_failover", cluster_failover),
        (
            "edge_pair_takeover_when_wanopt_dies",
            edge_pair::takeover_when_wanopt_dies,
        ),
        (
            "edge_pair_takeover_when_edge_a_goes_silent",
            edge_pair::takeover_when_edge_a_goes_silent,
        ),
    ];
    if args.iter().any(|a| a == "--list") {
        for (name, _) in tests {
            println!("{name}: test");
        }
        return;
    }
    if !nix::unistd::Uid::effective().is_root() {
        println!("cluster and edge pair tests cannot run: they need root (network namespaces); run them as root, as scripts/test does");
        std::process::exit(1);
    }
    let filters: Vec<&String> = args
        .iter()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .collect();
    let mut failed = 0;
    for (name, test) in tests {
        if !filters.is_empty() && !filters.iter().any(|f| name.contains(f.as_str())) {
            continue;
        }
        println!("test {name} ...");
        let start = Instant::now();
        let result = std::panic::catch_unwind(test).unwrap_or_else(|_| Err("panicked".into()));
        match result {
            Ok(()) => println!("test {name} ... ok ({:.1}s)", start.elapsed().as_secs_f64()),
            Err(e) => {
                failed += 1;
                println!("test {name} ... FAILED: {e}");
            }
        }
    }
    if failed > 0 {
        std::process::exit(1);
    }
}
