//! The command line's contract: exit codes, one-line errors, config files,
//! graceful shutdown.

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::process::Command;
use std::time::Duration;

use crate::common::*;

fn run(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(BIN).args(args).output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn assert_one_line_error(stderr: &str, needle: &str) {
    assert_eq!(stderr.trim_end().lines().count(), 1, "one line: {stderr}");
    assert!(stderr.starts_with("wanopt: "), "{stderr}");
    assert!(stderr.contains(needle), "{needle:?} not in {stderr}");
    assert!(!stderr.contains("panicked"));
    assert!(
        stderr.matches("(os error").count() <= 1,
        "a cause repeated: {stderr}"
    );
}

#[test]
fn keygen_and_pubkey_agree_and_keys_are_never_overwritten() {
    let keys = Keys::new();
    let path = keys.dir.path().join("k");
    let p = path.to_str().unwrap();
    let (code, public, _) = run(&["keygen", "--out", p]);
    assert_eq!(code, 0);
    assert_eq!(public.trim().len(), 44, "base64 of 32 bytes");
    let (code, again, _) = run(&["pubkey", p]);
    assert_eq!((code, again), (0, public.clone()));
    let (code, _, err) = run(&["keygen", "--out", p]);
    assert_eq!(code, 2);
    assert_one_line_error(&err, "refusing to overwrite");
    assert_eq!(run(&["pubkey", p]).1, public);
}

#[test]
fn bad_input_gets_one_clear_line_and_exit_code_2() {
    let keys = Keys::new();
    let (key, _) = keys.key("a");
    // The peer's key: never this node's own.
    let (_, public) = keys.key("b");
    let key = key.to_str().unwrap();
    // A config file with the other role's keys.
    let edge_toml = keys.dir.path().join("edge-with-allow.toml");
    std::fs::write(
        &edge_toml,
        "core = \"127.0.0.1:1\"\nallow = [\"10.0.0.0/8\"]\n",
    )
    .unwrap();
    let edge_toml = edge_toml.to_str().unwrap();
    let core_toml = keys.dir.path().join("core-with-forward.toml");
    std::fs::write(
        &core_toml,
        "listen = \"127.0.0.1:1\"\nforward = [\"127.0.0.1:1=127.0.0.1:2\"]\noptimize = [\"10.0.0.0/8\"]\n",
    )
    .unwrap();
    let core_toml = core_toml.to_str().unwrap();
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (
            vec![
                "edge",
                "--key",
                key,
                "--peer-key",
                &public,
                "--config",
                edge_toml,
            ],
            "allow is only for wanopt core, and this is wanopt edge",
        ),
        (
            vec![
                "core",
                "--key",
                key,
                "--peer-key",
                &public,
                "--config",
                core_toml,
            ],
            "forward, optimize are only for wanopt edge, and this is wanopt core",
        ),
        (
            vec![
                "core",
                "--listen",
                "127.0.0.1:1",
                "--key",
                "/nonexistent/key",
                "--peer-key",
                &public,
            ],
            "cannot read key file",
        ),
        (
            vec![
                "core",
                "--listen",
                "127.0.0.1:1",
                "--key",
                key,
                "--peer-key",
                "nope",
            ],
            "is not a wanopt public key",
        ),
        (
            vec!["core", "--listen", "127.0.0.1:1", "--key", key],
            "no peer key",
        ),
        (
            vec!["core", "--key", key, "--peer-key", &public],
            "no listen address",
        ),
        (
            vec![
                "core",
                "--listen",
                "127.0.0.1:1",
                "--key",
                key,
                "--peer-key",
                &public,
                "--allow",
                "10.0.0.0/99",
            ],
            "bad address rule",
        ),
        (
            vec![
                "edge",
                "--core",
                "127.0.0.1:1",
                "--key",
                key,
                "--peer-key",
                &public,
                "--forward",
                "127.0.0.1:0=127.0.0.1:9",
                "--class",
                "name=bulk,tcp,realtime",
            ],
            "realtime applies to UDP flows only",
        ),
        (
            vec![
                "edge",
                "--core",
                "127.0.0.1:1",
                "--key",
                key,
                "--peer-key",
                &public,
                "--forward",
                "nonsense",
            ],
            "bad forward",
        ),
        (
            vec![
                "edge",
                "--core",
                "127.0.0.1:1",
                "--key",
                key,
                "--peer-key",
                &public,
                "--config",
                "/nonexistent.toml",
            ],
            "cannot read config file",
        ),
        (
            vec!["status", "--control", "127.0.0.1:1"],
            "cannot reach the control API",
        ),
        (
            vec!["cache", "stats", "--control", "127.0.0.1:1"],
            "cannot reach the control API",
        ),
        (
            vec!["cache", "clear", "--control", "127.0.0.1:1"],
            "cannot reach the control API",
        ),
        (
            vec!["lab", "waas-files", "--out", "/proc/no/such/dir"],
            "cannot create output directory /proc/no/such/dir: ",
        ),
    ];
    for (args, needle) in cases {
        let (code, _, err) = run(&args);
        assert_ne!(code, 0, "{args:?}");
        assert_one_line_error(&err, needle);
    }
    // Something that is not a node at the control address: one line, not
    // its HTML error page.
    let web = TcpListener::bind("127.0.0.1:0").unwrap();
    let web_addr = web.local_addr().unwrap().to_string();
    std::thread::spawn(move || {
        for s in web.incoming() {
            let Ok(mut s) = s else { continue };
            let mut request = [0u8; 1024];
            let _ = s.read(&mut request);
            let page = "<!DOCTYPE html>\n<html><body>\n<h1>404</h1>\n</body></html>\n";
            let _ = write!(
                s,
                "HTTP/1.1 404 Not Found\r\nContent-Type: text/html\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{page}",
                page.len()
            );
        }
    });
    for args in [
        vec!["status", "--control", &web_addr],
        vec!["cache", "clear", "--control", &web_addr],
    ] {
        let (code, _, err) = run(&args);
        assert_eq!(code, 1, "{args:?}: {err}");
        assert_one_line_error(
            &err,
            "not as a wanopt node does (is a node's --control there?)",
        );
        assert!(!err.contains('<'), "{err}");
    }
    // Settings that would stall or fail every flow.
    let core = [
        "core",
        "--listen",
        "127.0.0.1:0",
        "--key",
        key,
        "--peer-key",
        &public,
    ];
    for (extra, needle) in [
        (
            ["--stream-window", "0"],
            "--stream-window 0 is too small: give at least 64KiB",
        ),
        (
            ["--connection-window", "1KiB"],
            "--connection-window 1024 is too small",
        ),
        (
            ["--connect-timeout", "0s"],
            "--connect-timeout must be more than 0",
        ),
        (
            ["--threads", "0"],
            "--threads 0: expected 1 to 1024 worker threads",
        ),
        (
            ["--tunnel-timeout", "100ms"],
            "--tunnel-timeout 100ms: expected 400ms to 10min",
        ),
        (
            ["--advertise", "0.0.0.0:4433"],
            "--advertise 0.0.0.0:4433: give the address and port edges reach this replica at",
        ),
    ] {
        let (code, _, err) = run(&[&core[..], &extra[..]].concat());
        assert_eq!(code, 2, "{extra:?}: {err}");
        assert_one_line_error(&err, needle);
    }
    // A byte cache too small to run with is a usage error too, found
    // before anything is created on disk; so is an edge with nothing to
    // accept.
    let cache = keys.dir.path().join("small-cache");
    let cache = cache.to_str().unwrap();
    for (size, needle) in [
        (
            "0",
            "--cache-size 0 bytes is too small: give at least 64MiB",
        ),
        ("63MiB", "--cache-size 66060288 bytes is too small"),
    ] {
        let extra = [
            "--allow",
            "127.0.0.1/32",
            "--cache-dir",
            cache,
            "--cache-size",
            size,
        ];
        let (code, _, err) = run(&[&core[..], &extra[..]].concat());
        assert_eq!(code, 2, "{size}: {err}");
        assert_one_line_error(&err, needle);
        assert!(!std::path::Path::new(cache).exists());
    }
    let (code, _, err) = run(&[
        "edge",
        "--core",
        "127.0.0.1:9",
        "--key",
        key,
        "--peer-key",
        &public,
        "--no-reduce",
    ]);
    assert_eq!(code, 2, "{err}");
    assert_one_line_error(&err, "the edge has nothing to accept");
    let (code, _, err) = run(&[
        "edge",
        "--core",
        "127.0.0.1:9",
        "--key",
        key,
        "--peer-key",
        &public,
        "--forward-udp",
        "5353",
    ]);
    assert_eq!(code, 2, "{err}");
    assert_one_line_error(&err, "bad udp forward \"5353\"");
    // clap's own usage errors also exit 2.
    assert_eq!(run(&["edge", "--fail", "sideways"]).0, 2);
    for flag in ["--cache-size", "--compressor-memory"] {
        let (code, _, err) = run(&["core", flag, "lots"]);
        assert_eq!(code, 2, "{flag}");
        assert_one_line_error(&err, "bad size");
    }
    let (code, _, err) = run(&["edge", "--duplication", "twice"]);
    assert_eq!(code, 2);
    assert_one_line_error(&err, "expected auto, tails or off");
    // clap's multi-line messages too, usage block left out.
    let (code, _, err) = run(&["probe"]);
    assert_eq!(code, 2);
    assert_one_line_error(&err, "required arguments were not provided: <TARGET>");

    // A core whose --cache-dir cannot be used exits non-zero without a
    // panic; the last line of its stderr, and the whole stderr.
    let core_with_cache = |dir: &std::path::Path| {
        let (code, _, err) = run(&[&core[..], &["--cache-dir", dir.to_str().unwrap()]].concat());
        assert_ne!(code, 0, "{err}");
        assert!(!err.contains("panicked"), "{err}");
        let last = err.trim_end().lines().last().unwrap_or_default().to_owned();
        (last, err)
    };
    // A cache directory that cannot be created: one line naming the fixes.
    let file = keys.dir.path().join("a-file");
    std::fs::write(&file, b"").unwrap();
    let (last, err) = core_with_cache(&file.join("cache"));
    assert!(
        last.starts_with("wanopt: cannot use cache directory"),
        "{err}"
    );
    assert!(last.contains("--no-reduce"), "{err}");
    // A file where the directory should be.
    let (last, err) = core_with_cache(&file);
    assert!(
        last.ends_with(&format!(
            "cannot use cache directory {}: not a directory (give --cache-dir DIR, or --no-reduce)",
            file.display()
        )),
        "{err}"
    );
}

