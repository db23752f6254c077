//! Byte-checked downloads for the `cluster` scenario: a server thread in
//! the `server` namespace streams the pseudo-random bytes a client names
//! (a seed and a length), and a client thread in a site's namespace
//! reads them and compares every byte with the same stream: a transfer
//! reports what arrived, how fast, whether it was reset, and how many
//! bytes were wrong (always 0 unless something broke).
//!
//! Threads enter the namespaces with `setns`, so the scenario needs no
//! helper process; the server is one thread per connection.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use crate::rng::Rng;
use crate::topology::{Lab, Node, SERVER_ADDR};

/// The checked server's TCP port on the server.
pub const PORT: u16 = 6400;

/// Enters `node`'s network namespace (this thread only).
fn enter(lab: &Lab, node: Node) -> Result<(), String> {
    let path = format!("/run/netns/{}", lab.netns(node));
    let file = std::fs::File::open(&path).map_err(|e| format!("{path}: {e}"))?;
    nix::sched::setns(file, nix::sched::CloneFlags::CLONE_NEWNET)
        .map_err(|e| format!("setns {path}: {e}"))
}

/// Starts the checked server in `lab`'s server namespace; it serves until
/// the process ends or the namespace goes.
pub fn serve(lab: &Lab) -> Result<(), String> {
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    let lab = lab.clone();
    thread::spawn(move || {
        let addr = format!("{SERVER_ADDR}:{PORT}");
        let bound = enter(&lab, Node::Server)
            .and_then(|()| TcpListener::bind(&addr).map_err(|e| format!("bind {addr}: {e}")));
        let listener = match bound {
            Ok(listener) => {
                let _ = ready_tx.send(Ok(()));
                listener
            }
            Err(e) => {
                let _ = ready_tx.send(Err(e));
                return;
            }
        };
        for stream in listener.incoming() {
            let Ok(stream) = stream else { continue };
            thread::spawn(move || {
                let _ = answer(stream);
            });
        }
    });
    ready_rx
        .recv_timeout(Duration::from_secs(5))
        .map_err(|e| format!("the checked server did not start: {e}"))?
}

/// One request: 16 bytes (seed, length, big-endian), then the stream.
fn answer(mut stream: TcpStream) -> std::io::Result<()> {
    let mut request = [0u8; 16];
    stream.read_exact(&mut request)?;
    let seed = u64::from_be_bytes(request[..8].try_into().unwrap_or_default());
    let mut left = u64::from_be_bytes(request[8..].try_into().unwrap_or_default());
    let mut rng = Rng::new(seed);
    let mut buf = vec![0u8; 64 * 1024];
    while left > 0 {
        let n = left.min(buf.len() as u64) as usize;
        rng.fill(&mut buf[..n]);
        stream.write_all(&buf[..n])?;
        left -= n as u64;
    }
    stream.shutdown(std::net::Shutdown::Write)
}

/// What one download did.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Outcome {
    /// Bytes asked for.
    pub wanted: u64,
    /// Bytes that arrived.
    pub bytes: u64,
    /// Bytes that arrived and differ from what the server sent.
    pub wrong_bytes: u64,
    /// Seconds from the connect to the end (or the failure).
    pub seconds: f64,
    /// `(seconds since the connect, bytes so far)`, every 250 ms or so.
    pub samples: Vec<(f64, u64)>,
    /// Why it did not complete (a reset, a timeout, a refused connect).
    pub failure: Option<String>,
}

impl Outcome {
    /// Goodput over the whole transfer, Mbit/s.
    pub fn mbit_s(&self) -> f64 {
        if self.seconds > 0.0 {
            self.bytes as f64 * 8.0 / self.seconds / 1e6
        } else {
            0.0
        }
    }

    /// Goodput between `from` and `to` seconds after the connect, from the
    /// samples; `None` without two samples in that span.
    pub fn mbit_s_between(&self, from: f64, to: f64) -> Option<f64> {
        let inside: Vec<&(f64, u64)> = self
            .samples
            .iter()
            .filter(|(t, _)| *t >= from && *t <= to)
            .collect();
        let (first, last) = (inside.first()?, inside.last()?);
        (last.0 > first.0).then(|| (last.1 - first.1) as f64 * 8.0 / (last.0 - first.0) / 1e6)
    }

