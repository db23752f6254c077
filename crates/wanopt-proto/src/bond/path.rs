//! One path of a bond as its sender sees it: the datagrams in flight on it,
//! its round trip, its own BBR, its pacer, and whether it stalled.
//!
//! Loss is detected per path as RFC 9002 §6.1 does for a packet-number
//! space: a datagram is lost once one sent [`PACKET_THRESHOLD`] later on the
//! same path was acknowledged, or once one sent later was acknowledged and
//! 9/8 of the round trip has passed since it was sent. Paths of different
//! delays never meet in this count, so the slower one's datagrams are never
//! taken for lost because the faster one's came back first.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use wanopt_cc::{Bbr, BbrConfig};

use super::wire::AckRepr;

/// IPv4 and UDP headers: what a link carries beyond each datagram, counted
/// in every path's window, pacing and declared rate as links and ISPs'
/// policers count (IPv6 adds 20 more, which a declared rate's 2% headroom
/// does not cover at small sizes: declare IPv6 links a little lower).
pub const IP_UDP_HEADERS: usize = 28;
/// Datagrams acknowledged after a datagram that make it lost.
pub const PACKET_THRESHOLD: u32 = 3;
/// The least time a later acknowledgement must wait before a datagram is
/// lost by time.
const MIN_LOSS_DELAY: Duration = Duration::from_millis(1);
/// A path stalls when no ack came for this long (or twice its RTT
/// variation, if longer) while a datagram older than its RTT plus
/// [`STALL_SLACK`] waits.
pub const STALL_SILENCE: Duration = Duration::from_millis(30);
/// See [`STALL_SILENCE`].
const STALL_SLACK: Duration = Duration::from_millis(10);
/// The pacer's burst: this much time at the pacing rate, at least two
/// datagrams.
const PACER_BURST: Duration = Duration::from_millis(2);

/// What happened to a datagram sent on a path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fate {
    InFlight,
    Acked,
    Lost,
}

/// A datagram sent on a path.
#[derive(Debug)]
pub(super) struct Sent {
    pub(super) gseq: u32,
    /// What the link carries for it (IP and UDP headers, bond header and
    /// inner).
    pub(super) bytes: u64,
    pub(super) sent_at: Instant,
    pub(super) hold_exempt: bool,
    /// The inner datagram, kept to send again on another path if this one
    /// stalls.
    pub(super) inner: Vec<u8>,
    fate: Fate,
}

/// RFC 6298's smoothed round trip and its variation.
#[derive(Debug, Clone, Copy, Default)]
struct Rtt {
    smoothed: Option<Duration>,
    variation: Duration,
    latest: Duration,
}

impl Rtt {
    fn update(&mut self, sample: Duration) {
        self.latest = sample;
        match self.smoothed {
            None => {
                self.smoothed = Some(sample);
                self.variation = sample / 2;
            }
            Some(smoothed) => {
                let error = smoothed.abs_diff(sample);
                self.variation = (self.variation * 3 + error) / 4;
                self.smoothed = Some((smoothed * 7 + sample) / 8);
            }
        }
    }
}

/// What a path's sender has counted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PathStats {
    /// Datagrams sent on it.
    pub sent: u64,
    /// Bytes sent on it.
    pub sent_bytes: u64,
    /// Datagrams acknowledged.
    pub acked: u64,
    /// Datagrams declared lost.
    pub lost: u64,
    /// Times it stalled.
    pub stalls: u64,
    /// Datagrams it carried that another path had carried first.
    pub reinjected: u64,
}

/// A path's sender.
#[derive(Debug)]
pub(super) struct PathSender {
    seed: u64,
    mtu: u16,
    config: BbrConfig,
    pub(super) cc: Bbr,
    next_pseq: u32,
    /// Datagrams from the oldest unresolved one on, by pseq.
    sent: VecDeque<(u32, Sent)>,
    largest_acked: Option<u32>,
    rtt: Rtt,
    /// The round trip the probes measured, until acks do.
    probe_rtt: Option<Duration>,
    pub(super) in_flight: u64,
    /// The last ack that acknowledged something new.
    last_progress: Option<Instant>,
    pub(super) stalled: bool,
    /// When it stalled, while it is stalled.
    pub(super) stalled_at: Option<Instant>,
    /// Pacer tokens, bytes, as of `tokens_at`.
    tokens: f64,
    tokens_at: Option<Instant>,
    /// A declared rate it never sends above, bytes per second.
    rate_cap: Option<u64>,
    pub(super) stats: PathStats,
}