#[test]
fn an_occupied_port_is_a_one_line_error() {
    let keys = Keys::new();
    let busy = TcpListener::bind("127.0.0.1:0").unwrap();
    let busy_addr = busy.local_addr().unwrap().to_string();
    let args = edge_args(
        &keys,
        free_udp(),
        &[],
        &["--forward", &format!("{busy_addr}=127.0.0.1:80")],
    );
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let (code, _, err) = run(&args);
    assert_eq!(code, 1);
    let last = err.trim_end().lines().last().unwrap_or_default().to_owned();
    assert!(last.starts_with("wanopt: cannot listen on"), "{err}");
    assert!(last.contains("in use"), "{err}");
}

#[test]
fn options_come_from_a_toml_file_and_flags_override_it() {
    let keys = Keys::new();
    let (core_key, core_pub) = keys.key("core");
    let (edge_key, edge_pub) = keys.key("edge");
    let echo = TcpListener::bind("127.0.0.1:0").unwrap();
    let echo_addr = echo.local_addr().unwrap();
    std::thread::spawn(move || {
        for s in echo.incoming() {
            let mut s = s.unwrap();
            let mut buf = Vec::new();
            s.read_to_end(&mut buf).unwrap();
            s.write_all(&buf).unwrap();
        }
    });
    let core_udp = free_udp();
    let core_file = keys.dir.path().join("core.toml");
    std::fs::write(
        &core_file,
        format!(
            "listen = \"{core_udp}\"\nkey = \"{}\"\npeer-key = [\"{edge_pub}\"]\nallow = [\"127.0.0.1\"]\nduplication = \"tails\"\ncompressor-memory = \"64MiB\"\nstream-window = \"16MiB\"\nconnection-window = 67108864\n",
            core_key.display()
        ),
    )
    .unwrap();
    let core = spawn(
        &keys,
        "core",
        &[
            "core".into(),
            "--config".into(),
            core_file.display().to_string(),
        ],
    );
    let listen = free_tcp();
    let edge_file = keys.dir.path().join("edge.toml");
    std::fs::write(
        &edge_file,
        format!(
            "core = \"{core_udp}\"\nkey = \"{}\"\npeer-key = [\"{core_pub}\"]\nforward = [\"127.0.0.1:1=127.0.0.1:2\"]\n",
            edge_key.display()
        ),
    )
    .unwrap();
    // The flag's forward replaces the file's.
    let edge = spawn(
        &keys,
        "edge",
        &[
            "edge".into(),
            "--config".into(),
            edge_file.display().to_string(),
            "--forward".into(),
            format!("{listen}={echo_addr}"),
        ],
    );
    edge.wait_tunnel_up(Duration::from_secs(10));
    let mut c = TcpStream::connect(listen).unwrap();
    c.write_all(b"from a file").unwrap();
    c.shutdown(Shutdown::Write).unwrap();
    let mut got = Vec::new();
    c.read_to_end(&mut got).unwrap();
    assert_eq!(got, b"from a file");
    // The core took `duplication` and `compressor-memory` from its file.
    let status = core.status().unwrap();
    assert_eq!(
        status["peers"][0]["duplication"]["mode"], "tails",
        "{status}"
    );
    assert_eq!(status["compressor_budget"], 64 << 20, "{status}");

    std::fs::write(&edge_file, "no-such-option = 1\n").unwrap();
    let (code, _, err) = run(&["edge", "--config", edge_file.to_str().unwrap()]);
    assert_eq!(code, 2);
    assert_one_line_error(&err, "unknown field");
    // Windows are sizes in either form, and too small is refused.
    for (setting, needle) in [
        (
            "stream-window = \"1KiB\"",
            "config file: stream-window = \"1KiB\" is too small",
        ),
        (
            "connection-window = 0",
            "config file: connection-window = 0 is too small",
        ),
        (
            "stream-window = \"wide\"",
            "config file: stream-window: bad size",
        ),
        (
            "threads = 2000",
            "config file: threads = 2000: expected 1 to 1024 worker threads",
        ),
    ] {
        std::fs::write(
            &edge_file,
            format!(
                "key = \"{}\"\npeer-key = [\"{core_pub}\"]\ncore = \"{core_udp}\"\n{setting}\n",
                edge_key.display()
            ),
        )
        .unwrap();
        let (code, _, err) = run(&["edge", "--config", edge_file.to_str().unwrap()]);
        assert_eq!(code, 2, "{setting}: {err}");
        assert_one_line_error(&err, needle);
    }
}

