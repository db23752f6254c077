//! The streams' endpoints (`wanopt lab rt-peer`, hidden), one in the
//! client namespace and one in the server's: voice on UDP 5004, 50
//! packets/s of 200 B each way (DSCP EF); video on UDP 5006, 2 Mbit/s from
//! the server as 30 frames/s of 7 x 1,200 B packets back to back (AF41),
//! after the client's hellos (5 a second, not counted). The server answers
//! each stream's observed source, so the same peer works direct and
//! through the edge's `--forward-udp`.
//!
//! With `--streams voice` (the `bond` scenario's) there is no video.
//!
//! Every packet starts `"WORT" | stream u8 | seq u32 | sent_ns u64`
//! (big-endian, `CLOCK_REALTIME`). Each peer sends until `--until-unix-ms`,
//! receives until [`GRACE`] later, then writes its log (`--log`): one
//! [`Record`] per packet sent and per packet received, with the kernel's
//! arrival stamp.

use std::io::Write as _;
use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use clap::{Args, ValueEnum};

use super::stamp::{recv_stamped, stamp_arrivals, wall_ns};
use crate::topology::{Lab, Node};

/// The first bytes of every packet.
pub const MAGIC: [u8; 4] = *b"WORT";
/// Bytes of the header: magic, stream, seq, sent_ns.
pub const HEADER_LEN: usize = 17;
/// The voice stream's UDP port.
pub const VOICE_PORT: u16 = 5004;
/// The video stream's UDP port.
pub const VIDEO_PORT: u16 = 5006;
/// Bytes of a voice packet (UDP payload).
pub const VOICE_BYTES: usize = 200;
/// Time between voice packets: 50 a second.
pub const VOICE_INTERVAL: Duration = Duration::from_millis(20);
/// Bytes of a video packet (UDP payload).
pub const VIDEO_BYTES: usize = 1_200;
/// Packets of a video frame, sent back to back.
pub const VIDEO_FRAME_PACKETS: u32 = 7;
/// Time between video frames: 30 a second (7 x 1,200 B x 30 = 2.02 Mbit/s).
pub const VIDEO_FRAME_INTERVAL: Duration = Duration::from_nanos(1_000_000_000 / 30);
/// Time between the client's video hellos.
pub const HELLO_INTERVAL: Duration = Duration::from_millis(200);
/// How long a peer keeps receiving after sending ends.
pub const GRACE: Duration = Duration::from_secs(2);
/// DSCP EF in the TOS byte (46 << 2).
const TOS_EF: i32 = 0xb8;
/// DSCP AF41 in the TOS byte (34 << 2).
const TOS_AF41: i32 = 0x88;

/// A stream's number on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Stream {
    /// Voice, both ways.
    Voice,
    /// Video, server to client.
    Video,
    /// The client's video hellos (not measured).
    Hello,
}

impl Stream {
    /// The stream's byte on the wire.
    pub fn byte(self) -> u8 {
        match self {
            Stream::Voice => 1,
            Stream::Video => 2,
            Stream::Hello => 3,
        }
    }

    /// The stream of a byte on the wire.
    pub fn from_byte(b: u8) -> Option<Stream> {
        match b {
            1 => Some(Stream::Voice),
            2 => Some(Stream::Video),
            3 => Some(Stream::Hello),
            _ => None,
        }
    }

    /// The stream's name in `results.json`.
    pub fn name(self) -> &'static str {
        match self {
            Stream::Voice => "voice",
            Stream::Video => "video",
            Stream::Hello => "hello",
        }
    }
}

/// A packet's header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    /// The stream.
    pub stream: Stream,
    /// The packet's number in its stream and direction, from 0.
    pub seq: u32,
    /// When it was sent, ns since the Unix epoch.
    pub sent_ns: u64,
}

impl Header {
    /// Parses the header of `packet`: `None` if it is not one of ours.
    pub fn parse(packet: &[u8]) -> Option<Header> {
        let header = packet.get(..HEADER_LEN)?;
        if header[..4] != MAGIC {
            return None;
        }
        let stream = Stream::from_byte(header[4])?;
        let seq = u32::from_be_bytes(header[5..9].try_into().ok()?);
        let sent_ns = u64::from_be_bytes(header[9..17].try_into().ok()?);
        Some(Header {
            stream,
            seq,
            sent_ns,
        })
    }

