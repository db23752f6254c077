//! Tail duplication: the sender repeats the last datagrams of each burst.
//!
//! A datagram lost in the middle of a long transfer costs QUIC little: later
//! packets are acknowledged and the gap is retransmitted about one round trip
//! later, while the transfer goes on. A datagram lost at the *end* of a burst
//! (the last packets of a response, a request, a save's references) has no
//! later packet to reveal the loss, so the sender waits for its probe
//! timeout (RFC 9002 §6.2: smoothed RTT + 4 x RTT variance + the peer's ack
//! delay), which on a queued 3G link is more than a round trip. Short
//! transfers are nothing but tails, and a warm transfer through the byte
//! cache is a few kilobytes: one loss doubles its time.
//!
//! [`TailDup`] sits under QUIC in the UDP socket layer. It keeps a copy of
//! the last datagrams sent to each path; when the path has been quiet for a
//! moment (a few pacing intervals: the burst is over) it hands them out once
//! more. The receiver's QUIC stack drops whichever copy arrives second (it
//! tracks packet numbers), so nothing above it changes. Copies use idle
//! link time only: a burst that starts while the path is busy (its recent
//! send rate above half the estimated rate: the gaps of a bulk transfer)
//! is not repeated, bursts longer than the tail only get their end
//! repeated, a token bucket bounds the copies' long-run share, and
//! [`LossMonitor`] turns the whole thing on only for paths that lose
//! packets.
//!
//! The one exception to "idle time only" is the end of a stream: a caller
//! that knows a transfer's last bytes are on their way (a flow finished
//! sending) calls [`TailDup::expect_ends`], and while it is set, tails are
//! repeated even when their burst began on a busy path. The last packet of
//! a bulk transfer is exactly the one whose loss costs a probe timeout, and
//! after it the link is idle anyway. Then the tail is longer (the last
//! [`crate::fec::MAX_SOURCES`] datagrams) and what goes out is not copies
//! but Reed-Solomon parity over it ([`crate::fec`]): a loss anywhere in a
//! transfer's last round trip costs the time until the parity arrives
//! instead of a round trip, for a few datagrams of parity.
//!
//! Sans-IO: the caller passes `now`, reports every datagram it sent with
//! [`TailDup::on_send`], sleeps until [`TailDup::poll_timeout`] and sends
//! what [`TailDup::poll_transmit`] returns.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use crate::fec;

/// Shortest silence that ends a burst.
pub const MIN_QUIET: Duration = Duration::from_millis(5);
/// Datagrams a tail holds at most.
pub const MAX_TAIL_DATAGRAMS: usize = 16;
/// How much link time a tail may take (at the estimated rate).
pub const TAIL_LINK_TIME: Duration = Duration::from_millis(30);
/// Share of the estimated rate the copies may use in the long run.
pub const MAX_RATE_SHARE: f64 = 0.25;
/// A burst that starts while the path's recent send rate is above this
/// share of the estimated rate is not repeated.
pub const BUSY_SHARE: f64 = 0.5;
/// Datagrams shorter than this are not repeated (nor do they push others
/// out of the tail): they are QUIC packets that carry an acknowledgement
/// alone, whose loss costs a transfer nothing, and on a slow uplink their
/// copies would hold up the next request. Measured on the lab's 3G link
/// (tcpdump of the tunnel): ACK-only packets are 34-37 bytes, a warm
/// request that is one 24-byte reference 54-56 bytes (below the earlier
/// threshold of 64, so its loss cost a probe timeout).
pub const MIN_HELD_DATAGRAM: usize = 48;
/// A stream's end with at least this many datagrams in its tail gets
/// parity instead of copies (with fewer, copies cost about as much and
/// cover every loss).
pub const PARITY_MIN_SOURCES: usize = 3;
/// Most bytes held for parity.
pub const PARITY_MAX_BYTES: usize = fec::MAX_SOURCES * 1500;
/// Parity shards for a group of `sources` datagrams: two (one datagram
/// rebuilt) below eight sources, four (two) from eight.
pub fn parity_shards(sources: usize) -> usize {
    if sources >= 8 {
        4
    } else {
        2
    }
}

