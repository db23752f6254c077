//! The control API's guard and limits: a change needs the node's token, a
//! foreign Host or Origin is refused, a request that never finishes is
//! closed, and clients that hold many such requests do not take the file
//! descriptors the data plane needs.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::*;

/// A core with a control API, and the address it serves it on.
fn control_node(keys: &Keys, extra: &[&str]) -> Node {
    let mut args = core_args(keys, free_udp(), &["127.0.0.1"]);
    args.extend(extra.iter().map(|s| s.to_string()));
    let node = spawn(keys, "core", &args);
    assert!(
        eventually(Duration::from_secs(10), || node.status().is_some()),
        "control API not up; log:\n{}",
        node.log_text()
    );
    node
}

/// Sends `request` as it is and returns the answer's status code and body.
fn exchange(addr: SocketAddr, request: &str) -> (u16, String) {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(2)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(request.as_bytes()).unwrap();
    let mut answer = String::new();
    s.read_to_string(&mut answer).unwrap();
    let status = answer
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or_else(|| panic!("not an HTTP answer: {answer:?}"));
    let body = answer.split_once("\r\n\r\n").map_or("", |(_, b)| b);
    (status, body.to_owned())
}

fn clear_request(control: SocketAddr, headers: &str) -> String {
    format!(
        "POST /cache/clear HTTP/1.1\r\nHost: {control}\r\nContent-Length: 0\r\nConnection: close\r\n{headers}\r\n"
    )
}

fn wanopt(args: &[&str]) -> std::process::Output {
    Command::new(BIN).args(args).output().unwrap()
}

#[test]
fn a_change_without_the_token_is_refused_and_with_it_accepted() {
    let keys = Keys::new();
    let node = control_node(&keys, &[]);
    let control = node.control;
    let token_file = wanopt_node::control::token::default_path(control.port());

    let (status, body) = exchange(control, &clear_request(control, ""));
    assert_eq!(status, 401, "{body}");
    assert!(body.contains(&token_file.display().to_string()), "{body}");
    let wrong = format!("Authorization: Bearer {}\r\n", "0".repeat(64));
    assert_eq!(exchange(control, &clear_request(control, &wrong)).0, 401);
    // A cross-site form post: no token, a foreign Origin.
    let form = "Origin: http://evil.example\r\nContent-Type: application/x-www-form-urlencoded\r\n";
    assert_eq!(exchange(control, &clear_request(control, form)).0, 403);

    let token = std::fs::read_to_string(&token_file).unwrap();
    let token = token.trim();
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&token_file).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "{}", token_file.display());
    }
    let right = format!("Authorization: Bearer {token}\r\n");
    let (status, body) = exchange(control, &clear_request(control, &right));
    assert_eq!((status, body.trim()), (200, "cleared"));

    // The CLI finds the token by itself; reading needs none.
    let addr = control.to_string();
    let out = wanopt(&["cache", "clear", "--control", &addr]);
    assert!(out.status.success(), "{out:?}");
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "cleared");
    for args in [
        &["cache", "stats", "--control", &addr][..],
        &["status", "--control", &addr],
        &["flows", "--control", &addr],
    ] {
        let out = wanopt(args);
        assert!(out.status.success(), "{args:?}: {out:?}");
    }
    // A token file that is not the node's: refused, with the node's words.
    let other = keys.dir.path().join("other.token");
    std::fs::write(&other, format!("{}\n", "1".repeat(64))).unwrap();
    let out = wanopt(&[
        "cache",
        "clear",
        "--control",
        &addr,
        "--control-token",
        other.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("wrong control token"), "{stderr}");
    assert_eq!(stderr.trim_end().lines().count(), 1, "{stderr}");
}

