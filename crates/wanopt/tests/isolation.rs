//! Isolation between flows: a client that stops reading holds at most its
//! own share of the tunnel; every other flow keeps moving.
//!
//! `WANOPT_ISOLATION_STALLED` sets how many clients stall (default 3) and
//! `WANOPT_ISOLATION_EDGE_ARGS` adds flags to the edge.

mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use common::*;

/// A server that sends `len` bytes of fresh data (a pattern seeded anew
/// for each connection, so that no byte cache helps) to each client.
fn fresh_source(len: u64) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let seeds = Arc::new(AtomicU64::new(1));
    thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let seed = seeds.fetch_add(1, Ordering::Relaxed);
            thread::spawn(move || {
                let mut pattern = Pattern::new(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15));
                let mut buf = vec![0u8; 64 << 10];
                let mut left = len;
                while left > 0 {
                    let n = left.min(buf.len() as u64) as usize;
                    pattern.fill(&mut buf[..n]);
                    if stream.write_all(&buf[..n]).is_err() {
                        return;
                    }
                    left -= n as u64;
                }
            });
        }
    });
    addr
}

/// Fails today (issue 31, item 1): each stalled flow's unread data holds
/// its whole stream window (48 MiB) of the tunnel's connection window
/// (96 MiB), so two or three stalled flows leave no credit for any other
/// flow in that direction, and the 1 MiB fetch gets no byte in 20 s. With
/// `WANOPT_ISOLATION_EDGE_ARGS="--stream-window 16MiB"` it passes with 3
/// stalled clients and fails again with `WANOPT_ISOLATION_STALLED=6`: the
/// fix is in how windows are sized and granted, not in the pumps. Run it
/// with `cargo test --release -p wanopt --test isolation -- --ignored`.
#[test]
#[ignore = "fails until flows are isolated (issue 31, item 1)"]
fn three_clients_that_never_read_do_not_stall_a_fetch_by_another() {
    let big = fresh_source(4 << 30);
    let small = fresh_source(1 << 20);
    let (listen_big, listen_small) = (free_tcp(), free_tcp());
    let _pair = Pair::start(
        &["127.0.0.1"],
        &[
            (listen_big, big.to_string()),
            (listen_small, small.to_string()),
        ],
        &std::env::var("WANOPT_ISOLATION_EDGE_ARGS")
            .unwrap_or_default()
            .split_whitespace()
            .collect::<Vec<_>>(),
    );
    // Three clients ask for large files and never read.
    let count: usize = std::env::var("WANOPT_ISOLATION_STALLED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3);
    let stalled: Vec<TcpStream> = (0..count)
        .map(|_| {
            let mut c = TcpStream::connect(listen_big).unwrap();
            c.write_all(b"GET /big\r\n").unwrap();
            c
        })
        .collect();
    // Long enough for their data to fill what the tunnel lets them have.
    thread::sleep(Duration::from_secs(3));

    let started = Instant::now();
    let mut c = TcpStream::connect(listen_small).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let mut got = Vec::new();
    let outcome = c.read_to_end(&mut got);
    let took = started.elapsed();
    eprintln!(
        "1 MiB fetch with {count} stalled clients: {} bytes in {took:?} ({outcome:?})",
        got.len()
    );
    assert_eq!(got.len(), 1 << 20, "{outcome:?} after {took:?}");
    assert!(took < Duration::from_secs(1), "took {took:?}");
    drop(stalled);
}

/// Uploads likewise (fails today): three clients send to a server that
/// accepts and never reads; their data fills the core's connection window,
/// and another client's request (upstream) and so its download get no
/// byte through.
#[test]
#[ignore = "fails until flows are isolated (issue 31, item 1)"]
fn three_uploads_to_a_server_that_never_reads_do_not_stall_a_fetch_by_another() {
    let sink = TcpListener::bind("127.0.0.1:0").unwrap();
    let sink_addr = sink.local_addr().unwrap();
    thread::spawn(move || {
        // Accept and hold, never read.
        let held: Vec<TcpStream> = sink.incoming().map_while(Result::ok).take(3).collect();
        thread::sleep(Duration::from_secs(60));
        drop(held);
    });
    let small = fresh_source(1 << 20);
    let (listen_sink, listen_small) = (free_tcp(), free_tcp());
    let _pair = Pair::start(
        &["127.0.0.1"],
        &[
            (listen_sink, sink_addr.to_string()),
            (listen_small, small.to_string()),
        ],
        &std::env::var("WANOPT_ISOLATION_EDGE_ARGS")
            .unwrap_or_default()
            .split_whitespace()
            .collect::<Vec<_>>(),
    );
    for seed in 0..3u64 {
        thread::spawn(move || {
            let Ok(mut c) = TcpStream::connect(listen_sink) else {
                return;
            };
            let mut pattern = Pattern::new(seed + 100);
            let mut buf = vec![0u8; 1 << 20];
            for _ in 0..1024 {
                pattern.fill(&mut buf);
                if c.write_all(&buf).is_err() {
                    return;
                }
            }
        });
    }
    thread::sleep(Duration::from_secs(3));

    let started = Instant::now();
    let mut c = TcpStream::connect(listen_small).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    c.write_all(b"GET /small\r\n").unwrap();
    let mut got = Vec::new();
    let outcome = c.read_to_end(&mut got);
    let took = started.elapsed();
    eprintln!(
        "1 MiB fetch with 3 uploads stalled at the server: {} bytes in {took:?} ({outcome:?})",
        got.len()
    );
    assert_eq!(got.len(), 1 << 20, "{outcome:?} after {took:?}");
    assert!(took < Duration::from_secs(1), "took {took:?}");
}