/// How tails are repeated on one path.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TailParams {
    /// Silence after the last datagram that ends a burst.
    pub quiet: Duration,
    /// The same while a stream's end is expected ([`TailDup::expect_ends`]):
    /// four datagrams' time at the estimated rate (a paced sender's gaps
    /// are one), at least [`MIN_QUIET`], at most `quiet`. A lost last
    /// packet costs this much plus the copy's transmission.
    pub end_quiet: Duration,
    /// Most datagrams repeated per burst.
    pub max_datagrams: usize,
    /// Most bytes repeated per burst.
    pub max_bytes: usize,
    /// Token bucket refill: bytes of copies per second in the long run (the
    /// bucket holds `max_bytes`).
    pub refill_bytes_per_sec: f64,
    /// The path's estimated rate, bytes per second, if known: a burst that
    /// starts while the recent send rate exceeds [`BUSY_SHARE`] of it is
    /// not repeated.
    pub rate_bytes_per_sec: Option<f64>,
    /// Time constant of the recent send rate (an exponential average).
    pub window: Duration,
}

impl TailParams {
    /// Parameters for a path with smoothed RTT `srtt`, an estimated
    /// bottleneck rate (bytes per second, if known) and datagrams of up to
    /// `mtu` bytes.
    ///
    /// - quiet: a quarter of the RTT, or four datagrams' time at the
    ///   estimated rate if that is longer, at least [`MIN_QUIET`], at most
    ///   half the RTT. A sender limited by its window is released by ACKs,
    ///   which the peer may hold back up to its ack delay (25 ms by
    ///   default); BBR paces at 0.75 to 2.9 times its estimate; neither
    ///   gap may look like the end of a burst. While a stream's end is
    ///   expected only the pacing gap counts (`end_quiet`): the RTT of a
    ///   path that carried bulk traffic is inflated by its queue, and a
    ///   stall for ACKs in the middle of the transfer costs at most one
    ///   tail's copies;
    /// - tail: [`TAIL_LINK_TIME`] of the rate, between 2 and
    ///   [`MAX_TAIL_DATAGRAMS`] datagrams;
    /// - long-run share: [`MAX_RATE_SHARE`] of the rate, or one full tail
    ///   per second if that is more;
    /// - busy: judged on the send rate averaged over one RTT (50 ms to 1 s).
    pub fn for_path(srtt: Duration, rate_bytes_per_sec: Option<f64>, mtu: usize) -> TailParams {
        let mtu = mtu.max(1200);
        let ceiling = (srtt / 2).max(MIN_QUIET);
        let rate = rate_bytes_per_sec.filter(|r| r.is_finite() && *r > 0.0);
        let paced = rate.map_or(Duration::ZERO, |r| {
            Duration::from_secs_f64(((4 * mtu) as f64 / r).min(3600.0))
        });
        let quiet = (srtt / 4).max(paced).clamp(MIN_QUIET, ceiling);
        let end_quiet = match rate {
            Some(_) => paced.clamp(MIN_QUIET, quiet),
            None => quiet,
        };
        let max_bytes = rate
            .map_or(2 * mtu, |r| (r * TAIL_LINK_TIME.as_secs_f64()) as usize)
            .clamp(2 * mtu, MAX_TAIL_DATAGRAMS * mtu);
        let refill = rate
            .map_or(0.0, |r| r * MAX_RATE_SHARE)
            .max(max_bytes as f64);
        TailParams {
            quiet,
            end_quiet,
            max_datagrams: MAX_TAIL_DATAGRAMS,
            max_bytes,
            refill_bytes_per_sec: refill,
            rate_bytes_per_sec: rate,
            window: srtt.clamp(Duration::from_millis(50), Duration::from_secs(1)),
        }
    }
}

/// What one path's tails cost and bought.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TailStats {
    /// Bursts whose tail was repeated (at least one datagram).
    pub bursts: u64,
    /// Datagrams repeated.
    pub datagrams: u64,
    /// Bytes repeated.
    pub bytes: u64,
    /// Datagrams not repeated because the token bucket was empty.
    pub over_budget: u64,
    /// Datagrams not repeated because their burst began on a busy path.
    pub busy: u64,
    /// Bursts that began on a busy path and were repeated because the
    /// caller expected a stream to end ([`TailDup::expect_ends`]).
    pub stream_ends: u64,
    /// Tails dropped because the caller polled after the next burst began.
    pub late: u64,
    /// Tails sent as parity (stream ends); their datagrams count in
    /// `datagrams` and `bytes`.
    pub parity_groups: u64,
    /// Datagrams not repeated because the sender had more to send when
    /// the path went quiet (it waited for its congestion window:
    /// [`TailDup::sender_blocked`]).
    pub stalled: u64,
}

