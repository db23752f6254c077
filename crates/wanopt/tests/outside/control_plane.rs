//! A control plane that tells the truth and cannot be wedged by what it
//! is given: a config path that is a FIFO, a device or a huge file is
//! refused at once (at start and at reload, after which the node still
//! stops on SIGTERM); a duration too long to add to a clock, an MTU out of
//! range, a listener given twice and a destination's port 0 are usage
//! errors; a config error quotes little of the file; a reload that changes
//! a setting read only at start names it and changes nothing; a flood of
//! refused flows writes a few lines a second.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use crate::common::*;

fn mkfifo(path: &Path) {
    let status = Command::new("mkfifo").arg(path).status().unwrap();
    assert!(status.success());
}

/// A core's configuration file: its listen address, key, edge and allowlist.
fn core_file(keys: &Keys, listen: std::net::SocketAddr) -> String {
    let (key, _) = keys.key("core");
    let (_, edge) = keys.key("edge");
    format!(
        "listen = \"{listen}\"\nkey = \"{}\"\npeer-key = [\"{edge}\"]\nallow = [\"127.0.0.1\"]\nno-reduce = true\nlisten-tcp = \"off\"\n",
        key.display()
    )
}

#[test]
fn a_config_that_is_not_a_regular_file_is_refused_at_once() {
    let keys = Keys::new();
    let fifo = keys.dir.path().join("core.fifo");
    mkfifo(&fifo);
    let big = keys.dir.path().join("big.toml");
    let mut text = core_file(&keys, free_udp());
    text.push_str(&format!("# {}\n", "x".repeat(2 << 20)));
    std::fs::write(&big, text).unwrap();
    for (path, needle) in [
        (fifo.as_path(), "not a regular file"),
        (Path::new("/dev/zero"), "not a regular file"),
        (big.as_path(), "a config file has at most"),
    ] {
        let args = ["core", "--config", path.to_str().unwrap()].map(String::from);
        let Some((code, err)) = run_refused(&args) else {
            panic!(
                "wanopt core --config {} still runs after 10 s",
                path.display()
            );
        };
        assert_eq!(code, 2, "{path:?}: {err}");
        assert!(err.contains(needle), "{path:?}: {err}");
        assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    }
}

#[test]
fn a_reload_from_a_fifo_is_refused_and_the_node_still_stops() {
    let keys = Keys::new();
    let path = keys.dir.path().join("core.toml");
    std::fs::write(&path, core_file(&keys, free_udp())).unwrap();
    let mut core = spawn(
        &keys,
        "core",
        &["core", "--config", path.to_str().unwrap()].map(String::from),
    );
    assert!(
        eventually(Duration::from_secs(10), || core.status().is_some()),
        "{}",
        core.log_text()
    );
    std::fs::remove_file(&path).unwrap();
    mkfifo(&path);
    core.signal("HUP");
    assert!(
        eventually(Duration::from_secs(10), || core
            .log_text()
            .contains("not a regular file")),
        "the reload is refused: {}",
        core.log_text()
    );
    // A second reload is served too (the first did not wedge the queue).
    core.signal("HUP");
    assert!(eventually(Duration::from_secs(10), || core
        .log_text()
        .matches("not a regular file")
        .count()
        >= 2));
    core.signal("TERM");
    let stopped = eventually(Duration::from_secs(15), || {
        core.child.try_wait().ok().flatten().is_some()
    });
    assert!(stopped, "the core still runs: {}", core.log_text());
}

#[test]
fn durations_longer_than_a_year_are_usage_errors() {
    let keys = Keys::new();
    let mut args = core_args(&keys, free_udp(), &["127.0.0.1"]);
    args.extend(["--drain".into(), "10000000000000000000s".into()]);
    let Some((code, err)) = run_refused(&args) else {
        panic!("a core with --drain 10000000000000000000s still runs after 10 s");
    };
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("longer than a year"), "{err}");

    let path = keys.dir.path().join("core.toml");
    let mut text = core_file(&keys, free_udp());
    text.push_str("drain = \"10000000000000000000s\"\n");
    std::fs::write(&path, text).unwrap();
    let args = ["core", "--config", path.to_str().unwrap()].map(String::from);
    let Some((code, err)) = run_refused(&args) else {
        panic!("a core with drain = \"10000000000000000000s\" still runs after 10 s");
    };
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("at most a year"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
}

