//! Core replicas behind one shared address: each replica advertises its
//! own address (`--advertise`) and the edge's redials go there while it
//! answers; when it dies the edge is back on the shared address, which
//! the balancer now sends to a live replica, within 3 s; `GET /health`
//! answers what a balancer's health check asks.
//!
//! The balancer here is a small UDP NAT in the test (one back socket per
//! edge address, to the replica the test names), standing in for the
//! kernel's balancer of `wanopt lab up --cores N`.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream, UdpSocket};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::common::*;

/// A UDP NAT on loopback: datagrams from each edge address go to
/// `target` from a back socket of their own, answers come back. When the
/// target changes, the next datagram of an edge opens a new back socket
/// (as a balancer that forgets a failed replica's connections does).
fn balancer(target: Arc<Mutex<SocketAddr>>) -> SocketAddr {
    let front = Arc::new(UdpSocket::bind("127.0.0.1:0").unwrap());
    let addr = front.local_addr().unwrap();
    std::thread::spawn(move || {
        let mut backs: Vec<(SocketAddr, SocketAddr, Arc<UdpSocket>)> = Vec::new();
        let mut buf = vec![0u8; 65_536];
        while let Ok((n, from)) = front.recv_from(&mut buf) {
            let to = *target.lock().unwrap();
            backs.retain(|(edge, via, _)| *edge != from || *via == to);
            let back = match backs.iter().find(|(edge, _, _)| *edge == from) {
                Some((_, _, back)) => back.clone(),
                None => {
                    let back = Arc::new(UdpSocket::bind("127.0.0.1:0").unwrap());
                    back.connect(to).unwrap();
                    let (answer, front) = (back.clone(), front.clone());
                    std::thread::spawn(move || {
                        let mut buf = vec![0u8; 65_536];
                        // Ends when the replica is gone for a while and the
                        // socket was forgotten (the read times out).
                        let _ = answer.set_read_timeout(Some(Duration::from_secs(30)));
                        while let Ok(n) = answer.recv(&mut buf) {
                            let _ = front.send_to(&buf[..n], from);
                        }
                    });
                    backs.push((from, to, back.clone()));
                    back
                }
            };
            let _ = back.send(&buf[..n]);
        }
    });
    addr
}

/// A replica of the one core (the same key): listening on `listen`,
/// advertising it.
fn replica(keys: &Keys, name: &str, listen: SocketAddr) -> Node {
    let mut args = core_args(keys, listen, &["127.0.0.1"]);
    args.extend(
        [
            "--advertise",
            &listen.to_string(),
            "--tunnel-timeout",
            "1s",
            "--no-reduce",
        ]
        .map(String::from),
    );
    spawn(keys, name, &args)
}

/// The address of the edge's tunnel peer while it is up.
fn peer_address(edge: &Node) -> Option<String> {
    let status = edge.status()?;
    (status["tunnel"] == "up").then(|| {
        status["peers"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|p| p["state"] == "up")
            .and_then(|p| p["address"].as_str())
            .unwrap_or_default()
            .to_owned()
    })
}

/// One flow through the edge: `bytes` sent, the same come back.
fn echo_through(listen: SocketAddr, bytes: &[u8]) -> Result<(), String> {
    let mut s = TcpStream::connect_timeout(&listen, Duration::from_secs(2))
        .map_err(|e| format!("connect: {e}"))?;
    s.set_read_timeout(Some(Duration::from_secs(3)))
        .map_err(|e| e.to_string())?;
    s.write_all(bytes).map_err(|e| format!("write: {e}"))?;
    let mut got = vec![0u8; bytes.len()];
    s.read_exact(&mut got).map_err(|e| format!("read: {e}"))?;
    if got != bytes {
        return Err("wrong bytes came back".into());
    }
    Ok(())
}

