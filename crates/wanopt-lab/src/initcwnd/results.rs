//! The typed results of the `initcwnd` scenario: `results.json`, a row per
//! path, file size and mode with the median of its runs (columns in
//! `docs/lab-results.md`).

use serde::{Deserialize, Serialize};

use super::matrix::{size_name, Mode, Path};
use crate::kit::stats::{median, round2, round3};

/// One path, file size and mode.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Row {
    /// The path's name (`rtt200`, `post`, ...).
    pub path: String,
    /// The bottleneck rate, Mbit/s.
    pub rate_mbps: f64,
    /// Round-trip time, ms.
    pub rtt_ms: u64,
    /// Random loss each way, percent.
    pub loss_pct: f64,
    /// The file, bytes.
    pub bytes: u64,
    /// The file as the tables name it (`180KB`).
    pub size: String,
    /// `icw2`, `icw4`, `icw10`, `wanopt-fresh` or `wanopt-warm`.
    pub mode: String,
    /// The server's initial window, segments (direct modes).
    pub initcwnd: Option<u32>,
    /// The median completion time, seconds, a run not done by the deadline
    /// counting as the slowest (`null` when the median is such a run).
    pub seconds: Option<f64>,
    /// Every run's completion time, in order (`null`: not done by the
    /// deadline).
    pub runs_seconds: Vec<Option<f64>>,
    /// One round trip plus the file at the link's rate, seconds.
    pub floor_s: f64,
    /// `seconds` over `floor_s`.
    pub x_floor: Option<f64>,
    /// The post's figure for this file and mode on its path, seconds.
    pub reference_s: Option<f64>,
}

impl Row {
    /// The row of `mode` for a file of `bytes` over `path`, from the runs'
    /// completion times.
    pub fn new(path: &Path, bytes: u64, mode: Mode, runs: Vec<Option<f64>>) -> Row {
        let all: Vec<f64> = runs.iter().map(|s| s.unwrap_or(f64::INFINITY)).collect();
        let seconds = median(&all).filter(|s| s.is_finite()).map(round3);
        let floor_s = round3(path.floor_s(bytes));
        Row {
            path: path.name.into(),
            rate_mbps: path.rate_mbps,
            rtt_ms: path.rtt_ms,
            loss_pct: path.loss_pct,
            bytes,
            size: size_name(bytes),
            mode: mode.name().into(),
            initcwnd: mode.initcwnd(),
            seconds,
            runs_seconds: runs.into_iter().map(|s| s.map(round3)).collect(),
            floor_s,
            x_floor: seconds.map(|s| round2(s / floor_s)),
            reference_s: mode.reference_s(path, bytes),
        }
    }

    /// Runs that did not finish by the deadline.
    pub fn unfinished(&self) -> usize {
        self.runs_seconds.iter().filter(|s| s.is_none()).count()
    }
}

/// A path, size and mode not measured, and why.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Skipped {
    /// The path's name.
    pub path: String,
    /// The file as the tables name it.
    pub size: String,
    /// The mode.
    pub mode: String,
    /// Why.
    pub reason: String,
}

/// What `results.json` holds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Results {
    /// `initcwnd`.
    pub scenario: String,
    /// Whether this was `--quick`.
    pub quick: bool,
    /// Transfers per path, size and mode.
    pub runs: usize,
    /// The rows measured.
    pub rows: Vec<Row>,
    /// What was not measured.
    pub skipped: Vec<Skipped>,
    /// Flow resets the nodes logged (any fails the run).
    pub flow_resets: Vec<String>,
}

impl Results {
    /// The row of `path`, `size` and `mode`, if measured.
    pub fn row(&self, path: &str, size: &str, mode: &str) -> Option<&Row> {
        self.rows
            .iter()
            .find(|r| r.path == path && r.size == size && r.mode == mode)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::initcwnd::matrix::{POST, POST_FILE, RTT200};

    #[test]
    fn a_row_is_the_median_of_its_runs_the_unfinished_ones_slowest() {
        let row = Row::new(
            &RTT200,
            POST_FILE,
            Mode::Icw2,
            vec![Some(0.7), None, Some(0.9)],
        );
        assert_eq!(row.seconds, Some(0.9));
        assert_eq!(row.unfinished(), 1);
        assert_eq!(row.floor_s, 0.272);
        assert_eq!(row.x_floor, Some(3.31));
        let row = Row::new(&RTT200, POST_FILE, Mode::Icw2, vec![None, None, Some(0.9)]);
        assert_eq!(row.seconds, None);
        assert_eq!(row.initcwnd, Some(2));
        assert_eq!(row.reference_s, None);
        let post = Row::new(&POST, POST_FILE, Mode::Icw10, vec![None]);
        assert_eq!((post.seconds, post.x_floor), (None, None));
        assert_eq!(post.reference_s, Some(2.5));
        let json = serde_json::to_value(&post).unwrap_or_default();
        assert_eq!(json["mode"], "icw10");
        assert_eq!(json["size"], "180KB");
    }
}
