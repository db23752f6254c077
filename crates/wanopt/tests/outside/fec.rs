//! Continuous FEC end to end: an upload through a relay that loses 3% of
//! the datagrams edge -> core at random arrives byte-exact, the edge sends
//! repair datagrams (counted by the relay, an observer outside both
//! nodes), and the core rebuilds lost datagrams from them (its `/status`
//! counts them, and the edge's shows what the core reported). With
//! `--fec off` the relay sees no FEC datagram at all.

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc};
use std::thread;
use std::time::Duration;

use sha2::{Digest, Sha256};

use crate::common::*;

/// A server that hashes what one connection sends; its address and the
/// (hash, length) when the connection ends.
fn hash_sink() -> (SocketAddr, mpsc::Receiver<([u8; 32], u64)>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        let mut hasher = Sha256::new();
        let mut buf = vec![0u8; 1 << 16];
        let mut n = 0u64;
        while let Ok(k) = s.read(&mut buf) {
            if k == 0 {
                break;
            }
            hasher.update(&buf[..k]);
            n += k as u64;
        }
        let _ = tx.send((hasher.finalize().into(), n));
    });
    (addr, rx)
}

/// Datagrams edge -> core the relay saw, by their first byte: FEC sources
/// (0x22) and repairs (0x23).
#[derive(Default)]
struct Seen {
    sources: AtomicU64,
    repairs: AtomicU64,
}

/// Uploads `len` bytes through a relay with 15 ms each way that drops 3%
/// of the datagrams edge -> core (a fixed pseudo-random pattern), the edge
/// running `edge_extra`. Returns what the relay saw and both nodes'
/// `fec` status objects.
fn upload(len: u64, edge_extra: &[&str]) -> (Arc<Seen>, serde_json::Value, serde_json::Value) {
    upload_through(len, edge_extra, true)
}

/// [`upload`], through a relay that drops nothing unless `lossy`.
fn upload_through(
    len: u64,
    edge_extra: &[&str],
    lossy: bool,
) -> (Arc<Seen>, serde_json::Value, serde_json::Value) {
    let (server, result) = hash_sink();
    let keys = Keys::new();
    let core_addr = free_udp();
    let core = spawn(
        &keys,
        "core",
        &core_args(&keys, core_addr, &["127.0.0.1"])
            .into_iter()
            .chain(["--no-reduce".to_owned()])
            .collect::<Vec<_>>(),
    );
    let seen = Arc::new(Seen::default());
    let counted = seen.clone();
    let path = lossy_path(core_addr, Duration::from_millis(15), move |seq, d| {
        match d.first() {
            Some(0x22) => counted.sources.fetch_add(1, Ordering::Relaxed),
            Some(0x23) => counted.repairs.fetch_add(1, Ordering::Relaxed),
            _ => 0,
        };
        // 3% at random (a multiplicative hash of the sequence number).
        lossy && seq.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 54 < 31
    });
    let listen = free_tcp();
    let mut extra = vec!["--no-reduce"];
    extra.extend_from_slice(edge_extra);
    let edge = spawn(
        &keys,
        "edge",
        &edge_args(&keys, path, &[(listen, server.to_string())], &extra),
    );
    edge.wait_tunnel_up(Duration::from_secs(10));
    let mut client = TcpStream::connect(listen).unwrap();
    let mut pattern = Pattern::new(33);
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 16];
    let mut sent = 0u64;
    while sent < len {
        pattern.fill(&mut buf);
        client.write_all(&buf).unwrap();
        hasher.update(&buf);
        sent += buf.len() as u64;
    }
    client.shutdown(Shutdown::Write).unwrap();
    let expected: [u8; 32] = hasher.finalize().into();
    let (got, n) = result.recv_timeout(Duration::from_secs(120)).unwrap();
    assert_eq!((n, got), (len, expected), "the upload arrived exact");
    // Reports go every 20 ms; the status is sampled every 100 ms.
    thread::sleep(Duration::from_millis(300));
    let edge_fec = edge.status().unwrap()["peers"][0]["fec"].clone();
    let core_fec = core.status().unwrap()["peers"][0]["fec"].clone();
    (seen, edge_fec, core_fec)
}

#[test]
fn random_loss_on_an_upload_is_rebuilt_from_repairs_and_every_byte_arrives() {
    let (seen, edge, core) = upload(24 << 20, &[]);
    let sources = seen.sources.load(Ordering::Relaxed);
    let repairs = seen.repairs.load(Ordering::Relaxed);
    assert!(sources > 5_000, "the edge sent FEC sources: {sources}");
    assert!(repairs > 50, "and repairs: {repairs}");
    // Auto chose a code from the loss: repairs of a few percent, within
    // 2 x loss + 1%.
    let ratio = repairs as f64 / sources as f64;
    assert!(ratio < 0.07, "{repairs} repairs for {sources} sources");
    assert_eq!(edge["mode"], "auto", "{edge}");
    let recovered = core["recovered"].as_u64().unwrap();
    let lost = core["lost"].as_u64().unwrap();
    assert!(lost > 100, "the core counted the loss: {core}");
    // A bulk upload gets the lean code (about 0.6 x loss): repairs stand
    // in for part of what is lost, QUIC resends the rest.
    assert!(
        recovered > lost / 20 && recovered <= lost,
        "the core rebuilt part of it: {recovered} of {lost}: {core}"
    );
    let loss = core["received_loss_percent"].as_f64().unwrap();
    assert!((1.5..5.0).contains(&loss), "about 3% measured: {core}");
    // The edge heard of it from the core's reports.
    assert!(edge["peer_recovered"].as_u64().unwrap() > 0, "{edge}");
    assert!(edge["repairs_sent"].as_u64().unwrap() >= repairs, "{edge}");
}