#[test]
fn redials_reach_the_advertised_replica_and_a_dead_one_sends_the_edge_back_to_the_shared_address() {
    let keys = Keys::new();
    let (a_addr, b_addr) = (free_udp(), free_udp());
    let mut a = replica(&keys, "replica-a", a_addr);
    let b = replica(&keys, "replica-b", b_addr);
    let target = Arc::new(Mutex::new(a_addr));
    let shared = balancer(target.clone());
    let cut = Arc::new(std::sync::atomic::AtomicBool::new(false));
    // The edge reaches the shared address through a path the test can cut.
    let shared_path = cuttable_path(shared, Duration::ZERO, cut.clone());
    let echo = echo_server();
    let listen = free_tcp();
    let edge = spawn(
        &keys,
        "edge",
        &edge_args(
            &keys,
            shared_path,
            &[(listen, echo.to_string())],
            &["--tunnel-timeout", "1s", "--no-reduce"],
        ),
    );
    edge.wait_tunnel_up(Duration::from_secs(10));
    assert_eq!(
        peer_address(&edge).as_deref(),
        Some(shared_path.to_string().as_str())
    );
    echo_through(listen, b"through the shared address").unwrap();

    // The shared address stops answering while replica A lives: the
    // edge's redial goes to A's own address.
    cut.store(true, std::sync::atomic::Ordering::Relaxed);
    let a_text = a_addr.to_string();
    assert!(
        eventually(Duration::from_secs(6), || peer_address(&edge).as_deref()
            == Some(a_text.as_str())),
        "the edge did not redial replica A at its own address; status {:?}; log:\n{}",
        edge.status(),
        edge.log_text()
    );
    echo_through(listen, b"straight to replica A").unwrap();
    cut.store(false, std::sync::atomic::Ordering::Relaxed);

    // A dies; the balancer now sends the shared address to B (what
    // keepalived does when A's health check fails).
    let (status, body) = {
        let body = http_get(a.control, "/health").unwrap_or_default();
        (body.starts_with("ok"), body)
    };
    assert!(status, "replica A's /health: {body:?}");
    // A flow open through A when it dies.
    let mut open = TcpStream::connect(listen).unwrap();
    open.write_all(b"open through A").unwrap();
    let mut got = [0u8; 14];
    open.read_exact(&mut got).unwrap();
    a.child.kill().unwrap();
    let killed = Instant::now();
    *target.lock().unwrap() = b_addr;
    let mut last = String::new();
    let recovered = loop {
        match echo_through(listen, b"after the failover") {
            Ok(()) => break Some(killed.elapsed()),
            Err(e) => last = e,
        }
        if killed.elapsed() > Duration::from_secs(10) {
            break None;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let recovered = recovered.unwrap_or_else(|| {
        panic!(
            "no flow through the edge 10 s after replica A died ({last}); edge log:\n{}",
            edge.log_text()
        )
    });
    eprintln!("a new flow worked {recovered:?} after replica A died");
    assert!(
        recovered < Duration::from_secs(3),
        "a new flow took {recovered:?} after replica A died (goal: under 3 s); edge log:\n{}",
        edge.log_text()
    );
    // The edge is on B now, and B's own address is where its redials go.
    let log = edge.log_text();
    assert!(
        log.contains(&format!("is the replica at {b_addr}")),
        "replica B's advertised address not taken; log:\n{log}"
    );
    assert!(http_get(b.control, "/health").is_some_and(|b| b.starts_with("ok")));
    // The flow that was open through A ended with a reset, counted as a
    // lost tunnel; never a wrong byte.
    open.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut rest = Vec::new();
    let ended = open.read_to_end(&mut rest);
    assert!(
        ended.is_err() && rest.is_empty(),
        "the flow open through the dead replica did not end with a reset: {ended:?}, {} bytes",
        rest.len()
    );
    let status = edge.status().unwrap();
    // It, and the flows the test opened on the dying tunnel before the
    // edge knew.
    let lost = status["flow_resets"]["tunnel_lost"].as_u64().unwrap_or(0);
    assert!(lost >= 1, "{status}");
    assert_eq!(status["flow_resets"]["tunnel"], 0, "{status}");
}

#[test]
fn health_says_whether_the_node_does_its_job() {
    let keys = Keys::new();
    let core_addr = free_udp();
    let core = spawn(&keys, "core", &core_args(&keys, core_addr, &["127.0.0.1"]));
    assert!(
        eventually(Duration::from_secs(10), || http_get(
            core.control,
            "/health"
        )
        .is_some_and(|b| b.trim() == "ok: accepting tunnels")),
        "core /health: {:?}",
        http_get(core.control, "/health")
    );
    // An edge whose core does not answer is unhealthy, with the reason;
    // the status line says 503 to a health checker.
    let silent = free_udp();
    let forwards = [(free_tcp(), "127.0.0.1:9".to_owned())];
    let edge = spawn(&keys, "edge", &edge_args(&keys, silent, &forwards, &[]));
    assert!(eventually(Duration::from_secs(10), || edge
        .status()
        .is_some()));
    let mut s = TcpStream::connect(edge.control).unwrap();
    write!(s, "GET /health HTTP/1.0\r\nHost: {}\r\n\r\n", edge.control).unwrap();
    let mut answer = String::new();
    s.read_to_string(&mut answer).unwrap();
    assert!(answer.starts_with("HTTP/1.0 503"), "{answer}");
    assert!(
        answer.ends_with("unavailable: no tunnel to a core is up\n"),
        "{answer}"
    );
    drop(edge);
    let forwards = [(free_tcp(), "127.0.0.1:9".to_owned())];
    let edge = spawn(&keys, "edge2", &edge_args(&keys, core_addr, &forwards, &[]));
    edge.wait_tunnel_up(Duration::from_secs(10));
    assert_eq!(
        http_get(edge.control, "/health").as_deref(),
        Some("ok: tunnel up\n")
    );
}

#[test]
fn an_edge_with_two_paths_takes_both_to_the_advertised_replica() {
    let keys = Keys::new();
    let a_addr = free_udp();
    let _a = replica(&keys, "replica-a", a_addr);
    let shared = balancer(Arc::new(Mutex::new(a_addr)));
    // Both paths reach the shared address through paths the test cuts.
    let cut = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let relays = [
        cuttable_path(shared, Duration::ZERO, cut.clone()),
        cuttable_path(shared, Duration::ZERO, cut.clone()),
    ];
    let echo = echo_server();
    let listen = free_tcp();
    let edge = two_path_edge(
        &keys,
        relays,
        &[(listen, echo.to_string())],
        &["--tunnel-timeout", "1s"],
    );
    edge.wait_tunnel_up(Duration::from_secs(10));
    echo_through(listen, b"through the shared address").unwrap();
    cut.store(true, std::sync::atomic::Ordering::Relaxed);
    let a_text = a_addr.to_string();
    assert!(
        eventually(Duration::from_secs(6), || peer_address(&edge).as_deref()
            == Some(a_text.as_str())),
        "the edge did not redial replica A; status {:?}; log:\n{}",
        edge.status(),
        edge.log_text()
    );
    echo_through(listen, b"both paths to replica A").unwrap();
    // Both of its paths now end at the replica's own address, and are up.
    assert!(
        eventually(Duration::from_secs(5), || {
            let status = edge.status().unwrap_or_default();
            let peers = status["peers"].as_array().cloned().unwrap_or_default();
            peers.iter().any(|p| {
                p["address"] == a_text.as_str()
                    && p["paths"]["paths"].as_array().is_some_and(|paths| {
                        paths.len() == 2
                            && paths
                                .iter()
                                .all(|q| q["state"] == "up" && q["remote"] == a_text.as_str())
                    })
            })
        }),
        "the paths to replica A did not both come up: {:?}",
        edge.status()
    );
}

#[test]
fn a_cut_longer_than_the_replicas_patience_does_not_forget_the_replica() {
    let keys = Keys::new();
    let (a_addr, b_addr) = (free_udp(), free_udp());
    // Replica A is reached at its advertised address through a path the
    // test cuts, like the shared address.
    let cut = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let shared_cut = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let a_path = cuttable_path(a_addr, Duration::ZERO, cut.clone());
    let mut args = core_args(&keys, a_addr, &["127.0.0.1"]);
    args.extend(
        [
            "--advertise",
            &a_path.to_string(),
            "--tunnel-timeout",
            "1s",
            "--no-reduce",
        ]
        .map(String::from),
    );
    let _a = spawn(&keys, "replica-a", &args);
    let _b = replica(&keys, "replica-b", b_addr);
    let target = Arc::new(Mutex::new(a_addr));
    let shared_path = cuttable_path(balancer(target.clone()), Duration::ZERO, shared_cut.clone());
    let echo = echo_server();
    let listen = free_tcp();
    let edge = spawn(
        &keys,
        "edge",
        &edge_args(
            &keys,
            shared_path,
            &[(listen, echo.to_string())],
            &["--tunnel-timeout", "1s", "--no-reduce"],
        ),
    );
    edge.wait_tunnel_up(Duration::from_secs(10));
    assert!(
        eventually(Duration::from_secs(5), || edge
            .log_text()
            .contains(&format!("is the replica at {a_path}"))),
        "replica A's address not taken; log:\n{}",
        edge.log_text()
    );
    // Everything is cut for 3 s (the edge tries the replica and the
    // shared address in turn), and the balancer would now send the edge
    // elsewhere: when the replica's path is back, the edge is on A again.
    cut.store(true, std::sync::atomic::Ordering::Relaxed);
    shared_cut.store(true, std::sync::atomic::Ordering::Relaxed);
    *target.lock().unwrap() = b_addr;
    std::thread::sleep(Duration::from_secs(3));
    cut.store(false, std::sync::atomic::Ordering::Relaxed);
    let a_text = a_path.to_string();
    assert!(
        eventually(Duration::from_secs(8), || peer_address(&edge).as_deref()
            == Some(a_text.as_str())),
        "the edge did not return to replica A after the cut; status {:?}; log:\n{}",
        edge.status(),
        edge.log_text()
    );
    echo_through(listen, b"back on replica A").unwrap();
}
