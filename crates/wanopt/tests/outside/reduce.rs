//! End-to-end tests of data reduction: real `wanopt edge` and `wanopt core`
//! processes on loopback, a file server, and a UDP relay between the nodes
//! that counts the WAN bytes independently of wanopt's own counters.

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

use sha2::{Digest, Sha256};

use crate::common::*;

/// A deterministic file that behaves like an office document: structured
/// text with numbers (compresses well) and, every 64 KiB, an embedded
/// 12 KiB already-compressed blob (does not compress).
fn office_file(seed: u64, len: usize) -> Vec<u8> {
    let mut rng = Pattern::new(seed);
    let mut word = [0u8; 8];
    let mut out = Vec::with_capacity(len + 256);
    let mut row = 0u64;
    while out.len() < len {
        if out.len() % 65536 < 200 && out.len() > 1000 {
            let mut blob = vec![0u8; 12 * 1024];
            rng.fill(&mut blob);
            out.extend_from_slice(b"<w:binData w:name=\"image.jpeg\">");
            out.extend_from_slice(&blob);
            out.extend_from_slice(b"</w:binData>\n");
        }
        rng.fill(&mut word);
        let v = u64::from_le_bytes(word);
        row += 1;
        let line = format!(
            "<row r=\"{row}\"><c t=\"s\">Region {}</c><c>{}</c><c>{}.{:02}</c><c t=\"s\">Quarterly revenue, forecast and variance</c></row>\n",
            v % 17,
            (v >> 8) % 100_000,
            (v >> 24) % 10_000,
            (v >> 40) % 100
        );
        out.extend_from_slice(line.as_bytes());
    }
    out.truncate(len);
    out
}

fn sha(bytes: &[u8]) -> [u8; 32] {
    Sha256::digest(bytes).into()
}

/// Serves one file: `G` downloads it, `P` uploads a file and gets its
/// SHA-256 back.
struct FileServer {
    addr: SocketAddr,
    file: Arc<Mutex<Vec<u8>>>,
}

impl FileServer {
    fn start(file: Vec<u8>) -> FileServer {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let file = Arc::new(Mutex::new(file));
        let shared = file.clone();
        thread::spawn(move || {
            for conn in listener.incoming() {
                let Ok(mut conn) = conn else { continue };
                let file = shared.clone();
                thread::spawn(move || {
                    let mut command = [0u8; 1];
                    if conn.read_exact(&mut command).is_err() {
                        return;
                    }
                    match command[0] {
                        b'G' => {
                            let data = file.lock().unwrap().clone();
                            let _ = conn.write_all(&data);
                        }
                        b'P' => {
                            let mut data = Vec::new();
                            if conn.read_to_end(&mut data).is_ok() {
                                let _ = conn.write_all(&sha(&data));
                            }
                        }
                        _ => {}
                    }
                });
            }
        });
        FileServer { addr, file }
    }

    fn set(&self, data: Vec<u8>) {
        *self.file.lock().unwrap() = data;
    }
}

fn download(listen: SocketAddr) -> Vec<u8> {
    let mut c = TcpStream::connect(listen).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    c.write_all(b"G").unwrap();
    let mut data = Vec::new();
    c.read_to_end(&mut data).unwrap();
    data
}

fn upload(listen: SocketAddr, data: &[u8]) -> [u8; 32] {
    let mut c = TcpStream::connect(listen).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    c.write_all(b"P").unwrap();
    c.write_all(data).unwrap();
    c.shutdown(Shutdown::Write).unwrap();
    let mut digest = [0u8; 32];
    c.read_exact(&mut digest).unwrap();
    digest
}

/// Edge and core with reduce on, the WAN metered between them.
struct Lab {
    keys: Keys,
    core: Node,
    edge: Node,
    core_addr: SocketAddr,
    via: SocketAddr,
    wan: Arc<WanBytes>,
    listen: SocketAddr,
    server: FileServer,
    /// Each node's own arguments, given again when it restarts.
    extra: [Vec<String>; 2],
}

