//! Two WAN paths and failover end to end: an edge with two `--path`s to
//! one core, each through its own relay that can be cut. A download runs
//! while relay 1 drops everything both ways: it completes byte-exact with
//! no reset and no long stall, both nodes show path 1 down and a switch;
//! once relay 1 carries again, path 1 is up and carries the data again
//! after the hold. With path 1 cut from the start, the tunnel comes up on
//! path 2.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use crate::common::*;

/// A server that sends `len` bytes of `Pattern::new(seed)` to each
/// connection at about `rate` bytes per second, then closes it.
fn paced_source(len: u64, rate: u64, seed: u64) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut s) = conn else { return };
            thread::spawn(move || {
                let mut pattern = Pattern::new(seed);
                let mut buf = vec![0u8; 64 << 10];
                let start = Instant::now();
                let mut sent = 0u64;
                while sent < len {
                    let n = (len - sent).min(buf.len() as u64) as usize;
                    pattern.fill(&mut buf[..n]);
                    if s.write_all(&buf[..n]).is_err() {
                        return;
                    }
                    sent += n as u64;
                    let due = start + Duration::from_secs_f64(sent as f64 / rate as f64);
                    if let Some(wait) = due.checked_duration_since(Instant::now()) {
                        thread::sleep(wait);
                    }
                }
            });
        }
    });
    addr
}

/// Path `number` of the first peer in a node's status.
fn path(status: &serde_json::Value, number: u64) -> serde_json::Value {
    status["peers"][0]["paths"]["paths"]
        .as_array()
        .and_then(|paths| paths.iter().find(|p| p["number"] == number).cloned())
        .unwrap_or_default()
}

fn path_state(node: &Node, number: u64) -> (String, bool) {
    let status = node.status().unwrap_or_default();
    let p = path(&status, number);
    (
        p["state"].as_str().unwrap_or("").to_owned(),
        p["data"].as_bool().unwrap_or(false),
    )
}

