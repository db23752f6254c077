//! The tunnel's UDP socket with tail duplication underneath QUIC.
//!
//! `DupSocket` wraps the runtime's socket: every datagram quinn sends goes
//! out as before and, on paths where [`Duplication`] is switched on, a copy
//! of the burst's last datagrams goes out once more when the path falls
//! quiet (the policy is `wanopt_proto::dup::TailDup`). A small task sleeps
//! until the policy's next deadline and sends the copies; quinn on the far
//! side drops whichever copy of a packet arrives second.
//!
//! Flows tell it when their stream's last bytes are written
//! ([`StreamEnds::expect`]): until the peer has acknowledged them, the
//! path's tails are repeated even while it carries bulk traffic, so that
//! the loss of a transfer's last packet costs a copy's delay, not a probe
//! timeout; a longer tail then goes out as Reed-Solomon parity
//! (`wanopt_proto::fec`). On the receiving side the socket keeps the last
//! datagrams of each peer that sends parity, rebuilds what a parity group
//! shows lost, and hands the rebuilt datagrams to quinn as received; the
//! parity datagrams themselves never reach quinn.

use std::fmt;
use std::io::{self, IoSliceMut};
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use quinn::udp::{EcnCodepoint, RecvMeta, Transmit};
use quinn::{AsyncUdpSocket, UdpPoller};
use serde::{Deserialize, Serialize};
use tokio::sync::Notify;
use wanopt_proto::dup::{
    LossMonitor, TailDup, TailParams, TailStats, BUSY_SHARE, MAX_TAIL_DATAGRAMS,
};
use wanopt_proto::fec;

/// When the tunnel repeats datagrams.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum DuplicationMode {
    /// Never.
    Off,
    /// Repeat burst tails on every path.
    Tails,
    /// Repeat burst tails on paths whose measured loss is at least 0.1%
    /// (off again below 0.05%).
    #[default]
    Auto,
}

impl DuplicationMode {
    /// The mode's name on the command line.
    pub fn as_str(self) -> &'static str {
        match self {
            DuplicationMode::Off => "off",
            DuplicationMode::Tails => "tails",
            DuplicationMode::Auto => "auto",
        }
    }
}

impl std::str::FromStr for DuplicationMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "off" => Ok(DuplicationMode::Off),
            "tails" => Ok(DuplicationMode::Tails),
            "auto" => Ok(DuplicationMode::Auto),
            other => Err(format!(
                "unknown duplication mode {other:?} (expected auto, tails or off)"
            )),
        }
    }
}

impl fmt::Display for DuplicationMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A path's duplication as `/status` shows it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct DuplicationStatus {
    /// The node's mode (`off`, `tails`, `auto`).
    pub mode: DuplicationMode,
    /// Whether tails are repeated on this path now.
    pub active: bool,
    /// Whether the last sample found the path carrying bulk traffic (more
    /// than half its capacity), which pauses `auto`.
    #[serde(default)]
    pub bulk: bool,
    /// The loss monitor's estimate for this path (packets declared lost
    /// over packets sent, recent), percent.
    pub loss_percent: f64,
    /// Silence that ends a burst, milliseconds (when active).
    pub quiet_ms: Option<f64>,
    /// Most bytes repeated per burst (when active).
    pub tail_bytes: Option<usize>,
    /// Bursts whose tail was repeated.
    pub bursts: u64,
    /// Datagrams repeated.
    pub datagrams: u64,
    /// Bytes repeated.
    pub bytes: u64,
    /// Datagrams left out because the path's budget for copies was spent.
    pub over_budget: u64,
    /// Datagrams left out because their burst began while the path was
    /// busy (no idle link time to spend on copies).
    #[serde(default)]
    pub busy: u64,
    /// Bursts that began on a busy path and were repeated anyway because
    /// a stream was ending on it.
    #[serde(default)]
    pub stream_ends: u64,
    /// Streams whose last bytes are written and not yet acknowledged.
    #[serde(default)]
    pub ending_streams: usize,
    /// Tails sent as Reed-Solomon parity (stream ends).
    #[serde(default)]
    pub parity_groups: u64,
    /// Datagrams left out because the sender still had data waiting for
    /// its congestion window when the path went quiet (not an end).
    #[serde(default)]
    pub stalled: u64,
    /// Datagrams from this peer rebuilt from its parity (what the peer
    /// did not have to retransmit).
    #[serde(default)]
    pub rebuilt: u64,
}

type Meta = (Option<EcnCodepoint>, Option<IpAddr>);

#[derive(Debug)]
struct Shared {
    policy: Mutex<TailDup<SocketAddr, Meta>>,
    /// Set while any path repeats tails, so the send path of a node with
    /// duplication off never takes the lock.
    active: AtomicBool,
    wake: Notify,
    /// The receiving side of parity.
    parity: Mutex<ParityReceivers>,
    /// Set once any peer sent parity, so the receive path of a node that
    /// never got any takes no lock.
    parity_seen: AtomicBool,
    /// Per peer, its connection's congestion controller's "data waits"
    /// flag ([`Duplication::watch_sender`]).
    senders: Mutex<Vec<(SocketAddr, Arc<AtomicBool>)>>,
}

