//! The sending side of a bond: which path each datagram takes, each path's
//! pacer and controller, and what a stalled path had in flight sent again
//! on the others.
//!
//! A datagram goes to the path where it would arrive first (the earliest
//! completion first of ECF and of Linux MPTCP's scheduler): among the paths
//! with room in their window, the least of its queue and itself at the
//! path's pacing rate plus half the path's round trip. The fast path takes
//! everything until its queue is worth the paths' difference in delay, so
//! a short transfer never waits for the slow path, and a long one fills
//! both.
//!
//! Each path is paced at its own controller's rate (under a declared rate,
//! if any) and counts its own losses (`bond/path.rs`). A path that stops
//! acknowledging (30 ms, or twice its RTT variation if longer, with data
//! waiting) or that its probes call down stalls: what it had in flight and
//! queued goes at once to the other paths, ahead of new data, with the same
//! `gseq` (the receiver drops a second copy), so the QUIC connection above
//! loses nothing to a cut link. A stalled path starts over (a new
//! controller in STARTUP) when it acknowledges again, or when its probes
//! call it up [`REJOIN_HOLD`] after it stalled.
//!
//! Real-time datagrams skip the choice: the caller names their paths (a
//! class's SLA, copies on several), they go ahead of bulk data and the
//! receiver hands them up at once.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use wanopt_cc::BbrConfig;

use super::path::{PathSender, PathStats, Sent, IP_UDP_HEADERS};
use super::wire::{AckRepr, DataRepr, DATA_HEADER_LEN};
use crate::path::{PathId, PathSet};

/// How long after a stall a path's probes must call it up before it carries
/// data again.
pub const REJOIN_HOLD: Duration = Duration::from_secs(1);
/// The QUIC connection's pacing over the paths' sum: the most, with empty
/// queues, and the least.
const MAX_PACING_GAIN: f64 = 1.02;
const MIN_PACING_GAIN: f64 = 0.5;
/// The paths' queues at which the QUIC connection paces at their sum.
pub const QUEUE_TARGET: Duration = Duration::from_millis(4);
/// The queue a path may hold beyond its window, in time at its pacing rate.
pub const MAX_QUEUE_DELAY: Duration = Duration::from_millis(20);

/// A datagram waiting for its path's pacer.
#[derive(Debug)]
struct Queued {
    gseq: u32,
    /// The sender's clock when it took its place in the order (or was
    /// queued again after a stall), µs.
    queued_us: u32,
    inner: Vec<u8>,
    hold_exempt: bool,
    reinjected: bool,
}

impl Queued {
    /// What a link carries for it: its header, itself, IP and UDP.
    fn wire_len(&self) -> u64 {
        (IP_UDP_HEADERS + DATA_HEADER_LEN + self.inner.len()) as u64
    }
}

/// One path: its sender and its queue.
#[derive(Debug)]
struct Lane {
    sender: PathSender,
    /// Real-time datagrams and reinjected ones, then bulk.
    urgent: VecDeque<Queued>,
    queue: VecDeque<Queued>,
    queued_bytes: u64,
    /// The probes' verdict.
    up: bool,
}

impl Lane {
    fn front(&self) -> Option<&Queued> {
        self.urgent.front().or(self.queue.front())
    }

    fn pop(&mut self) -> Option<Queued> {
        let queued = self.urgent.pop_front().or_else(|| self.queue.pop_front())?;
        self.queued_bytes -= queued.wire_len();
        Some(queued)
    }

    fn usable(&self) -> bool {
        self.up && !self.sender.stalled
    }

    /// When `bytes` more would arrive at the peer if queued now.
    fn arrival(&self, now: Instant, bytes: u64) -> Instant {
        let rate = self.sender.pacing_rate() as f64;
        let wait = (self.queued_bytes + bytes) as f64 / rate;
        now + Duration::from_secs_f64(wait) + self.sender.one_way()
    }

    fn queue_limit(&self) -> u64 {
        let rate = self.sender.pacing_rate() as f64;
        (rate * MAX_QUEUE_DELAY.as_secs_f64()) as u64 + 2 * DATA_HEADER_LEN as u64 + 2 * 1500
    }
}

/// What the bond's sender has counted beyond its paths.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BondStats {
    /// Datagrams taken to send.
    pub datagrams: u64,
    /// Datagrams dropped: no path was up, or every path's queue was full.
    pub dropped: u64,
    /// Datagrams sent again on another path after theirs stalled.
    pub reinjected: u64,
}

