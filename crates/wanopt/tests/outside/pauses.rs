//! Pauses between commands on one connection (an application's
//! interactive session) through real `wanopt edge` and `wanopt core`
//! processes on loopback, with data reduction and the slow links' stream
//! compressors: one connection carries a command, its reply, a pause (as a
//! person or an application makes), and the next command, as SMB, SSH,
//! database clients and HTTP keep-alive do.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::thread;
use std::time::Duration;

use sha2::{Digest, Sha256};

use crate::common::*;

/// A document-like file: lines of text and numbers.
fn document(seed: u64, len: usize) -> Vec<u8> {
    let mut rng = Pattern::new(seed);
    let mut word = [0u8; 8];
    let mut out = Vec::with_capacity(len + 128);
    while out.len() < len {
        rng.fill(&mut word);
        let v = u64::from_le_bytes(word);
        out.extend_from_slice(
            format!(
                "<w:p><w:r><w:t>Paragraph {} of the quarterly report, revision {}</w:t></w:r></w:p>\n",
                v % 10_000,
                (v >> 20) % 100
            )
            .as_bytes(),
        );
    }
    out.truncate(len);
    out
}

/// A message: a 4-byte length, then its bytes.
fn send(conn: &mut TcpStream, bytes: &[u8]) -> std::io::Result<()> {
    conn.write_all(&(bytes.len() as u32).to_be_bytes())?;
    conn.write_all(bytes)
}

fn receive(conn: &mut TcpStream) -> std::io::Result<Vec<u8>> {
    let mut len = [0u8; 4];
    conn.read_exact(&mut len)?;
    let mut bytes = vec![0u8; u32::from_be_bytes(len) as usize];
    conn.read_exact(&mut bytes)?;
    Ok(bytes)
}

/// A file server speaking length-prefixed messages on one connection per
/// session: `GET` returns the file, `CLOSE` a short status line, `PUT`
/// stores the message's body and returns its SHA-256; each request
/// carries a header like an SMB request's.
fn file_server(file: Vec<u8>) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut conn) = conn else { continue };
            let file = file.clone();
            thread::spawn(move || {
                while let Ok(request) = receive(&mut conn) {
                    let reply = if request.starts_with(b"GET ") {
                        file.clone()
                    } else if request.starts_with(b"CLOSE ") {
                        format!("closed, {} bytes, modified 2026-11-26 10:02", file.len())
                            .into_bytes()
                    } else if let Some(body) = request.strip_prefix(b"PUT ") {
                        Sha256::digest(body).to_vec()
                    } else {
                        b"ERR".to_vec()
                    };
                    if send(&mut conn, &reply).is_err() {
                        return;
                    }
                }
            });
        }
    });
    addr
}

/// One session: get the file and close it (a short reply), pause, put an
/// edited copy and check its hash.
fn get_pause_put(listen: SocketAddr, pause: Duration, expected: &[u8]) -> Result<(), String> {
    let mut conn = TcpStream::connect(listen).map_err(|e| format!("connect: {e}"))?;
    conn.set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    let header = b"GET \\\\server\\share\\report.docx tree 1 uid 7 credits 64 flags 0x0008";
    send(&mut conn, header).map_err(|e| format!("get: {e}"))?;
    let got = receive(&mut conn).map_err(|e| format!("get: {e}"))?;
    if got != expected {
        return Err("the downloaded file differs".into());
    }
    send(
        &mut conn,
        b"CLOSE \\\\server\\share\\report.docx tree 1 uid 7",
    )
    .map_err(|e| format!("close: {e}"))?;
    let closed = receive(&mut conn).map_err(|e| format!("close: {e}"))?;
    if !closed.starts_with(b"closed") {
        return Err(format!("close: {}", String::from_utf8_lossy(&closed)));
    }
    thread::sleep(pause);
    // The edited copy: a line inserted in the middle.
    let mut edited = b"PUT ".to_vec();
    edited.extend_from_slice(&got[..got.len() / 2]);
    edited.extend_from_slice(b"<w:p><w:r><w:t>A line inserted by the user</w:t></w:r></w:p>\n");
    edited.extend_from_slice(&got[got.len() / 2..]);
    send(&mut conn, &edited).map_err(|e| format!("put: {e}"))?;
    let hash = receive(&mut conn).map_err(|e| format!("put: {e}"))?;
    if hash[..] != Sha256::digest(&edited[4..])[..] {
        return Err("the uploaded file arrived changed".into());
    }
    Ok(())
}

