//! The typed results of the `realtime` scenario: `results.json`, whose
//! rows keep the scenario's interface contract (`stream`, `loss_pct`, `paths`,
//! `mode`, `event`, `delivered_loss_pct`, `delay_p50_ms`, `delay_p99_ms`,
//! `jitter_ms`, `max_gap_ms`, `throughput_mbps`; `null` where a figure does
//! not apply) and add their own fields.

use serde::{Deserialize, Serialize};

use super::matrix::{Cell, Mode};
use super::measure::{Bin, StreamFigures};
use crate::kit::stats::{round2, round3};

/// One stream in one direction of one cell.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Row {
    /// `voice`, `video` or `bulk`.
    pub stream: String,
    /// `up` (client to server) or `down`.
    pub direction: String,
    /// Mean loss on link 1 each way, percent.
    pub loss_pct: f64,
    /// Gilbert-Elliott bursts on link 1 rather than random loss.
    pub burst: bool,
    /// Random loss on link 2 each way, percent; `null`: no link 2.
    pub link2_loss_pct: Option<f64>,
    /// WAN paths the mode uses: 1 or 2.
    pub paths: u8,
    /// `direct`, `wanopt-fec` or `wanopt-dup`.
    pub mode: String,
    /// `none` or `link1-down`.
    pub event: String,
    /// Packets sent and never delivered, percent (streams).
    pub delivered_loss_pct: Option<f64>,
    /// Median one-way delay, ms (streams).
    pub delay_p50_ms: Option<f64>,
    /// 99th percentile one-way delay, ms (streams).
    pub delay_p99_ms: Option<f64>,
    /// `delay_p99_ms` minus the `direct` row's under the same condition
    /// and event, ms (wanopt modes).
    pub added_delay_p99_ms: Option<f64>,
    /// RFC 3550 interarrival jitter averaged over the run, ms (streams).
    pub jitter_ms: Option<f64>,
    /// The longest time between consecutive arrivals, ms (streams).
    pub max_gap_ms: Option<f64>,
    /// Goodput, Mbit/s (bulk).
    pub throughput_mbps: Option<f64>,
    /// From link 1's cut until a 100 ms window carries 80% of the rate of
    /// the 2 s before, s (bulk, `link1-down`); `null` if it never did.
    pub recovery_s: Option<f64>,
    /// Packets sent (streams).
    pub sent: Option<u64>,
    /// Packets delivered, first copies (streams).
    pub received: Option<u64>,
    /// Copies delivered more than once (streams; must be 0).
    pub duplicates_delivered: Option<u64>,
    /// IP bytes on the emulated links (both directions) over the payload
    /// of every stream delivered, minus 1, percent (the cell's, on each
    /// of its rows).
    pub overhead_pct: Option<f64>,
    /// The FEC residual loss (after repair) of the tunnel in the row's
    /// direction, as its sender reports it at the end of the cell
    /// (`/status`), percent (wanopt modes).
    pub fec_residual_pct: Option<f64>,
    /// CPU seconds of the nodes per GB carried (the CPU cell only).
    pub cpu_s_per_gb: Option<f64>,
    /// `streams` (voice, video and bulk at once).
    pub workload: String,
    /// The cell's length, s.
    pub seconds: u64,
    /// What went wrong or what to know, if anything.
    pub note: Option<String>,
}

/// A cell not measured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Skipped {
    /// Mean loss on link 1, percent.
    pub loss_pct: f64,
    /// Bursts.
    pub burst: bool,
    /// The mode.
    pub mode: String,
    /// The event.
    pub event: String,
    /// Why.
    pub reason: String,
}

/// `results.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Results {
    /// `realtime`.
    pub scenario: String,
    /// Whether this was a `--quick` run.
    pub quick: bool,
    /// The streams, the cells' length, the links.
    pub settings: serde_json::Value,
    /// The measurements.
    pub rows: Vec<Row>,
    /// Cells not measured, with the reason.
    pub skipped: Vec<Skipped>,
    /// Every flow reset the nodes logged: any fails the run.
    #[serde(default)]
    pub flow_resets: Vec<String>,
    /// The streams' series, for the plots (written to `series/`, not to
    /// `results.json`).
    #[serde(skip)]
    pub series: Vec<CellSeries>,
}