/// Why a datagram was not taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Dropped {
    /// No path is up.
    #[error("no path is up")]
    NoPath,
    /// Every usable path's queue is full.
    #[error("every path's queue is full")]
    Full,
}

/// The sending side of one peer's bond.
#[derive(Debug)]
pub struct BondSender {
    epoch: Instant,
    config: BbrConfig,
    mtu: u16,
    seed: u64,
    next_gseq: u32,
    lanes: [Option<Lane>; 15],
    stats: BondStats,
}

impl BondSender {
    /// A sender with no path whose clock starts at `now`; each path's
    /// controller is built from `config` for `mtu`-byte datagrams, its
    /// random phase drawn from `seed`.
    pub fn new(now: Instant, config: BbrConfig, mtu: u16, seed: u64) -> Self {
        BondSender {
            epoch: now,
            config,
            mtu,
            seed,
            next_gseq: 0,
            lanes: std::array::from_fn(|_| None),
            stats: BondStats::default(),
        }
    }

    /// Adds `path` (down until [`Self::set_up`] says otherwise).
    pub fn add_path(&mut self, path: PathId) {
        let seed = self.seed ^ u64::from(path.get()).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        self.lanes[path.index()].get_or_insert_with(|| Lane {
            sender: PathSender::new(&self.config, self.mtu, seed),
            urgent: VecDeque::new(),
            queue: VecDeque::new(),
            queued_bytes: 0,
            up: false,
        });
    }

    /// The probes' verdict on `path`: a path that goes down stalls at once;
    /// a stalled one that is up [`REJOIN_HOLD`] after its stall starts over.
    /// Call it whenever the verdict may have changed (it is cheap).
    pub fn set_up(&mut self, now: Instant, path: PathId, up: bool) {
        let Some(lane) = self.lanes[path.index()].as_mut() else {
            return;
        };
        lane.up = up;
        if !up && !lane.sender.stalled && lane.sender.in_flight + lane.queued_bytes > 0 {
            self.stall(now, path);
        } else if up
            && lane
                .sender
                .stalled_at
                .is_some_and(|at| now.saturating_duration_since(at) >= REJOIN_HOLD)
        {
            lane.sender.restart();
        }
    }

    /// The round trip `path`'s probes measure, used until its acks do.
    pub fn set_probe_rtt(&mut self, path: PathId, rtt: Duration) {
        if let Some(lane) = self.lanes[path.index()].as_mut() {
            lane.sender.set_probe_rtt(rtt);
        }
    }

    /// A rate `path` never carries more than (bytes per second of bond
    /// datagrams), or none.
    pub fn set_rate_cap(&mut self, path: PathId, cap: Option<u64>) {
        if let Some(lane) = self.lanes[path.index()].as_mut() {
            lane.sender.set_rate_cap(cap);
        }
    }

    /// Takes a datagram to send on the path where it would arrive first;
    /// that path.
    pub fn handle_datagram(&mut self, now: Instant, inner: Vec<u8>) -> Result<PathId, Dropped> {
        let queued = Queued {
            gseq: self.next_gseq,
            queued_us: self.clock_us(now),
            inner,
            hold_exempt: false,
            reinjected: false,
        };
        let path = self.pick(now, queued.wire_len()).inspect_err(|_| {
            self.stats.dropped += 1;
        })?;
        self.next_gseq = self.next_gseq.wrapping_add(1);
        self.stats.datagrams += 1;
        let lane = self.lanes[path.index()].as_mut().expect("picked");
        lane.queued_bytes += queued.wire_len();
        lane.queue.push_back(queued);
        Ok(path)
    }

    /// Takes a real-time datagram to send on each of `paths` that is up,
    /// ahead of bulk data; how many copies went.
    pub fn handle_realtime(&mut self, now: Instant, inner: &[u8], paths: PathSet) -> usize {
        let gseq = self.next_gseq;
        let queued_us = self.clock_us(now);
        let mut copies = 0;
        for path in paths.iter() {
            let Some(lane) = self.lanes[path.index()].as_mut().filter(|l| l.usable()) else {
                continue;
            };
            let queued = Queued {
                gseq,
                queued_us,
                inner: inner.to_vec(),
                hold_exempt: true,
                reinjected: false,
            };
            lane.queued_bytes += queued.wire_len();
            lane.urgent.push_back(queued);
            copies += 1;
        }
        if copies > 0 {
            self.next_gseq = self.next_gseq.wrapping_add(1);
            self.stats.datagrams += 1;
        } else {
            self.stats.dropped += 1;
        }
        copies
    }