#[test]
fn a_public_key_file_as_key_exits_2_with_one_line() {
    use std::os::unix::fs::PermissionsExt;
    let keys = Keys::new();
    let (_, public) = keys.key("a");
    let (_, peer) = keys.key("b");
    // `wanopt keygen --out a.key > a.pub` leaves a file others can read.
    let own_pub = keys.dir.path().join("a.pub");
    std::fs::write(&own_pub, format!("{public}\n")).unwrap();
    std::fs::set_permissions(&own_pub, std::fs::Permissions::from_mode(0o644)).unwrap();
    // The peer's public key, even kept private.
    let peer_pub = keys.dir.path().join("b.pub");
    std::fs::write(&peer_pub, format!("{peer}\n")).unwrap();
    std::fs::set_permissions(&peer_pub, std::fs::Permissions::from_mode(0o600)).unwrap();
    for (file, needle) in [
        (&own_pub, "looks like a public key"),
        (&peer_pub, "which this node lists as a peer's"),
    ] {
        let args: Vec<String> = [
            "core",
            "--listen",
            &free_udp().to_string(),
            "--key",
            file.to_str().unwrap(),
            "--peer-key",
            &peer,
            "--allow",
            "127.0.0.1",
            "--no-reduce",
            "--control",
            &free_tcp().to_string(),
        ]
        .map(String::from)
        .to_vec();
        let (code, err) = run_refused(&args).expect("the node started with a public key as --key");
        assert_eq!(code, 2, "{err}");
        assert_one_line_error(&err, needle);
    }
}

