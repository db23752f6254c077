//! Transparent interception with the rules `--print-firewall` prints, on a
//! topology of network namespaces: a client, the edge as its gateway (with
//! `iptables -P FORWARD DROP` and `ip6tables -P FORWARD DROP`), and a
//! server host that also runs the core, IPv4 and IPv6. Flows that
//! `--optimize` does not select never get through the edge, with the tunnel
//! up or down (`--fail open`); 8,000 open connections from one client do
//! not hang its new ones. Needs root; namespaces are `wic*`.

use std::fs::File;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::common::BIN;

const CLIENT: &str = "10.77.1.2";
const EDGE_LAN: &str = "10.77.1.1";
const EDGE_WAN: &str = "10.77.2.1";
const SERVER: &str = "10.77.2.2";
const CLIENT6: &str = "fd77:1::2";
const EDGE_LAN6: &str = "fd77:1::1";
const EDGE_WAN6: &str = "fd77:2::1";
const SERVER6: &str = "fd77:2::2";
/// The server port `--optimize` selects.
const OPTIMIZED: u16 = 8000;
/// A second optimized server port (another destination).
const OPTIMIZED_TOO: u16 = 8001;
/// A server port nobody selects (a management port).
const MANAGEMENT: u16 = 9000;

/// Client, edge and server namespaces; the nodes and namespaces are gone
/// when dropped.
struct Topology {
    tag: &'static str,
    nodes: Vec<Child>,
    dir: tempfile::TempDir,
}

impl Topology {
    fn ns(&self, role: &str) -> String {
        format!("wic{}-{role}", self.tag)
    }

    fn lan_if(&self) -> String {
        format!("lan{}", self.tag)
    }

    fn new(tag: &'static str) -> Topology {
        let topo = Topology {
            tag,
            nodes: Vec::new(),
            dir: tempfile::tempdir().unwrap(),
        };
        topo.remove();
        let (c, e, s) = (topo.ns("cl"), topo.ns("ed"), topo.ns("sv"));
        let lan = topo.lan_if();
        for ns in [&c, &e, &s] {
            run(&format!("ip netns add {ns} && ip -n {ns} link set lo up"));
        }
        run(&format!(
            "ip link add c{tag} netns {c} type veth peer name {lan} netns {e} && \
             ip link add s{tag} netns {s} type veth peer name wan{tag} netns {e} && \
             ip -n {c} addr add {CLIENT}/24 dev c{tag} && ip -n {c} link set c{tag} up && \
             ip -n {e} addr add {EDGE_LAN}/24 dev {lan} && ip -n {e} link set {lan} up && \
             ip -n {e} addr add {EDGE_WAN}/24 dev wan{tag} && ip -n {e} link set wan{tag} up && \
             ip -n {s} addr add {SERVER}/24 dev s{tag} && ip -n {s} link set s{tag} up && \
             ip -n {c} route add default via {EDGE_LAN} && \
             ip -n {s} route add default via {EDGE_WAN} && \
             ip netns exec {e} sysctl -qw net.ipv4.ip_forward=1 && \
             ip netns exec {e} iptables -P FORWARD DROP && \
             ip -n {c} addr add {CLIENT6}/64 dev c{tag} nodad && \
             ip -n {e} addr add {EDGE_LAN6}/64 dev {lan} nodad && \
             ip -n {e} addr add {EDGE_WAN6}/64 dev wan{tag} nodad && \
             ip -n {s} addr add {SERVER6}/64 dev s{tag} nodad && \
             ip -n {c} -6 route add default via {EDGE_LAN6} && \
             ip -n {s} -6 route add default via {EDGE_WAN6} && \
             ip netns exec {e} sysctl -qw net.ipv6.conf.all.forwarding=1 && \
             ip netns exec {e} ip6tables -P FORWARD DROP"
        ));
        topo
    }

    fn remove(&self) {
        for role in ["cl", "ed", "sv"] {
            let _ = Command::new("ip")
                .args(["netns", "del", &self.ns(role)])
                .stderr(Stdio::null())
                .status();
        }
    }