impl PathSender {
    pub(super) fn new(config: &BbrConfig, mtu: u16, seed: u64) -> Self {
        PathSender {
            seed,
            mtu,
            config: config.clone(),
            cc: Bbr::new(config, mtu, seed),
            next_pseq: 0,
            sent: VecDeque::new(),
            largest_acked: None,
            rtt: Rtt::default(),
            probe_rtt: None,
            in_flight: 0,
            last_progress: None,
            stalled: false,
            stalled_at: None,
            tokens: 0.0,
            tokens_at: None,
            rate_cap: None,
            stats: PathStats::default(),
        }
    }

    /// Starts the path over (it came back after a stall): a new
    /// controller in STARTUP, nothing in flight.
    pub(super) fn restart(&mut self) {
        self.seed = self.seed.wrapping_mul(6364136223846793005).wrapping_add(1);
        self.cc = Bbr::new(&self.config, self.mtu, self.seed);
        self.cc.set_rate_cap(self.rate_cap);
        self.sent.clear();
        self.largest_acked = None;
        self.rtt = Rtt::default();
        self.in_flight = 0;
        self.last_progress = None;
        self.stalled = false;
        self.stalled_at = None;
        self.tokens_at = None;
    }

    pub(super) fn set_rate_cap(&mut self, cap: Option<u64>) {
        if cap == self.rate_cap {
            return;
        }
        self.rate_cap = cap;
        self.cc.set_rate_cap(cap);
    }

    pub(super) fn set_probe_rtt(&mut self, rtt: Duration) {
        self.probe_rtt = Some(rtt);
    }

    /// The smoothed round trip, or the probes' before the first ack.
    pub(super) fn srtt(&self) -> Option<Duration> {
        self.rtt.smoothed.or(self.probe_rtt)
    }

    /// The path's one-way delay as far as the sender can tell: half its
    /// least round trip, plus all of the queueing its smoothed round trip
    /// shows beyond that (a bulk sender's queue is on its way out, not on
    /// the acks' way back).
    pub(super) fn one_way(&self) -> Duration {
        let Some(srtt) = self.srtt() else {
            return Duration::from_millis(25);
        };
        let least = self.cc.min_rtt().unwrap_or(srtt).min(srtt);
        srtt - least / 2
    }

    pub(super) fn window(&self) -> u64 {
        self.cc.congestion_window()
    }

    /// Bytes per second: the controller's rate, or before it has one its
    /// window over the round trip, under the declared rate.
    pub(super) fn pacing_rate(&self) -> u64 {
        let rate = self.cc.pacing_rate_bytes().unwrap_or_else(|| {
            let rtt = self.srtt().unwrap_or(Duration::from_millis(50));
            (self.window() as f64 * 2.0 / rtt.as_secs_f64().max(1e-3)) as u64
        });
        self.rate_cap.map_or(rate, |cap| rate.min(cap)).max(1)
    }

    /// Whether `bytes` more fit the window.
    pub(super) fn has_room(&self, queued: u64, bytes: u64) -> bool {
        !self.stalled && self.in_flight + queued + bytes <= self.window()
    }

    fn burst(&self) -> f64 {
        let rate = self.pacing_rate() as f64;
        (rate * PACER_BURST.as_secs_f64()).max(2.0 * f64::from(self.mtu))
    }

    /// Pacer tokens at `now`.
    fn tokens(&self, now: Instant) -> f64 {
        let rate = self.pacing_rate() as f64;
        match self.tokens_at {
            None => self.burst(),
            Some(at) => {
                let refill = rate * now.saturating_duration_since(at).as_secs_f64();
                (self.tokens + refill).min(self.burst())
            }
        }
    }

    /// When the pacer lets `bytes` go: `now` or later.
    pub(super) fn release_at(&self, now: Instant, bytes: u64) -> Instant {
        let missing = bytes as f64 - self.tokens(now);
        if missing <= 0.0 {
            return now;
        }
        now + Duration::from_secs_f64(missing / self.pacing_rate() as f64)
    }

    /// The pseq the next datagram sent gets.
    pub(super) fn next_pseq(&self) -> u32 {
        self.next_pseq
    }

    /// Sends a datagram now; its pseq.
    pub(super) fn send(&mut self, now: Instant, sent: Sent) -> u32 {
        self.tokens = self.tokens(now) - sent.bytes as f64;
        self.tokens_at = Some(now);
        let pseq = self.next_pseq;
        self.next_pseq = pseq.wrapping_add(1);
        self.cc.handle_sent(now, sent.bytes);
        self.in_flight += sent.bytes;
        self.stats.sent += 1;
        self.stats.sent_bytes += sent.bytes;
        if self.in_flight == sent.bytes {
            // Nothing was in flight: silence before now was not a stall.
            self.last_progress = Some(now);
        }
        self.sent.push_back((pseq, sent));
        pseq
    }

    fn index(&self, pseq: u32) -> Option<usize> {
        let &(front, _) = self.sent.front()?;
        let index = pseq.wrapping_sub(front) as usize;
        (index < self.sent.len()).then_some(index)
    }