#[test]
fn sighup_reloads_and_leaves_both_nodes_running() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let server = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for mut s in listener.incoming().flatten() {
            let _ = s.write_all(b"still here");
        }
    });
    let listen = free_tcp();
    let mut pair = Pair::start(&["127.0.0.1"], &[(listen, server.to_string())], &[]);
    for node in [&pair.edge, &pair.core] {
        node.signal("HUP");
    }
    for node in [&pair.edge, &pair.core] {
        assert!(
            eventually(Duration::from_secs(5), || node
                .log_text()
                .contains("configuration reloaded")),
            "{}",
            node.log_text()
        );
    }
    for node in [&mut pair.edge, &mut pair.core] {
        assert!(
            node.child.try_wait().unwrap().is_none(),
            "a node exited on SIGHUP"
        );
    }
    let mut c = TcpStream::connect(listen).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut got = Vec::new();
    c.read_to_end(&mut got).unwrap();
    assert_eq!(got, b"still here");
}

#[test]
fn sigterm_drains_live_flows_then_exits_cleanly() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let server = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        let mut buf = [0u8; 5];
        s.read_exact(&mut buf).unwrap();
        std::thread::sleep(Duration::from_millis(800));
        s.write_all(b"late answer").unwrap();
    });
    let listen = free_tcp();
    let mut pair = Pair::start(
        &["127.0.0.1"],
        &[(listen, server.to_string())],
        &["--drain", "5s"],
    );
    let mut c = TcpStream::connect(listen).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    c.write_all(b"hello").unwrap();
    std::thread::sleep(Duration::from_millis(200));
    pair.edge.signal("TERM");
    // New connections are no longer accepted...
    assert!(eventually(Duration::from_secs(3), || TcpStream::connect(
        listen
    )
    .is_err()));
    // ...but the live flow finishes.
    let mut got = Vec::new();
    c.read_to_end(&mut got).unwrap();
    assert_eq!(got, b"late answer");
    let status = pair.edge.child.wait().unwrap();
    assert!(status.success(), "{status:?}");
}

