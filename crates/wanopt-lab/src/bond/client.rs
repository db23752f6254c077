//! The scenario's download, run inside the lab's `client` namespace
//! (`wanopt lab bond-client`, which prints a [`DownloadReport`] as JSON):
//! one TCP connection to the generator server asking for a seeded payload
//! ([`crate::traffic::request_seeded`]), every byte checked against the
//! payload the seed makes, the bytes counted per 100 ms as they arrive and
//! the longest time between two arrivals kept; after `--seconds` the
//! client half-closes and reads (and checks) what the path still held.

use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use clap::Args;
use serde::{Deserialize, Serialize};

use crate::kit::stats::{round1, round3};
use crate::traffic::{request_seeded, seeded_payload};

/// Width of a bin of received bytes.
pub const BIN: Duration = Duration::from_millis(100);

/// How long the connect may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// After the download's time, how long the client reads what the path and
/// the nodes still held before it gives up on a clean end.
const DRAIN: Duration = Duration::from_secs(20);

/// Bound on the download (the server stops when the client half-closes,
/// long before).
const BOUND: u64 = 1 << 40;

/// How often a read gives up waiting, so the download's end is kept.
const READ_WAKE: Duration = Duration::from_millis(50);

/// Options of the internal `lab bond-client`.
#[derive(Debug, Args)]
pub struct ClientArgs {
    /// The generator server.
    #[arg(long)]
    pub connect: SocketAddr,
    /// The download's length, seconds.
    #[arg(long, default_value_t = 10)]
    pub seconds: u64,
    /// The payload's seed (24 bits).
    #[arg(long, default_value_t = 1)]
    pub seed: u32,
}

/// Errors of the download before any byte could be counted.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The connection could not be made or the request not sent.
    #[error("connection to {addr}: {source}")]
    Connect {
        /// The server.
        addr: SocketAddr,
        /// The underlying error.
        source: std::io::Error,
    },
    /// Bad options.
    #[error("{0}")]
    Usage(&'static str),
}

/// How the connection ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Ending {
    /// The server closed after the client's half-close: a clean end.
    Clean,
    /// The drain after the half-close did not end within its time.
    DrainTimedOut,
    /// The server closed before the download's time was up.
    ClosedEarly,
    /// The connection failed (a reset, a timeout), with the error.
    Failed(String),
}

impl Ending {
    /// Whether the connection ended other than by the client's own
    /// half-close: a reset, an error or a close before the end.
    pub fn is_reset(&self) -> bool {
        matches!(self, Ending::ClosedEarly | Ending::Failed(_))
    }
}

/// What the download measured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DownloadReport {
    /// When it started (just before the connect), ms since the Unix epoch.
    pub start_unix_ms: u64,
    /// The download's length, seconds (from just before the connect).
    pub seconds: f64,
    /// Payload bytes received within it.
    pub bytes: u64,
    /// Payload bytes received in all, with the drain after it.
    pub total_bytes: u64,
    /// Bytes that were not the payload's at their offset (must be 0).
    pub wrong_bytes: u64,
    /// Bytes received in each [`BIN`] from the start.
    pub bins: Vec<u64>,
    /// The longest time between two arrivals (or from the last one to the
    /// end of the download), ms; 0 if at most one arrival.
    pub longest_stall_ms: f64,
    /// When the longest stall began, s since the start.
    pub longest_stall_at_s: Option<f64>,
    /// How long the drain after the half-close took, s.
    pub drain_s: f64,
    /// How the connection ended.
    pub ending: Ending,
}

/// Checks a stream of received bytes against the payload of a seed.
#[derive(Debug, Clone)]
pub struct Verifier {
    seed: u32,
    offset: u64,
    wrong: u64,
    expected: Vec<u8>,
}

impl Verifier {
    /// A verifier of the payload of `seed`, from its first byte.
    pub fn new(seed: u32) -> Verifier {
        Verifier {
            seed,
            offset: 0,
            wrong: 0,
            expected: Vec::new(),
        }
    }

    /// Checks `data`, the next bytes of the stream.
    pub fn check(&mut self, data: &[u8]) {
        self.expected.resize(data.len(), 0);
        seeded_payload(self.seed, self.offset, &mut self.expected);
        self.wrong += data
            .iter()
            .zip(&self.expected)
            .filter(|(got, want)| got != want)
            .count() as u64;
        self.offset += data.len() as u64;
    }

