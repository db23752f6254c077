//! One path's record in a [`super::PathMonitor`]: its probes, echoes,
//! RTT, loss and the intervals and bounds derived from them.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use super::state::{PathState, PathView, ProbeStats};
use super::wire::PathId;

/// Shortest probe interval.
pub const MIN_INTERVAL: Duration = Duration::from_millis(20);
/// Longest probe interval while the lane is busy, and the interval of a
/// path that has not answered yet.
pub const BUSY_INTERVAL: Duration = Duration::from_millis(100);
/// Probe interval while the lane is idle.
pub const IDLE_INTERVAL: Duration = Duration::from_secs(1);
/// The lane is busy while it sent data this recently.
pub const BUSY_WINDOW: Duration = Duration::from_secs(1);
/// Intervals without an advancing echo that make a path suspect.
pub const SUSPECT_INTERVALS: u32 = 2;
/// Intervals without an advancing echo that make a path down (unless the
/// RTT bound is longer).
pub const DOWN_INTERVALS: u32 = 6;
/// Shortest time without an advancing echo that makes a path down.
pub const MIN_DOWN: Duration = Duration::from_millis(150);
/// A path that never answered is down after this long.
pub const UNKNOWN_DOWN: Duration = Duration::from_secs(1);
/// Advancing echoes in a row that bring a down path back up.
pub const UP_ECHOES: u32 = 3;
/// Probes per loss window.
pub const LOSS_WINDOW: u64 = 64;
/// Probes per window of the loss an SLA is judged by: 64 cannot tell 1%
/// from 0, and the meter spans one or two windows.
pub const SLA_LOSS_WINDOW: u64 = 256;
/// The gain of the interarrival jitter's running mean (RFC 3550 §6.4.1).
const JITTER_GAIN: u32 = 16;
/// Probes sent that an echo can still name.
pub(super) const SENT_HISTORY: usize = 64;

/// Loss from cumulative counts, over the last one or two windows.
#[derive(Debug, Clone, Copy)]
pub(super) struct LossMeter {
    /// Probes per window.
    window: u64,
    /// The cumulative (expected, received) of the last sample.
    last: (u64, u64),
    current: (u64, u64),
    previous: (u64, u64),
}

impl Default for LossMeter {
    fn default() -> LossMeter {
        LossMeter::over(LOSS_WINDOW)
    }
}

impl LossMeter {
    /// A meter whose windows are `window` probes.
    pub(super) fn over(window: u64) -> LossMeter {
        LossMeter {
            window,
            last: (0, 0),
            current: (0, 0),
            previous: (0, 0),
        }
    }

    pub(super) fn record(&mut self, expected: u64, received: u64) {
        let (last_expected, last_received) = self.last;
        if expected < last_expected {
            // The counts went back (a restarted peer): start over.
            *self = LossMeter::over(self.window);
            return;
        }
        let new = expected - last_expected;
        let arrived = received.saturating_sub(last_received).min(new);
        self.current.0 += new;
        self.current.1 += arrived;
        self.last = (expected, received.max(last_received));
        if self.current.0 >= self.window {
            self.previous = std::mem::take(&mut self.current);
        }
    }

    pub(super) fn loss(&self) -> Option<f64> {
        let expected = self.current.0 + self.previous.0;
        let received = self.current.1 + self.previous.1;
        (expected > 0).then(|| 1.0 - received as f64 / expected as f64)
    }
}

/// A probe this node sent.
#[derive(Debug, Clone, Copy)]
pub(super) struct Sent {
    pub(super) seq: u32,
    pub(super) sent_us: u32,
    pub(super) at: Instant,
}

/// One path's record.
#[derive(Debug, Clone)]
pub(super) struct Entry {
    pub(super) id: PathId,
    pub(super) state: PathState,
    pub(super) up_since: Option<Instant>,
    // Sending.
    /// The next sequence number, `None` once they are used up.
    pub(super) next_seq: Option<u32>,
    /// When the next probe is due; `None`: only as an answer.
    pub(super) next_probe: Option<Instant>,
    pub(super) interval: Duration,
    pub(super) sent: VecDeque<Sent>,
    /// Server side: whether the client has echoed a probe of ours here
    /// (until then `next_probe` is set only by a probe received).
    pub(super) validated: bool,
    /// The next probe answers one received (sent at once).
    pub(super) answer_due: bool,
    // Receiving.
    pub(super) first_seq: Option<u32>,
    pub(super) last_arrival: Option<(u32, Instant)>,
    pub(super) peer_gap: Option<Duration>,
    pub(super) received: u32,
    /// `sent_us` of the newest probe received, and when it arrived.
    pub(super) newest: Option<(u32, Instant)>,
    // Echoes.
    /// Since when an advancing echo is expected.
    pub(super) echo_base: Instant,
    pub(super) last_echo_seq: Option<u32>,
    pub(super) last_advance: Option<Instant>,
    pub(super) streak: u32,
    pub(super) srtt: Option<Duration>,
    pub(super) rttvar: Duration,
    pub(super) loss_to_peer: LossMeter,
    pub(super) loss_from_peer: LossMeter,
    /// Both ways' loss over [`SLA_LOSS_WINDOW`]s, for an SLA.
    pub(super) sla_loss_to_peer: LossMeter,
    pub(super) sla_loss_from_peer: LossMeter,
    /// RFC 3550 interarrival jitter of the peer's probes, µs.
    pub(super) jitter_us: Option<f64>,
    pub(super) stats: ProbeStats,
}