    /// Runs a shell command in namespace `role`; panics when it fails.
    fn sh(&self, role: &str, cmd: &str) {
        run(&format!("ip netns exec {} sh -c '{cmd}'", self.ns(role)));
    }

    fn keys(&self) -> (String, String, String, String) {
        let key = |name: &str| {
            let path = self.dir.path().join(format!("{name}.key"));
            let out = Command::new(BIN)
                .args(["keygen", "--out"])
                .arg(&path)
                .output()
                .unwrap();
            assert!(out.status.success());
            (
                path.display().to_string(),
                String::from_utf8(out.stdout).unwrap().trim().to_owned(),
            )
        };
        let (core_key, core_pub) = key("core");
        let (edge_key, edge_pub) = key("edge");
        (core_key, core_pub, edge_key, edge_pub)
    }

    fn spawn(&mut self, role: &str, name: &str, args: &[String]) -> usize {
        let log = File::create(self.dir.path().join(format!("{name}.log"))).unwrap();
        let child = Command::new("ip")
            .args(["netns", "exec", &self.ns(role), BIN])
            .args(args)
            .env("WANOPT_LOG", "info")
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap();
        self.nodes.push(child);
        self.nodes.len() - 1
    }

    fn log(&self, name: &str) -> String {
        std::fs::read_to_string(self.dir.path().join(format!("{name}.log"))).unwrap_or_default()
    }

