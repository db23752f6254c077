//! The client side of a `waas-3g` transfer: one test on one file, timed,
//! every byte checked.

use std::io::Write;
use std::net::{IpAddr, SocketAddr, TcpStream};
use std::thread;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::super::files;
use super::{compare, io, prepare, read_body, read_head, Test, TransferError};

/// What the client measured.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TransferReport {
    /// The test.
    pub test: Test,
    /// The file.
    pub file: String,
    /// File size, bytes.
    pub bytes: u64,
    /// Wall time from just before the first connect to the last byte (a
    /// download) or the server's acknowledgement (an upload), seconds.
    pub seconds: f64,
    /// edit-save: the download ("open") part, seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub open_seconds: Option<f64>,
    /// edit-save: the upload ("save") part, seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub save_seconds: Option<f64>,
    /// upload and edit-save: from the start of the upload (for edit-save,
    /// of the save) until the client's TCP peer acknowledged its last byte,
    /// before the server's `OK`: what an FTP client reports as the time to
    /// send the file, seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sent_seconds: Option<f64>,
}

/// What the client is asked to do.
#[derive(Debug, Clone)]
pub struct ClientConfig {
    /// The server's address.
    pub server: IpAddr,
    /// Its HTTP port ([`super::HTTP_PORT`] in the lab).
    pub http_port: u16,
    /// Its file service port ([`super::FILE_PORT`] in the lab).
    pub file_port: u16,
    /// The test.
    pub test: Test,
    /// The file's name.
    pub file: String,
    /// Seed of the file set.
    pub seed: u64,
    /// Edit generation of the upload of `edit-save` (`upload` sends the original).
    pub generation: u64,
    /// Congestion control of the client's sockets.
    pub congestion: Option<String>,
    /// Give up when a connection makes no progress for this long.
    pub stall: Duration,
}

fn connect(config: &ClientConfig, port: u16) -> Result<TcpStream, TransferError> {
    let addr = SocketAddr::new(config.server, port);
    let stream = TcpStream::connect_timeout(&addr, config.stall)
        .map_err(io(format!("connect to {addr}")))?;
    prepare(&stream, config.congestion.as_deref(), config.stall)?;
    Ok(stream)
}

fn http_get(config: &ClientConfig) -> Result<Vec<u8>, TransferError> {
    let mut stream = connect(config, config.http_port)?;
    let request = format!(
        "GET /{} HTTP/1.1\r\nHost: {}\r\nUser-Agent: wanopt-lab\r\nAccept: */*\r\nConnection: close\r\n\r\n",
        config.file, config.server
    );
    stream
        .write_all(request.as_bytes())
        .map_err(io("send request"))?;
    let (head, rest) = read_head(&mut stream, b"\r\n\r\n")?;
    let head = String::from_utf8_lossy(&head).into_owned();
    let status = head.lines().next().unwrap_or("");
    if status.split_whitespace().nth(1) != Some("200") {
        return Err(TransferError::Protocol(format!(
            "GET /{}: `{status}`",
            config.file
        )));
    }
    let length = head
        .lines()
        .filter_map(|l| l.split_once(':'))
        .find(|(k, _)| k.trim().eq_ignore_ascii_case("content-length"))
        .and_then(|(_, v)| v.trim().parse::<usize>().ok())
        .ok_or_else(|| TransferError::Protocol("response without Content-Length".into()))?;
    let body = read_body(&mut stream, rest, length)?;
    drop(stream);
    Ok(body)
}

fn file_get(config: &ClientConfig) -> Result<Vec<u8>, TransferError> {
    let mut stream = connect(config, config.file_port)?;
    stream
        .write_all(format!("GET {}\n", config.file).as_bytes())
        .map_err(io("send request"))?;
    let (head, rest) = read_head(&mut stream, b"\n")?;
    let line = String::from_utf8_lossy(&head).trim().to_string();
    let size = match line.split_whitespace().collect::<Vec<_>>().as_slice() {
        ["OK", size] => size
            .parse::<usize>()
            .map_err(|_| TransferError::Protocol(format!("bad reply `{line}`")))?,
        _ => return Err(TransferError::Protocol(format!("server: `{line}`"))),
    };
    let body = read_body(&mut stream, rest, size)?;
    drop(stream);
    Ok(body)
}

/// Bytes the socket has not had acknowledged yet, sent or not
/// (`SIOCOUTQ`).
fn unacknowledged(stream: &TcpStream) -> std::io::Result<usize> {
    use std::os::fd::AsRawFd;
    let mut queued: libc::c_int = 0;
    // SAFETY: SIOCOUTQ (TIOCOUTQ) writes one c_int through the pointer,
    // which is valid for the call.
    let ret = unsafe { libc::ioctl(stream.as_raw_fd(), libc::TIOCOUTQ, &mut queued) };
    if ret < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(usize::try_from(queued).unwrap_or(0))
}

