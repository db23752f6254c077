//! The typed results of the `path-brokenness` scenario: `results.json`,
//! a row per download and the window-scale minimums (columns in
//! `docs/lab.md`).

use serde::{Deserialize, Serialize};

use super::matrix::{needed_wscale, paper_wscale, Cell, FILLS};
use crate::kit::stats::{round2, round3};

/// What one download measured, and where.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Row {
    /// `sack`, `wscale` or `ecn`.
    pub experiment: String,
    /// The policy's name (`sack`, `no-sack`, `ce-on-ect`, `wscale`...).
    pub policy: String,
    /// What the paper calls it.
    pub paper_policy: String,
    /// The lab's middlebox rules (`""`: none).
    pub middlebox: String,
    /// `reno`, `cubic`, `htcp`, `bbr` (direct) or `wanopt`.
    pub mode: String,
    /// The bottleneck rate, Mbit/s.
    pub rate_mbps: u64,
    /// Round-trip time, ms.
    pub rtt_ms: u64,
    /// Random loss each way, percent.
    pub loss_pct: f64,
    /// Whether the queue was RED marking ECN-capable packets.
    pub red_ecn: bool,
    /// The window-scale shift written into both SYNs.
    pub wscale: Option<u8>,
    /// The download's length, seconds.
    pub seconds: f64,
    /// Goodput over the whole download, Mbit/s.
    pub mbit_s: f64,
    /// Goodput over its second half, Mbit/s (the window-scale experiment's
    /// figure: slow start is over).
    pub second_half_mbit_s: f64,
    /// `second_half_mbit_s` over the link's rate.
    pub of_rate: f64,
    /// When the first byte arrived, seconds from the connect (`null`: none
    /// did).
    pub first_byte_s: Option<f64>,
    /// The longest time the download delivered nothing, seconds.
    pub longest_stall_s: f64,
    /// TCP segments the server retransmitted (`RetransSegs`; `null`
    /// through wanopt, whose server side crosses only a LAN).
    pub retrans_segs: Option<u64>,
    /// Frames the link's queue marked CE, both ways.
    pub ce_marked: u64,
    /// Frames the link dropped at its queue (RED included), both ways.
    pub queue_drops: u64,
    /// Frames the link dropped as random loss, both ways.
    pub lost_frames: u64,
}

/// What the lab's counters and the server said around a download.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Counters {
    /// TCP segments the server retransmitted.
    pub retrans_segs: Option<u64>,
    /// Frames marked CE at the queue.
    pub ce_marked: u64,
    /// Frames dropped at the queue.
    pub queue_drops: u64,
    /// Frames dropped as loss.
    pub lost_frames: u64,
}

/// The download's samples: `(seconds since the connect, bytes so far)`.
pub type Samples = [(f64, u64)];

/// Goodput between `from` and `to` seconds, Mbit/s.
fn mbit_s_between(samples: &Samples, from: f64, to: f64) -> f64 {
    let at = |t: f64| {
        samples
            .iter()
            .take_while(|(s, _)| *s <= t + 1e-9)
            .last()
            .map_or(0, |(_, b)| *b)
    };
    if to <= from {
        return 0.0;
    }
    at(to).saturating_sub(at(from)) as f64 * 8.0 / (to - from) / 1e6
}

/// The first sample with bytes, seconds.
fn first_byte_s(samples: &Samples) -> Option<f64> {
    samples.iter().find(|(_, b)| *b > 0).map(|(t, _)| *t)
}

/// The longest time between two samples that brought bytes (or from the
/// last one to the end of the run), seconds.
fn longest_stall_s(samples: &Samples, seconds: f64) -> f64 {
    let mut last_progress = 0.0;
    let mut last_bytes = 0;
    let mut longest: f64 = 0.0;
    for &(t, bytes) in samples {
        if bytes > last_bytes {
            longest = longest.max(t - last_progress);
            last_progress = t;
            last_bytes = bytes;
        }
    }
    longest.max(seconds - last_progress)
}

