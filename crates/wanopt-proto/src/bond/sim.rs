//! Two links on a virtual clock for the bond's tests: a sender and a
//! receiver of a bond, each link a FIFO bottleneck (rate, byte-limited
//! queue, one-way delay, random loss, cut and restored on cue) charged for
//! every byte of a datagram and its IP and UDP headers, acks back on the
//! same link at its delay, and above the bond a greedy source that keeps
//! as much in flight as the bond's window allows, as the QUIC connection
//! does.

use std::collections::{BTreeMap, VecDeque};
use std::time::{Duration, Instant};

use wanopt_cc::BbrConfig;

use super::path::IP_UDP_HEADERS;
use super::receiver::BondReceiver;
use super::sender::BondSender;
use super::wire::{Ack, AckRepr};
use crate::path::{PathId, PathSet};

/// The source's datagrams (a full QUIC packet's payload).
pub(super) const DATAGRAM: usize = 1200;
/// The source fills queues for this long beyond the paths' windows.
const WINDOW_EXTRA: Duration = Duration::from_millis(10);
/// The source paces at the bond's rate in bursts of at most this (quinn's
/// pacer with the bond's controller).
const SOURCE_BURST: Duration = Duration::from_millis(16);

/// One link.
#[derive(Debug, Clone, Copy)]
pub(super) struct Link {
    pub(super) rate_bps: u64,
    pub(super) one_way: Duration,
    pub(super) queue_bytes: u64,
    /// Random loss after the bottleneck, parts per million.
    pub(super) loss_ppm: u32,
    /// Cut (both ways) from the first instant to the second, from the
    /// start.
    pub(super) cut: Option<(Duration, Duration)>,
}

impl Link {
    pub(super) fn new(rate_mbit: u64, rtt_ms: u64) -> Self {
        let rate_bps = rate_mbit * 1_000_000;
        let one_way = Duration::from_millis(rtt_ms / 2);
        Link {
            rate_bps,
            one_way,
            // One BDP, as the lab's `--queue 1bdp`.
            queue_bytes: rate_bps / 8 * rtt_ms / 1000,
            loss_ppm: 0,
            cut: None,
        }
    }
}

/// A link's state in a run.
struct Wire {
    link: Link,
    /// When the bottleneck is free.
    busy_until: Instant,
    /// Datagrams at or past the bottleneck: (arrival at the far end,
    /// bytes, dropped at random).
    forward: VecDeque<(Instant, Vec<u8>, bool)>,
    /// Acks on their way back.
    back: VecDeque<(Instant, AckRepr)>,
    /// Wire bytes each 100 ms window carried out of the bottleneck.
    windows: BTreeMap<u64, u64>,
}

impl Wire {
    fn cut(&self, t: Duration) -> bool {
        self.link.cut.is_some_and(|(from, to)| t >= from && t < to)
    }

    fn queued_bytes(&self, now: Instant) -> u64 {
        let backlog = self.busy_until.saturating_duration_since(now).as_secs_f64();
        (backlog * self.link.rate_bps as f64 / 8.0) as u64
    }
}

/// What a run measured.
#[derive(Debug)]
pub(super) struct Outcome {
    /// Datagram bytes handed up per second over the second half.
    pub(super) goodput_bps: f64,
    /// Datagrams the source gave the bond, and the distinct ones handed up.
    pub(super) submitted: u64,
    /// Datagrams the bond took that QUIC would call lost (missing three
    /// behind the newest handed up).
    pub(super) quic_lost: u64,
    /// Datagrams the bond refused (no room anywhere): lost to QUIC.
    pub(super) refused: u64,
    pub(super) delivered: u64,
    /// Datagrams handed up twice.
    pub(super) twice: u64,
    /// Datagrams lost at random on the links.
    pub(super) random_losses: u64,
    /// The reorder buffer's late arrivals (QUIC's spurious losses).
    pub(super) late: u64,
    /// The reorder buffer's counts.
    pub(super) reorder: super::reorder::ReorderStats,
    /// The receiver's hold time at the end.
    pub(super) hold: Duration,
    /// The sender's counts, and each path's.
    pub(super) sender: super::sender::BondStats,
    pub(super) paths: [super::path::PathStats; 2],
    /// The longest time nothing was handed up after the first datagram.
    pub(super) longest_gap: Duration,
    /// Wire bit/s of each link's busiest 100 ms window.
    pub(super) peak_bps: [f64; 2],
    /// Bits per second each link carried over the second half.
    pub(super) link_bps: [f64; 2],
    /// Datagram bytes handed up in each 100 ms from the start.
    pub(super) delivered_by_tenth: Vec<u64>,
}