    /// Takes an ack of this path; `app_limited` when the sender had
    /// nothing more to send.
    pub(super) fn handle_ack(&mut self, now: Instant, ack: &AckRepr, app_limited: bool) {
        let mut newest: Option<(u32, Instant)> = None;
        for pseq in ack.acked() {
            let Some(index) = self.index(pseq) else {
                continue;
            };
            let (_, sent) = &mut self.sent[index];
            if sent.fate != Fate::InFlight {
                continue;
            }
            sent.fate = Fate::Acked;
            self.in_flight -= sent.bytes;
            self.stats.acked += 1;
            self.cc.handle_ack(now, sent.sent_at, sent.bytes);
            if newest.is_none_or(|(p, _)| (pseq.wrapping_sub(p) as i32) > 0) {
                newest = Some((pseq, sent.sent_at));
            }
        }
        let Some((largest, sent_at)) = newest else {
            return;
        };
        self.last_progress = Some(now);
        if self
            .largest_acked
            .is_none_or(|l| (largest.wrapping_sub(l) as i32) > 0)
        {
            self.largest_acked = Some(largest);
            let delay = Duration::from_micros(u64::from(ack.ack_delay_us()));
            let rtt = now.saturating_duration_since(sent_at);
            self.rtt.update(if rtt > delay { rtt - delay } else { rtt });
        }
        self.detect_losses(now);
        self.cc.handle_end_acks(now, self.in_flight, app_limited);
        self.forget_resolved();
    }

    /// Declares lost what the thresholds say is (after an ack, or when
    /// the loss timer fires).
    pub(super) fn detect_losses(&mut self, now: Instant) {
        let Some(largest) = self.largest_acked else {
            return;
        };
        let delay = self.loss_delay();
        for (pseq, sent) in &mut self.sent {
            let behind = largest.wrapping_sub(*pseq) as i32;
            if behind <= 0 {
                break;
            }
            if sent.fate != Fate::InFlight {
                continue;
            }
            if behind as u32 >= PACKET_THRESHOLD || sent.sent_at + delay <= now {
                sent.fate = Fate::Lost;
                self.in_flight -= sent.bytes;
                self.stats.lost += 1;
                self.cc.handle_loss(now, sent.sent_at, sent.bytes, false);
            }
        }
    }

    fn loss_delay(&self) -> Duration {
        let rtt = self.rtt.smoothed.unwrap_or_default().max(self.rtt.latest);
        (rtt * 9 / 8).max(MIN_LOSS_DELAY)
    }

    fn forget_resolved(&mut self) {
        while self
            .sent
            .front()
            .is_some_and(|(_, s)| s.fate != Fate::InFlight)
        {
            self.sent.pop_front();
        }
    }

    /// When the time threshold declares the oldest datagram behind the
    /// largest acknowledged lost.
    pub(super) fn loss_time(&self) -> Option<Instant> {
        let largest = self.largest_acked?;
        let delay = self.loss_delay();
        self.sent
            .iter()
            .take_while(|(pseq, _)| (largest.wrapping_sub(*pseq) as i32) > 0)
            .find(|(_, s)| s.fate == Fate::InFlight)
            .map(|(_, s)| s.sent_at + delay)
    }

    /// When the path stalls if no ack comes, while something waits.
    pub(super) fn stall_time(&self) -> Option<Instant> {
        if self.stalled {
            return None;
        }
        let (_, oldest) = self.sent.iter().find(|(_, s)| s.fate == Fate::InFlight)?;
        let rtt = self.srtt()?;
        let variation = self.rtt.variation * 2;
        let silence = STALL_SILENCE.max(variation);
        let by_age = oldest.sent_at + rtt + STALL_SLACK;
        let by_silence = self.last_progress.unwrap_or(oldest.sent_at) + silence;
        Some(by_age.max(by_silence))
    }

    /// Marks the path stalled and hands back what it had in flight, oldest
    /// first, to send on other paths.
    pub(super) fn stall(&mut self, now: Instant) -> Vec<Sent> {
        self.stalled = true;
        self.stalled_at = Some(now);
        self.stats.stalls += 1;
        self.in_flight = 0;
        let unacked = self
            .sent
            .drain(..)
            .map(|(_, s)| s)
            .filter(|s| s.fate == Fate::InFlight)
            .collect();
        self.largest_acked = None;
        unacked
    }
}

impl Sent {
    pub(super) fn new(
        gseq: u32,
        bytes: u64,
        now: Instant,
        hold_exempt: bool,
        inner: Vec<u8>,
    ) -> Self {
        Sent {
            gseq,
            bytes,
            sent_at: now,
            hold_exempt,
            inner,
            fate: Fate::InFlight,
        }
    }
}
