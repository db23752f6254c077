//! Duplicate mode end to end: an edge with two `--path`s and
//! `--path-mode duplicate` to one core, each path through its own relay
//! that loses 20% of what goes to the core, independently of the other.
//! A call-like UDP flow (200-byte datagrams every 2 ms, echoed back) loses
//! about what both paths lose together (4%), not what one loses (20%);
//! no datagram reaches either end twice; both ends drop the second copies
//! they receive. A TCP download beside it is not duplicated. When path 1
//! is cut, the flow goes on over path 2 without a gap.

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use crate::common::*;

/// A TCP server that sends `len` bytes of `Pattern::new(seed)` to each
/// connection.
fn tcp_source(len: usize, seed: u64) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut s) = conn else { return };
            let mut data = vec![0u8; len];
            Pattern::new(seed).fill(&mut data);
            let _ = s.write_all(&data);
        }
    });
    addr
}

/// Whether the relay of path `salt` drops datagram `seq`: 20% of them,
/// independently of the other path's (a hash of both).
fn lost(salt: u64, seq: u64) -> bool {
    let mut x = seq.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ salt.wrapping_mul(0xC2B2_AE3D_27D4_EB4F);
    x ^= x >> 29;
    x = x.wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x ^= x >> 32;
    x.is_multiple_of(5)
}

/// What a run of the call saw: datagrams echoed (each counted once), any
/// echoed twice, and the longest time between echoes.
struct Call {
    sent: u64,
    echoed: u64,
    twice: u64,
    longest_gap: Duration,
}

/// Sends `count` numbered 200-byte datagrams, one per 2 ms, to `listen`
/// and collects the echoes for 1 s after the last.
fn call(listen: SocketAddr, count: u64, first: u64, during: impl Fn(u64)) -> Call {
    let socket = Arc::new(UdpSocket::bind("127.0.0.1:0").unwrap());
    socket.connect(listen).unwrap();
    socket
        .set_read_timeout(Some(Duration::from_millis(50)))
        .unwrap();
    let done = Arc::new(AtomicBool::new(false));
    let receiver = {
        let (socket, done) = (socket.clone(), done.clone());
        thread::spawn(move || {
            let mut seen: HashMap<u64, u32> = HashMap::new();
            let mut last = None;
            let mut longest = Duration::ZERO;
            let mut buf = [0u8; 2048];
            let mut quiet_since = None;
            loop {
                match socket.recv(&mut buf) {
                    Ok(200) => {
                        let seq = u64::from_be_bytes(buf[..8].try_into().unwrap());
                        *seen.entry(seq).or_default() += 1;
                        let now = Instant::now();
                        if let Some(l) = last {
                            longest = longest.max(now - l);
                        }
                        last = Some(now);
                        quiet_since = None;
                    }
                    Ok(_) => {}
                    Err(_) => {
                        if done.load(Ordering::Relaxed) {
                            let since = *quiet_since.get_or_insert_with(Instant::now);
                            if since.elapsed() > Duration::from_secs(1) {
                                return (seen, longest);
                            }
                        }
                    }
                }
            }
        })
    };
    let start = Instant::now();
    let mut datagram = [0x5Au8; 200];
    for i in 0..count {
        during(i);
        datagram[..8].copy_from_slice(&(first + i).to_be_bytes());
        socket.send(&datagram).unwrap();
        let due = start + Duration::from_millis(2 * (i + 1));
        if let Some(wait) = due.checked_duration_since(Instant::now()) {
            thread::sleep(wait);
        }
    }
    done.store(true, Ordering::Relaxed);
    let (seen, longest_gap) = receiver.join().unwrap();
    Call {
        sent: count,
        echoed: seen.len() as u64,
        twice: seen.values().filter(|n| **n > 1).count() as u64,
        longest_gap,
    }
}

/// A number from the first peer's paths in a node's status.
fn paths_field(node: &Node, pick: impl Fn(&serde_json::Value) -> Option<u64>) -> u64 {
    node.status()
        .and_then(|s| pick(&s["peers"][0]["paths"]))
        .unwrap_or(0)
}

fn path_field(node: &Node, number: usize, field: &str) -> u64 {
    paths_field(node, |p| p["paths"][number - 1][field].as_u64())
}

/// `field` of both paths together.
fn both(node: &Node, field: &str) -> u64 {
    path_field(node, 1, field) + path_field(node, 2, field)
}

