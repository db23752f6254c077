//! Traffic classes end to end: an edge with two `--path`s in duplicate
//! mode and `--class` rules. A UDP flow whose datagrams carry DSCP EF is
//! of the real-time `voice` class and duplicated both ways; a UDP flow beside it
//! without the DSCP matches no class and costs the second path nothing; a
//! TCP flow of a `priority=low` class is shown with it on both nodes.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::thread;
use std::time::Duration;

use crate::common::*;

/// A TCP server that sends 1 MB to each connection.
fn tcp_source() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut s) = conn else { return };
            let _ = s.write_all(&vec![7u8; 1 << 20]);
        }
    });
    addr
}

/// Sends `count` 200-byte datagrams (with IP TOS `tos`) to `listen`, one
/// per 2 ms; how many were echoed.
fn flow(listen: SocketAddr, tos: u32, count: usize) -> usize {
    let socket = UdpSocket::bind("127.0.0.1:0").unwrap();
    nix::sys::socket::setsockopt(&socket, nix::sys::socket::sockopt::Ipv4Tos, &(tos as i32))
        .unwrap();
    socket.connect(listen).unwrap();
    socket
        .set_read_timeout(Some(Duration::from_millis(500)))
        .unwrap();
    let mut echoed = 0;
    let mut buf = [0u8; 512];
    for i in 0..count {
        socket.send(&[i as u8; 200]).unwrap();
        thread::sleep(Duration::from_millis(2));
        while let Ok(n) = {
            socket.set_nonblocking(true).unwrap();
            socket.recv(&mut buf)
        } {
            echoed += usize::from(n == 200);
        }
        socket.set_nonblocking(false).unwrap();
    }
    while let Ok(n) = socket.recv(&mut buf) {
        echoed += usize::from(n == 200);
    }
    echoed
}

/// Both paths' `copy_bytes` in a node's status.
fn copies(node: &Node) -> u64 {
    let status = node.status().unwrap_or_default();
    let paths = &status["peers"][0]["paths"]["paths"];
    (0..2)
        .map(|i| paths[i]["copy_bytes"].as_u64().unwrap_or(0))
        .sum()
}

/// The flows of a node's `/flows` whose services include `service`.
fn flows_with(node: &Node, service: &str) -> Vec<serde_json::Value> {
    let body = http_get(node.control, "/flows").unwrap_or_default();
    let flows: serde_json::Value = serde_json::from_str(&body).unwrap_or_default();
    flows["flows"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .into_iter()
        .filter(|f| {
            f["services"]
                .as_array()
                .is_some_and(|s| s.iter().any(|s| s == service))
        })
        .collect()
}

#[test]
fn a_realtime_class_by_dscp_is_duplicated_and_a_flow_of_no_class_is_not() {
    let keys = Keys::new();
    let core_addr = free_udp();
    let mut core_args = core_args(&keys, core_addr, &["127.0.0.1"]);
    core_args
        .extend(["--no-reduce", "--fec", "off", "--allow-udp", "127.0.0.1/32"].map(String::from));
    let core = spawn(&keys, "core", &core_args);
    let delay = Duration::from_millis(2);
    let relay1 = lossy_path(core_addr, delay, |_, _| false);
    let relay2 = lossy_path(core_addr, delay, |_, _| false);
    let echo = udp_echo();
    let server = tcp_source();
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
            "--class",
            "name=voice,udp,dscp=ef,realtime,priority=high",
            "--class",
            &format!("name=bulk,tcp,dst={server},priority=low"),
        ],
    );
    edge.wait_tunnel_up(Duration::from_secs(30));
    assert!(
        eventually(Duration::from_secs(10), || edge
            .status()
            .is_some_and(|s| s["peers"][0]["paths"]["mode"] == "duplicate")),
        "duplicate mode: {:?}",
        edge.status()
    );

    // Best effort (DSCP 0): no class, one path.
    let (edge_before, core_before) = (copies(&edge), copies(&core));
    let echoed = flow(listen_udp, 0, 500);
    assert!(echoed > 450, "{echoed} of 500 echoed");
    let (edge_plain, core_plain) = (copies(&edge) - edge_before, copies(&core) - core_before);
    eprintln!("flow of no class: {echoed} echoed, copies edge {edge_plain} B, core {core_plain} B");
    assert!(
        edge_plain < 5_000 && core_plain < 5_000,
        "a flow of no class was duplicated: edge {edge_plain} B, core {core_plain} B"
    );
    let plain = flows_with(&edge, "udp");
    assert!(
        plain
            .iter()
            .any(|f| f["class"].is_null() && !f["services"].to_string().contains("realtime")),
        "{plain:?}"
    );

    // EF (TOS 0xb8): the voice class, copied both ways.
    let echoed = flow(listen_udp, 0xb8, 500);
    assert!(echoed > 450, "{echoed} of 500 echoed");
    let (edge_voice, core_voice) = (
        copies(&edge) - edge_before - edge_plain,
        copies(&core) - core_before - core_plain,
    );
    eprintln!("voice: {echoed} echoed, copies edge {edge_voice} B, core {core_voice} B");
    assert!(edge_voice >= 450 * 200, "edge copied {edge_voice} B");
    assert!(core_voice >= 450 * 200, "core copied {core_voice} B");
    for node in [&edge, &core] {
        let voice = flows_with(node, "realtime");
        assert!(
            voice
                .iter()
                .any(|f| f["services"].to_string().contains("priority-high")),
            "{voice:?}"
        );
    }
    assert!(
        flows_with(&edge, "realtime")
            .iter()
            .any(|f| f["class"] == "voice"),
        "{:?}",
        flows_with(&edge, "realtime")
    );

    // A TCP flow of the low class: shown on both nodes, arrives whole, and
    // is not duplicated.
    let before = copies(&core);
    let mut client = TcpStream::connect(listen_tcp).unwrap();
    client
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let mut first = [0u8; 1];
    client.read_exact(&mut first).unwrap();
    for node in [&edge, &core] {
        assert!(
            eventually(Duration::from_secs(5), || !flows_with(node, "priority-low")
                .is_empty()),
            "no priority-low flow"
        );
    }
    assert_eq!(flows_with(&edge, "priority-low")[0]["class"], "bulk");
    let mut rest = Vec::new();
    client.read_to_end(&mut rest).unwrap();
    assert_eq!(rest.len() + 1, 1 << 20);
    assert!(rest.iter().all(|b| *b == 7));
    assert!(
        copies(&core) - before < 20_000,
        "the TCP flow was duplicated"
    );
}
