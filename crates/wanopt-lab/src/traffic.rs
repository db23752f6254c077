//! The built-in bulk traffic generator (the reference's
//! `iperf -n 100MB -P 4 -R`): N parallel TCP streams of M bytes each, in
//! either direction.
//!
//! The server (`wanopt lab gen-server`, started by `lab up` in the `server`
//! namespace) reads a 16-byte request per connection: magic `WLG1`, the
//! mode ([`Mode`]: 0 the client sends, 1 the server sends, 2 the server
//! sends until the client half-closes, 3 request/response), three zero
//! bytes and the byte count (u64, big endian). When the server sends, it
//! writes the bytes and closes; when the client sends, the server answers
//! with the count it received once it has it all. In mode 2 the count is
//! only a bound: the server stops writing and closes once the client has
//! half-closed (a timed bulk download that ends without a reset). In mode 3
//! the count is a message size: the server answers every message of that
//! size with one of its own, until the client half-closes. Mode 4 is mode 2
//! with a payload the client can check: bytes 5 to 7 of the request are a
//! seed (24 bits, big endian) and byte `i` of the stream is
//! [`seeded_payload`]'s for that seed, so the client verifies every byte
//! it receives. The payload is pseudo-random
//! (incompressible, never repeated). Aggregate throughput is payload
//! bits over the wall time from just before the first connect to the last
//! byte (download) or the last acknowledgement (upload).

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::thread;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

/// The generator's TCP port on the server.
pub const GENERATOR_PORT: u16 = 5999;

const MAGIC: &[u8; 4] = b"WLG1";

/// What a connection to the generator server asks for (the request's
/// fifth byte).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Mode {
    /// The client sends the count, the server acknowledges it.
    Upload = 0,
    /// The server sends the count and closes.
    Download = 1,
    /// The server sends (at most the count) until the client half-closes.
    DownloadUntilClosed = 2,
    /// The server answers each message of the count's size with one of
    /// its own, until the client half-closes.
    RequestResponse = 3,
    /// As [`Mode::DownloadUntilClosed`], the payload [`seeded_payload`]'s
    /// for the request's seed.
    DownloadSeeded = 4,
}

/// The 16-byte request of `mode` with `count`.
pub fn request(mode: Mode, count: u64) -> [u8; 16] {
    let mut header = [0u8; 16];
    header[..4].copy_from_slice(MAGIC);
    header[4] = mode as u8;
    header[8..].copy_from_slice(&count.to_be_bytes());
    header
}

/// The largest seed a request carries (24 bits).
pub const MAX_SEED: u32 = 0xff_ffff;

/// The request of a [`Mode::DownloadSeeded`] download of at most `count`
/// bytes whose payload is `seed`'s (its low 24 bits).
pub fn request_seeded(seed: u32, count: u64) -> [u8; 16] {
    let mut header = request(Mode::DownloadSeeded, count);
    header[5..8].copy_from_slice(&(seed & MAX_SEED).to_be_bytes()[1..]);
    header
}

/// The seed of a request (bytes 5 to 7).
fn request_seed(header: &[u8; 16]) -> u32 {
    u32::from_be_bytes([0, header[5], header[6], header[7]])
}

/// Fills `buf` with the bytes at `offset..offset + buf.len()` of the
/// payload of `seed`: the stream of SplitMix64 outputs (little endian) from
/// a state set by the seed, so any stretch of it can be made, or checked,
/// without the bytes before it (Steele, Lea and Flood, "Fast splittable
/// pseudorandom number generators", OOPSLA 2014).
pub fn seeded_payload(seed: u32, offset: u64, buf: &mut [u8]) {
    let base = crate::rng::mix(u64::from(seed) ^ 0x5eed_0000_0000_0000);
    let word = |index: u64| {
        crate::rng::mix(base.wrapping_add(index.wrapping_mul(0x9e37_79b9_7f4a_7c15))).to_le_bytes()
    };
    let mut position = offset;
    let mut rest = buf;
    while !rest.is_empty() {
        let bytes = word(position / 8);
        let from = (position % 8) as usize;
        let n = (8 - from).min(rest.len());
        rest[..n].copy_from_slice(&bytes[from..from + n]);
        rest = &mut rest[n..];
        position += n as u64;
    }
}
const CHUNK: usize = 256 * 1024;