#[test]
fn a_cut_path_fails_over_without_a_reset_and_data_returns_after_it_recovers() {
    let keys = Keys::new();
    let core_addr = free_udp();
    let mut core_args = core_args(&keys, core_addr, &["127.0.0.1"]);
    core_args.push("--no-reduce".into());
    let core = spawn(&keys, "core", &core_args);
    let cut1 = Arc::new(AtomicBool::new(false));
    let cut2 = Arc::new(AtomicBool::new(false));
    let delay = Duration::from_millis(5);
    let relay1 = cuttable_path(core_addr, delay, cut1.clone());
    let relay2 = cuttable_path(core_addr, delay, cut2.clone());
    const LEN: u64 = 30 << 20;
    let server = paced_source(LEN, 8 << 20, 34);
    let listen = free_tcp();
    let edge = two_path_edge(
        &keys,
        [relay1, relay2],
        &[(listen, server.to_string())],
        &[],
    );
    edge.wait_tunnel_up(Duration::from_secs(10));
    // Both paths answer probes, at both ends, and both ends send on path 1
    // before the download (a core whose first data went on path 2 comes
    // back to path 1 after the hold).
    assert!(
        eventually(Duration::from_secs(8), || {
            [&edge, &core]
                .iter()
                .all(|n| path_state(n, 1) == ("up".to_owned(), true) && path_state(n, 2).0 == "up")
        }),
        "both paths up: edge {:?} core {:?}\n{}",
        edge.status(),
        core.status(),
        edge.log_text()
    );
    assert_eq!(path_state(&edge, 1), ("up".to_owned(), true));
    let switches = |node: &Node| {
        node.status().unwrap()["peers"][0]["paths"]["switches"]
            .as_u64()
            .unwrap()
    };
    let (edge_base, core_base) = (switches(&edge), switches(&core));

    let mut client = TcpStream::connect(listen).unwrap();
    client
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    let start = Instant::now();
    let mut expected = Pattern::new(34);
    let mut want = vec![0u8; 64 << 10];
    let mut buf = vec![0u8; 64 << 10];
    let mut got = 0u64;
    let mut longest_gap = Duration::ZERO;
    let mut gap_at = Duration::ZERO;
    let mut last = Instant::now();
    let mut cut_at = None;
    let mut cut_wall = None;
    // Bytes per 100 ms, for the figure printed below.
    let mut per_tenth = vec![0u64; 100];
    loop {
        if cut_at.is_none() && start.elapsed() >= Duration::from_secs(1) {
            cut1.store(true, Ordering::Relaxed);
            cut_at = Some(start.elapsed());
            cut_wall =
                Some(humantime::format_rfc3339_micros(std::time::SystemTime::now()).to_string());
        }
        let n = match client.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) => panic!("the download broke after {got} bytes: {e}"),
        };
        let now = Instant::now();
        if let Some(slot) = per_tenth.get_mut((now - start).as_millis() as usize / 100) {
            *slot += n as u64;
        }
        if now - last > longest_gap {
            longest_gap = now - last;
            gap_at = now - start;
        }
        last = now;
        // Compare against the pattern, in its own 64 KiB blocks.
        let mut at = 0;
        while at < n {
            let offset = (got % want.len() as u64) as usize;
            if offset == 0 {
                let block = (LEN - got).min(want.len() as u64) as usize;
                expected.fill(&mut want[..block]);
            }
            let take = (n - at).min(want.len() - offset);
            assert_eq!(
                &buf[at..at + take],
                &want[offset..offset + take],
                "byte {got} differs"
            );
            got += take as u64;
            at += take;
        }
    }
    let took = start.elapsed();
    assert_eq!(got, LEN, "the download arrived whole");
    eprintln!(
        "download {:.1} s, relay 1 cut at {:?}, longest gap {:?} at {:?}",
        took.as_secs_f64(),
        cut_at,
        longest_gap,
        gap_at
    );
    let tenths = (took.as_millis() as usize / 100 + 1).min(per_tenth.len());
    eprintln!(
        "MB per 100 ms: {:?}",
        per_tenth[..tenths]
            .iter()
            .map(|b| (*b as f64 / 1e5).round() / 10.0)
            .collect::<Vec<_>>()
    );
    // When each node moved the data (its log's clock), against the cut.
    eprintln!("relay 1 cut at {}", cut_wall.as_deref().unwrap_or("-"));
    for (name, node) in [("edge", &edge), ("core", &core)] {
        for line in node.log_text().lines() {
            if line.contains("moves from path") || line.contains("-> down") {
                eprintln!("{name}: {line}");
            }
        }
    }
    assert!(cut_at.is_some_and(|c| took > c + Duration::from_millis(500)));
    assert!(
        longest_gap < Duration::from_secs(1),
        "longest gap in arrivals {longest_gap:?}"
    );

    // Both nodes took path 1 down and switched once; no flow reset, no
    // reconnection.
    for (name, node) in [("edge", &edge), ("core", &core)] {
        let status = node.status().unwrap();
        assert_eq!(path_state(node, 1), ("down".to_owned(), false), "{name}");
        assert_eq!(path_state(node, 2), ("up".to_owned(), true), "{name}");
        let peer = &status["peers"][0];
        let base = if name == "edge" { edge_base } else { core_base };
        assert_eq!(peer["paths"]["switches"], base + 1, "{name}: {peer}");
        assert_eq!(peer["reconnects"], 0, "{name}: {peer}");
        let resets = status["flow_resets"].as_object().unwrap();
        assert!(resets.values().all(|n| n == 0), "{name}: {status}");
    }
    let metrics = http_get(edge.control, "/metrics").unwrap();
    assert!(
        metrics.contains("wanopt_path_up{role=\"edge\"")
            && metrics.contains("wanopt_path_switches_total{role=\"edge\""),
        "{metrics}"
    );

    // Relay 1 carries again: path 1 comes up, and data goes back to it
    // after the hold (RECOVER_HOLD, 2 s).
    cut1.store(false, Ordering::Relaxed);
    let restored = Instant::now();
    assert!(
        eventually(Duration::from_secs(8), || {
            path_state(&edge, 1) == ("up".to_owned(), true)
                && path_state(&core, 1) == ("up".to_owned(), true)
        }),
        "data back on path 1: edge {:?} core {:?}",
        edge.status(),
        core.status()
    );
    assert!(
        restored.elapsed() >= Duration::from_millis(1500),
        "back only after the hold: {:?}",
        restored.elapsed()
    );
    assert_eq!(path_state(&edge, 2), ("up".to_owned(), false));
    let status = edge.status().unwrap();
    assert_eq!(
        status["peers"][0]["paths"]["switches"],
        edge_base + 2,
        "{status}"
    );
    drop(cut2);
}

#[test]
fn with_the_first_path_cut_from_the_start_the_tunnel_comes_up_on_the_second() {
    let keys = Keys::new();
    let core_addr = free_udp();
    let mut core_args = core_args(&keys, core_addr, &["127.0.0.1"]);
    core_args.push("--no-reduce".into());
    let core = spawn(&keys, "core", &core_args);
    let cut1 = Arc::new(AtomicBool::new(true));
    let delay = Duration::from_millis(5);
    let relay1 = cuttable_path(core_addr, delay, cut1.clone());
    let relay2 = cuttable_path(core_addr, delay, Arc::new(AtomicBool::new(false)));
    let server = paced_source(1 << 20, 64 << 20, 35);
    let listen = free_tcp();
    let edge = two_path_edge(
        &keys,
        [relay1, relay2],
        &[(listen, server.to_string())],
        &[],
    );
    // The first handshake (on path 1) gives up at the idle timeout (8 s);
    // the next goes on path 2.
    edge.wait_tunnel_up(Duration::from_secs(20));
    assert!(
        eventually(Duration::from_secs(5), || {
            path_state(&edge, 2) == ("up".to_owned(), true)
        }),
        "{:?}",
        edge.status()
    );
    let mut client = TcpStream::connect(listen).unwrap();
    let mut got = Vec::new();
    client.read_to_end(&mut got).unwrap();
    let mut want = vec![0u8; 1 << 20];
    Pattern::new(35).fill(&mut want);
    assert!(
        got == want,
        "the download arrived exact ({} bytes)",
        got.len()
    );
    assert!(path_state(&core, 2).1, "{:?}", core.status());
}
