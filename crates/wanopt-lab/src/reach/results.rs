//! The typed results of the `reach` scenario: `results.json`, a row per
//! case, mode and run.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::plan::{Case, Mode};

/// One case in one mode, one run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Row {
    /// What happened to UDP.
    pub case: Case,
    /// `direct` or `wanopt`.
    pub mode: Mode,
    /// The run (1 ...).
    pub run: u32,
    /// The transport of the edge's tunnel when the bulk download ran
    /// (`quic` or `tcp`; `null` direct, or when the node did not say).
    pub transport: Option<String>,
    /// Why the edge used it, as its status said.
    pub transport_why: Option<String>,
    /// The bulk download's goodput, Mbit/s (from the request to the last
    /// byte).
    pub mbit_s: Option<f64>,
    /// The first byte of a new flow: ms from the edge's start (from the
    /// lab's readiness, direct); in `blocked-mid` from the block.
    pub first_byte_ms: Option<f64>,
    /// The fetch on a warm tunnel, from the request to the last byte: the
    /// median of the run's fetches, ms.
    pub fetch_ms: Option<f64>,
    /// Every fetch of the run, ms.
    pub fetch_runs_ms: Vec<f64>,
    /// The fetch's floor: one round trip plus its bytes at the link's
    /// rate, ms.
    pub floor_ms: f64,
    /// When the edge's new flows moved: `policed`, from the edge's start
    /// to the TCP transport; `blocked-mid`, from the block to the TCP
    /// transport; `returns`, from UDP's return to a new flow on QUIC; ms.
    pub moved_after_ms: Option<f64>,
    /// `blocked-mid`: what became of the download open when UDP was
    /// blocked (`reset`, `continued`, or how it failed otherwise).
    pub open_flow: Option<String>,
    /// Flows the client saw reset.
    pub resets: u32,
    /// The flows the edge reset during the run, by the reason it counted.
    pub reset_reasons: BTreeMap<String, u64>,
    /// Bytes that arrived wrong, over every download of the run (always 0
    /// unless something broke).
    pub wrong_bytes: u64,
    /// What went wrong, if anything did.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub failures: Vec<String>,
}

impl Row {
    /// An empty row of `case`, `mode` and `run`, to fill in.
    pub fn new(case: Case, mode: Mode, run: u32, floor_ms: f64) -> Row {
        Row {
            case,
            mode,
            run,
            transport: None,
            transport_why: None,
            mbit_s: None,
            first_byte_ms: None,
            fetch_ms: None,
            fetch_runs_ms: Vec::new(),
            floor_ms,
            moved_after_ms: None,
            open_flow: None,
            resets: 0,
            reset_reasons: BTreeMap::new(),
            wrong_bytes: 0,
            failures: Vec::new(),
        }
    }
}

/// What `results.json` holds.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Results {
    /// `reach`.
    pub scenario: String,
    /// Whether this was `--quick`.
    pub quick: bool,
    /// The link's rate, Mbit/s.
    pub link_mbit: u32,
    /// The link's round trip, ms.
    pub rtt_ms: u32,
    /// The bulk download, bytes.
    pub bulk_bytes: u64,
    /// The fetch, bytes.
    pub fetch_bytes: u64,
    /// Whether the edge had `--transport` (without, it can only use QUIC).
    pub edge_transport: bool,
    /// Every case, mode and run.
    pub rows: Vec<Row>,
    /// Cells that did not run, and why.
    pub skipped: Vec<String>,
    /// Flow resets the nodes logged outside the `blocked-mid` case, where
    /// none is expected.
    pub flow_resets: Vec<String>,
}

impl Results {
    /// The rows of `case` and `mode`.
    pub fn rows_of(&self, case: Case, mode: Mode) -> impl Iterator<Item = &Row> {
        self.rows
            .iter()
            .filter(move |r| r.case == case && r.mode == mode)
    }

    /// The median bulk goodput of `case` and `mode`, Mbit/s.
    pub fn median_mbit_s(&self, case: Case, mode: Mode) -> Option<f64> {
        median(self.rows_of(case, mode).filter_map(|r| r.mbit_s).collect())
    }
}

/// The median of `values` (`None` for none).
pub fn median(mut values: Vec<f64>) -> Option<f64> {
    values.sort_by(f64::total_cmp);
    let n = values.len();
    match n {
        0 => None,
        _ if n % 2 == 1 => Some(values[n / 2]),
        _ => Some((values[n / 2 - 1] + values[n / 2]) / 2.0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_serialize_with_the_contracts_names() {
        let mut row = Row::new(Case::Blocked, Mode::Wanopt, 1, 68.8);
        row.transport = Some("tcp".into());
        row.mbit_s = Some(47.0);
        let json = serde_json::to_value(&row).unwrap_or_default();
        for key in [
            "case",
            "mode",
            "transport",
            "mbit_s",
            "first_byte_ms",
            "resets",
            "wrong_bytes",
            "fetch_ms",
            "floor_ms",
            "moved_after_ms",
        ] {
            assert!(json.get(key).is_some(), "{key} missing: {json}");
        }
        assert_eq!(json["case"], "blocked");
        assert_eq!(json["mode"], "wanopt");
        let results = Results {
            rows: vec![
                row.clone(),
                Row {
                    mbit_s: Some(45.0),
                    run: 2,
                    ..row.clone()
                },
            ],
            ..Results::default()
        };
        assert_eq!(
            results.median_mbit_s(Case::Blocked, Mode::Wanopt),
            Some(46.0)
        );
        assert_eq!(results.median_mbit_s(Case::Open, Mode::Wanopt), None);
        assert_eq!(median(vec![3.0, 1.0, 2.0]), Some(2.0));
    }
}