impl Shared {
    fn policy(&self) -> MutexGuard<'_, TailDup<SocketAddr, Meta>> {
        self.policy.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn parity(&self) -> MutexGuard<'_, ParityReceivers> {
        self.parity.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn senders(&self) -> MutexGuard<'_, Vec<(SocketAddr, Arc<AtomicBool>)>> {
        self.senders.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Hands each watched sender's flag to the policy.
    fn sync_senders(&self) {
        let senders = self.senders();
        if senders.is_empty() {
            return;
        }
        let mut policy = self.policy();
        for (peer, blocked) in senders.iter() {
            policy.sender_blocked(*peer, blocked.load(Ordering::Relaxed));
        }
    }
}

/// Peers whose parity this node receives at most (the least recently
/// heard from is forgotten).
const PARITY_PEERS: usize = 64;
/// Rebuilt datagrams waiting to be handed to quinn at most.
const REBUILT_QUEUE: usize = 64;

/// The parity receivers of the peers that send parity, and the datagrams
/// rebuilt and not yet handed on.
#[derive(Debug, Default)]
struct ParityReceivers {
    peers: std::collections::HashMap<SocketAddr, (fec::Receiver, Instant)>,
    rebuilt: std::collections::VecDeque<(SocketAddr, Option<IpAddr>, Vec<u8>)>,
}

impl ParityReceivers {
    /// Takes one received datagram: remembered if its sender sends parity;
    /// a parity datagram is consumed (returns true: not for quinn).
    fn on_datagram(&mut self, from: SocketAddr, dst_ip: Option<IpAddr>, datagram: &[u8]) -> bool {
        if !fec::is_parity(datagram) {
            if let Some((rx, _)) = self.peers.get_mut(&from) {
                rx.on_datagram(datagram);
            }
            return false;
        }
        let now = Instant::now();
        if !self.peers.contains_key(&from) && self.peers.len() >= PARITY_PEERS {
            if let Some(oldest) = self
                .peers
                .iter()
                .min_by_key(|(_, (_, at))| *at)
                .map(|(a, _)| *a)
            {
                self.peers.remove(&oldest);
            }
        }
        let (rx, at) = self
            .peers
            .entry(from)
            .or_insert_with(|| (fec::Receiver::new(), now));
        *at = now;
        match rx.on_parity(datagram) {
            Ok(rebuilt) => {
                for d in rebuilt {
                    if self.rebuilt.len() < REBUILT_QUEUE {
                        self.rebuilt.push_back((from, dst_ip, d));
                    }
                }
            }
            Err(e) => tracing::debug!("parity datagram from {from} refused: {e}"),
        }
        true
    }

    /// Datagrams rebuilt from `peer`'s parity so far.
    fn rebuilt_from(&self, peer: SocketAddr) -> u64 {
        self.peers
            .get(&peer)
            .map_or(0, |(rx, _)| rx.stats().rebuilt)
    }
}

/// The node's handle on its socket's duplication: which paths repeat
/// tails, with which parameters, and what it cost.
#[derive(Debug, Clone)]
pub struct Duplication {
    mode: DuplicationMode,
    shared: Arc<Shared>,
    paths: Arc<Mutex<std::collections::HashMap<SocketAddr, PathMemory>>>,
}

/// One sample of a tunnel connection, for [`Duplication::update_path`].
#[derive(Debug, Clone, Copy)]
pub struct PathSample {
    /// Packets sent on the path since the connection began.
    pub sent_packets: u64,
    /// Packets declared lost since the connection began.
    pub lost_packets: u64,
    /// Smoothed round-trip time.
    pub srtt: Duration,
    /// The congestion controller's rate estimate, bytes per second (the
    /// path's capacity is the highest estimate seen, slowly forgotten).
    pub rate_estimate: Option<f64>,
    /// UDP bytes sent on the path since the connection began (the send
    /// rate between two samples tells bulk traffic from sparse).
    pub udp_tx_bytes: u64,
    /// The path MTU (UDP payload).
    pub mtu: u16,
}

/// What the node remembers of a path between samples.
#[derive(Debug, Default)]
struct PathMemory {
    loss: LossMonitor,
    /// Whether the last sample found the path carrying bulk traffic.
    bulk: bool,
    /// The previous sample's time and UDP bytes sent.
    last_tx: Option<(Instant, u64)>,
    /// The highest rate estimate seen, decayed with a one-minute half-life,
    /// and when it was last updated. BBR's own estimate is a max over about
    /// ten round trips, so it falls as soon as the traffic turns sparse
    /// (app-limited samples), which is exactly when tails matter.
    capacity: Option<(f64, Instant)>,
    /// The tail parameters the last sample gave the path (whether on or
    /// not), for a stream end between samples.
    params: Option<TailParams>,
    /// Streams on the path whose last bytes are written and not yet
    /// acknowledged ([`StreamEnd`] guards alive).
    ending: usize,
}