#[test]
fn print_firewall_names_the_port_and_the_optimized_prefixes() {
    let keys = Keys::new();
    let args = edge_args(
        &keys,
        free_udp(),
        &[],
        &[
            "--transparent",
            "0.0.0.0:7000",
            "--optimize",
            "198.18.3.0/24:80-90",
            "--lan-if",
            "lan0",
            "--print-firewall",
        ],
    );
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let (code, out, _) = run(&args);
    assert_eq!(code, 0);
    assert!(out.contains("iptables -t nat -A WANOPT -p tcp -d 198.18.3.0/24 --dport 80:90 -j REDIRECT --to-ports 7000"), "{out}");
    assert!(out.contains("iptables -t nat -A PREROUTING -i lan0 -p tcp -j WANOPT"));
    assert!(out.contains("redirect to :7000"));
    assert!(out.contains("TPROXY --on-port 7000"));
    // TPROXY is recommended, first; every method has its teardown.
    let first = out.find("tproxy ip to :7000").unwrap();
    assert!(first < out.find("REDIRECT").unwrap(), "{out}");
    assert_eq!(out.matches("# Teardown:").count(), 4, "{out}");
    // The interface from a config file (the flag still wins).
    let file = keys.dir.path().join("edge.toml");
    std::fs::write(
        &file,
        "lan-if = \"br-lan\"\ntransparent = \"0.0.0.0:7000\"\n",
    )
    .unwrap();
    let file = file.to_str().unwrap();
    let (code, out, _) = run(&["edge", "--config", file, "--print-firewall"]);
    assert_eq!(code, 0);
    assert!(out.contains("iifname \"br-lan\""), "{out}");
    let (code, out, _) = run(&[
        "edge",
        "--config",
        file,
        "--lan-if",
        "lan1",
        "--print-firewall",
    ]);
    assert_eq!(code, 0);
    assert!(
        out.contains("iifname \"lan1\"") && !out.contains("br-lan"),
        "{out}"
    );
}

