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
    let t0 = Instant::now();
    let end = t0 + Duration::from_secs(seconds);
    let half = t0 + Duration::from_secs(seconds) / 2;
    let mut random = seed | 1;
    let paths = [PathId::new(1).unwrap(), PathId::new(2).unwrap()];
    let mut sender = BondSender::new(t0, BbrConfig::default(), 1500, seed);
    let mut receiver: BondReceiver<Vec<u8>> = BondReceiver::new(t0);
    let mut wires = links.map(|link| Wire {
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
    let mut next_id = 0u64;
    let mut in_flight: BTreeMap<u64, u64> = BTreeMap::new();
    let mut in_flight_bytes = 0u64;
    let (mut tokens, mut tokens_at) = (0.0f64, t0);
    let mut max_up = 0u64;
    let mut outcome = Outcome {
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
    };
    let mut handed_up: BTreeMap<u64, ()> = BTreeMap::new();
    let mut second_half_bytes = 0u64;
    let mut last_up: Option<Instant> = None;
    let step = Duration::from_micros(50);
    let mut now = t0;
    while now < end {
        let t = now - t0;
        each(t, &mut sender);
        // Paths' probes: a cut link is down from 300 ms after the cut to
        // 300 ms after it returns.
        let mut up = PathSet::EMPTY;
        for (i, wire) in wires.iter().enumerate() {
            let down = wire.cut(t.saturating_sub(Duration::from_millis(300)));
            sender.set_up(now, paths[i], !down);
            if !down {
                up.insert(paths[i]);
            }
        }
        receiver.set_up(now, up);
        // The source, paced as quinn paces at the bond's rate.
        let rate = sender.pacing_rate() as f64;
        let elapsed = now.saturating_duration_since(tokens_at).as_secs_f64();
        tokens = (tokens + rate * elapsed).min(rate * SOURCE_BURST.as_secs_f64());
        tokens_at = now;
        while in_flight_bytes < sender.window(WINDOW_EXTRA) && tokens >= DATAGRAM as f64 {
            let mut inner = next_id.to_be_bytes().to_vec();
            inner.resize(DATAGRAM, 0);
            tokens -= DATAGRAM as f64;
            outcome.submitted += 1;
            if sender.handle_datagram(now, inner).is_err() {
                // Lost to QUIC: it sends the data again later.
                outcome.refused += 1;
            } else {
                in_flight.insert(next_id, DATAGRAM as u64);
                in_flight_bytes += DATAGRAM as u64;
            }
            next_id += 1;
        }
        // The sender's timers and pacers.
        sender.handle_timeout(now);
        while let Some((path, datagram)) = sender.poll_transmit(now) {
            let wire = &mut wires[path.index()];
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
            let window = (wire.busy_until - t0).as_millis() as u64 / 100;
            *wire.windows.entry(window).or_default() += bytes;
            let lost = u64::from(wire.link.loss_ppm) > rng(&mut random) % 1_000_000;
            if lost {
                outcome.random_losses += 1;
            }
            wire.forward
                .push_back((wire.busy_until + wire.link.one_way, datagram, lost));
        }
        // Arrivals at the receiver, and its acks.
        for (i, wire) in wires.iter_mut().enumerate() {
            while wire.forward.front().is_some_and(|(at, _, _)| *at <= now) {
                let (_, datagram, lost) = wire.forward.pop_front().unwrap();
                if lost || wire.cut(t) {
                    continue;
                }
                receiver
                    .handle_data(now, paths[i], &datagram, <[u8]>::to_vec)
                    .unwrap();
            }
        }
        receiver.handle_timeout(now);
        while let Some(ack) = receiver.poll_ack(now) {
            let wire = &mut wires[ack.path.index()];
            wire.back.push_back((now + wire.link.one_way, ack));
        }
        while let Some(inner) = receiver.poll_release() {
            let id = u64::from_be_bytes(inner[..8].try_into().unwrap());
            if handed_up.insert(id, ()).is_some() {
                outcome.twice += 1;
                continue;
            }
            if let Some(bytes) = in_flight.remove(&id) {
                in_flight_bytes -= bytes;
            }
            max_up = max_up.max(id);
            if let Some(last) = last_up {
                outcome.longest_gap = outcome.longest_gap.max(now - last);
            }
            last_up = Some(now);
            let tenth = (now - t0).as_millis() as usize / 100;
            if let Some(bytes) = outcome.delivered_by_tenth.get_mut(tenth) {
                *bytes += inner.len() as u64;
            }
            if now >= half {
                second_half_bytes += inner.len() as u64;
            }
        }
        // What is missing three datagrams behind the newest handed up is
        // lost to QUIC (RFC 9002's packet threshold): it sends that data
        // again in new datagrams, so the source forgets it.
        let kept = in_flight.split_off(&max_up.saturating_sub(3));
        in_flight_bytes -= in_flight.values().sum::<u64>();
        outcome.quic_lost += in_flight.len() as u64;
        in_flight = kept;
        // Acks at the sender (the ack's bytes checked as the layer does).
        for wire in wires.iter_mut() {
            while wire.back.front().is_some_and(|(at, _)| *at <= now) {
                let (_, ack) = wire.back.pop_front().unwrap();
                if wire.cut(t) {
                    continue;
                }
                let bytes = ack.emit();
                let parsed = AckRepr::parse(&Ack::new_checked(&bytes[..]).unwrap()).unwrap();
                sender.handle_ack(now, &parsed);
            }
        }
        now += step;
    }
    let seconds_half = (end - half).as_secs_f64();
    outcome.delivered = handed_up.len() as u64;
    outcome.goodput_bps = second_half_bytes as f64 * 8.0 / seconds_half;
    outcome.late = receiver.reorder_stats().late;
    outcome.reorder = receiver.reorder_stats();
    outcome.hold = receiver.hold();
    outcome.sender = sender.stats();
    outcome.paths = paths.map(|p| sender.path_stats(p).unwrap_or_default());
    for (i, wire) in wires.iter().enumerate() {
        let peak = wire.windows.values().max().copied().unwrap_or(0);
        outcome.peak_bps[i] = peak as f64 * 8.0 / 0.1;
        let first = (half - t0).as_millis() as u64 / 100;
        let carried: u64 = wire.windows.range(first..).map(|(_, b)| b).sum();
        outcome.link_bps[i] = carried as f64 * 8.0 / seconds_half;
    }
    outcome
}
