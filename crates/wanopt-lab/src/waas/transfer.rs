//! The `waas-3g` workload: a file server (in `server`) and a client (in
//! `client`) that time one test on one file and check every byte.
//!
//! Both sides generate the file set from the same seed, so the receiver of
//! any transfer compares what arrived with what it expects, byte for byte:
//! a single wrong byte fails the transfer with [`TransferError::Mismatch`]
//! (the client exits with [`EXIT_MISMATCH`]).
//!
//! Two services, a new TCP connection per file for both:
//!
//! - HTTP/1.1 on [`HTTP_PORT`]: `GET /NAME` answers `200 OK` with a
//!   `Content-Length` and the file, then closes (the reference's test 1: a
//!   browser downloading each file from links, a new session per file);
//! - a line protocol like FTP's data connection on [`FILE_PORT`]:
//!   `GET NAME\n` answers `OK SIZE\n` and the file; `PUT NAME GEN SIZE\n`
//!   followed by SIZE bytes answers `OK\n` once all of them arrived and
//!   equal the file at edit generation GEN ([`super::files::edit`]), or
//!   `ERR reason\n`.
//!
//! The tests: `http-download` (HTTP GET), `download` (GET), `upload` (PUT
//! of the original) and `edit-save` (GET, change a few bytes in the middle,
//! PUT of the whole file: the reference's "open, edit, save").

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::files::{self, FILE_SET};
use crate::traffic::set_congestion;

mod client;

pub use client::{run_client, ClientConfig, TransferReport};

/// TCP port of the HTTP server.
pub const HTTP_PORT: u16 = 80;
/// TCP port of the FTP-like file service.
pub const FILE_PORT: u16 = 21;
/// Exit code of `lab waas-client` when a received byte is wrong.
pub const EXIT_MISMATCH: i32 = 3;

const CHUNK: usize = 64 * 1024;
const MAX_HEAD: usize = 8 * 1024;

/// The tests of the scenario.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    Serialize,
    Deserialize,
    clap::ValueEnum,
)]
#[serde(rename_all = "kebab-case")]
pub enum Test {
    /// HTTP/1.1 GET, a new connection per file (reference test 1, Table 2).
    HttpDownload,
    /// FTP download (reference test 2, Table 3).
    Download,
    /// FTP upload (reference test 3, Table 4).
    Upload,
    /// Open (FTP download), change a few bytes, save (FTP upload of the
    /// whole file): tests 5 and 6 without the file protocol's operations.
    EditSave,
    /// CIFS copy of a whole file set from the share, one SMB session
    /// (reference test 4, download; no table).
    CifsCopyDown,
    /// CIFS copy of a whole file set to the share (reference test 4,
    /// upload; no table).
    CifsCopyUp,
    /// CIFS file open: read the whole file in an SMB session (reference
    /// test 5, Table 5's open columns).
    CifsOpen,
    /// CIFS file save as Office saves: write an edited copy to a temporary
    /// file, rename it over the original (reference test 6, Table 5's save
    /// columns).
    CifsSave,
}

impl Test {
    /// Every test, in the reference's order.
    pub const ALL: [Test; 8] = [
        Test::HttpDownload,
        Test::Download,
        Test::Upload,
        Test::EditSave,
        Test::CifsCopyDown,
        Test::CifsCopyUp,
        Test::CifsOpen,
        Test::CifsSave,
    ];

    /// Its name in `results.json` (`http-download`, ...).
    pub fn name(self) -> &'static str {
        match self {
            Test::HttpDownload => "http-download",
            Test::Download => "download",
            Test::Upload => "upload",
            Test::EditSave => "edit-save",
            Test::CifsCopyDown => "cifs-copy-down",
            Test::CifsCopyUp => "cifs-copy-up",
            Test::CifsOpen => "cifs-open",
            Test::CifsSave => "cifs-save",
        }
    }

    /// Whether one transfer of the test moves a whole file set.
    pub fn is_copy(self) -> bool {
        matches!(self, Test::CifsCopyDown | Test::CifsCopyUp)
    }

    /// Whether the test runs over CIFS (Samba and smbclient).
    pub fn is_cifs(self) -> bool {
        matches!(
            self,
            Test::CifsCopyDown | Test::CifsCopyUp | Test::CifsOpen | Test::CifsSave
        )
    }

    /// Whether the client sends the file (the upload direction).
    pub fn uploads(self) -> bool {
        matches!(
            self,
            Test::Upload | Test::EditSave | Test::CifsCopyUp | Test::CifsSave
        )
    }
}

