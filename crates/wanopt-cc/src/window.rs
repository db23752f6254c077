//! The congestion window (draft-cardwell-iccrg-bbr-congestion-control-00
//! §4.2.3): gain x the estimated BDP plus the ack aggregation allowance and
//! two pacing bursts, with loss recovery as Linux does it
//! (`bbr_set_cwnd`), within the moving bottleneck's bound (`moving.rs`) and
//! the rate cap's (`cap.rs`).

use super::{mul_rate, Bbr, Mode, PACER_BURST};

impl Bbr {
    /// §4.2.3: the window, with loss recovery (Linux `bbr_set_cwnd`).
    pub(super) fn set_cwnd(&mut self, acked: u64, lost: u64, in_flight: u64) {
        let mut cwnd = self.cwnd;
        // Packet conservation and the cut by what was lost answer
        // congestion, not random loss.
        let conserve = self.loss_is_congestion();
        if lost > 0 && conserve {
            cwnd = cwnd.saturating_sub(lost).max(self.mtu);
        }
        let recovery = &mut self.recovery;
        if recovery.entering {
            // First round of recovery: packet conservation from what is in
            // flight now.
            recovery.entering = false;
            if conserve {
                cwnd = in_flight + acked;
            }
        } else if recovery.exiting {
            recovery.exiting = false;
            recovery.conservation = false;
            cwnd = cwnd.max(self.prior_cwnd);
        }
        if recovery.conservation && conserve {
            cwnd = cwnd.max(in_flight + acked);
        } else {
            let mut target =
                self.bdp(self.cwnd_gain) + self.ack_aggregation_cwnd() + 2 * self.quantum();
            if self.full_bandwidth_reached {
                if let Some(bound) = self.moving.window_bound(self.min_rtt, self.pacing_gain) {
                    target = target.min(bound.max(self.min_cwnd()));
                }
            }
            if self.full_bandwidth_reached {
                cwnd = (cwnd + acked).min(target);
            } else if cwnd < target || self.rate.delivered() < self.initial_window {
                cwnd += acked;
            }
        }
        if let Some(bound) = self.cap_window() {
            cwnd = cwnd.min(bound);
        }
        self.cwnd = cwnd.max(self.min_cwnd());
    }

    /// gain x the estimated bandwidth-delay product; the initial window
    /// before there is an estimate.
    pub(super) fn bdp(&self, gain: f64) -> u64 {
        let bandwidth = self.sending_bandwidth();
        match self.min_rtt {
            Some(rtt) if bandwidth > 0 => (gain * mul_rate(bandwidth, rtt) as f64) as u64,
            _ => self.initial_window,
        }
    }

    /// The window allowance for ack aggregation, once STARTUP is over.
    pub(super) fn ack_aggregation_cwnd(&self) -> u64 {
        if !self.full_bandwidth_reached {
            return 0;
        }
        self.aggregation.allowance(self.bandwidth.get())
    }

    /// What the pacer sends in one burst.
    pub(super) fn quantum(&self) -> u64 {
        mul_rate(self.pacing_rate, PACER_BURST).clamp(10 * self.mtu, 256 * self.mtu)
    }

    /// The least window: four datagrams.
    pub(super) fn min_cwnd(&self) -> u64 {
        4 * self.mtu
    }

    /// Remembers the window before recovery or ProbeRTT cuts it.
    pub(super) fn save_cwnd(&mut self) {
        self.prior_cwnd = if self.recovery.since.is_none() && self.mode != Mode::ProbeRtt {
            self.cwnd
        } else {
            self.prior_cwnd.max(self.cwnd)
        };
    }
}