    /// Bytes checked so far.
    pub fn bytes(&self) -> u64 {
        self.offset
    }

    /// Bytes that were wrong so far.
    pub fn wrong(&self) -> u64 {
        self.wrong
    }
}

/// The bytes per bin and the longest gap between arrivals, as they come.
#[derive(Debug, Clone)]
pub struct Arrivals {
    length: Duration,
    bins: Vec<u64>,
    last: Option<Duration>,
    longest: Duration,
    longest_at: Option<Duration>,
}

impl Arrivals {
    /// Room for `length` of arrivals.
    pub fn new(length: Duration) -> Arrivals {
        let bins = length.as_nanos().div_ceil(BIN.as_nanos()) as usize;
        Arrivals {
            length,
            bins: vec![0; bins],
            last: None,
            longest: Duration::ZERO,
            longest_at: None,
        }
    }

    /// `n` bytes arrived at `at` since the start (ignored from the end
    /// of the download on).
    pub fn arrived(&mut self, at: Duration, n: usize) {
        if at >= self.length {
            return;
        }
        let bin = (at.as_nanos() / BIN.as_nanos()) as usize;
        if let Some(b) = self.bins.get_mut(bin) {
            *b += n as u64;
        }
        self.gap_until(at);
        self.last = Some(at);
    }

    /// Counts the time since the last arrival up to `at` as a gap.
    fn gap_until(&mut self, at: Duration) {
        if let Some(last) = self.last {
            let gap = at.saturating_sub(last);
            if gap > self.longest {
                self.longest = gap;
                self.longest_at = Some(last);
            }
        }
    }

    /// The bins and the longest stall (ms, and when it began, s), the
    /// time from the last arrival to the end counted too.
    pub fn finish(mut self) -> (Vec<u64>, f64, Option<f64>) {
        self.gap_until(self.length);
        (
            self.bins,
            round1(self.longest.as_secs_f64() * 1e3),
            self.longest_at.map(|d| round3(d.as_secs_f64())),
        )
    }
}

/// Runs the download `args` asks for.
pub fn run(args: &ClientArgs) -> Result<DownloadReport, ClientError> {
    if args.seconds == 0 || args.seconds > 3600 {
        return Err(ClientError::Usage("--seconds must be between 1 and 3600"));
    }
    if args.seed > crate::traffic::MAX_SEED {
        return Err(ClientError::Usage("--seed must be under 2^24"));
    }
    download(args.connect, args.seed, Duration::from_secs(args.seconds))
}

/// One download of the payload of `seed` from the generator server at
/// `addr` for `length`, then the half-close and the drain.
pub fn download(
    addr: SocketAddr,
    seed: u32,
    length: Duration,
) -> Result<DownloadReport, ClientError> {
    let start_unix_ms = crate::clock::unix_ms();
    let start = Instant::now();
    let err = |source| ClientError::Connect { addr, source };
    let mut stream = TcpStream::connect_timeout(&addr, CONNECT_TIMEOUT).map_err(err)?;
    stream.set_nodelay(true).map_err(err)?;
    stream
        .write_all(&request_seeded(seed, BOUND))
        .map_err(err)?;
    stream.set_read_timeout(Some(READ_WAKE)).map_err(err)?;
    let mut verifier = Verifier::new(seed);
    let mut arrivals = Arrivals::new(length);
    let mut buf = vec![0u8; 256 * 1024];
    let mut ending = None;
    while start.elapsed() < length {
        match stream.read(&mut buf) {
            Ok(0) => {
                ending = Some(Ending::ClosedEarly);
                break;
            }
            Ok(n) => {
                arrivals.arrived(start.elapsed(), n);
                verifier.check(&buf[..n]);
            }
            Err(e) if is_timeout(&e) => {}
            Err(e) => {
                ending = Some(Ending::Failed(e.to_string()));
                break;
            }
        }
    }
    let seconds = start.elapsed().as_secs_f64().min(length.as_secs_f64());
    let (bins, longest_stall_ms, longest_stall_at_s) = arrivals.finish();
    let bytes = bins.iter().sum();
    let drain_start = Instant::now();
    let ending = match ending {
        Some(ending) => ending,
        None => drain(&mut stream, &mut verifier, &mut buf),
    };
    let _ = stream.shutdown(Shutdown::Both);
    Ok(DownloadReport {
        start_unix_ms,
        seconds: round3(seconds),
        bytes,
        total_bytes: verifier.bytes(),
        wrong_bytes: verifier.wrong(),
        bins,
        longest_stall_ms,
        longest_stall_at_s,
        drain_s: round3(drain_start.elapsed().as_secs_f64()),
        ending,
    })
}

