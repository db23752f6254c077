//! The scenario's client (`wanopt lab cellular-client`, in the lab's
//! `client` namespace, printing a [`ClientReport`] as JSON): one timed bulk
//! download from the generator server and, beside it on a connection of its
//! own, a 64-byte request answered by a 64-byte response every 100 ms, the
//! interactive flow whose wait the download's queue sets.
//!
//! The ping is closed-loop on one persistent connection, as an interactive
//! application's requests are: a request goes out at a tick of the 100 ms
//! clock, the next at the first tick after its response came back, so a
//! response that takes 700 ms costs the ticks it covers (the samples are
//! fewer when the wait is long, as an application's are).

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::thread;
use std::time::{Duration, Instant};

use clap::Args;
use serde::{Deserialize, Serialize};

use crate::kit::stats::round3;
use crate::lossy::client::{self as lossy, ClientError};
use crate::traffic::{request, set_congestion, Mode};

/// The ping's message size, bytes (each way).
pub const PING_BYTES: u64 = 64;

/// Options of the internal `lab cellular-client`.
#[derive(Debug, Args)]
pub struct ClientArgs {
    /// The generator server.
    #[arg(long)]
    pub connect: SocketAddr,
    /// The download's length, seconds.
    #[arg(long, default_value_t = 60)]
    pub seconds: u64,
    /// The ping's period, milliseconds.
    #[arg(long, default_value_t = 100)]
    pub ping_every_ms: u64,
    /// Congestion control of the client's sockets.
    #[arg(long)]
    pub congestion: Option<String>,
}

/// What the client measured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ClientReport {
    /// The download's length, seconds.
    pub seconds: f64,
    /// Payload bytes the download received within it.
    pub bytes: u64,
    /// `(seconds since the start, bytes received so far)` every 50 ms.
    pub samples: Vec<(f64, u64)>,
    /// `(seconds since the start when the request went out, round trip
    /// in ms)` of every ping answered within the run.
    pub pings: Vec<(f64, f64)>,
}

/// Runs the download and the ping beside it.
pub fn run(args: &ClientArgs) -> Result<ClientReport, ClientError> {
    if args.seconds == 0 || args.seconds > 3600 {
        return Err(ClientError::Usage("--seconds must be between 1 and 3600"));
    }
    if !(10..=10_000).contains(&args.ping_every_ms) {
        return Err(ClientError::Usage(
            "--ping-every-ms must be between 10 and 10000",
        ));
    }
    let length = Duration::from_secs(args.seconds);
    let every = Duration::from_millis(args.ping_every_ms);
    let start = Instant::now();
    let ping = {
        let (addr, congestion) = (args.connect, args.congestion.clone());
        thread::spawn(move || ping(addr, congestion.as_deref(), start, length, every))
    };
    let bulk = lossy::bulk(args.connect, 1, length, args.congestion.as_deref());
    let pings = ping
        .join()
        .unwrap_or(Err(ClientError::Usage("the ping thread panicked")))?;
    match bulk? {
        lossy::ClientReport::Bulk {
            seconds,
            bytes,
            samples,
            ..
        } => Ok(ClientReport {
            seconds,
            bytes,
            samples,
            pings,
        }),
        _ => Err(ClientError::Usage("the download reported something else")),
    }
}

/// Pings on one connection from `start` for `length`, a request at each
/// tick of `every` while none is outstanding.
fn ping(
    addr: SocketAddr,
    congestion: Option<&str>,
    start: Instant,
    length: Duration,
    every: Duration,
) -> Result<Vec<(f64, f64)>, ClientError> {
    let err = |source| ClientError::Connection {
        index: 1,
        addr,
        source,
    };
    let mut stream = TcpStream::connect_timeout(&addr, length).map_err(err)?;
    stream.set_nodelay(true).map_err(err)?;
    if let Some(cc) = congestion {
        set_congestion(&stream, cc).map_err(err)?;
    }
    stream
        .write_all(&request(Mode::RequestResponse, PING_BYTES))
        .map_err(err)?;
    let end = start + length;
    let message = [0x55u8; PING_BYTES as usize];
    let mut answer = [0u8; PING_BYTES as usize];
    let mut pings = Vec::new();
    let mut tick = start;
    loop {
        thread::sleep(tick.saturating_duration_since(Instant::now()));
        let sent = Instant::now();
        if sent >= end {
            break;
        }
        stream.write_all(&message).map_err(err)?;
        // A response that does not come by the end (and then some) is
        // not a sample.
        let left = end.saturating_duration_since(sent) + Duration::from_secs(5);
        stream.set_read_timeout(Some(left)).map_err(err)?;
        match stream.read_exact(&mut answer) {
            Ok(()) => {}
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                break
            }
            Err(e) => return Err(err(e)),
        }
        let back = Instant::now();
        if back <= end {
            pings.push((
                round3(sent.duration_since(start).as_secs_f64()),
                round3(back.duration_since(sent).as_secs_f64() * 1000.0),
            ));
        }
        // The first tick after the response.
        let elapsed = back.duration_since(start).as_nanos();
        let period = every.as_nanos().max(1);
        let ticks = elapsed / period + 1;
        tick = start + Duration::from_nanos(u64::try_from(ticks * period).unwrap_or(u64::MAX));
    }
    let _ = stream.shutdown(Shutdown::Write);
    Ok(pings)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_download_and_the_ping_run_against_the_generator_server() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap_or_else(|e| panic!("{e}"));
        let addr = listener.local_addr().unwrap_or_else(|e| panic!("{e}"));
        thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                thread::spawn(move || crate::traffic::serve_one(stream));
            }
        });
        let report = run(&ClientArgs {
            connect: addr,
            seconds: 1,
            ping_every_ms: 100,
            congestion: None,
        })
        .unwrap_or_else(|e| panic!("{e}"));
        assert!(report.bytes > 1_000_000, "{}", report.bytes);
        // Ten ticks in a second on loopback, all answered at once.
        assert!((9..=10).contains(&report.pings.len()), "{:?}", report.pings);
        assert!(report.pings.iter().all(|(_, rtt)| *rtt < 100.0));
        let bad = run(&ClientArgs {
            connect: addr,
            seconds: 1,
            ping_every_ms: 1,
            congestion: None,
        });
        assert!(matches!(bad, Err(ClientError::Usage(_))));
    }
}