#[test]
fn a_reload_that_changes_a_start_only_key_names_it_and_changes_nothing() {
    let keys = Keys::new();
    let path = keys.dir.path().join("core.toml");
    let base = core_file(&keys, free_udp());
    std::fs::write(&path, format!("{base}max-flows = 100\n")).unwrap();
    let core = spawn(
        &keys,
        "core",
        &["core", "--config", path.to_str().unwrap()].map(String::from),
    );
    let control = core.control;
    assert!(
        eventually(Duration::from_secs(10), || core.status().is_some()),
        "{}",
        core.log_text()
    );
    // An operator lowers max-flows under attack and adds a peer.
    let (_, other) = keys.key("other");
    let lowered = base.replace("peer-key = [", &format!("peer-key = [\"{other}\", "));
    std::fs::write(&path, format!("{lowered}max-flows = 5\ndrain = \"3s\"\n")).unwrap();
    let out = Command::new(BIN)
        .args(["reload", "--control", &control.to_string()])
        .output()
        .unwrap();
    assert!(!out.status.success(), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("drain, max-flows, max-flows-per-source cannot change on reload"),
        "{stderr}"
    );
    assert!(stderr.contains("restart"), "{stderr}");
    assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
    assert!(
        core.log_text().contains("configuration not reloaded"),
        "{}",
        core.log_text()
    );
    // The same file with only the peer added reloads.
    std::fs::write(&path, format!("{lowered}max-flows = 100\n")).unwrap();
    let out = Command::new(BIN)
        .args(["reload", "--control", &control.to_string()])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(said.contains("1 added"), "{said}");
}

#[test]
fn refused_flows_are_logged_at_most_five_times_a_second_with_a_count() {
    let keys = Keys::new();
    let core_addr = free_udp();
    // UDP flows to 127.0.0.2 only: the echo on 127.0.0.1 is denied.
    let mut args = core_args(&keys, core_addr, &["127.0.0.1"]);
    args.extend([
        "--allow-udp".into(),
        "127.0.0.2".into(),
        "--no-reduce".into(),
    ]);
    let core = spawn(&keys, "core", &args);
    let echo = udp_echo();
    let listen = free_udp();
    let forward = format!("{listen}={echo}");
    let edge = spawn(
        &keys,
        "edge",
        &edge_args(
            &keys,
            core_addr,
            &[],
            &["--forward-udp", &forward, "--no-reduce"],
        ),
    );
    edge.wait_tunnel_up(Duration::from_secs(10));
    // 300 clients, each a new UDP flow the core refuses, within ~2 s.
    let started = Instant::now();
    for _ in 0..300 {
        let client = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        client.send_to(b"let me through", listen).unwrap();
        std::thread::sleep(Duration::from_millis(5));
    }
    assert!(
        eventually(Duration::from_secs(10), || {
            core.status()
                .is_some_and(|s| s["udp"]["refused"].as_u64() >= Some(250))
        }),
        "the core refused them: {:?}",
        core.status()
    );
    let seconds = started.elapsed().as_secs() + 1;
    let log = core.log_text();
    let lines = log
        .lines()
        .filter(|l| l.contains("refused udp flow") || l.contains("denied by the core"))
        .count() as u64;
    assert!(
        (1..=5 * (seconds + 1)).contains(&lines),
        "{lines} lines about refused flows in {seconds} s:\n{log}"
    );
    assert!(
        log.contains("more lines about refused flows held back"),
        "{log}"
    );
}