impl Outcome {
    /// Datagram bytes handed up per second from `from` to `to` (from the
    /// start).
    pub(super) fn goodput_between(&self, from: Duration, to: Duration) -> f64 {
        let (a, b) = (
            from.as_millis() as usize / 100,
            to.as_millis() as usize / 100,
        );
        let bytes: u64 = self.delivered_by_tenth[a..b].iter().sum();
        bytes as f64 * 8.0 / (to - from).as_secs_f64()
    }
}

fn rng(state: &mut u64) -> u64 {
    // xorshift64*
    *state ^= *state >> 12;
    *state ^= *state << 25;
    *state ^= *state >> 27;
    state.wrapping_mul(0x2545_F491_4F6C_DD1D)
}

/// Runs a greedy transfer over `links` for `seconds`.
pub(super) fn run(links: [Link; 2], seconds: u64, seed: u64) -> Outcome {
    run_with(links, seconds, seed, |_, _| {})
}

/// [`run`], calling `each` with the time since the start and the sender at
/// every step (to declare rates, or change paths' states).
pub(super) fn run_with(
    links: [Link; 2],
    seconds: u64,
    seed: u64,
    mut each: impl FnMut(Duration, &mut BondSender),
) -> Outcome {
    let mut sim = Sim::new(links, seconds, seed);
    let step = Duration::from_micros(50);
    let end = sim.t0 + Duration::from_secs(seconds);
    let mut now = sim.t0;
    while now < end {
        each(now - sim.t0, &mut sim.sender);
        sim.probe(now);
        sim.source(now);
        sim.transmit(now);
        sim.receive(now);
        sim.hand_up(now);
        sim.take_acks(now);
        now += step;
    }
    sim.finish(end)
}

/// A run's state.
struct Sim {
    t0: Instant,
    half: Instant,
    random: u64,
    paths: [PathId; 2],
    sender: BondSender,
    receiver: BondReceiver<Vec<u8>>,
    wires: [Wire; 2],
    /// The source: the next datagram's number, those in flight (by
    /// number, their bytes) and their bytes, its pacer's tokens.
    next_id: u64,
    in_flight: BTreeMap<u64, u64>,
    in_flight_bytes: u64,
    tokens: f64,
    tokens_at: Instant,
    /// The newest datagram handed up, those handed up, when the last was.
    max_up: u64,
    handed_up: BTreeMap<u64, ()>,
    last_up: Option<Instant>,
    second_half_bytes: u64,
    outcome: Outcome,
}