impl Lab {
    fn start(file: Vec<u8>, core_extra: &[&str], edge_extra: &[&str]) -> Lab {
        let keys = Keys::new();
        let server = FileServer::start(file);
        let core_addr = free_udp();
        let (via, wan) = wan_meter(core_addr);
        let listen = free_tcp();
        let core = spawn(
            &keys,
            "core",
            &Self::core_args(&keys, core_addr, core_extra),
        );
        let edge = spawn(
            &keys,
            "edge",
            &Self::edge_args(&keys, via, listen, server.addr, edge_extra),
        );
        edge.wait_tunnel_up(Duration::from_secs(10));
        Lab {
            keys,
            core,
            edge,
            core_addr,
            via,
            wan,
            listen,
            server,
            extra: [core_extra, edge_extra].map(|e| e.iter().map(|s| s.to_string()).collect()),
        }
    }

    fn core_args(keys: &Keys, core_addr: SocketAddr, extra: &[&str]) -> Vec<String> {
        let mut args = core_args(keys, core_addr, &["127.0.0.1"]);
        args.extend(WAN_MTU.iter().chain(extra).map(|s| s.to_string()));
        args
    }

    fn edge_args(
        keys: &Keys,
        via: SocketAddr,
        listen: SocketAddr,
        server: SocketAddr,
        extra: &[&str],
    ) -> Vec<String> {
        let extra: Vec<&str> = WAN_MTU.iter().chain(extra).copied().collect();
        edge_args(keys, via, &[(listen, server.to_string())], &extra)
    }

    /// Runs `transfer` and returns the WAN bytes it cost (both directions,
    /// counted by the relay after the tunnel went quiet).
    fn wan_cost(&self, transfer: impl FnOnce()) -> u64 {
        let before = self.wan.total();
        transfer();
        thread::sleep(Duration::from_millis(300));
        self.wan.total() - before
    }

    fn download_cost(&self) -> u64 {
        let expected = self.server.file.lock().unwrap().clone();
        self.wan_cost(|| {
            let got = download(self.listen);
            assert!(got == expected, "downloaded bytes differ from the file");
        })
    }

    fn upload_cost(&self, data: &[u8]) -> u64 {
        self.wan_cost(|| assert_eq!(upload(self.listen, data), sha(data), "upload corrupted"))
    }

    /// Stops a node gracefully (SIGTERM: drain, checkpoint) and starts it
    /// again with the same key and cache directory.
    fn restart(&mut self, which: &str) {
        self.restart_after(which, "TERM");
    }

    /// Stops a node with `signal` (TERM, or KILL: a crash) and starts it
    /// again with the same key, arguments and cache directory.
    fn restart_after(&mut self, which: &str, signal: &str) {
        let node = if which == "core" {
            &mut self.core
        } else {
            &mut self.edge
        };
        node.signal(signal);
        let _ = node.child.wait();
        let [core_extra, edge_extra] = &self.extra;
        let args = if which == "core" {
            Self::core_args(&self.keys, self.core_addr, &as_strs(core_extra))
        } else {
            Self::edge_args(
                &self.keys,
                self.via,
                self.listen,
                self.server.addr,
                &as_strs(edge_extra),
            )
        };
        *node = spawn(&self.keys, which, &args);
        self.edge.wait_tunnel_up(Duration::from_secs(20));
        // The hello exchange completes right after the handshake. Both
        // nodes are asked: after a kill the other node still calls the
        // dead connection up until it hears of the restart, and the new
        // process sees only the new one.
        for node in [&self.edge, &self.core] {
            assert!(
                eventually(Duration::from_secs(10), || node
                    .status()
                    .is_some_and(|s| s["peers"][0]["state"] == "up")),
                "edge log: {}\ncore log: {}",
                self.edge.log_text(),
                self.core.log_text()
            );
        }
    }

    fn cache(&self, node: &Node) -> serde_json::Value {
        serde_json::from_str(&http_get(node.control, "/cache").unwrap()).unwrap()
    }
}