/// A copy to send now.
#[derive(Debug)]
pub struct Duplicate<K, M> {
    /// The path.
    pub key: K,
    /// The caller's metadata of the original (ECN, source address ...).
    pub meta: M,
    /// The datagram; hand the buffer back with [`TailDup::recycle`].
    pub datagram: Vec<u8>,
}

#[derive(Debug)]
struct Path<K, M> {
    key: K,
    params: TailParams,
    tail: VecDeque<(M, Vec<u8>)>,
    tail_bytes: usize,
    last_send: Option<Instant>,
    /// Whether the current tail has started to go out.
    repeating: bool,
    /// Whether the current burst began while the path was busy.
    burst_on_busy_path: bool,
    /// Whether a stream's end is expected ([`TailDup::expect_ends`]).
    ends_expected: bool,
    /// Whether the sender has more to send ([`TailDup::sender_blocked`]).
    sender_blocked: bool,
    /// The next parity group's number.
    next_group: u32,
    /// Bytes sent recently (exponential average, time constant
    /// `params.window`), as of `recent_at`.
    recent: f64,
    recent_at: Instant,
    tokens: f64,
    refilled: Instant,
    stats: TailStats,
}

impl<K, M> Path<K, M> {
    fn due(&self) -> Option<Instant> {
        if self.tail.is_empty() {
            return None;
        }
        Some(self.last_send? + self.quiet())
    }

    /// The silence that ends a burst now.
    fn quiet(&self) -> Duration {
        if self.ends_expected {
            self.params.end_quiet
        } else {
            self.params.quiet
        }
    }

    /// Decays the recent-bytes average to `now` and adds `bytes`.
    fn note_sent(&mut self, now: Instant, bytes: usize) {
        let dt = now.saturating_duration_since(self.recent_at).as_secs_f64();
        let tau = self.params.window.as_secs_f64().max(1e-3);
        self.recent = self.recent * (-dt / tau).exp() + bytes as f64;
        self.recent_at = now;
    }

    /// Whether the path sent more than [`BUSY_SHARE`] of its rate lately.
    fn busy(&self) -> bool {
        let Some(rate) = self.params.rate_bytes_per_sec else {
            return false;
        };
        self.recent / self.params.window.as_secs_f64().max(1e-3) > BUSY_SHARE * rate
    }

    /// How many datagrams and bytes the tail holds at most: more for
    /// parity while a stream's end is expected; nothing on a path that is
    /// off.
    fn limits(&self) -> (usize, usize) {
        if self.params.max_datagrams == 0 {
            (0, 0)
        } else if self.ends_expected {
            (fec::MAX_SOURCES, PARITY_MAX_BYTES)
        } else {
            (self.params.max_datagrams, self.params.max_bytes)
        }
    }

    /// Drops the oldest datagrams of the tail beyond `limits`.
    fn trim_to(&mut self, (datagrams, bytes): (usize, usize), pool: &mut Vec<Vec<u8>>) {
        while self.tail.len() > datagrams || self.tail_bytes > bytes {
            let Some((_, buf)) = self.tail.pop_front() else {
                break;
            };
            self.tail_bytes -= buf.len();
            pool.push(buf);
        }
    }

    /// Empties the tail into `pool`; returns how many datagrams it held.
    fn drop_tail(&mut self, pool: &mut Vec<Vec<u8>>) -> u64 {
        let dropped = self.tail.len() as u64;
        pool.extend(self.tail.drain(..).map(|(_, buf)| buf));
        self.tail_bytes = 0;
        dropped
    }

    fn refill(&mut self, now: Instant) {
        let secs = now.saturating_duration_since(self.refilled).as_secs_f64();
        self.tokens = (self.tokens + secs * self.params.refill_bytes_per_sec)
            .min(self.params.max_bytes as f64);
        self.refilled = now;
    }
}