    /// Writes the header at the start of `packet` (at least
    /// [`HEADER_LEN`] bytes).
    pub fn emit(&self, packet: &mut [u8]) {
        packet[..4].copy_from_slice(&MAGIC);
        packet[4] = self.stream.byte();
        packet[5..9].copy_from_slice(&self.seq.to_be_bytes());
        packet[9..17].copy_from_slice(&self.sent_ns.to_be_bytes());
    }
}

/// Bytes of a [`Record`] in a log.
pub const RECORD_LEN: usize = 22;

/// A packet sent or received, as a peer logs it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Record {
    /// Received (else sent).
    pub received: bool,
    /// The stream.
    pub stream: Stream,
    /// The packet's number.
    pub seq: u32,
    /// When it was sent (the sender's stamp), ns since the Unix epoch.
    pub sent_ns: u64,
    /// When it arrived (the kernel's stamp), ns since the Unix epoch; 0
    /// for a packet sent.
    pub recv_ns: u64,
}

impl Record {
    /// The record's bytes: `kind u8 | stream u8 | seq u32 | sent_ns u64 |
    /// recv_ns u64`, big-endian.
    pub fn to_bytes(&self) -> [u8; RECORD_LEN] {
        let mut b = [0u8; RECORD_LEN];
        b[0] = u8::from(self.received);
        b[1] = self.stream.byte();
        b[2..6].copy_from_slice(&self.seq.to_be_bytes());
        b[6..14].copy_from_slice(&self.sent_ns.to_be_bytes());
        b[14..22].copy_from_slice(&self.recv_ns.to_be_bytes());
        b
    }

    /// A record from its bytes; `None` if they are not one.
    pub fn from_bytes(b: &[u8]) -> Option<Record> {
        let b: &[u8; RECORD_LEN] = b.try_into().ok()?;
        Some(Record {
            received: match b[0] {
                0 => false,
                1 => true,
                _ => return None,
            },
            stream: Stream::from_byte(b[1])?,
            seq: u32::from_be_bytes(b[2..6].try_into().ok()?),
            sent_ns: u64::from_be_bytes(b[6..14].try_into().ok()?),
            recv_ns: u64::from_be_bytes(b[14..22].try_into().ok()?),
        })
    }
}

/// Errors of a peer.
#[derive(Debug, thiserror::Error)]
pub enum PeerError {
    /// A socket could not be bound.
    #[error("cannot bind UDP {addr}: {source}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// The underlying error.
        source: std::io::Error,
    },
    /// A socket option could not be set.
    #[error("cannot set up the socket of {stream}: {source}")]
    Socket {
        /// The stream.
        stream: &'static str,
        /// The underlying error.
        source: std::io::Error,
    },
    /// The log could not be written or read.
    #[error("log {}: {source}", path.display())]
    Log {
        /// The log file.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// The log is not a whole number of records, or has a bad one.
    #[error("log {}: not a realtime peer log", path.display())]
    BadLog {
        /// The log file.
        path: PathBuf,
    },
    /// A thread of the peer panicked.
    #[error("a thread of the peer panicked")]
    Panicked,
}

/// Which end a peer is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Role {
    /// Sends voice and video hellos to `--address`, receives voice and video.
    Client,
    /// Listens on `--address`, answers each stream's observed source.
    Server,
}

/// Which streams the peers carry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, ValueEnum)]
pub enum Streams {
    /// Voice both ways and video down (the `realtime` scenario's).
    #[default]
    VoiceAndVideo,
    /// Voice both ways only.
    Voice,
}

impl Streams {
    /// The value of `--streams`.
    pub fn arg(self) -> &'static str {
        match self {
            Streams::VoiceAndVideo => "voice-and-video",
            Streams::Voice => "voice",
        }
    }

    fn video(self) -> bool {
        self == Streams::VoiceAndVideo
    }
}

/// Options of the internal `lab rt-peer`.
#[derive(Debug, Args)]
pub struct PeerArgs {
    /// client or server.
    #[arg(long, value_enum)]
    pub role: Role,
    /// Client: where the streams go (the server, or the edge's forward);
    /// server: the address to listen on.
    #[arg(long)]
    pub address: IpAddr,
    /// When sending ends, ms since the Unix epoch (receiving goes on 2 s more).
    #[arg(long)]
    pub until_unix_ms: u64,
    /// The log file written at the end.
    #[arg(long)]
    pub log: PathBuf,
    /// voice-and-video or voice.
    #[arg(long, value_enum, default_value_t = Streams::VoiceAndVideo)]
    pub streams: Streams,
}