/// Errors from the traffic generator.
#[derive(Debug, thiserror::Error)]
pub enum TrafficError {
    /// The server could not listen.
    #[error("cannot listen on {addr}: {cause}")]
    Listen {
        /// The address.
        addr: SocketAddr,
        /// The underlying error.
        cause: std::io::Error,
    },
    /// A stream failed.
    #[error("stream {stream} to {addr}: {cause}")]
    Stream {
        /// The stream's index.
        stream: usize,
        /// The server.
        addr: SocketAddr,
        /// The underlying error.
        cause: std::io::Error,
    },
    /// A stream ended early.
    #[error("stream {stream} ended after {got} of {want} bytes")]
    Short {
        /// The stream's index.
        stream: usize,
        /// Bytes moved.
        got: u64,
        /// Bytes asked for.
        want: u64,
    },
    /// A size could not be parsed.
    #[error("bad size `{0}`: write e.g. 100MB, 10MiB or 5000000")]
    Size(String),
}

/// Which way the bytes flow.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Direction {
    /// Client to server.
    Upload,
    /// Server to client (iperf `-R`).
    Download,
}

/// One bulk transfer: `streams` parallel streams of `bytes` each.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Workload {
    /// Parallel streams.
    pub streams: usize,
    /// Payload bytes per stream.
    pub bytes: u64,
    /// Which way.
    pub direction: Direction,
}

/// The outcome of one transfer.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TrafficReport {
    /// What was asked.
    pub workload: Workload,
    /// Payload bytes moved over all streams.
    pub total_bytes: u64,
    /// Wall time from the first connect to the last byte, seconds.
    pub seconds: f64,
    /// Aggregate payload throughput, Mbit/s (10^6 bit/s).
    pub throughput_mbps: f64,
    /// Each stream's completion time, seconds from the start.
    pub stream_seconds: Vec<f64>,
}

/// Parses a byte count: `100MB` (10^6), `10MiB` (2^20), `64KB`, `1GB`, or bare bytes.
pub fn parse_size(text: &str) -> Result<u64, TrafficError> {
    let t = text.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (number, unit) = t.split_at(split);
    let value: f64 = number
        .parse()
        .map_err(|_| TrafficError::Size(text.to_string()))?;
    let factor = match unit.to_ascii_lowercase().as_str() {
        "" | "b" => 1.0,
        "kb" | "k" => 1e3,
        "mb" | "m" => 1e6,
        "gb" | "g" => 1e9,
        "kib" => 1024.0,
        "mib" => 1024.0 * 1024.0,
        "gib" => 1024.0 * 1024.0 * 1024.0,
        _ => return Err(TrafficError::Size(text.to_string())),
    };
    let bytes = value * factor;
    if !bytes.is_finite() || !(1.0..=1e13).contains(&bytes) {
        return Err(TrafficError::Size(text.to_string()));
    }
    Ok(bytes.round() as u64)
}

/// Serves generator requests on `addr` forever, with `congestion` control
/// (e.g. `cubic`) on every connection if given.
pub fn serve(addr: SocketAddr, congestion: Option<String>) -> Result<(), TrafficError> {
    let listener = TcpListener::bind(addr).map_err(|source| TrafficError::Listen {
        addr,
        cause: source,
    })?;
    for conn in listener.incoming() {
        let Ok(stream) = conn else { continue };
        if let Some(cc) = &congestion {
            let _ = set_congestion(&stream, cc);
        }
        thread::spawn(move || {
            let _ = serve_one(stream);
        });
    }
    Ok(())
}

