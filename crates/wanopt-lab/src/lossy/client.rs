//! The scenario's client workloads, run inside the lab's `client`
//! namespace (`wanopt lab lossy-client`, which prints a [`ClientReport`] as
//! JSON) against the generator server ([`crate::traffic`]): a timed bulk
//! download sampled as it arrives, one download of a size with a deadline,
//! and 1 KB requests answered by 1 KB responses.

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use clap::{Args, ValueEnum};
use serde::{Deserialize, Serialize};

use crate::kit::stats::round3;
use crate::traffic::{request, set_congestion, Mode};

/// How often a bulk run samples the bytes received.
pub const SAMPLE_EVERY: Duration = Duration::from_millis(50);

/// After a timed bulk run, how long the streams may take to drain (what
/// the path still held) before they are cut.
const DRAIN: Duration = Duration::from_secs(20);

/// Bound on what one bulk stream may download (the server stops when the
/// client half-closes, long before).
const BULK_BOUND: u64 = 1 << 40;

/// Which workload.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Kind {
    /// Parallel downloads for a fixed time.
    Bulk,
    /// One download of `--bytes`.
    Transfer,
    /// Requests answered by responses of `--bytes` each.
    Rpc,
}

/// Options of the internal `lab lossy-client`.
#[derive(Debug, Args)]
pub struct ClientArgs {
    /// The generator server.
    #[arg(long)]
    pub connect: SocketAddr,
    /// The workload.
    #[arg(long, value_enum)]
    pub workload: Kind,
    /// Parallel connections.
    #[arg(long, default_value_t = 1)]
    pub streams: usize,
    /// Bulk: the run's length; otherwise the deadline, seconds.
    #[arg(long, default_value_t = 10)]
    pub seconds: u64,
    /// Transfer: bytes; rpc: bytes of a request and of a response.
    #[arg(long, default_value_t = 1_000)]
    pub bytes: u64,
    /// Rpc: requests per connection.
    #[arg(long, default_value_t = 50)]
    pub requests: usize,
    /// Congestion control of the client's sockets.
    #[arg(long)]
    pub congestion: Option<String>,
}

/// What a workload measured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "workload", rename_all = "lowercase")]
pub enum ClientReport {
    /// A timed bulk run.
    Bulk {
        /// The run's length, seconds (from just before the first connect).
        seconds: f64,
        /// Payload bytes received within it.
        bytes: u64,
        /// Payload bytes received in all: with the drain after the run
        /// (what the path and the nodes still held when the client
        /// half-closed), so that the wire overhead counts every byte.
        total_bytes: u64,
        /// `(seconds since the start, bytes received so far)` every
        /// [`SAMPLE_EVERY`].
        samples: Vec<(f64, u64)>,
    },
    /// One download.
    Transfer {
        /// Completion time from just before the connect to the last
        /// byte, seconds; `None` if the deadline passed first.
        seconds: Option<f64>,
        /// Payload bytes received.
        bytes: u64,
    },
    /// Requests and responses.
    Rpc {
        /// Each exchange's time from the request's first byte written to
        /// the response's last byte read, ms.
        latencies_ms: Vec<f64>,
        /// Payload bytes sent and received (requests and responses).
        bytes: u64,
    },
}

/// Errors of a client workload.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// A connection failed.
    #[error("connection {index} to {addr}: {source}")]
    Connection {
        /// The connection's index.
        index: usize,
        /// The server.
        addr: SocketAddr,
        /// The underlying error.
        source: std::io::Error,
    },
    /// Bad options.
    #[error("{0}")]
    Usage(&'static str),
}

/// Runs the workload `args` asks for.
pub fn run(args: &ClientArgs) -> Result<ClientReport, ClientError> {
    if args.streams == 0 || args.streams > 64 {
        return Err(ClientError::Usage("--streams must be between 1 and 64"));
    }
    if args.seconds == 0 || args.seconds > 3600 {
        return Err(ClientError::Usage("--seconds must be between 1 and 3600"));
    }
    let time = Duration::from_secs(args.seconds);
    let cc = args.congestion.as_deref();
    match args.workload {
        Kind::Bulk => bulk(args.connect, args.streams, time, cc),
        Kind::Transfer => transfer(args.connect, args.bytes, time, cc),
        Kind::Rpc => rpc(
            args.connect,
            args.streams,
            args.requests,
            args.bytes,
            time,
            cc,
        ),
    }
}

