//! Byte-checked, timed downloads for the `reach` scenario. A server thread
//! in the `server` namespace streams the pseudo-random bytes a client
//! names (a seed and a length, the `cluster` scenario's protocol); a
//! client thread in `client` reads them, compares every byte with the
//! same stream, and notes when it connected, sent its request, got the
//! first byte and the last.
//!
//! Threads enter the namespaces with `setns`, so the scenario needs no
//! helper process. The server sets the congestion control of the sockets
//! it sends on when asked (the direct mode's kernel BBR), and stops when
//! its [`Server`] is dropped.

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use crate::rng::Rng;
use crate::topology::{Lab, Node, SERVER_ADDR};

/// The checked server's TCP port on the server.
pub const PORT: u16 = 6410;

/// The stream is made in pieces of this many bytes, at both ends: a
/// piece's bytes depend on where the pieces are cut.
const PIECE: usize = 64 * 1024;

/// Enters `node`'s network namespace (this thread only).
fn enter(lab: &Lab, node: Node) -> Result<(), String> {
    let path = format!("/run/netns/{}", lab.netns(node));
    let file = std::fs::File::open(&path).map_err(|e| format!("{path}: {e}"))?;
    nix::sched::setns(file, nix::sched::CloneFlags::CLONE_NEWNET)
        .map_err(|e| format!("setns {path}: {e}"))
}

