//! A bottleneck whose rate moves: cellular links, whose capacity follows the
//! radio from one few milliseconds to the next and whose base stations hold
//! seconds of queue.
//!
//! BBR v1 sizes its window as twice its bandwidth estimate times the min
//! RTT, the estimate being the best of ten rounds. When the rate falls, that
//! estimate is the rate of up to ten rounds ago, each round stretched by the
//! queue it builds, and the window keeps a deep buffer full: on recorded LTE
//! traces kernel BBR holds a ping beside a download at 160-200 ms for a 60 ms
//! path, and this controller held it at 300-600 ms. Delay-based controllers
//! of the literature (Sprout, Copa) keep a fraction of that queue at 90-95%
//! of BBR's rate.
//!
//! This module bounds the window to what the last few rounds delivered plus
//! a target queue, and measures whether the path's rate moves:
//!
//! - **The delivery rate of an interval** (bytes acknowledged over at least
//!   [`AVERAGE_INTERVAL`], taken at round starts): a cellular link delivers
//!   in bursts (several packets in one millisecond, then none for twenty),
//!   and a round's median delivery-rate sample reads well below what the
//!   round delivered; on a 5 Mbit/s trace the median-based estimate sank to
//!   1 Mbit/s and BBR's 1.25 probe, measured the same way, never raised it.
//! - **The bound**, from the end of STARTUP on every path: `recent ×
//!   (min_rtt + queue target) × pacing gain`, where `recent` is the best of
//!   the last [`RECENT_ROUNDS`] rounds' interval rates and high (90th
//!   percentile) samples, and the pacing gain lets ProbeBW's 1.25 phase
//!   probe above it. On a fixed-rate path it sits above what BBR keeps in
//!   flight (at least 1.5 BDP) and rarely binds; when the rate falls, it
//!   follows within a few rounds where BBR's ten-round estimate keeps the
//!   old rate's window. (Applied only once a path was judged to move, it
//!   let the first steady seconds of a recorded LTE trace fill the buffer.)
//! - **Moving or not**: the smoothed relative deviation of the interval
//!   rates from their smoothed mean while cruising. A fixed-rate path, even
//!   with random loss and 10-20 ms of jitter, stays below [`MOVING_ABOVE`];
//!   recorded cellular traces go well above it. While the path moves, the
//!   pacing rate is at least `recent` too, so a probe is never held by a
//!   stale low estimate, and a congestive loss sets an in-flight ceiling (a
//!   shallow buffer).

use std::time::{Duration, Instant};

use super::filter::WindowedMax;

/// The shortest interval a delivery rate is measured over.
pub(super) const AVERAGE_INTERVAL: Duration = Duration::from_millis(50);

/// Rounds of the recent delivery rate.
pub(super) const RECENT_ROUNDS: u64 = 4;

/// The queue the bound leaves room for, as time at the recent rate: 40 ms,
/// or half the min RTT on a longer path.
pub(super) const QUEUE_TARGET: Duration = Duration::from_millis(40);

/// The path moves once the rates' relative deviation passes this...
pub(super) const MOVING_ABOVE: f64 = 0.3;

/// ...and no longer does once it stays below this for [`MOVING_HOLD`].
pub(super) const STEADY_BELOW: f64 = 0.2;

/// How long a path judged moving stays so after its rates last moved: a
/// cellular link does not become a fibre, while a sender held to a low
/// rate by its own pacing sees steady rates (on a recorded LTE trace, one
/// judged steady again sat at 1 Mbit/s of 3 for the rest of the run).
pub(super) const MOVING_HOLD: Duration = Duration::from_secs(60);

/// What a round that lost to congestion leaves of the most it had in
/// flight, as the moving path's in-flight ceiling (BBRv3's `beta` is 0.7;
/// a cellular link's buffer holds the queue of a whole rate change, so
/// less is taken off).
pub(super) const LOSS_CEILING: f64 = 0.85;

/// A clean round raises the in-flight ceiling by 1/this of it, back from
/// 0.85 to the level that lost in about five rounds (a sixteenth regrew it
/// into the next loss within a second behind a 100 KB buffer: 5.5% of the
/// packets dropped on a recorded 16.7 Mbit/s trace in the simulation, 3.4%
/// at a thirty-second, 2.1% at a sixty-fourth but 7% less rate).
pub(super) const CEILING_GROWTH: u64 = 32;