/// Sets a socket's congestion control (`TCP_CONGESTION`).
pub fn set_congestion(stream: &TcpStream, name: &str) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    // SAFETY: the name buffer is valid for its length during the call.
    let ret = unsafe {
        libc::setsockopt(
            stream.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_CONGESTION,
            name.as_ptr().cast(),
            name.len() as libc::socklen_t,
        )
    };
    if ret < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

pub(crate) fn serve_one(mut stream: TcpStream) -> std::io::Result<()> {
    let mut header = [0u8; 16];
    stream.read_exact(&mut header)?;
    if &header[..4] != MAGIC {
        return Ok(());
    }
    let mut count = [0u8; 8];
    count.copy_from_slice(&header[8..16]);
    let bytes = u64::from_be_bytes(count);
    match header[4] {
        1 => {
            write_bytes(&mut stream, bytes)?;
            stream.shutdown(Shutdown::Write)?;
            let mut sink = [0u8; 64];
            while stream.read(&mut sink)? > 0 {}
        }
        2 => {
            let mut rng = crate::rng::Rng::new(payload_seed());
            write_until_closed(stream, bytes, |_, buf| rng.fill(buf))?
        }
        3 => answer_messages(&mut stream, bytes)?,
        4 => {
            let seed = request_seed(&header);
            write_until_closed(stream, bytes, |offset, buf| {
                seeded_payload(seed, offset, buf)
            })?
        }
        _ => {
            let got = read_bytes(&mut stream, bytes)?;
            stream.write_all(&got.to_be_bytes())?;
        }
    }
    Ok(())
}

/// Modes 2 and 4: the payload `fill` makes (given the offset of each
/// buffer in the stream), at most `bound` bytes, until the client
/// half-closes, then a clean close.
fn write_until_closed(
    mut stream: TcpStream,
    mut bound: u64,
    mut fill: impl FnMut(u64, &mut [u8]),
) -> std::io::Result<()> {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    let closed = Arc::new(AtomicBool::new(false));
    let mut reader = stream.try_clone()?;
    let flag = closed.clone();
    thread::spawn(move || {
        let mut sink = [0u8; 64];
        while matches!(reader.read(&mut sink), Ok(n) if n > 0) {}
        flag.store(true, Ordering::Relaxed);
    });
    let mut buf = vec![0u8; 64 * 1024];
    let mut offset = 0u64;
    while bound > 0 && !closed.load(Ordering::Relaxed) {
        let n = bound.min(buf.len() as u64) as usize;
        fill(offset, &mut buf[..n]);
        stream.write_all(&buf[..n])?;
        bound -= n as u64;
        offset += n as u64;
    }
    stream.shutdown(Shutdown::Write)
}

/// Mode 3: a message of `size` bytes for every message of `size` bytes
/// read, until the client half-closes.
fn answer_messages(stream: &mut TcpStream, size: u64) -> std::io::Result<()> {
    let size = size.clamp(1, CHUNK as u64) as usize;
    let mut rng = crate::rng::Rng::new(u64::from(std::process::id()));
    let mut buf = vec![0u8; size];
    loop {
        match stream.read_exact(&mut buf) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => break,
            Err(e) => return Err(e),
        }
        rng.fill(&mut buf);
        stream.write_all(&buf)?;
    }
    stream.shutdown(Shutdown::Write)
}

/// Seeds of the payload generators: a new stream per connection.
static PAYLOAD_SEED: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// A seed for a connection's payload, never one another connection of
/// this process had.
fn payload_seed() -> u64 {
    PAYLOAD_SEED.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
        ^ (u64::from(std::process::id()) << 32)
}

/// Writes `bytes` of pseudo-random payload: incompressible and never
/// repeated (every buffer is refilled), so neither compression nor a byte
/// cache on the path can make a run look faster than the link.
fn write_bytes(stream: &mut TcpStream, mut bytes: u64) -> std::io::Result<()> {
    let mut rng = crate::rng::Rng::new(payload_seed());
    let mut buf = vec![0u8; CHUNK];
    while bytes > 0 {
        let n = (bytes.min(CHUNK as u64)) as usize;
        rng.fill(&mut buf[..n]);
        stream.write_all(&buf[..n])?;
        bytes -= n as u64;
    }
    Ok(())
}

