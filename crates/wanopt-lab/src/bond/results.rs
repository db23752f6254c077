//! The typed results of the `bond` scenario: `results.json`, whose rows
//! keep the scenario's interface contract (`mode`, `link1`, `link2`,
//! `event`, `workload`, `mbit_s`, `p99_ms`, `loss_pct`; `null` where a
//! figure does not apply) and add their own fields. A row is a cell: with
//! several runs its figures are the runs' medians, its resets and wrong
//! bytes their sums.

use serde::{Deserialize, Serialize};

use super::matrix::{link2_spec, Cell, SUM_MBPS};
use super::measure::{DownloadFigures, VoiceFigures};
use crate::kit::stats::{median, round1, round2};

/// One cell.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Row {
    /// `direct`, `wanopt-failover`, `wanopt-bond` or `wanopt-path2`.
    pub mode: String,
    /// Link 1's spec (`down`: cut for the whole cell).
    pub link1: String,
    /// Link 2's spec.
    pub link2: String,
    /// `none`, `loss` or `cut`.
    pub event: String,
    /// `bulk` or `voice`.
    pub workload: String,
    /// The download's goodput, Mbit/s.
    pub mbit_s: Option<f64>,
    /// The voice stream's one-way delay p99, the worse direction's, ms.
    pub p99_ms: Option<f64>,
    /// The voice stream's delivered loss, the worse direction's, percent.
    pub loss_pct: Option<f64>,
    /// `mbit_s` over the two links' sum (50 Mbit/s), percent.
    pub of_sum_pct: Option<f64>,
    /// Connections of the download that ended other than by the client
    /// (reset, failed, closed early): must be 0.
    pub resets: Option<u64>,
    /// Bytes of the download that were not the payload's: must be 0.
    pub wrong_bytes: Option<u64>,
    /// Bytes of the download checked.
    pub verified_bytes: Option<u64>,
    /// The longest time between two arrivals of the download, ms.
    pub longest_stall_ms: Option<f64>,
    /// The download's goodput from 1 s after link 1's cut to its return,
    /// Mbit/s (`cut`).
    pub cut_mbit_s: Option<f64>,
    /// From link 1's return to the end of the first 1 s at 90% of the
    /// sum, s (`cut`; `null`: not within the download).
    pub recovered_s: Option<f64>,
    /// The voice stream's median one-way delay, ms.
    pub p50_ms: Option<f64>,
    /// Its one-way delay p99 client to server, ms.
    pub p99_up_ms: Option<f64>,
    /// Its one-way delay p99 server to client, ms.
    pub p99_down_ms: Option<f64>,
    /// Its delivered loss client to server, percent.
    pub loss_up_pct: Option<f64>,
    /// Its delivered loss server to client, percent.
    pub loss_down_pct: Option<f64>,
    /// Voice copies delivered twice (must be 0).
    pub duplicates: Option<u64>,
    /// The rates the edge declared on links 1 and 2, Mbit/s
    /// (`wanopt-shaped`; `null`: none).
    #[serde(default)]
    pub declared_mbit_s: Option<Vec<f64>>,
    /// The most each link (1, 2) was handed in any 100 ms, either way,
    /// Mbit/s of IP packets (the emulators' `peak_ip_bytes_100ms`; the
    /// greatest of the runs).
    #[serde(default)]
    pub peak_mbit_s: Option<Vec<f64>>,
    /// The path the edge's real-time datagrams took at the end of every
    /// run, by an SLA's choice (`wanopt-sla`; `null`: none, or the runs
    /// differ).
    #[serde(default)]
    pub realtime_path: Option<u8>,
    /// The download's length, s.
    pub seconds: u64,
    /// Runs measured (the figures are their medians).
    pub runs: usize,
    /// Each run's `mbit_s`.
    pub runs_mbit_s: Vec<f64>,
    /// What went wrong or what to know, if anything.
    pub note: Option<String>,
}

/// A cell not measured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Skipped {
    /// The mode.
    pub mode: String,
    /// The event.
    pub event: String,
    /// The workload.
    pub workload: String,
    /// Why.
    pub reason: String,
}

/// `results.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Results {
    /// `bond`.
    pub scenario: String,
    /// Whether this was a `--quick` run.
    pub quick: bool,
    /// The links, the workloads, the downloads' length and the runs.
    pub settings: serde_json::Value,
    /// The measurements, a row per cell.
    pub rows: Vec<Row>,
    /// Cells not measured, with the reason.
    pub skipped: Vec<Skipped>,
    /// Every flow reset the nodes logged: any fails the run.
    #[serde(default)]
    pub flow_resets: Vec<String>,
    /// The downloads' series, for the plot (written to `series/`, not to
    /// `results.json`).
    #[serde(skip)]
    pub series: Vec<CellSeries>,
}

/// A download's goodput over time in one run of a cell.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CellSeries {
    /// The cell's mode.
    pub mode: String,
    /// The cell's event.
    pub event: String,
    /// The cell's workload.
    pub workload: String,
    /// The run, from 1.
    pub run: usize,
    /// When link 1 went down and up again, s since the download's start.
    pub marks: Vec<(String, f64)>,
    /// Goodput per 100 ms, Mbit/s.
    pub mbit_s: Vec<f64>,
}