/// A round whose least RTT is within this of the min RTT saw no queue: a
/// moving path has room (its rate rose), and the controller probes at
/// 1.25 until a queue shows.
pub(super) const HEADROOM_BELOW: Duration = Duration::from_millis(10);

/// Interval rates before the judgement is made.
const MIN_INTERVALS: u32 = 8;

/// Weight of a new interval in the smoothed mean and deviation.
const SMOOTHING: f64 = 1.0 / 8.0;

/// Whether the moving-bottleneck bound applies.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum MovingPolicy {
    /// The bound on every path, the pacing floor and the loss ceiling
    /// when the path's rate is measured to move (the default).
    #[default]
    Auto,
    /// None of it: BBR v1's window alone.
    Never,
    /// All of it from the end of STARTUP, whatever the path.
    Always,
}

/// The moving-bottleneck state of one controller.
#[derive(Clone, Debug)]
pub(super) struct MovingBottleneck {
    policy: MovingPolicy,
    /// When the current interval began and the bytes delivered by then.
    mark: Option<(Instant, u64)>,
    /// The best recent interval rate or round high sample, bytes per second.
    recent: WindowedMax,
    /// Smoothed interval rate and smoothed absolute deviation from it.
    mean: f64,
    deviation: f64,
    intervals: u32,
    /// The in-flight ceiling a congestive loss set, raised by
    /// 1/[`CEILING_GROWTH`] each clean round after (a shallow buffer:
    /// BBRv3's `inflight_hi`).
    inflight_hi: Option<u64>,
    /// Moving until then, at least.
    moving_until: Option<Instant>,
    /// The last round saw no queue (see [`HEADROOM_BELOW`]).
    headroom: bool,
    moving: bool,
}

impl MovingBottleneck {
    pub(super) fn new(policy: MovingPolicy) -> MovingBottleneck {
        MovingBottleneck {
            policy,
            mark: None,
            recent: WindowedMax::new(RECENT_ROUNDS),
            mean: 0.0,
            deviation: 0.0,
            intervals: 0,
            inflight_hi: None,
            moving_until: None,
            headroom: false,
            moving: false,
        }
    }

    /// A round `round` began at `now` with `delivered` bytes acknowledged
    /// so far; `high` is the ended round's high delivery-rate sample,
    /// `app_limited` whether the sample that began the round was, and
    /// `cruising` whether the controller sends at the path's rate (not in
    /// STARTUP, DRAIN or PROBE_RTT, whose rates move by design): only then
    /// do the rates say whether the path moves.
    pub(super) fn on_round(
        &mut self,
        now: Instant,
        round: u64,
        delivered: u64,
        high: Option<u64>,
        app_limited: bool,
        cruising: bool,
    ) {
        if let (Some(high), false) = (high, app_limited) {
            self.recent.update(round, high);
        }
        let Some((at, before)) = self.mark else {
            self.mark = Some((now, delivered));
            return;
        };
        let elapsed = now.saturating_duration_since(at);
        if elapsed < AVERAGE_INTERVAL {
            return;
        }
        self.mark = Some((now, delivered));
        if app_limited {
            return;
        }
        let rate = delivered.saturating_sub(before) as f64 / elapsed.as_secs_f64();
        self.recent.update(round, rate as u64);
        if !cruising {
            return;
        }
        if self.intervals == 0 {
            self.mean = rate;
        }
        self.deviation += SMOOTHING * ((rate - self.mean).abs() - self.deviation);
        self.mean += SMOOTHING * (rate - self.mean);
        self.intervals = self.intervals.saturating_add(1);
        if self.intervals >= MIN_INTERVALS && self.mean > 0.0 {
            let variability = self.deviation / self.mean;
            if variability > MOVING_ABOVE {
                self.moving = true;
                self.moving_until = Some(now + MOVING_HOLD);
            } else if variability < STEADY_BELOW
                && self.moving_until.is_none_or(|until| now >= until)
            {
                self.moving = false;
            }
        }
    }

