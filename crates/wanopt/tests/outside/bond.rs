//! Bond mode end to end: an edge with two `--path`s and `--path-mode
//! bond` to one core, each path through a relay with its own delay and a
//! bottleneck edge -> core. An upload crosses both at once: both paths
//! carry it, and both nodes show the bond; path 1 is cut in the middle
//! and restored: the upload arrives byte-exact with no reset, what path 1
//! had in flight went again on path 2. How fast a bond is, against the
//! links' sum and kernel BBR, is the lab's (`wanopt lab run bond`).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use crate::common::*;

/// A server that reads each connection to its end and checks it against
/// `Pattern::new(seed)`: counts the bytes that match (until the first that
/// does not), and whether one did not.
fn checking_sink(seed: u64) -> (SocketAddr, Arc<AtomicU64>, Arc<AtomicBool>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let (good, wrong) = (
        Arc::new(AtomicU64::new(0)),
        Arc::new(AtomicBool::new(false)),
    );
    let (g, w) = (good.clone(), wrong.clone());
    thread::spawn(move || {
        let Ok((mut s, _)) = listener.accept() else {
            return;
        };
        // The pattern as the uploader makes it: in 64 KiB blocks (a
        // block's last word is cut short only at the end).
        let mut pattern = Pattern::new(seed);
        let mut block = vec![0u8; 64 << 10];
        let mut at = block.len();
        let mut buf = vec![0u8; 64 << 10];
        loop {
            let n = match s.read(&mut buf) {
                Ok(0) | Err(_) => return,
                Ok(n) => n,
            };
            for &byte in &buf[..n] {
                if at == block.len() {
                    pattern.fill(&mut block);
                    at = 0;
                }
                if byte != block[at] {
                    w.store(true, Ordering::Relaxed);
                    return;
                }
                at += 1;
            }
            g.fetch_add(n as u64, Ordering::Relaxed);
        }
    });
    (addr, good, wrong)
}

/// The bond's figures for path `number` in a node's status.
fn bond_path(node: &Node, number: u64) -> serde_json::Value {
    let status = node.status().unwrap_or_default();
    status["peers"][0]["paths"]["paths"]
        .as_array()
        .and_then(|paths| paths.iter().find(|p| p["number"] == number).cloned())
        .map(|p| p["bond"].clone())
        .unwrap_or_default()
}

fn sent_on(node: &Node, number: u64) -> u64 {
    bond_path(node, number)["sent"].as_u64().unwrap_or(0)
}

#[test]
fn an_upload_crosses_both_paths_at_once_and_a_cut_path_loses_nothing() {
    let keys = Keys::new();
    let core_addr = free_udp();
    let mut core_args = core_args(&keys, core_addr, &["127.0.0.1"]);
    core_args.push("--no-reduce".into());
    let core = spawn(&keys, "core", &core_args);
    let cut1 = Arc::new(AtomicBool::new(false));
    // Path 1: 1.5 MB/s at 25 ms one way; path 2: 1 MB/s at 10 ms (the
    // faster link is the farther, as the lab's are).
    let relay1 = cuttable_bottleneck_path(
        core_addr,
        Duration::from_millis(25),
        1_500_000,
        80_000,
        cut1.clone(),
    );
    let relay2 = bottleneck_path(core_addr, Duration::from_millis(10), 1_000_000, 40_000);
    const SEED: u64 = 53;
    let (sink, good, wrong) = checking_sink(SEED);
    let listen = free_tcp();
    let edge = two_path_edge(
        &keys,
        [relay1, relay2],
        &[(listen, sink.to_string())],
        &["--path-mode", "bond"],
    );
    edge.wait_tunnel_up(Duration::from_secs(10));
    assert!(
        eventually(Duration::from_secs(8), || {
            bond_path(&edge, 1).is_object() && bond_path(&edge, 2).is_object()
        }),
        "the edge's bond: {:?}\n{}",
        edge.status(),
        edge.log_text()
    );
    assert_eq!(
        edge.status().unwrap()["peers"][0]["paths"]["mode"],
        "bond",
        "{:?}",
        edge.status()
    );

    // Upload 12 MB as fast as the tunnel takes it.
    const LEN: u64 = 12 << 20;
    let mut client = TcpStream::connect(listen).unwrap();
    let upload = thread::spawn(move || {
        let mut pattern = Pattern::new(SEED);
        let mut buf = vec![0u8; 64 << 10];
        let mut sent = 0u64;
        while sent < LEN {
            let n = (LEN - sent).min(buf.len() as u64) as usize;
            pattern.fill(&mut buf[..n]);
            client
                .write_all(&buf[..n])
                .map_err(|e| format!("after {sent} bytes: {e}"))?;
            sent += n as u64;
        }
        client
            .shutdown(std::net::Shutdown::Write)
            .map_err(|e| e.to_string())?;
        // The tunnel's end closes the connection once the sink did.
        let mut rest = Vec::new();
        let _ = client.read_to_end(&mut rest);
        Ok::<u64, String>(sent)
    });
    // Both paths carry the upload before the cut.
    let both = eventually(Duration::from_secs(20), || {
        sent_on(&edge, 1) > 500 && sent_on(&edge, 2) > 500
    });
    assert!(
        both,
        "both paths carry data: {} and {} datagrams, {} bytes arrived\n{:?}\n{}\n{}",
        sent_on(&edge, 1),
        sent_on(&edge, 2),
        good.load(Ordering::Relaxed),
        core.status(),
        edge.log_text(),
        core.log_text()
    );
    cut1.store(true, Ordering::Relaxed);
    let cut_at = (Instant::now(), good.load(Ordering::Relaxed));
    // The upload goes on over path 2 alone.
    assert!(
        eventually(Duration::from_secs(5), || {
            good.load(Ordering::Relaxed) > cut_at.1 + 1_000_000
        }),
        "after the cut only {} more bytes arrived\n{:?}\n{}",
        good.load(Ordering::Relaxed) - cut_at.1,
        edge.status(),
        edge.log_text()
    );
    thread::sleep(Duration::from_secs(1).saturating_sub(cut_at.0.elapsed()));
    cut1.store(false, Ordering::Relaxed);
    let sent = upload.join().unwrap().unwrap_or_else(|e| {
        panic!("the upload broke: {e}\n{}", edge.log_text());
    });
    assert_eq!(sent, LEN);
    assert!(
        eventually(Duration::from_secs(20), || good.load(Ordering::Relaxed)
            == LEN),
        "{} of {LEN} bytes arrived, wrong: {}",
        good.load(Ordering::Relaxed),
        wrong.load(Ordering::Relaxed)
    );
    assert!(!wrong.load(Ordering::Relaxed));
    let status = edge.status().unwrap();
    let bond = &status["peers"][0]["paths"]["bond"];
    assert!(bond["reinjected"].as_u64().unwrap() > 0, "{bond}");
    assert!(
        bond_path(&edge, 1)["stalls"].as_u64().unwrap() >= 1,
        "{status}"
    );
    // The core's bond received both paths' data and put it in order.
    let core_status = core.status().unwrap();
    assert_eq!(
        core_status["peers"][0]["paths"]["mode"], "bond",
        "{core_status}"
    );
    assert!(
        core_status["peers"][0]["paths"]["bond"].is_object(),
        "{core_status}"
    );
}
