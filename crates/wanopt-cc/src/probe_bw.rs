//! PROBE_BW (§4.3.4): cruising at the estimated bandwidth, probing for
//! more with a pacing gain of 1.25 for one round of eight and draining
//! what the probe queued with 0.75.

use std::time::Instant;

use super::{Bbr, Mode, LOG_TARGET, PACING_GAIN_CYCLE};

impl Bbr {
    /// PROBE_BW's gain cycle (§4.3.4.4, Linux `bbr_is_next_cycle_phase`).
    pub(super) fn update_cycle_phase(&mut self, now: Instant, prior_in_flight: u64, lost: u64) {
        if self.mode != Mode::ProbeBw {
            return;
        }
        let full_length = match (self.cycle_stamp, self.min_rtt) {
            (Some(stamp), Some(min_rtt)) => now.saturating_duration_since(stamp) > min_rtt,
            _ => true,
        };
        let gain = PACING_GAIN_CYCLE[self.cycle_index];
        let next = if gain > 1.0 {
            // Probe until the extra data is in flight, or losses say the
            // pipe is full.
            full_length && (lost > 0 || prior_in_flight >= self.bdp(gain))
        } else if gain < 1.0 {
            // Drain until the queue is gone, at most one min RTT.
            full_length || prior_in_flight <= self.bdp(1.0)
        } else {
            full_length
        };
        if next {
            self.cycle_index = (self.cycle_index + 1) % PACING_GAIN_CYCLE.len();
            self.cycle_stamp = Some(now);
            tracing::trace!(
                target: LOG_TARGET,
                gain = PACING_GAIN_CYCLE[self.cycle_index],
                prior_in_flight,
                bdp = self.bdp(1.0),
                "bbr phase {}",
                self.cycle_index
            );
        }
    }

    pub(super) fn enter_probe_bw(&mut self, now: Instant) {
        self.mode = Mode::ProbeBw;
        // A random phase other than the 3/4 one (Linux: CYCLE_LEN - 1 -
        // random(7), then advance).
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        let start = PACING_GAIN_CYCLE.len() - 1 - (self.rng % 7) as usize;
        self.cycle_index = (start + 1) % PACING_GAIN_CYCLE.len();
        self.cycle_stamp = Some(now);
    }
}
