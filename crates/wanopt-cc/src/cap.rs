//! A rate cap: a ceiling on the sending rate that the controller never goes
//! above, whatever it measures, for a link whose rate is declared (a path
//! of a bond given `rate=20mbit`: a shaper or a contract drops or bills
//! what goes over it, and a bond's other paths should carry the rest).
//!
//! The cap bounds both of the controller's decisions:
//!
//! - **The pacing rate** is never above the cap, in every mode (STARTUP's
//!   2.885 and PROBE_BW's 1.25 gains included), and there is a pacing rate
//!   from the first packet on, the cap itself, where without a cap there
//!   is none until the first RTT is measured.
//! - **The window** is at most `cap × (min_rtt + queue target)`, the queue
//!   target the moving bottleneck's (`moving.rs`: [`QUEUE_TARGET`] or half
//!   the min RTT, whichever is larger), and at least four datagrams: enough
//!   to keep the capped rate flowing through a round trip and its ack
//!   delays, not a window that a burst after a stall or a queue elsewhere
//!   could empty far above the cap.

use super::moving::QUEUE_TARGET;
use super::{mul_rate, Bbr};

impl Bbr {
    /// Caps the sending rate at `cap` bytes per second (`None`: no cap, the
    /// default): the pacing rate never goes above it and the window is
    /// bounded to the cap times the min RTT plus a short queue (see
    /// `cap.rs`). Takes effect at once and lasts until changed. A cap of 0
    /// is taken as 1 byte per second.
    pub fn set_rate_cap(&mut self, cap: Option<u64>) {
        self.rate_cap = cap.map(|cap| cap.max(1));
        self.pacing_rate = self.capped_rate(self.pacing_rate);
        if let Some(bound) = self.cap_window() {
            self.cwnd = self.cwnd.min(bound).max(self.min_cwnd());
        }
    }

    /// The rate cap in bytes per second, if one is set
    /// ([`Bbr::set_rate_cap`]).
    pub fn rate_cap(&self) -> Option<u64> {
        self.rate_cap
    }

    /// `rate` (bytes per second), at most the cap.
    pub(super) fn capped_rate(&self, rate: u64) -> u64 {
        self.rate_cap.map_or(rate, |cap| rate.min(cap))
    }

    /// The most the window may be under the cap: `cap × (min_rtt + queue
    /// target)`, at least four datagrams; `None` without a cap or before
    /// the first RTT sample.
    pub(super) fn cap_window(&self) -> Option<u64> {
        let cap = self.rate_cap?;
        let rtt = self.min_rtt?;
        let target = QUEUE_TARGET.max(rtt / 2);
        Some(mul_rate(cap, rtt + target).max(self.min_cwnd()))
    }
}