#[test]
fn a_token_file_given_by_flag_is_written_private_and_used_by_the_cli() {
    let keys = Keys::new();
    let file = keys.dir.path().join("run").join("control.token");
    std::fs::create_dir(file.parent().unwrap()).unwrap();
    let node = control_node(&keys, &["--control-token", file.to_str().unwrap()]);
    let addr = node.control.to_string();
    let token = std::fs::read_to_string(&file).unwrap();
    assert_eq!(token.trim().len(), 64, "{token:?}");
    let out = wanopt(&[
        "cache",
        "clear",
        "--control",
        &addr,
        "--control-token",
        file.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{out:?}");
    node.signal("TERM");
    assert!(
        eventually(Duration::from_secs(10), || !file.exists()),
        "the token file outlived the node"
    );
}

#[test]
fn a_foreign_host_header_is_refused() {
    let keys = Keys::new();
    let node = control_node(&keys, &[]);
    let control = node.control;
    let get = |host: &str| {
        exchange(
            control,
            &format!("GET /status HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"),
        )
    };
    // DNS rebinding: a page of rebound.example whose name now resolves to
    // the node's address.
    for host in [
        format!("rebound.example:{}", control.port()),
        "127.0.0.1.nip.io".to_owned(),
        "localhost.rebound.example".to_owned(),
    ] {
        let (status, body) = get(&host);
        assert_eq!(status, 403, "{host}: {body}");
    }
    for host in [
        control.to_string(),
        format!("localhost:{}", control.port()),
        // An SSH forward changes the port.
        "127.0.0.1:8080".to_owned(),
    ] {
        let (status, body) = get(&host);
        assert_eq!(status, 200, "{host}: {body}");
    }
    // A page's fetch from another origin, even to the right address.
    let (status, _) = exchange(
        control,
        &format!(
            "GET /flows HTTP/1.1\r\nHost: {control}\r\nOrigin: http://evil.example\r\nConnection: close\r\n\r\n"
        ),
    );
    assert_eq!(status, 403);
}

#[test]
fn a_partial_request_is_closed_after_the_timeout() {
    let keys = Keys::new();
    let node = control_node(&keys, &[]);
    let mut s = TcpStream::connect(node.control).unwrap();
    s.write_all(format!("GET /status HTTP/1.1\r\nHost: {}\r\n", node.control).as_bytes())
        .unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let start = Instant::now();
    let mut buf = [0u8; 256];
    let closed = match s.read(&mut buf) {
        Ok(0) => true,
        Ok(n) => panic!(
            "answered a partial request: {:?}",
            String::from_utf8_lossy(&buf[..n])
        ),
        Err(e) => e.kind() == std::io::ErrorKind::ConnectionReset,
    };
    let waited = start.elapsed();
    assert!(closed, "a partial request was held for {waited:?}");
    assert!(
        waited >= Duration::from_secs(3) && waited < Duration::from_secs(15),
        "closed after {waited:?}"
    );
}

/// Starts `args` as a node whose open-file limit (soft and hard) is `nofile`.
fn spawn_with_fd_limit(keys: &Keys, name: &str, args: &[String], nofile: u64) -> Node {
    use std::os::unix::process::CommandExt;
    let log = keys.dir.path().join(format!("{name}.log"));
    let control = free_tcp();
    let mut cmd = Command::new(BIN);
    cmd.args(args)
        .args(["--control", &control.to_string()])
        .env("WANOPT_LOG", "info")
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap());
    // SAFETY: setrlimit is async-signal-safe; nothing else runs in the child.
    unsafe {
        cmd.pre_exec(move || {
            use nix::sys::resource::{setrlimit, Resource};
            setrlimit(Resource::RLIMIT_NOFILE, nofile, nofile).map_err(std::io::Error::from)
        });
    }
    Node {
        child: cmd.spawn().unwrap(),
        log,
        control,
    }
}

#[test]
fn partial_control_requests_do_not_stop_the_edge_from_carrying_a_flow() {
    const EDGE_NOFILE: u64 = 512;
    const PARTIAL: usize = 3000;
    let echo = TcpListener::bind("127.0.0.1:0").unwrap();
    let server = echo.local_addr().unwrap();
    std::thread::spawn(move || {
        for s in echo.incoming() {
            let Ok(mut s) = s else { return };
            std::thread::spawn(move || {
                let mut buf = [0u8; 4096];
                while let Ok(n) = s.read(&mut buf) {
                    if n == 0 || s.write_all(&buf[..n]).is_err() {
                        return;
                    }
                }
            });
        }
    });
    let keys = Keys::new();
    let core_addr = free_udp();
    let _core = spawn(&keys, "core", &core_args(&keys, core_addr, &["127.0.0.1"]));
    let listen = free_tcp();
    let edge = spawn_with_fd_limit(
        &keys,
        "edge",
        // No byte cache: its checkpoint would close and reopen files now
        // and then, and leave a descriptor for anyone to take.
        &edge_args(
            &keys,
            core_addr,
            &[(listen, server.to_string())],
            &["--no-reduce"],
        ),
        EDGE_NOFILE,
    );
    edge.wait_tunnel_up(Duration::from_secs(10));

    // A local user opens connections to the control API and never
    // finishes a request on them, until the node stops taking them (a SYN
    // the kernel drops now and then is retried).
    let mut held = Vec::new();
    let mut failures = 0;
    while held.len() < PARTIAL && failures < 3 {
        match TcpStream::connect_timeout(&edge.control, Duration::from_secs(2)) {
            Ok(mut s) => {
                failures = 0;
                let _ = s.write_all(b"GET /status HTTP/1.1\r\n");
                held.push(s);
            }
            Err(_) => failures += 1,
        }
    }
    eprintln!("{} partial requests open", held.len());

    let mut client = TcpStream::connect_timeout(&listen, Duration::from_secs(5)).unwrap();
    client
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    client.write_all(b"still carried").unwrap();
    let mut got = [0u8; 13];
    client.read_exact(&mut got).unwrap_or_else(|e| {
        panic!(
            "the edge carried no flow while {} partial control requests were open: {e}; log:\n{}",
            held.len(),
            edge.log_text()
        )
    });
    assert_eq!(&got, b"still carried");
    // Once the partial requests time out, the control API answers again.
    assert!(
        eventually(Duration::from_secs(15), || http_get(
            edge.control,
            "/status"
        )
        .is_some()),
        "the control API did not recover; log:\n{}",
        edge.log_text()
    );
    drop(held);
}