impl Sim {
    fn new(links: [Link; 2], seconds: u64, seed: u64) -> Sim {
        let t0 = Instant::now();
        let paths = [PathId::new(1).unwrap(), PathId::new(2).unwrap()];
        let mut sender = BondSender::new(t0, BbrConfig::default(), 1500, seed);
        let mut receiver = BondReceiver::new(t0);
        let wires = links.map(|link| Wire {
            link,
            busy_until: t0,
            forward: VecDeque::new(),
            back: VecDeque::new(),
            windows: BTreeMap::new(),
        });
        let mut all = PathSet::EMPTY;
        for (path, wire) in paths.iter().zip(&wires) {
            sender.add_path(*path);
            sender.set_up(t0, *path, true);
            sender.set_probe_rtt(*path, wire.link.one_way * 2);
            all.insert(*path);
        }
        receiver.set_up(t0, all);
        Sim {
            t0,
            half: t0 + Duration::from_secs(seconds) / 2,
            random: seed | 1,
            paths,
            sender,
            receiver,
            wires,
            next_id: 0,
            in_flight: BTreeMap::new(),
            in_flight_bytes: 0,
            tokens: 0.0,
            tokens_at: t0,
            max_up: 0,
            handed_up: BTreeMap::new(),
            last_up: None,
            second_half_bytes: 0,
            outcome: Outcome {
                goodput_bps: 0.0,
                submitted: 0,
                refused: 0,
                quic_lost: 0,
                delivered: 0,
                twice: 0,
                random_losses: 0,
                late: 0,
                reorder: Default::default(),
                hold: Duration::ZERO,
                sender: Default::default(),
                paths: Default::default(),
                longest_gap: Duration::ZERO,
                peak_bps: [0.0; 2],
                link_bps: [0.0; 2],
                delivered_by_tenth: vec![0; seconds as usize * 10],
            },
        }
    }

    /// The paths' probes: a cut link is down from 300 ms after the cut to
    /// 300 ms after it returns.
    fn probe(&mut self, now: Instant) {
        let t = now - self.t0;
        let mut up = PathSet::EMPTY;
        for (i, wire) in self.wires.iter().enumerate() {
            let down = wire.cut(t.saturating_sub(Duration::from_millis(300)));
            self.sender.set_up(now, self.paths[i], !down);
            if !down {
                up.insert(self.paths[i]);
            }
        }
        self.receiver.set_up(now, up);
    }

    /// The source, paced as quinn paces at the bond's rate, as much in
    /// flight as the bond's window.
    fn source(&mut self, now: Instant) {
        let rate = self.sender.pacing_rate() as f64;
        let elapsed = now.saturating_duration_since(self.tokens_at).as_secs_f64();
        self.tokens = (self.tokens + rate * elapsed).min(rate * SOURCE_BURST.as_secs_f64());
        self.tokens_at = now;
        while self.in_flight_bytes < self.sender.window(WINDOW_EXTRA)
            && self.tokens >= DATAGRAM as f64
        {
            let mut inner = self.next_id.to_be_bytes().to_vec();
            inner.resize(DATAGRAM, 0);
            self.tokens -= DATAGRAM as f64;
            self.outcome.submitted += 1;
            if self.sender.handle_datagram(now, inner).is_err() {
                // Lost to QUIC: it sends the data again later.
                self.outcome.refused += 1;
            } else {
                self.in_flight.insert(self.next_id, DATAGRAM as u64);
                self.in_flight_bytes += DATAGRAM as u64;
            }
            self.next_id += 1;
        }
    }

    /// The sender's timers and pacers, into the links' bottlenecks.
    fn transmit(&mut self, now: Instant) {
        let t = now - self.t0;
        self.sender.handle_timeout(now);
        while let Some((path, datagram)) = self.sender.poll_transmit(now) {
            let wire = &mut self.wires[path.index()];
            if wire.cut(t) {
                continue;
            }
            let bytes = (datagram.len() + IP_UDP_HEADERS) as u64;
            if wire.queued_bytes(now) + bytes > wire.link.queue_bytes {
                continue;
            }
            let start = wire.busy_until.max(now);
            let serialise = Duration::from_secs_f64(bytes as f64 * 8.0 / wire.link.rate_bps as f64);
            wire.busy_until = start + serialise;
            let window = (wire.busy_until - self.t0).as_millis() as u64 / 100;
            *wire.windows.entry(window).or_default() += bytes;
            let lost = u64::from(wire.link.loss_ppm) > rng(&mut self.random) % 1_000_000;
            if lost {
                self.outcome.random_losses += 1;
            }
            wire.forward
                .push_back((wire.busy_until + wire.link.one_way, datagram, lost));
        }
    }