#[test]
fn on_a_clean_path_auto_wraps_nothing() {
    // Nothing lost either way: no datagram is numbered (the numbering
    // starts once either direction loses one) and none repaired.
    let (seen, edge, core) = upload_through(8 << 20, &[], false);
    assert_eq!(seen.sources.load(Ordering::Relaxed), 0, "{edge}");
    assert_eq!(seen.repairs.load(Ordering::Relaxed), 0);
    assert_eq!(edge["mode"], "auto");
    assert_eq!(core["received"], 0, "{core}");
}

#[test]
fn with_fec_off_no_datagram_is_wrapped() {
    let (seen, edge, core) = upload(4 << 20, &["--fec", "off"]);
    assert_eq!(seen.sources.load(Ordering::Relaxed), 0);
    assert_eq!(seen.repairs.load(Ordering::Relaxed), 0);
    assert_eq!(edge["mode"], "off");
    assert_eq!(edge["sources_sent"], 0);
    assert_eq!(core["received"], 0);
}

/// The lab's prefix for the tests below (root: network namespaces).
const PREFIX: &str = "wfe-";

/// Runs `args` inside lab node `node`.
fn in_node(node: &str, args: &[&str]) -> std::process::Output {
    std::process::Command::new("ip")
        .args(["netns", "exec", &format!("{PREFIX}{node}")])
        .args(args)
        .output()
        .unwrap()
}

/// Brings the lab up with `link` and the nodes, downloads `mb` MB of
/// random bytes from the server through them (a Python server and
/// client), and returns the `fec` objects of the core and the edge and
/// the share of its packets the core's QUIC declared lost.
fn lab_download(link: &[&str], mb: u32) -> (serde_json::Value, serde_json::Value, f64) {
    let _ = lab_wanopt(PREFIX, &["lab", "down"]);
    let mut args = vec!["lab", "up", "--optimize", "--no-reduce", "--seed", "3"];
    args.extend_from_slice(link);
    let out = lab_wanopt(PREFIX, &args);
    assert!(out.status.success(), "{out:?}");
    let addr = lab_wanopt(PREFIX, &["lab", "addr", "server"]);
    let server = String::from_utf8_lossy(&addr.stdout).trim().to_string();
    let serve = format!(
        "import os, socket\n\
         s = socket.create_server(('{server}', 9000))\n\
         c, _ = s.accept()\n\
         for _ in range({mb}): c.sendall(os.urandom(1 << 20))\n\
         c.close()"
    );
    let mut server_process = std::process::Command::new("ip")
        .args([
            "netns",
            "exec",
            &format!("{PREFIX}server"),
            "python3",
            "-c",
            &serve,
        ])
        .spawn()
        .unwrap();
    thread::sleep(Duration::from_millis(500));
    let fetch = format!(
        "import socket\n\
         c = socket.create_connection(('{server}', 9000), timeout=60)\n\
         n = 0\n\
         while True:\n    b = c.recv(1 << 16)\n    n += len(b)\n    if not b: break\n\
         print(n)"
    );
    let got = in_node("client", &["python3", "-c", &fetch]);
    let _ = server_process.kill();
    let _ = server_process.wait();
    assert!(got.status.success(), "{got:?}");
    let n: u64 = String::from_utf8_lossy(&got.stdout).trim().parse().unwrap();
    assert_eq!(n, u64::from(mb) << 20);
    thread::sleep(Duration::from_millis(300));
    let status = |node: &str, control: &str| -> serde_json::Value {
        let out = in_node(node, &[BIN, "status", "--control", control, "--json"]);
        assert!(out.status.success(), "{out:?}");
        serde_json::from_slice(&out.stdout).unwrap()
    };
    let core = status("core", "127.0.0.1:7002");
    let edge = status("edge", "127.0.0.1:7001");
    let _ = lab_wanopt(PREFIX, &["lab", "down"]);
    let lost = core["peers"][0]["lost_packets"].as_f64().unwrap_or(0.0);
    let sent = core["peers"][0]["sent_packets"].as_f64().unwrap_or(1.0);
    (
        core["peers"][0]["fec"].clone(),
        edge["peers"][0]["fec"].clone(),
        lost / sent.max(1.0),
    )
}

#[test]
fn random_loss_on_a_lab_link_turns_fec_on_and_the_edge_rebuilds() {
    crate::common::require_root();
    // 3% random loss each way: FEC on at the core, which sends the
    // download, and the edge rebuilds part of what is lost (the lean code
    // of a bulk transfer); every byte arrives (checked by the download).
    let (core, edge, quic_loss) =
        lab_download(&["--rtt", "40ms", "--rate", "40mbit", "--loss", "3%"], 30);
    assert!(core["repairs_sent"].as_u64().unwrap() > 100, "{core}");
    let (lost, recovered) = (
        edge["lost"].as_u64().unwrap(),
        edge["recovered"].as_u64().unwrap(),
    );
    assert!(lost > 200 && recovered > lost / 10, "{edge}");
    // What QUIC still had to resend is less than what the path lost.
    let measured = edge["received_loss_percent"].as_f64().unwrap() / 100.0;
    assert!(
        quic_loss < measured,
        "QUIC lost {quic_loss}, the path {measured}: {edge}"
    );
    // The other direction carries the edge's acknowledgements, whose loss
    // QUIC never sees: numbered while FEC is off, the core counted it and
    // its reports switched the edge's FEC on, so that a request the edge
    // sends next is protected at once.
    let (acks, acks_lost) = (
        core["received"].as_u64().unwrap(),
        core["lost"].as_u64().unwrap(),
    );
    assert!(acks > 1_000 && acks_lost > acks / 100, "{core}");
    assert!(edge["code"].is_string(), "the edge's FEC is on: {edge}");
}
