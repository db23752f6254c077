//! The tunnel over TCP where UDP does not get through: `--transport tcp`
//! carries flows byte-exact with every feature of the tunnel; `--transport
//! auto` falls back to TCP when no QUIC handshake completes, comes back
//! to QUIC for new flows when UDP works again, and moves new flows to TCP
//! when UDP goes silent under an open tunnel.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::common::*;

/// Sends `len` pattern bytes through `forward` (to an echo server) and
/// checks every byte that comes back.
fn echo_exact(forward: SocketAddr, len: usize, seed: u64) -> Result<(), String> {
    let mut s = TcpStream::connect(forward).map_err(|e| e.to_string())?;
    s.set_read_timeout(Some(Duration::from_secs(20)))
        .map_err(|e| e.to_string())?;
    let mut data = vec![0u8; len];
    Pattern::new(seed).fill(&mut data);
    let mut writer = s.try_clone().map_err(|e| e.to_string())?;
    let sent = data.clone();
    let sender = std::thread::spawn(move || {
        let _ = writer.write_all(&sent);
        let _ = writer.shutdown(std::net::Shutdown::Write);
    });
    let mut back = Vec::with_capacity(len);
    s.read_to_end(&mut back).map_err(|e| e.to_string())?;
    let _ = sender.join();
    if back != data {
        return Err(format!("{} of {len} bytes came back, or wrong", back.len()));
    }
    Ok(())
}

/// The transport of the edge's peer that is up, and why.
fn transport(edge: &Node) -> Option<(String, String)> {
    let status = edge.status()?;
    status["peers"].as_array()?.iter().find_map(|p| {
        (p["state"] == "up").then(|| {
            (
                p["transport"].as_str().unwrap_or_default().to_owned(),
                p["transport_why"].as_str().unwrap_or_default().to_owned(),
            )
        })
    })
}

fn core_with_tcp(keys: &Keys, udp: SocketAddr, tcp: SocketAddr) -> Node {
    let mut args = core_args(keys, udp, &["127.0.0.1"]);
    let off = args.iter().position(|a| a == "--listen-tcp").unwrap();
    args[off + 1] = tcp.to_string();
    args.push("--no-reduce".into());
    spawn(keys, "core", &args)
}

#[test]
fn transport_tcp_carries_flows_byte_exact() {
    let keys = Keys::new();
    let (udp, tcp) = (free_udp(), free_tcp());
    let _core = core_with_tcp(&keys, udp, tcp);
    let echo = echo_server();
    let forward = free_tcp();
    let port = tcp.port().to_string();
    let edge = spawn(
        &keys,
        "edge",
        &edge_args(
            &keys,
            udp,
            &[(forward, echo.to_string())],
            &["--transport", "tcp", "--tcp-port", &port, "--no-reduce"],
        ),
    );
    edge.wait_tunnel_up(Duration::from_secs(10));
    assert_eq!(
        transport(&edge),
        Some(("tcp".into(), "--transport tcp".into()))
    );
    let metrics = http_get(edge.control, "/metrics").unwrap_or_default();
    assert!(
        metrics
            .lines()
            .any(|l| l.starts_with("wanopt_tunnel_over_tcp{") && l.ends_with(" 1")),
        "/metrics says the tunnel is over TCP:\n{metrics}"
    );
    let human = std::process::Command::new(BIN)
        .args(["status", "--control", &edge.control.to_string()])
        .output()
        .unwrap();
    let human = String::from_utf8_lossy(&human.stdout);
    assert!(human.contains("over      tcp (--transport tcp)"), "{human}");
    // Several flows at once, each byte-checked.
    let flows: Vec<_> = (0..4)
        .map(|i| std::thread::spawn(move || echo_exact(forward, 3 << 20, 11 + i)))
        .collect();
    for flow in flows {
        flow.join().unwrap().unwrap();
    }
    // An open flow says it goes over TCP.
    let mut open = TcpStream::connect(forward).unwrap();
    open.write_all(b"x").unwrap();
    open.read_exact(&mut [0u8; 1]).unwrap();
    let flows = http_get(edge.control, "/flows").unwrap_or_default();
    assert!(
        flows.contains("over-tcp"),
        "flows say they go over TCP: {flows}"
    );
}

#[test]
fn a_core_refuses_a_tcp_peer_that_is_not_an_edge() {
    let keys = Keys::new();
    let (udp, tcp) = (free_udp(), free_tcp());
    let core = core_with_tcp(&keys, udp, tcp);
    assert!(eventually(Duration::from_secs(10), || core
        .log_text()
        .contains("listening on tcp")));
    let mut s = TcpStream::connect(tcp).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
    let mut buf = [0u8; 16];
    // Closed without a byte in answer.
    assert!(matches!(s.read(&mut buf), Ok(0) | Err(_)));
    assert!(core.status().is_some(), "the core still runs");
}

