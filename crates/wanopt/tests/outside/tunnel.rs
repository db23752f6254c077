//! End-to-end tests of the accelerator: real `wanopt edge` and `wanopt core`
//! processes on loopback, real TCP clients and servers.

use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};

use crate::common::*;

/// Sends `len` pattern bytes and hashes what comes back, concurrently.
fn hash_both_ways(stream: TcpStream, send_seed: u64, len: u64) -> ([u8; 32], [u8; 32], u64) {
    let mut writer = stream.try_clone().unwrap();
    let sender = thread::spawn(move || {
        let mut pattern = Pattern::new(send_seed);
        let mut hasher = Sha256::new();
        let mut buf = vec![0u8; 256 * 1024];
        let mut left = len;
        while left > 0 {
            let n = left.min(buf.len() as u64) as usize;
            pattern.fill(&mut buf[..n]);
            hasher.update(&buf[..n]);
            writer.write_all(&buf[..n]).unwrap();
            left -= n as u64;
        }
        writer.shutdown(Shutdown::Write).unwrap();
        <[u8; 32]>::from(hasher.finalize())
    });
    let mut reader = stream;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 256 * 1024];
    let mut received = 0u64;
    loop {
        let n = reader.read(&mut buf).unwrap();
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
        received += n as u64;
    }
    (sender.join().unwrap(), hasher.finalize().into(), received)
}

fn expected_hash(seed: u64, len: u64) -> [u8; 32] {
    let mut pattern = Pattern::new(seed);
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 256 * 1024];
    let mut left = len;
    while left > 0 {
        let n = left.min(buf.len() as u64) as usize;
        pattern.fill(&mut buf[..n]);
        hasher.update(&buf[..n]);
        left -= n as u64;
    }
    hasher.finalize().into()
}

/// A server that, for each connection, sends `len` bytes of `seed` pattern
/// while hashing what it receives; reports (received hash, received bytes).
fn hash_server(seed: u64, len: u64) -> (SocketAddr, mpsc::Receiver<([u8; 32], u64)>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(stream) = stream else { continue };
            let tx = tx.clone();
            thread::spawn(move || {
                let (_, got, n) = hash_both_ways(stream, seed, len);
                let _ = tx.send((got, n));
            });
        }
    });
    (addr, rx)
}

/// Reads until EOF or error; returns the error kind if any.
fn read_outcome(stream: &mut TcpStream) -> Result<Vec<u8>, ErrorKind> {
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match stream.read(&mut buf) {
            Ok(0) => return Ok(out),
            Ok(n) => out.extend_from_slice(&buf[..n]),
            Err(e) => return Err(e.kind()),
        }
    }
}

#[test]
fn bulk_256_mib_each_way_is_byte_exact() {
    const LEN: u64 = 256 << 20;
    let (server, results) = hash_server(2, LEN);
    let listen = free_tcp();
    let pair = Pair::start(&["127.0.0.1"], &[(listen, server.to_string())], &[]);
    let stream = TcpStream::connect(listen).unwrap();
    let (sent_hash, got_hash, got_len) = hash_both_ways(stream, 1, LEN);
    assert_eq!(got_len, LEN, "client received all of the server's bytes");
    assert_eq!(
        got_hash,
        expected_hash(2, LEN),
        "server -> client bytes intact"
    );
    let (server_got, server_len) = results.recv_timeout(Duration::from_secs(60)).unwrap();
    assert_eq!(server_len, LEN);
    assert_eq!(server_got, sent_hash, "client -> server bytes intact");
    let status = pair.edge.status().unwrap();
    assert!(status["bytes_to_server"].as_u64().unwrap() >= LEN);
    assert!(status["bytes_to_client"].as_u64().unwrap() >= LEN);
    // Both ends sent 256 MiB with wanopt's BBR: each has a model of the
    // path in its sending direction.
    for node in [&pair.edge, &pair.core] {
        let status = node.status().unwrap();
        let bbr = &status["peers"][0]["bbr"];
        let mode = bbr["mode"].as_str().unwrap_or_default();
        assert!(
            ["startup", "drain", "probe_bw", "probe_rtt"].contains(&mode),
            "{bbr}"
        );
        assert!(bbr["bandwidth_mbps"].as_f64().unwrap() > 1.0, "{bbr}");
        assert!(bbr["pacing_mbps"].as_f64().unwrap() > 1.0, "{bbr}");
        // Loopback: well under a millisecond, never zero.
        let min_rtt = bbr["min_rtt_ms"].as_f64().unwrap();
        assert!(min_rtt > 0.0 && min_rtt < 50.0, "{bbr}");
        assert_eq!(
            status["peers"][0]["bandwidth_estimate_mbps"], bbr["bandwidth_mbps"],
            "with BBR the status's estimate is BBR's"
        );
    }
}

