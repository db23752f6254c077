//! Test harness: real `wanopt` processes on loopback, with keys in a temp dir.

#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub const BIN: &str = env!("CARGO_BIN_EXE_wanopt");

/// A loopback address on which both a TCP and a UDP bind succeed now, for a
/// node started next to listen on.
///
/// Ports come from below the kernel's ephemeral range, from a block of
/// [`BLOCK`] ports that this process holds alone (see [`port_block`]), and
/// from a counter shared by the process's tests. A port the kernel handed
/// out for `:0` and released can be taken by any outgoing connection before
/// the node binds it (it happened: `Address already in use` for a forward
/// listener while another test opened two hundred connections); outside the
/// ephemeral range no connection is given one, and the block keeps test
/// processes running at once off each other's ports (scripts/run-tests.py
/// runs several processes of this binary at once, a module each).
fn free_port() -> SocketAddr {
    use std::sync::atomic::{AtomicU32, Ordering};
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let (low, span) = port_block();
    for _ in 0..span {
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let port = u16::try_from(low + n % span).expect("port range");
        let addr = SocketAddr::from(([127, 0, 0, 1], port));
        if TcpListener::bind(addr).is_ok() && UdpSocket::bind(addr).is_ok() {
            return addr;
        }
    }
    panic!("no free loopback port in {low}..{}", low + span);
}

/// Ports a test process holds alone.
const BLOCK: u32 = 200;

/// This process's ports: the first block of [`BLOCK`] ports of the test
/// range whose lock file (in the temporary directory) it can lock, held
/// until the process ends; the whole range, shared, when none can be
/// locked.
fn port_block() -> (u32, u32) {
    use std::sync::OnceLock;
    static HELD: OnceLock<(u32, u32)> = OnceLock::new();
    *HELD.get_or_init(|| {
        let (low, span) = test_port_range();
        let blocks = span / BLOCK;
        let dir = std::env::temp_dir().join("wanopt-test-ports");
        let _ = std::fs::create_dir_all(&dir);
        let start = std::process::id() % blocks.max(1);
        for i in 0..blocks {
            let block = (start + i) % blocks;
            let first = low + block * BLOCK;
            let Ok(file) = std::fs::File::create(dir.join(first.to_string())) else {
                continue;
            };
            if file.try_lock().is_ok() {
                // Held (and locked) until the process ends.
                std::mem::forget(file);
                return (first, BLOCK);
            }
        }
        (low, span)
    })
}

/// The ports tests may use: up to 10,000 below the kernel's ephemeral range
/// (or above it when it starts too low), never under 1024.
fn test_port_range() -> (u32, u32) {
    let range =
        std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range").unwrap_or_default();
    let mut it = range
        .split_whitespace()
        .filter_map(|v| v.parse::<u32>().ok());
    let (lo, hi) = (it.next().unwrap_or(32768), it.next().unwrap_or(60999));
    if lo >= 1024 + 2000 {
        let span = (lo - 1024).min(10_000);
        (lo - span, span)
    } else if hi < 65_535 - 2000 {
        (hi + 1, (65_535 - hi).min(10_000))
    } else {
        // The ephemeral range covers nearly every port: share it.
        (1024, 10_000)
    }
}

/// A free loopback TCP port (see [`free_port`]).
pub fn free_tcp() -> SocketAddr {
    free_port()
}

/// A free loopback UDP port (see [`free_port`]).
pub fn free_udp() -> SocketAddr {
    free_port()
}

pub struct Keys {
    pub dir: tempfile::TempDir,
}

impl Keys {
    pub fn new() -> Keys {
        Keys {
            dir: tempfile::tempdir().unwrap(),
        }
    }

    /// Makes (or reuses) a key named `name`; returns (path, public key).
    pub fn key(&self, name: &str) -> (PathBuf, String) {
        let path = self.dir.path().join(format!("{name}.key"));
        let out = if path.exists() {
            Command::new(BIN).arg("pubkey").arg(&path).output().unwrap()
        } else {
            Command::new(BIN)
                .args(["keygen", "--out"])
                .arg(&path)
                .output()
                .unwrap()
        };
        assert!(out.status.success(), "{out:?}");
        (
            path,
            String::from_utf8(out.stdout).unwrap().trim().to_owned(),
        )
    }
}