    /// The path for `bytes` more: the earliest arrival among those with
    /// room, else among those whose queue is not full.
    fn pick(&self, now: Instant, bytes: u64) -> Result<PathId, Dropped> {
        self.pick_among(now, bytes, true)
    }

    /// [`Self::pick`], or with `limits` false the earliest arrival among
    /// every usable path whatever its window and queue (for datagrams
    /// that must go: a stalled path's).
    fn pick_among(&self, now: Instant, bytes: u64, limits: bool) -> Result<PathId, Dropped> {
        let usable = || {
            self.lanes
                .iter()
                .enumerate()
                .filter_map(|(i, l)| Some((PathId::new(i as u8 + 1)?, l.as_ref()?)))
                .filter(|(_, l)| l.usable())
        };
        if usable().next().is_none() {
            return Err(Dropped::NoPath);
        }
        let earliest = |room: bool| {
            usable()
                .filter(|(_, l)| {
                    if room {
                        l.sender.has_room(l.queued_bytes, bytes)
                    } else {
                        l.queued_bytes + bytes <= l.queue_limit()
                    }
                })
                .min_by_key(|(_, l)| l.arrival(now, bytes))
                .map(|(p, _)| p)
        };
        if !limits {
            return usable()
                .min_by_key(|(_, l)| l.arrival(now, bytes))
                .map(|(p, _)| p)
                .ok_or(Dropped::NoPath);
        }
        earliest(true)
            .or_else(|| earliest(false))
            .ok_or(Dropped::Full)
    }

    /// An ack that arrived; the path it names is the one it acknowledges.
    pub fn handle_ack(&mut self, now: Instant, ack: &AckRepr) {
        let app_limited = self.lanes.iter().flatten().all(|l| l.front().is_none());
        let Some(lane) = self.lanes[ack.path.index()].as_mut() else {
            return;
        };
        if lane.sender.stalled {
            // It lives: it starts over, and carries data once up.
            lane.sender.restart();
            return;
        }
        lane.sender.handle_ack(now, ack, app_limited);
    }

    /// Declares losses and stalls whose time came.
    pub fn handle_timeout(&mut self, now: Instant) {
        for index in 0..self.lanes.len() {
            let Some(lane) = self.lanes[index].as_mut() else {
                continue;
            };
            if lane.sender.loss_time().is_some_and(|t| t <= now) {
                lane.sender.detect_losses(now);
            }
            if lane.sender.stall_time().is_some_and(|t| t <= now) {
                self.stall(now, PathId::new(index as u8 + 1).expect("15 lanes"));
            }
        }
    }

    /// Stalls `path`: what it had in flight or queued goes to the others.
    fn stall(&mut self, now: Instant, path: PathId) {
        let queued_us = self.clock_us(now);
        let Some(lane) = self.lanes[path.index()].as_mut() else {
            return;
        };
        let mut again: Vec<Queued> = lane
            .sender
            .stall(now)
            .into_iter()
            .map(|s: Sent| Queued {
                gseq: s.gseq,
                queued_us,
                inner: s.inner,
                hold_exempt: s.hold_exempt,
                reinjected: true,
            })
            .collect();
        again.extend(lane.urgent.drain(..).chain(lane.queue.drain(..)));
        lane.queued_bytes = 0;
        again.sort_by_key(|q| q.gseq.wrapping_sub(self.next_gseq) as i32);
        for mut queued in again {
            queued.reinjected = true;
            queued.queued_us = queued_us;
            match self.pick_among(now, queued.wire_len(), false) {
                Ok(to) => {
                    let lane = self.lanes[to.index()].as_mut().expect("picked");
                    lane.queued_bytes += queued.wire_len();
                    lane.sender.stats.reinjected += 1;
                    lane.urgent.push_back(queued);
                    self.stats.reinjected += 1;
                }
                Err(_) => self.stats.dropped += 1,
            }
        }
    }