/// How often the node samples its paths for duplication (short, so that
/// tails come back soon after a bulk transfer ends).
pub const SAMPLE_INTERVAL: Duration = Duration::from_millis(100);

/// Half-life of a path's remembered capacity.
const CAPACITY_HALF_LIFE: Duration = Duration::from_secs(60);

impl PathMemory {
    /// The send rate since the previous sample, bytes per second (0 at the
    /// first sample or when the counter went back: a new connection).
    fn send_rate(&mut self, now: Instant, tx_bytes: u64) -> f64 {
        let rate = match self.last_tx {
            Some((at, last)) if tx_bytes >= last => {
                let secs = now.saturating_duration_since(at).as_secs_f64();
                if secs > 0.0 {
                    (tx_bytes - last) as f64 / secs
                } else {
                    0.0
                }
            }
            _ => 0.0,
        };
        self.last_tx = Some((now, tx_bytes));
        rate
    }

    /// Whether tails are repeated on the path in `mode`: `auto` wants a
    /// lossy path that carries no bulk traffic, or one where a stream is
    /// ending.
    fn repeats(&self, mode: DuplicationMode) -> bool {
        match mode {
            DuplicationMode::Off => false,
            DuplicationMode::Tails => true,
            DuplicationMode::Auto => self.loss.is_lossy() && (!self.bulk || self.ending > 0),
        }
    }

    fn capacity(&mut self, now: Instant, estimate: Option<f64>) -> Option<f64> {
        let estimate = estimate.filter(|r| r.is_finite() && *r > 0.0);
        let remembered = self.remembered(now);
        let capacity = match (estimate, remembered) {
            (Some(e), Some(r)) => Some(e.max(r)),
            (e, r) => e.or(r),
        };
        self.capacity = capacity.map(|c| (c, now));
        capacity
    }

    /// The remembered capacity decayed to `now`, bytes per second.
    fn remembered(&self, now: Instant) -> Option<f64> {
        self.capacity.map(|(rate, at)| {
            let half_lives =
                now.saturating_duration_since(at).as_secs_f64() / CAPACITY_HALF_LIFE.as_secs_f64();
            rate * 0.5f64.powf(half_lives)
        })
    }
}

impl Duplication {
    /// A handle for a node running `mode`; nothing is repeated until
    /// [`Duplication::update_path`] says so.
    pub fn new(mode: DuplicationMode) -> Duplication {
        Duplication {
            mode,
            shared: Arc::new(Shared {
                policy: Mutex::new(TailDup::new()),
                active: AtomicBool::new(false),
                wake: Notify::new(),
                parity: Mutex::default(),
                parity_seen: AtomicBool::new(false),
                senders: Mutex::default(),
            }),
            paths: Arc::default(),
        }
    }

    /// Re-decides the path to `peer` from a sample of its connection; call
    /// it about every [`SAMPLE_INTERVAL`].
    ///
    /// `auto` repeats tails while the path is lossy and not carrying bulk
    /// traffic: while it sends more than half its capacity, no burst ends
    /// (the rare pause is judged busy anyway), so copying every datagram
    /// into the tail would be CPU spent for nothing; tails come back within
    /// a sample of the traffic turning sparse. The exception is a path on
    /// which a stream is ending ([`StreamEnds::expect`]): its bulk
    /// transfer's end is a tail worth repeating.
    pub fn update_path(&self, peer: SocketAddr, sample: &PathSample) {
        let now = Instant::now();
        let mut paths = self.paths.lock().unwrap_or_else(|e| e.into_inner());
        let path = paths.entry(peer).or_default();
        path.loss.update(sample.sent_packets, sample.lost_packets);
        let capacity = path.capacity(now, sample.rate_estimate);
        let send_rate = path.send_rate(now, sample.udp_tx_bytes);
        path.bulk = capacity.is_some_and(|c| send_rate > BUSY_SHARE * c);
        path.params = Some(TailParams::for_path(
            sample.srtt,
            capacity,
            usize::from(sample.mtu),
        ));
        let params = path.params.filter(|_| path.repeats(self.mode));
        let ending = path.ending > 0;
        drop(paths);
        let mut policy = self.shared.policy();
        policy.set_path(now, peer, params);
        policy.expect_ends(peer, ending);
        self.shared
            .active
            .store(policy.is_active(), Ordering::Relaxed);
    }

    /// A handle for the flows on the path to `peer` to say when their
    /// stream is ending.
    pub fn stream_ends(&self, peer: SocketAddr) -> StreamEnds {
        StreamEnds {
            duplication: self.clone(),
            peer,
        }
    }