    /// A round ended: it lost to congestion (`congested`) with at most
    /// `max_in_flight` bytes in flight, or not. While the path moves, a
    /// congested round sets the in-flight ceiling to [`LOSS_CEILING`] of
    /// that, and every clean round raises it by 1/[`CEILING_GROWTH`] (at
    /// least `mtu`).
    pub(super) fn on_round_end(&mut self, congested: bool, max_in_flight: u64, mtu: u64) {
        if !self.active() {
            self.inflight_hi = None;
            return;
        }
        if congested {
            let ceiling = (max_in_flight as f64 * LOSS_CEILING) as u64;
            self.inflight_hi = Some(ceiling.max(4 * mtu));
        } else if let Some(hi) = self.inflight_hi {
            self.inflight_hi = Some(hi.saturating_add((hi / CEILING_GROWTH).max(mtu)));
        }
    }

    /// The round that ended had `round_min_rtt` as its least RTT sample,
    /// against the path's `min_rtt`: whether it saw a queue.
    pub(super) fn on_round_delay(
        &mut self,
        round_min_rtt: Option<Duration>,
        min_rtt: Option<Duration>,
    ) {
        self.headroom = match (round_min_rtt, min_rtt) {
            (Some(round), Some(min)) => round < min + HEADROOM_BELOW,
            _ => false,
        };
    }

    /// Whether a moving path has room: the last round saw no queue.
    pub(super) fn headroom(&self) -> bool {
        self.active() && self.headroom
    }

    /// Whether the path is judged to move (or the policy says it does).
    pub(super) fn active(&self) -> bool {
        match self.policy {
            MovingPolicy::Auto => self.moving,
            MovingPolicy::Never => false,
            MovingPolicy::Always => true,
        }
    }

    /// The smoothed relative deviation of the interval rates (0 before the
    /// first).
    #[cfg(test)]
    pub(super) fn variability(&self) -> f64 {
        if self.mean > 0.0 {
            self.deviation / self.mean
        } else {
            0.0
        }
    }

    /// The best recent delivery rate, bytes per second.
    pub(super) fn recent(&self) -> u64 {
        self.recent.get()
    }

    /// The window bound: `recent × (min_rtt + target) × gain`, the target
    /// the larger of [`QUEUE_TARGET`] and half the min RTT, and at most the
    /// in-flight ceiling of the last congestive loss; `None` under
    /// [`MovingPolicy::Never`] or before anything is measured.
    pub(super) fn window_bound(&self, min_rtt: Option<Duration>, gain: f64) -> Option<u64> {
        let recent = self.recent.get();
        let rtt = min_rtt?;
        if self.policy == MovingPolicy::Never || recent == 0 {
            return None;
        }
        let target = QUEUE_TARGET.max(rtt / 2);
        let bytes = (recent as f64 * (rtt + target).as_secs_f64() * gain.max(1.0)) as u64;
        Some(self.inflight_hi.map_or(bytes, |hi| bytes.min(hi)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Interval rates that alternate between `low` and `high` bytes per
    /// second, `n` rounds of 60 ms.
    fn feed(state: &mut MovingBottleneck, low: u64, high: u64, n: u64) {
        let start = Instant::now();
        let mut delivered = 0u64;
        for round in 0..n {
            let rate = if round % 2 == 0 { low } else { high };
            delivered += rate * 60 / 1000;
            let now = start + Duration::from_millis(60 * (round + 1));
            state.on_round(now, round, delivered, None, false, true);
        }
    }

    #[test]
    fn a_steady_rate_does_not_move_and_a_wandering_one_does() {
        let mut steady = MovingBottleneck::new(MovingPolicy::Auto);
        feed(&mut steady, 11_000_000, 12_000_000, 40);
        assert!(!steady.active(), "{}", steady.variability());
        // The bound holds on a steady path too, above its BDP.
        let steady_bound = steady
            .window_bound(Some(Duration::from_millis(60)), 1.0)
            .unwrap_or(0);
        assert!(
            (1_150_000..=1_250_000).contains(&steady_bound),
            "{steady_bound}"
        );
        let mut wandering = MovingBottleneck::new(MovingPolicy::Auto);
        feed(&mut wandering, 200_000, 1_500_000, 40);
        assert!(wandering.active(), "{}", wandering.variability());
        // The best recent rate, for 60 ms + the 40 ms target.
        let bound = wandering
            .window_bound(Some(Duration::from_millis(60)), 1.0)
            .unwrap_or(0);
        assert!((140_000..=160_000).contains(&bound), "{bound}");
        let never = MovingBottleneck {
            policy: MovingPolicy::Never,
            ..wandering.clone()
        };
        assert!(!never.active());
    }
}