    /// The next datagram its path's pacer lets go at `now`: the path and
    /// the datagram's bytes.
    #[must_use]
    pub fn poll_transmit(&mut self, now: Instant) -> Option<(PathId, Vec<u8>)> {
        let (index, _) = self
            .lanes
            .iter()
            .enumerate()
            .filter_map(|(i, l)| {
                let lane = l.as_ref()?;
                let front = lane.front()?;
                // Bulk data waits for the window; real-time and reinjected
                // datagrams only for the pacer.
                if lane.urgent.is_empty() && !lane.sender.has_room(0, front.wire_len()) {
                    return None;
                }
                let at = lane.sender.release_at(now, front.wire_len());
                (at <= now).then_some((i, at))
            })
            .min_by_key(|&(_, at)| at)?;
        // No other path has data in flight or queued: everything sent
        // before this one has arrived or is lost.
        let alone = self
            .lanes
            .iter()
            .enumerate()
            .filter(|(i, _)| *i != index)
            .filter_map(|(_, l)| l.as_ref())
            .all(|l| l.sender.in_flight == 0 && l.queued_bytes == 0);
        let lane = self.lanes[index].as_mut()?;
        let queued = lane.pop()?;
        let path = PathId::new(index as u8 + 1)?;
        let bytes = queued.wire_len();
        let repr = DataRepr {
            path,
            hold_exempt: queued.hold_exempt,
            reinjected: queued.reinjected,
            alone: alone && !queued.reinjected && !queued.hold_exempt,
            gseq: queued.gseq,
            pseq: lane.sender.next_pseq(),
            tx_us: queued.queued_us,
        };
        let datagram = repr.emit(&queued.inner);
        let sent = Sent::new(queued.gseq, bytes, now, queued.hold_exempt, queued.inner);
        lane.sender.send(now, sent);
        Some((path, datagram))
    }

    /// The next time a pacer, a loss timer or a stall timer has work.
    pub fn poll_timeout(&self, now: Instant) -> Option<Instant> {
        self.lanes
            .iter()
            .flatten()
            .flat_map(|lane| {
                let release = lane
                    .front()
                    .filter(|front| {
                        !lane.urgent.is_empty() || lane.sender.has_room(0, front.wire_len())
                    })
                    .map(|front| lane.sender.release_at(now, front.wire_len()));
                [release, lane.sender.loss_time(), lane.sender.stall_time()]
            })
            .flatten()
            .min()
    }

    /// The bytes the QUIC connection above may have in flight: every usable
    /// path's window plus what fills its queue for `extra` at its rate.
    pub fn window(&self, extra: Duration) -> u64 {
        self.usable_lanes()
            .map(|l| {
                l.sender.window() + (l.sender.pacing_rate() as f64 * extra.as_secs_f64()) as u64
            })
            .sum()
    }

    /// The rate the QUIC connection above should send at, bytes per second:
    /// the sum of the usable paths' pacing rates, a little more while their
    /// queues are short so that they never run dry, less as they grow
    /// (the bond has no other way to push back: what no path can take is
    /// dropped).
    pub fn pacing_rate(&self) -> u64 {
        let sum: u64 = self.usable_lanes().map(|l| l.sender.pacing_rate()).sum();
        let queued = self.queued_bytes() as f64 / sum.max(1) as f64;
        let gain = MAX_PACING_GAIN - (MAX_PACING_GAIN - 1.0) * queued / QUEUE_TARGET.as_secs_f64();
        (sum as f64 * gain.clamp(MIN_PACING_GAIN, MAX_PACING_GAIN)) as u64
    }

    fn usable_lanes(&self) -> impl Iterator<Item = &Lane> {
        self.lanes.iter().flatten().filter(|l| l.usable())
    }

    /// Bytes waiting in every path's queue.
    pub fn queued_bytes(&self) -> u64 {
        self.lanes.iter().flatten().map(|l| l.queued_bytes).sum()
    }

    /// What `path`'s sender counted.
    pub fn path_stats(&self, path: PathId) -> Option<PathStats> {
        Some(self.lanes[path.index()].as_ref()?.sender.stats)
    }

    /// Whether `path` carries data now (up, not stalled).
    pub fn usable(&self, path: PathId) -> bool {
        self.lanes[path.index()].as_ref().is_some_and(Lane::usable)
    }

    fn clock_us(&self, now: Instant) -> u32 {
        now.saturating_duration_since(self.epoch).as_micros() as u32
    }

    /// What the sender counted beyond its paths.
    pub fn stats(&self) -> BondStats {
        self.stats
    }
}

#[cfg(test)]
mod tests;
