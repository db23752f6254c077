//! Flow limits with real `wanopt edge` and `wanopt core` processes on
//! loopback: one source cannot hold more than its share of flows, the node
//! no more than its total, the refusals are counted and logged once per
//! interval, and a flow that ends gives its place back.

use std::io::{Read, Write};
use std::net::{IpAddr, SocketAddr, TcpStream};
use std::thread;
use std::time::Duration;

use crate::common::*;

/// A connection from `source` through the edge, checked with one echo;
/// `None` when the edge refused it.
fn open_from(source: IpAddr, listen: SocketAddr) -> Option<TcpStream> {
    let socket = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    socket.bind(&SocketAddr::new(source, 0).into()).unwrap();
    socket.connect(&listen.into()).ok()?;
    let mut conn: TcpStream = socket.into();
    conn.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    conn.write_all(b"ping").ok()?;
    let mut back = [0u8; 4];
    conn.read_exact(&mut back).ok()?;
    (&back == b"ping").then_some(conn)
}

#[test]
fn a_source_gets_its_share_the_node_its_total_and_refusals_are_counted() {
    let server = echo_server();
    let listen = free_tcp();
    let keys = Keys::new();
    let core_addr = free_udp();
    let core = spawn(&keys, "core", &core_args(&keys, core_addr, &["127.0.0.1"]));
    let limits = ["--max-flows", "5", "--max-flows-per-source", "3"];
    let edge = spawn(
        &keys,
        "edge",
        &edge_args(&keys, core_addr, &[(listen, server.to_string())], &limits),
    );
    edge.wait_tunnel_up(Duration::from_secs(10));
    let ip = |last: u8| IpAddr::from([127, 0, 0, last]);
    let mut held: Vec<TcpStream> = (0..3)
        .map(|i| open_from(ip(1), listen).unwrap_or_else(|| panic!("flow {i} from 127.0.0.1")))
        .collect();
    assert!(
        open_from(ip(1), listen).is_none(),
        "a 4th flow from one source"
    );
    // Other hosts still get in, up to the node's total.
    held.push(open_from(ip(2), listen).expect("127.0.0.2"));
    held.push(open_from(ip(3), listen).expect("127.0.0.3"));
    assert!(open_from(ip(4), listen).is_none(), "a 6th flow in all");
    let status = edge.status().unwrap();
    assert_eq!(status["flows_limited"], 2, "{status}");
    let metrics = http_get(edge.control, "/metrics").unwrap();
    assert!(
        metrics.contains("wanopt_flows_limited_total{role=\"edge\"} 2\n"),
        "{metrics}"
    );
    // One log line for both refusals (at most one per 10 s).
    let log = edge.log_text();
    assert_eq!(log.matches("refusing new flows").count(), 1, "{log}");
    assert!(
        log.contains("127.0.0.1 has 3 flows (--max-flows-per-source)"),
        "{log}"
    );
    // A flow that ends gives its place back.
    drop(held.remove(0));
    assert!(
        eventually(Duration::from_secs(10), || open_from(ip(1), listen)
            .map(|c| held.push(c))
            .is_some()),
        "the place of a closed flow was not given back"
    );
    drop(core);
}

#[test]
fn a_zero_limit_is_a_usage_error() {
    let keys = Keys::new();
    let args = {
        let mut a = core_args(&keys, free_udp(), &["127.0.0.1"]);
        a.extend(["--max-flows".to_owned(), "0".to_owned()]);
        a
    };
    let out = std::process::Command::new(BIN)
        .args(&args)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--max-flows must be at least 1"), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
}

#[test]
fn a_flow_idle_for_the_timeout_is_reset_and_a_busy_one_is_not() {
    let server = echo_server();
    let listen = free_tcp();
    let keys = Keys::new();
    let core_addr = free_udp();
    let core = spawn(&keys, "core", &core_args(&keys, core_addr, &["127.0.0.1"]));
    let edge = spawn(
        &keys,
        "edge",
        &edge_args(
            &keys,
            core_addr,
            &[(listen, server.to_string())],
            &["--flow-idle-timeout", "2s"],
        ),
    );
    edge.wait_tunnel_up(Duration::from_secs(10));
    let local = IpAddr::from([127, 0, 0, 1]);
    let mut idle = open_from(local, listen).expect("idle flow");
    let mut busy = open_from(local, listen).expect("busy flow");
    let mut back = [0u8; 4];
    for _ in 0..8 {
        thread::sleep(Duration::from_millis(500));
        busy.write_all(b"ping").unwrap();
        busy.read_exact(&mut back)
            .expect("the busy flow is carried on");
    }
    // The idle one was reset within a second of its 2 s.
    let mut buf = [0u8; 4];
    let read = idle.write_all(b"ping").and_then(|()| idle.read(&mut buf));
    assert!(
        matches!(read, Ok(0) | Err(_)),
        "an idle flow still carried bytes: {read:?}"
    );
    let status = edge.status().unwrap();
    assert_eq!(status["flow_resets"]["idle"], 1, "{status}");
    drop(core);
}