/// Connects to `addr` with `congestion` and sends the request of `mode`.
fn connect(
    index: usize,
    addr: SocketAddr,
    congestion: Option<&str>,
    mode: Mode,
    count: u64,
    timeout: Duration,
) -> Result<TcpStream, ClientError> {
    let err = |source| ClientError::Connection {
        index,
        addr,
        source,
    };
    let mut stream = TcpStream::connect_timeout(&addr, timeout).map_err(err)?;
    stream.set_nodelay(true).map_err(err)?;
    if let Some(cc) = congestion {
        set_congestion(&stream, cc).map_err(err)?;
    }
    stream.write_all(&request(mode, count)).map_err(err)?;
    Ok(stream)
}

/// `streams` downloads for `length`, the bytes sampled as they arrive;
/// then every stream half-closes and drains.
pub fn bulk(
    addr: SocketAddr,
    streams: usize,
    length: Duration,
    congestion: Option<&str>,
) -> Result<ClientReport, ClientError> {
    let start = Instant::now();
    let received = Arc::new(AtomicU64::new(0));
    let ended = Arc::new(AtomicUsize::new(0));
    let mut handles = Vec::new();
    let mut sockets = Vec::new();
    for index in 0..streams {
        let stream = connect(
            index,
            addr,
            congestion,
            Mode::DownloadUntilClosed,
            BULK_BOUND,
            length,
        )?;
        let err = |source| ClientError::Connection {
            index,
            addr,
            source,
        };
        sockets.push(stream.try_clone().map_err(err)?);
        let (received, ended) = (received.clone(), ended.clone());
        handles.push(thread::spawn(move || {
            let mut stream = stream;
            let _ = stream.set_read_timeout(Some(DRAIN));
            let mut buf = vec![0u8; 256 * 1024];
            while let Ok(n @ 1..) = stream.read(&mut buf) {
                received.fetch_add(n as u64, Ordering::Relaxed);
            }
            ended.fetch_add(1, Ordering::Relaxed);
        }));
    }
    let mut samples = Vec::new();
    let mut next = start + SAMPLE_EVERY;
    while next <= start + length {
        thread::sleep(next.saturating_duration_since(Instant::now()));
        samples.push((
            round3(start.elapsed().as_secs_f64()),
            received.load(Ordering::Relaxed),
        ));
        next += SAMPLE_EVERY;
    }
    let seconds = start.elapsed().as_secs_f64();
    let bytes = received.load(Ordering::Relaxed);
    for socket in &sockets {
        let _ = socket.shutdown(Shutdown::Write);
    }
    let drained = Instant::now() + DRAIN;
    while ended.load(Ordering::Relaxed) < streams && Instant::now() < drained {
        thread::sleep(Duration::from_millis(20));
    }
    for socket in &sockets {
        let _ = socket.shutdown(Shutdown::Both);
    }
    for handle in handles {
        let _ = handle.join();
    }
    Ok(ClientReport::Bulk {
        seconds,
        bytes,
        total_bytes: received.load(Ordering::Relaxed),
        samples,
    })
}

/// One download of `bytes`, given up at `deadline`.
pub fn transfer(
    addr: SocketAddr,
    bytes: u64,
    deadline: Duration,
    congestion: Option<&str>,
) -> Result<ClientReport, ClientError> {
    let start = Instant::now();
    let mut stream = match connect(0, addr, congestion, Mode::Download, bytes, deadline) {
        Ok(stream) => stream,
        // A handshake lost until the deadline: not done, like a slow transfer.
        Err(ClientError::Connection { source, .. }) if is_timeout(&source) => {
            return Ok(ClientReport::Transfer {
                seconds: None,
                bytes: 0,
            })
        }
        Err(e) => return Err(e),
    };
    let mut buf = vec![0u8; 256 * 1024];
    let mut got = 0u64;
    while got < bytes {
        let left = deadline.saturating_sub(start.elapsed());
        if left.is_zero() {
            break;
        }
        let _ = stream.set_read_timeout(Some(left));
        match stream.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => got += n as u64,
            Err(e) if is_timeout(&e) => break,
            Err(source) => {
                return Err(ClientError::Connection {
                    index: 0,
                    addr,
                    source,
                })
            }
        }
    }
    let seconds = (got >= bytes).then(|| start.elapsed().as_secs_f64());
    Ok(ClientReport::Transfer {
        seconds,
        bytes: got,
    })
}