fn as_strs(args: &[String]) -> Vec<&str> {
    args.iter().map(String::as_str).collect()
}

const LEN: usize = 4 << 20;

/// The relay runs on loopback, whose 64 KiB MTU a real WAN does not have:
/// there, path MTU discovery on a new tunnel sends probes of up to 64 KiB
/// (about 0.5 MB of padding in all), which the meter would count against
/// the first transfer after a restart.
const WAN_MTU: [&str; 2] = ["--max-mtu", "1500"];

#[test]
fn a_file_sent_twice_crosses_the_wan_the_second_time_as_references() {
    let file = office_file(1, LEN);
    let lab = Lab::start(file.clone(), &[], &[]);
    let cold = lab.download_cost();
    let warm = lab.download_cost();
    eprintln!("download: cold {cold} B, warm {warm} B of {LEN}");
    // Cold: compression of the text parts, never more than the file plus
    // framing; the embedded blobs do not compress.
    assert!(cold < LEN as u64, "cold download cost {cold} B");
    assert!(cold > LEN as u64 / 10, "cold download cost only {cold} B");
    assert!(
        warm * 50 < LEN as u64,
        "warm download cost {warm} B (>= 2%)"
    );

    let upload_file = office_file(2, LEN);
    let cold = lab.upload_cost(&upload_file);
    let warm = lab.upload_cost(&upload_file);
    eprintln!("upload: cold {cold} B, warm {warm} B of {LEN}");
    assert!(cold > LEN as u64 / 10);
    assert!(warm * 50 < LEN as u64, "warm upload cost {warm} B (>= 2%)");

    // Both nodes account for it in their flow totals and show the service.
    let status = lab.edge.status().unwrap();
    assert_eq!(status["reduce"], true);
    assert!(status["reduction"].as_f64().unwrap() > 0.5, "{status}");
    assert!(status["references"].as_u64().unwrap() > 0);
    let core = lab.core.status().unwrap();
    assert!(core["cache_hits"].as_u64().unwrap() > 0, "{core}");
    // An undamaged cache needs no repair.
    assert_eq!(core["cache_misses"], 0, "{core}");
    assert_eq!(status["repairs"], 0, "{status}");
    let metrics = http_get(lab.edge.control, "/metrics").unwrap();
    assert!(metrics.contains("wanopt_wan_bytes_total"), "{metrics}");
    assert!(metrics.contains("wanopt_cache_hits_total"), "{metrics}");
}

#[test]
fn an_edited_file_crosses_as_little_more_than_the_change() {
    let mut file = office_file(3, LEN);
    let lab = Lab::start(file.clone(), &[], &[]);
    let cold = lab.download_cost();
    // "Open, edit, save": a few bytes change in the middle, the whole file
    // is written back, then read again.
    file[LEN / 2..LEN / 2 + 5].copy_from_slice(b"EDIT!");
    let save = lab.upload_cost(&file);
    let save_again = lab.upload_cost(&file);
    lab.server.set(file.clone());
    let reopen = lab.download_cost();
    eprintln!("cold {cold}, save {save}, save again {save_again}, reopen {reopen}");
    // References (24 B per ~8 KiB chunk: about 12 KB here) plus a delta of
    // the changed chunk against its old version. The first save follows a
    // download only: the cache works both ways (the core kept what it sent).
    for (what, cost) in [
        ("save after open", save),
        ("repeated save", save_again),
        ("reopen", reopen),
    ] {
        assert!(cost * 100 < LEN as u64, "{what} cost {cost} B (>= 1%)");
    }
    assert!(reopen * 10 < cold);
}

