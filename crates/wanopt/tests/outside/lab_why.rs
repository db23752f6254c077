//! Why each flow runs at its rate, on a real lab (50 Mbit/s, 40 ms, 1%
//! loss; the edge compresses with LZMA2): limits provoked on purpose are
//! named by `wanopt flows --why` on the node where they bind.
//! - a client that stops reading a download: the edge names the reader,
//!   the core the stream's window (its peer's receiver holds it back);
//! - a server that sends 1.6 Mbit/s: the core names the sender;
//! - a bulk download over the lossy link: the core names the tunnel's
//!   window, with the path's loss;
//! - a client that uploads compressible data as fast as it can: the edge
//!   names the codec's CPU.
//!
//! Needs root (network namespaces); the lab's prefix is `wwy-`. Part of
//! the scenario tier (a CPU-bound limit must not share the CPU). The
//! servers send fresh random bytes: data reduction cannot shorten them.

use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use wanopt_lab::topology::{Lab, Node};

const PREFIX: &str = "wwy-";
const SERVER: &str = "198.18.3.2";

/// The lab's servers and clients, one program: `serve` (9001 sends random
/// bytes as fast as taken, 9002 sends 20 KB every 100 ms, 9003 discards),
/// `stall PORT` (connects and never reads), `read PORT` (reads all),
/// `upload` (sends text of 16 letters, unique and compressible, to 9003).
const PROGRAM: &str = r#"
import os, random, socket, sys, threading, time
mode, end = sys.argv[1], time.time() + float(sys.argv[2])
def serve(port, handle):
    s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("0.0.0.0", port)); s.listen(16)
    while True:
        c, _ = s.accept()
        threading.Thread(target=handle, args=(c,), daemon=True).start()
def fast(c):
    try:
        while True: c.sendall(os.urandom(1 << 18))
    except OSError: pass
def slow(c):
    try:
        while True: c.sendall(os.urandom(20000)); time.sleep(0.1)
    except OSError: pass
def sink(c):
    try:
        while c.recv(1 << 16): pass
    except OSError: pass
if mode == "serve":
    for port, handle in ((9001, fast), (9002, slow), (9003, sink)):
        threading.Thread(target=serve, args=(port, handle), daemon=True).start()
    time.sleep(max(0, end - time.time()))
else:
    port = int(sys.argv[3]) if mode == "read" else {"stall": 9001, "upload": 9003}[mode]
    c = socket.create_connection((SERVER_ADDR if mode == "read" else sys.argv[3], port))
    letters = bytes(range(97, 113)) * 16
    table = bytes(letters[i] for i in range(256))
    while time.time() < end:
        if mode == "stall": time.sleep(0.2)
        elif mode == "read": c.recv(1 << 16)
        else: c.sendall(random.randbytes(1 << 20).translate(table))
"#;

fn wanopt(args: &[&str]) -> std::process::Output {
    crate::common::lab_wanopt(PREFIX, args)
}

/// Runs the program in `node`'s namespace in the background (`ip netns
/// exec` becomes the program: killing the child stops it).
fn start(program: &std::path::Path, node: Node, args: &[&str]) -> Child {
    Lab::new(PREFIX)
        .command(node, "python3")
        .arg(program)
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

/// The limit `node` (edge or core) names for its flow to `port`, and why,
/// once it names `wanted` (or what it named last, after 20 s).
fn named(node: &str, control: &str, port: u16, wanted: &str) -> (String, String) {
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut last = (String::new(), String::new());
    while Instant::now() < deadline {
        let out = wanopt(&[
            "lab",
            "exec",
            node,
            "--",
            crate::common::BIN,
            "flows",
            "--json",
            "--control",
            control,
        ]);
        let flows: serde_json::Value =
            serde_json::from_slice(&out.stdout).unwrap_or(serde_json::Value::Null);
        let to_port = format!(":{port}");
        if let Some(flow) = flows["flows"].as_array().and_then(|f| {
            f.iter().find(|f| {
                f["destination"]
                    .as_str()
                    .is_some_and(|d| d.ends_with(&to_port))
            })
        }) {
            last = (
                flow["limit"].as_str().unwrap_or_default().to_owned(),
                flow["why"].as_str().unwrap_or_default().to_owned(),
            );
            if last.0 == wanted {
                break;
            }
        }
        std::thread::sleep(Duration::from_secs(1));
    }
    last
}

#[test]
#[ignore = "the scenario tier: scripts/test-scenarios runs it, and CI"]
fn limits_provoked_on_a_lab_are_named_on_the_node_where_they_bind() {
    crate::common::require_root();
    let dir = tempfile::tempdir().unwrap();
    let program = dir.path().join("why.py");
    std::fs::write(
        &program,
        PROGRAM.replace("SERVER_ADDR", &format!("{SERVER:?}")),
    )
    .unwrap();
    let up = wanopt(&[
        "lab",
        "up",
        "--rtt",
        "40ms",
        "--rate",
        "50mbit",
        "--queue",
        "1bdp",
        "--loss",
        "1%",
        "--optimize",
        "--edge-arg=--compression=lzma",
    ]);
    assert!(up.status.success(), "{up:?}");
    let mut server = start(&program, Node::Server, &["serve", "200"]);
    std::thread::sleep(Duration::from_secs(1));
    let mut seen = Vec::new();
    for (client, node, control, port, wanted) in [
        (
            vec!["stall", "25", SERVER],
            "edge",
            "127.0.0.1:7001",
            9001,
            "reader",
        ),
        (
            vec!["stall", "25", SERVER],
            "core",
            "127.0.0.1:7002",
            9001,
            "stream_window",
        ),
        (
            vec!["read", "25", "9002"],
            "core",
            "127.0.0.1:7002",
            9002,
            "sender",
        ),
        (
            vec!["read", "25", "9001"],
            "core",
            "127.0.0.1:7002",
            9001,
            "tunnel",
        ),
        (
            vec!["upload", "25", SERVER],
            "edge",
            "127.0.0.1:7001",
            9003,
            "codec",
        ),
    ] {
        let mut child = start(&program, Node::Client, &client);
        let (limit, why) = named(node, control, port, wanted);
        let _ = child.kill();
        let _ = child.wait();
        seen.push((client[0], node, wanted, limit, why));
        // The flow ends before the next begins (the programs stop with
        // their connection's end).
        std::thread::sleep(Duration::from_secs(2));
    }
    let _ = server.kill();
    let _ = server.wait();
    let _ = wanopt(&["lab", "down"]);
    for (case, node, wanted, limit, why) in &seen {
        assert_eq!(
            limit, wanted,
            "{case}: the {node} named {limit:?} ({why}); all: {seen:#?}"
        );
    }
    let tunnel = &seen[3].4;
    assert!(tunnel.contains("loss"), "{tunnel}");
}