#[test]
fn out_of_range_and_doubled_values_are_usage_errors() {
    let keys = Keys::new();
    let edge = |extra: &[&str]| {
        let mut args = edge_args(&keys, free_udp(), &[], &[]);
        args.extend(extra.iter().map(|s| s.to_string()));
        args
    };
    let l1 = free_tcp().to_string();
    let u1 = free_udp().to_string();
    for (extra, needle) in [
        (
            vec![
                "--forward",
                "127.0.0.1:9=127.0.0.1:80",
                "--max-mtu",
                "65535",
            ],
            "above the largest UDP payload",
        ),
        (
            vec![
                "--forward",
                &format!("{l1}=127.0.0.1:80"),
                "--forward",
                &format!("{l1}=127.0.0.1:81"),
            ],
            "is given twice",
        ),
        (
            vec![
                "--forward-udp",
                &format!("{u1}=127.0.0.1:53"),
                "--forward-udp",
                &format!("{u1}=127.0.0.1:54"),
            ],
            "is given twice",
        ),
        (
            vec!["--forward", "127.0.0.1:9=127.0.0.1:0"],
            "the destination's port is 0",
        ),
        (
            vec!["--forward-udp", "127.0.0.1:9=server.example:0"],
            "the destination's port is 0",
        ),
    ] {
        let Some((code, err)) = run_refused(&edge(&extra)) else {
            panic!("an edge with {extra:?} still runs after 10 s");
        };
        assert_eq!(code, 2, "{extra:?}: {err}");
        assert!(err.contains(needle), "{extra:?}: {err}");
        assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    }
    // A config error quotes at most 200 characters of the file's line.
    let path = keys.dir.path().join("long.toml");
    std::fs::write(&path, format!("core = {}\n", "x".repeat(5000))).unwrap();
    let args = ["edge", "--config", path.to_str().unwrap()].map(String::from);
    let (code, err) = run_refused(&args).expect("refused at once");
    assert_eq!(code, 2, "{err}");
    assert!(err.len() < 1000, "{} bytes: {err}", err.len());
}