#[test]
fn two_hundred_concurrent_flows_each_get_their_own_bytes_back() {
    let echo = echo_server();
    let listen = free_tcp();
    let pair = Pair::start(&["127.0.0.1"], &[(listen, echo.to_string())], &[]);
    let handles: Vec<_> = (0..200u64)
        .map(|i| {
            thread::spawn(move || {
                let mut data = vec![0u8; 64 * 1024];
                Pattern::new(i + 100).fill(&mut data);
                let mut s = TcpStream::connect(listen).unwrap();
                s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
                let mut w = s.try_clone().unwrap();
                let expect = data.clone();
                let writer = thread::spawn(move || {
                    w.write_all(&data).unwrap();
                    w.shutdown(Shutdown::Write).unwrap();
                });
                let got = read_outcome(&mut s).unwrap();
                writer.join().unwrap();
                got == expect
            })
        })
        .collect();
    let ok = handles
        .into_iter()
        .map(|h| h.join().unwrap())
        .filter(|ok| *ok)
        .count();
    assert_eq!(ok, 200);
    let status = pair.edge.status().unwrap();
    assert!(status["flows_total"].as_u64().unwrap() >= 200);
}

#[test]
fn half_close_in_either_direction_keeps_the_other_flowing() {
    // Server reads until the client's FIN, then answers: client half-closed first.
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let server = listener.local_addr().unwrap();
    thread::spawn(move || {
        // First connection: answer after EOF.
        let (mut s, _) = listener.accept().unwrap();
        let got = read_outcome(&mut s).unwrap();
        s.write_all(format!("got {} bytes", got.len()).as_bytes())
            .unwrap();
        s.shutdown(Shutdown::Write).unwrap();
        // Second connection: the server half-closes first, then still reads.
        let (mut s, _) = listener.accept().unwrap();
        s.write_all(b"server is done talking").unwrap();
        s.shutdown(Shutdown::Write).unwrap();
        let got = read_outcome(&mut s).unwrap();
        assert_eq!(got, b"client still talking");
        // Prove the server heard it by closing only now.
    });
    let listen = free_tcp();
    let _pair = Pair::start(&["127.0.0.1"], &[(listen, server.to_string())], &[]);

    let mut c = TcpStream::connect(listen).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    c.write_all(&[7u8; 100_000]).unwrap();
    c.shutdown(Shutdown::Write).unwrap();
    assert_eq!(read_outcome(&mut c).unwrap(), b"got 100000 bytes");

    let mut c = TcpStream::connect(listen).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut first = [0u8; 22];
    c.read_exact(&mut first).unwrap();
    assert_eq!(&first, b"server is done talking");
    let mut rest = [0u8; 1];
    assert_eq!(
        c.read(&mut rest).unwrap(),
        0,
        "the server's FIN crossed the tunnel"
    );
    c.write_all(b"client still talking").unwrap();
    c.shutdown(Shutdown::Write).unwrap();
    // The flow ends cleanly: our read sees EOF, not a reset.
    assert_eq!(read_outcome(&mut c), Ok(vec![]));
}