    /// The edge's arguments, `--optimize` rules included.
    fn edge_args(&self, edge_key: &str, core_pub: &str, extra: &[&str]) -> Vec<String> {
        let mut args: Vec<String> = [
            "edge",
            "--core",
            &format!("{SERVER}:4433"),
            "--key",
            edge_key,
            "--peer-key",
            core_pub,
            "--transparent",
            "[::]:7000",
            "--optimize",
            &format!("{SERVER}:{OPTIMIZED}-{OPTIMIZED_TOO}"),
            "--optimize",
            &format!("[{SERVER6}/128]:{OPTIMIZED}-{OPTIMIZED_TOO}"),
            "--no-reduce",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        args.extend(extra.iter().map(|s| s.to_string()));
        args
    }

    /// Starts core (in the server namespace) and edge; waits for the tunnel.
    fn start_nodes(&mut self, edge_extra: &[&str]) -> (usize, usize) {
        let (core_key, core_pub, edge_key, edge_pub) = self.keys();
        let core = self.spawn(
            "sv",
            "core",
            &[
                "core",
                "--listen",
                &format!("{SERVER}:4433"),
                "--key",
                &core_key,
                "--peer-key",
                &edge_pub,
                "--allow",
                &format!("{SERVER}/32"),
                "--allow",
                &format!("{SERVER6}/128"),
                "--allow-udp",
                &format!("{SERVER}/32"),
                "--allow-udp",
                &format!("{SERVER6}/128"),
                "--no-reduce",
            ]
            .map(String::from),
        );
        let mut args = self.edge_args(&edge_key, &core_pub, edge_extra);
        args.extend(["--control".into(), "127.0.0.1:7001".into()]);
        let edge = self.spawn("ed", "edge", &args);
        assert!(
            crate::common::eventually(Duration::from_secs(10), || self.tunnel_up()),
            "tunnel did not come up:\n{}",
            self.log("edge")
        );
        (core, edge)
    }

    fn tunnel_up(&self) -> bool {
        in_ns(&self.ns("ed"), || {
            crate::common::http_get("127.0.0.1:7001".parse().unwrap(), "/status")
        })
        .and_then(|b| serde_json::from_str::<serde_json::Value>(&b).ok())
        .is_some_and(|s| s["tunnel"] == "up")
    }

    /// The methods `--print-firewall` prints, recommended first: each one's
    /// setup and teardown commands.
    fn firewall_methods(&self, extra: &[&str]) -> Vec<(Vec<String>, Vec<String>)> {
        let out = Command::new(BIN)
            .args(["edge", "--transparent", "[::]:7000", "--optimize"])
            .arg(format!("{SERVER}:{OPTIMIZED}-{OPTIMIZED_TOO}"))
            .arg("--optimize")
            .arg(format!("[{SERVER6}/128]:{OPTIMIZED}-{OPTIMIZED_TOO}"))
            .args(extra)
            .args(["--lan-if", &self.lan_if(), "--print-firewall"])
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        let text = String::from_utf8(out.stdout).unwrap();
        let methods: Vec<(Vec<String>, Vec<String>)> = text
            .split("\n\n")
            .filter(|block| block.contains("# Teardown:"))
            .map(|block| {
                let (setup, teardown) = block.split_once("# Teardown:").unwrap();
                let commands = |part: &str| -> Vec<String> {
                    part.lines()
                        .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
                        .map(String::from)
                        .collect()
                };
                (commands(setup), commands(teardown))
            })
            .collect();
        assert!(methods.len() >= 4, "methods with their teardown:\n{text}");
        methods
    }

    /// Runs `commands` in the edge namespace, each on its own.
    fn apply(&self, commands: &[String]) {
        for c in commands {
            let out = Command::new("ip")
                .args(["netns", "exec", &self.ns("ed"), "sh", "-c", c])
                .output()
                .unwrap();
            assert!(out.status.success(), "{c}: {out:?}");
        }
    }

    /// What the client gets from `server:port`: the server's banner, or
    /// `None` when it cannot reach it within `within`.
    fn fetch(&self, server: &str, port: u16, within: Duration) -> Option<String> {
        let dest = SocketAddr::new(server.parse().unwrap(), port);
        let mut tcp = in_ns(&self.ns("cl"), || TcpStream::connect_timeout(&dest, within)).ok()?;
        tcp.set_read_timeout(Some(within)).unwrap();
        let mut banner = String::new();
        let _ = tcp.read_to_string(&mut banner);
        (!banner.is_empty()).then_some(banner)
    }
}

impl Drop for Topology {
    fn drop(&mut self) {
        for node in &mut self.nodes {
            let _ = node.kill();
            let _ = node.wait();
        }
        self.remove();
    }
}

fn run(cmd: &str) {
    let out = Command::new("sh").args(["-c", cmd]).output().unwrap();
    assert!(out.status.success(), "{cmd}: {out:?}");
}

/// Runs `f` on a thread inside network namespace `ns`; sockets it creates
/// stay in that namespace wherever they are used later.
fn in_ns<T: Send>(ns: &str, f: impl FnOnce() -> T + Send) -> T {
    std::thread::scope(|scope| {
        scope
            .spawn(|| {
                let file = File::open(format!("/var/run/netns/{ns}")).unwrap();
                nix::sched::setns(file, nix::sched::CloneFlags::CLONE_NEWNET).unwrap();
                f()
            })
            .join()
            .unwrap()
    })
}

/// A server in the server namespace: each connection gets
/// "PORT from PEER-ADDRESS\n" and is held open (for `hold`) or closed.
fn serve(topo: &Topology, server: &str, port: u16, hold: bool) -> Arc<Mutex<Vec<TcpStream>>> {
    let addr = SocketAddr::new(server.parse().unwrap(), port);
    let listener: TcpListener = in_ns(&topo.ns("sv"), || {
        let socket = socket2::Socket::new(
            socket2::Domain::for_address(addr),
            socket2::Type::STREAM,
            None,
        )
        .unwrap();
        socket.bind(&addr.into()).unwrap();
        socket.listen(4096).unwrap();
        socket.into()
    });
    let held = Arc::new(Mutex::new(Vec::new()));
    let kept = held.clone();
    std::thread::spawn(move || {
        for tcp in listener.incoming() {
            let Ok(mut tcp) = tcp else { continue };
            let peer = tcp
                .peer_addr()
                .map(|p| p.ip().to_string())
                .unwrap_or_default();
            let _ = tcp.write_all(format!("{port} from {peer}\n").as_bytes());
            if hold {
                kept.lock().unwrap().push(tcp);
            }
        }
    });
    held
}

#[test]
fn flows_not_optimized_never_pass_the_forward_policy_tunnel_up_or_down() {
    crate::common::require_root();
    let mut topo = Topology::new("f");
    for server in [SERVER, SERVER6] {
        serve(&topo, server, OPTIMIZED, false);
        serve(&topo, server, MANAGEMENT, false);
    }
    let (core, _edge) = topo.start_nodes(&["--fail", "open"]);
    let methods = topo.firewall_methods(&[]);
    let short = Duration::from_millis(1500);

    // Tunnel up: the optimized port is reached through the tunnel (the core
    // connects from the server host), the management port not at all.
    for (setup, teardown) in &methods {
        topo.apply(setup);
        for server in [SERVER, SERVER6] {
            let got = topo.fetch(server, OPTIMIZED, Duration::from_secs(5));
            assert_eq!(
                got.as_deref(),
                Some(&*format!("{OPTIMIZED} from {server}\n")),
                "{setup:?}\nedge log:\n{}",
                topo.log("edge")
            );
            let got = topo.fetch(server, MANAGEMENT, short);
            assert_eq!(got, None, "the management port was reached with {setup:?}");
        }
        topo.apply(teardown);
    }

    // Hand-written rules that divert every TCP flow: the edge refuses what
    // --optimize does not select (it does not connect it itself).
    let lan = topo.lan_if();
    let divert_all = [
        "ip rule add fwmark 0x77 lookup 177".to_owned(),
        "ip route add local 0.0.0.0/0 dev lo table 177".to_owned(),
        format!(
            "iptables -t mangle -A PREROUTING -i {lan} -p tcp -j TPROXY --on-port 7000 --tproxy-mark 0x77/0xffffffff"
        ),
    ];
    topo.apply(&divert_all);
    assert!(topo
        .fetch(SERVER, OPTIMIZED, Duration::from_secs(5))
        .is_some());
    assert_eq!(topo.fetch(SERVER, MANAGEMENT, short), None);
    assert!(
        topo.log("edge")
            .contains("matches no --optimize rule: refused"),
        "{}",
        topo.log("edge")
    );
    topo.apply(&[
        format!(
            "iptables -t mangle -D PREROUTING -i {lan} -p tcp -j TPROXY --on-port 7000 --tproxy-mark 0x77/0xffffffff"
        ),
        "ip rule del fwmark 0x77 lookup 177".to_owned(),
        "ip route del local 0.0.0.0/0 dev lo table 177".to_owned(),
    ]);

    // Tunnel down under --fail open: nothing is reached.
    let _ = topo.nodes[core].kill();
    let _ = topo.nodes[core].wait();
    assert!(
        crate::common::eventually(Duration::from_secs(30), || !topo.tunnel_up()),
        "the tunnel stays up without a core"
    );
    std::thread::sleep(Duration::from_millis(200));
    for (setup, teardown) in &methods {
        topo.apply(setup);
        for server in [SERVER, SERVER6] {
            for port in [OPTIMIZED, MANAGEMENT] {
                let got = topo.fetch(server, port, short);
                assert_eq!(
                    got, None,
                    "{server} port {port} was reached with the tunnel down, {setup:?}"
                );
            }
        }
        topo.apply(teardown);
    }

    // With the recommended rules, --fail open means the kernel routes the
    // flow: once FORWARD lets it, it arrives from the client's own address.
    topo.apply(&methods[0].0);
    topo.sh(
        "ed",
        "iptables -P FORWARD ACCEPT && ip6tables -P FORWARD ACCEPT",
    );
    for (server, client) in [(SERVER, CLIENT), (SERVER6, CLIENT6)] {
        let got = topo.fetch(server, OPTIMIZED, Duration::from_secs(5));
        assert_eq!(
            got.as_deref(),
            Some(&*format!("{OPTIMIZED} from {client}\n"))
        );
    }
    topo.apply(&methods[0].1);
}

/// A UDP server in the server namespace: each datagram gets
/// "PORT from PEER-ADDRESS: DATAGRAM" back.
fn serve_udp(topo: &Topology, server: &str, port: u16) {
    let addr = SocketAddr::new(server.parse().unwrap(), port);
    let socket = in_ns(&topo.ns("sv"), || UdpSocket::bind(addr).unwrap());
    std::thread::spawn(move || {
        let mut buf = [0u8; 2048];
        while let Ok((n, peer)) = socket.recv_from(&mut buf) {
            let text = String::from_utf8_lossy(&buf[..n]);
            let answer = format!("{port} from {}: {text}", peer.ip());
            let _ = socket.send_to(answer.as_bytes(), peer);
        }
    });
}

/// Two datagrams from one client socket to `server:port`: the answers and
/// where they came from.
fn ask_udp(topo: &Topology, server: &str, port: u16) -> Vec<(String, SocketAddr)> {
    let to = SocketAddr::new(server.parse().unwrap(), port);
    let any = if to.is_ipv6() { "[::]:0" } else { "0.0.0.0:0" };
    let socket = in_ns(&topo.ns("cl"), || UdpSocket::bind(any).unwrap());
    socket
        .set_read_timeout(Some(Duration::from_millis(1500)))
        .unwrap();
    let mut answers = Vec::new();
    for ask in [&b"one"[..], b"two"] {
        socket.send_to(ask, to).unwrap();
        let mut buf = [0u8; 2048];
        if let Ok((n, from)) = socket.recv_from(&mut buf) {
            answers.push((String::from_utf8_lossy(&buf[..n]).into_owned(), from));
        }
    }
    answers
}

#[test]
fn transparent_udp_reaches_optimized_destinations_through_the_tunnel_only() {
    crate::common::require_root();
    let mut topo = Topology::new("u");
    for server in [SERVER, SERVER6] {
        serve_udp(&topo, server, OPTIMIZED);
        serve_udp(&topo, server, MANAGEMENT);
    }
    let udp = ["--transparent-udp", "[::]:7002"];
    topo.start_nodes(&udp);
    let methods = topo.firewall_methods(&udp);
    // The two TPROXY methods; REDIRECT carries no UDP.
    for (setup, teardown) in &methods[..2] {
        topo.apply(setup);
        for server in [SERVER, SERVER6] {
            // Through the tunnel: the core (on the server host) sends, and
            // the answers come back from the address the client sent to.
            let to = SocketAddr::new(server.parse().unwrap(), OPTIMIZED);
            let answer = |ask| (format!("{OPTIMIZED} from {server}: {ask}"), to);
            assert_eq!(
                ask_udp(&topo, server, OPTIMIZED),
                [answer("one"), answer("two")],
                "{setup:?}\nedge log:\n{}",
                topo.log("edge")
            );
            assert_eq!(ask_udp(&topo, server, MANAGEMENT), [], "{setup:?}");
        }
        topo.apply(teardown);
    }
    let status = in_ns(&topo.ns("ed"), || {
        crate::common::http_get("127.0.0.1:7001".parse().unwrap(), "/status")
    })
    .and_then(|b| serde_json::from_str::<serde_json::Value>(&b).ok())
    .unwrap();
    // One flow per method, address family and client socket.
    assert_eq!(status["udp"]["flows"], 4, "{}", status["udp"]);
}

/// Raises this process's open-file limit to its hard limit (children
/// inherit it); returns the limit.
fn raise_fd_limit() -> u64 {
    run(&format!(
        "prlimit --pid {} --nofile=$(ulimit -Hn):$(ulimit -Hn)",
        std::process::id()
    ));
    let out = Command::new("sh")
        .args(["-c", "ulimit -Hn"])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout)
        .trim()
        .parse()
        .unwrap_or(u64::MAX)
}

