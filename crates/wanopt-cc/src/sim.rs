//! A simulated bottleneck on a virtual clock for the controller's tests: a
//! sender paced and windowed as the vendored quinn-proto does it, a FIFO
//! bottleneck with a byte-limited queue (a fixed rate, or a capacity that
//! follows a recorded trace, served as the lab's emulator and Mahimahi serve
//! it), a propagation delay, random loss, packet-threshold loss detection
//! and a receiver that acks every packet (optionally in bursts, as a busy
//! receiver does).

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap, VecDeque};

use wanopt_netem::trace::TraceServer;
use wanopt_netem::{DeliveryTrace, LogHistogram};

use super::*;

/// The size of every simulated packet.
pub(super) const PACKET: u64 = 1400;

/// One path and workload.
#[derive(Clone, Copy, Debug)]
pub(super) struct Path {
    /// Bottleneck rate, bits per second.
    pub(super) rate_bps: u64,
    /// Round-trip propagation delay.
    pub(super) rtt: Duration,
    /// Bottleneck queue, in bytes.
    pub(super) queue: u64,
    /// Random loss after the bottleneck, parts per million.
    pub(super) loss_ppm: u64,
    /// Acks are released in bursts every this often (zero: at once).
    pub(super) ack_burst: Duration,
    /// The sender's event loop stalls (a busy CPU): on average once per this
    /// many milliseconds (zero: never), for 1 to `stall_max_ms` ms, during
    /// which it neither sends nor processes acks.
    pub(super) stall_every_ms: u64,
    pub(super) stall_max_ms: u64,
    /// Acks reach the controller up to this much late, in order (a
    /// receiver and an event loop that do not run on time).
    pub(super) ack_jitter: Duration,
    /// Packets lost at random are rebuilt by the receiver's FEC:
    /// acknowledged on time and told to the controller through its
    /// repaired counter.
    pub(super) repair: bool,
    /// The same for packets dropped at the queue (the repairs taking
    /// their place at the bottleneck).
    pub(super) repair_queue: bool,
    /// The bottleneck's capacity follows this trace (from the start of
    /// the run) instead of `rate_bps`.
    pub(super) trace: Option<&'static DeliveryTrace>,
}

impl Path {
    pub(super) fn new(rate_mbit: u64, rtt_ms: u64) -> Self {
        let rate_bps = rate_mbit * 1_000_000;
        let rtt = Duration::from_millis(rtt_ms);
        Self {
            rate_bps,
            rtt,
            // One BDP, at least 64 packets (as the lab's `--queue 1bdp`).
            queue: (mul_rate(rate_bps / 8, rtt)).max(64 * PACKET),
            loss_ppm: 0,
            ack_burst: Duration::ZERO,
            stall_every_ms: 0,
            stall_max_ms: 0,
            ack_jitter: Duration::ZERO,
            repair: false,
            repair_queue: false,
            trace: None,
        }
    }

    /// A path whose capacity follows `trace`, behind a queue of
    /// `queue` bytes.
    pub(super) fn traced(trace: DeliveryTrace, rtt_ms: u64, queue: u64) -> Self {
        let trace: &'static DeliveryTrace = Box::leak(Box::new(trace));
        Self {
            rate_bps: trace.mean_rate().0,
            queue,
            trace: Some(trace),
            ..Path::new(0, rtt_ms)
        }
    }

    pub(super) fn bytes_per_sec(&self) -> u64 {
        self.rate_bps / 8
    }
}

/// What a run measured over its measurement window.
#[derive(Debug)]
pub(super) struct Outcome {
    /// Delivered bytes per second (goodput) over the window.
    pub(super) goodput: f64,
    /// Packets dropped at the queue / packets sent, over the window.
    pub(super) queue_loss: f64,
    /// The same before the window (STARTUP's overshoot).
    pub(super) startup_queue_loss: f64,
    /// Mean queueing delay seen by packets entering the bottleneck.
    pub(super) mean_queue_delay: Duration,
    /// Packets by the nanoseconds they waited at the bottleneck.
    pub(super) queue_delays: LogHistogram,
}