impl Entry {
    pub(super) fn new(id: PathId, now: Instant, validated: bool, next_seq: Option<u32>) -> Entry {
        Entry {
            id,
            state: PathState::Unknown,
            up_since: None,
            next_seq,
            next_probe: validated.then_some(now),
            interval: BUSY_INTERVAL,
            sent: VecDeque::with_capacity(SENT_HISTORY),
            validated,
            answer_due: false,
            first_seq: None,
            last_arrival: None,
            peer_gap: None,
            received: 0,
            newest: None,
            echo_base: now,
            last_echo_seq: None,
            last_advance: None,
            streak: 0,
            srtt: None,
            rttvar: Duration::ZERO,
            loss_to_peer: LossMeter::default(),
            loss_from_peer: LossMeter::default(),
            sla_loss_to_peer: LossMeter::over(SLA_LOSS_WINDOW),
            sla_loss_from_peer: LossMeter::over(SLA_LOSS_WINDOW),
            jitter_us: None,
            stats: ProbeStats::default(),
        }
    }

    /// The interval echoes advance at: the longer of ours and the peer's.
    pub(super) fn echo_interval(&self) -> Duration {
        self.interval.max(self.peer_gap.unwrap_or(MIN_INTERVAL))
    }

    pub(super) fn suspect_after(&self) -> Duration {
        self.echo_interval() * SUSPECT_INTERVALS
    }

    pub(super) fn down_after(&self) -> Duration {
        if self.state == PathState::Unknown {
            return UNKNOWN_DOWN.max(self.echo_interval() * DOWN_INTERVALS);
        }
        let by_rtt = self
            .srtt
            .map_or(Duration::ZERO, |s| 2 * s + 4 * self.rttvar);
        (self.echo_interval() * DOWN_INTERVALS)
            .max(by_rtt)
            .max(MIN_DOWN)
    }

    /// The interval probes go out at now: `busy` says whether the lane is.
    pub(super) fn target_interval(&self, busy: bool) -> Duration {
        if self.state == PathState::Unknown {
            return BUSY_INTERVAL;
        }
        if !busy {
            return IDLE_INTERVAL;
        }
        self.srtt
            .map_or(BUSY_INTERVAL, |s| s / 4)
            .clamp(MIN_INTERVAL, BUSY_INTERVAL)
    }

    /// Moves the interval toward `target`: down at once (probing sooner,
    /// and expecting echoes only from now on), up by doubling.
    pub(super) fn retarget(&mut self, now: Instant, target: Duration) {
        if target < self.interval {
            self.interval = target;
            self.echo_base = self.echo_base.max(now);
            if let Some(next) = self.next_probe {
                self.next_probe = Some(next.min(now + target));
            }
        } else {
            self.interval = (self.interval * 2).min(target);
        }
    }

    /// RFC 6298 §2: the first sample sets SRTT and RTTVAR = R / 2, later
    /// ones move them by 1/8 and 1/4.
    pub(super) fn rtt_sample(&mut self, sample: Duration) {
        match self.srtt {
            None => {
                self.srtt = Some(sample);
                self.rttvar = sample / 2;
            }
            Some(srtt) => {
                let deviation = srtt.abs_diff(sample);
                self.rttvar = (self.rttvar * 3 + deviation) / 4;
                self.srtt = Some((srtt * 7 + sample) / 8);
            }
        }
    }

    /// A peer's probe sent at `sent_us` (its clock) arrived at `at`, the
    /// one before it sent at `before.0` and arrived at `before.1`: RFC 3550
    /// §6.4.1, J += (|D| - J) / 16, D the change in transit time.
    pub(super) fn jitter_sample(&mut self, before: (u32, Instant), sent_us: u32, at: Instant) {
        let sent_gap = f64::from(sent_us.wrapping_sub(before.0) as i32);
        let arrival_gap = at.saturating_duration_since(before.1).as_secs_f64() * 1e6;
        let d = (arrival_gap - sent_gap).abs();
        let j = self.jitter_us.get_or_insert(d);
        *j += (d - *j) / f64::from(JITTER_GAIN);
    }

    pub(super) fn view(&self) -> PathView {
        let sla_loss = match (self.sla_loss_to_peer.loss(), self.sla_loss_from_peer.loss()) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        };
        PathView {
            id: self.id,
            state: self.state,
            rtt: self.srtt,
            loss: self.loss_to_peer.loss(),
            up_since: self.up_since,
            sla_loss,
            jitter: self.jitter(),
        }
    }

    /// The interarrival jitter, once two probes arrived.
    pub(super) fn jitter(&self) -> Option<Duration> {
        self.jitter_us
            .map(|j| Duration::from_micros(j.round() as u64))
    }
}