#[test]
fn flows_and_metrics_show_a_live_flow_with_its_service() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let server = listener.local_addr().unwrap();
    let (tx, rx) = std::sync::mpsc::channel::<()>();
    std::thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        s.write_all(&[1u8; 50_000]).unwrap();
        let _ = rx.recv_timeout(Duration::from_secs(30));
    });
    let listen = free_tcp();
    let pair = Pair::start(&["127.0.0.1"], &[(listen, server.to_string())], &[]);
    let mut c = TcpStream::connect(listen).unwrap();
    c.write_all(b"abc").unwrap();
    let mut got = vec![0u8; 50_000];
    c.read_exact(&mut got).unwrap();
    let control = pair.edge.control.to_string();

    let (code, json, _) = run(&["flows", "--control", &control, "--json"]);
    assert_eq!(code, 0);
    let flows: serde_json::Value = serde_json::from_str(&json).unwrap();
    let row = &flows["flows"][0];
    assert_eq!(row["destination"], server.to_string());
    assert_eq!(row["services"][0], "tcp-opt");
    assert_eq!(row["bytes_to_client"], 50_000);
    assert_eq!(row["bytes_to_server"], 3);
    assert_eq!(row["state"], "open");

    let (code, table, _) = run(&["flows", "--control", &control]);
    assert_eq!(code, 0);
    assert!(
        table.contains(&server.to_string()) && table.contains("tcp-opt"),
        "{table}"
    );

    let (code, status, _) = run(&["status", "--control", &control]);
    assert_eq!(code, 0);
    assert!(
        status.contains("role        edge") && status.contains("tunnel      up"),
        "{status}"
    );
    assert!(status.contains("1 active"), "{status}");
    assert!(status.contains("dup       auto: tails off"), "{status}");

    let metrics = http_get(pair.edge.control, "/metrics").unwrap();
    assert!(
        metrics.contains("wanopt_flows_active{role=\"edge\"} 1"),
        "{metrics}"
    );
    assert!(
        metrics.contains("wanopt_tunnel_up{role=\"edge\",peer="),
        "{metrics}"
    );
    // Loopback loses nothing: `auto` keeps tail duplication off.
    let active = metrics
        .lines()
        .find(|l| l.starts_with("wanopt_tunnel_duplication_active{role=\"edge\",peer="));
    assert!(active.is_some_and(|l| l.ends_with(" 0")), "{metrics}");
    assert!(
        metrics.contains("wanopt_tunnel_duplicated_datagrams_total{role=\"edge\",peer="),
        "{metrics}"
    );
    let core_flows = http_get(pair.core.control, "/flows").unwrap();
    assert!(
        core_flows.contains("\"role\":\"core\"") && core_flows.contains("tcp-opt"),
        "{core_flows}"
    );
    // Both nodes' exposition passes Prometheus' own linter, and a peer has
    // one label name (its key) on tunnel and cache metrics alike.
    for node in [&pair.edge, &pair.core] {
        let metrics = http_get(node.control, "/metrics").unwrap();
        promtool_check(&metrics);
        assert!(!metrics.contains("peer_key="), "{metrics}");
    }
    tx.send(()).unwrap();
}

