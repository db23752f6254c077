//! The emulator's packet I/O driver: a bump in the wire inside the `wan`
//! namespace.
//!
//! One thread per direction: it reads frames from its ingress interface in
//! batches (`recvmmsg`), hands them to its sans-IO link model with the
//! arrival time, and sends every frame the model releases out of the other
//! interface (`sendmmsg`). Between events it sleeps in `ppoll` (nanosecond
//! timeout, 1 ns timer slack, real-time priority) until the next departure,
//! so departures are sub-millisecond accurate; there is no timer tick.
//! While it runs it asks the kernel for zero CPU wake-up latency
//! (`/dev/cpu_dma_latency`), and a departure that follows a sleep of over a
//! millisecond is met by waking a little early and spinning to it: an idle
//! CPU in a virtual machine otherwise wakes 0.1-0.4 ms late.
//! Each thread publishes its counters; the main thread writes them as JSON
//! to the lab's state directory (read by `wanopt lab status`).

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::clock::unix_ms;
use crate::link::{Blackhole, CutState, FrameLink};
use crate::rawsock::{send_batch, PacketSocket, RecvBatch, BATCH};

// The driver does not spin before a departure. At a saturated 250 Mbit/s a
// frame departs every 48 µs, and a 20 µs spin (a `recvmmsg` per turn, on a
// real-time thread) took CPU from the endpoints on a two-core machine:
// back to back on the 0 ms tcp-opt link, wanopt moved 229.0 Mbit/s (median
// of 9 runs) with the spin and 231.8 without it (BENCHMARKS.md). `ppoll`
// with 1 ns timer slack wakes within tens of microseconds; a frame released
// that late keeps its virtual departure slot in the model, so the rate is
// exact and only sub-0.1 ms jitter is added.
//
// An idle link is different: a thread woken from a long sleep is late by
// the CPU's way out of its idle state. On a 2-vCPU Firecracker guest
// (haltpoll idle driver) a 50 ms timer woke 139 us late on average and up
// to 427 us (cyclictest); with the zero-latency request 48 us. A ping
// across a 100 ms lab link came out 0.6-0.8 ms above the setting before,
// 0.1-0.3 ms with the request and the early wake-up. The spin is bounded
// by `EARLY_WAKE` per sleep of over `SPIN_AFTER`, so a saturated link,
// whose departures are microseconds apart, never spins.

/// How long before a departure a long sleep ends, to spin to it.
const EARLY_WAKE: Duration = Duration::from_micros(150);

/// Sleeps longer than this end `EARLY_WAKE` early.
const SPIN_AFTER: Duration = Duration::from_millis(1);

/// How often counters are published.
const PUBLISH_EVERY: Duration = Duration::from_millis(200);

/// Longest sleep when nothing is scheduled (bounds the reaction to stop).
const IDLE_WAIT: Duration = Duration::from_millis(50);

/// Errors from the emulator driver.
#[derive(Debug, thiserror::Error)]
pub enum DriverError {
    /// An AF_PACKET socket could not be opened or bound.
    #[error("cannot open a packet socket on `{interface}`: {cause}")]
    Socket {
        /// The interface.
        interface: String,
        /// The underlying error.
        cause: std::io::Error,
    },
    /// The counters file could not be written.
    #[error("cannot write counters to {path}: {cause}")]
    Publish {
        /// The file.
        path: PathBuf,
        /// The underlying error.
        cause: std::io::Error,
    },
    /// A direction thread failed.
    #[error("the {direction} direction stopped: {message}")]
    Thread {
        /// `up` or `down`.
        direction: &'static str,
        /// What went wrong.
        message: String,
    },
}

/// A perfect wire: every frame leaves as soon as it arrives. Used to measure
/// the driver's own ceiling.
#[derive(Debug, Default)]
pub struct Wire {
    held: std::collections::VecDeque<Vec<u8>>,
    frames: u64,
    bytes: u64,
}

impl FrameLink for Wire {
    fn handle_frame(&mut self, _now: Instant, frame: Vec<u8>) {
        self.frames += 1;
        self.bytes += frame.len() as u64;
        self.held.push_back(frame);
    }
    fn poll_transmit(&mut self, _now: Instant) -> Option<Vec<u8>> {
        self.held.pop_front()
    }
    fn poll_timeout(&self) -> Option<Instant> {
        None
    }
    fn counters_json(&self) -> serde_json::Value {
        serde_json::json!({"frames": self.frames, "bytes": self.bytes})
    }
}

/// The driver's own I/O counters for one direction.
#[derive(Debug, Default, Clone, Serialize)]
pub struct IoCounters {
    /// Frames read from the ingress interface.
    pub rx_frames: u64,
    /// Bytes read from the ingress interface.
    pub rx_bytes: u64,
    /// Frames longer than the receive buffer (dropped).
    pub rx_truncated: u64,
    /// Frames written to the egress interface.
    pub tx_frames: u64,
    /// Bytes written to the egress interface.
    pub tx_bytes: u64,
    /// Frames the egress socket refused (dropped).
    pub tx_dropped: u64,
    /// Departures the driver woke for, that is the first frame sent after
    /// the link's next departure time came due.
    pub departures_timed: u64,
    /// Sum of how late those departures left, nanoseconds.
    pub departure_late_ns_sum: u64,
    /// The latest of those departures, nanoseconds after its time.
    pub departure_late_ns_max: u64,
    /// Those departures that left more than 100 us late.
    pub departures_late_100us: u64,
}