impl<K, M: Clone> Path<K, M> {
    /// Replaces the tail by its Reed-Solomon parity, if it can be
    /// protected; otherwise cuts it to an ordinary tail (copies).
    fn replace_by_parity(&mut self, pool: &mut Vec<Vec<u8>>) {
        let parity = {
            let sources: Vec<&[u8]> = self.tail.iter().map(|(_, d)| d.as_slice()).collect();
            fec::parity(self.next_group, &sources, parity_shards(sources.len()))
        };
        let (Ok(parity), Some(meta)) = (parity, self.tail.back().map(|(m, _)| m.clone())) else {
            self.trim_to((self.params.max_datagrams, self.params.max_bytes), pool);
            return;
        };
        self.next_group = self.next_group.wrapping_add(1);
        self.stats.parity_groups += 1;
        self.drop_tail(pool);
        for datagram in parity {
            self.tail_bytes += datagram.len();
            self.tail.push_back((meta.clone(), datagram));
        }
    }
}

/// The tails of every path one socket sends on. `K` names a path (its
/// destination address), `M` is whatever the caller needs to send a copy
/// like its original.
#[derive(Debug)]
pub struct TailDup<K, M> {
    paths: Vec<Path<K, M>>,
    pool: Vec<Vec<u8>>,
}

impl<K, M> Default for TailDup<K, M> {
    fn default() -> Self {
        TailDup {
            paths: Vec::new(),
            pool: Vec::new(),
        }
    }
}

impl<K: Copy + Eq, M: Clone> TailDup<K, M> {
    /// Nothing repeated anywhere until [`TailDup::set_path`].
    pub fn new() -> Self {
        Self::default()
    }

    /// Repeats tails on `key` with `params`, or stops (`None`: the held
    /// copies are dropped, the counters kept).
    pub fn set_path(&mut self, now: Instant, key: K, params: Option<TailParams>) {
        let position = self.paths.iter().position(|p| p.key == key);
        match (position, params) {
            (Some(i), Some(params)) => {
                let path = &mut self.paths[i];
                path.refill(now);
                path.note_sent(now, 0);
                path.params = params;
                path.tokens = path.tokens.min(params.max_bytes as f64);
                self.trim(i);
            }
            (Some(i), None) => {
                let path = &mut self.paths[i];
                path.params.max_datagrams = 0;
                self.trim(i);
                // Keep the entry (and its counters) while the path exists;
                // `on_send` ignores it.
            }
            (None, Some(params)) => self.paths.push(Path {
                key,
                params,
                tail: VecDeque::new(),
                tail_bytes: 0,
                last_send: None,
                repeating: false,
                burst_on_busy_path: false,
                ends_expected: false,
                sender_blocked: false,
                next_group: 0,
                recent: 0.0,
                recent_at: now,
                tokens: params.max_bytes as f64,
                refilled: now,
                stats: TailStats::default(),
            }),
            (None, None) => {}
        }
    }

    /// While `expected`, tails on `key` are repeated even when their burst
    /// began on a busy path: a stream sent on it is about to end (its last
    /// bytes are written, some may still be queued), and the end of a bulk
    /// transfer is a tail like any other. The path must repeat tails
    /// ([`TailDup::set_path`]) for this to matter; the flag outlives
    /// `set_path(None)`.
    pub fn expect_ends(&mut self, key: K, expected: bool) {
        if let Some(path) = self.paths.iter_mut().find(|p| p.key == key) {
            path.ends_expected = expected;
        }
    }

    /// Tells whether the sender on `key` has data waiting for its
    /// congestion window or pacer (`true`) or nothing left to send. While
    /// it waits, a quiet path is a sender stalled in the middle of a
    /// transfer (its acknowledgements delayed by a queue, say), not the
    /// end of a burst: its tail is dropped, not repeated, even while a
    /// stream's end is expected (parity there would go ahead of the rest
    /// of the stream on the bottleneck and delay its last byte).
    pub fn sender_blocked(&mut self, key: K, blocked: bool) {
        if let Some(path) = self.paths.iter_mut().find(|p| p.key == key) {
            path.sender_blocked = blocked;
        }
    }

    /// Whether any path repeats tails (callers skip [`TailDup::on_send`]
    /// otherwise).
    pub fn is_active(&self) -> bool {
        self.paths.iter().any(|p| p.params.max_datagrams > 0)
    }