/// A child process killed on drop, with its stderr kept in a file.
pub struct Node {
    pub child: Child,
    pub log: PathBuf,
    pub control: SocketAddr,
}

impl Node {
    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// The node's /status, retried a few times (the machine may be loaded).
    pub fn status(&self) -> Option<serde_json::Value> {
        (0..5).find_map(|attempt| {
            if attempt > 0 {
                std::thread::sleep(Duration::from_millis(200));
            }
            http_get(self.control, "/status").and_then(|b| serde_json::from_str(&b).ok())
        })
    }

    pub fn wait_tunnel_up(&self, within: Duration) {
        let deadline = Instant::now() + within;
        while Instant::now() < deadline {
            if let Some(s) = self.status() {
                if s["tunnel"] == "up" {
                    return;
                }
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("tunnel did not come up; log:\n{}", self.log_text());
    }

    pub fn signal(&self, sig: &str) {
        Command::new("kill")
            .args([&format!("-{sig}"), &self.child.id().to_string()])
            .status()
            .unwrap();
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        // A killed node leaves its control token file behind.
        let _ = std::fs::remove_file(wanopt_node::control::token::default_path(
            self.control.port(),
        ));
    }
}

pub fn spawn(keys: &Keys, name: &str, args: &[String]) -> Node {
    let log = keys.dir.path().join(format!("{name}.log"));
    let control = free_tcp();
    let mut cmd = Command::new(BIN);
    cmd.args(args).args(["--control", &control.to_string()]);
    let is_node = matches!(args.first().map(String::as_str), Some("edge" | "core"));
    if is_node
        && !args
            .iter()
            .any(|a| a == "--cache-dir" || a == "--no-reduce")
    {
        // Each node of a test has its own cache (kept across restarts).
        cmd.arg("--cache-dir")
            .arg(keys.dir.path().join(format!("cache-{name}")));
    }
    let child = cmd
        .env(
            "WANOPT_LOG",
            "debug,quinn=info,quinn_proto=info,rustls=info",
        )
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    Node {
        child,
        log,
        control,
    }
}

/// A pair of nodes on loopback with pinned keys.
pub struct Pair {
    pub keys: Keys,
    pub core: Node,
    pub edge: Node,
    pub core_addr: SocketAddr,
}

pub fn core_args(keys: &Keys, listen: SocketAddr, allow: &[&str]) -> Vec<String> {
    let (core_key, _) = keys.key("core");
    let (_, edge_pub) = keys.key("edge");
    let mut args = vec![
        "core".into(),
        "--listen".into(),
        listen.to_string(),
        "--key".into(),
        core_key.display().to_string(),
        "--peer-key".into(),
        edge_pub,
        // Tests that run cores side by side on loopback would share
        // 127.0.0.1:443 (`reach.rs` gives its cores ports of their own).
        "--listen-tcp".into(),
        "off".into(),
    ];
    for a in allow {
        args.push("--allow".into());
        args.push(a.to_string());
    }
    args
}

pub fn edge_args(
    keys: &Keys,
    core: SocketAddr,
    forwards: &[(SocketAddr, String)],
    extra: &[&str],
) -> Vec<String> {
    let (edge_key, _) = keys.key("edge");
    let (_, core_pub) = keys.key("core");
    let mut args = vec![
        "edge".into(),
        "--core".into(),
        core.to_string(),
        "--key".into(),
        edge_key.display().to_string(),
        "--peer-key".into(),
        core_pub,
    ];
    for (listen, dest) in forwards {
        args.push("--forward".into());
        args.push(format!("{listen}={dest}"));
    }
    if !extra.contains(&"--transport") {
        // QUIC only: the behaviour under test, with no TCP fallback to
        // another test's core.
        args.extend(["--transport".into(), "quic".into()]);
    }
    args.extend(extra.iter().map(|s| s.to_string()));
    args
}

impl Pair {
    /// Core allowing `allow`, edge forwarding `forwards`.
    pub fn start(allow: &[&str], forwards: &[(SocketAddr, String)], edge_extra: &[&str]) -> Pair {
        let keys = Keys::new();
        let core_addr = free_udp();
        let core = spawn(&keys, "core", &core_args(&keys, core_addr, allow));
        let edge = spawn(
            &keys,
            "edge",
            &edge_args(&keys, core_addr, forwards, edge_extra),
        );
        edge.wait_tunnel_up(Duration::from_secs(10));
        Pair {
            keys,
            core,
            edge,
            core_addr,
        }
    }
}

/// Minimal HTTP GET, enough for the control API.
pub fn http_get(addr: SocketAddr, path: &str) -> Option<String> {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(2)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(s, "GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n").ok()?;
    let mut body = String::new();
    s.read_to_string(&mut body).ok()?;
    body.split_once("\r\n\r\n").map(|(_, b)| b.to_owned())
}

/// Deterministic pseudo-random bytes (xorshift64*), fast enough for GiBs.
pub struct Pattern(u64);

impl Pattern {
    pub fn new(seed: u64) -> Pattern {
        Pattern(seed | 1)
    }
    pub fn fill(&mut self, buf: &mut [u8]) {
        for chunk in buf.chunks_mut(8) {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            let v = self.0.wrapping_mul(0x2545_F491_4F6C_DD1D).to_le_bytes();
            chunk.copy_from_slice(&v[..chunk.len()]);
        }
    }
}

/// Waits for `pred` to hold, up to `within`.
pub fn eventually(within: Duration, mut pred: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + within;
    while Instant::now() < deadline {
        if pred() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(25));
    }
    pred()
}

/// A UDP relay between the edge and the core that adds a one-way delay and
/// drops datagrams edge -> core that `drop` selects (by sequence number,
/// from 1, and contents): a long, lossy path on loopback. Returns the
/// address to give the edge as `--core`.
pub fn lossy_path(
    core: SocketAddr,
    delay: Duration,
    drop: impl Fn(u64, &[u8]) -> bool + Send + 'static,
) -> SocketAddr {
    path_relay(core, delay, None, drop, None)
}

/// A UDP relay between the edge and the core that adds a one-way delay
/// and drops everything, both ways, while `drop_all` is set: a WAN path
/// that can be cut and restored. Returns the address to give the edge.
pub fn cuttable_path(
    core: SocketAddr,
    delay: Duration,
    drop_all: std::sync::Arc<std::sync::atomic::AtomicBool>,
) -> SocketAddr {
    path_relay(core, delay, None, |_, _| false, Some(drop_all))
}

/// An edge with two WAN paths to the core, through `relays` (from
/// 127.0.0.1 and 127.0.0.2; `--core` is the first relay), forwarding
/// `forwards`, with `--no-reduce` and `extra`.
pub fn two_path_edge(
    keys: &Keys,
    relays: [SocketAddr; 2],
    forwards: &[(SocketAddr, String)],
    extra: &[&str],
) -> Node {
    let path1 = format!("127.0.0.1={}", relays[0]);
    let path2 = format!("127.0.0.2={}", relays[1]);
    let mut args = vec!["--no-reduce", "--path", &path1, "--path", &path2];
    args.extend_from_slice(extra);
    spawn(keys, "edge", &edge_args(keys, relays[0], forwards, &args))
}

/// A [`lossy_path`] that also drops everything, both ways, while
/// `drop_all` is set.
#[allow(dead_code)]
pub fn lossy_cuttable_path(
    core: SocketAddr,
    delay: Duration,
    drop: impl Fn(u64, &[u8]) -> bool + Send + 'static,
    drop_all: std::sync::Arc<std::sync::atomic::AtomicBool>,
) -> SocketAddr {
    path_relay(core, delay, None, drop, Some(drop_all))
}

/// A UDP relay between the edge and the core that adds a one-way delay
/// and, edge -> core, a bottleneck of `rate` bytes per second with a queue
/// of `queue` bytes (a datagram that finds it full is dropped). Returns the
/// address to give the edge as `--core`.
#[allow(dead_code)]
pub fn bottleneck_path(core: SocketAddr, delay: Duration, rate: u64, queue: u64) -> SocketAddr {
    path_relay(core, delay, Some((rate, queue)), |_, _| false, None)
}

/// [`bottleneck_path`] that also drops everything, both ways, while
/// `drop_all` is set.
#[allow(dead_code)]
pub fn cuttable_bottleneck_path(
    core: SocketAddr,
    delay: Duration,
    rate: u64,
    queue: u64,
    drop_all: std::sync::Arc<std::sync::atomic::AtomicBool>,
) -> SocketAddr {
    path_relay(
        core,
        delay,
        Some((rate, queue)),
        |_, _| false,
        Some(drop_all),
    )
}

/// [`bottleneck_path`] that also drops, edge -> core, what `drop` says
/// (before the bottleneck).
#[allow(dead_code)]
pub fn lossy_bottleneck_path(
    core: SocketAddr,
    delay: Duration,
    rate: u64,
    queue: u64,
    drop: impl Fn(u64, &[u8]) -> bool + Send + 'static,
) -> SocketAddr {
    path_relay(core, delay, Some((rate, queue)), drop, None)
}

fn path_relay(
    core: SocketAddr,
    delay: Duration,
    bottleneck: Option<(u64, u64)>,
    drop: impl Fn(u64, &[u8]) -> bool + Send + 'static,
    drop_all: Option<std::sync::Arc<std::sync::atomic::AtomicBool>>,
) -> SocketAddr {
    use std::collections::VecDeque;
    use std::sync::atomic::Ordering;
    let cut = move || drop_all.as_ref().is_some_and(|d| d.load(Ordering::Relaxed));
    let cut_down = cut.clone();
    use std::sync::{Arc, Mutex};
    let front = Arc::new(UdpSocket::bind("127.0.0.1:0").unwrap());
    let back = Arc::new(UdpSocket::bind("127.0.0.1:0").unwrap());
    back.connect(core).unwrap();
    // Room for the bursts of a sender that outpaces the relay's threads
    // on a loaded machine: the path drops what `drop` says, not more.
    for socket in [&front, &back] {
        let _ = socket2::SockRef::from(&**socket).set_recv_buffer_size(4 << 20);
    }
    let addr = front.local_addr().unwrap();
    let edge: Arc<Mutex<Option<SocketAddr>>> = Arc::default();
    type Line = Arc<(Mutex<VecDeque<(Instant, Vec<u8>)>>, std::sync::Condvar)>;
    let spawn_line =
        |out: Arc<UdpSocket>, to_edge: Option<Arc<Mutex<Option<SocketAddr>>>>| -> Line {
            let line: Line = Arc::default();
            let l = line.clone();
            std::thread::spawn(move || loop {
                let (due, packet) = {
                    let (queue, ready) = &*l;
                    let mut q = queue.lock().unwrap();
                    while q.is_empty() {
                        q = ready.wait(q).unwrap();
                    }
                    q.pop_front().unwrap()
                };
                let now = Instant::now();
                if due > now {
                    std::thread::sleep(due - now);
                }
                let _ = match &to_edge {
                    Some(edge) => match *edge.lock().unwrap() {
                        Some(e) => out.send_to(&packet, e),
                        None => continue,
                    },
                    None => out.send(&packet),
                };
            });
            line
        };
    let up = spawn_line(back.clone(), None);
    let down = spawn_line(front.clone(), Some(edge.clone()));
    {
        let front = front.clone();
        std::thread::spawn(move || {
            let mut buf = vec![0u8; 65536];
            let mut seq = 0u64;
            // When the bottleneck has sent everything queued so far.
            let mut free_at = Instant::now();
            loop {
                let Ok((n, from)) = front.recv_from(&mut buf) else {
                    return;
                };
                if cut() {
                    continue;
                }
                *edge.lock().unwrap() = Some(from);
                seq += 1;
                if drop(seq, &buf[..n]) {
                    continue;
                }
                let now = Instant::now();
                let mut depart = now;
                if let Some((rate, queue)) = bottleneck {
                    let start = free_at.max(now);
                    let backlog = start - now;
                    if backlog > Duration::from_secs_f64(queue as f64 / rate as f64) {
                        continue;
                    }
                    free_at = start + Duration::from_secs_f64((n + 28) as f64 / rate as f64);
                    depart = free_at;
                }
                up.0.lock()
                    .unwrap()
                    .push_back((depart + delay, buf[..n].to_vec()));
                up.1.notify_one();
            }
        });
    }
    std::thread::spawn(move || {
        let mut buf = vec![0u8; 65536];
        loop {
            let Ok(n) = back.recv(&mut buf) else { return };
            if cut_down() {
                continue;
            }
            down.0
                .lock()
                .unwrap()
                .push_back((Instant::now() + delay, buf[..n].to_vec()));
            down.1.notify_one();
        }
    });
    addr
}

/// Bytes that crossed a [`wan_meter`] relay, per direction, counted as IP
/// packets (UDP payload + 28 bytes of IPv4 and UDP headers).
#[derive(Debug, Default)]
pub struct WanBytes {
    pub to_core: std::sync::atomic::AtomicU64,
    pub to_edge: std::sync::atomic::AtomicU64,
}

impl WanBytes {
    pub fn total(&self) -> u64 {
        use std::sync::atomic::Ordering::Relaxed;
        self.to_core.load(Relaxed) + self.to_edge.load(Relaxed)
    }
}

/// A UDP relay between the edge and the core that counts what crosses it:
/// the WAN as an independent observer sees it. Returns the address to give
/// the edge as `--core`.
pub fn wan_meter(core: SocketAddr) -> (SocketAddr, std::sync::Arc<WanBytes>) {
    use std::sync::atomic::Ordering::Relaxed;
    use std::sync::{Arc, Mutex};
    let front = Arc::new(UdpSocket::bind("127.0.0.1:0").unwrap());
    let back = Arc::new(UdpSocket::bind("127.0.0.1:0").unwrap());
    back.connect(core).unwrap();
    let addr = front.local_addr().unwrap();
    let bytes = Arc::new(WanBytes::default());
    let edge: Arc<Mutex<Option<SocketAddr>>> = Arc::default();
    {
        let (front, back, bytes, edge) = (front.clone(), back.clone(), bytes.clone(), edge.clone());
        std::thread::spawn(move || {
            let mut buf = vec![0u8; 65536];
            while let Ok((n, from)) = front.recv_from(&mut buf) {
                *edge.lock().unwrap() = Some(from);
                bytes.to_core.fetch_add(n as u64 + 28, Relaxed);
                let _ = back.send(&buf[..n]);
            }
        });
    }
    {
        let bytes = bytes.clone();
        std::thread::spawn(move || {
            let mut buf = vec![0u8; 65536];
            loop {
                // A core restart makes the connected socket report errors
                // (ICMP unreachable); keep relaying.
                let n = match back.recv(&mut buf) {
                    Ok(n) => n,
                    Err(_) => continue,
                };
                bytes.to_edge.fetch_add(n as u64 + 28, Relaxed);
                if let Some(e) = *edge.lock().unwrap() {
                    let _ = front.send_to(&buf[..n], e);
                }
            }
        });
    }
    (addr, bytes)
}

/// Runs `wanopt` with `args` on the lab whose namespaces start with
/// `prefix` (each lab test binary has its own).
pub fn lab_wanopt(prefix: &str, args: &[&str]) -> std::process::Output {
    Command::new(BIN)
        .args(args)
        .env("WANOPT_LAB_PREFIX", prefix)
        .output()
        .unwrap()
}

/// Fails the test unless it runs as root: the lab's network namespaces
/// need it (`scripts/test` runs as root; a test that cannot run fails
/// rather than passing unseen).
pub fn require_root() {
    assert!(
        is_root(),
        "this test needs root (network namespaces): run it as root, as scripts/test does"
    );
}

/// Whether the tests run as root (the lab's network namespaces need it).
pub fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
        .unwrap_or(false)
}

/// An echo server on loopback: each connection gets back what it sends,
/// and a half-close when it half-closes.
pub fn echo_server() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            std::thread::spawn(move || {
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
    addr
}

/// A UDP echo server on loopback.
#[allow(dead_code)]
pub fn udp_echo() -> SocketAddr {
    let socket = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let addr = socket.local_addr().unwrap();
    std::thread::spawn(move || {
        let mut buf = vec![0u8; 65_536];
        while let Ok((n, from)) = socket.recv_from(&mut buf) {
            let _ = socket.send_to(&buf[..n], from);
        }
    });
    addr
}

/// Runs a node that should refuse to start: its exit code and stderr,
/// or `None` when it still ran after 10 s (it is killed then).
#[allow(dead_code)]
pub fn run_refused(args: &[String]) -> Option<(i32, String)> {
    let mut child = Command::new(BIN)
        .args(args)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        if let Some(status) = child.try_wait().unwrap() {
            let mut err = String::new();
            child
                .stderr
                .take()
                .unwrap()
                .read_to_string(&mut err)
                .unwrap();
            return Some((status.code().unwrap_or(-1), err));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = child.kill();
    let _ = child.wait();
    None
}