impl IoCounters {
    fn record_departure(&mut self, late: Duration) {
        let ns = late.as_nanos().min(u64::MAX as u128) as u64;
        self.departures_timed += 1;
        self.departure_late_ns_sum = self.departure_late_ns_sum.saturating_add(ns);
        self.departure_late_ns_max = self.departure_late_ns_max.max(ns);
        if late > Duration::from_micros(100) {
            self.departures_late_100us += 1;
        }
    }
}

/// One direction's published state.
#[derive(Debug, Default, Clone, Serialize)]
pub struct DirectionSnapshot {
    /// When the direction's thread took this snapshot, milliseconds since
    /// the UNIX epoch: a reader that needs every frame up to some moment
    /// waits for a snapshot taken after it.
    pub at_unix_ms: u64,
    /// The driver's I/O counters.
    pub io: IoCounters,
    /// The link model's counters.
    pub link: serde_json::Value,
}

/// One direction of the bump: frames in on `ingress`, out on `egress`.
pub struct Direction<L> {
    /// `up` (edge to core) or `down` (core to edge).
    pub name: &'static str,
    /// Interface frames arrive on.
    pub ingress: String,
    /// Interface frames leave by.
    pub egress: String,
    /// The link model.
    pub link: L,
    /// Whether the link is cut (`lab link N down`): frames that arrive or
    /// come due while it is are dropped. Both directions share it.
    pub cut: Arc<CutState>,
}

/// Runs both directions until `stop` is set, publishing counters to
/// `counters_path` (atomically, via a temporary file) with `settings`
/// and the up direction's cut state (`cut`) alongside.
pub fn run<L: FrameLink + 'static>(
    up: Direction<L>,
    down: Direction<L>,
    settings: serde_json::Value,
    counters_path: &Path,
    stop: Arc<AtomicBool>,
) -> Result<(), DriverError> {
    set_timer_slack();
    let _latency = WakeLatency::request_zero();
    let up_state = Arc::new(Mutex::new(DirectionSnapshot::default()));
    let down_state = Arc::new(Mutex::new(DirectionSnapshot::default()));
    let cut = up.cut.clone();
    let mut handles = Vec::new();
    for (dir, state) in [(up, up_state.clone()), (down, down_state.clone())] {
        let rx = PacketSocket::receiver(&dir.ingress, 64 << 20).map_err(|source| {
            DriverError::Socket {
                interface: dir.ingress.clone(),
                cause: source,
            }
        })?;
        let tx =
            PacketSocket::sender(&dir.egress, 16 << 20).map_err(|source| DriverError::Socket {
                interface: dir.egress.clone(),
                cause: source,
            })?;
        let stop = stop.clone();
        let name = dir.name;
        let handle = thread::Builder::new()
            .name(format!("wan-{name}"))
            .spawn(move || pump(Blackhole::new(dir.link, dir.cut), &rx, &tx, &state, &stop))
            .map_err(|e| DriverError::Thread {
                direction: name,
                message: e.to_string(),
            })?;
        handles.push((name, handle));
    }
    let mut result = Ok(());
    while !stop.load(Ordering::Relaxed) {
        if handles.iter().any(|(_, h)| h.is_finished()) {
            stop.store(true, Ordering::Relaxed);
            break;
        }
        publish(&up_state, &down_state, &settings, &cut, counters_path)?;
        thread::sleep(PUBLISH_EVERY);
    }
    for (name, handle) in handles {
        match handle.join() {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                result = Err(DriverError::Thread {
                    direction: name,
                    message: e.to_string(),
                })
            }
            Err(_) => {
                result = Err(DriverError::Thread {
                    direction: name,
                    message: "panicked".to_string(),
                })
            }
        }
    }
    publish(&up_state, &down_state, &settings, &cut, counters_path)?;
    result
}

fn publish(
    up: &Mutex<DirectionSnapshot>,
    down: &Mutex<DirectionSnapshot>,
    settings: &serde_json::Value,
    cut: &CutState,
    path: &Path,
) -> Result<(), DriverError> {
    let snapshot = |m: &Mutex<DirectionSnapshot>| m.lock().map(|s| s.clone()).unwrap_or_default();
    let doc = serde_json::json!({
        "settings": settings,
        "cut": cut.to_json(),
        "up": snapshot(up),
        "down": snapshot(down),
    });
    let tmp = path.with_extension("json.tmp");
    let text = serde_json::to_string_pretty(&doc).unwrap_or_default();
    std::fs::write(&tmp, text)
        .and_then(|()| std::fs::rename(&tmp, path))
        .map_err(|source| DriverError::Publish {
            path: path.to_path_buf(),
            cause: source,
        })
}