#[test]
fn a_destination_outside_the_allowlist_is_refused_and_never_contacted() {
    let forbidden = TcpListener::bind("127.0.0.1:0").unwrap();
    forbidden.set_nonblocking(true).unwrap();
    let target = forbidden.local_addr().unwrap();
    let listen = free_tcp();
    // Allow only a different port of the same host.
    let allow = format!("127.0.0.1:{}", target.port().wrapping_add(1).max(1));
    let pair = Pair::start(&[&allow], &[(listen, target.to_string())], &[]);
    let mut c = TcpStream::connect(listen).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let started = Instant::now();
    assert_eq!(read_outcome(&mut c), Err(ErrorKind::ConnectionReset));
    assert!(started.elapsed() < Duration::from_secs(3));
    assert_eq!(
        forbidden.accept().map(|_| ()).unwrap_err().kind(),
        ErrorKind::WouldBlock
    );
    assert!(eventually(Duration::from_secs(2), || pair
        .core
        .log_text()
        .contains("not permitted by the allowlist")));
    let status = pair.edge.status().unwrap();
    assert_eq!(status["flows_refused"], 1);
}

/// An address of this host's interfaces other than loopback (IPv4), if
/// it has one.
fn own_non_loopback_address() -> Option<std::net::IpAddr> {
    nix::ifaddrs::getifaddrs()
        .ok()?
        .filter_map(|ifa| ifa.address?.as_sockaddr_in().map(|a| a.ip()))
        .find(|ip| !ip.is_loopback() && !ip.is_link_local())
        .map(std::net::IpAddr::V4)
}

#[test]
fn allow_everything_does_not_reach_the_core_host_itself_unless_named() {
    let loopback = TcpListener::bind("127.0.0.1:0").unwrap();
    loopback.set_nonblocking(true).unwrap();
    let own = own_non_loopback_address().map(|ip| {
        let l = TcpListener::bind((ip, 0)).unwrap();
        l.set_nonblocking(true).unwrap();
        l
    });
    let named = TcpListener::bind("127.0.0.1:0").unwrap();
    let named_addr = named.local_addr().unwrap();
    thread::spawn(move || {
        for mut conn in named.incoming().flatten() {
            let _ = conn.write_all(b"named\n");
        }
    });
    let keys = Keys::new();
    let core_addr = free_udp();
    let named_rule = named_addr.to_string();
    let core = spawn(
        &keys,
        "core",
        &core_args(&keys, core_addr, &["0.0.0.0/0", "::/0", &named_rule]),
    );
    let mut targets = vec![
        ("loopback", loopback.local_addr().unwrap()),
        ("the core's control API", core.control),
    ];
    if let Some(own) = &own {
        targets.push(("an address of its own", own.local_addr().unwrap()));
    } else {
        eprintln!("this host has no non-loopback IPv4 address: that case is not run");
    }
    let listens: Vec<SocketAddr> = targets.iter().map(|_| free_tcp()).collect();
    let named_listen = free_tcp();
    let mut forwards: Vec<(SocketAddr, String)> = targets
        .iter()
        .zip(&listens)
        .map(|((_, target), listen)| (*listen, target.to_string()))
        .collect();
    forwards.push((named_listen, named_addr.to_string()));
    let edge = spawn(&keys, "edge", &edge_args(&keys, core_addr, &forwards, &[]));
    edge.wait_tunnel_up(Duration::from_secs(10));
    for ((what, target), listen) in targets.iter().zip(&listens) {
        let mut c = TcpStream::connect(listen).unwrap();
        c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let _ = c.write_all(b"POST /cache/clear HTTP/1.0\r\nHost: x\r\n\r\n");
        // Refused: reset, or (the client having sent data) closed, with
        // no byte from the target.
        let outcome = read_outcome(&mut c);
        assert!(
            matches!(&outcome, Err(ErrorKind::ConnectionReset)) || outcome == Ok(vec![]),
            "{what} ({target}) answered {outcome:?}"
        );
        let refused = format!("{target} is this core host itself");
        assert!(
            eventually(Duration::from_secs(2), || core
                .log_text()
                .contains(&refused)),
            "{what} ({target}) was not refused; core log:\n{}",
            core.log_text()
        );
    }
    assert_eq!(
        loopback.accept().map(|_| ()).unwrap_err().kind(),
        ErrorKind::WouldBlock
    );
    if let Some(own) = &own {
        assert_eq!(
            own.accept().map(|_| ()).unwrap_err().kind(),
            ErrorKind::WouldBlock
        );
    }
    let cache: serde_json::Value =
        serde_json::from_str(&http_get(core.control, "/cache").unwrap()).unwrap();
    assert_eq!(cache["clears"], 0, "{cache}");
    // A rule that names the address reaches it.
    let mut c = TcpStream::connect(named_listen).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    assert_eq!(read_outcome(&mut c), Ok(b"named\n".to_vec()));
}