/// Errors of the workload.
#[derive(Debug, thiserror::Error)]
pub enum TransferError {
    /// A listener could not be opened.
    #[error("cannot listen on {addr}: {cause}")]
    Listen {
        /// The address.
        addr: SocketAddr,
        /// The underlying error.
        cause: std::io::Error,
    },
    /// The connection failed, stalled or closed early.
    #[error("{what}: {cause}")]
    Io {
        /// What was being done.
        what: String,
        /// The underlying error.
        cause: std::io::Error,
    },
    /// The peer broke the protocol or refused.
    #[error("{0}")]
    Protocol(String),
    /// The file is not in the set.
    #[error("unknown file `{0}`: see `wanopt lab waas-files`")]
    UnknownFile(String),
    /// A received byte differs from the file: the transfer corrupted data.
    #[error("CONTENT MISMATCH in {file}: {detail}")]
    Mismatch {
        /// The file.
        file: String,
        /// Where and how.
        detail: String,
    },
}

fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> TransferError {
    let what = what.into();
    move |cause| TransferError::Io { what, cause }
}

/// Compares `got` with `want`; describes the first difference.
pub fn compare(got: &[u8], want: &[u8]) -> Result<(), String> {
    if let Some(offset) = got.iter().zip(want).position(|(a, b)| a != b) {
        return Err(format!(
            "byte {offset} of {} is {:#04x}, expected {:#04x}",
            want.len(),
            got.get(offset).copied().unwrap_or(0),
            want.get(offset).copied().unwrap_or(0)
        ));
    }
    if got.len() != want.len() {
        return Err(format!("{} bytes, expected {}", got.len(), want.len()));
    }
    Ok(())
}

/// The server side: the generated file set and how to reach it.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// HTTP listen address.
    pub http: SocketAddr,
    /// File service listen address.
    pub file: SocketAddr,
    /// Seed of the file set.
    pub seed: u64,
    /// Congestion control of every connection.
    pub congestion: Option<String>,
    /// Give up on a connection that makes no progress for this long.
    pub stall: Duration,
}

type Library = Arc<HashMap<&'static str, Arc<Vec<u8>>>>;

/// Generates the file set and serves both services until the process
/// ends; creates `ready` (if given) once both listen.
pub fn serve(config: ServerConfig, ready: Option<&std::path::Path>) -> Result<(), TransferError> {
    let library: Library = Arc::new(
        FILE_SET
            .iter()
            .map(|f| (f.name, Arc::new(files::generate(f, config.seed))))
            .collect(),
    );
    let http = TcpListener::bind(config.http).map_err(|cause| TransferError::Listen {
        addr: config.http,
        cause,
    })?;
    let file = TcpListener::bind(config.file).map_err(|cause| TransferError::Listen {
        addr: config.file,
        cause,
    })?;
    if let Some(path) = ready {
        std::fs::write(path, b"ready\n").map_err(io(format!("write {}", path.display())))?;
    }
    let http_config = config.clone();
    let http_library = library.clone();
    let http_thread = thread::spawn(move || accept(http, &http_config, &http_library, serve_http));
    accept(file, &config, &library, serve_file);
    let _ = http_thread.join();
    Ok(())
}

fn accept(
    listener: TcpListener,
    config: &ServerConfig,
    library: &Library,
    handler: fn(TcpStream, &ServerConfig, &Library) -> Result<(), TransferError>,
) {
    for conn in listener.incoming() {
        let Ok(stream) = conn else { continue };
        let config = config.clone();
        let library = library.clone();
        thread::spawn(move || {
            if let Err(e) = prepare(&stream, config.congestion.as_deref(), config.stall)
                .and_then(|()| handler(stream, &config, &library))
            {
                eprintln!("waas-server: {e}");
            }
        });
    }
}