    /// Counts a stream ending on `peer` (+1) or acknowledged (-1), and
    /// applies the change at once rather than at the next sample. Returns
    /// whether it counted (a path not sampled yet is not).
    fn ending(&self, peer: SocketAddr, starts: bool) -> bool {
        if self.mode == DuplicationMode::Off {
            return false;
        }
        let now = Instant::now();
        let mut paths = self.paths.lock().unwrap_or_else(|e| e.into_inner());
        let Some(path) = paths.get_mut(&peer) else {
            // No sample yet (or the path is gone): nothing to apply.
            return false;
        };
        if starts {
            path.ending += 1;
        } else {
            path.ending = path.ending.saturating_sub(1);
        }
        let ending = path.ending > 0;
        // Switch a bulk path's tails on now: the stream's last bytes may go
        // out before the next sample. Switching off waits for the sample.
        let params = path.params.filter(|_| ending && path.repeats(self.mode));
        drop(paths);
        let mut policy = self.shared.policy();
        if let Some(params) = params {
            if policy.params(peer).is_none() {
                policy.set_path(now, peer, Some(params));
            }
        }
        policy.expect_ends(peer, ending);
        self.shared
            .active
            .store(policy.is_active(), Ordering::Relaxed);
        true
    }

    /// Watches the sender of the connection to `peer` through its
    /// congestion controller's flag (wanopt's BBR:
    /// [`crate::bbr::Bbr::sender_blocked`]): while data waits for the
    /// window, a quiet path is no burst's end. Idempotent.
    pub fn watch_sender(&self, peer: SocketAddr, blocked: Arc<AtomicBool>) {
        let mut senders = self.shared.senders();
        match senders.iter_mut().find(|(p, _)| *p == peer) {
            Some((_, flag)) if Arc::ptr_eq(flag, &blocked) => {}
            Some((_, flag)) => *flag = blocked,
            None => senders.push((peer, blocked)),
        }
    }

    /// Forgets a path whose connection is gone.
    pub fn remove_path(&self, peer: SocketAddr) {
        self.shared.senders().retain(|(p, _)| *p != peer);
        self.paths
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&peer);
        let mut policy = self.shared.policy();
        policy.remove(peer);
        self.shared
            .active
            .store(policy.is_active(), Ordering::Relaxed);
    }

    /// What the path to `peer` does and did.
    pub fn status(&self, peer: SocketAddr) -> DuplicationStatus {
        let (loss, bulk, ending_streams) = self
            .paths
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&peer)
            .map_or((0.0, false, 0), |p| (p.loss.loss_rate(), p.bulk, p.ending));
        let policy = self.shared.policy();
        let params = policy.params(peer);
        let stats = policy.stats(peer).unwrap_or_default();
        let TailStats {
            bursts,
            datagrams,
            bytes,
            over_budget,
            busy,
            stream_ends,
            parity_groups,
            stalled,
            ..
        } = stats;
        drop(policy);
        let rebuilt = self.shared.parity().rebuilt_from(peer);
        DuplicationStatus {
            mode: self.mode,
            active: params.is_some(),
            bulk,
            loss_percent: loss * 100.0,
            quiet_ms: params.map(|p| p.quiet.as_secs_f64() * 1e3),
            tail_bytes: params.map(|p| p.max_bytes),
            bursts,
            datagrams,
            bytes,
            over_budget,
            busy,
            stream_ends,
            ending_streams,
            parity_groups,
            stalled,
            rebuilt,
        }
    }

    /// Wraps the runtime's `socket`; spawns (on the current tokio runtime)
    /// the task that sends the copies, which ends with the socket.
    pub fn wrap(&self, inner: Arc<dyn AsyncUdpSocket>) -> Arc<dyn AsyncUdpSocket> {
        let socket = Arc::new(DupSocket {
            inner,
            shared: self.shared.clone(),
        });
        tokio::spawn(send_copies(Arc::downgrade(&socket)));
        socket
    }
}

/// Longest a [`StreamEnd`] is held waiting for the peer's acknowledgement
/// (a peer that stopped reading, a stuck tunnel).
pub const STREAM_END_HOLD: Duration = Duration::from_secs(30);

/// Lets the flows on one path say when their stream is ending.
#[derive(Debug, Clone)]
pub struct StreamEnds {
    duplication: Duplication,
    peer: SocketAddr,
}

impl StreamEnds {
    /// The path's capacity, bits per second: the highest rate estimate
    /// its samples saw, forgotten with a one-minute half-life (BBR's own
    /// estimate falls as soon as the traffic turns sparse). `None` before
    /// the first sample.
    pub fn capacity_bps(&self) -> Option<f64> {
        let paths = self
            .duplication
            .paths
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        paths
            .get(&self.peer)?
            .remembered(Instant::now())
            .map(|bytes_per_sec| bytes_per_sec * 8.0)
    }

    /// A stream on the path has had its last bytes written (they may still
    /// be queued in the QUIC connection): until the returned guard is
    /// dropped, the path's tails are repeated even while it is busy.
    pub fn expect(&self) -> StreamEnd {
        let counted = self.duplication.ending(self.peer, true);
        StreamEnd {
            ends: counted.then(|| self.clone()),
        }
    }
}