    /// Arrivals at the receiver, and its acks onto the links.
    fn receive(&mut self, now: Instant) {
        let t = now - self.t0;
        for (i, wire) in self.wires.iter_mut().enumerate() {
            while wire.forward.front().is_some_and(|(at, _, _)| *at <= now) {
                let (_, datagram, lost) = wire.forward.pop_front().unwrap();
                if lost || wire.cut(t) {
                    continue;
                }
                self.receiver
                    .handle_data(now, self.paths[i], &datagram, <[u8]>::to_vec)
                    .unwrap();
            }
        }
        self.receiver.handle_timeout(now);
        while let Some(ack) = self.receiver.poll_ack(now) {
            let wire = &mut self.wires[ack.path.index()];
            wire.back.push_back((now + wire.link.one_way, ack));
        }
    }

    /// What the receiver hands up, counted; what QUIC would call lost
    /// forgotten by the source.
    fn hand_up(&mut self, now: Instant) {
        while let Some(inner) = self.receiver.poll_release() {
            let id = u64::from_be_bytes(inner[..8].try_into().unwrap());
            if self.handed_up.insert(id, ()).is_some() {
                self.outcome.twice += 1;
                continue;
            }
            if let Some(bytes) = self.in_flight.remove(&id) {
                self.in_flight_bytes -= bytes;
            }
            self.max_up = self.max_up.max(id);
            if let Some(last) = self.last_up {
                self.outcome.longest_gap = self.outcome.longest_gap.max(now - last);
            }
            self.last_up = Some(now);
            let tenth = (now - self.t0).as_millis() as usize / 100;
            if let Some(bytes) = self.outcome.delivered_by_tenth.get_mut(tenth) {
                *bytes += inner.len() as u64;
            }
            if now >= self.half {
                self.second_half_bytes += inner.len() as u64;
            }
        }
        // What is missing three datagrams behind the newest handed up is
        // lost to QUIC (RFC 9002's packet threshold): it sends that data
        // again in new datagrams, so the source forgets it.
        let kept = self.in_flight.split_off(&self.max_up.saturating_sub(3));
        self.in_flight_bytes -= self.in_flight.values().sum::<u64>();
        self.outcome.quic_lost += self.in_flight.len() as u64;
        self.in_flight = kept;
    }

    /// Acks at the sender (their bytes checked as the layer does).
    fn take_acks(&mut self, now: Instant) {
        let t = now - self.t0;
        for wire in self.wires.iter_mut() {
            while wire.back.front().is_some_and(|(at, _)| *at <= now) {
                let (_, ack) = wire.back.pop_front().unwrap();
                if wire.cut(t) {
                    continue;
                }
                let bytes = ack.emit();
                let parsed = AckRepr::parse(&Ack::new_checked(&bytes[..]).unwrap()).unwrap();
                self.sender.handle_ack(now, &parsed);
            }
        }
    }

    fn finish(mut self, end: Instant) -> Outcome {
        let seconds_half = (end - self.half).as_secs_f64();
        let outcome = &mut self.outcome;
        outcome.delivered = self.handed_up.len() as u64;
        outcome.goodput_bps = self.second_half_bytes as f64 * 8.0 / seconds_half;
        outcome.reorder = self.receiver.reorder_stats();
        outcome.late = outcome.reorder.late;
        outcome.hold = self.receiver.hold();
        outcome.sender = self.sender.stats();
        outcome.paths = self
            .paths
            .map(|p| self.sender.path_stats(p).unwrap_or_default());
        for (i, wire) in self.wires.iter().enumerate() {
            let peak = wire.windows.values().max().copied().unwrap_or(0);
            outcome.peak_bps[i] = peak as f64 * 8.0 / 0.1;
            let first = (self.half - self.t0).as_millis() as u64 / 100;
            let carried: u64 = wire.windows.range(first..).map(|(_, b)| b).sum();
            outcome.link_bps[i] = carried as f64 * 8.0 / seconds_half;
        }
        self.outcome
    }
}