/// The command that runs a peer in `node` (`client`: streams to
/// `address`; `server`: listens on it) until `until` (ms since the Unix
/// epoch), logging to `log`; its output piped.
pub fn peer_command(
    lab: &Lab,
    exe: &Path,
    node: Node,
    address: &str,
    until: u64,
    log: &Path,
    streams: Streams,
) -> std::process::Command {
    let role = if node == Node::Server {
        "server"
    } else {
        "client"
    };
    let mut cmd = lab.command(node, &exe.to_string_lossy());
    cmd.args(["lab", "rt-peer", "--role", role, "--address", address])
        .args(["--until-unix-ms", &until.to_string()])
        .args(["--streams", streams.arg()])
        .arg("--log")
        .arg(log)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    cmd
}

/// Runs a peer: streams until `--until-unix-ms`, then writes the log.
/// Returns the packets sent and received.
pub fn run(args: &PeerArgs) -> Result<(usize, usize), PeerError> {
    let until = std::time::UNIX_EPOCH + Duration::from_millis(args.until_unix_ms);
    let left = until
        .duration_since(std::time::SystemTime::now())
        .unwrap_or_default();
    let end = Instant::now() + left;
    let records = match args.role {
        Role::Client => client(args.address, end, args.streams)?,
        Role::Server => server(args.address, end, args.streams)?,
    };
    write_log(&args.log, &records)?;
    let sent = records.iter().filter(|r| !r.received).count();
    Ok((sent, records.len() - sent))
}

/// A socket bound to `addr`, its arrivals stamped, DSCP `tos`.
fn socket(addr: SocketAddr, tos: i32, stream: &'static str) -> Result<UdpSocket, PeerError> {
    let sock = UdpSocket::bind(addr).map_err(|source| PeerError::Bind { addr, source })?;
    stamp_arrivals(&sock);
    let err = |source| PeerError::Socket { stream, source };
    sock.set_read_timeout(Some(Duration::from_millis(50)))
        .map_err(err)?;
    // SAFETY: a valid fd and a c_int option of the right size.
    let rc = unsafe {
        libc::setsockopt(
            sock.as_raw_fd(),
            libc::IPPROTO_IP,
            libc::IP_TOS,
            (&tos as *const i32).cast(),
            std::mem::size_of::<i32>() as libc::socklen_t,
        )
    };
    if rc != 0 {
        return Err(err(std::io::Error::last_os_error()));
    }
    // Room for a second of video.
    let _ = nix::sys::socket::setsockopt(&sock, nix::sys::socket::sockopt::RcvBuf, &(1 << 20));
    Ok(sock)
}

/// Where a stream's packets go: fixed (client) or the last observed
/// source (server).
type Peer = Arc<Mutex<Option<SocketAddr>>>;

/// Receives until `end` + [`GRACE`], logging our packets of `stream`
/// (and remembering the source of `learn`'s in `peer`).
fn receive(
    sock: Arc<UdpSocket>,
    stream: Stream,
    learn: Option<(Stream, Peer)>,
    end: Instant,
) -> Vec<Record> {
    let mut records = Vec::new();
    let mut buf = vec![0u8; 65_536];
    while Instant::now() < end + GRACE {
        let Ok((n, from, recv_ns)) = recv_stamped(&sock, &mut buf) else {
            continue;
        };
        let Some(header) = Header::parse(&buf[..n]) else {
            continue;
        };
        if let Some((learned, peer)) = &learn {
            if header.stream == *learned {
                if let (Some(from), Ok(mut p)) = (from, peer.lock()) {
                    *p = Some(from);
                }
            }
        }
        if header.stream == stream {
            records.push(Record {
                received: true,
                stream,
                seq: header.seq,
                sent_ns: header.sent_ns,
                recv_ns,
            });
        }
    }
    records
}

