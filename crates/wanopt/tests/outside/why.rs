//! Why each flow runs at its rate: limits provoked on purpose are named on
//! the node where they bind (`/flows` `limit` and `why`, `wanopt flows
//! --why`, `wanopt flow ID`): a client that stops reading (the edge: the
//! reader; the core: the stream's window), a server that sends slowly (the
//! core: the sender; the edge: its peer), a client that uploads slowly
//! (the edge: the sender), a tunnel held by a narrow path (the core: the
//! tunnel's window; the edge: its peer).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::process::Command;
use std::time::Duration;

use crate::common::*;

/// A server that sends to each client as fast as it takes (`None`) or
/// `chunk` bytes every 100 ms, and discards what it receives.
fn source_server(chunk: Option<usize>) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(stream) = stream else { continue };
            let mut reader = stream.try_clone().unwrap();
            std::thread::spawn(move || {
                let mut sink = [0u8; 65536];
                while reader.read(&mut sink).is_ok_and(|n| n > 0) {}
            });
            let mut writer = stream;
            std::thread::spawn(move || {
                let block = vec![0x5au8; chunk.unwrap_or(256 * 1024)];
                loop {
                    if writer.write_all(&block).is_err() {
                        return;
                    }
                    if chunk.is_some() {
                        std::thread::sleep(Duration::from_millis(100));
                    }
                }
            });
        }
    });
    addr
}

/// The limit each node names for its one live flow, once both name one
/// `edge_wants` and `core_wants` (or whatever they name after 10 s).
fn limits(pair: &Pair, edge_wants: &str, core_wants: &str) -> (String, String) {
    let limit = |node: &Node| -> String {
        http_get(node.control, "/flows")
            .and_then(|b| serde_json::from_str::<serde_json::Value>(&b).ok())
            .and_then(|f| f["flows"][0]["limit"].as_str().map(str::to_owned))
            .unwrap_or_default()
    };
    let mut seen = (String::new(), String::new());
    eventually(Duration::from_secs(10), || {
        seen = (limit(&pair.edge), limit(&pair.core));
        seen.0 == edge_wants && seen.1 == core_wants
    });
    seen
}

/// A pair without data reduction, the edge forwarding `listen` to `server`
/// and dialing the core through what `path` puts in front of it.
fn pair_to(
    server: SocketAddr,
    listen: SocketAddr,
    path: impl FnOnce(SocketAddr) -> SocketAddr,
) -> Pair {
    let keys = Keys::new();
    let core_addr = free_udp();
    let dialed = path(core_addr);
    let core = spawn(
        &keys,
        "core",
        &core_args(&keys, core_addr, &["127.0.0.1"])
            .into_iter()
            .chain(["--no-reduce".into()])
            .collect::<Vec<_>>(),
    );
    let edge = spawn(
        &keys,
        "edge",
        &edge_args(
            &keys,
            dialed,
            &[(listen, server.to_string())],
            &["--no-reduce"],
        ),
    );
    edge.wait_tunnel_up(Duration::from_secs(10));
    Pair {
        keys,
        core,
        edge,
        core_addr,
    }
}

#[test]
fn a_client_that_stops_reading_is_named_on_the_edge_and_the_stream_window_on_the_core() {
    let listen = free_tcp();
    let pair = pair_to(source_server(None), listen, |core| core);
    let _client = TcpStream::connect(listen).unwrap();
    let seen = limits(&pair, "reader", "stream_window");
    assert_eq!(seen, ("reader".into(), "stream_window".into()));
    // The one-line view and the whole flow say it too.
    let out = Command::new(BIN)
        .args([
            "flows",
            "--why",
            "--control",
            &pair.edge.control.to_string(),
        ])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("reader") && text.contains("the client reads slowly"),
        "{text}"
    );
    let flows: serde_json::Value =
        serde_json::from_str(&http_get(pair.edge.control, "/flows").unwrap()).unwrap();
    let id = flows["flows"][0]["id"].as_u64().unwrap().to_string();
    // The socket's counts, once the sampler has read them.
    let flow = || {
        let out = Command::new(BIN)
            .args(["flow", &id, "--control", &pair.edge.control.to_string()])
            .output()
            .unwrap();
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
        )
    };
    let mut text = String::new();
    let shown = eventually(Duration::from_secs(5), || {
        let (ok, out) = flow();
        text = out;
        ok && text.contains("to client") && text.contains("lan socket")
    });
    assert!(shown, "{text}");
    let out = Command::new(BIN)
        .args([
            "flow",
            "999999",
            "--control",
            &pair.edge.control.to_string(),
        ])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("no live flow 999999"));
}

#[test]
fn a_server_that_sends_slowly_is_named_on_the_core_and_the_edge_waits_on_its_peer() {
    let listen = free_tcp();
    // 20 KB every 100 ms: 1.6 Mbit/s, read as it comes.
    let pair = pair_to(source_server(Some(20_000)), listen, |core| core);
    let mut client = TcpStream::connect(listen).unwrap();
    std::thread::spawn(move || {
        let mut buf = [0u8; 65536];
        while client.read(&mut buf).is_ok_and(|n| n > 0) {}
    });
    let seen = limits(&pair, "peer", "sender");
    assert_eq!(seen, ("peer".into(), "sender".into()));
    let flows = http_get(pair.core.control, "/flows").unwrap();
    assert!(flows.contains("the server sends"), "{flows}");
}

#[test]
fn a_client_that_uploads_slowly_is_named_on_the_edge() {
    let listen = free_tcp();
    let pair = pair_to(echo_server(), listen, |core| core);
    let mut client = TcpStream::connect(listen).unwrap();
    let mut reader = client.try_clone().unwrap();
    std::thread::spawn(move || {
        let mut buf = [0u8; 65536];
        while reader.read(&mut buf).is_ok_and(|n| n > 0) {}
    });
    std::thread::spawn(move || loop {
        if client.write_all(&[1u8; 10_000]).is_err() {
            return;
        }
        std::thread::sleep(Duration::from_millis(100));
    });
    let edge = |_: &Node| {
        http_get(pair.edge.control, "/flows")
            .and_then(|b| serde_json::from_str::<serde_json::Value>(&b).ok())
            .and_then(|f| f["flows"][0]["why"].as_str().map(str::to_owned))
            .unwrap_or_default()
    };
    assert!(
        eventually(Duration::from_secs(10), || edge(&pair.edge)
            .starts_with("the client sends")),
        "{}",
        edge(&pair.edge)
    );
}

#[test]
fn a_narrow_path_is_named_as_the_tunnel_on_the_sending_core() {
    let listen = free_tcp();
    // 4 Mbit/s with a 10 ms delay each way.
    let pair = pair_to(source_server(None), listen, |core| {
        bottleneck_path(core, Duration::from_millis(10), 500_000, 60_000)
    });
    let mut client = TcpStream::connect(listen).unwrap();
    std::thread::spawn(move || {
        let mut buf = [0u8; 65536];
        while client.read(&mut buf).is_ok_and(|n| n > 0) {}
    });
    let seen = limits(&pair, "peer", "tunnel");
    assert_eq!(seen, ("peer".into(), "tunnel".into()));
    let flows = http_get(pair.core.control, "/flows").unwrap();
    assert!(
        flows.contains("the tunnel's congestion window and pacing"),
        "{flows}"
    );
}