#[test]
fn a_server_that_refuses_resets_the_client_promptly() {
    let closed = free_tcp(); // nothing listens here
    let listen = free_tcp();
    let _pair = Pair::start(&["127.0.0.1"], &[(listen, closed.to_string())], &[]);
    let mut c = TcpStream::connect(listen).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let started = Instant::now();
    assert_eq!(read_outcome(&mut c), Err(ErrorKind::ConnectionReset));
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
}

#[test]
fn resets_cross_the_tunnel_both_ways() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let server = listener.local_addr().unwrap();
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        // 1: the client resets; the server must see a reset, not a clean EOF.
        let (mut s, _) = listener.accept().unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        tx.send(read_outcome(&mut s).map(|v| v.len())).unwrap();
        // 2: the server resets; the client must see it.
        let (s, _) = listener.accept().unwrap();
        let mut b = [0u8; 5];
        (&s).read_exact(&mut b).unwrap();
        socket2::SockRef::from(&s)
            .set_linger(Some(Duration::ZERO))
            .unwrap();
        drop(s);
    });
    let listen = free_tcp();
    let _pair = Pair::start(&["127.0.0.1"], &[(listen, server.to_string())], &[]);

    let c = TcpStream::connect(listen).unwrap();
    (&c).write_all(b"hello").unwrap();
    thread::sleep(Duration::from_millis(300));
    socket2::SockRef::from(&c)
        .set_linger(Some(Duration::ZERO))
        .unwrap();
    drop(c);
    let seen = rx.recv_timeout(Duration::from_secs(10)).unwrap();
    assert_eq!(seen, Err(ErrorKind::ConnectionReset));

    let mut c = TcpStream::connect(listen).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    c.write_all(b"hello").unwrap();
    assert_eq!(read_outcome(&mut c), Err(ErrorKind::ConnectionReset));
}