/// A stream's end awaited on a path; dropping it says the end was
/// acknowledged (or given up on). Holds nothing when it was not counted
/// (duplication off, or the path not sampled yet).
#[derive(Debug)]
#[must_use = "the end is expected only while the guard lives"]
pub struct StreamEnd {
    ends: Option<StreamEnds>,
}

impl StreamEnd {
    /// Keeps the guard until `acknowledged` completes (a finished
    /// stream's `stopped()`), at most [`STREAM_END_HOLD`], in a task of
    /// its own so that the flow need not wait.
    pub fn release_when<F>(self, acknowledged: F)
    where
        F: std::future::Future + Send + 'static,
    {
        tokio::spawn(async move {
            let _ = tokio::time::timeout(STREAM_END_HOLD, acknowledged).await;
            drop(self);
        });
    }
}

impl Drop for StreamEnd {
    fn drop(&mut self) {
        if let Some(ends) = self.ends.take() {
            ends.duplication.ending(ends.peer, false);
        }
    }
}

/// The wrapped socket.
#[derive(Debug)]
struct DupSocket {
    inner: Arc<dyn AsyncUdpSocket>,
    shared: Arc<Shared>,
}

impl DupSocket {
    fn record(&self, transmit: &Transmit) {
        let now = Instant::now();
        let meta = (transmit.ecn, transmit.src_ip);
        let size = transmit
            .segment_size
            .unwrap_or(transmit.contents.len())
            .max(1);
        let mut armed = false;
        {
            let mut policy = self.shared.policy();
            let count = transmit.contents.len().div_ceil(size);
            // Only the batch's last datagrams can end up in a tail (a
            // parity tail is the longest): the front is counted, not
            // copied.
            let unheld = count.saturating_sub(MAX_TAIL_DATAGRAMS.max(fec::MAX_SOURCES));
            for (i, datagram) in transmit.contents.chunks(size).enumerate() {
                if i < unheld {
                    policy.on_send_unheld(now, transmit.destination, datagram.len());
                } else {
                    armed |= policy.on_send(now, transmit.destination, &meta, datagram);
                }
            }
        }
        if armed {
            self.shared.wake.notify_one();
        }
    }
}

impl AsyncUdpSocket for DupSocket {
    fn create_io_poller(self: Arc<Self>) -> Pin<Box<dyn UdpPoller>> {
        self.inner.clone().create_io_poller()
    }

    fn try_send(&self, transmit: &Transmit) -> io::Result<()> {
        self.inner.try_send(transmit)?;
        if self.shared.active.load(Ordering::Relaxed) {
            self.record(transmit);
        }
        Ok(())
    }