impl Row {
    /// A row of `cell` with no figures yet.
    pub fn new(cell: &Cell, seconds: u64) -> Row {
        Row {
            mode: cell.mode.name().into(),
            link1: cell.link1_label(),
            link2: link2_spec(),
            event: cell.event.name().into(),
            workload: cell.workload.name().into(),
            mbit_s: None,
            p99_ms: None,
            loss_pct: None,
            of_sum_pct: None,
            resets: None,
            wrong_bytes: None,
            verified_bytes: None,
            longest_stall_ms: None,
            cut_mbit_s: None,
            recovered_s: None,
            p50_ms: None,
            p99_up_ms: None,
            p99_down_ms: None,
            loss_up_pct: None,
            loss_down_pct: None,
            duplicates: None,
            declared_mbit_s: cell.mode.declared_mbps().map(|r| r.to_vec()),
            peak_mbit_s: None,
            realtime_path: None,
            seconds,
            runs: 0,
            runs_mbit_s: Vec::new(),
            note: None,
        }
    }

    /// One run's row from its download's and its voice's figures.
    pub fn run(
        cell: &Cell,
        seconds: u64,
        download: Option<&DownloadFigures>,
        voice: Option<&VoiceFigures>,
    ) -> Row {
        let mut row = Row::new(cell, seconds);
        row.runs = 1;
        if let Some(d) = download {
            row.mbit_s = Some(d.mbit_s);
            row.runs_mbit_s = vec![d.mbit_s];
            row.of_sum_pct = Some(round1(d.mbit_s / SUM_MBPS * 100.0));
            row.resets = Some(d.resets);
            row.wrong_bytes = Some(d.wrong_bytes);
            row.verified_bytes = Some(d.verified_bytes);
            row.longest_stall_ms = Some(d.longest_stall_ms);
            row.cut_mbit_s = d.cut_mbit_s;
            row.recovered_s = d.recovered_s;
            row.note = d.note.clone();
        }
        if let Some(v) = voice {
            let worse = |a: Option<f64>, b: Option<f64>| match (a, b) {
                (Some(a), Some(b)) => Some(a.max(b)),
                (a, b) => a.or(b),
            };
            row.p99_ms = worse(v.p99_up_ms, v.p99_down_ms);
            row.loss_pct = worse(v.loss_up_pct, v.loss_down_pct);
            row.p50_ms = v.p50_ms;
            row.p99_up_ms = v.p99_up_ms;
            row.p99_down_ms = v.p99_down_ms;
            row.loss_up_pct = v.loss_up_pct;
            row.loss_down_pct = v.loss_down_pct;
            row.duplicates = Some(v.duplicates);
        }
        row
    }