pub(super) struct Sim {
    pub(super) path: Path,
    pub(super) bbr: Bbr,
    pub(super) t0: Instant,
    pub(super) now: Instant,
    /// Bottleneck busy until (serialization of everything queued).
    pub(super) busy_until: Instant,
    /// Acks in flight: (arrival time at the sender, packet number).
    pub(super) acks: BinaryHeap<Reverse<(Instant, u64)>>,
    /// Outstanding packets: number -> (send time, bytes).
    pub(super) outstanding: BTreeMap<u64, (Instant, u64)>,
    pub(super) in_flight: u64,
    pub(super) next_pn: u64,
    pub(super) tokens: u64,
    pub(super) tokens_at: Instant,
    pub(super) app_limited: bool,
    pub(super) last_ack_at: Instant,
    /// When the last packet was acknowledged (or a probe timeout fired).
    pub(super) last_progress: Instant,
    /// Smoothed RTT of the acknowledged packets (for the probe timeout).
    pub(super) srtt: Duration,
    pub(super) rng: u64,
    pub(super) sent_packets: u64,
    pub(super) queue_drops: u64,
    pub(super) delivered: u64,
    pub(super) queue_delay_sum: Duration,
    pub(super) queue_delay_count: u64,
    /// Packets the receiver rebuilt (acknowledged, told as repaired).
    pub(super) repaired: std::collections::BTreeSet<u64>,
    /// Packets of a traced path the network dropped, not yet declared lost.
    pub(super) dropped: std::collections::BTreeSet<u64>,
    /// The server of a traced bottleneck.
    pub(super) trace_server: Option<TraceServer>,
    /// Departures and sizes of the packets at a traced bottleneck.
    pub(super) backlog: VecDeque<(Instant, u64)>,
    pub(super) backlog_bytes: u64,
    /// Packets by the nanoseconds they waited at the bottleneck.
    pub(super) queue_delays: LogHistogram,
    /// The highest pacing rate the controller set so far, bytes per second.
    pub(super) peak_pacing_rate: u64,
}

impl Sim {
    pub(super) fn new(path: Path) -> Self {
        Sim::with_moving(path, MovingPolicy::Auto)
    }

    /// A simulation whose controller bounds its window to a moving
    /// bottleneck as `moving` says.
    pub(super) fn with_moving(path: Path, moving: MovingPolicy) -> Self {
        let t0 = Instant::now();
        let config = BbrConfig {
            moving,
            ..BbrConfig::default()
        };
        Self {
            path,
            bbr: Bbr::new(&config, PACKET as u16, 7),
            t0,
            now: t0,
            busy_until: t0,
            acks: BinaryHeap::new(),
            outstanding: BTreeMap::new(),
            in_flight: 0,
            next_pn: 0,
            tokens: 0,
            tokens_at: t0,
            app_limited: false,
            last_ack_at: t0,
            last_progress: t0,
            srtt: path.rtt,
            rng: 0x9e37_79b9_7f4a_7c15,
            sent_packets: 0,
            queue_drops: 0,
            delivered: 0,
            queue_delay_sum: Duration::ZERO,
            queue_delay_count: 0,
            repaired: std::collections::BTreeSet::new(),
            dropped: std::collections::BTreeSet::new(),
            trace_server: path.trace.map(|trace| TraceServer::new(trace.clone())),
            backlog: VecDeque::new(),
            backlog_bytes: 0,
            queue_delays: LogHistogram::default(),
            peak_pacing_rate: 0,
        }
    }

    pub(super) fn random_ppm(&mut self) -> u64 {
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        self.rng % 1_000_000
    }

    /// Runs until `until` (from the start), sending at most `limit_bps`
    /// (application limit; `None`: always data to send).
    pub(super) fn run(&mut self, until: Duration, limit_bps: Option<u64>) {
        let step = Duration::from_micros(25);
        let end = self.t0 + until;
        let mut app_budget: u64 = 0;
        let mut stalled_until = self.now;
        while self.now < end {
            self.now += step;
            if self.now < stalled_until {
                continue;
            }
            if self.path.stall_every_ms > 0 && self.random_ppm() < 25_000 / self.path.stall_every_ms
            {
                let ms = 1 + self.random_ppm() % self.path.stall_max_ms.max(1);
                stalled_until = self.now + Duration::from_millis(ms);
                continue;
            }
            self.deliver_acks();
            if let Some(limit) = limit_bps {
                app_budget = (app_budget + mul_rate(limit / 8, step)).min(64 * PACKET);
            }
            self.send(limit_bps.map(|_| &mut app_budget));
            let pacing = self.bbr.pacing_rate_bytes().unwrap_or(0);
            self.peak_pacing_rate = self.peak_pacing_rate.max(pacing);
        }
    }

