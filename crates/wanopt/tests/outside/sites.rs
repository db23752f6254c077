//! Many peers: `[[peer]]` sections with per-peer allowlists and routes,
//! `wanopt run --config`, and reloads (SIGHUP, `wanopt reload`) that
//! change peers and allowlists while a transfer on an unchanged peer goes
//! on byte-exact. Real processes on loopback.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::common::{
    echo_server, eventually, free_tcp, free_udp, http_get, Keys, Node, Pattern, BIN,
};

/// Starts `wanopt ARGS...` (a node command whose config file sets its
/// control address `control`), its log kept.
fn start(keys: &Keys, name: &str, args: &[&str], control: SocketAddr) -> Node {
    let log = keys.dir.path().join(format!("{name}.log"));
    let child = Command::new(BIN)
        .args(args)
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

/// Writes `name.toml` in the keys' folder: `body`, with the node's key,
/// control address and cache dir given relative to the file.
fn config(keys: &Keys, name: &str, body: &str) -> (PathBuf, SocketAddr) {
    keys.key(name);
    let control = free_tcp();
    let path = keys.dir.path().join(format!("{name}.toml"));
    write_config(&path, name, control, body);
    (path, control)
}

fn write_config(path: &Path, name: &str, control: SocketAddr, body: &str) {
    let text = format!(
        "key = \"{name}.key\"\ncontrol = \"{control}\"\ncache-dir = \"cache-{name}\"\n{body}\n"
    );
    std::fs::write(path, text).unwrap();
}

fn run(keys: &Keys, name: &str, path: &Path, control: SocketAddr) -> Node {
    start(
        keys,
        name,
        &["run", "--config", path.to_str().unwrap()],
        control,
    )
}

/// Whether a connection to `listen` echoes what it sends.
fn echoes(listen: SocketAddr) -> bool {
    let Ok(mut s) = TcpStream::connect(listen) else {
        return false;
    };
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    if s.write_all(b"hello through the tunnel").is_err() {
        return false;
    }
    let mut buf = [0u8; 24];
    s.read_exact(&mut buf).is_ok() && &buf == b"hello through the tunnel"
}

/// The peers of a node's /status that are up.
fn peers_up(node: &Node) -> usize {
    node.status()
        .and_then(|s| {
            s["peers"]
                .as_array()
                .map(|p| p.iter().filter(|p| p["state"] == "up").count())
        })
        .unwrap_or(0)
}

/// Flows a node carried so far.
fn flows_total(node: &Node) -> u64 {
    node.status()
        .and_then(|s| s["flows_total"].as_u64())
        .unwrap_or(0)
}

fn peer(keys: &Keys, name: &str, extra: &str) -> String {
    let (_, public) = keys.key(name);
    format!("[[peer]]\npublic-key = \"{public}\"\n{extra}\n")
}

fn edge_to(keys: &Keys, name: &str, core: (&str, SocketAddr), forwards: &[String]) -> Node {
    let (key, _) = keys.key(name);
    let (_, core_pub) = keys.key(core.0);
    let control = free_tcp();
    let mut args: Vec<String> = vec![
        "edge".into(),
        "--core".into(),
        core.1.to_string(),
        "--key".into(),
        key.display().to_string(),
        "--peer-key".into(),
        core_pub,
        "--control".into(),
        control.to_string(),
        "--no-reduce".into(),
    ];
    for f in forwards {
        args.push("--forward".into());
        args.push(f.clone());
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    start(keys, name, &args, control)
}

#[test]
fn one_core_serves_three_edges_each_reaching_only_its_own() {
    let keys = Keys::new();
    let servers = [echo_server(), echo_server(), echo_server()];
    let listen = free_udp();
    let sections: String = (0..3)
        .map(|i| {
            peer(
                &keys,
                &format!("edge{i}"),
                &format!("allow = [\"{}\"]", servers[i]),
            )
        })
        .collect();
    let (path, control) = config(
        &keys,
        "core",
        &format!("listen = \"{listen}\"\nno-reduce = true\n{sections}"),
    );
    // `wanopt core` reads the same sections as `wanopt run`.
    let core = start(
        &keys,
        "core",
        &["core", "--config", path.to_str().unwrap()],
        control,
    );
    let mut edges = Vec::new();
    let mut forwards = Vec::new();
    for i in 0..3 {
        let own = free_tcp();
        let other = free_tcp();
        let edge = edge_to(
            &keys,
            &format!("edge{i}"),
            ("core", listen),
            &[
                format!("{own}={}", servers[i]),
                format!("{other}={}", servers[(i + 1) % 3]),
            ],
        );
        edge.wait_tunnel_up(Duration::from_secs(15));
        edges.push(edge);
        forwards.push((own, other));
    }
    assert!(
        eventually(Duration::from_secs(10), || peers_up(&core) == 3),
        "{}",
        core.log_text()
    );
    for (i, (own, other)) in forwards.iter().enumerate() {
        assert!(echoes(*own), "edge{i} cannot reach its own server");
        assert!(!echoes(*other), "edge{i} reached another edge's server");
    }
    assert!(
        core.log_text().contains("not permitted by the allowlist"),
        "{}",
        core.log_text()
    );
}

#[test]
fn an_edge_routes_by_prefix_to_two_cores() {
    let keys = Keys::new();
    // Two servers on two loopback addresses; core a takes 127.0.0.2/32,
    // core b the rest of 127.0.0.0/8.
    let server = |ip: &str| {
        let listener = TcpListener::bind(format!("{ip}:0")).unwrap();
        let addr = listener.local_addr().unwrap();
        std::thread::spawn(move || {
            for s in listener.incoming().flatten() {
                std::thread::spawn(move || {
                    let mut s = s;
                    let mut buf = [0u8; 4096];
                    while let Ok(n) = s.read(&mut buf) {
                        if n == 0 || s.write_all(&buf[..n]).is_err() {
                            break;
                        }
                    }
                });
            }
        });
        addr
    };
    let (near, far) = (server("127.0.0.2"), server("127.0.0.3"));
    let mut cores = Vec::new();
    let mut endpoints = Vec::new();
    for name in ["corea", "coreb"] {
        let listen = free_udp();
        let (path, control) = config(
            &keys,
            name,
            &format!(
                "listen = \"{listen}\"\nno-reduce = true\n{}",
                peer(&keys, "edge", "allow = [\"127.0.0.0/8\"]")
            ),
        );
        cores.push(run(&keys, name, &path, control));
        endpoints.push(listen);
    }
    let (to_near, to_far) = (free_tcp(), free_tcp());
    let (path, control) = config(
        &keys,
        "edge",
        &format!(
            "no-reduce = true\nforward = [\"{to_near}={near}\", \"{to_far}={far}\"]\n{}{}",
            peer(
                &keys,
                "corea",
                &format!(
                    "endpoint = \"{}\"\nroutes = [\"127.0.0.2/32\"]",
                    endpoints[0]
                )
            ),
            peer(
                &keys,
                "coreb",
                &format!(
                    "endpoint = \"{}\"\nroutes = [\"127.0.0.0/8\"]",
                    endpoints[1]
                )
            ),
        ),
    );
    let edge = run(&keys, "edge", &path, control);
    assert!(
        eventually(Duration::from_secs(15), || peers_up(&edge) == 2),
        "{}",
        edge.log_text()
    );
    assert!(echoes(to_near), "{}", edge.log_text());
    assert!(echoes(to_far), "{}", edge.log_text());
    assert!(echoes(to_far), "{}", edge.log_text());
    assert!(
        eventually(Duration::from_secs(5), || flows_total(&cores[0]) == 1
            && flows_total(&cores[1]) == 2),
        "core a carried {} flow(s), core b {}",
        flows_total(&cores[0]),
        flows_total(&cores[1])
    );
}

#[test]
fn a_node_dials_one_peer_and_accepts_another() {
    let keys = Keys::new();
    let (server_up, server_here) = (echo_server(), echo_server());
    // hub: accepts the branch; dials the core.
    let core_listen = free_udp();
    let (path, control) = config(
        &keys,
        "core",
        &format!(
            "listen = \"{core_listen}\"\nno-reduce = true\n{}",
            peer(&keys, "hub", &format!("allow = [\"{server_up}\"]"))
        ),
    );
    let core = run(&keys, "core", &path, control);
    let hub_listen = free_udp();
    let via_hub = free_tcp();
    let (path, control) = config(
        &keys,
        "hub",
        &format!(
            "listen = \"{hub_listen}\"\nno-reduce = true\nforward = [\"{via_hub}={server_up}\"]\n{}{}",
            peer(&keys, "branch", &format!("allow = [\"{server_here}\"]")),
            peer(&keys, "core", &format!("endpoint = \"{core_listen}\"")),
        ),
    );
    let hub = run(&keys, "hub", &path, control);
    let via_branch = free_tcp();
    let branch = edge_to(
        &keys,
        "branch",
        ("hub", hub_listen),
        &[format!("{via_branch}={server_here}")],
    );
    branch.wait_tunnel_up(Duration::from_secs(15));
    assert!(
        eventually(Duration::from_secs(15), || peers_up(&hub) == 2),
        "{}",
        hub.log_text()
    );
    let status = hub.status().unwrap();
    assert_eq!(status["role"], "edge+core", "{status}");
    assert!(echoes(via_branch), "{}", hub.log_text());
    assert!(echoes(via_hub), "{}", hub.log_text());
    assert!(eventually(Duration::from_secs(5), || flows_total(&core) == 1));

    // The core removed from the hub's file: its tunnel closes and stays
    // closed (the hub's accepting side does not take it back), and the
    // hub lists only the branch.
    write_config(
        &path,
        "hub",
        control,
        &format!(
            "listen = \"{hub_listen}\"\nno-reduce = true\nforward = [\"{via_hub}={server_up}\"]\n{}",
            peer(&keys, "branch", &format!("allow = [\"{server_here}\"]")),
        ),
    );
    hub.signal("HUP");
    assert!(
        eventually(Duration::from_secs(10), || peers_up(&core) == 0),
        "{}",
        hub.log_text()
    );
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(peers_up(&core), 0, "{}", core.log_text());
    let status = hub.status().unwrap();
    let peers = status["peers"].as_array().unwrap();
    assert_eq!(peers.len(), 1, "{status}");
    assert_eq!(peers[0]["state"], "up", "{status}");
    assert!(echoes(via_branch), "{}", hub.log_text());
    assert!(!echoes(via_hub));
}

#[test]
fn bad_peers_are_one_line_and_exit_2() {
    let keys = Keys::new();
    let (_, own) = keys.key("node");
    let cases = [
        (
            format!(
                "listen = \"{}\"\n[[peer]]\npublic-key = \"{own}\"\n",
                free_udp()
            ),
            "this node's own key",
        ),
        (
            format!(
                "forward = [\"{}=127.0.0.1:9\"]\n{}",
                free_tcp(),
                peer(&keys, "core", "endpoint = \"127.0.0.1\"")
            ),
            "expected HOST:PORT",
        ),
        (
            format!(
                "listen = \"{}\"\n{}",
                free_udp(),
                peer(&keys, "core", "routes = [\"10.0.0.0/8\"]")
            ),
            "routes but no endpoint",
        ),
    ];
    for (body, needle) in cases {
        let (path, _) = config(&keys, "node", &body);
        let out = Command::new(BIN)
            .args(["run", "--config", path.to_str().unwrap()])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{body}: {stderr}");
        assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
        assert!(stderr.contains(needle), "{needle:?} not in {stderr}");
    }
}

/// A transfer through `listen` to an echo server: `total` bytes sent in
/// paced chunks while the echo is read back and compared.
fn long_transfer(listen: SocketAddr, total: usize) -> std::thread::JoinHandle<Result<(), String>> {
    std::thread::spawn(move || {
        let s = TcpStream::connect(listen).map_err(|e| e.to_string())?;
        s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        let mut writer = s.try_clone().unwrap();
        let sender = std::thread::spawn(move || {
            let mut pattern = Pattern::new(7);
            let mut chunk = vec![0u8; 256 * 1024];
            let mut sent = 0;
            while sent < total {
                pattern.fill(&mut chunk);
                writer.write_all(&chunk).map_err(|e| e.to_string())?;
                sent += chunk.len();
                std::thread::sleep(Duration::from_millis(40));
            }
            writer
                .shutdown(std::net::Shutdown::Write)
                .map_err(|e| e.to_string())
        });
        let mut reader = s;
        let mut expected = Pattern::new(7);
        let mut want = vec![0u8; 256 * 1024];
        let mut got = vec![0u8; 256 * 1024];
        let mut received = 0;
        while received < total {
            expected.fill(&mut want);
            reader
                .read_exact(&mut got)
                .map_err(|e| format!("after {received} bytes: {e}"))?;
            if got != want {
                return Err(format!("bytes differ after {received}"));
            }
            received += got.len();
        }
        sender.join().unwrap()?;
        Ok(())
    })
}

#[test]
fn reload_changes_peers_and_allowlists_while_a_transfer_goes_on() {
    let keys = Keys::new();
    let (first, second, third) = (echo_server(), echo_server(), echo_server());
    let listen = free_udp();
    let body = |sections: &str| format!("listen = \"{listen}\"\nno-reduce = true\n{sections}");
    let (path, control) = config(
        &keys,
        "core",
        &body(&peer(&keys, "one", &format!("allow = [\"{first}\"]"))),
    );
    let core = run(&keys, "core", &path, control);
    let (one_first, one_third) = (free_tcp(), free_tcp());
    let one = edge_to(
        &keys,
        "one",
        ("core", listen),
        &[
            format!("{one_first}={first}"),
            format!("{one_third}={third}"),
        ],
    );
    one.wait_tunnel_up(Duration::from_secs(15));
    let two_second = free_tcp();
    let two = edge_to(
        &keys,
        "two",
        ("core", listen),
        &[format!("{two_second}={second}")],
    );
    assert!(!echoes(one_third), "reached a server not yet allowed");
    // 24 MiB paced over about 4 s, across every reload below.
    let transfer = long_transfer(one_first, 96 * 256 * 1024);
    std::thread::sleep(Duration::from_millis(500));

    // SIGHUP: peer two added, one's allowlist grown.
    write_config(
        &path,
        "core",
        control,
        &body(&format!(
            "{}{}",
            peer(&keys, "one", &format!("allow = [\"{first}\", \"{third}\"]")),
            peer(&keys, "two", &format!("allow = [\"{second}\"]"))
        )),
    );
    core.signal("HUP");
    two.wait_tunnel_up(Duration::from_secs(15));
    assert!(echoes(two_second), "{}", core.log_text());
    assert!(
        eventually(Duration::from_secs(5), || echoes(one_third)),
        "{}",
        core.log_text()
    );

    // A file that does not parse: refused, the running one kept.
    std::fs::write(&path, "listen = [broken").unwrap();
    let out = Command::new(BIN)
        .args(["reload", "--control", &control.to_string()])
        .output()
        .unwrap();
    assert!(!out.status.success(), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("config file"), "{stderr}");
    assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
    assert!(echoes(two_second), "{}", core.log_text());

    // A flow to the third server, open while its permission goes.
    let mut held = TcpStream::connect(one_third).unwrap();
    held.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    held.write_all(b"ping").unwrap();
    let mut pong = [0u8; 4];
    held.read_exact(&mut pong).unwrap();

    // `wanopt reload`: peer two removed, one back to its first server.
    write_config(
        &path,
        "core",
        control,
        &body(&peer(&keys, "one", &format!("allow = [\"{first}\"]"))),
    );
    let out = Command::new(BIN)
        .args(["reload", "--control", &control.to_string()])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(said.contains("1 removed"), "{said}");
    assert!(
        eventually(Duration::from_secs(10), || !echoes(two_second)),
        "peer two still reaches its server after its removal"
    );
    assert!(
        !echoes(one_third),
        "one still reaches the server taken from it"
    );
    // The open flow to it was reset by the core, not left running.
    let mut rest = Vec::new();
    let ended = held.read_to_end(&mut rest);
    let timed_out = ended.as_ref().is_err_and(|e| {
        matches!(
            e.kind(),
            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
        )
    });
    assert!(
        !timed_out && rest.is_empty(),
        "the flow to a server no longer allowed went on: {ended:?}"
    );
    let status = core.status().unwrap();
    assert_eq!(status["flow_resets"]["policy"], 1, "{status}");
    let log = core.log_text();
    assert!(log.contains("configuration reloaded"), "{log}");
    assert!(
        log.contains("configuration not reloaded, the running one is kept"),
        "{log}"
    );
    let result = transfer.join().unwrap();
    assert_eq!(result, Ok(()), "{}", core.log_text());
    assert!(echoes(one_first));
    assert!(http_get(control, "/status").is_some());
}

#[test]
fn an_endpoint_that_does_not_resolve_is_retried() {
    let keys = Keys::new();
    let (key, _) = keys.key("edge");
    let (_, core_pub) = keys.key("core");
    let control = free_tcp();
    let forward = format!("{}={}", free_tcp(), echo_server());
    let mut edge = start(
        &keys,
        "edge",
        &[
            "edge",
            "--core",
            "no-such-core.invalid:4433",
            "--key",
            key.to_str().unwrap(),
            "--peer-key",
            &core_pub,
            "--control",
            &control.to_string(),
            "--no-reduce",
            "--forward",
            &forward,
        ],
        control,
    );
    assert!(
        eventually(Duration::from_secs(10), || edge
            .log_text()
            .contains("cannot resolve no-such-core.invalid:4433")),
        "{}",
        edge.log_text()
    );
    std::thread::sleep(Duration::from_secs(1));
    assert!(
        edge.child.try_wait().unwrap().is_none(),
        "the edge stopped: {}",
        edge.log_text()
    );
    let status = edge.status().unwrap();
    assert_eq!(status["tunnel"], "down", "{status}");
}

#[test]
fn reload_changes_an_edges_routes_and_policy_on_a_kept_tunnel() {
    let keys = Keys::new();
    let server = echo_server();
    let listen = free_udp();
    let (path, control) = config(
        &keys,
        "core",
        &format!(
            "listen = \"{listen}\"\nno-reduce = true\n{}",
            peer(&keys, "edge", &format!("allow = [\"{server}\"]"))
        ),
    );
    let _core = run(&keys, "core", &path, control);
    let forward = free_tcp();
    let edge_body = |routes: &str, class: &str| {
        format!(
            "no-reduce = true\nforward = [\"{forward}={server}\"]\n{class}\n{}",
            peer(
                &keys,
                "core",
                &format!("endpoint = \"{listen}\"\nroutes = [{routes}]")
            )
        )
    };
    let (edge_path, edge_control) = config(&keys, "edge", &edge_body("\"10.0.0.0/8\"", ""));
    let edge = run(&keys, "edge", &edge_path, edge_control);
    edge.wait_tunnel_up(Duration::from_secs(15));
    // Its one peer's routes do not hold the server.
    assert!(!echoes(forward));
    assert!(
        eventually(Duration::from_secs(5), || edge
            .log_text()
            .contains("no peer's routes hold it")),
        "{}",
        edge.log_text()
    );
    write_config(
        &edge_path,
        "edge",
        edge_control,
        &edge_body(
            "\"127.0.0.0/8\"",
            "class = [\"name=bulk,tcp,priority=low\"]",
        ),
    );
    let out = Command::new(BIN)
        .args(["reload", "--control", &edge_control.to_string()])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        said.contains("1 kept") && said.contains("policy changed"),
        "{said}"
    );
    // The same tunnel: no reconnection.
    let status = edge.status().unwrap();
    assert_eq!(status["peers"][0]["reconnects"], 0, "{status}");
    let mut held = TcpStream::connect(forward).unwrap();
    held.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    held.write_all(b"ping").unwrap();
    let mut buf = [0u8; 4];
    held.read_exact(&mut buf).unwrap();
    assert_eq!(&buf, b"ping");
    let flows = http_get(edge_control, "/flows").unwrap();
    assert!(flows.contains("\"bulk\""), "{flows}");
}