impl Row {
    /// The row of `cell` from the download's `samples` over `seconds` and
    /// the `counters` around it.
    pub fn new(
        cell: &Cell,
        seconds: f64,
        bytes: u64,
        samples: &Samples,
        counters: Counters,
    ) -> Row {
        let half = mbit_s_between(samples, seconds / 2.0, seconds);
        Row {
            experiment: cell.experiment.name().into(),
            policy: cell.policy.name.into(),
            paper_policy: cell.policy.paper.into(),
            middlebox: cell.rules(),
            mode: cell.mode.name().into(),
            rate_mbps: cell.link.rate_mbps,
            rtt_ms: cell.link.rtt_ms,
            loss_pct: cell.link.loss_pct,
            red_ecn: cell.link.red,
            wscale: cell.wscale,
            seconds: round2(seconds),
            mbit_s: round2(if seconds > 0.0 {
                bytes as f64 * 8.0 / seconds / 1e6
            } else {
                0.0
            }),
            second_half_mbit_s: round2(half),
            of_rate: round3(half / cell.link.rate_mbps as f64),
            first_byte_s: first_byte_s(samples).map(round2),
            longest_stall_s: round2(longest_stall_s(samples, seconds)),
            retrans_segs: counters.retrans_segs,
            ce_marked: counters.ce_marked,
            queue_drops: counters.queue_drops,
            lost_frames: counters.lost_frames,
        }
    }

    /// Whether it filled its link ([`FILLS`] of the rate in its second
    /// half).
    pub fn fills(&self) -> bool {
        self.of_rate >= FILLS
    }
}

/// The smallest window-scale shift that filled a rate at an RTT.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WscaleMinimum {
    /// The rate, Mbit/s.
    pub rate_mbps: u64,
    /// Round-trip time, ms.
    pub rtt_ms: u64,
    /// The congestion control (`null`: computed).
    pub mode: Option<String>,
    /// The smallest shift measured to fill the rate (`null`: computed, or
    /// none of those tried did).
    pub measured: Option<u8>,
    /// `ceil(log2(rate x RTT / 65535 bytes))`.
    pub computed: u8,
    /// The paper's figure.
    pub paper: Option<u8>,
    /// The shift the receiver's kernel announced (from its largest receive
    /// buffer): a smaller one written into the SYNs divides its windows by
    /// 2 to the difference.
    pub receiver_shift: Option<u8>,
}

impl WscaleMinimum {
    /// The computed row of a rate the emulator cannot carry.
    pub fn computed(rate_mbps: u64, rtt_ms: u64) -> WscaleMinimum {
        WscaleMinimum {
            rate_mbps,
            rtt_ms,
            mode: None,
            measured: None,
            computed: needed_wscale(rate_mbps, rtt_ms),
            paper: paper_wscale(rate_mbps, rtt_ms),
            receiver_shift: None,
        }
    }
}

/// A measurement not made, and why.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Skipped {
    /// The cell, as in a progress line.
    pub cell: String,
    /// Why.
    pub reason: String,
}

/// What `results.json` holds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Results {
    /// `path-brokenness`.
    pub scenario: String,
    /// Whether this was `--quick`.
    pub quick: bool,
    /// Every download.
    pub rows: Vec<Row>,
    /// The window-scale experiment's minimums: measured per rate, RTT and
    /// congestion control, and computed for 10 Gbit/s.
    pub wscale_minimums: Vec<WscaleMinimum>,
    /// What was not measured.
    pub skipped: Vec<Skipped>,
    /// Flow resets the nodes logged (any fails the run).
    pub flow_resets: Vec<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn goodput_first_byte_and_stalls_from_samples() {
        let samples = [
            (0.05, 0),
            (0.1, 1000),
            (0.5, 1000),
            (1.0, 125_000),
            (1.5, 200_000),
            (2.0, 250_000),
        ];
        assert!((mbit_s_between(&samples, 1.0, 2.0) - 1.0).abs() < 1e-9);
        assert_eq!(first_byte_s(&samples), Some(0.1));
        // Nothing from 0.1 to 1.0 s.
        assert!((longest_stall_s(&samples, 2.0) - 0.9).abs() < 1e-9);
        // A download that stops: the stall runs to the end.
        assert!((longest_stall_s(&samples, 10.0) - 8.0).abs() < 1e-9);
        assert_eq!(first_byte_s(&[(0.05, 0)]), None);
        let computed = WscaleMinimum::computed(10_000, 800);
        assert_eq!((computed.computed, computed.paper), (14, Some(13)));
    }
}
