//! The min RTT filter and PROBE_RTT (§4.1.2, §4.3.5): the propagation
//! delay is the least RTT of the last 10 s, and when it expires the window
//! is lowered for 200 ms and a round so that a queue the model did not
//! cause drains and the delay is measured again.

use std::time::{Duration, Instant};

use super::{Bbr, Mode, MIN_RTT_WINDOW, PROBE_RTT_BDP_GAIN, PROBE_RTT_DURATION};

impl Bbr {
    /// The min RTT filter and ProbeRTT (§4.1.2, §4.3.5).
    pub(super) fn update_min_rtt(&mut self, now: Instant, rtt: Option<Duration>, in_flight: u64) {
        let expired = self
            .min_rtt_stamp
            .is_some_and(|stamp| now.saturating_duration_since(stamp) > MIN_RTT_WINDOW);
        let probing = expired && !self.idle_restart && self.min_rtt.is_some();
        if let Some(rtt) = rtt {
            match self.min_rtt {
                Some(min) if rtt < min || (expired && !probing) => {
                    self.min_rtt = Some(rtt);
                    self.min_rtt_stamp = Some(now);
                }
                Some(min) if rtt <= min + min / 64 => self.min_rtt_stamp = Some(now),
                Some(_) => {}
                None => {
                    self.min_rtt = Some(rtt);
                    self.min_rtt_stamp = Some(now);
                }
            }
            if self.mode == Mode::ProbeRtt || probing {
                self.probe_rtt_min = Some(self.probe_rtt_min.map_or(rtt, |m| m.min(rtt)));
            }
        }
        if probing && self.mode != Mode::ProbeRtt {
            // The expired minimum stays until ProbeRTT has measured a new
            // one: taking the sample at hand (Linux does, then drains to 4
            // packets) left a cellular link's queue inside the minimum, and
            // a window sized from it kept the queue full (in the lab the
            // minimum climbed from 61 to 346 ms in 30 s).
            self.mode = Mode::ProbeRtt;
            self.save_cwnd();
            self.probe_rtt_done = None;
        }
        if self.mode == Mode::ProbeRtt {
            match self.probe_rtt_done {
                None if in_flight <= self.probe_rtt_cwnd() => {
                    self.probe_rtt_done = Some(now + PROBE_RTT_DURATION);
                    self.probe_rtt_round_done = false;
                    self.next_round_delivered = self.rate.delivered();
                }
                None => {}
                Some(_) => {
                    if self.round_start {
                        self.probe_rtt_round_done = true;
                    }
                    if self.probe_rtt_round_done {
                        self.check_probe_rtt_done(now);
                    }
                }
            }
        }
        if rtt.is_some() {
            self.idle_restart = false;
        }
    }

    pub(super) fn check_probe_rtt_done(&mut self, now: Instant) {
        if self.probe_rtt_done.is_some_and(|done| now >= done) {
            if let Some(measured) = self.probe_rtt_min.take() {
                self.min_rtt = Some(measured);
            }
            self.min_rtt_stamp = Some(now);
            self.cwnd = self.cwnd.max(self.prior_cwnd);
            self.probe_rtt_done = None;
            if self.full_bandwidth_reached {
                self.enter_probe_bw(now);
            } else {
                self.mode = Mode::Startup;
            }
        }
    }

    pub(super) fn probe_rtt_cwnd(&self) -> u64 {
        self.bdp(PROBE_RTT_BDP_GAIN).max(self.min_cwnd())
    }
}