#[test]
fn eight_thousand_open_connections_do_not_hang_new_ones() {
    crate::common::require_root();
    const OPEN: usize = 8_000;
    const NEW: usize = 400;
    // This process holds both ends' sockets (the clients' and the server's).
    let limit = raise_fd_limit();
    assert!(
        limit > 2 * OPEN as u64 + 1_000,
        "the open-file limit {limit} is too low"
    );
    let mut topo = Topology::new("p");
    let held = serve(&topo, SERVER, OPTIMIZED, true);
    serve(&topo, SERVER, OPTIMIZED_TOO, false);
    topo.start_nodes(&[]);
    let methods = topo.firewall_methods(&[]);
    // The recommended rules.
    topo.apply(&methods[0].0);

    let dest: SocketAddr = format!("{SERVER}:{OPTIMIZED}").parse().unwrap();
    let started = Instant::now();
    let mut open = in_ns(&topo.ns("cl"), || {
        (0..OPEN)
            .map(|_| TcpStream::connect_timeout(&dest, Duration::from_secs(5)).unwrap())
            .collect::<Vec<_>>()
    });
    let mut ports = std::collections::HashSet::new();
    for (i, tcp) in open.iter_mut().enumerate() {
        tcp.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        let mut byte = [0u8; 1];
        if let Err(e) = tcp.read_exact(&mut byte) {
            let tail = |name| {
                let log = topo.log(name);
                log.lines().rev().take(20).collect::<Vec<_>>().join("\n")
            };
            panic!(
                "open connection {i} got no answer: {e}\nedge:\n{}\ncore:\n{}",
                tail("edge"),
                tail("core")
            );
        }
        ports.insert(tcp.local_addr().unwrap().port());
    }
    assert_eq!(held.lock().unwrap().len(), OPEN);
    eprintln!("{OPEN} connections open in {:?}", started.elapsed());

    // New connections to another destination, 8 at a time.
    let dest: SocketAddr = format!("{SERVER}:{OPTIMIZED_TOO}").parse().unwrap();
    let started = Instant::now();
    let results: Vec<(u16, bool)> = in_ns(&topo.ns("cl"), || {
        std::thread::scope(|scope| {
            let workers: Vec<_> = (0..8)
                .map(|_| {
                    scope.spawn(move || {
                        (0..NEW / 8)
                            .map(|_| {
                                let tcp = socket2::Socket::new(
                                    socket2::Domain::IPV4,
                                    socket2::Type::STREAM,
                                    None,
                                )
                                .unwrap();
                                let connected =
                                    tcp.connect_timeout(&dest.into(), Duration::from_secs(3));
                                let port = tcp
                                    .local_addr()
                                    .ok()
                                    .and_then(|a| a.as_socket())
                                    .map_or(0, |a| a.port());
                                let mut tcp = TcpStream::from(tcp);
                                tcp.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
                                let mut banner = String::new();
                                let answered = connected.is_ok()
                                    && tcp.read_to_string(&mut banner).is_ok()
                                    && banner.starts_with(&format!("{OPTIMIZED_TOO} "));
                                (port, answered)
                            })
                            .collect::<Vec<_>>()
                    })
                })
                .collect();
            workers
                .into_iter()
                .flat_map(|w| w.join().unwrap())
                .collect()
        })
    });
    // (Threads spawned from a thread inside a namespace are in it too.)
    let shared_port = results.iter().filter(|(p, _)| ports.contains(p)).count();
    let hung: Vec<u16> = results
        .iter()
        .filter(|(_, ok)| !ok)
        .map(|(p, _)| *p)
        .collect();
    eprintln!(
        "{NEW} new connections in {:?}: {shared_port} from a port an open connection uses, {} hung",
        started.elapsed(),
        hung.len()
    );
    assert!(
        hung.is_empty(),
        "{} new connections hung: ports {hung:?}",
        hung.len()
    );
    // The case that collides under NAT happened.
    assert!(shared_port > 0, "no new connection reused a source port");
    drop(open);
    topo.apply(&methods[0].1);
}