    /// Whether every byte arrived and none was wrong.
    pub fn complete(&self) -> bool {
        self.failure.is_none() && self.bytes == self.wanted && self.wrong_bytes == 0
    }
}

/// Downloads `length` bytes of stream `seed` from the checked server, in
/// `client`'s namespace, giving up when no byte arrives for `stall` or
/// when `stop` is set; the caller's thread waits for it.
pub fn download(
    lab: &Lab,
    client: Node,
    seed: u64,
    length: u64,
    stall: Duration,
    stop: Option<Arc<AtomicBool>>,
) -> Outcome {
    let lab = lab.clone();
    thread::spawn(move || {
        let mut outcome = Outcome {
            wanted: length,
            ..Outcome::default()
        };
        let start = Instant::now();
        let result = enter(&lab, client)
            .and_then(|()| fetch(seed, length, stall, stop.as_deref(), start, &mut outcome));
        outcome.seconds = start.elapsed().as_secs_f64();
        if let Err(e) = result {
            outcome.failure = Some(e);
        }
        outcome
    })
    .join()
    .unwrap_or_else(|_| Outcome {
        wanted: length,
        failure: Some("the download's thread panicked".into()),
        ..Outcome::default()
    })
}

fn fetch(
    seed: u64,
    length: u64,
    stall: Duration,
    stop: Option<&AtomicBool>,
    start: Instant,
    outcome: &mut Outcome,
) -> Result<(), String> {
    let addr: SocketAddr = format!("{SERVER_ADDR}:{PORT}")
        .parse()
        .map_err(|e| format!("{e}"))?;
    let mut stream =
        TcpStream::connect_timeout(&addr, stall).map_err(|e| format!("connect: {e}"))?;
    stream
        .set_read_timeout(Some(stall.min(Duration::from_millis(250))))
        .map_err(|e| e.to_string())?;
    let mut request = [0u8; 16];
    request[..8].copy_from_slice(&seed.to_be_bytes());
    request[8..].copy_from_slice(&length.to_be_bytes());
    stream
        .write_all(&request)
        .map_err(|e| format!("request: {e}"))?;
    let mut expected = Rng::new(seed);
    let mut want = vec![0u8; 64 * 1024];
    let mut got = vec![0u8; 64 * 1024];
    // Bytes of `want` already compared, and bytes of it filled.
    let (mut used, mut filled) = (0usize, 0usize);
    let mut last_byte = Instant::now();
    let mut last_sample = 0.0f64;
    outcome.samples.push((0.0, 0));
    while outcome.bytes < length {
        if stop.is_some_and(|s| s.load(Ordering::Relaxed)) {
            return Err("stopped".into());
        }
        match stream.read(&mut got) {
            Ok(0) => {
                return Err(format!(
                    "the server's side ended after {} of {length} bytes",
                    outcome.bytes
                ))
            }
            Ok(n) => {
                let mut at = 0;
                while at < n {
                    if used == filled {
                        let left = length
                            .saturating_sub(outcome.bytes + at as u64)
                            .min(want.len() as u64);
                        if left == 0 {
                            // More than was asked for: every extra byte
                            // is wrong.
                            outcome.wrong_bytes += (n - at) as u64;
                            break;
                        }
                        filled = left as usize;
                        expected.fill(&mut want[..filled]);
                        used = 0;
                    }
                    let take = (n - at).min(filled - used);
                    outcome.wrong_bytes += got[at..at + take]
                        .iter()
                        .zip(&want[used..used + take])
                        .filter(|(a, b)| a != b)
                        .count() as u64;
                    used += take;
                    at += take;
                }
                outcome.bytes += n as u64;
                last_byte = Instant::now();
            }
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                if last_byte.elapsed() >= stall {
                    return Err(format!("no byte for {stall:?}"));
                }
            }
            Err(e) => return Err(format!("read: {e}")),
        }
        let now = start.elapsed().as_secs_f64();
        if now - last_sample >= 0.25 {
            outcome.samples.push((now, outcome.bytes));
            last_sample = now;
        }
    }
    outcome
        .samples
        .push((start.elapsed().as_secs_f64(), outcome.bytes));
    Ok(())
}

/// Whether a failure is a reset of the connection (what a flow through a
/// replica that died gets), as opposed to a stall or a refusal.
pub fn is_reset(failure: &str) -> bool {
    failure.contains("reset") || failure.contains("ended after") || failure.contains("Broken pipe")
}
