//! `lab up --sites 3 --optimize`: three branch sites, each a client and
//! an edge behind its own emulated link, into one core and server. Each
//! site's client sends a transfer to an echo server in `server` and gets
//! it back byte-exact; the server sees every connection come from the
//! core (so through the tunnel, not routed), the core's log shows a
//! tunnel from each site's edge on its own link, and each site's link
//! counts the bytes. `lab down` then removes every namespace and process.
//! Needs root (network namespaces) and iptables; the lab's prefix is
//! `wls-`.

use std::io::{Read, Write};
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::process::Output;
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

const PREFIX: &str = "wls-";

/// The echo server, inside `server`.
const ECHO: SocketAddr = SocketAddr::new(IpAddr::V4(Ipv4Addr::new(198, 18, 3, 2)), 6201);

/// The core's address on the server LAN: where tunnelled flows come from.
const CORE_LAN: IpAddr = IpAddr::V4(Ipv4Addr::new(198, 18, 3, 1));

/// Bytes each site sends (and gets back).
const PAYLOAD: usize = 3 << 20;

fn wanopt(args: &[&str]) -> Output {
    crate::common::lab_wanopt(PREFIX, args)
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Takes the lab down when dropped, even on failure.
struct Guard;

impl Drop for Guard {
    fn drop(&mut self) {
        let _ = wanopt(&["lab", "down"]);
    }
}

/// A usage error: exit code 2 and one line on stderr.
fn refused(args: &[&str], needle: &str) {
    let out = wanopt(args);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{args:?}: {out:?}");
    assert!(
        stderr.contains(needle) && stderr.trim_end().lines().count() == 1,
        "{args:?}: {stderr}"
    );
}

/// Moves this thread into the lab namespace `node`.
fn enter(node: &str) {
    let path = format!("/run/netns/{PREFIX}{node}");
    let file = std::fs::File::open(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    nix::sched::setns(file, nix::sched::CloneFlags::CLONE_NEWNET)
        .unwrap_or_else(|e| panic!("setns {path}: {e}"));
}

/// Incompressible bytes of their own per seed (xorshift64*).
fn payload(seed: u64, len: usize) -> Vec<u8> {
    let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut out = Vec::with_capacity(len + 8);
    while out.len() < len {
        state ^= state >> 12;
        state ^= state << 25;
        state ^= state >> 27;
        out.extend_from_slice(&state.wrapping_mul(0x2545_F491_4F6C_DD1D).to_le_bytes());
    }
    out.truncate(len);
    out
}

/// An echo server in `server` on [`ECHO`]; returns the peer address of
/// every connection it accepted.
fn echo_server() -> Arc<Mutex<Vec<SocketAddr>>> {
    let peers = Arc::new(Mutex::new(Vec::new()));
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    let seen = Arc::clone(&peers);
    thread::spawn(move || {
        enter("server");
        let listener = TcpListener::bind(ECHO).unwrap_or_else(|e| panic!("bind {ECHO}: {e}"));
        let _ = ready_tx.send(());
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            if let Ok(peer) = stream.peer_addr() {
                seen.lock().unwrap_or_else(|e| e.into_inner()).push(peer);
            }
            thread::spawn(move || {
                let mut buf = vec![0u8; 64 * 1024];
                loop {
                    match stream.read(&mut buf) {
                        Ok(0) | Err(_) => break,
                        Ok(n) => {
                            if stream.write_all(&buf[..n]).is_err() {
                                return;
                            }
                        }
                    }
                }
                let _ = stream.shutdown(std::net::Shutdown::Write);
            });
        }
    });
    ready_rx
        .recv_timeout(Duration::from_secs(5))
        .unwrap_or_else(|e| panic!("the echo server did not start: {e}"));
    peers
}

/// From `client` (a namespace name), sends [`PAYLOAD`] bytes of its own
/// to the echo server and returns (the local address, what came back,
/// what was sent).
fn transfer(client: &'static str, seed: u64) -> thread::JoinHandle<(SocketAddr, Vec<u8>, Vec<u8>)> {
    thread::spawn(move || {
        enter(client);
        let sent = payload(seed, PAYLOAD);
        let mut stream = TcpStream::connect_timeout(&ECHO, Duration::from_secs(10))
            .unwrap_or_else(|e| panic!("{client}: connect: {e}"));
        stream
            .set_read_timeout(Some(Duration::from_secs(60)))
            .unwrap_or_else(|e| panic!("{e}"));
        let local = stream.local_addr().unwrap_or_else(|e| panic!("{e}"));
        let mut writer = stream.try_clone().unwrap_or_else(|e| panic!("{e}"));
        let to_send = sent.clone();
        let write = thread::spawn(move || {
            writer
                .write_all(&to_send)
                .unwrap_or_else(|e| panic!("{client}: write: {e}"));
            let _ = writer.shutdown(std::net::Shutdown::Write);
        });
        let mut back = Vec::with_capacity(PAYLOAD);
        stream
            .read_to_end(&mut back)
            .unwrap_or_else(|e| panic!("{client}: read after {} bytes: {e}", back.len()));
        write
            .join()
            .unwrap_or_else(|_| panic!("{client}: writer panicked"));
        (local, back, sent)
    })
}

/// `lab status`'s counters: (section, name) to value.
fn counters() -> std::collections::BTreeMap<(String, String), u64> {
    // The emulators publish every 200 ms.
    thread::sleep(Duration::from_millis(450));
    let out = wanopt(&["lab", "status"]);
    assert!(out.status.success(), "{out:?}");
    let mut section = String::new();
    let mut map = std::collections::BTreeMap::new();
    for line in text(&out.stdout).lines() {
        let line = line.trim();
        if let Some(s) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            section = s.to_string();
        } else if let [name, value] = line.split_whitespace().collect::<Vec<_>>()[..] {
            if let Ok(v) = value.parse() {
                map.insert((section.clone(), name.to_string()), v);
            }
        }
    }
    map
}