#[test]
fn warm_stays_warm_after_either_node_restarts_and_clear_makes_it_cold() {
    let file = office_file(4, LEN);
    let mut lab = Lab::start(file.clone(), &[], &[]);
    let cold = lab.download_cost();
    let upload_cold = lab.upload_cost(&file);
    lab.restart("core");
    let after_core = lab.download_cost();
    let upload_after_core = lab.upload_cost(&file);
    lab.restart("edge");
    let after_edge = lab.download_cost();
    let upload_after_edge = lab.upload_cost(&file);
    eprintln!(
        "download: cold {cold}, after core restart {after_core}, after edge restart {after_edge}; \
         upload: cold {upload_cold}, {upload_after_core}, {upload_after_edge}"
    );
    for (what, cost) in [
        ("download after the core restarted", after_core),
        ("download after the edge restarted", after_edge),
        ("upload after the core restarted", upload_after_core),
        ("upload after the edge restarted", upload_after_edge),
    ] {
        assert!(cost * 50 < LEN as u64, "{what} cost {cost} B (>= 2%)");
    }

    // `wanopt cache clear` on both nodes: the next transfer is cold again.
    for node in [&lab.edge, &lab.core] {
        let out = std::process::Command::new(BIN)
            .args(["cache", "clear", "--control", &node.control.to_string()])
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
    }
    let again = lab.download_cost();
    eprintln!("after clear: {again}");
    assert!(
        again > cold / 2,
        "after clear the download cost {again} B, cold was {cold}"
    );
    let stats = std::process::Command::new(BIN)
        .args(["cache", "stats", "--control", &lab.edge.control.to_string()])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&stats.stdout);
    assert!(stats.status.success(), "{stats:?}");
    assert!(text.contains("cleared     1 time since start"), "{text}");
    assert!(text.contains("chunks"), "{text}");
}

#[test]
fn warm_stays_warm_after_either_node_is_killed() {
    // No checkpoint while the test runs: what the killed node knows of
    // its peer's cache after its restart comes from its journal alone.
    let slow = ["--cache-checkpoint", "1h"];
    let download = office_file(5, LEN);
    let mut lab = Lab::start(download.clone(), &slow, &slow);
    let cold = lab.download_cost();
    // The core sent the download, and learned from the edge's
    // acknowledgements what the edge holds: killed, it must not forget.
    lab.restart_after("core", "KILL");
    let after_core = lab.download_cost();
    // The same for an upload, sent by the edge.
    let upload = office_file(6, LEN);
    let upload_cold = lab.upload_cost(&upload);
    lab.restart_after("edge", "KILL");
    let after_edge = lab.upload_cost(&upload);
    eprintln!(
        "download: cold {cold}, after the core was killed {after_core}; \
         upload: cold {upload_cold}, after the edge was killed {after_edge}"
    );
    assert!(cold > LEN as u64 / 10 && upload_cold > LEN as u64 / 10);
    for (what, cost) in [
        ("download after the core was killed", after_core),
        ("upload after the edge was killed", after_edge),
    ] {
        assert!(cost * 50 < LEN as u64, "{what} cost {cost} B (>= 2%)");
    }
    // And killed twice in a row, the second time before any new transfer:
    // the journal of the first life replays too.
    lab.restart_after("core", "KILL");
    lab.restart_after("core", "KILL");
    let twice = lab.download_cost();
    assert!(
        twice * 50 < LEN as u64,
        "after two kills: {twice} B (>= 2%)"
    );
}

/// Every directory and file under `dir`, links not followed.
fn walk(dir: &Path, out: &mut Vec<(std::path::PathBuf, std::fs::Metadata)>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let meta = std::fs::symlink_metadata(&path).unwrap();
        let is_dir = meta.is_dir();
        out.push((path.clone(), meta));
        if is_dir {
            walk(&path, out);
        }
    }
}