impl Row {
    /// A row of `cell` with no figures yet.
    pub fn new(cell: &Cell, stream: &str, direction: &str, seconds: u64) -> Row {
        let c = &cell.condition;
        Row {
            stream: stream.into(),
            direction: direction.into(),
            loss_pct: c.loss_pct,
            burst: c.burst,
            link2_loss_pct: c.link2_loss_pct,
            paths: cell.mode.paths(),
            mode: cell.mode.name().into(),
            event: cell.event.name().into(),
            delivered_loss_pct: None,
            delay_p50_ms: None,
            delay_p99_ms: None,
            added_delay_p99_ms: None,
            jitter_ms: None,
            max_gap_ms: None,
            throughput_mbps: None,
            recovery_s: None,
            sent: None,
            received: None,
            duplicates_delivered: None,
            overhead_pct: None,
            fec_residual_pct: None,
            cpu_s_per_gb: None,
            workload: "streams".into(),
            seconds,
            note: None,
        }
    }

    /// A stream's row from its figures.
    pub fn stream(
        cell: &Cell,
        stream: &str,
        direction: &str,
        seconds: u64,
        f: &StreamFigures,
    ) -> Row {
        let mut row = Row::new(cell, stream, direction, seconds);
        row.delivered_loss_pct = f.delivered_loss_pct.map(round3);
        row.delay_p50_ms = f.delay_p50_ms.map(round2);
        row.delay_p99_ms = f.delay_p99_ms.map(round2);
        row.jitter_ms = f.jitter_ms.map(round3);
        row.max_gap_ms = f.max_gap_ms.map(round2);
        row.sent = Some(f.sent as u64);
        row.received = Some(f.delivered as u64);
        row.duplicates_delivered = Some(f.duplicates as u64);
        let mut notes = Vec::new();
        if f.sent == 0 {
            notes.push("nothing sent".to_string());
        }
        if f.negative_delays > 0 {
            notes.push(format!(
                "{} packets arrived before they were sent (the clock stepped): delays unreliable",
                f.negative_delays
            ));
        }
        row.note = (!notes.is_empty()).then(|| notes.join("; "));
        row
    }

    /// Whether `other` was measured under the same condition and event,
    /// for the same stream and direction.
    pub fn same_place(&self, other: &Row) -> bool {
        self.stream == other.stream
            && self.direction == other.direction
            && self.loss_pct == other.loss_pct
            && self.burst == other.burst
            && self.link2_loss_pct == other.link2_loss_pct
            && self.event == other.event
    }
}

/// Sets `added_delay_p99_ms` of every wanopt row that has a `direct` twin
/// (the same link 1 and event: direct traffic never uses link 2, so a
/// `wanopt-dup` row compares with the direct row of its link 1).
pub fn fill_added_delay(rows: &mut [Row]) {
    let direct: Vec<Row> = rows
        .iter()
        .filter(|r| r.mode == Mode::Direct.name())
        .cloned()
        .collect();
    for r in rows.iter_mut().filter(|r| r.mode != Mode::Direct.name()) {
        let twin = direct.iter().find(|d| {
            let link1 = Row {
                link2_loss_pct: d.link2_loss_pct,
                ..r.clone()
            };
            d.same_place(&link1)
        });
        r.added_delay_p99_ms = match (r.delay_p99_ms, twin.and_then(|d| d.delay_p99_ms)) {
            (Some(mine), Some(theirs)) => Some(round2(mine - theirs)),
            _ => None,
        };
    }
}

