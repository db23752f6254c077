//! The typed results of the `fwsm` scenario: `results.json`, a row per
//! configuration and mode with the median of its downloads and the
//! window arithmetic beside it (columns in `docs/lab.md`).

use serde::{Deserialize, Serialize};

use super::matrix::{Config, Mode, WINDOW_BYTES};
use crate::kit::stats::{median, round1, round2, round3};

/// CPU busy at or above this share, percent, marks a row as bound by the
/// machine.
pub const CPU_BOUND_PCT: f64 = 95.0;

/// One configuration and mode.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Row {
    /// `no-firewall`, `default`, `tuned`, `jumbo`, `default-loss`,
    /// `tuned-loss` or `default-20ms`.
    pub config: String,
    /// What the guide's table says of it.
    pub guide: String,
    /// The guide's figure, Mbit/s (`null`: not in the guide).
    pub guide_mbit_s: Option<f64>,
    /// `cubic`, `bbr` (direct) or `wanopt`.
    pub mode: String,
    /// Whether the firewall is in the path.
    pub firewall: bool,
    /// The firewall's TCP rules (`lab up --middlebox`; `""`: none).
    pub middlebox: String,
    /// Whether the firewall reorders.
    pub reorder: bool,
    /// The path's MTU.
    pub mtu: u16,
    /// Round-trip delay the emulator adds, ms.
    pub rtt_ms: u64,
    /// Random loss each way, percent.
    pub loss_pct: f64,
    /// The idle path's round trip as `ping` measured it (its minimum), ms.
    pub idle_rtt_ms: Option<f64>,
    /// TCP payload per full segment (the MSS the rules leave, less 12
    /// bytes of timestamps).
    pub payload_bytes: u64,
    /// What one flow of full segments can carry through the firewall (or
    /// the ports), Mbit/s of payload.
    pub ceiling_mbit_s: f64,
    /// What the hosts' 256 KB window allows at the idle round trip
    /// (window / RTT), Mbit/s.
    pub window_ceiling_mbit_s: Option<f64>,
    /// The window the path needs (the ceiling × the idle round trip), bytes.
    pub bdp_bytes: Option<u64>,
    /// The median download's goodput, Mbit/s.
    pub mbit_s: f64,
    /// Every download's goodput, in order.
    pub runs_mbit_s: Vec<f64>,
    /// `mbit_s` over the guide's figure.
    pub of_guide: Option<f64>,
    /// The median of the server's retransmitted segments per download
    /// (direct; `null` through wanopt).
    pub retrans_segs: Option<u64>,
    /// Frames the firewall reordered, both ways, over all downloads.
    pub reordered: u64,
    /// Frames dropped at the firewall's queue, both ways, over all downloads.
    pub queue_drops: u64,
    /// The median share of the machine's CPU busy during a download,
    /// percent (the emulator, the nodes and the hosts share it).
    pub cpu_busy_pct: Option<f64>,
}

/// What one download measured, as the row keeps it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Run {
    /// Goodput, Mbit/s.
    pub mbit_s: f64,
    /// The server's retransmitted segments (direct).
    pub retrans_segs: Option<u64>,
    /// Frames reordered.
    pub reordered: u64,
    /// Frames dropped at the queue.
    pub queue_drops: u64,
    /// The machine's CPU busy, percent.
    pub cpu_busy_pct: Option<f64>,
}

impl Row {
    /// The row of `mode` over `config` from its downloads and the idle
    /// round trip.
    pub fn new(config: &Config, mode: Mode, idle_rtt_ms: Option<f64>, runs: &[Run]) -> Row {
        let goodputs: Vec<f64> = runs.iter().map(|r| round2(r.mbit_s)).collect();
        let mbit_s = median(&goodputs).unwrap_or(0.0);
        let retrans: Vec<f64> = runs
            .iter()
            .filter_map(|r| r.retrans_segs.map(|s| s as f64))
            .collect();
        let ceiling = config.ceiling_mbps();
        let rtt = idle_rtt_ms.filter(|ms| *ms > 0.0);
        Row {
            config: config.name.into(),
            guide: config.guide.into(),
            guide_mbit_s: config.guide_mbps,
            mode: mode.name().into(),
            firewall: config.firewall,
            middlebox: config.rules.into(),
            reorder: config.reorder,
            mtu: config.mtu,
            rtt_ms: config.rtt_ms,
            loss_pct: config.loss_pct,
            idle_rtt_ms: idle_rtt_ms.map(round3),
            payload_bytes: config.payload(),
            ceiling_mbit_s: round1(ceiling),
            window_ceiling_mbit_s: rtt.map(|ms| round1(WINDOW_BYTES as f64 * 8.0 / ms / 1e3)),
            bdp_bytes: rtt.map(|ms| (ceiling * 1e6 / 8.0 * ms / 1e3).round() as u64),
            mbit_s,
            runs_mbit_s: goodputs,
            of_guide: config.guide_mbps.map(|g| round2(mbit_s / g)),
            retrans_segs: median(&retrans).map(|s| s.round() as u64),
            reordered: runs.iter().map(|r| r.reordered).sum(),
            queue_drops: runs.iter().map(|r| r.queue_drops).sum(),
            cpu_busy_pct: median(
                &runs
                    .iter()
                    .filter_map(|r| r.cpu_busy_pct)
                    .collect::<Vec<_>>(),
            )
            .map(round1),
        }
    }