/// Runs `promtool check metrics` on an exposition (Debian's `prometheus`
/// package, which scripts/deps installs); fails without it.
fn promtool_check(metrics: &str) {
    let child = std::process::Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn();
    let Ok(mut child) = child else {
        panic!("promtool is not installed, the exposition cannot be linted: apt-get install prometheus (scripts/deps does)");
    };
    child
        .stdin
        .take()
        .unwrap()
        .write_all(metrics.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "promtool check metrics:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn a_control_address_answering_an_empty_error_is_named() {
    // Something other than a node (a proxy, another service) answers 502
    // with no body: the line says who answered what.
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    std::thread::spawn(move || {
        for conn in listener.incoming().flatten() {
            let mut conn = conn;
            let mut request = [0u8; 1024];
            let _ = conn.read(&mut request);
            let _ = conn.write_all(
                b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
            );
        }
    });
    for args in [
        vec!["status", "--control", &addr],
        vec!["cache", "clear", "--control", &addr],
    ] {
        let (code, _, err) = run(&args);
        assert_eq!(code, 1, "{args:?}");
        assert_one_line_error(&err, &format!("http://{addr}/"));
        assert!(err.contains("502"), "{err}");
    }
}

/// Standard output whose reader is gone before the command writes (as
/// `wanopt flows | head -1` once `head` has its line): every printing
/// command ends quietly with exit code 0, no "Broken pipe" and no panic.
#[test]
fn a_closed_standard_output_is_a_normal_end() {
    let keys = Keys::new();
    let (key, _) = keys.key("a");
    let key = key.to_str().unwrap().to_string();
    let node = spawn(&keys, "core", &core_args(&keys, free_udp(), &["127.0.0.1"]));
    assert!(
        eventually(Duration::from_secs(10), || node.status().is_some()),
        "{}",
        node.log_text()
    );
    let control = node.control.to_string();
    let firewall = edge_args(
        &keys,
        free_udp(),
        &[],
        &[
            "--transparent",
            "0.0.0.0:7000",
            "--optimize",
            "198.18.3.0/24",
            "--print-firewall",
        ],
    );
    let mut commands: Vec<Vec<&str>> = vec![
        vec!["flows", "--control", &control],
        vec!["flows", "--control", &control, "--json"],
        vec!["status", "--control", &control],
        vec!["cache", "stats", "--control", &control],
        vec![
            "window", "--rate", "250mbit", "--rtt", "150ms", "--loss", "1%",
        ],
        vec!["host-check", "--rate", "250mbit", "--rtt", "150ms"],
        vec!["pubkey", &key],
    ];
    commands.push(firewall.iter().map(String::as_str).collect());
    for args in commands {
        // A pipe whose reading end is closed before the command starts.
        let (reader, writer) = nix::unistd::pipe().unwrap();
        drop(reader);
        let out = Command::new(BIN)
            .args(&args)
            .stdout(std::process::Stdio::from(writer))
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{args:?}: {stderr}");
        assert!(
            !stderr.contains("Broken pipe") && !stderr.contains("panicked"),
            "{args:?}: {stderr}"
        );
        assert!(stderr.is_empty(), "{args:?}: {stderr}");
    }
}

/// Deletes the namespaces of a test lab, whatever the test left.
struct LabCleanup(String);

impl Drop for LabCleanup {
    fn drop(&mut self) {
        let _ = Command::new(BIN)
            .args(["lab", "down"])
            .env("WANOPT_LAB_PREFIX", &self.0)
            .output();
        for node in ["client", "edge", "wan", "core", "server"] {
            let _ = Command::new("ip")
                .args(["netns", "del", &format!("{}{node}", self.0)])
                .stderr(std::process::Stdio::null())
                .status();
        }
    }
}

#[test]
fn lab_down_and_up_leave_a_namespace_the_lab_did_not_create() {
    let prefix = format!("fx{}-", std::process::id());
    let _cleanup = LabCleanup(prefix.clone());
    let foreign = format!("{prefix}client");
    let added = Command::new("ip")
        .args(["netns", "add", &foreign])
        .status()
        .unwrap();
    assert!(added.success(), "cannot create a namespace (not root?)");
    let exists = |ns: &str| std::path::Path::new("/run/netns").join(ns).exists();
    let lab = |args: &[&str]| {
        let out = Command::new(BIN)
            .arg("lab")
            .args(args)
            .env("WANOPT_LAB_PREFIX", &prefix)
            .output()
            .unwrap();
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (code, out, err) = lab(&["down"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        exists(&foreign),
        "lab down deleted a namespace it did not create"
    );
    assert!(
        err.contains(&format!("left namespace `{foreign}` alone")),
        "{err}"
    );
    assert!(out.contains("nothing to remove"), "{out}");
    let (code, _, err) = lab(&["up"]);
    assert_ne!(code, 0, "lab up built over a foreign namespace: {err}");
    assert_one_line_error(&err, "this lab did not create it");
    assert!(
        exists(&foreign),
        "lab up deleted a namespace it did not create"
    );
    assert!(!exists(&format!("{prefix}edge")), "lab up built half a lab");
    // A prefix that matches nothing at all says so.
    let none = Command::new(BIN)
        .args(["lab", "down"])
        .env("WANOPT_LAB_PREFIX", format!("fy{}-", std::process::id()))
        .output()
        .unwrap();
    assert!(none.status.success());
    assert!(String::from_utf8_lossy(&none.stdout).contains("nothing to remove"));
    assert!(none.stderr.is_empty(), "{none:?}");
}
