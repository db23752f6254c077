//! STARTUP and DRAIN (draft-cardwell-iccrg-bbr-congestion-control-00
//! §4.3.1-4.3.3): doubling the sending rate every round until the
//! bandwidth stops growing, then draining the queue that built.

use std::time::Instant;

use super::loss::RoundLoss;
use super::rate::RateSample;
use super::{Bbr, Mode, FULL_BANDWIDTH_GROWTH, FULL_BANDWIDTH_ROUNDS};

impl Bbr {
    /// STARTUP's exit tests: three rounds without 25% growth (§4.3.2.2), or
    /// a round that lost more than random loss explains, checked on every
    /// batch (a loss is seen an RTT after the queue overflowed, and every
    /// RTT more at 2.885x loses more). BBR v2 leaves on 2% loss in a round
    /// (draft-cardwell-iccrg-bbr-congestion-control-02 §4.3.1.3); on a path
    /// with 3% random loss that ended STARTUP at once and left the estimate
    /// a tenth of the link (see `loss.rs`).
    pub(super) fn check_full_bandwidth_reached(
        &mut self,
        sample: Option<RateSample>,
        loss: RoundLoss,
    ) {
        if self.full_bandwidth_reached {
            return;
        }
        // Loss with a queue ends STARTUP once the bandwidth has stopped
        // growing for a round: a queue at the bottleneck means the delivery
        // rate has reached it, while delay that comes with the rate itself
        // (jitter that keeps packets in order: 20 ms more at 50 ms once
        // packets are closer than the jitter) came with 3% random loss and
        // ended STARTUP at 10-40% of a 100 Mbit/s link. Loss that is
        // only above the usual rate does not end it: in the first, short
        // rounds the usual rate is learned from a few dozen packets, and at
        // 10% random loss that misjudged 8 of 20 simulated starts, leaving
        // the estimate a fifth of the link (a policer, which drops without
        // a queue, ends STARTUP by the plateau).
        if loss.with_queue && self.full_bandwidth_rounds >= 1 {
            self.full_bandwidth_reached = true;
            return;
        }
        if !self.round_start || sample.is_none_or(|s| s.app_limited) {
            return;
        }
        let bandwidth = self.bandwidth.get();
        if bandwidth as f64 >= self.full_bandwidth as f64 * FULL_BANDWIDTH_GROWTH {
            self.full_bandwidth = bandwidth;
            self.full_bandwidth_rounds = 0;
            return;
        }
        self.full_bandwidth_rounds += 1;
        self.full_bandwidth_reached = self.full_bandwidth_rounds >= FULL_BANDWIDTH_ROUNDS;
    }

    /// STARTUP -> DRAIN -> PROBE_BW (§4.3.3).
    pub(super) fn check_drain(&mut self, now: Instant, in_flight: u64) {
        if self.mode == Mode::Startup && self.full_bandwidth_reached {
            self.mode = Mode::Drain;
        }
        if self.mode == Mode::Drain && in_flight <= self.bdp(1.0) {
            self.enter_probe_bw(now);
        }
    }
}