    fn poll_recv(
        &self,
        cx: &mut Context,
        bufs: &mut [IoSliceMut<'_>],
        meta: &mut [RecvMeta],
    ) -> Poll<io::Result<usize>> {
        if !self.shared.parity_seen.load(Ordering::Relaxed) {
            let received = std::task::ready!(self.inner.poll_recv(cx, bufs, meta))?;
            if !bufs
                .iter()
                .zip(meta.iter())
                .take(received)
                .any(|(buf, m)| segments(&buf[..m.len], m.stride).any(fec::is_parity))
            {
                return Poll::Ready(Ok(received));
            }
            self.shared.parity_seen.store(true, Ordering::Relaxed);
            return Poll::Ready(Ok(self.take_parity(bufs, meta, received)));
        }
        // Datagrams rebuilt from the last batch's parity go first.
        let handed = self.hand_rebuilt(bufs, meta);
        if handed > 0 {
            return Poll::Ready(Ok(handed));
        }
        let received = std::task::ready!(self.inner.poll_recv(cx, bufs, meta))?;
        Poll::Ready(Ok(self.take_parity(bufs, meta, received)))
    }

    fn local_addr(&self) -> io::Result<SocketAddr> {
        self.inner.local_addr()
    }

    fn max_transmit_segments(&self) -> usize {
        self.inner.max_transmit_segments()
    }

    fn max_receive_segments(&self) -> usize {
        self.inner.max_receive_segments()
    }

    fn may_fragment(&self) -> bool {
        self.inner.may_fragment()
    }
}

/// The datagrams of a received buffer (several with GRO, `stride` apart).
fn segments(buf: &[u8], stride: usize) -> impl Iterator<Item = &[u8]> {
    buf.chunks(stride.max(1))
}

impl DupSocket {
    /// Passes the first `received` buffers through the parity receivers:
    /// parity datagrams are taken out of them (the rest moved up, so a GRO
    /// buffer stays `stride`-spaced with only its last datagram shorter),
    /// others are remembered for peers that send parity. Returns
    /// `received` (a buffer left empty has length 0).
    fn take_parity(
        &self,
        bufs: &mut [IoSliceMut<'_>],
        meta: &mut [RecvMeta],
        received: usize,
    ) -> usize {
        let mut parity = self.shared.parity();
        for (buf, m) in bufs.iter_mut().zip(meta.iter_mut()).take(received) {
            let stride = m.stride.max(1);
            let len = m.len.min(buf.len());
            let mut kept = 0;
            let mut at = 0;
            while at < len {
                let end = (at + stride).min(len);
                let consumed = parity.on_datagram(m.addr, m.dst_ip, &buf[at..end]);
                if !consumed {
                    if kept != at {
                        buf.copy_within(at..end, kept);
                    }
                    kept += end - at;
                }
                at = end;
            }
            m.len = kept;
        }
        // Rebuilt datagrams wait for the next poll: quinn polls again at
        // once after a batch (or wakes itself when it paused for fairness).
        received
    }

    /// Moves rebuilt datagrams into the buffers; returns how many.
    fn hand_rebuilt(&self, bufs: &mut [IoSliceMut<'_>], meta: &mut [RecvMeta]) -> usize {
        let mut parity = self.shared.parity();
        let mut handed = 0;
        for (buf, m) in bufs.iter_mut().zip(meta.iter_mut()) {
            let Some((addr, dst_ip, datagram)) = parity.rebuilt.pop_front() else {
                break;
            };
            if datagram.len() > buf.len() {
                continue;
            }
            buf[..datagram.len()].copy_from_slice(&datagram);
            *m = RecvMeta {
                addr,
                len: datagram.len(),
                stride: datagram.len(),
                ecn: None,
                dst_ip,
            };
            handed += 1;
        }
        handed
    }
}

/// Sleeps until the policy's next deadline, sends what is due, and ends
/// when the socket is dropped.
async fn send_copies(socket: Weak<DupSocket>) {
    let Some(shared) = socket.upgrade().map(|s| s.shared.clone()) else {
        return;
    };
    loop {
        let deadline = shared.policy().poll_timeout();
        match deadline {
            Some(at) => {
                let sleep = tokio::time::sleep_until(at.into());
                tokio::select! {
                    () = sleep => {}
                    () = shared.wake.notified() => continue,
                }
            }
            None => {
                // Idle: wait for a send, but look at the socket now and
                // then so the task ends with it.
                tokio::select! {
                    () = shared.wake.notified() => continue,
                    () = tokio::time::sleep(Duration::from_secs(1)) => {}
                }
            }
        }
        let Some(socket) = socket.upgrade() else {
            return;
        };
        let now = Instant::now();
        shared.sync_senders();
        loop {
            let Some(copy) = shared.policy().poll_transmit(now) else {
                break;
            };
            let transmit = Transmit {
                destination: copy.key,
                ecn: copy.meta.0,
                contents: &copy.datagram,
                segment_size: None,
                src_ip: copy.meta.1,
            };
            // A full socket buffer means the path is busy, not quiet: the
            // copy is not worth waiting for.
            let _ = socket.inner.try_send(&transmit);
            shared.policy().recycle(copy.datagram);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capacity_is_the_highest_estimate_slowly_forgotten() {
        let t0 = Instant::now();
        let mut path = PathMemory::default();
        assert_eq!(path.capacity(t0, None), None);
        assert_eq!(path.capacity(t0, Some(250_000.0)), Some(250_000.0));
        // Sparse traffic: BBR's estimate drops; the capacity does not.
        let later = t0 + Duration::from_secs(1);
        let c = path.capacity(later, Some(5_000.0)).unwrap();
        assert!(c > 247_000.0 && c < 250_000.0, "{c}");
        // A minute of nothing halves it; a new high replaces it.
        let c = path.capacity(later + CAPACITY_HALF_LIFE, None).unwrap();
        assert!((c - 124_000.0).abs() < 1_500.0, "{c}");
        let c = path
            .capacity(later + CAPACITY_HALF_LIFE, Some(1e6))
            .unwrap();
        assert_eq!(c, 1e6);
        // Nonsense estimates are ignored.
        assert_eq!(
            path.capacity(later + CAPACITY_HALF_LIFE, Some(f64::NAN)),
            Some(1e6)
        );
    }

    /// A sample of the 3G downlink (150 ms, 2 Mbit/s): packets sent and
    /// lost, UDP bytes sent, all since the connection began.
    fn sample(sent: u64, lost: u64, tx: u64) -> PathSample {
        PathSample {
            sent_packets: sent,
            lost_packets: lost,
            srtt: Duration::from_millis(150),
            rate_estimate: Some(250_000.0),
            udp_tx_bytes: tx,
            mtu: 1472,
        }
    }

    #[test]
    fn a_path_reports_its_remembered_capacity_to_its_flows() {
        let peer: SocketAddr = "192.0.2.1:4433".parse().unwrap();
        // Kept whatever the mode: flows use it too.
        let dup = Duplication::new(DuplicationMode::Off);
        let ends = dup.stream_ends(peer);
        assert_eq!(ends.capacity_bps(), None);
        dup.update_path(peer, &sample(1000, 0, 1_000_000));
        let c = ends.capacity_bps().unwrap();
        assert!((c - 2e6).abs() < 1e3, "{c}");
        // The traffic turns sparse: BBR's estimate falls, the capacity
        // does not.
        let mut sparse = sample(1100, 0, 1_100_000);
        sparse.rate_estimate = Some(1_000.0);
        dup.update_path(peer, &sparse);
        let c = ends.capacity_bps().unwrap();
        assert!(c > 1.99e6, "{c}");
        assert_eq!(
            dup.stream_ends("192.0.2.2:4433".parse().unwrap())
                .capacity_bps(),
            None
        );
    }

    #[test]
    fn auto_repeats_tails_on_a_lossy_path_unless_it_carries_bulk_traffic() {
        let peer: SocketAddr = "192.0.2.1:4433".parse().unwrap();
        let dup = Duplication::new(DuplicationMode::Auto);
        // Clean so far: off.
        dup.update_path(peer, &sample(1000, 0, 1_000_000));
        assert!(!dup.status(peer).active);
        // 1% loss, and the path sent 1.4 MB since the last sample a few
        // microseconds ago: bulk, so still off.
        dup.update_path(peer, &sample(2000, 20, 2_400_000));
        let s = dup.status(peer);
        assert!(!s.active && s.bulk, "{s:?}");
        assert!(s.loss_percent > 0.9, "{s:?}");
        // Nothing sent since: sparse, lossy: on, sized for the path.
        std::thread::sleep(Duration::from_millis(20));
        dup.update_path(peer, &sample(2000, 20, 2_400_000));
        let s = dup.status(peer);
        assert!(s.active && !s.bulk, "{s:?}");
        assert_eq!(s.tail_bytes, Some(7_500));
        assert_eq!(s.quiet_ms, Some(37.5));
        // `off` never, `tails` always.
        let off = Duplication::new(DuplicationMode::Off);
        off.update_path(peer, &sample(2000, 20, 0));
        assert!(!off.status(peer).active);
        let tails = Duplication::new(DuplicationMode::Tails);
        tails.update_path(peer, &sample(10, 0, 0));
        assert!(tails.status(peer).active);
        tails.remove_path(peer);
        assert!(!tails.status(peer).active);
    }

    #[tokio::test]
    async fn a_stream_ending_on_a_bulk_path_switches_its_tails_on_until_acknowledged() {
        let peer: SocketAddr = "192.0.2.1:4433".parse().unwrap();
        let dup = Duplication::new(DuplicationMode::Auto);
        let ends = dup.stream_ends(peer);
        // Before the first sample a stream end is not counted.
        drop(ends.expect());
        dup.update_path(peer, &sample(1000, 10, 1_000_000));
        dup.update_path(peer, &sample(2000, 20, 2_400_000));
        let s = dup.status(peer);
        assert!(!s.active && s.bulk && s.ending_streams == 0, "{s:?}");
        // A flow wrote its last bytes: tails on at once, busy or not.
        let end = ends.expect();
        let s = dup.status(peer);
        assert!(s.active && s.bulk && s.ending_streams == 1, "{s:?}");
        assert_eq!(s.tail_bytes, Some(7_500));
        assert!(dup.shared.active.load(Ordering::Relaxed));
        assert!(dup.shared.policy().params(peer).is_some());
        // Samples keep them on while the end is awaited, even bulk ones.
        dup.update_path(peer, &sample(3000, 30, 3_800_000));
        let s = dup.status(peer);
        assert!(s.active && s.bulk, "{s:?}");
        // The peer acknowledged the stream: the guard goes, and the next
        // bulk sample switches the tails off again.
        let (ack, acked) = tokio::sync::oneshot::channel::<()>();
        end.release_when(acked);
        tokio::task::yield_now().await;
        assert_eq!(
            dup.status(peer).ending_streams,
            1,
            "held until acknowledged"
        );
        ack.send(()).unwrap();
        for _ in 0..100 {
            if dup.status(peer).ending_streams == 0 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        assert_eq!(dup.status(peer).ending_streams, 0);
        dup.update_path(peer, &sample(4000, 40, 5_200_000));
        let s = dup.status(peer);
        assert!(!s.active && s.bulk, "{s:?}");
        // A clean path (auto) or `off` never turns on for a stream end.
        let clean: SocketAddr = "192.0.2.2:4433".parse().unwrap();
        dup.update_path(clean, &sample(2000, 0, 0));
        let _end = dup.stream_ends(clean).expect();
        assert!(!dup.status(clean).active);
        let off = Duplication::new(DuplicationMode::Off);
        off.update_path(peer, &sample(2000, 20, 0));
        let _end = off.stream_ends(peer).expect();
        let s = off.status(peer);
        assert!(!s.active && s.ending_streams == 0, "{s:?}");
    }

    /// A datagram like a QUIC packet (fixed bit set), `len` bytes.
    fn quic_like(n: u8, len: usize) -> Vec<u8> {
        let mut d: Vec<u8> = (0..len).map(|i| (i as u8).wrapping_mul(n) ^ n).collect();
        d[0] = 0x40 | (n & 0x3F);
        d
    }

    #[tokio::test]
    async fn parity_is_taken_out_of_received_batches_and_lost_datagrams_handed_on() {
        let std_socket = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let runtime = quinn::default_runtime().unwrap();
        let inner = runtime.wrap_udp_socket(std_socket).unwrap();
        let socket = DupSocket {
            inner,
            shared: Duplication::new(DuplicationMode::Auto).shared,
        };
        let peer: SocketAddr = "192.0.2.1:4433".parse().unwrap();
        let sources: Vec<Vec<u8>> = (1..=10).map(|n| quic_like(n, 1000)).collect();
        let refs: Vec<&[u8]> = sources.iter().map(Vec::as_slice).collect();
        let parity = fec::parity(0, &refs, 4).unwrap();
        let p_len = parity[0].len();

        // A first group only makes the socket start remembering this peer.
        let mut storage = vec![vec![0u8; 4 * 1500]; 2];
        let mut meta = [RecvMeta::default(); 2];
        let fill =
            |storage: &mut Vec<Vec<u8>>, meta: &mut [RecvMeta; 2], batches: &[Vec<&[u8]>]| {
                for (i, batch) in batches.iter().enumerate() {
                    let mut at = 0;
                    for d in batch {
                        storage[i][at..at + d.len()].copy_from_slice(d);
                        at += d.len();
                    }
                    meta[i] = RecvMeta {
                        addr: peer,
                        len: at,
                        stride: batch[0].len(),
                        ecn: None,
                        dst_ip: None,
                    };
                }
            };
        let received =
            |socket: &DupSocket, storage: &mut Vec<Vec<u8>>, meta: &mut [RecvMeta; 2]| {
                let mut bufs: Vec<IoSliceMut<'_>> =
                    storage.iter_mut().map(|b| IoSliceMut::new(b)).collect();
                socket.take_parity(&mut bufs, meta, 2)
            };
        fill(
            &mut storage,
            &mut meta,
            &[vec![&parity[0]], vec![&sources[0]]],
        );
        assert_eq!(received(&socket, &mut storage, &mut meta), 2);
        assert_eq!(meta[0].len, 0, "parity never reaches quinn");
        assert_eq!(meta[1].len, 1000);

        // Now the sources arrive in GRO batches, two of them lost (the
        // third and the ninth),
        // then the parity: first as a GRO batch of its own, then one shard
        // in the middle of a batch of datagrams the same size.
        fill(
            &mut storage,
            &mut meta,
            &[
                vec![&sources[0], &sources[1], &sources[3]],
                vec![
                    &sources[4],
                    &sources[5],
                    &sources[6],
                    &sources[7],
                    &sources[9],
                ],
            ],
        );
        received(&socket, &mut storage, &mut meta);
        let same_size = quic_like(60, p_len);
        let short = quic_like(61, 100);
        fill(
            &mut storage,
            &mut meta,
            &[
                vec![&parity[0], &parity[1], &parity[2]],
                vec![&same_size, &parity[3], &short],
            ],
        );
        assert_eq!(received(&socket, &mut storage, &mut meta), 2);
        assert_eq!(meta[0].len, 0);
        // The rest moved up: still `stride` apart, the short one last.
        assert_eq!((meta[1].len, meta[1].stride), (p_len + 100, p_len));
        assert_eq!(&storage[1][..p_len], &same_size[..]);
        assert_eq!(&storage[1][p_len..p_len + 100], &short[..]);

        // The next poll hands the two rebuilt datagrams over, byte exact.
        let mut out = vec![vec![0u8; 1500]; 3];
        let mut bufs: Vec<IoSliceMut<'_>> = out.iter_mut().map(|b| IoSliceMut::new(b)).collect();
        let mut meta3 = [RecvMeta::default(); 3];
        assert_eq!(socket.hand_rebuilt(&mut bufs, &mut meta3), 2);
        drop(bufs);
        let mut got: Vec<Vec<u8>> = (0..2).map(|i| out[i][..meta3[i].len].to_vec()).collect();
        got.sort();
        let mut lost = vec![sources[2].clone(), sources[8].clone()];
        lost.sort();
        assert_eq!(got, lost);
        assert!(meta3[..2]
            .iter()
            .all(|m| m.addr == peer && m.stride == m.len));
        assert_eq!(socket.shared.parity().rebuilt_from(peer), 2);
        assert_eq!(socket.hand_rebuilt(&mut [], &mut []), 0);
    }

    #[test]
    fn modes_parse_and_print() {
        for mode in [
            DuplicationMode::Off,
            DuplicationMode::Tails,
            DuplicationMode::Auto,
        ] {
            assert_eq!(mode.to_string().parse::<DuplicationMode>(), Ok(mode));
        }
        let err = "twice".parse::<DuplicationMode>().unwrap_err();
        assert!(err.contains("expected auto, tails or off"), "{err}");
        assert_eq!(DuplicationMode::default(), DuplicationMode::Auto);
    }
}