    /// Records a datagram just sent on `key`. Returns true when this armed
    /// a timer that was not armed before (the caller's sleeper must learn
    /// the new [`TailDup::poll_timeout`]).
    pub fn on_send(&mut self, now: Instant, key: K, meta: &M, datagram: &[u8]) -> bool {
        let Some(i) = self.sent(now, key, datagram.len()) else {
            return false;
        };
        let path = &mut self.paths[i];
        if datagram.len() < MIN_HELD_DATAGRAM {
            return false;
        }
        let was_armed = !path.tail.is_empty();
        let mut buf = self.pool.pop().unwrap_or_default();
        buf.clear();
        buf.extend_from_slice(datagram);
        path.tail_bytes += buf.len();
        path.tail.push_back((meta.clone(), buf));
        self.trim(i);
        !was_armed && !self.paths[i].tail.is_empty()
    }

    /// Records a datagram of `len` bytes sent on `key` that is not kept
    /// (the caller knows more datagrams follow it at once than a tail
    /// holds, e.g. the front of a large GSO batch): it counts towards the
    /// path's recent rate and the tail starts afresh after it.
    pub fn on_send_unheld(&mut self, now: Instant, key: K, len: usize) {
        if let Some(i) = self.sent(now, key, len) {
            self.paths[i].drop_tail(&mut self.pool);
        }
    }

    /// The bookkeeping of every send on an active path: a new burst (the
    /// path was quiet, or its last tail is going out) drops what is left
    /// of the last tail and is judged busy or idle. Returns the path.
    fn sent(&mut self, now: Instant, key: K, len: usize) -> Option<usize> {
        let i = self.paths.iter().position(|p| p.key == key)?;
        let path = &mut self.paths[i];
        if path.params.max_datagrams == 0 {
            return None;
        }
        let quiet_passed = path.last_send.is_none_or(|last| now >= last + path.quiet());
        if path.repeating || quiet_passed {
            if !path.repeating && !path.tail.is_empty() {
                // The caller slept through the deadline.
                path.stats.late += 1;
            }
            path.repeating = false;
            path.drop_tail(&mut self.pool);
            // Was the path busy before this burst?
            path.note_sent(now, 0);
            path.burst_on_busy_path = path.busy();
        }
        path.note_sent(now, len);
        path.last_send = Some(now);
        Some(i)
    }

    /// When the next copy is due, if any.
    #[must_use]
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.paths.iter().filter_map(Path::due).min()
    }

    /// The next copy to send at `now`, oldest datagram of a quiet path's
    /// tail first.
    #[must_use]
    pub fn poll_transmit(&mut self, now: Instant) -> Option<Duplicate<K, M>> {
        for path in &mut self.paths {
            if path.due().is_none_or(|due| now < due) {
                continue;
            }
            path.refill(now);
            if !path.repeating && path.sender_blocked {
                path.stats.stalled += path.drop_tail(&mut self.pool);
                continue;
            }
            if !path.repeating && path.ends_expected && path.tail.len() >= PARITY_MIN_SOURCES {
                path.replace_by_parity(&mut self.pool);
            }
            let Some((meta, datagram)) = path.tail.pop_front() else {
                continue;
            };
            path.tail_bytes -= datagram.len();
            let from_busy_path = !path.repeating && path.burst_on_busy_path;
            if from_busy_path && !path.ends_expected {
                // The burst came out of a busy path (a pause in a bulk
                // transfer, say): the link has no idle time to spare.
                self.pool.push(datagram);
                path.stats.busy += 1 + path.drop_tail(&mut self.pool);
                continue;
            }
            if path.tokens < datagram.len() as f64 {
                // Out of budget: this tail is not repeated any further.
                self.pool.push(datagram);
                path.stats.over_budget += 1 + path.drop_tail(&mut self.pool);
                path.repeating = false;
                continue;
            }
            path.tokens -= datagram.len() as f64;
            path.note_sent(now, datagram.len());
            if !path.repeating {
                path.stats.bursts += 1;
                path.stats.stream_ends += u64::from(from_busy_path);
            }
            path.repeating = !path.tail.is_empty();
            path.stats.datagrams += 1;
            path.stats.bytes += datagram.len() as u64;
            return Some(Duplicate {
                key: path.key,
                meta,
                datagram,
            });
        }
        None
    }

    /// Gives a sent copy's buffer back for reuse.
    pub fn recycle(&mut self, datagram: Vec<u8>) {
        if self.pool.len() < 4 * MAX_TAIL_DATAGRAMS {
            self.pool.push(datagram);
        }
    }

    /// The counters of `key`.
    pub fn stats(&self, key: K) -> Option<TailStats> {
        self.paths.iter().find(|p| p.key == key).map(|p| p.stats)
    }

    /// The parameters `key` repeats tails with, if it does.
    pub fn params(&self, key: K) -> Option<TailParams> {
        self.paths
            .iter()
            .find(|p| p.key == key && p.params.max_datagrams > 0)
            .map(|p| p.params)
    }

    /// Forgets `key` entirely (its connection is gone).
    pub fn remove(&mut self, key: K) {
        if let Some(i) = self.paths.iter().position(|p| p.key == key) {
            let path = self.paths.swap_remove(i);
            self.pool.extend(path.tail.into_iter().map(|(_, b)| b));
        }
    }

    fn trim(&mut self, i: usize) {
        let path = &mut self.paths[i];
        let limits = path.limits();
        path.trim_to(limits, &mut self.pool);
        self.pool.truncate(4 * MAX_TAIL_DATAGRAMS);
    }
}