#[test]
fn an_unpinned_edge_is_refused_in_the_handshake_and_reaches_no_server() {
    let keys = Keys::new();
    let server = TcpListener::bind("127.0.0.1:0").unwrap();
    server.set_nonblocking(true).unwrap();
    let core_addr = free_udp();
    // The core pins a stranger's key, not the edge's.
    let (core_key, _) = keys.key("core");
    let (_, stranger) = keys.key("stranger");
    let core = spawn(
        &keys,
        "core",
        &[
            "core".into(),
            "--listen".into(),
            core_addr.to_string(),
            "--key".into(),
            core_key.display().to_string(),
            "--peer-key".into(),
            stranger,
            "--allow".into(),
            "127.0.0.1".into(),
        ],
    );
    let listen = free_tcp();
    let edge = spawn(
        &keys,
        "edge",
        &edge_args(
            &keys,
            core_addr,
            &[(listen, server.local_addr().unwrap().to_string())],
            &["--tunnel-wait", "1s"],
        ),
    );
    assert!(
        eventually(Duration::from_secs(10), || {
            let log = core.log_text();
            log.contains("tunnel handshake from 127.0.0.1:") && log.contains("refused")
        }),
        "core log: {}",
        core.log_text()
    );
    let mut c = TcpStream::connect(listen).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    assert_eq!(read_outcome(&mut c), Err(ErrorKind::ConnectionReset));
    assert_eq!(
        server.accept().map(|_| ()).unwrap_err().kind(),
        ErrorKind::WouldBlock
    );
    // The edge keeps retrying; between a retry's handshake and the core's
    // close the tunnel must not be reported up.
    for _ in 0..30 {
        assert_eq!(edge.status().unwrap()["tunnel"], "down");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn after_the_core_restarts_new_flows_work_again() {
    let echo = echo_server();
    let listen = free_tcp();
    let mut pair = Pair::start(&["127.0.0.1"], &[(listen, echo.to_string())], &[]);
    let roundtrip = || -> bool {
        let Ok(mut c) = TcpStream::connect(listen) else {
            return false;
        };
        c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        if c.write_all(b"ping").is_err() {
            return false;
        }
        let _ = c.shutdown(Shutdown::Write);
        read_outcome(&mut c).map(|v| v == b"ping").unwrap_or(false)
    };
    assert!(roundtrip());
    // A flow in progress when the core dies is reset, not left hanging.
    let mut live = TcpStream::connect(listen).unwrap();
    live.set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    live.write_all(b"x").unwrap();
    let mut one = [0u8; 1];
    live.read_exact(&mut one).unwrap();
    let args = core_args(&pair.keys, pair.core_addr, &["127.0.0.1"]);
    pair.core.child.kill().unwrap();
    pair.core.child.wait().unwrap();
    let restarted = std::time::Instant::now();
    pair.core = spawn(&pair.keys, "core2", &args);
    assert_eq!(read_outcome(&mut live), Err(ErrorKind::ConnectionReset));
    assert!(
        eventually(Duration::from_secs(20), || pair.edge.status().is_some_and(
            |s| s["tunnel"] == "up" && s["peers"][0]["reconnects"].as_u64() >= Some(1)
        )),
        "edge log: {}",
        pair.edge.log_text()
    );
    // The restarted core answers the old connection's packets with a
    // stateless reset the edge can verify (the reset key comes from the
    // core's private key): the edge reconnects at its next keepalive (2 s),
    // not after the 10 s idle timeout.
    let took = restarted.elapsed();
    eprintln!("edge back up {took:?} after the core was killed and restarted");
    assert!(
        took < Duration::from_secs(6),
        "{took:?}; edge log: {}",
        pair.edge.log_text()
    );
    assert!(roundtrip(), "a new flow works after the restart");
}

#[test]
fn a_malformed_stream_header_resets_that_stream_and_the_core_serves_others() {
    use wanopt_node::identity::{PrivateKey, PublicKey};
    use wanopt_node::tunnel;

    let echo = echo_server();
    let keys = Keys::new();
    let core_addr = free_udp();
    let core = spawn(&keys, "core", &core_args(&keys, core_addr, &["127.0.0.1"]));
    let (edge_key, _) = keys.key("edge");
    let (_, core_pub) = keys.key("core");
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let key = PrivateKey::read(&edge_key).unwrap();
        let tuning = tunnel::TunnelTuning::default();
        let config = tunnel::client_config(
            &key,
            &[PublicKey::from_base64(&core_pub).unwrap()],
            &tuning,
            tunnel::Transport::Quic,
        )
        .unwrap();
        let datagrams = wanopt_node::datagram::DatagramHandle::new(tuning.duplication);
        let endpoint = tunnel::endpoint(
            "127.0.0.1:0".parse().unwrap(),
            None,
            &key,
            &tuning,
            &datagrams,
        )
        .unwrap();
        let mut conn = None;
        for _ in 0..100 {
            if let Ok(connecting) = endpoint.connect_with(config.clone(), core_addr, "wanopt") {
                if let Ok(c) = connecting.await {
                    conn = Some(c);
                    break;
                }
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let conn = conn.expect("tunnel to the core");
        // Garbage: right version and kind, impossible length.
        let (mut send, mut recv) = conn.open_bi().await.unwrap();
        send.write_all(&[1, 1, 0, 3, 9, 9, 9, 9]).await.unwrap();
        let err = recv.read_to_end(1024).await.unwrap_err();
        assert!(err.to_string().contains("reset by peer: error 2"), "{err}");
        // Garbage: unknown version.
        let (mut send, mut recv) = conn.open_bi().await.unwrap();
        send.write_all(&[77; 64]).await.unwrap();
        assert!(recv.read_to_end(1024).await.is_err());
        // A good stream on the same connection still works.
        let (mut send, mut recv) = conn.open_bi().await.unwrap();
        let header = wanopt_proto::OpenRepr {
            flow_id: 42,
            services: Default::default(),
            destination: wanopt_proto::Target::Addr(echo),
            source: "127.0.0.1:1".parse().unwrap(),
        };
        send.write_all(&header.emit().unwrap()).await.unwrap();
        send.write_all(b"still serving").await.unwrap();
        send.finish().unwrap();
        let got = recv.read_to_end(1024).await.unwrap();
        assert_eq!(&got[..4], &[1, 2, 0, 0], "reply: connected");
        assert_eq!(&got[4..], b"still serving");
    });
    assert!(core.log_text().contains("resetting the stream"));
}

/// A core on loopback, a [`lossy_path`] with `delay` each way in front of
/// it, and an edge (with `edge_extra`) forwarding a fresh port to `server`
/// through the path, tunnel up. Returns the keys (their directory must
/// outlive the nodes), the core, the edge and the edge's port.
fn through_a_lossy_path(
    server: SocketAddr,
    delay: Duration,
    drop: impl Fn(u64, &[u8]) -> bool + Send + 'static,
    edge_extra: &[&str],
) -> (Keys, Node, Node, SocketAddr) {
    let keys = Keys::new();
    let core_addr = free_udp();
    let core = spawn(&keys, "core", &core_args(&keys, core_addr, &["127.0.0.1"]));
    let path = lossy_path(core_addr, delay, drop);
    let listen = free_tcp();
    let edge = spawn(
        &keys,
        "edge",
        &edge_args(&keys, path, &[(listen, server.to_string())], edge_extra),
    );
    edge.wait_tunnel_up(Duration::from_secs(10));
    (keys, core, edge, listen)
}

#[test]
fn a_long_path_losing_every_other_datagram_for_a_while_stays_up_and_exact() {
    // 80 ms RTT; datagrams 3000..=12000 edge -> core: every other one is lost,
    // the pattern a congestion controller's overshoot into a drop-tail queue
    // leaves. Thousands of gaps open in one stream at once; the tunnel must
    // neither close ("too many gaps") nor deliver a wrong byte.
    const LEN: u64 = 64 << 20;
    let (server, results) = hash_server(4, 1 << 20);
    let (_keys, core, edge, listen) = through_a_lossy_path(
        server,
        Duration::from_millis(40),
        |seq, _| (3000..=12000).contains(&seq) && seq % 2 == 0,
        &["--max-mtu", "1452"],
    );
    let stream = TcpStream::connect(listen).unwrap();
    let (sent_hash, got_hash, got_len) = hash_both_ways(stream, 3, LEN);
    assert_eq!(got_len, 1 << 20);
    assert_eq!(got_hash, expected_hash(4, 1 << 20));
    let (server_got, server_len) = results.recv_timeout(Duration::from_secs(120)).unwrap();
    assert_eq!((server_len, server_got), (LEN, sent_hash));
    let status = edge.status().unwrap();
    assert_eq!(status["peers"][0]["reconnects"], 0, "{}", edge.log_text());
    assert!(
        status["peers"][0]["lost_packets"].as_u64().unwrap() > 1000,
        "{status}"
    );
    assert!(!core.log_text().contains("too many gaps"));
}

#[test]
fn a_server_that_pauses_reading_during_heavy_loss_does_not_take_the_tunnel_down() {
    // The core cannot hand data to a server that stops reading; meanwhile a
    // lossy burst leaves thousands of gaps in the stream. The core must keep
    // draining quinn's receive buffer (which closes the whole connection
    // beyond 1024 pieces) and deliver every byte once the server reads.
    const LEN: u64 = 64 << 20;
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let server = listener.local_addr().unwrap();
    let (tx, results) = mpsc::channel();
    thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        thread::sleep(Duration::from_secs(4));
        let mut hasher = Sha256::new();
        let mut buf = vec![0u8; 1 << 16];
        let mut n = 0u64;
        loop {
            match s.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(k) => {
                    hasher.update(&buf[..k]);
                    n += k as u64;
                }
            }
        }
        let digest: [u8; 32] = hasher.finalize().into();
        let _ = tx.send((digest, n));
    });
    let (_keys, core, edge, listen) = through_a_lossy_path(
        server,
        Duration::from_millis(20),
        // Past what the server's and the core's socket buffers absorb.
        |seq, _| (20_000..=32_000).contains(&seq) && seq % 2 == 0,
        &["--max-mtu", "1452", "--no-reduce"],
    );
    let mut client = TcpStream::connect(listen).unwrap();
    let mut pattern = Pattern::new(9);
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 16];
    let mut sent = 0u64;
    while sent < LEN {
        pattern.fill(&mut buf);
        client.write_all(&buf).unwrap();
        hasher.update(&buf);
        sent += buf.len() as u64;
    }
    client.shutdown(Shutdown::Write).unwrap();
    let expected: [u8; 32] = hasher.finalize().into();
    let (got, n) = results.recv_timeout(Duration::from_secs(120)).unwrap();
    assert_eq!((n, got), (LEN, expected));
    let log = core.log_text() + &edge.log_text();
    assert!(!log.contains("too many gaps"), "{log}");
    let status = edge.status().unwrap();
    assert_eq!(status["peers"][0]["reconnects"], 0, "{}", edge.log_text());
}