fn recorded_pids() -> Vec<u32> {
    let dir = format!("/run/wanopt-lab/{}/pids", PREFIX.trim_end_matches('-'));
    std::fs::read_dir(&dir)
        .map(|entries| {
            entries
                .flatten()
                .filter_map(|e| std::fs::read_to_string(e.path()).ok())
                .filter_map(|t| t.trim().parse().ok())
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn three_sites_each_carry_a_byte_exact_transfer_through_their_own_edge() {
    // A count out of range is the user's mistake, before anything is built.
    refused(&["lab", "up", "--sites", "0"], "a lab has 1 to 16 sites");
    refused(&["lab", "up", "--sites", "17"], "a lab has 1 to 16 sites");
    refused(&["lab", "addr", "client17"], "unknown lab node `client17`");
    let out = wanopt(&["lab", "addr", "client2"]);
    assert_eq!(text(&out.stdout).trim(), "198.18.21.2", "{out:?}");
    crate::common::require_root();
    let _ = wanopt(&["lab", "down"]);
    let _guard = Guard;
    let out = wanopt(&[
        "lab",
        "up",
        "--sites",
        "3",
        "--optimize",
        "--rtt",
        "10ms",
        "--rate",
        "40mbit",
    ]);
    assert!(out.status.success(), "{out:?}");
    assert!(text(&out.stdout).contains(" sites 3"), "{out:?}");
    let out = wanopt(&["lab", "exec", "client3", "--", "true"]);
    assert!(out.status.success(), "{out:?}");
    refused(
        &["lab", "exec", "client4", "--", "true"],
        "the lab has no site 4",
    );

    let peers = echo_server();
    let sites = [
        ("client", "198.18.1.2"),
        ("client2", "198.18.21.2"),
        ("client3", "198.18.31.2"),
    ];
    let handles: Vec<_> = sites
        .iter()
        .zip(1u64..)
        .map(|(&(client, _), seed)| transfer(client, seed))
        .collect();
    for ((client, addr), handle) in sites.iter().zip(handles) {
        let (local, back, sent) = handle
            .join()
            .unwrap_or_else(|_| panic!("{client}'s transfer failed"));
        assert_eq!(local.ip().to_string(), *addr, "{client}");
        assert_eq!(back.len(), sent.len(), "{client}: length");
        assert!(back == sent, "{client}: the bytes differ");
    }
    // Every flow reached the server from the core: through the tunnel.
    let peers = peers.lock().unwrap_or_else(|e| e.into_inner()).clone();
    assert_eq!(peers.len(), 3, "{peers:?}");
    assert!(peers.iter().all(|p| p.ip() == CORE_LAN), "{peers:?}");
    // One core, a tunnel from each site's edge over that site's link.
    let core_log =
        std::fs::read_to_string("/run/wanopt-lab/wls/wanopt-core.log").unwrap_or_default();
    for edge in ["198.18.2.1", "198.18.22.1", "198.18.32.1"] {
        assert!(
            core_log
                .lines()
                .any(|l| l.contains("tunnel up from edge") && l.contains(&format!(" at {edge}:"))),
            "no tunnel from {edge}: {core_log}"
        );
    }
    // Each site's link carried its transfer up; down, the echo is mostly
    // rebuilt from the core's byte cache for that edge (what came up), so
    // only some of it crosses (as little as an eighth when the machine is
    // busy and the cache is ahead of the echo); a link that carried no
    // site's traffic counts nothing.
    let counters = counters();
    for site in ["", "site2 ", "site3 "] {
        let bytes_out = |direction: &str| {
            let section = format!("{site}{direction}");
            counters
                .get(&(section.clone(), "link.bytes_out".to_string()))
                .copied()
                .unwrap_or_else(|| panic!("no link.bytes_out in [{section}]"))
        };
        let (up, down) = (bytes_out("up"), bytes_out("down"));
        assert!(up > PAYLOAD as u64, "[{site}up] link.bytes_out {up}");
        assert!(
            down > PAYLOAD as u64 / 32,
            "[{site}down] link.bytes_out {down}"
        );
    }

    // `lab down` ends every process and removes every namespace.
    let pids = recorded_pids();
    // Three emulators, the generator server, the core and three edges.
    assert_eq!(pids.len(), 3 + 1 + 1 + 3, "{pids:?}");
    let out = wanopt(&["lab", "down"]);
    assert!(out.status.success(), "{out:?}");
    assert!(
        text(&out.stdout).contains("removed 9 namespace(s)"),
        "{out:?}"
    );
    for pid in pids {
        assert!(
            !std::path::Path::new(&format!("/proc/{pid}")).exists(),
            "{pid} still runs"
        );
    }
    let netns = std::process::Command::new("ip")
        .args(["netns", "list"])
        .output()
        .map(|o| text(&o.stdout))
        .unwrap_or_default();
    assert!(!netns.contains(PREFIX), "{netns}");
    let out = wanopt(&["lab", "down"]);
    assert!(text(&out.stdout).contains("nothing to remove"), "{out:?}");
}