/// Decides from a connection's packet counters whether its path loses
/// enough to repeat tails.
///
/// The estimate is lost / sent over roughly the last [`LossMonitor::HORIZON`]
/// packets (counters decay per packet sent, not per second, so an idle
/// tunnel keeps what it learned). It switches on at [`LossMonitor::ON`]
/// once [`LossMonitor::MIN_SAMPLE`] packets were seen, or earlier once
/// [`LossMonitor::MIN_LOST`] of them were lost (a fresh tunnel on a lossy
/// path should not wait 500 packets to protect its tails), and off below
/// [`LossMonitor::OFF`] (which takes more than `MIN_SAMPLE` packets:
/// `MIN_LOST` losses in fewer are a rate of at least 0.5%).
#[derive(Debug, Clone, Default)]
pub struct LossMonitor {
    sent: f64,
    lost: f64,
    last: Option<(u64, u64)>,
    lossy: bool,
}

impl LossMonitor {
    /// Packets over which the loss rate is averaged.
    pub const HORIZON: f64 = 20_000.0;
    /// Packets needed before a decision either way.
    pub const MIN_SAMPLE: f64 = 500.0;
    /// Losses that switch tails on before `MIN_SAMPLE` packets (if the
    /// rate is at least `ON`): three (2.5 because the counts decay per
    /// packet, so three losses a few hundred packets apart weigh a little
    /// under 3). A path that loses `ON` or less loses 3 of 500 packets
    /// with a probability under 1.5%.
    pub const MIN_LOST: f64 = 2.5;
    /// Loss rate that switches tails on.
    pub const ON: f64 = 0.001;
    /// Loss rate under which they go off again.
    pub const OFF: f64 = 0.0005;

    /// A monitor that has seen nothing.
    pub fn new() -> Self {
        Self::default()
    }

    /// Feeds the connection's totals (packets sent, packets declared lost)
    /// and returns whether the path is lossy. Totals that go backwards (a
    /// new connection) restart the estimate.
    pub fn update(&mut self, sent_total: u64, lost_total: u64) -> bool {
        let (sent, lost) = match self.last {
            Some((s, l)) if sent_total >= s && lost_total >= l => (sent_total - s, lost_total - l),
            Some(_) => {
                *self = LossMonitor::default();
                (sent_total, lost_total)
            }
            None => (sent_total, lost_total),
        };
        self.last = Some((sent_total, lost_total));
        let decay = (-(sent as f64) / Self::HORIZON).exp();
        self.sent = self.sent * decay + sent as f64;
        self.lost = self.lost * decay + lost as f64;
        if self.sent >= Self::MIN_SAMPLE || self.lost >= Self::MIN_LOST {
            let rate = self.loss_rate();
            if rate >= Self::ON {
                self.lossy = true;
            } else if rate < Self::OFF {
                self.lossy = false;
            }
        }
        self.lossy
    }

    /// The current estimate of the loss rate (0 before any packet).
    pub fn loss_rate(&self) -> f64 {
        if self.sent > 0.0 {
            (self.lost / self.sent).min(1.0)
        } else {
            0.0
        }
    }

    /// The last decision.
    pub fn is_lossy(&self) -> bool {
        self.lossy
    }
}

#[cfg(test)]
mod tests;