fn prepare(
    stream: &TcpStream,
    congestion: Option<&str>,
    stall: Duration,
) -> Result<(), TransferError> {
    stream
        .set_read_timeout(Some(stall))
        .map_err(io("set timeout"))?;
    stream
        .set_write_timeout(Some(stall))
        .map_err(io("set timeout"))?;
    stream.set_nodelay(true).map_err(io("set nodelay"))?;
    if let Some(cc) = congestion {
        set_congestion(stream, cc).map_err(io(format!("congestion control {cc}")))?;
    }
    Ok(())
}

/// Reads up to and including `terminator`, at most [`MAX_HEAD`] bytes;
/// returns the head and whatever was read after it.
fn read_head(
    stream: &mut TcpStream,
    terminator: &[u8],
) -> Result<(Vec<u8>, Vec<u8>), TransferError> {
    let mut buf = Vec::with_capacity(512);
    let mut chunk = [0u8; 2048];
    loop {
        if let Some(end) = buf.windows(terminator.len()).position(|w| w == terminator) {
            let rest = buf.split_off(end + terminator.len());
            return Ok((buf, rest));
        }
        if buf.len() > MAX_HEAD {
            return Err(TransferError::Protocol(
                "request or response head too long".into(),
            ));
        }
        let n = stream.read(&mut chunk).map_err(io("read head"))?;
        if n == 0 {
            return Err(TransferError::Protocol(format!(
                "connection closed after {} bytes of head",
                buf.len()
            )));
        }
        buf.extend_from_slice(&chunk[..n]);
    }
}

/// Reads exactly `len` bytes, starting with `already`.
fn read_body(
    stream: &mut TcpStream,
    already: Vec<u8>,
    len: usize,
) -> Result<Vec<u8>, TransferError> {
    if already.len() > len {
        return Err(TransferError::Protocol(format!(
            "{} bytes where {len} were announced",
            already.len()
        )));
    }
    let mut body = already;
    body.reserve(len - body.len());
    let mut chunk = vec![0u8; CHUNK];
    while body.len() < len {
        let want = (len - body.len()).min(CHUNK);
        let n = stream.read(&mut chunk[..want]).map_err(io("read data"))?;
        if n == 0 {
            return Err(TransferError::Protocol(format!(
                "connection closed after {} of {len} bytes",
                body.len()
            )));
        }
        body.extend_from_slice(&chunk[..n]);
    }
    Ok(body)
}

/// Closes our direction and waits (briefly) for the peer to close.
fn finish(mut stream: TcpStream) {
    let _ = stream.shutdown(Shutdown::Write);
    let _ = stream.set_read_timeout(Some(Duration::from_secs(10)));
    let mut sink = [0u8; 256];
    while matches!(stream.read(&mut sink), Ok(n) if n > 0) {}
}