/// Waits until the TCP peer the client talks to has acknowledged every
/// byte written: the moment an FTP client reports the file sent. On the
/// direct path that peer is the server; through wanopt it is the edge,
/// which from then on carries the bytes. Polls, finer at first (a warm
/// upload is acknowledged within milliseconds); gives up when the queue
/// does not shrink for `stall`.
fn wait_acknowledged(stream: &TcpStream, stall: Duration) -> Result<(), TransferError> {
    let start = Instant::now();
    let mut last = (usize::MAX, Instant::now());
    loop {
        let queued = unacknowledged(stream).map_err(io("read the send queue"))?;
        if queued == 0 {
            return Ok(());
        }
        if queued < last.0 {
            last = (queued, Instant::now());
        } else if last.1.elapsed() > stall {
            return Err(TransferError::Io {
                what: "wait for the upload's acknowledgement".into(),
                cause: std::io::Error::new(
                    std::io::ErrorKind::TimedOut,
                    format!("{queued} bytes unacknowledged for {stall:?}"),
                ),
            });
        }
        let pause =
            (start.elapsed() / 200).clamp(Duration::from_micros(50), Duration::from_millis(2));
        thread::sleep(pause);
    }
}

/// Uploads `data` as edit generation `generation`; returns the time from
/// `start` until the client's TCP peer acknowledged the last byte (see
/// [`wait_acknowledged`]). Ends when the server says `OK`.
fn file_put(
    config: &ClientConfig,
    data: &[u8],
    generation: u64,
    start: Instant,
) -> Result<f64, TransferError> {
    let mut stream = connect(config, config.file_port)?;
    stream
        .write_all(format!("PUT {} {generation} {}\n", config.file, data.len()).as_bytes())
        .and_then(|()| stream.write_all(data))
        .map_err(io(format!("send {}", config.file)))?;
    wait_acknowledged(&stream, config.stall)?;
    let sent = start.elapsed().as_secs_f64();
    let (head, _) = read_head(&mut stream, b"\n")?;
    let line = String::from_utf8_lossy(&head).trim().to_string();
    if line == "OK" {
        return Ok(sent);
    }
    if let Some(detail) = line.strip_prefix("ERR MISMATCH ") {
        return Err(TransferError::Mismatch {
            file: config.file.clone(),
            detail: format!("the server received different bytes: {detail}"),
        });
    }
    Err(TransferError::Protocol(format!("server: `{line}`")))
}

/// Runs one test on one file; every received byte is checked.
pub fn run_client(config: &ClientConfig) -> Result<TransferReport, TransferError> {
    let original = files::content(&config.file, config.seed, 0)
        .ok_or_else(|| TransferError::UnknownFile(config.file.clone()))?;
    let check = |got: &[u8]| {
        compare(got, &original).map_err(|detail| TransferError::Mismatch {
            file: config.file.clone(),
            detail,
        })
    };
    let start = Instant::now();
    let (open_seconds, save_seconds, sent_seconds) = match config.test {
        Test::HttpDownload => {
            check(&http_get(config)?)?;
            (None, None, None)
        }
        Test::Download => {
            check(&file_get(config)?)?;
            (None, None, None)
        }
        Test::Upload => {
            let sent = file_put(config, &original, 0, start)?;
            (None, None, Some(sent))
        }
        Test::EditSave => {
            let got = file_get(config)?;
            let opened = start.elapsed().as_secs_f64();
            check(&got)?;
            let edited = files::edit(&got, config.generation.max(1));
            let save_start = Instant::now();
            let sent = file_put(config, &edited, config.generation.max(1), save_start)?;
            (
                Some(opened),
                Some(save_start.elapsed().as_secs_f64()),
                Some(sent),
            )
        }
        Test::CifsCopyDown | Test::CifsCopyUp | Test::CifsOpen | Test::CifsSave => {
            return Err(TransferError::Protocol(format!(
                "{} runs with Samba and smbclient, not this client",
                config.test.name()
            )))
        }
    };
    let seconds = match (open_seconds, save_seconds) {
        (Some(o), Some(s)) => o + s,
        _ => start.elapsed().as_secs_f64(),
    };
    Ok(TransferReport {
        test: config.test,
        file: config.file.clone(),
        bytes: original.len() as u64,
        seconds,
        open_seconds,
        save_seconds,
        sent_seconds,
    })
}