/// Sends `stream` to `peer` (once it is known) until `end`: `burst`
/// packets of `size` bytes every `interval`, logged unless `log` is false.
fn send(
    sock: Arc<UdpSocket>,
    stream: Stream,
    peer: Peer,
    (size, burst, interval): (usize, u32, Duration),
    log: bool,
    end: Instant,
) -> Vec<Record> {
    let mut records = Vec::new();
    let mut packet = vec![0u8; size];
    for (i, b) in packet.iter_mut().enumerate().skip(HEADER_LEN) {
        *b = i as u8;
    }
    let to = loop {
        if let Some(to) = peer.lock().ok().and_then(|p| *p) {
            break to;
        }
        if Instant::now() >= end {
            return records;
        }
        thread::sleep(Duration::from_millis(1));
    };
    let start = Instant::now();
    let mut seq = 0u32;
    let mut next = start;
    while next < end {
        thread::sleep(next.saturating_duration_since(Instant::now()));
        for _ in 0..burst {
            let sent_ns = wall_ns();
            Header {
                stream,
                seq,
                sent_ns,
            }
            .emit(&mut packet);
            // The server answers the latest source (a new flow, a new
            // port through the edge).
            let to = peer.lock().ok().and_then(|p| *p).unwrap_or(to);
            // A failed send is a packet lost: it stays in the log.
            let _ = sock.send_to(&packet, to);
            if log {
                records.push(Record {
                    received: false,
                    stream,
                    seq,
                    sent_ns,
                    recv_ns: 0,
                });
            }
            seq = seq.wrapping_add(1);
        }
        next += interval;
    }
    records
}

/// Joins the threads, their records in one list.
fn join(handles: Vec<thread::JoinHandle<Vec<Record>>>) -> Result<Vec<Record>, PeerError> {
    let mut records = Vec::new();
    for h in handles {
        records.extend(h.join().map_err(|_| PeerError::Panicked)?);
    }
    Ok(records)
}

fn client(server: IpAddr, end: Instant, streams: Streams) -> Result<Vec<Record>, PeerError> {
    let any = SocketAddr::new(IpAddr::from([0, 0, 0, 0]), 0);
    let voice = Arc::new(socket(any, TOS_EF, "voice")?);
    let voice_to: Peer = Arc::new(Mutex::new(Some(SocketAddr::new(server, VOICE_PORT))));
    let mut handles = Vec::new();
    let s = voice.clone();
    handles.push(thread::spawn(move || receive(s, Stream::Voice, None, end)));
    handles.push(thread::spawn(move || {
        send(
            voice,
            Stream::Voice,
            voice_to,
            (VOICE_BYTES, 1, VOICE_INTERVAL),
            true,
            end,
        )
    }));
    if !streams.video() {
        return join(handles);
    }
    let video = Arc::new(socket(any, TOS_AF41, "video")?);
    let video_to: Peer = Arc::new(Mutex::new(Some(SocketAddr::new(server, VIDEO_PORT))));
    let s = video.clone();
    handles.push(thread::spawn(move || receive(s, Stream::Video, None, end)));
    handles.push(thread::spawn(move || {
        send(
            video,
            Stream::Hello,
            video_to,
            (HEADER_LEN, 1, HELLO_INTERVAL),
            false,
            end,
        )
    }));
    join(handles)
}

fn server(address: IpAddr, end: Instant, streams: Streams) -> Result<Vec<Record>, PeerError> {
    let voice = Arc::new(socket(
        SocketAddr::new(address, VOICE_PORT),
        TOS_EF,
        "voice",
    )?);
    let voice_to: Peer = Arc::new(Mutex::new(None));
    let mut handles = Vec::new();
    let (s, p) = (voice.clone(), voice_to.clone());
    handles.push(thread::spawn(move || {
        receive(s, Stream::Voice, Some((Stream::Voice, p)), end)
    }));
    handles.push(thread::spawn(move || {
        send(
            voice,
            Stream::Voice,
            voice_to,
            (VOICE_BYTES, 1, VOICE_INTERVAL),
            true,
            end,
        )
    }));
    if !streams.video() {
        return join(handles);
    }
    let video = Arc::new(socket(
        SocketAddr::new(address, VIDEO_PORT),
        TOS_AF41,
        "video",
    )?);
    let video_to: Peer = Arc::new(Mutex::new(None));
    let (s, p) = (video.clone(), video_to.clone());
    handles.push(thread::spawn(move || {
        receive(s, Stream::Video, Some((Stream::Hello, p)), end)
    }));
    handles.push(thread::spawn(move || {
        send(
            video,
            Stream::Video,
            video_to,
            (VIDEO_BYTES, VIDEO_FRAME_PACKETS, VIDEO_FRAME_INTERVAL),
            true,
            end,
        )
    }));
    join(handles)
}

/// Writes `records` to `path`.
pub fn write_log(path: &Path, records: &[Record]) -> Result<(), PeerError> {
    let err = |source| PeerError::Log {
        path: path.to_path_buf(),
        source,
    };
    let mut out = std::io::BufWriter::new(std::fs::File::create(path).map_err(err)?);
    for r in records {
        out.write_all(&r.to_bytes()).map_err(err)?;
    }
    out.flush().map_err(err)
}