    /// The pacer of the vendored quinn-proto (`delay_at_rate`): tokens at
    /// the pacing rate, kept for one RTT (at least 16 ms), or quinn's window
    /// pacing before the controller has a rate.
    fn refill(&mut self) {
        let rate = self.bbr.pacing_rate_bytes().unwrap_or_else(|| {
            mul_rate(self.bbr.congestion_window() * 5 / 4, Duration::from_secs(1)) * 3
        });
        let horizon = self.bbr.min_rtt().unwrap_or_default().max(PACER_BURST);
        let capacity = mul_rate(rate, horizon).max(10 * PACKET);
        let elapsed = self.now.saturating_duration_since(self.tokens_at);
        self.tokens = (self.tokens + mul_rate(rate, elapsed)).min(capacity);
        self.tokens_at = self.now;
    }

    fn send(&mut self, mut app_budget: Option<&mut u64>) {
        self.app_limited = false;
        let mut batch = 0;
        loop {
            if self.in_flight + PACKET >= self.bbr.congestion_window() {
                // Time held by the window banks no tokens (quinn-proto
                // change 10).
                self.tokens_at = self.tokens_at.max(self.now - PACER_BURST);
                break;
            }
            self.refill();
            if self.tokens < PACKET {
                break;
            }
            if let Some(budget) = app_budget.as_deref_mut() {
                if *budget < PACKET {
                    self.app_limited = true;
                    break;
                }
                *budget -= PACKET;
            }
            self.tokens -= PACKET;
            self.transmit();
            batch += PACKET;
        }
        if batch > 0 {
            self.bbr.handle_sent(self.now, batch);
        }
    }

    fn transmit(&mut self) {
        let pn = self.next_pn;
        self.next_pn += 1;
        self.sent_packets += 1;
        self.in_flight += PACKET;
        self.outstanding.insert(pn, (self.now, PACKET));
        if self.trace_server.is_some() {
            self.transmit_traced(pn);
            return;
        }
        let start = self.busy_until.max(self.now);
        let backlog = mul_rate(self.path.bytes_per_sec(), start - self.now);
        if backlog + PACKET > self.path.queue {
            self.queue_drops += 1;
            if self.path.repair_queue {
                // Rebuilt from repairs, which crossed the bottleneck in
                // its stead: it costs the bottleneck's time all the same.
                let serialization =
                    Duration::from_nanos(PACKET * 8 * 1_000_000_000 / self.path.rate_bps);
                self.busy_until = start + serialization;
                self.repaired.insert(pn);
                self.acks
                    .push(Reverse((self.busy_until + self.path.rtt, pn)));
            }
            return;
        }
        self.queue_delay_sum += start - self.now;
        self.queue_delay_count += 1;
        self.queue_delays
            .record((start - self.now).as_nanos() as u64, 1);
        let serialization = Duration::from_nanos(PACKET * 8 * 1_000_000_000 / self.path.rate_bps);
        self.busy_until = start + serialization;
        if self.random_ppm() < self.path.loss_ppm {
            if self.path.repair {
                self.repaired.insert(pn);
                self.acks
                    .push(Reverse((self.busy_until + self.path.rtt, pn)));
            }
            return;
        }
        self.schedule_ack(pn, self.busy_until);
    }

    /// A packet through a bottleneck whose capacity follows the trace.
    fn transmit_traced(&mut self, pn: u64) {
        while let Some(&(departure, bytes)) = self.backlog.front() {
            if departure > self.now {
                break;
            }
            self.backlog.pop_front();
            self.backlog_bytes -= bytes;
        }
        if self.backlog_bytes + PACKET > self.path.queue {
            self.queue_drops += 1;
            self.dropped.insert(pn);
            return;
        }
        let now_ns = (self.now - self.t0).as_nanos() as u64;
        let Some(server) = self.trace_server.as_mut() else {
            return;
        };
        let departure = self.t0 + Duration::from_nanos(server.depart(now_ns, PACKET));
        self.backlog.push_back((departure, PACKET));
        self.backlog_bytes += PACKET;
        let wait = departure - self.now;
        self.queue_delay_sum += wait;
        self.queue_delay_count += 1;
        self.queue_delays.record(wait.as_nanos() as u64, 1);
        if self.random_ppm() < self.path.loss_ppm {
            self.dropped.insert(pn);
            return;
        }
        self.schedule_ack(pn, departure);
    }