fn serve_http(
    mut stream: TcpStream,
    _config: &ServerConfig,
    library: &Library,
) -> Result<(), TransferError> {
    let (head, _) = read_head(&mut stream, b"\r\n\r\n")?;
    let head = String::from_utf8_lossy(&head);
    let mut parts = head.lines().next().unwrap_or("").split_whitespace();
    let (method, path) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
    let name = path.trim_start_matches('/');
    let found = library.get(name).filter(|_| method == "GET");
    match found {
        Some(data) => {
            let kind = if name.ends_with(".zip") {
                "application/zip"
            } else {
                "application/octet-stream"
            };
            let header = format!(
                "HTTP/1.1 200 OK\r\nServer: wanopt-lab\r\nContent-Type: {kind}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                data.len()
            );
            stream
                .write_all(header.as_bytes())
                .and_then(|()| stream.write_all(data))
                .map_err(io(format!("send {name}")))?;
        }
        None => {
            let status = if method == "GET" {
                "404 Not Found"
            } else {
                "405 Method Not Allowed"
            };
            let reply =
                format!("HTTP/1.1 {status}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
            stream
                .write_all(reply.as_bytes())
                .map_err(io("send error"))?;
        }
    }
    finish(stream);
    Ok(())
}

fn serve_file(
    mut stream: TcpStream,
    _config: &ServerConfig,
    library: &Library,
) -> Result<(), TransferError> {
    let (head, rest) = read_head(&mut stream, b"\n")?;
    let line = String::from_utf8_lossy(&head).trim().to_string();
    let words: Vec<&str> = line.split_whitespace().collect();
    let reply = |stream: &mut TcpStream, text: String| {
        stream.write_all(text.as_bytes()).map_err(io("send reply"))
    };
    match words.as_slice() {
        ["GET", name] => match library.get(name) {
            Some(data) => {
                reply(&mut stream, format!("OK {}\n", data.len()))?;
                stream.write_all(data).map_err(io(format!("send {name}")))?;
            }
            None => reply(&mut stream, format!("ERR no file {name}\n"))?,
        },
        ["PUT", name, generation, size] => {
            let (Some(original), Ok(generation), Ok(size)) = (
                library.get(name),
                generation.parse::<u64>(),
                size.parse::<usize>(),
            ) else {
                reply(&mut stream, format!("ERR bad request `{line}`\n"))?;
                finish(stream);
                return Ok(());
            };
            if size != original.len() {
                reply(
                    &mut stream,
                    format!("ERR {name} has {} bytes, not {size}\n", original.len()),
                )?;
                finish(stream);
                return Ok(());
            }
            let body = read_body(&mut stream, rest, size)?;
            let expected = files::edit(original, generation);
            match compare(&body, &expected) {
                Ok(()) => reply(&mut stream, "OK\n".into())?,
                Err(detail) => {
                    eprintln!("waas-server: CONTENT MISMATCH in uploaded {name}: {detail}");
                    reply(&mut stream, format!("ERR MISMATCH {detail}\n"))?;
                }
            }
        }
        _ => reply(&mut stream, format!("ERR bad request `{line}`\n"))?,
    }
    finish(stream);
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::net::IpAddr;

    use super::*;

    fn server() -> Result<(IpAddr, u16, u16), TransferError> {
        let http = TcpListener::bind("127.0.0.1:0").map_err(io("bind"))?;
        let file = TcpListener::bind("127.0.0.1:0").map_err(io("bind"))?;
        let ports = (
            http.local_addr().map_err(io("addr"))?.port(),
            file.local_addr().map_err(io("addr"))?.port(),
        );
        let config = ServerConfig {
            http: SocketAddr::from(([127, 0, 0, 1], ports.0)),
            file: SocketAddr::from(([127, 0, 0, 1], ports.1)),
            seed: 9,
            congestion: None,
            stall: Duration::from_secs(10),
        };
        // Only the two small files the tests use.
        let library: Library = Arc::new(
            ["50K.doc", "50K.ppt"]
                .iter()
                .filter_map(|n| files::find(n))
                .map(|f| (f.name, Arc::new(files::generate(f, 9))))
                .collect(),
        );
        let (c1, l1) = (config.clone(), library.clone());
        thread::spawn(move || accept(http, &c1, &l1, serve_http));
        thread::spawn(move || accept(file, &config, &library, serve_file));
        Ok((IpAddr::from([127, 0, 0, 1]), ports.0, ports.1))
    }

    #[test]
    fn compare_finds_the_first_difference() {
        assert!(compare(b"abc", b"abc").is_ok());
        assert_eq!(
            compare(b"abd", b"abc").err().as_deref(),
            Some("byte 2 of 3 is 0x64, expected 0x63")
        );
        assert!(compare(b"ab", b"abc").is_err());
        assert!(compare(b"abcd", b"abc").is_err());
    }

    #[test]
    fn test_names_are_the_contract() {
        let names: Vec<&str> = Test::ALL.iter().map(|t| t.name()).collect();
        assert_eq!(
            names,
            [
                "http-download",
                "download",
                "upload",
                "edit-save",
                "cifs-copy-down",
                "cifs-copy-up",
                "cifs-open",
                "cifs-save"
            ]
        );
        for t in Test::ALL {
            assert_eq!(
                serde_json::to_value(t).ok(),
                Some(serde_json::Value::String(t.name().into()))
            );
        }
    }

    /// The sender's time ends when the last byte is acknowledged, neither
    /// when the client's kernel took it nor at the server's answer: a
    /// server with a 4 KB receive buffer that starts reading after 300 ms
    /// and holds its `OK` for 400 ms.
    #[test]
    fn an_upload_is_sent_when_its_peer_acknowledged_it() -> Result<(), TransferError> {
        let listener = TcpListener::bind("127.0.0.1:0").map_err(io("bind"))?;
        nix::sys::socket::setsockopt(&listener, nix::sys::socket::sockopt::RcvBuf, &4096)
            .map_err(|e| io("SO_RCVBUF")(e.into()))?;
        let port = listener.local_addr().map_err(io("local address"))?.port();
        let size = files::find("50K.doc").map(|f| f.size).unwrap_or(0);
        let server = thread::spawn(move || -> std::io::Result<()> {
            let (mut stream, _) = listener.accept()?;
            thread::sleep(Duration::from_millis(300));
            let mut line = Vec::new();
            let mut byte = [0u8; 1];
            while byte[0] != b'\n' {
                stream.read_exact(&mut byte)?;
                line.push(byte[0]);
            }
            let mut body = vec![0u8; size];
            stream.read_exact(&mut body)?;
            thread::sleep(Duration::from_millis(400));
            stream.write_all(b"OK\n")
        });
        let config = ClientConfig {
            server: IpAddr::from([127, 0, 0, 1]),
            http_port: port,
            file_port: port,
            test: Test::Upload,
            file: "50K.doc".into(),
            seed: 9,
            generation: 0,
            congestion: None,
            stall: Duration::from_secs(10),
        };
        let report = run_client(&config)?;
        assert!(matches!(server.join(), Ok(Ok(()))));
        let sent = report.sent_seconds.unwrap_or(f64::NAN);
        assert!((0.3..0.6).contains(&sent), "{report:?}");
        assert!(report.seconds >= 0.7, "{report:?}");
        Ok(())
    }

    /// Every test over loopback, on ephemeral ports.
    #[test]
    fn every_test_round_trips_and_a_wrong_upload_is_refused() -> Result<(), TransferError> {
        let (ip, http_port, file_port) = server()?;
        for test in Test::ALL.into_iter().filter(|t| !t.is_cifs()) {
            let config = ClientConfig {
                server: ip,
                http_port,
                file_port,
                test,
                file: "50K.doc".into(),
                seed: 9,
                generation: 5,
                congestion: None,
                stall: Duration::from_secs(10),
            };
            let report = run_client(&config)?;
            assert_eq!(report.bytes, 57_344);
            assert!(report.seconds > 0.0);
            assert_eq!(report.open_seconds.is_some(), test == Test::EditSave);
            let uploads = matches!(test, Test::Upload | Test::EditSave);
            assert_eq!(report.sent_seconds.is_some(), uploads);
            if let Some(sent) = report.sent_seconds {
                let upload = report.save_seconds.unwrap_or(report.seconds);
                assert!(sent > 0.0 && sent <= upload, "{report:?}");
            }
        }
        // A client with another seed holds other bytes: its upload is refused
        // as a mismatch, and its download does not match what it expects.
        let config = ClientConfig {
            server: ip,
            http_port,
            file_port,
            test: Test::Upload,
            file: "50K.ppt".into(),
            seed: 10,
            generation: 0,
            congestion: None,
            stall: Duration::from_secs(10),
        };
        assert!(matches!(
            run_client(&config),
            Err(TransferError::Mismatch { .. })
        ));
        let config = ClientConfig {
            test: Test::HttpDownload,
            ..config
        };
        assert!(matches!(
            run_client(&config),
            Err(TransferError::Mismatch { .. })
        ));
        // Unknown files are refused, not served.
        let config = ClientConfig {
            test: Test::Download,
            file: "5M.zip".into(),
            seed: 9,
            ..config
        };
        assert!(matches!(
            run_client(&config),
            Err(TransferError::Protocol(_))
        ));
        Ok(())
    }
}