/// The checked server of one lab: it serves until dropped.
#[derive(Debug)]
pub struct Server {
    stop: Arc<AtomicBool>,
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// Starts the checked server in `lab`'s server namespace, its sockets on
/// `congestion` (the namespace's default when `None`).
pub fn serve(lab: &Lab, congestion: Option<&'static str>) -> Result<Server, String> {
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    let stop = Arc::new(AtomicBool::new(false));
    let (lab, stopped) = (lab.clone(), stop.clone());
    thread::spawn(move || {
        let addr = format!("{SERVER_ADDR}:{PORT}");
        let bound = enter(&lab, Node::Server)
            .and_then(|()| TcpListener::bind(&addr).map_err(|e| format!("bind {addr}: {e}")))
            .and_then(|l| {
                accept_timeout(&l, ACCEPT_LOOK).map_err(|e| e.to_string())?;
                Ok(l)
            });
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
        while !stopped.load(Ordering::Relaxed) {
            // A timed-out accept (the stop flag is looked at again) or
            // one that failed for its connection is passed over.
            if let Ok((stream, _)) = listener.accept() {
                thread::spawn(move || {
                    let _ = answer(stream, congestion);
                });
            }
        }
    });
    ready_rx
        .recv_timeout(Duration::from_secs(5))
        .map_err(|e| format!("the checked server did not start: {e}"))??;
    Ok(Server { stop })
}

/// How often the server's blocking accept looks at its stop flag.
const ACCEPT_LOOK: Duration = Duration::from_millis(100);

/// Makes `listener`'s blocking accept give up after `timeout` (Linux's
/// accept honours `SO_RCVTIMEO`): a connection is taken the moment it
/// comes, not at the next poll (a 20 ms poll added 10 ms on average to
/// every fetch).
fn accept_timeout(listener: &TcpListener, timeout: Duration) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    let tv = libc::timeval {
        tv_sec: timeout.as_secs() as libc::time_t,
        tv_usec: timeout.subsec_micros() as libc::suseconds_t,
    };
    // SAFETY: setsockopt on a live fd with a pointer to a timeval.
    let rc = unsafe {
        libc::setsockopt(
            listener.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_RCVTIMEO,
            (&tv as *const libc::timeval).cast(),
            std::mem::size_of::<libc::timeval>() as libc::socklen_t,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// One request: 16 bytes (seed, length, big-endian), then the stream.
fn answer(mut stream: TcpStream, congestion: Option<&str>) -> std::io::Result<()> {
    stream.set_nonblocking(false)?;
    if let Some(cc) = congestion {
        crate::traffic::set_congestion(&stream, cc)?;
    }
    let mut request = [0u8; 16];
    stream.read_exact(&mut request)?;
    let (seed, length) = request.split_at(8);
    let seed = u64::from_be_bytes(seed.try_into().unwrap_or_default());
    let mut left = u64::from_be_bytes(length.try_into().unwrap_or_default());
    let mut rng = Rng::new(seed);
    let mut buf = vec![0u8; PIECE];
    while left > 0 {
        let n = left.min(buf.len() as u64) as usize;
        rng.fill(&mut buf[..n]);
        stream.write_all(&buf[..n])?;
        left -= n as u64;
    }
    stream.shutdown(Shutdown::Write)
}

/// A download to make.
#[derive(Debug, Clone)]
pub struct Request {
    /// The stream's seed.
    pub seed: u64,
    /// Bytes to fetch.
    pub length: u64,
    /// Give up when no byte arrives for this long (and bound the connect).
    pub stall: Duration,
    /// Give up when this is set.
    pub stop: Option<Arc<AtomicBool>>,
    /// Give up this long after the request (what arrived still counts).
    pub deadline: Option<Duration>,
}

impl Request {
    /// `length` bytes of stream `seed`, giving up after `stall` without a
    /// byte.
    pub fn new(seed: u64, length: u64, stall: Duration) -> Request {
        Request {
            seed,
            length,
            stall,
            stop: None,
            deadline: None,
        }
    }
}

/// What one download did.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// Bytes asked for.
    pub wanted: u64,
    /// Bytes that arrived.
    pub bytes: u64,
    /// Bytes that arrived and differ from what the server sent.
    pub wrong_bytes: u64,
    /// Just before the connect.
    pub started: Instant,
    /// When the request was sent (after the connect), if it was.
    pub requested: Option<Instant>,
    /// When the first byte arrived, if one did.
    pub first_byte: Option<Instant>,
    /// When it ended: the last byte, or the failure.
    pub ended: Instant,
    /// Why it did not complete (a reset, a stall, a refused connect).
    pub failure: Option<String>,
}

impl Outcome {
    /// Whether every byte arrived and none was wrong.
    pub fn complete(&self) -> bool {
        self.failure.is_none() && self.bytes == self.wanted && self.wrong_bytes == 0
    }

    /// From the request to the end, ms.
    pub fn request_to_end_ms(&self) -> Option<f64> {
        Some(ms(self.ended.saturating_duration_since(self.requested?)))
    }

    /// Whether it ended at its deadline, every byte that arrived right.
    pub fn cut_at_deadline(&self) -> bool {
        self.failure.as_deref() == Some(DEADLINE) && self.wrong_bytes == 0
    }

    /// Goodput from the request to the end, Mbit/s.
    pub fn mbit_s(&self) -> Option<f64> {
        let seconds = self.request_to_end_ms()? / 1e3;
        (seconds > 0.0).then(|| self.bytes as f64 * 8.0 / seconds / 1e6)
    }

    /// Whether it ended with its connection reset (or cut short by the
    /// other side), as opposed to a stall, a refusal or a stop.
    pub fn was_reset(&self) -> bool {
        self.failure.as_deref().is_some_and(is_reset)
    }
}

/// The failure of a download that reached its deadline.
pub const DEADLINE: &str = "not done by its deadline";

/// A duration in milliseconds.
pub fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// Whether a failure is a reset of the connection.
pub fn is_reset(failure: &str) -> bool {
    failure.contains("reset") || failure.contains("ended after") || failure.contains("Broken pipe")
}

/// Makes `request` from `lab`'s client namespace; the caller's thread
/// waits for it.
pub fn download(lab: &Lab, request: Request) -> Outcome {
    let lab = lab.clone();
    let length = request.length;
    let started = Instant::now();
    thread::spawn(move || {
        let mut outcome = Outcome {
            wanted: request.length,
            bytes: 0,
            wrong_bytes: 0,
            started: Instant::now(),
            requested: None,
            first_byte: None,
            ended: Instant::now(),
            failure: None,
        };
        let result = enter(&lab, Node::Client).and_then(|()| {
            outcome.started = Instant::now();
            fetch(&request, &mut outcome)
        });
        outcome.ended = Instant::now();
        if let Err(e) = result {
            outcome.failure = Some(e);
        }
        outcome
    })
    .join()
    .unwrap_or_else(|_| Outcome {
        wanted: length,
        bytes: 0,
        wrong_bytes: 0,
        started,
        requested: None,
        first_byte: None,
        ended: Instant::now(),
        failure: Some("the download's thread panicked".into()),
    })
}

/// Compares arriving bytes with the stream the server sends.
struct Checker {
    expected: Rng,
    left: u64,
    want: Vec<u8>,
    used: usize,
    filled: usize,
}

impl Checker {
    fn new(seed: u64, length: u64) -> Checker {
        Checker {
            expected: Rng::new(seed),
            left: length,
            want: vec![0u8; PIECE],
            used: 0,
            filled: 0,
        }
    }

    /// The bytes of `got` that differ from the stream (every byte past its
    /// end is wrong).
    fn wrong(&mut self, got: &[u8]) -> u64 {
        let mut wrong = 0u64;
        let mut at = 0;
        while at < got.len() {
            if self.used == self.filled {
                if self.left == 0 {
                    return wrong + (got.len() - at) as u64;
                }
                self.filled = self.left.min(self.want.len() as u64) as usize;
                self.expected.fill(&mut self.want[..self.filled]);
                self.left -= self.filled as u64;
                self.used = 0;
            }
            let take = (got.len() - at).min(self.filled - self.used);
            wrong += got[at..at + take]
                .iter()
                .zip(&self.want[self.used..self.used + take])
                .filter(|(a, b)| a != b)
                .count() as u64;
            self.used += take;
            at += take;
        }
        wrong
    }
}

fn fetch(request: &Request, outcome: &mut Outcome) -> Result<(), String> {
    let addr: SocketAddr = format!("{SERVER_ADDR}:{PORT}")
        .parse()
        .map_err(|e| format!("{e}"))?;
    let mut stream =
        TcpStream::connect_timeout(&addr, request.stall).map_err(|e| format!("connect: {e}"))?;
    stream
        .set_read_timeout(Some(request.stall.min(Duration::from_millis(100))))
        .map_err(|e| e.to_string())?;
    let mut head = [0u8; 16];
    head[..8].copy_from_slice(&request.seed.to_be_bytes());
    head[8..].copy_from_slice(&request.length.to_be_bytes());
    stream
        .write_all(&head)
        .map_err(|e| format!("request: {e}"))?;
    outcome.requested = Some(Instant::now());
    let mut checker = Checker::new(request.seed, request.length);
    let mut got = vec![0u8; 64 * 1024];
    let mut last_byte = Instant::now();
    while outcome.bytes < request.length {
        if request
            .stop
            .as_deref()
            .is_some_and(|s| s.load(Ordering::Relaxed))
        {
            return Err("stopped".into());
        }
        if request
            .deadline
            .is_some_and(|d| outcome.requested.is_some_and(|r| r.elapsed() >= d))
        {
            return Err(DEADLINE.into());
        }
        match stream.read(&mut got) {
            Ok(0) => {
                return Err(format!(
                    "the server's side ended after {} of {} bytes",
                    outcome.bytes, request.length
                ))
            }
            Ok(n) => {
                let now = Instant::now();
                outcome.first_byte.get_or_insert(now);
                outcome.wrong_bytes += checker.wrong(&got[..n]);
                outcome.bytes += n as u64;
                last_byte = now;
            }
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                if last_byte.elapsed() >= request.stall {
                    return Err(format!("no byte for {:?}", request.stall));
                }
            }
            Err(e) => return Err(format!("read: {e}")),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The checker finds exactly the bytes that differ, however the
    /// stream is cut into reads, and counts every byte past the end.
    #[test]
    fn the_checker_counts_wrong_bytes_across_any_reads() {
        let length = 200_000u64;
        let mut stream = vec![0u8; length as usize];
        let mut rng = Rng::new(9);
        for piece in stream.chunks_mut(PIECE) {
            rng.fill(piece);
        }
        stream[70_000] ^= 1;
        stream[131_071] ^= 0xff;
        stream.extend_from_slice(&[0, 0, 0]);
        for cut in [1usize, 1000, 65_536, 100_001] {
            let mut checker = Checker::new(9, length);
            let wrong: u64 = stream.chunks(cut).map(|c| checker.wrong(c)).sum();
            assert_eq!(wrong, 2 + 3, "reads of {cut}");
        }
        assert!(is_reset("read: Connection reset by peer (os error 104)"));
        assert!(is_reset("the server's side ended after 5 of 9 bytes"));
        assert!(!is_reset("no byte for 10s"));
        assert!(!is_reset("stopped"));
    }
}
