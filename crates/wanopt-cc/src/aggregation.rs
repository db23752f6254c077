//! Ack aggregation (Linux `bbr_update_ack_aggregation`): how much more the
//! receiver acknowledged in a burst than the bandwidth explains, kept as a
//! window allowance so that a sender whose acks come in bursts is not held
//! below the path's rate.

use std::time::{Duration, Instant};

/// Rounds of the ack aggregation filter (Linux `bbr_extra_acked_win_rtts`).
const EXTRA_ACKED_WINDOW_ROUNDS: u32 = 5;
/// Cap of the aggregation allowance, as time at the estimated bandwidth.
const EXTRA_ACKED_MAX: Duration = Duration::from_millis(100);

/// The ack aggregation estimator: the most extra acknowledged bytes of the
/// last two windows of [`EXTRA_ACKED_WINDOW_ROUNDS`] rounds.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct AckAggregation {
    extra_acked: [u64; 2],
    index: usize,
    rounds: u32,
    epoch_start: Option<Instant>,
    epoch_acked: u64,
}

impl AckAggregation {
    /// The sender restarts from idle at `now`: a new epoch.
    pub(super) fn restart(&mut self, now: Instant) {
        self.epoch_start = Some(now);
        self.epoch_acked = 0;
    }

    /// `acked` bytes were acknowledged at `now`, with `bandwidth` (bytes
    /// per second) estimated and a window of `cwnd`; `round_start` when a
    /// round began with them.
    pub(super) fn on_ack(
        &mut self,
        now: Instant,
        acked: u64,
        bandwidth: u64,
        cwnd: u64,
        round_start: bool,
    ) {
        if round_start {
            self.rounds = (self.rounds + 1).min(31);
            if self.rounds >= EXTRA_ACKED_WINDOW_ROUNDS {
                self.rounds = 0;
                self.index ^= 1;
                self.extra_acked[self.index] = 0;
            }
        }
        let epoch = self
            .epoch_start
            .map_or(Duration::ZERO, |start| now.saturating_duration_since(start));
        let mut expected = bytes_in(bandwidth, epoch);
        if self.epoch_start.is_none()
            || self.epoch_acked <= expected
            || self.epoch_acked + acked >= 1 << 30
        {
            // Acks arrive no faster than the bandwidth: a new epoch.
            self.epoch_acked = 0;
            self.epoch_start = Some(now);
            expected = 0;
        }
        self.epoch_acked += acked;
        let extra = (self.epoch_acked - expected.min(self.epoch_acked)).min(cwnd);
        if extra > self.extra_acked[self.index] {
            self.extra_acked[self.index] = extra;
        }
    }

    /// The window allowance at `bandwidth` bytes per second.
    pub(super) fn allowance(&self, bandwidth: u64) -> u64 {
        let extra = self.extra_acked[0].max(self.extra_acked[1]);
        extra.min(bytes_in(bandwidth, EXTRA_ACKED_MAX))
    }
}

/// Bytes sent in `time` at `rate` bytes per second.
fn bytes_in(rate: u64, time: Duration) -> u64 {
    (u128::from(rate) * time.as_nanos() / 1_000_000_000).min(u128::from(u64::MAX)) as u64
}