/// Half-closes and reads (checking) until the server closes, at most
/// [`DRAIN`].
fn drain(stream: &mut TcpStream, verifier: &mut Verifier, buf: &mut [u8]) -> Ending {
    if let Err(e) = stream.shutdown(Shutdown::Write) {
        return Ending::Failed(e.to_string());
    }
    let deadline = Instant::now() + DRAIN;
    while Instant::now() < deadline {
        match stream.read(buf) {
            Ok(0) => return Ending::Clean,
            Ok(n) => verifier.check(&buf[..n]),
            Err(e) if is_timeout(&e) => {}
            Err(e) => return Ending::Failed(e.to_string()),
        }
    }
    Ending::DrainTimedOut
}

fn is_timeout(e: &std::io::Error) -> bool {
    matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_verifier_counts_the_bytes_that_are_not_the_seeds() {
        let mut payload = vec![0u8; 10_000];
        seeded_payload(9, 0, &mut payload);
        let mut v = Verifier::new(9);
        for chunk in payload.chunks(777) {
            v.check(chunk);
        }
        assert_eq!((v.bytes(), v.wrong()), (10_000, 0));
        let mut bad = payload.clone();
        bad[5] ^= 1;
        bad[9_999] = bad[9_999].wrapping_add(1);
        let mut v = Verifier::new(9);
        v.check(&bad[..4_000]);
        v.check(&bad[4_000..]);
        assert_eq!(v.wrong(), 2);
        // Another seed's bytes are (nearly) all wrong.
        let mut v = Verifier::new(10);
        v.check(&payload);
        assert!(v.wrong() > 9_900, "{}", v.wrong());
    }

    #[test]
    fn arrivals_fill_bins_and_keep_the_longest_stall() {
        let ms = Duration::from_millis;
        let mut a = Arrivals::new(ms(1_000));
        a.arrived(ms(10), 100);
        a.arrived(ms(50), 100);
        a.arrived(ms(120), 50);
        // Nothing from 120 ms to 450 ms: a 330 ms stall.
        a.arrived(ms(450), 10);
        a.arrived(ms(990), 1);
        a.arrived(ms(2_000), 1_000);
        let (bins, longest, at) = a.finish();
        assert_eq!(bins.len(), 10);
        assert_eq!(&bins[..5], &[200, 50, 0, 0, 10]);
        assert_eq!(bins[9], 1);
        assert_eq!((longest, at), (540.0, Some(0.45)));
        // Silence to the end counts.
        let mut b = Arrivals::new(ms(1_000));
        b.arrived(ms(100), 1);
        assert_eq!(b.finish().1, 900.0);
        assert_eq!(Arrivals::new(ms(1_000)).finish().1, 0.0);
    }

    /// Against the generator server on loopback: the download is every
    /// byte of the seed's payload, in bins, and ends cleanly.
    #[test]
    fn a_download_checks_every_byte_and_ends_cleanly() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap_or_else(|e| panic!("{e}"));
        let addr = listener.local_addr().unwrap_or_else(|e| panic!("{e}"));
        std::thread::spawn(move || {
            for conn in listener.incoming().flatten() {
                std::thread::spawn(move || crate::traffic::serve_one(conn));
            }
        });
        let report =
            download(addr, 77, Duration::from_millis(500)).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(report.ending, Ending::Clean);
        assert!(!report.ending.is_reset());
        assert_eq!(report.wrong_bytes, 0);
        assert!(report.bytes > 0 && report.total_bytes >= report.bytes);
        assert_eq!(report.bins.len(), 5);
        assert_eq!(report.bins.iter().sum::<u64>(), report.bytes);
        assert!(report.longest_stall_ms < 500.0, "{report:?}");
        let json = serde_json::to_string(&report).unwrap_or_default();
        let back: DownloadReport = serde_json::from_str(&json).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(back, report);
        assert!(Ending::Failed("reset".into()).is_reset() && Ending::ClosedEarly.is_reset());
        assert!(!Ending::DrainTimedOut.is_reset());
    }
}