/// Reads a log [`write_log`] wrote.
pub fn read_log(path: &Path) -> Result<Vec<Record>, PeerError> {
    let bytes = std::fs::read(path).map_err(|source| PeerError::Log {
        path: path.to_path_buf(),
        source,
    })?;
    let bad = || PeerError::BadLog {
        path: path.to_path_buf(),
    };
    if bytes.len() % RECORD_LEN != 0 {
        return Err(bad());
    }
    bytes
        .chunks_exact(RECORD_LEN)
        .map(|c| Record::from_bytes(c).ok_or_else(bad))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_round_trip_and_strangers_are_refused() {
        let h = Header {
            stream: Stream::Video,
            seq: 0x0102_0304,
            sent_ns: 1_764_000_000_123_456_789,
        };
        let mut packet = [0u8; 40];
        h.emit(&mut packet);
        assert_eq!(&packet[..5], b"WORT\x02");
        assert_eq!(Header::parse(&packet), Some(h));
        assert_eq!(Header::parse(&packet[..HEADER_LEN]), Some(h));
        assert_eq!(Header::parse(&packet[..HEADER_LEN - 1]), None);
        let mut other = packet;
        other[0] = b'X';
        assert_eq!(Header::parse(&other), None);
        other = packet;
        other[4] = 9;
        assert_eq!(Header::parse(&other), None);
    }

    #[test]
    fn logs_round_trip_and_a_torn_log_is_refused() {
        let records = vec![
            Record {
                received: false,
                stream: Stream::Voice,
                seq: 7,
                sent_ns: 10,
                recv_ns: 0,
            },
            Record {
                received: true,
                stream: Stream::Video,
                seq: u32::MAX,
                sent_ns: 11,
                recv_ns: 12,
            },
        ];
        let dir = std::env::temp_dir().join(format!("rt-log-{}", std::process::id()));
        let _ = std::fs::create_dir_all(&dir);
        let path = dir.join("peer.log");
        write_log(&path, &records).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(read_log(&path).ok(), Some(records));
        let mut bytes = std::fs::read(&path).unwrap_or_default();
        bytes.pop();
        let _ = std::fs::write(&path, &bytes);
        let e = read_log(&path).err().map(|e| e.to_string());
        let _ = std::fs::remove_dir_all(&dir);
        assert!(e.is_some_and(|e| e.ends_with("not a realtime peer log")));
    }

    /// A client and a server on loopback for a fraction of a second: voice
    /// both ways and video down, each packet logged by its sender and its
    /// receiver, no hello logged.
    #[test]
    fn peers_exchange_the_streams_on_loopback() {
        let server_addr: IpAddr = [127, 0, 0, 1].into();
        // The fixed ports may be in use by another test run: skip then.
        if UdpSocket::bind((server_addr, VOICE_PORT)).is_err()
            || UdpSocket::bind((server_addr, VIDEO_PORT)).is_err()
        {
            eprintln!("skipped: ports {VOICE_PORT}/{VIDEO_PORT} in use");
            return;
        }
        let end = Instant::now() + Duration::from_millis(500);
        let srv = thread::spawn(move || server(server_addr, end, Streams::VoiceAndVideo));
        thread::sleep(Duration::from_millis(50));
        let client =
            client(server_addr, end, Streams::VoiceAndVideo).unwrap_or_else(|e| panic!("{e}"));
        let server = srv
            .join()
            .unwrap_or_else(|_| panic!("server panicked"))
            .unwrap_or_else(|e| panic!("{e}"));
        let count = |rs: &[Record], received: bool, stream: Stream| {
            rs.iter()
                .filter(|r| r.received == received && r.stream == stream)
                .count()
        };
        let voice_up = count(&client, false, Stream::Voice);
        assert!((20..=26).contains(&voice_up), "{voice_up}");
        assert_eq!(count(&server, true, Stream::Voice), voice_up);
        let video = count(&server, false, Stream::Video);
        assert!(video >= 7 * 10 && video.is_multiple_of(7), "{video}");
        assert_eq!(count(&client, true, Stream::Video), video);
        assert_eq!(
            count(&client, true, Stream::Voice),
            count(&server, false, Stream::Voice)
        );
        assert!(client
            .iter()
            .chain(&server)
            .all(|r| r.stream != Stream::Hello));
        assert!(client
            .iter()
            .filter(|r| r.received)
            .all(|r| r.recv_ns >= r.sent_ns));
    }
}