    /// The ack of packet `pn`, which left the bottleneck at `departure`.
    fn schedule_ack(&mut self, pn: u64, departure: Instant) {
        let mut ack_at = departure + self.path.rtt;
        if !self.path.ack_burst.is_zero() {
            // The receiver releases its acks on a tick.
            let burst = self.path.ack_burst.as_nanos();
            let since = (ack_at - self.t0).as_nanos();
            let next = since.div_ceil(burst) * burst;
            ack_at = self.t0 + Duration::from_nanos(next as u64);
        }
        if !self.path.ack_jitter.is_zero() {
            let jitter = self.random_ppm() as u128 * self.path.ack_jitter.as_nanos() / 1_000_000;
            ack_at = (ack_at + Duration::from_nanos(jitter as u64)).max(self.last_ack_at);
            self.last_ack_at = ack_at;
        }
        self.acks.push(Reverse((ack_at, pn)));
    }

    fn deliver_acks(&mut self) {
        if self.path.trace.is_some()
            && !self.outstanding.is_empty()
            && self.now.saturating_duration_since(self.last_progress)
                > 3 * self.srtt.max(self.path.rtt) + Duration::from_millis(200)
        {
            // A probe timeout (RFC 9002 §6.2, simplified): no ack came for
            // a while, the probe's ack tells which packets the path
            // dropped (the last of a flight have no later ack to reveal
            // them), and those are declared lost; packets still queued
            // stay in flight. Only on traced paths, whose queues fill
            // through outages: the fixed paths' figures were set without it.
            let lost: Vec<u64> = std::mem::take(&mut self.dropped)
                .into_iter()
                .filter(|pn| self.outstanding.contains_key(pn))
                .collect();
            let mut bytes = 0;
            let mut newest = None;
            for pn in lost {
                if let Some((sent, size)) = self.outstanding.remove(&pn) {
                    bytes += size;
                    newest = newest.max(Some(sent));
                }
            }
            self.in_flight -= bytes;
            if let Some(sent) = newest {
                self.bbr.handle_loss(self.now, sent, bytes, false);
            }
            self.last_progress = self.now;
        }
        let mut any = false;
        let mut largest = None;
        while let Some(Reverse((at, pn))) = self.acks.peek().copied() {
            if at > self.now {
                break;
            }
            self.acks.pop();
            if let Some((sent, bytes)) = self.outstanding.remove(&pn) {
                if self.repaired.remove(&pn) {
                    self.bbr
                        .repaired()
                        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                }
                self.in_flight -= bytes;
                self.delivered += bytes;
                self.last_progress = self.now;
                self.srtt = (self.srtt * 7 + (self.now - sent)) / 8;
                self.bbr.handle_ack(self.now, sent, bytes);
                any = true;
                largest = largest.max(Some(pn));
            }
        }
        if let Some(largest) = largest {
            // Packet threshold 3 (RFC 9002 §6.1.1).
            let lost: Vec<u64> = self
                .outstanding
                .range(..largest.saturating_sub(2))
                .map(|(pn, _)| *pn)
                .collect();
            let mut lost_bytes = 0;
            let mut last_sent = None;
            for pn in lost {
                if let Some((sent, bytes)) = self.outstanding.remove(&pn) {
                    lost_bytes += bytes;
                    last_sent = Some(sent);
                }
            }
            if let Some(sent) = last_sent {
                self.in_flight -= lost_bytes;
                self.bbr.handle_loss(self.now, sent, lost_bytes, false);
            }
        }
        if any {
            self.bbr
                .handle_end_acks(self.now, self.in_flight, self.app_limited);
        }
    }

    /// Runs to `until`, measuring from `from`.
    pub(super) fn measure(&mut self, from: Duration, until: Duration) -> Outcome {
        self.run(from, None);
        let startup_queue_loss = self.queue_drops as f64 / self.sent_packets.max(1) as f64;
        let (drops_before, sent_before) = (self.queue_drops, self.sent_packets);
        let delivered_before = self.delivered;
        self.queue_delay_sum = Duration::ZERO;
        self.queue_delay_count = 0;
        self.queue_delays = LogHistogram::default();
        self.run(until, None);
        let seconds = (until - from).as_secs_f64();
        Outcome {
            goodput: (self.delivered - delivered_before) as f64 / seconds,
            queue_loss: (self.queue_drops - drops_before) as f64
                / (self.sent_packets - sent_before).max(1) as f64,
            startup_queue_loss,
            mean_queue_delay: self
                .queue_delay_sum
                .checked_div(self.queue_delay_count.max(1) as u32)
                .unwrap_or_default(),
            queue_delays: self.queue_delays.clone(),
        }
    }
}