/// `connections` connections, each sending `requests` messages of `size`
/// one after another and timing each response, until `deadline`.
pub fn rpc(
    addr: SocketAddr,
    connections: usize,
    requests: usize,
    size: u64,
    deadline: Duration,
    congestion: Option<&str>,
) -> Result<ClientReport, ClientError> {
    let start = Instant::now();
    let size = size.clamp(1, 64 * 1024);
    let mut handles = Vec::new();
    for index in 0..connections {
        let cc = congestion.map(str::to_string);
        handles.push(thread::spawn(move || {
            let mut stream = connect(
                index,
                addr,
                cc.as_deref(),
                Mode::RequestResponse,
                size,
                deadline,
            )?;
            let err = |source| ClientError::Connection {
                index,
                addr,
                source,
            };
            let mut rng = crate::rng::Rng::new(index as u64 + 1);
            let mut message = vec![0u8; size as usize];
            let mut answer = vec![0u8; size as usize];
            let mut latencies = Vec::with_capacity(requests);
            for _ in 0..requests {
                let left = deadline.saturating_sub(start.elapsed());
                if left.is_zero() {
                    break;
                }
                stream.set_read_timeout(Some(left)).map_err(err)?;
                rng.fill(&mut message);
                let sent = Instant::now();
                stream.write_all(&message).map_err(err)?;
                match stream.read_exact(&mut answer) {
                    Ok(()) => latencies.push(sent.elapsed().as_secs_f64() * 1e3),
                    Err(e) if is_timeout(&e) => break,
                    Err(e) => return Err(err(e)),
                }
            }
            let _ = stream.shutdown(Shutdown::Write);
            let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
            let mut sink = [0u8; 4096];
            while let Ok(1..) = stream.read(&mut sink) {}
            Ok(latencies)
        }));
    }
    let mut latencies_ms = Vec::new();
    for handle in handles {
        match handle.join() {
            Ok(Ok(l)) => latencies_ms.extend(l.into_iter().map(round3)),
            Ok(Err(e)) => return Err(e),
            Err(_) => return Err(ClientError::Usage("an rpc connection's thread panicked")),
        }
    }
    let bytes = 2 * latencies_ms.len() as u64 * size;
    Ok(ClientReport::Rpc {
        latencies_ms,
        bytes,
    })
}

fn is_timeout(e: &std::io::Error) -> bool {
    matches!(
        e.kind(),
        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The generator server on loopback.
    fn server() -> SocketAddr {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap_or_else(|e| panic!("{e}"));
        let addr = listener.local_addr().unwrap_or_else(|e| panic!("{e}"));
        thread::spawn(move || {
            for conn in listener.incoming().flatten() {
                thread::spawn(move || crate::traffic::serve_one(conn));
            }
        });
        addr
    }

    /// Each workload against the generator server: a timed bulk run ends
    /// cleanly on time with its samples, a transfer delivers its bytes,
    /// every request gets its response.
    #[test]
    fn workloads_run_against_the_generator_server() {
        let addr = server();
        let report = bulk(addr, 2, Duration::from_secs(1), Some("reno"));
        let Ok(ClientReport::Bulk {
            seconds,
            bytes,
            total_bytes,
            samples,
        }) = report
        else {
            panic!("{report:?}")
        };
        assert!((1.0..1.5).contains(&seconds), "{seconds}");
        assert!(bytes > 0 && total_bytes >= bytes);
        assert_eq!(samples.len(), 20);
        assert!(samples
            .windows(2)
            .all(|w| w[0].0 < w[1].0 && w[0].1 <= w[1].1));
        let report = transfer(addr, 3_000_000, Duration::from_secs(10), None);
        assert!(
            matches!(
                report,
                Ok(ClientReport::Transfer {
                    seconds: Some(_),
                    bytes: 3_000_000
                })
            ),
            "{report:?}"
        );
        let report = rpc(addr, 3, 20, 1_000, Duration::from_secs(10), None);
        let Ok(ClientReport::Rpc {
            latencies_ms,
            bytes,
        }) = report
        else {
            panic!("{report:?}")
        };
        assert_eq!(latencies_ms.len(), 60);
        assert_eq!(bytes, 120_000);
    }
}