#[test]
fn auto_falls_back_to_tcp_comes_back_to_quic_and_moves_when_udp_goes_silent() {
    let keys = Keys::new();
    let (udp, tcp) = (free_udp(), free_tcp());
    let _core = core_with_tcp(&keys, udp, tcp);
    let blocked = Arc::new(AtomicBool::new(true));
    let relay = cuttable_path(udp, Duration::from_millis(5), blocked.clone());
    let echo = echo_server();
    let forward = free_tcp();
    let port = tcp.port().to_string();
    let started = Instant::now();
    let edge = spawn(
        &keys,
        "edge",
        &edge_args(
            &keys,
            relay,
            &[(forward, echo.to_string())],
            &["--transport", "auto", "--tcp-port", &port, "--no-reduce"],
        ),
    );
    // UDP blocked from the start: over TCP within 3 s of QUIC and a dial.
    assert!(
        eventually(Duration::from_secs(8), || transport(&edge)
            .is_some_and(|(t, _)| t == "tcp")),
        "no tunnel over TCP; log:\n{}",
        edge.log_text()
    );
    let (_, why) = transport(&edge).unwrap();
    assert!(why.contains("no QUIC handshake"), "{why}");
    echo_exact(forward, 1 << 20, 1).unwrap();
    eprintln!("over tcp after {:?}", started.elapsed());

    // UDP works again: new flows on QUIC within a retry.
    blocked.store(false, Ordering::SeqCst);
    assert!(
        eventually(Duration::from_secs(30), || transport(&edge)
            .is_some_and(|(t, _)| t == "quic")),
        "not back on QUIC; log:\n{}",
        edge.log_text()
    );
    echo_exact(forward, 1 << 20, 2).unwrap();

    // UDP blocked under the open tunnel: new flows over TCP within 5 s.
    let cut = Instant::now();
    blocked.store(true, Ordering::SeqCst);
    // The edge must send to notice: a flow that waits for the tunnel.
    let first = std::thread::spawn(move || echo_exact(forward, 64 << 10, 3));
    assert!(
        eventually(Duration::from_secs(8), || transport(&edge)
            .is_some_and(|(t, _)| t == "tcp")),
        "did not move to TCP; log:\n{}",
        edge.log_text()
    );
    let moved = cut.elapsed();
    assert!(moved < Duration::from_secs(5), "moved after {moved:?}");
    echo_exact(forward, 1 << 20, 4).unwrap();
    // The flow opened on QUIC either ended (reset) or finished whole.
    let _ = first.join();
    assert!(edge.log_text().contains("UDP went silent"));
}

#[test]
fn auto_moves_new_flows_to_tcp_when_udp_is_policed() {
    let keys = Keys::new();
    let (udp, tcp) = (free_udp(), free_tcp());
    let _core = core_with_tcp(&keys, udp, tcp);
    // UDP from the edge policed to 2 Mbit/s (room for one datagram); TCP on
    // loopback is not.
    let relay = bottleneck_path(udp, Duration::from_millis(5), 250_000, 1_500);
    let echo = echo_server();
    let forward = free_tcp();
    let port = tcp.port().to_string();
    let edge = spawn(
        &keys,
        "edge",
        &edge_args(
            &keys,
            relay,
            &[(forward, echo.to_string())],
            &["--transport", "auto", "--tcp-port", &port, "--no-reduce"],
        ),
    );
    edge.wait_tunnel_up(Duration::from_secs(10));
    assert_eq!(transport(&edge).map(|(t, _)| t), Some("quic".into()));
    // An upload that keeps the tunnel busy and losing at the policer.
    let busy = std::thread::spawn(move || echo_exact(forward, 16 << 20, 5));
    let started = Instant::now();
    assert!(
        eventually(Duration::from_secs(20), || transport(&edge)
            .is_some_and(|(t, why)| t == "tcp" && why.contains("policed"))),
        "did not move to TCP; log:\n{}",
        edge.log_text()
    );
    eprintln!(
        "moved after {:?}: {:?}",
        started.elapsed(),
        transport(&edge)
    );
    // A new flow goes over TCP at loopback's rate, byte-exact.
    let new = Instant::now();
    echo_exact(forward, 8 << 20, 6).unwrap();
    assert!(
        new.elapsed() < Duration::from_secs(8),
        "8 MB each way took {:?} (2 Mbit/s would take 32 s)",
        new.elapsed()
    );
    drop(busy);
}

#[test]
fn udp_flows_ride_the_tunnel_over_tcp() {
    let keys = Keys::new();
    let (udp, tcp) = (free_udp(), free_tcp());
    let mut args = core_args(&keys, udp, &[]);
    let off = args.iter().position(|a| a == "--listen-tcp").unwrap();
    args[off + 1] = tcp.to_string();
    args.extend([
        "--allow-udp".into(),
        "127.0.0.1".into(),
        "--no-reduce".into(),
    ]);
    let _core = spawn(&keys, "core", &args);
    let echo = udp_echo();
    let listen = free_udp();
    let forward = format!("{listen}={echo}");
    let port = tcp.port().to_string();
    let edge = spawn(
        &keys,
        "edge",
        &edge_args(
            &keys,
            udp,
            &[],
            &[
                "--transport",
                "tcp",
                "--tcp-port",
                &port,
                "--forward-udp",
                &forward,
                "--no-reduce",
            ],
        ),
    );
    edge.wait_tunnel_up(Duration::from_secs(10));
    let client = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    client
        .set_read_timeout(Some(Duration::from_secs(2)))
        .unwrap();
    // Small and large datagrams (fragmented in the tunnel) come back whole.
    for (i, len) in [1usize, 100, 1200, 8000, 30_000].into_iter().enumerate() {
        let mut payload = vec![0u8; len];
        Pattern::new(40 + i as u64).fill(&mut payload);
        let mut back = vec![0u8; 65_536];
        let got = (0..5).find_map(|_| {
            client.send_to(&payload, listen).unwrap();
            client.recv(&mut back).ok()
        });
        assert_eq!(
            got.map(|n| &back[..n]),
            Some(&payload[..]),
            "a {len}-byte datagram over the tunnel over TCP"
        );
    }
    assert_eq!(transport(&edge).map(|(t, _)| t), Some("tcp".into()));
}
