//! Spread-fec mode end to end: an edge with two `--path`s and
//! `--path-mode spread-fec` to one core, path 1 through a relay that loses
//! 3% of what goes to the core, path 2 clean. An upload with a fixed code
//! (`--fec 10:3`) arrives byte-exact; its data went on path 1 and every
//! repair on path 2, and the core rebuilt lost datagrams from them.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use crate::common::*;

/// A TCP server that reads `len` bytes from each connection, sets `exact`
/// if they are `Pattern::new(seed)`'s, and answers one byte.
fn checking_sink(len: usize, seed: u64, exact: Arc<AtomicBool>) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut s) = conn else { return };
            let mut got = vec![0u8; len];
            if s.read_exact(&mut got).is_err() {
                continue;
            }
            let mut want = vec![0u8; len];
            Pattern::new(seed).fill(&mut want);
            exact.store(got == want, Ordering::Relaxed);
            let _ = s.write_all(b"k");
        }
    });
    addr
}

/// Whether datagram `seq` of the relay is lost: 3%, spread by a hash.
fn lost(seq: u64) -> bool {
    let mut x = seq.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    x ^= x >> 31;
    x.is_multiple_of(33)
}

fn path_field(node: &Node, number: usize, field: &str) -> u64 {
    node.status()
        .and_then(|s| s["peers"][0]["paths"]["paths"][number - 1][field].as_u64())
        .unwrap_or(0)
}

#[test]
fn repairs_go_on_the_second_path_and_rebuild_what_the_first_lost() {
    let keys = Keys::new();
    let core_addr = free_udp();
    let mut core_args = core_args(&keys, core_addr, &["127.0.0.1"]);
    core_args.extend(["--no-reduce", "--fec", "10:3"].map(String::from));
    let core = spawn(&keys, "core", &core_args);
    let delay = Duration::from_millis(5);
    // Lossy only once the tunnel is up (the handshake is not the point).
    let lossy = Arc::new(AtomicBool::new(false));
    let l1 = lossy.clone();
    let relay1 = lossy_path(core_addr, delay, move |seq, _| {
        l1.load(Ordering::Relaxed) && lost(seq)
    });
    let relay2 = lossy_path(core_addr, delay, |_, _| false);
    const LEN: usize = 4 << 20;
    let exact = Arc::new(AtomicBool::new(false));
    let server = checking_sink(LEN, 37, exact.clone());
    let listen = free_tcp();
    let edge = two_path_edge(
        &keys,
        [relay1, relay2],
        &[(listen, server.to_string())],
        &["--fec", "10:3", "--path-mode", "spread-fec"],
    );
    edge.wait_tunnel_up(Duration::from_secs(20));
    let ready = |node: &Node| {
        node.status().is_some_and(|s| {
            let paths = &s["peers"][0]["paths"];
            paths["mode"] == "spread-fec"
                && paths["paths"][0]["data"] == true
                && paths["paths"][1]["repairs"] == true
        })
    };
    assert!(
        eventually(Duration::from_secs(10), || ready(&edge) && ready(&core)),
        "data on path 1, repairs on path 2: edge {:?} core {:?}",
        edge.status(),
        core.status()
    );
    lossy.store(true, Ordering::Relaxed);
    let (repairs1, repairs2) = (
        path_field(&edge, 1, "repair_bytes"),
        path_field(&edge, 2, "repair_bytes"),
    );

    let mut client = TcpStream::connect(listen).unwrap();
    client
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let mut data = vec![0u8; LEN];
    Pattern::new(37).fill(&mut data);
    client.write_all(&data).unwrap();
    let mut answer = [0u8; 1];
    client.read_exact(&mut answer).unwrap();
    assert!(exact.load(Ordering::Relaxed), "the upload arrived exact");

    let sent2 = path_field(&edge, 2, "repair_bytes") - repairs2;
    assert_eq!(path_field(&edge, 1, "repair_bytes"), repairs1);
    // A 10:3 code: about 3 repair bytes for 10 of data.
    assert!(
        sent2 > LEN as u64 / 5,
        "repairs on path 2: {sent2} bytes for {LEN}"
    );
    let fec = core.status().unwrap()["peers"][0]["fec"].clone();
    eprintln!("repairs on path 2: {sent2} bytes; core's FEC: {fec}");
    assert!(
        fec["recovered"].as_u64().unwrap_or(0) > 0,
        "the core rebuilt datagrams from path 2's repairs: {fec}"
    );
}