    /// The cell's row from its runs' (at least one): each figure the
    /// median of the runs that have it, counts summed, notes joined.
    pub fn of_runs(runs: &[Row]) -> Option<Row> {
        let first = runs.first()?;
        let mid = |figure: fn(&Row) -> Option<f64>| {
            let values: Vec<f64> = runs.iter().filter_map(figure).collect();
            median(&values).map(round2)
        };
        let sum =
            |count: fn(&Row) -> Option<u64>| runs.iter().filter_map(count).reduce(|a, b| a + b);
        let notes: Vec<String> = runs
            .iter()
            .enumerate()
            .filter_map(|(i, r)| Some(format!("run {}: {}", i + 1, r.note.as_ref()?)))
            .collect();
        Some(Row {
            mbit_s: mid(|r| r.mbit_s),
            p99_ms: mid(|r| r.p99_ms),
            loss_pct: mid(|r| r.loss_pct),
            of_sum_pct: mid(|r| r.of_sum_pct).map(round1),
            resets: sum(|r| r.resets),
            wrong_bytes: sum(|r| r.wrong_bytes),
            verified_bytes: sum(|r| r.verified_bytes),
            longest_stall_ms: mid(|r| r.longest_stall_ms),
            cut_mbit_s: mid(|r| r.cut_mbit_s),
            recovered_s: mid(|r| r.recovered_s),
            p50_ms: mid(|r| r.p50_ms),
            p99_up_ms: mid(|r| r.p99_up_ms),
            p99_down_ms: mid(|r| r.p99_down_ms),
            loss_up_pct: mid(|r| r.loss_up_pct),
            loss_down_pct: mid(|r| r.loss_down_pct),
            duplicates: sum(|r| r.duplicates),
            peak_mbit_s: runs
                .iter()
                .filter_map(|r| r.peak_mbit_s.clone())
                .reduce(|a, b| a.iter().zip(&b).map(|(x, y)| x.max(*y)).collect()),
            realtime_path: runs
                .iter()
                .map(|r| r.realtime_path)
                .reduce(|a, b| a.filter(|a| Some(*a) == b))
                .flatten(),
            runs: runs.len(),
            runs_mbit_s: runs.iter().flat_map(|r| r.runs_mbit_s.clone()).collect(),
            note: (!notes.is_empty()).then(|| {
                if runs.len() == 1 {
                    first.note.clone().unwrap_or_default()
                } else {
                    notes.join("; ")
                }
            }),
            ..first.clone()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bond::matrix::{Event, Mode, Workload};

    fn cell(mode: Mode, event: Event, workload: Workload) -> Cell {
        Cell {
            mode,
            event,
            workload,
        }
    }

    fn download(mbit_s: f64, stall: f64) -> DownloadFigures {
        DownloadFigures {
            mbit_s,
            longest_stall_ms: stall,
            cut_mbit_s: Some(19.5),
            recovered_s: Some(2.1),
            resets: 0,
            wrong_bytes: 0,
            verified_bytes: 80_000_000,
            series_mbit_s: vec![],
            note: None,
        }
    }

    /// The contract's keys, with its names and types, in every row:
    /// figures that do not apply are `null`, never absent.
    #[test]
    fn rows_keep_the_interface_contract() {
        let bulk = cell(Mode::WanoptBond, Event::Cut, Workload::Bulk);
        let voice = cell(Mode::WanoptPath2, Event::None, Workload::Voice);
        let v = VoiceFigures {
            p50_ms: Some(20.4),
            p99_up_ms: Some(21.5),
            p99_down_ms: Some(22.25),
            loss_up_pct: Some(0.0),
            loss_down_pct: Some(0.05),
            duplicates: 0,
        };
        let results = Results {
            scenario: "bond".into(),
            quick: true,
            settings: serde_json::Value::Null,
            rows: vec![
                Row::run(&bulk, 15, Some(&download(46.0, 180.0)), None),
                Row::run(&voice, 15, None, Some(&v)),
            ],
            skipped: vec![],
            flow_resets: vec![],
            series: vec![],
        };
        let json = serde_json::to_value(&results).unwrap_or_default();
        for row in json["rows"].as_array().into_iter().flatten() {
            for key in [
                "mode",
                "link1",
                "link2",
                "event",
                "workload",
                "mbit_s",
                "p99_ms",
                "loss_pct",
                "resets",
                "wrong_bytes",
                "longest_stall_ms",
                "recovered_s",
            ] {
                assert!(row.get(key).is_some(), "{key} missing from {row}");
            }
        }
        let b = &json["rows"][0];
        assert_eq!(b["mode"], "wanopt-bond");
        assert_eq!(b["link1"], "rtt 80ms rate 30mbit queue 1bdp");
        assert_eq!(b["link2"], "rtt 40ms rate 20mbit queue 1bdp");
        assert_eq!(b["event"], "cut");
        assert_eq!(b["workload"], "bulk");
        assert_eq!(b["mbit_s"], 46.0);
        assert_eq!(b["of_sum_pct"], 92.0);
        assert_eq!(b["resets"], 0);
        assert!(b["p99_ms"].is_null() && b["loss_pct"].is_null());
        let v = &json["rows"][1];
        assert_eq!(v["link1"], "down");
        assert_eq!(v["p99_ms"], 22.25);
        assert_eq!(v["loss_pct"], 0.05);
        assert!(v["mbit_s"].is_null() && v["resets"].is_null());
        let back: Results = serde_json::from_value(json).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(back, results);
    }

    #[test]
    fn a_cell_of_several_runs_is_their_medians_and_their_sums() {
        let c = cell(Mode::WanoptFailover, Event::Cut, Workload::Bulk);
        let mut reset = download(20.0, 5_000.0);
        reset.resets = 1;
        reset.wrong_bytes = 3;
        reset.recovered_s = None;
        reset.note = Some("the connection failed: reset".into());
        let mut runs = [
            Row::run(&c, 20, Some(&download(28.0, 150.0)), None),
            Row::run(&c, 20, Some(&reset), None),
            Row::run(&c, 20, Some(&download(29.0, 170.0)), None),
        ];
        runs[0].peak_mbit_s = Some(vec![31.0, 12.5]);
        runs[2].peak_mbit_s = Some(vec![30.5, 21.0]);
        let row = Row::of_runs(&runs).unwrap_or_else(|| panic!("a row"));
        assert_eq!(row.runs, 3);
        assert_eq!(row.mbit_s, Some(28.0));
        assert_eq!(row.runs_mbit_s, [28.0, 20.0, 29.0]);
        assert_eq!(row.longest_stall_ms, Some(170.0));
        assert_eq!(row.recovered_s, Some(2.1));
        assert_eq!((row.resets, row.wrong_bytes), (Some(1), Some(3)));
        // A link's peak is the greatest of the runs'.
        assert_eq!(row.peak_mbit_s, Some(vec![31.0, 21.0]));
        assert_eq!(row.declared_mbit_s, None);
        assert_eq!(
            row.note.as_deref(),
            Some("run 2: the connection failed: reset")
        );
        assert_eq!(Row::of_runs(&runs[..1]).map(|r| r.note), Some(None));
        assert_eq!(Row::of_runs(&[]), None);
    }
}
