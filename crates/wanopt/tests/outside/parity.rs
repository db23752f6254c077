//! Parity at the end of transfers, through the lab's lossy emulator: the
//! waas-3g files fetched over HTTP through edge and core (3% random loss
//! each way) arrive byte-exact, the core sends parity at the end of each
//! response, and the edge rebuilds lost datagrams from it and hands them to
//! its QUIC stack (its `/status` counts them). The whole path: the core's
//! socket, the emulator, the edge's socket, quinn. Needs root (network
//! namespaces) and python3 (the HTTP client in `client`); the lab's prefix
//! is `wpa-`.

use std::path::Path;
use std::process::{Child, Command, Output};
use std::time::{Duration, Instant};

use crate::common::BIN;

const PREFIX: &str = "wpa-";

fn wanopt(args: &[&str]) -> Output {
    crate::common::lab_wanopt(PREFIX, args)
}

/// Runs `args` inside lab node `node`.
fn in_node(node: &str, args: &[&str]) -> Output {
    Command::new("ip")
        .args(["netns", "exec", &format!("{PREFIX}{node}")])
        .args(args)
        .output()
        .unwrap()
}

/// The lab with the file server; both gone when dropped.
struct Lab {
    server: Child,
}

impl Drop for Lab {
    fn drop(&mut self) {
        let _ = self.server.kill();
        let _ = self.server.wait();
        let _ = wanopt(&["lab", "down"]);
    }
}

/// The `duplication` object of the node's tunnel over UDP, from
/// `/status`. The peer list may also hold a tunnel over TCP: at 3% loss
/// the edge probes over TCP now and then, to tell a policer from a lossy
/// path, and such a tunnel has no datagram layer (`duplication` null).
fn duplication(node: &str, control: &str) -> serde_json::Value {
    let out = in_node(node, &[BIN, "status", "--control", control, "--json"]);
    assert!(out.status.success(), "{out:?}");
    let status: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let peers = status["peers"].as_array().cloned().unwrap_or_default();
    peers
        .iter()
        .find(|p| p["state"] == "up" && !p["duplication"].is_null())
        .map(|p| p["duplication"].clone())
        .unwrap_or_else(|| panic!("{node}: no tunnel over UDP up in /status peers: {peers:?}"))
}

#[test]
fn lost_datagrams_at_the_end_of_transfers_are_rebuilt_from_parity() {
    crate::common::require_root();
    let files = tempfile::tempdir().unwrap();
    let out = wanopt(&["lab", "waas-files", "--out", files.path().to_str().unwrap()]);
    assert!(out.status.success(), "{out:?}");

    let _ = wanopt(&["lab", "down"]);
    let out = wanopt(&[
        "lab",
        "up",
        "--rtt",
        "40ms",
        "--rate",
        "20mbit",
        "--loss",
        "3%",
        "--seed",
        "7",
        "--optimize",
        // Tails on whatever the loss monitor has seen so far.
        "--node-arg=--duplication=tails",
    ]);
    assert!(out.status.success(), "{out:?}");
    let addr = wanopt(&["lab", "addr", "server"]);
    let server_addr = String::from_utf8_lossy(&addr.stdout).trim().to_string();
    let ready = files.path().join("server.ready");
    let server = Command::new("ip")
        .args(["netns", "exec", &format!("{PREFIX}server"), BIN])
        .args(["lab", "waas-server"])
        .args(["--http", &format!("{server_addr}:80")])
        .args(["--file", &format!("{server_addr}:21")])
        .arg("--ready")
        .arg(&ready)
        .spawn()
        .unwrap();
    let _lab = Lab { server };
    let deadline = Instant::now() + Duration::from_secs(30);
    while !ready.exists() {
        assert!(Instant::now() < deadline, "the file server did not start");
        std::thread::sleep(Duration::from_millis(100));
    }

    // Every office file once (cold: nothing of it in the byte caches).
    let mut names: Vec<String> = std::fs::read_dir(files.path())
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| [".doc", ".xls", ".ppt"].iter().any(|x| n.ends_with(x)))
        .collect();
    names.sort();
    assert!(names.len() >= 12, "{names:?}");
    let fetch = "import sys, urllib.request; \
                 sys.stdout.buffer.write(urllib.request.urlopen(sys.argv[1], timeout=60).read())";
    for name in &names {
        let url = format!("http://{server_addr}/{name}");
        let got = in_node("client", &["python3", "-c", fetch, &url]);
        assert!(got.status.success(), "{name}: {got:?}");
        let want = std::fs::read(Path::new(files.path()).join(name)).unwrap();
        assert!(
            got.stdout == want,
            "{name}: {} bytes fetched, {} in the file, differing",
            got.stdout.len(),
            want.len()
        );
    }

    let core = duplication("core", "127.0.0.1:7002");
    let edge = duplication("edge", "127.0.0.1:7001");
    let count = |v: &serde_json::Value, key: &str| v[key].as_u64().unwrap_or(0);
    assert!(
        count(&core, "parity_groups") >= names.len() as u64 / 2,
        "the core sent parity at the ends of responses: {core}"
    );
    assert!(
        count(&edge, "rebuilt") > 0,
        "the edge rebuilt nothing from the core's parity: {edge} (core: {core})"
    );
    // Every stream's end is acknowledged soon after its flow: no node
    // keeps expecting one (which would keep its tails on for nothing).
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let core = duplication("core", "127.0.0.1:7002");
        let edge = duplication("edge", "127.0.0.1:7001");
        if count(&core, "ending_streams") == 0 && count(&edge, "ending_streams") == 0 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "streams still ending 10 s after the last fetch: core {core}, edge {edge}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}
