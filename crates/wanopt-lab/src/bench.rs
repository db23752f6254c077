//! `wanopt lab bench-ceiling`: the emulator's own ceiling.
//!
//! The lab is brought up with a perfect link (no rate, no delay: every frame
//! still goes through the AF_PACKET driver and the `wanopt-netem` model), and
//! a raw blaster (`wanopt lab blast`, `sendmmsg` of ready-made frames on an
//! AF_PACKET socket) sends 1514-byte frames carrying 1500-byte IPv4/UDP
//! packets from the edge and/or the core towards an unclaimed MAC address
//! (the far side's kernel drops them at once, so receivers cost nothing):
//! up only, down only, then both at once. The figure for a direction is the
//! number of frames the far veth received (its kernel `rx_packets` counter,
//! independent of the emulator) over the blaster's duration; the
//! emulator's own counters are printed alongside as a cross-check. A cheap
//! sender matters on a 2-core machine: iperf3 senders and receivers
//! compete with the emulator for the CPUs and saturate first.

use std::time::Duration;

use serde::Serialize;

use crate::bringup::{self, counters_path, UpConfig, UpError};
use crate::link::LinkSpecs;
use crate::profile::LINUX;
use crate::topology::{Lab, Node, TopologyError};

/// Errors of `lab bench-ceiling` and `lab blast`.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    /// The lab did not come up.
    #[error(transparent)]
    Up(#[from] UpError),
    /// The lab did not go down.
    #[error(transparent)]
    Down(#[from] TopologyError),
    /// A blaster (or its socket) could not be started or waited for.
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

/// One measured run.
#[derive(Debug, Clone, Serialize)]
pub struct CeilingRun {
    /// `up`, `down` or `both`.
    pub mode: &'static str,
    /// Frames forwarded per second, up.
    pub up_pps: f64,
    /// Frames forwarded per second, down.
    pub down_pps: f64,
    /// Frames the blasters sent, up and down.
    pub sent: (u64, u64),
    /// Frames the far veths received, up and down.
    pub delivered: (u64, u64),
    /// Frames the emulator forwarded, up and down.
    pub forwarded: (u64, u64),
}

fn tx_frames(lab: &Lab) -> (u64, u64) {
    let doc: serde_json::Value = std::fs::read_to_string(counters_path(lab))
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or_default();
    let get = |d: &str| doc[d]["io"]["tx_frames"].as_u64().unwrap_or(0);
    (get("up"), get("down"))
}

/// The interface of `node` that faces the WAN.
const WAN_IF: &str = "wan0";

fn rx_packets(lab: &Lab, node: Node) -> u64 {
    let mut cmd = lab.command(node, "cat");
    cmd.arg(format!("/sys/class/net/{WAN_IF}/statistics/rx_packets"));
    crate::topology::output(cmd)
        .ok()
        .and_then(|t| t.trim().parse().ok())
        .unwrap_or(0)
}

fn blast(lab: &Lab, from: Node, seconds: u64) -> std::io::Result<std::process::Child> {
    let exe = std::env::current_exe()?;
    let mut cmd = lab.command(from, &exe.to_string_lossy());
    cmd.args(["lab", "blast", "--interface", WAN_IF, "--seconds"])
        .arg(seconds.to_string())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null());
    cmd.spawn()
}

fn blast_report(out: &std::process::Output) -> (u64, f64) {
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
    (
        doc["frames"].as_u64().unwrap_or(0),
        doc["seconds"].as_f64().unwrap_or(0.0),
    )
}

/// A 1514-byte frame: Ethernet to an unclaimed MAC, IPv4/UDP of 1500 bytes.
pub fn blast_frame() -> Vec<u8> {
    let mut f = vec![0u8; 1514];
    f[0..6].copy_from_slice(&[0x02, 0x00, 0xc6, 0x12, 0xff, 0xff]);
    f[6..12].copy_from_slice(&[0x02, 0x00, 0xc6, 0x12, 0xff, 0xfe]);
    f[12..14].copy_from_slice(&[0x08, 0x00]);
    let ip = &mut f[14..34];
    ip[0] = 0x45;
    ip[2..4].copy_from_slice(&1500u16.to_be_bytes());
    ip[8] = 64;
    ip[9] = 17;
    ip[12..16].copy_from_slice(&[198, 18, 2, 253]);
    ip[16..20].copy_from_slice(&[198, 18, 2, 254]);
    let mut sum: u32 = 0;
    for pair in ip.chunks(2) {
        sum += u32::from(u16::from_be_bytes([pair[0], pair[1]]));
    }
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    ip[10..12].copy_from_slice(&(!(sum as u16)).to_be_bytes());
    let udp = &mut f[34..42];
    udp[0..2].copy_from_slice(&9u16.to_be_bytes());
    udp[2..4].copy_from_slice(&9u16.to_be_bytes());
    udp[4..6].copy_from_slice(&1480u16.to_be_bytes());
    f
}

/// Sends [`blast_frame`]s on `interface` for `seconds`, as fast as possible
/// or paced at `mbit` Mbit/s of IP packets (in bursts of 8); prints
/// `{"frames": N, "seconds": S}`.
pub fn blast_main(interface: &str, seconds: u64, mbit: Option<f64>) -> Result<(), BenchError> {
    let sock = crate::rawsock::PacketSocket::sender(interface, 4 << 20)?;
    let burst = if mbit.is_some() {
        8
    } else {
        crate::rawsock::BATCH
    };
    let frames = vec![blast_frame(); burst];
    let start = std::time::Instant::now();
    let limit = Duration::from_secs(seconds);
    // Time per burst at the paced rate (1500-byte IP packets).
    let gap = mbit
        .filter(|m| *m > 0.0)
        .map(|m| Duration::from_secs_f64(burst as f64 * 1500.0 * 8.0 / (m * 1e6)));
    let mut sent = 0u64;
    let mut bursts = 0u32;
    while start.elapsed() < limit {
        if let Some(gap) = gap {
            let due = start + gap * bursts;
            let now = std::time::Instant::now();
            if due > now {
                std::thread::sleep(due - now);
            }
            bursts += 1;
        }
        sent += crate::rawsock::send_batch(&sock, &frames) as u64;
    }
    println!(
        "{}",
        serde_json::json!({"frames": sent, "seconds": start.elapsed().as_secs_f64()})
    );
    Ok(())
}

/// Runs the benchmark `runs` times per mode; prints a table and JSON.
pub fn run(lab: &Lab, seconds: u64, runs: usize) -> Result<(), BenchError> {
    let config = UpConfig {
        specs: LinkSpecs {
            up: String::new(),
            down: String::new(),
            seed: 1,
            middlebox: String::new(),
            mtu: None,
        },
        profile: &LINUX,
        optimize: false,
        reduce: false,
        node_args: Vec::new(),
        edge_args: Vec::new(),
        core_args: Vec::new(),
        link2: None,
        sites: crate::sites::Sites::ONE,
        cluster: None,
        edges: Default::default(),
    };
    bringup::up(lab, &config, &bringup::current_exe()?)?;
    let mut results = Vec::new();
    for run in 0..runs {
        for mode in ["up", "down", "both"] {
            let before = tx_frames(lab);
            let rx_before = (rx_packets(lab, Node::Core), rx_packets(lab, Node::Edge));
            let up = (mode != "down")
                .then(|| blast(lab, Node::Edge, seconds))
                .transpose()?;
            let down = (mode != "up")
                .then(|| blast(lab, Node::Core, seconds))
                .transpose()?;
            let up_out = up.map(|c| c.wait_with_output()).transpose()?;
            let down_out = down.map(|c| c.wait_with_output()).transpose()?;
            std::thread::sleep(Duration::from_millis(500)); // let counters publish
            let after = tx_frames(lab);
            let delivered = (
                rx_packets(lab, Node::Core).saturating_sub(rx_before.0),
                rx_packets(lab, Node::Edge).saturating_sub(rx_before.1),
            );
            let (up_sent, up_secs) = up_out.as_ref().map(blast_report).unwrap_or((0, 0.0));
            let (down_sent, down_secs) = down_out.as_ref().map(blast_report).unwrap_or((0, 0.0));
            let forwarded = (
                after.0.saturating_sub(before.0),
                after.1.saturating_sub(before.1),
            );
            let pps = |n: u64, s: f64| if s > 0.0 { n as f64 / s } else { 0.0 };
            let r = CeilingRun {
                mode,
                up_pps: pps(delivered.0, up_secs),
                down_pps: pps(delivered.1, down_secs),
                sent: (up_sent, down_sent),
                delivered,
                forwarded,
            };
            eprintln!(
                "run {} {:>4}: up {:>8.0} pps {:>5.2} Gbit/s (sent {} emulator {} delivered {}), down {:>8.0} pps {:>5.2} Gbit/s (sent {} emulator {} delivered {})",
                run + 1,
                mode,
                r.up_pps,
                r.up_pps * 1500.0 * 8.0 / 1e9,
                up_sent,
                forwarded.0,
                delivered.0,
                r.down_pps,
                r.down_pps * 1500.0 * 8.0 / 1e9,
                down_sent,
                forwarded.1,
                delivered.1
            );
            results.push(r);
        }
    }
    println!("mode  direction  median pps  median Gbit/s (1500-byte IP packets)");
    for mode in ["up", "down", "both"] {
        for (dir, pick) in [("up", 0usize), ("down", 1usize)] {
            if (mode == "up" && pick == 1) || (mode == "down" && pick == 0) {
                continue;
            }
            let mut v: Vec<f64> = results
                .iter()
                .filter(|r| r.mode == mode)
                .map(|r| if pick == 0 { r.up_pps } else { r.down_pps })
                .collect();
            v.sort_by(f64::total_cmp);
            let median = v.get(v.len() / 2).copied().unwrap_or(0.0);
            println!(
                "{mode:<5} {dir:<10} {median:>10.0}  {:>6.2}",
                median * 1500.0 * 8.0 / 1e9
            );
        }
    }
    lab.destroy()?;
    Ok(())
}