    /// Whether the machine's CPU was (nearly) all busy: the rate is then
    /// this machine's, not the path's.
    pub fn cpu_bound(&self) -> bool {
        self.cpu_busy_pct.is_some_and(|pct| pct >= CPU_BOUND_PCT)
    }

    /// `wanopt window` for this row's path: its ceiling, idle round trip,
    /// segment and the hosts' window.
    pub fn window_command(&self) -> Option<String> {
        let rtt = self.idle_rtt_ms.filter(|ms| *ms > 0.0)?;
        Some(format!(
            "wanopt window --rate {}mbit --rtt {}us --mss {} --window {}",
            self.ceiling_mbit_s.round(),
            (rtt * 1e3).round(),
            self.payload_bytes,
            WINDOW_BYTES
        ))
    }
}

/// A configuration and mode not measured, and why.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Skipped {
    /// The configuration.
    pub config: String,
    /// The mode.
    pub mode: String,
    /// Why.
    pub reason: String,
}

/// What `results.json` holds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Results {
    /// `fwsm`.
    pub scenario: String,
    /// Whether this was `--quick`.
    pub quick: bool,
    /// Downloads per configuration and mode.
    pub runs: usize,
    /// Each download's length, seconds.
    pub seconds: u64,
    /// The rows measured.
    pub rows: Vec<Row>,
    /// What was not measured.
    pub skipped: Vec<Skipped>,
    /// Flow resets the nodes logged (any fails the run).
    pub flow_resets: Vec<String>,
}

impl Results {
    /// The row of `config` and `mode`, if measured.
    pub fn row(&self, config: &str, mode: &str) -> Option<&Row> {
        self.rows
            .iter()
            .find(|r| r.config == config && r.mode == mode)
    }

    /// The best direct row of `config`.
    pub fn best_direct(&self, config: &str) -> Option<&Row> {
        self.rows
            .iter()
            .filter(|r| r.config == config && r.mode != Mode::Wanopt.name())
            .max_by(|a, b| a.mbit_s.total_cmp(&b.mbit_s))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fwsm::matrix::CONFIGS;

    #[test]
    fn a_row_is_the_median_download_with_the_window_arithmetic() {
        let run = |mbit_s, retrans| Run {
            mbit_s,
            retrans_segs: Some(retrans),
            reordered: 10,
            queue_drops: 0,
            cpu_busy_pct: Some(96.0),
        };
        let default = &CONFIGS[1];
        let row = Row::new(
            default,
            Mode::Cubic,
            Some(0.25),
            &[run(400.0, 90), run(450.0, 70), run(500.0, 80)],
        );
        assert_eq!(row.mbit_s, 450.0);
        assert_eq!(row.retrans_segs, Some(80));
        assert_eq!(row.reordered, 30);
        assert!(row.cpu_bound());
        assert_eq!(row.of_guide, Some(0.98));
        // 256 KiB in 0.25 ms: 8.4 Gbit/s, the window does not bind.
        assert_eq!(row.window_ceiling_mbit_s, Some(8388.6));
        assert_eq!(row.bdp_bytes, Some(18_917));
        assert_eq!(
            row.window_command().as_deref(),
            Some("wanopt window --rate 605mbit --rtt 250us --mss 1368 --window 262144")
        );
        let wan = Row::new(&CONFIGS[6], Mode::Wanopt, None, &[run(600.0, 0)]);
        assert_eq!((wan.window_ceiling_mbit_s, wan.of_guide), (None, None));
        assert_eq!(wan.window_command(), None);
        let json = serde_json::to_value(&wan).unwrap_or_default();
        assert_eq!(json["config"], "default-20ms");
        assert_eq!(json["mode"], "wanopt");
    }
}