#[test]
fn a_session_that_pauses_between_commands_is_not_reset() {
    // Before: with the stream compressors (the default below 3 Mbit/s),
    // every put after a pause of over a second was reset ("pieces of a
    // chunk out of order").
    let file = document(7, 300 << 10);
    let server = file_server(file.clone());
    let listen = free_tcp();
    let flags = ["--compression", "max"];
    let keys = Keys::new();
    let core_addr = free_udp();
    let mut core_args = core_args(&keys, core_addr, &["127.0.0.1"]);
    core_args.extend(flags.iter().map(|s| s.to_string()));
    let core = spawn(&keys, "core", &core_args);
    let edge = spawn(
        &keys,
        "edge",
        &edge_args(&keys, core_addr, &[(listen, server.to_string())], &flags),
    );
    edge.wait_tunnel_up(Duration::from_secs(10));
    let pauses_ms = [200u64, 1_000, 1_200, 1_500, 2_000, 3_000];
    let sessions: Vec<_> = pauses_ms
        .iter()
        .flat_map(|&ms| [ms, ms])
        .map(|ms| {
            let file = file.clone();
            thread::spawn(move || (ms, get_pause_put(listen, Duration::from_millis(ms), &file)))
        })
        .collect();
    let failed: Vec<String> = sessions
        .into_iter()
        .filter_map(|s| match s.join().unwrap() {
            (ms, Err(e)) => Some(format!("pause {ms} ms: {e}")),
            (_, Ok(())) => None,
        })
        .collect();
    assert!(
        failed.is_empty(),
        "{failed:?}\nedge log:\n{}\ncore log:\n{}",
        tail(&edge.log_text()),
        tail(&core.log_text())
    );
    // No flow was reset, and the nodes say so.
    for node in [&edge, &core] {
        let status = node.status().expect("status");
        let resets = &status["flow_resets"];
        assert_eq!(resets["codec"], 0, "{status}");
        assert_eq!(resets["peer_codec"], 0, "{status}");
    }
}

#[test]
fn resets_are_counted_by_reason_on_both_nodes() {
    // A client that resets its connection mid-reply: the edge counts a
    // reset by its LAN side, the core one by the tunnel side; neither is a
    // codec error, and /metrics has every reason.
    let file = document(8, 4 << 20);
    let server = file_server(file);
    let listen = free_tcp();
    let keys = Keys::new();
    let core_addr = free_udp();
    let core = spawn(&keys, "core", &core_args(&keys, core_addr, &["127.0.0.1"]));
    let edge = spawn(
        &keys,
        "edge",
        &edge_args(&keys, core_addr, &[(listen, server.to_string())], &[]),
    );
    edge.wait_tunnel_up(Duration::from_secs(10));
    let mut conn = TcpStream::connect(listen).unwrap();
    send(&mut conn, b"GET report.docx").unwrap();
    let mut some = [0u8; 1024];
    conn.read_exact(&mut some).unwrap();
    socket2::SockRef::from(&conn)
        .set_linger(Some(Duration::ZERO))
        .unwrap();
    drop(conn);
    let count = |node: &Node, reason: &str| {
        let metrics = http_get(node.control, "/metrics").unwrap_or_default();
        let role = if node.control == edge.control {
            "edge"
        } else {
            "core"
        };
        let prefix = format!("wanopt_flow_resets_total{{role=\"{role}\",reason=\"{reason}\"}} ");
        metrics
            .lines()
            .find_map(|l| l.strip_prefix(&prefix))
            .map(|n| n.trim().to_owned())
    };
    assert!(
        eventually(Duration::from_secs(10), || {
            count(&edge, "lan").as_deref() == Some("1")
                && count(&core, "tunnel").as_deref() == Some("1")
        }),
        "edge lan {:?}, core tunnel {:?}",
        count(&edge, "lan"),
        count(&core, "tunnel")
    );
    for node in [&edge, &core] {
        for reason in ["codec", "peer_codec"] {
            assert_eq!(count(node, reason).as_deref(), Some("0"), "{reason}");
        }
        // Not an error: no warning.
        assert!(!node.log_text().contains("WARN"), "{}", node.log_text());
    }
    let status = edge.status().unwrap();
    assert_eq!(status["flow_resets"]["lan"], 1, "{status}");
}

fn tail(log: &str) -> String {
    let lines: Vec<&str> = log.lines().collect();
    lines[lines.len().saturating_sub(40)..].join("\n")
}