#[test]
fn a_duplicated_call_loses_what_both_paths_lose_and_survives_a_cut() {
    let keys = Keys::new();
    let core_addr = free_udp();
    let mut core_args = core_args(&keys, core_addr, &["127.0.0.1"]);
    core_args
        .extend(["--no-reduce", "--fec", "off", "--allow-udp", "127.0.0.1/32"].map(String::from));
    let core = spawn(&keys, "core", &core_args);
    let cut1 = Arc::new(AtomicBool::new(false));
    let delay = Duration::from_millis(5);
    // The relays lose only once the tunnel is up (a handshake through 20%
    // loss can take longer than a test should wait).
    let lossy = Arc::new(AtomicBool::new(false));
    let (l1, l2) = (lossy.clone(), lossy.clone());
    let relay1 = lossy_cuttable_path(
        core_addr,
        delay,
        move |seq, _| l1.load(Ordering::Relaxed) && lost(1, seq),
        cut1.clone(),
    );
    let relay2 = lossy_path(core_addr, delay, move |seq, _| {
        l2.load(Ordering::Relaxed) && lost(2, seq)
    });
    let echo = udp_echo();
    let server = tcp_source(8 << 20, 36);
    let (listen_udp, listen_tcp) = (free_udp(), free_tcp());
    let forward_udp = format!("{listen_udp}={echo}");
    let edge = two_path_edge(
        &keys,
        [relay1, relay2],
        &[(listen_tcp, server.to_string())],
        &[
            "--fec",
            "off",
            "--path-mode",
            "duplicate",
            "--forward-udp",
            &forward_udp,
        ],
    );
    edge.wait_tunnel_up(Duration::from_secs(30));
    let both_up = |node: &Node| {
        node.status().is_some_and(|s| {
            let paths = &s["peers"][0]["paths"];
            paths["mode"] == "duplicate" && (0..2).all(|i| paths["paths"][i]["state"] == "up")
        })
    };
    assert!(
        eventually(Duration::from_secs(10), || both_up(&edge) && both_up(&core)),
        "both paths up in duplicate mode: edge {:?} core {:?}",
        edge.status(),
        core.status()
    );

    lossy.store(true, Ordering::Relaxed);
    // The call: each datagram crosses edge -> core on both paths, each
    // losing 20%; the echo comes back on both (not lossy).
    let first = call(listen_udp, 1500, 0, |_| {});
    let loss = 1.0 - first.echoed as f64 / first.sent as f64;
    eprintln!(
        "duplicated call: {} of {} echoed ({:.1}% lost), {} twice, longest gap {:?}",
        first.echoed,
        first.sent,
        loss * 100.0,
        first.twice,
        first.longest_gap
    );
    // One path alone loses 20%; both together 4% (the first datagrams
    // of the flow wait for its stream and may take a few more).
    assert!(loss < 0.09, "{:.1}% lost", loss * 100.0);
    assert_eq!(first.twice, 0, "a datagram reached the client twice");
    // The copies went on the path that was not carrying the data (a
    // loaded machine may have moved the data for a while).
    let copies = both(&edge, "copy_bytes");
    assert!(
        copies >= 1000 * 200,
        "the edge sent the call's datagrams on both paths: {copies} bytes; {:?}",
        edge.status()
    );
    // Both ends dropped second copies before QUIC. How many varies: about
    // 900 at the core on an idle machine, as few as 215 on one busy with
    // builds (not explained yet; the loss above is the same).
    let dropped = |node: &Node| paths_field(node, |p| p["duplicates_dropped"].as_u64());
    eprintln!(
        "second copies dropped: core {}, edge {}",
        dropped(&core),
        dropped(&edge)
    );
    assert!(
        dropped(&core) > 0,
        "the core dropped no copy: {:?}",
        core.status()
    );
    assert!(
        dropped(&edge) > 0,
        "the edge dropped no copy: {:?}",
        edge.status()
    );

    // A TCP download beside no call: the core sends it on one path.
    let (sent, copies) = (both(&core, "sent_bytes"), both(&core, "copy_bytes"));
    let mut client = TcpStream::connect(listen_tcp).unwrap();
    client
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let mut got = Vec::new();
    client.read_to_end(&mut got).unwrap();
    let mut want = vec![0u8; 8 << 20];
    Pattern::new(36).fill(&mut want);
    assert!(
        got == want,
        "the download arrived exact ({} bytes)",
        got.len()
    );
    let bulk = both(&core, "sent_bytes") - sent;
    let copied = both(&core, "copy_bytes") - copies;
    eprintln!("download: {bulk} bytes sent, {copied} of them copies");
    assert!(bulk >= 8 << 20, "{bulk}");
    assert!(
        copied < bulk / 100,
        "TCP was duplicated: {copied} of {bulk}"
    );

    // Path 1 cut in the middle of the call: the datagrams on path 2 go on.
    let second = call(listen_udp, 1500, 100_000, |i| {
        if i == 500 {
            cut1.store(true, Ordering::Relaxed);
        }
    });
    eprintln!(
        "call across a cut of path 1: {} of {} echoed, longest gap {:?}",
        second.echoed, second.sent, second.longest_gap
    );
    assert!(
        second.longest_gap < Duration::from_millis(60),
        "longest gap {:?}",
        second.longest_gap
    );
    // 1,000 datagrams had only path 2 (20% lost).
    assert!(second.echoed > 1500 - 100 - 250, "{}", second.echoed);
    assert_eq!(second.twice, 0);
    assert_eq!(core.status().unwrap()["peers"][0]["reconnects"], 0);
}