/// A stream's series in one cell.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CellSeries {
    /// The cell's mode.
    pub mode: String,
    /// The cell's event.
    pub event: String,
    /// Link 1's loss, percent.
    pub loss_pct: f64,
    /// Bursts.
    pub burst: bool,
    /// `voice` or `video`.
    pub stream: String,
    /// `up` or `down`.
    pub direction: String,
    /// When link 1 went down and up again, s since the cell's start.
    pub marks: Vec<(String, f64)>,
    /// The series, 100 ms bins by send time.
    pub bins: Vec<Bin>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::realtime::matrix::{Condition, Event};

    fn cell(mode: Mode) -> Cell {
        Cell {
            condition: Condition {
                loss_pct: 5.0,
                burst: false,
                link2_loss_pct: None,
            },
            mode,
            event: Event::None,
        }
    }

    fn figures(p99: f64) -> StreamFigures {
        StreamFigures {
            sent: 1_000,
            delivered: 998,
            duplicates: 0,
            delivered_loss_pct: Some(0.2),
            delay_p50_ms: Some(20.444),
            delay_p99_ms: Some(p99),
            jitter_ms: Some(0.31234),
            max_gap_ms: Some(60.0),
            negative_delays: 0,
        }
    }

    #[test]
    fn a_dup_row_compares_with_the_direct_row_of_its_link_1() {
        let mut dup = cell(Mode::WanoptDup);
        dup.condition.link2_loss_pct = Some(5.0);
        let mut rows = vec![
            Row::stream(&cell(Mode::Direct), "voice", "down", 20, &figures(22.0)),
            Row::stream(&dup, "voice", "down", 20, &figures(24.5)),
            Row::stream(&dup, "voice", "up", 20, &figures(24.5)),
        ];
        fill_added_delay(&mut rows);
        assert_eq!(rows[1].added_delay_p99_ms, Some(2.5));
        assert_eq!(rows[2].added_delay_p99_ms, None, "no direct row up");
    }

    /// The contract's keys, with its names and types, in every row:
    /// figures that do not apply are `null`, never absent.
    #[test]
    fn rows_keep_the_interface_contract() {
        let mut rows = vec![
            Row::stream(&cell(Mode::Direct), "voice", "down", 20, &figures(22.0)),
            Row::stream(&cell(Mode::WanoptFec), "voice", "down", 20, &figures(25.5)),
            Row {
                throughput_mbps: Some(12.5),
                ..Row::new(&cell(Mode::WanoptFec), "bulk", "down", 20)
            },
        ];
        fill_added_delay(&mut rows);
        let results = Results {
            scenario: "realtime".into(),
            quick: true,
            settings: serde_json::Value::Null,
            rows,
            skipped: vec![],
            flow_resets: vec![],
            series: vec![],
        };
        let json = serde_json::to_value(&results).unwrap_or_default();
        for row in json["rows"].as_array().into_iter().flatten() {
            for key in [
                "stream",
                "loss_pct",
                "paths",
                "mode",
                "event",
                "delivered_loss_pct",
                "delay_p50_ms",
                "delay_p99_ms",
                "jitter_ms",
                "max_gap_ms",
                "throughput_mbps",
                "direction",
                "burst",
            ] {
                assert!(row.get(key).is_some(), "{key} missing from {row}");
            }
        }
        let fec = &json["rows"][1];
        assert_eq!(fec["stream"], "voice");
        assert_eq!(fec["loss_pct"], 5.0);
        assert_eq!(fec["paths"], 1);
        assert_eq!(fec["mode"], "wanopt-fec");
        assert_eq!(fec["event"], "none");
        assert_eq!(fec["delivered_loss_pct"], 0.2);
        assert_eq!(fec["delay_p50_ms"], 20.44);
        assert_eq!(fec["delay_p99_ms"], 25.5);
        assert_eq!(fec["added_delay_p99_ms"], 3.5);
        assert_eq!(fec["jitter_ms"], 0.312);
        assert_eq!(fec["max_gap_ms"], 60.0);
        assert!(fec["throughput_mbps"].is_null());
        assert!(json["rows"][0]["added_delay_p99_ms"].is_null());
        let bulk = &json["rows"][2];
        assert_eq!(bulk["throughput_mbps"], 12.5);
        assert!(bulk["delivered_loss_pct"].is_null() && bulk["delay_p99_ms"].is_null());
        let back: Results = serde_json::from_value(json).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(back, results);
    }

    #[test]
    fn a_stream_with_a_clock_step_says_so() {
        let f = StreamFigures {
            negative_delays: 3,
            ..figures(20.0)
        };
        let row = Row::stream(&cell(Mode::Direct), "video", "down", 20, &f);
        assert!(row
            .note
            .is_some_and(|n| n.starts_with("3 packets arrived before")));
    }
}