#[test]
fn cache_files_are_private_under_umask_022_and_clear_spares_foreign_directories() {
    use std::os::unix::fs::PermissionsExt;
    nix::sys::stat::umask(nix::sys::stat::Mode::from_bits_truncate(0o022));
    // A parent others may enter, so that only the cache's own modes stand
    // between another user and the cached plaintext.
    let parent = tempfile::tempdir().unwrap();
    std::fs::set_permissions(parent.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let dirs = ["core", "edge"].map(|n| parent.path().join(n));
    let arg = |d: &Path| d.display().to_string();
    let (core_dir, edge_dir) = (arg(&dirs[0]), arg(&dirs[1]));
    let secret = b"password=hunter2-in-the-clear;".repeat(40_000);
    let mut lab = Lab::start(
        secret.clone(),
        &["--cache-dir", &core_dir, "--cache-checkpoint", "1s"],
        &["--cache-dir", &edge_dir, "--cache-checkpoint", "1s"],
    );
    assert_eq!(download(lab.listen), secret);
    thread::sleep(Duration::from_millis(1500));
    // `cache clear` with another program's directory in the cache dir.
    let foreign = dirs[0].join("apt");
    std::fs::create_dir(&foreign).unwrap();
    std::fs::write(foreign.join("pkgcache.bin"), b"keep me").unwrap();
    let out = std::process::Command::new(BIN)
        .args(["cache", "clear", "--control", &lab.core.control.to_string()])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    assert_eq!(
        std::fs::read(foreign.join("pkgcache.bin")).unwrap(),
        b"keep me"
    );
    std::fs::remove_dir_all(&foreign).unwrap();
    assert_eq!(download(lab.listen), secret);
    for node in [&mut lab.core, &mut lab.edge] {
        node.signal("TERM");
        let _ = node.child.wait();
    }
    for dir in &dirs {
        let mut entries = Vec::new();
        walk(dir, &mut entries);
        let names: Vec<String> = entries
            .iter()
            .filter_map(|(p, _)| Some(p.file_name()?.to_string_lossy().into_owned()))
            .collect();
        for name in ["lock", "meta", "peer-view", "wanopt-peer-cache"] {
            assert!(names.iter().any(|n| n == name), "no {name} in {names:?}");
        }
        assert!(names.iter().any(|n| n.ends_with(".wseg")), "{names:?}");
        let root = std::fs::metadata(dir).unwrap().permissions().mode() & 0o7777;
        assert_eq!(root, 0o700, "{}", dir.display());
        for (path, meta) in &entries {
            let mode = meta.permissions().mode() & 0o7777;
            let want = if meta.is_dir() { 0o700 } else { 0o600 };
            assert_eq!(mode, want, "{} has mode {mode:o}", path.display());
        }
        // Another user finds nothing: not by a search, not by a read.
        let grep = std::process::Command::new("runuser")
            .args(["-u", "nobody", "--", "grep", "-rl", "hunter2"])
            .arg(dir)
            .output()
            .unwrap();
        assert!(grep.stdout.is_empty(), "nobody found {grep:?}");
        for (path, meta) in &entries {
            if meta.is_file() {
                let cat = std::process::Command::new("runuser")
                    .args(["-u", "nobody", "--", "cat"])
                    .arg(path)
                    .output()
                    .unwrap();
                assert!(!cat.status.success(), "nobody read {}", path.display());
            }
        }
    }
}

/// Flips bytes all over the segment files of a cache directory.
fn damage(dir: &Path) -> usize {
    let mut damaged = 0;
    for peer in std::fs::read_dir(dir).unwrap().flatten() {
        let Ok(files) = std::fs::read_dir(peer.path()) else {
            continue;
        };
        for f in files.flatten() {
            let name = f.file_name().to_string_lossy().into_owned();
            if !name.ends_with(".wseg") {
                continue;
            }
            let mut data = std::fs::read(f.path()).unwrap();
            for i in (4096..data.len()).step_by(8191) {
                data[i] ^= 0x55;
                damaged += 1;
            }
            std::fs::write(f.path(), data).unwrap();
        }
    }
    damaged
}

#[test]
fn a_damaged_cache_is_repaired_from_the_peer_and_never_delivers_a_wrong_byte() {
    let file = office_file(5, LEN);
    let mut lab = Lab::start(file.clone(), &[], &[]);
    lab.download_cost();
    let cache_dir = lab.keys.dir.path().join("cache-edge");
    // Damage under a running node: every read is verified, a bad record is
    // a miss, the decoder asks the core for the literal.
    assert!(damage(&cache_dir) > 100, "no segment file found to damage");
    lab.download_cost(); // byte-exact, or it panics
    let peer = lab.cache(&lab.edge)["peers"][0].clone();
    assert!(peer["corrupt"].as_u64().unwrap() > 0, "{peer}");
    // Both nodes count the recovery: the edge's misses, the core's repairs.
    let edge = lab.edge.status().unwrap();
    let misses = edge["cache_misses"].as_u64().unwrap();
    assert!(misses > 0, "{edge}");
    let core = lab.core.status().unwrap();
    assert!(core["repairs"].as_u64().unwrap() > 0, "{core}");
    let metrics = http_get(lab.edge.control, "/metrics").unwrap();
    assert!(
        metrics.contains(&format!(
            "wanopt_cache_misses_total{{role=\"edge\"}} {misses}\n"
        )),
        "{metrics}"
    );
    let log = lab.edge.log_text();
    assert!(!log.contains("panicked"), "{log}");

    // Damage while the node is down: found when the cache is opened, the
    // epoch changes, and the core stops assuming those chunks.
    lab.download_cost();
    lab.edge.signal("TERM");
    let _ = lab.edge.child.wait();
    assert!(damage(&cache_dir) > 100);
    let args = Lab::edge_args(&lab.keys, lab.via, lab.listen, lab.server.addr, &[]);
    lab.edge = spawn(&lab.keys, "edge", &args);
    lab.edge.wait_tunnel_up(Duration::from_secs(20));
    lab.download_cost();
    lab.download_cost();
    let peer = lab.cache(&lab.edge)["peers"][0].clone();
    assert!(
        peer["truncated_bytes"].as_u64().unwrap() > 0 || peer["corrupt"].as_u64().unwrap() > 0,
        "{peer}"
    );
}

#[test]
fn lzma_on_both_ends_carries_files_exact_and_smaller_than_zstd() {
    // `auto` picks LZMA2 below 3 Mbit/s; loopback is faster, so it is
    // asked for: each node compresses what it sends (the core downloads,
    // the edge uploads).
    let file = office_file(9, LEN);
    let upload_file = office_file(10, LEN);
    let mut costs = Vec::new();
    for mode in ["zstd", "lzma"] {
        let flags = ["--compression", mode];
        let lab = Lab::start(file.clone(), &flags, &flags);
        let down = lab.download_cost();
        let up = lab.upload_cost(&upload_file);
        let warm = lab.download_cost();
        eprintln!("{mode}: cold download {down} B, cold upload {up} B, warm {warm} B of {LEN}");
        assert!(
            warm * 50 < LEN as u64,
            "{mode}: warm download cost {warm} B"
        );
        costs.push((down, up));
    }
    let [(zstd_down, zstd_up), (lzma_down, lzma_up)] = costs[..] else {
        unreachable!()
    };
    assert!(
        lzma_down < zstd_down,
        "download: lzma {lzma_down} B, zstd {zstd_down} B"
    );
    assert!(
        lzma_up < zstd_up,
        "upload: lzma {lzma_up} B, zstd {zstd_up} B"
    );
}

#[test]
fn an_idle_flow_frees_its_compressor_and_goes_on() {
    let file = office_file(7, LEN);
    let (first, second) = file.split_at(LEN / 2);
    // zstd, whose stream compressor a sending flow holds (`auto` picks
    // LZ4 on loopback).
    let lab = Lab::start(Vec::new(), &[], &["--compression", "zstd"]);
    let gauge = |node: &Node, name: &str| node.status().map_or(0, |s| s[name].as_u64().unwrap());
    let held = |node: &Node| gauge(node, "compressor_bytes");
    let mut c = TcpStream::connect(lab.listen).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    c.write_all(b"P").unwrap();
    c.write_all(first).unwrap();
    // The edge compresses, the core decompresses (1 MiB window): both
    // are seen holding their context while the flow sends.
    let mut seen = (false, false);
    eventually(Duration::from_secs(10), || {
        seen.0 |= held(&lab.edge) > 0;
        seen.1 |= gauge(&lab.core, "decompressor_bytes") > 1 << 20;
        seen.0 && seen.1
    });
    assert!(seen.0, "the sending flow never held a compressor");
    assert!(seen.1, "the receiving flow never held a decompressor");
    // Quiet for a second: both freed (the edge tells the core with a
    // StreamEnd), with the flow still open.
    assert!(
        eventually(Duration::from_secs(10), || held(&lab.edge) == 0),
        "the idle flow kept its compressor"
    );
    assert!(
        eventually(Duration::from_secs(5), || gauge(
            &lab.core,
            "decompressor_bytes"
        ) == 0),
        "the core kept the idle flow's decompressor"
    );
    let status = lab.edge.status().unwrap();
    assert_eq!(status["flows_active"], 1, "{status}");
    let metrics = http_get(lab.edge.control, "/metrics").unwrap();
    assert!(
        metrics.contains("wanopt_compressor_bytes{role=\"edge\"} 0\n"),
        "{metrics}"
    );
    let metrics = http_get(lab.core.control, "/metrics").unwrap();
    assert!(
        metrics.contains("wanopt_decompressor_bytes{role=\"core\"} 0\n"),
        "{metrics}"
    );
    // The flow goes on with a new stream; every byte arrives.
    c.write_all(second).unwrap();
    c.shutdown(Shutdown::Write).unwrap();
    let mut digest = [0u8; 32];
    c.read_exact(&mut digest).unwrap();
    assert_eq!(digest, sha(&file), "upload corrupted");
}

#[test]
fn flows_beyond_the_compressor_budget_step_down_and_carry_every_byte() {
    // Room for one LZMA2 stream: the edge's second uploading flow does not
    // fit (nor does zstd 3 beside it) and sends with LZ4.
    let file = office_file(12, LEN);
    let (first, second) = file.split_at(LEN / 2);
    let edge_flags = ["--compression", "lzma", "--compressor-memory", "13MiB"];
    let lab = Lab::start(Vec::new(), &[], &edge_flags);
    let gauge = |name: &str| lab.edge.status().map_or(0, |s| s[name].as_u64().unwrap());
    // A flow that never sends reserves when it begins and gives the
    // memory back once it has been quiet for a second.
    let _silent = TcpStream::connect(lab.listen).unwrap();
    assert!(
        eventually(Duration::from_secs(10), || gauge("compressor_reserved")
            == 13 << 20),
        "the silent flow never reserved"
    );
    assert!(
        eventually(Duration::from_secs(10), || gauge("compressor_reserved")
            == 0),
        "the silent flow kept its reservation"
    );
    let mut flows: Vec<TcpStream> = (0..2)
        .map(|_| {
            let mut c = TcpStream::connect(lab.listen).unwrap();
            c.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
            c.write_all(b"P").unwrap();
            c.write_all(first).unwrap();
            c
        })
        .collect();
    assert!(
        eventually(Duration::from_secs(10), || gauge("compressor_step_downs")
            > 0),
        "the second flow never stepped down"
    );
    let status = lab.edge.status().unwrap();
    assert_eq!(status["compressor_budget"], 13 << 20, "{status}");
    assert!(
        status["compressor_reserved"].as_u64().unwrap() <= 13 << 20,
        "{status}"
    );
    // Quiet for a second: everything goes back to the budget.
    assert!(
        eventually(Duration::from_secs(10), || gauge("compressor_reserved")
            == 0),
        "the idle flows kept their reservations"
    );
    let metrics = http_get(lab.edge.control, "/metrics").unwrap();
    assert!(
        metrics.contains("wanopt_compressor_reserved_bytes{role=\"edge\"} 0\n"),
        "{metrics}"
    );
    assert!(
        metrics.contains("wanopt_compressor_step_downs_total{role=\"edge\"}"),
        "{metrics}"
    );
    for c in &mut flows {
        c.write_all(second).unwrap();
        c.shutdown(Shutdown::Write).unwrap();
    }
    for mut c in flows {
        let mut digest = [0u8; 32];
        c.read_exact(&mut digest).unwrap();
        assert_eq!(digest, sha(&file), "upload corrupted");
    }
}

#[test]
fn no_reduce_on_either_end_carries_flows_unreduced() {
    let file = office_file(6, 1 << 20);
    for (core_extra, edge_extra, why) in [
        (&["--no-reduce"][..], &[][..], "the core runs --no-reduce"),
        (&[][..], &["--no-reduce"][..], "--no-reduce"),
    ] {
        let lab = Lab::start(file.clone(), core_extra, edge_extra);
        assert!(eventually(Duration::from_secs(5), || lab
            .edge
            .log_text()
            .contains(&format!("data reduction off ({why})"))));
        let first = lab.download_cost();
        let second = lab.download_cost();
        assert!(second > (1 << 20), "{why}: second download cost {second} B");
        assert!(first > (1 << 20));
        let clear = std::process::Command::new(BIN)
            .args(["cache", "clear", "--control", &lab.edge.control.to_string()])
            .output()
            .unwrap();
        if edge_extra.is_empty() {
            assert!(clear.status.success());
        } else {
            assert_eq!(clear.status.code(), Some(1));
            let err = String::from_utf8_lossy(&clear.stderr);
            assert!(
                err.contains("--no-reduce") && err.lines().count() == 1,
                "{err}"
            );
        }
    }
}

#[test]
fn flows_show_the_reduce_service_and_their_wan_bytes() {
    let file = office_file(7, 8 << 20);
    let lab = Lab::start(file, &[], &[]);
    // A slow reader keeps the flow live while we look at the table.
    let mut c = TcpStream::connect(lab.listen).unwrap();
    c.write_all(b"G").unwrap();
    let mut first = vec![0u8; 1 << 20];
    c.read_exact(&mut first).unwrap();
    // The edge counts a write once it returned, which can be just after the
    // client read it: poll until the table caught up with what we read.
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    let flows = loop {
        let flows: serde_json::Value =
            serde_json::from_str(&http_get(lab.edge.control, "/flows").unwrap()).unwrap();
        let caught_up = flows["flows"][0]["bytes_to_client"]
            .as_u64()
            .is_some_and(|b| b >= 1 << 20);
        if caught_up || std::time::Instant::now() > deadline {
            break flows;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let row = &flows["flows"][0];
    assert_eq!(
        row["services"],
        serde_json::json!(["tcp-opt", "reduce"]),
        "{flows}"
    );
    assert!(row["wan_bytes_to_client"].as_u64().unwrap() > 0, "{flows}");
    assert!(
        row["bytes_to_client"].as_u64().unwrap() >= 1 << 20,
        "{flows}"
    );
    let mut rest = Vec::new();
    c.read_to_end(&mut rest).unwrap();
    assert_eq!(first.len() + rest.len(), 8 << 20);
}

#[test]
fn concurrent_flows_of_the_same_file_are_exact_cold_and_warm() {
    // Flows are independent streams: a chunk first sent on one is
    // referenced on another only once the peer acknowledged storing it.
    let file = office_file(8, 2 << 20);
    let lab = Lab::start(file.clone(), &[], &[]);
    for round in ["cold", "warm"] {
        let cost = lab.wan_cost(|| {
            let handles: Vec<_> = (0..8)
                .map(|_| {
                    let listen = lab.listen;
                    thread::spawn(move || download(listen))
                })
                .collect();
            for h in handles {
                assert!(h.join().unwrap() == file, "{round}: a download differs");
            }
        });
        eprintln!("{round}: 8 concurrent downloads cost {cost} B");
        if round == "warm" {
            assert!(
                cost * 50 < 8 * file.len() as u64,
                "warm round cost {cost} B"
            );
        }
    }
}