fn read_bytes(stream: &mut TcpStream, want: u64) -> std::io::Result<u64> {
    let mut buf = vec![0u8; CHUNK];
    let mut got = 0u64;
    while got < want {
        let n = stream.read(&mut buf)?;
        if n == 0 {
            break;
        }
        got += n as u64;
    }
    Ok(got)
}

/// Runs `workload` against the generator server at `addr`; no stream may
/// stall for longer than `stall`. `congestion` sets the client sockets'
/// congestion control.
pub fn run_client(
    addr: SocketAddr,
    workload: Workload,
    stall: Duration,
    congestion: Option<&str>,
) -> Result<TrafficReport, TrafficError> {
    let start = Instant::now();
    let handles: Vec<_> = (0..workload.streams)
        .map(|i| {
            let cc = congestion.map(str::to_string);
            thread::spawn(move || one_stream(i, addr, workload, stall, start, cc.as_deref()))
        })
        .collect();
    let mut stream_seconds = Vec::with_capacity(workload.streams);
    let mut first_error = None;
    for h in handles {
        match h.join() {
            Ok(Ok(s)) => stream_seconds.push(s),
            Ok(Err(e)) => {
                first_error.get_or_insert(e);
            }
            Err(_) => {
                first_error.get_or_insert(TrafficError::Short {
                    stream: 0,
                    got: 0,
                    want: workload.bytes,
                });
            }
        }
    }
    if let Some(e) = first_error {
        return Err(e);
    }
    let seconds = stream_seconds.iter().cloned().fold(0.0, f64::max).max(1e-9);
    let total_bytes = workload.bytes * workload.streams as u64;
    Ok(TrafficReport {
        workload,
        total_bytes,
        seconds,
        throughput_mbps: total_bytes as f64 * 8.0 / seconds / 1e6,
        stream_seconds,
    })
}