/// One echo exchange on a tunnel whose edge runs `--duplication MODE`: a
/// warm-up exchange, a second of silence, then a 1000-byte request (random
/// bytes) whose datagram (the only one edge -> core of 600 bytes or more
/// while armed) the path drops. Returns the edge's status afterwards.
fn exchange_with_a_lost_request(mode: &str) -> serde_json::Value {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    let armed = Arc::new(AtomicBool::new(false));
    let trigger = armed.clone();
    // 160 ms round trip.
    let (_keys, _core, edge, listen) = through_a_lossy_path(
        echo_server(),
        Duration::from_millis(80),
        move |_, datagram| datagram.len() >= 600 && trigger.swap(false, Ordering::SeqCst),
        &["--duplication", mode],
    );
    let mut stream = TcpStream::connect(listen).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    // Incompressible, so the request stays one large datagram through
    // `reduce`.
    let (mut first, mut second) = (vec![0u8; 1000], vec![0u8; 1000]);
    Pattern::new(1).fill(&mut first);
    Pattern::new(2).fill(&mut second);
    let mut back = vec![0u8; 1000];
    stream.write_all(&first).unwrap();
    stream.read_exact(&mut back).unwrap();
    assert_eq!(back, first);
    std::thread::sleep(Duration::from_secs(1));
    armed.store(true, Ordering::SeqCst);
    stream.write_all(&second).unwrap();
    stream.read_exact(&mut back).unwrap();
    assert_eq!(back, second, "the echo is exact");
    assert!(
        !armed.load(Ordering::SeqCst),
        "the request datagram was dropped"
    );
    // Let the copy's or the retransmission's acknowledgement come back.
    std::thread::sleep(Duration::from_millis(500));
    edge.status().unwrap()
}

#[test]
fn a_lost_request_is_replaced_by_its_tail_copy_and_never_declared_lost() {
    let status = exchange_with_a_lost_request("tails");
    let peer = &status["peers"][0];
    assert_eq!(peer["lost_packets"], 0, "{status}");
    let dup = &peer["duplication"];
    assert_eq!(dup["mode"], "tails", "{status}");
    assert_eq!(dup["active"], true, "{status}");
    assert!(dup["datagrams"].as_u64().unwrap() >= 1, "{status}");
}

#[test]
fn without_duplication_the_same_loss_costs_a_retransmission() {
    let status = exchange_with_a_lost_request("off");
    let peer = &status["peers"][0];
    assert!(peer["lost_packets"].as_u64().unwrap() >= 1, "{status}");
    assert_eq!(peer["duplication"]["active"], false, "{status}");
    assert_eq!(peer["duplication"]["datagrams"], 0, "{status}");
}