#[test]
fn a_second_node_given_a_running_nodes_token_file_refuses_it() {
    let keys = Keys::new();
    let token = keys.dir.path().join("shared.token");
    let token_arg = token.to_str().unwrap().to_owned();
    let mut first = core_args(&keys, free_udp(), &["127.0.0.1"]);
    first.extend(["--control-token".into(), token_arg.clone()]);
    let first = spawn(&keys, "first", &first);
    assert!(
        eventually(Duration::from_secs(10), || first.status().is_some()),
        "{}",
        first.log_text()
    );
    let written = std::fs::read_to_string(&token).unwrap();
    let mut second = core_args(&keys, free_udp(), &["127.0.0.1"]);
    second.extend([
        "--control-token".into(),
        token_arg,
        "--control".into(),
        free_tcp().to_string(),
    ]);
    let Some((code, err)) = run_refused(&second) else {
        panic!("a second node on the first one's token file still runs");
    };
    assert_ne!(code, 0, "{err}");
    assert!(err.contains("belongs to another running node"), "{err}");
    // The first node's token is untouched, and still opens its API.
    assert_eq!(std::fs::read_to_string(&token).unwrap(), written);
    let out = Command::new(BIN)
        .args(["cache", "clear", "--control", &first.control.to_string()])
        .args(["--control-token", token.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
}

#[test]
fn a_udp_forward_on_every_address_is_warned_of() {
    let keys = Keys::new();
    let port = free_udp().port();
    let forward = format!("0.0.0.0:{port}=127.0.0.1:53");
    let edge = spawn(
        &keys,
        "edge",
        &edge_args(&keys, free_udp(), &[], &["--forward-udp", &forward]),
    );
    assert!(
        eventually(Duration::from_secs(10), || edge
            .log_text()
            .contains("listens on every address and answers any sender")),
        "{}",
        edge.log_text()
    );
}

#[test]
fn a_udp_forward_with_sources_answers_only_them() {
    let echo = udp_echo();
    let (keys, core_addr) = (Keys::new(), free_udp());
    let _core = spawn(
        &keys,
        "core",
        &core_args(&keys, core_addr, &["127.0.0.1"])
            .into_iter()
            .chain(["--allow-udp".into(), "127.0.0.1".into()])
            .collect::<Vec<_>>(),
    );
    let port = free_udp().port();
    let forward = format!("0.0.0.0:{port}={echo},from=127.0.0.2/32");
    let edge = spawn(
        &keys,
        "edge",
        &edge_args(&keys, core_addr, &[], &["--forward-udp", &forward]),
    );
    edge.wait_tunnel_up(Duration::from_secs(10));
    let ask = |from: &str| {
        let socket = std::net::UdpSocket::bind(format!("{from}:0")).unwrap();
        socket
            .set_read_timeout(Some(Duration::from_millis(300)))
            .unwrap();
        let mut buf = [0u8; 64];
        (0..10).any(|_| {
            socket.send_to(b"ping", ("127.0.0.1", port)).unwrap();
            socket.recv(&mut buf).is_ok_and(|n| &buf[..n] == b"ping")
        })
    };
    assert!(ask("127.0.0.2"), "{}", edge.log_text());
    assert!(!ask("127.0.0.1"), "a stranger got an answer");
    let udp = &edge.status().unwrap()["udp"];
    assert!(udp["strangers"].as_u64().unwrap() >= 10, "{udp}");
    let log = edge.log_text();
    assert!(log.contains("not in its from= list"), "{log}");
    assert!(!log.contains("answers any sender"), "{log}");
    // A source list that does not parse is a usage error.
    let bad = format!("0.0.0.0:{port}={echo},from=10.0.0.0/40");
    let (code, err) = run_refused(&edge_args(&keys, core_addr, &[], &["--forward-udp", &bad]))
        .expect("the edge ran");
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("from=10.0.0.0/40"), "{err}");
}

#[test]
fn an_edge_counts_its_failed_dials_while_its_core_refuses_it() {
    let keys = Keys::new();
    let core_addr = free_udp();
    // The core pins another edge's key: every handshake of this one fails.
    let mut args = core_args(&keys, core_addr, &["127.0.0.1"]);
    let (_, stranger) = keys.key("stranger");
    let pinned = args.iter().position(|a| a == "--peer-key").unwrap() + 1;
    args[pinned] = stranger;
    let _core = spawn(&keys, "core", &args);
    let forward = (free_tcp(), "127.0.0.1:9".to_string());
    let edge = spawn(&keys, "edge", &edge_args(&keys, core_addr, &[forward], &[]));
    let failures = || -> u64 {
        edge.status()
            .and_then(|s| s["peers"][0]["dial_failures"].as_u64())
            .unwrap_or(0)
    };
    assert!(
        eventually(Duration::from_secs(15), || failures() >= 3),
        "{:?}\n{}",
        edge.status(),
        edge.log_text()
    );
    let metrics = http_get(edge.control, "/metrics").unwrap_or_default();
    assert!(
        metrics
            .lines()
            .any(|l| l.starts_with("wanopt_tunnel_dial_failures_total{") && !l.ends_with(" 0")),
        "{metrics}"
    );
}

#[test]
fn one_edge_key_up_from_two_hosts_at_once_is_logged() {
    let keys = Keys::new();
    let core_addr = free_udp();
    let core = spawn(&keys, "core", &core_args(&keys, core_addr, &["127.0.0.1"]));
    // Two edges with one key, from 127.0.0.1 and 127.0.0.2.
    let mut edges = Vec::new();
    for (name, host) in [("edge", "127.0.0.1"), ("edge-copy", "127.0.0.2")] {
        let bind = format!("{host}:0");
        let forward = (free_tcp(), "127.0.0.1:9".to_string());
        let node = spawn(
            &keys,
            name,
            &edge_args(&keys, core_addr, &[forward], &["--bind", &bind]),
        );
        node.wait_tunnel_up(Duration::from_secs(10));
        edges.push(node);
    }
    assert!(
        eventually(Duration::from_secs(5), || core
            .log_text()
            .contains("at once (two edges with one key")),
        "{}",
        core.log_text()
    );
}