fn one_stream(
    index: usize,
    addr: SocketAddr,
    workload: Workload,
    stall: Duration,
    start: Instant,
    congestion: Option<&str>,
) -> Result<f64, TrafficError> {
    let err = |source| TrafficError::Stream {
        stream: index,
        addr,
        cause: source,
    };
    let mut stream = TcpStream::connect_timeout(&addr, stall).map_err(err)?;
    stream.set_read_timeout(Some(stall)).map_err(err)?;
    stream.set_write_timeout(Some(stall)).map_err(err)?;
    stream.set_nodelay(true).map_err(err)?;
    if let Some(cc) = congestion {
        set_congestion(&stream, cc).map_err(err)?;
    }
    let mode = match workload.direction {
        Direction::Download => Mode::Download,
        Direction::Upload => Mode::Upload,
    };
    stream
        .write_all(&request(mode, workload.bytes))
        .map_err(err)?;
    match workload.direction {
        Direction::Download => {
            let got = read_bytes(&mut stream, workload.bytes).map_err(err)?;
            let done = start.elapsed().as_secs_f64();
            if got < workload.bytes {
                return Err(TrafficError::Short {
                    stream: index,
                    got,
                    want: workload.bytes,
                });
            }
            Ok(done)
        }
        Direction::Upload => {
            write_bytes(&mut stream, workload.bytes).map_err(err)?;
            let mut ack = [0u8; 8];
            stream.read_exact(&mut ack).map_err(err)?;
            let done = start.elapsed().as_secs_f64();
            let got = u64::from_be_bytes(ack);
            if got < workload.bytes {
                return Err(TrafficError::Short {
                    stream: index,
                    got,
                    want: workload.bytes,
                });
            }
            Ok(done)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse_with_units() {
        assert_eq!(parse_size("100MB").ok(), Some(100_000_000));
        assert_eq!(parse_size("10MiB").ok(), Some(10 * 1024 * 1024));
        assert_eq!(parse_size("5000").ok(), Some(5000));
        assert!(parse_size("lots").is_err());
        assert!(parse_size("0").is_err());
    }

    /// Any stretch of a seeded payload is the same bytes as the whole
    /// stream's, seeds give different streams, and a request carries its
    /// seed's 24 bits.
    #[test]
    fn a_seeded_payload_is_the_same_from_any_offset() {
        let mut whole = vec![0u8; 1_000];
        seeded_payload(7, 0, &mut whole);
        for (offset, len) in [(0usize, 1usize), (3, 5), (8, 8), (13, 200), (995, 5)] {
            let mut part = vec![0u8; len];
            seeded_payload(7, offset as u64, &mut part);
            assert_eq!(part, whole[offset..offset + len], "{offset}+{len}");
        }
        let mut other = vec![0u8; 1_000];
        seeded_payload(8, 0, &mut other);
        assert_ne!(other, whole);
        // Incompressible-looking: no byte value far from 1/256 of a large stretch.
        let mut big = vec![0u8; 1 << 16];
        seeded_payload(7, 12_345, &mut big);
        let mut counts = [0u32; 256];
        for b in &big {
            counts[*b as usize] += 1;
        }
        assert!(counts.iter().all(|c| (150..400).contains(c)), "{counts:?}");
        let header = request_seeded(0x0123_4567, 99);
        assert_eq!(header[4], Mode::DownloadSeeded as u8);
        assert_eq!(request_seed(&header), 0x23_4567);
        assert_eq!(
            u64::from_be_bytes(header[8..].try_into().unwrap_or_default()),
            99
        );
    }

    /// Mode 4 over loopback: the bytes are the seed's from the first, and
    /// the server closes cleanly once the client half-closes.
    #[test]
    fn a_seeded_download_sends_the_seeds_payload_until_closed() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap_or_else(|e| panic!("{e}"));
        let addr = listener.local_addr().unwrap_or_else(|e| panic!("{e}"));
        thread::spawn(move || {
            for conn in listener.incoming().flatten() {
                thread::spawn(move || serve_one(conn));
            }
        });
        let mut stream = TcpStream::connect(addr).unwrap_or_else(|e| panic!("{e}"));
        stream
            .write_all(&request_seeded(42, 1 << 30))
            .unwrap_or_else(|e| panic!("{e}"));
        let mut got = vec![0u8; 300_000];
        stream
            .read_exact(&mut got)
            .unwrap_or_else(|e| panic!("{e}"));
        let mut want = vec![0u8; got.len()];
        seeded_payload(42, 0, &mut want);
        assert!(got == want);
        stream
            .shutdown(Shutdown::Write)
            .unwrap_or_else(|e| panic!("{e}"));
        let mut rest = Vec::new();
        stream
            .read_to_end(&mut rest)
            .unwrap_or_else(|e| panic!("{e}"));
        let mut want = vec![0u8; rest.len()];
        seeded_payload(42, got.len() as u64, &mut want);
        assert!(rest == want);
    }

    #[test]
    fn loopback_transfer_both_ways() -> Result<(), TrafficError> {
        let listener = TcpListener::bind("127.0.0.1:0").map_err(|source| TrafficError::Listen {
            addr: SocketAddr::from(([127, 0, 0, 1], 0)),
            cause: source,
        })?;
        let addr = listener
            .local_addr()
            .map_err(|source| TrafficError::Listen {
                addr: SocketAddr::from(([127, 0, 0, 1], 0)),
                cause: source,
            })?;
        thread::spawn(move || {
            for conn in listener.incoming().flatten() {
                thread::spawn(move || serve_one(conn));
            }
        });
        for direction in [Direction::Download, Direction::Upload] {
            let w = Workload {
                streams: 3,
                bytes: 1_000_000,
                direction,
            };
            let r = run_client(addr, w, Duration::from_secs(10), Some("reno"))?;
            assert_eq!(r.total_bytes, 3_000_000);
            assert_eq!(r.stream_seconds.len(), 3);
            assert!(r.throughput_mbps > 0.0);
        }
        Ok(())
    }
}