/// Lowers this thread's timer slack to 1 ns so `ppoll` wakes on time.
fn set_timer_slack() {
    // SAFETY: prctl with an integer argument only.
    unsafe {
        libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong, 0, 0, 0);
    }
}

/// A request to the kernel's power management for zero CPU wake-up latency,
/// held while the file stays open (the interface cyclictest uses). Without
/// it (not root, or no such device) departures are only later.
struct WakeLatency(Option<std::fs::File>);

impl WakeLatency {
    fn request_zero() -> WakeLatency {
        use std::io::Write;
        let file = std::fs::OpenOptions::new()
            .write(true)
            .open("/dev/cpu_dma_latency")
            .and_then(|mut f| f.write_all(&0i32.to_ne_bytes()).map(|()| f));
        match file {
            Ok(f) => WakeLatency(Some(f)),
            Err(e) => {
                tracing::debug!("no zero wake-up latency request: {e}");
                WakeLatency(None)
            }
        }
    }
}

impl Drop for WakeLatency {
    fn drop(&mut self) {
        // Closing the file withdraws the request.
        self.0.take();
    }
}

/// Asks for a real-time priority so departures are not delayed by the
/// endpoints' processes; ignored if not permitted.
fn set_realtime() {
    let param = libc::sched_param { sched_priority: 10 };
    // SAFETY: a valid sched_param for the calling thread.
    unsafe {
        libc::sched_setscheduler(0, libc::SCHED_FIFO, &param);
    }
}

fn pump<L: FrameLink>(
    mut link: L,
    rx: &PacketSocket,
    tx: &PacketSocket,
    state: &Mutex<DirectionSnapshot>,
    stop: &AtomicBool,
) -> std::io::Result<()> {
    set_timer_slack();
    set_realtime();
    let mut batch = RecvBatch::default();
    let mut out: Vec<Vec<u8>> = Vec::with_capacity(BATCH);
    let mut io = IoCounters::default();
    let mut last_publish = Instant::now();
    // Whether a frame may be waiting: false after `ppoll` timed out, which
    // saves a `recvmmsg` per departure.
    let mut readable = true;
    while !stop.load(Ordering::Relaxed) {
        let n = if readable { batch.receive(rx)? } else { 0 };
        if n > 0 {
            let now = Instant::now();
            for i in 0..n {
                match batch.frame(i) {
                    Some(frame) => {
                        io.rx_frames += 1;
                        io.rx_bytes += frame.len() as u64;
                        link.handle_frame(now, frame.to_vec());
                    }
                    None => io.rx_truncated += 1,
                }
            }
        }
        let now = Instant::now();
        if let Some(due) = link.poll_timeout().filter(|&due| due <= now) {
            io.record_departure(now - due);
        }
        while let Some(frame) = link.poll_transmit(now) {
            out.push(frame);
            if out.len() == BATCH {
                flush(tx, &mut out, &mut io);
            }
        }
        flush(tx, &mut out, &mut io);
        if now.duration_since(last_publish) >= PUBLISH_EVERY {
            last_publish = now;
            if let Ok(mut s) = state.lock() {
                s.io = io.clone();
                s.link = link.counters_json();
                s.at_unix_ms = unix_ms();
            }
        }
        if n == BATCH {
            readable = true;
            continue; // more frames are probably waiting
        }
        let Some(due) = link.poll_timeout() else {
            readable = rx.wait_readable(IDLE_WAIT)?;
            continue;
        };
        let now = Instant::now();
        if due <= now {
            readable = true;
            continue; // due already
        }
        let wait = due - now;
        readable = if wait > IDLE_WAIT {
            rx.wait_readable(IDLE_WAIT)?
        } else if wait > SPIN_AFTER {
            rx.wait_readable(wait - EARLY_WAKE)? || spin_until(rx, due)?
        } else {
            rx.wait_readable(wait)?
        };
    }
    if let Ok(mut s) = state.lock() {
        s.io = io;
        s.link = link.counters_json();
        s.at_unix_ms = unix_ms();
    }
    Ok(())
}

/// Spins until `due` or until a frame can be read (true).
fn spin_until(rx: &PacketSocket, due: Instant) -> std::io::Result<bool> {
    while Instant::now() < due {
        if rx.wait_readable(Duration::ZERO)? {
            return Ok(true);
        }
        std::hint::spin_loop();
    }
    Ok(false)
}

fn flush(tx: &PacketSocket, out: &mut Vec<Vec<u8>>, io: &mut IoCounters) {
    if out.is_empty() {
        return;
    }
    let sent = send_batch(tx, out);
    // send_batch sends in order and skips refused frames; count by totals.
    io.tx_frames += sent as u64;
    io.tx_dropped += (out.len() - sent) as u64;
    io.tx_bytes += out.iter().map(|f| f.len() as u64).sum::<u64>();
    out.clear();
}
