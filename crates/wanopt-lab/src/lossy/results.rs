//! The typed results of the `lossy` scenario: `results.json`, whose rows
//! keep the scenario's interface contract (`rtt_ms`, `loss_pct`, `burst`,
//! `jitter_ms`, `workload`, `mode`, `throughput_mbps`, `seconds`,
//! `time_to_90pct_s`, `p99_ms`, `overhead_pct`; `null` where a figure does
//! not apply) and add their own fields.

use serde::{Deserialize, Serialize};

use super::client::ClientReport;
use super::matrix::{Cell, Workload, JITTER_MS, LINK_MBPS};
use super::measure::{floor_s, mbps, overhead_pct, time_to_fraction, RAMP_WINDOW_S};
use crate::kit::stats::{percentile, round2};

/// One measurement.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Row {
    /// Round-trip time, ms.
    pub rtt_ms: u64,
    /// Mean loss each way, percent.
    pub loss_pct: f64,
    /// Gilbert-Elliott bursts rather than random loss.
    pub burst: bool,
    /// Delay jitter, ms.
    pub jitter_ms: u64,
    /// `bulk`, `100KB`, `1MB`, `10MB` or `rpc`.
    pub workload: String,
    /// `cubic`, `bbr`, `wanopt` or `wanopt-fec`.
    pub mode: String,
    /// Goodput, Mbit/s (payload over `seconds`).
    pub throughput_mbps: Option<f64>,
    /// The bulk run's length or a transfer's completion time, s; `null`
    /// for a transfer that did not finish by the deadline.
    pub seconds: Option<f64>,
    /// Bulk: when a 0.5 s window first carried 90% of the final rate (the
    /// rate over the run's second half), s from the start.
    pub time_to_90pct_s: Option<f64>,
    /// Rpc: median exchange time, ms.
    pub p50_ms: Option<f64>,
    /// Rpc: 99th percentile exchange time, ms.
    pub p99_ms: Option<f64>,
    /// IP bytes the emulated link delivered (both directions) over the
    /// payload delivered, minus 1, percent.
    pub overhead_pct: Option<f64>,
    /// `fresh` (the first traffic since the lab and nodes started) or
    /// `warm` (right after other traffic on the same lab).
    pub tunnel: String,
    /// The bottleneck rate, Mbit/s.
    pub link_mbps: u64,
    /// Transfers: serialization at the link rate plus one RTT, s.
    pub floor_s: Option<f64>,
    /// Payload bytes delivered.
    pub bytes: u64,
    /// IP bytes the emulated link delivered, both directions.
    pub wan_bytes: u64,
    /// Frames the emulated link dropped as loss, both directions.
    pub wan_lost_frames: u64,
    /// Frames the emulated link dropped at its full queue, both directions.
    #[serde(default)]
    pub wan_queue_drops: u64,
    /// Rpc: exchanges measured.
    pub samples: Option<usize>,
    /// What went wrong or what to know, if anything.
    pub note: Option<String>,
}

/// A measurement not made.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Skipped {
    /// Round-trip time, ms.
    pub rtt_ms: u64,
    /// Mean loss each way, percent.
    pub loss_pct: f64,
    /// Bursts.
    pub burst: bool,
    /// The workload.
    pub workload: String,
    /// The mode.
    pub mode: String,
    /// Why.
    pub reason: String,
}

/// `results.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Results {
    /// `lossy`.
    pub scenario: String,
    /// Whether this was a `--quick` run.
    pub quick: bool,
    /// Bulk streams and seconds, RPC samples, the transfer deadline.
    pub settings: serde_json::Value,
    /// The measurements.
    pub rows: Vec<Row>,
    /// Measurements not made, with the reason.
    pub skipped: Vec<Skipped>,
    /// Every flow reset the nodes logged: any fails the run.
    #[serde(default)]
    pub flow_resets: Vec<String>,
}

/// What the emulated link carried during a measurement.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WanDelta {
    /// IP bytes delivered, both directions.
    pub bytes: u64,
    /// Frames dropped as loss, both directions.
    pub lost_frames: u64,
    /// Frames dropped at the full queue, both directions.
    pub queue_drops: u64,
}

impl From<crate::link::LinkTotals> for WanDelta {
    fn from(totals: crate::link::LinkTotals) -> WanDelta {
        WanDelta {
            bytes: totals.both(|d| d.ip_bytes),
            lost_frames: totals.both(|d| d.lost_frames),
            queue_drops: totals.both(|d| d.queue_drops),
        }
    }
}

/// The row of `cell`'s `workload` from what the client reported and what
/// the link carried.
pub fn row(
    cell: &Cell,
    workload: Workload,
    tunnel: &str,
    report: &ClientReport,
    wan: WanDelta,
) -> Row {
    let c = &cell.condition;
    let mut row = Row {
        rtt_ms: c.rtt_ms,
        loss_pct: c.loss_pct,
        burst: c.burst,
        jitter_ms: JITTER_MS,
        workload: workload.name(),
        mode: cell.mode.name().into(),
        throughput_mbps: None,
        seconds: None,
        time_to_90pct_s: None,
        p50_ms: None,
        p99_ms: None,
        overhead_pct: None,
        tunnel: tunnel.into(),
        link_mbps: LINK_MBPS,
        floor_s: None,
        bytes: 0,
        wan_bytes: wan.bytes,
        wan_lost_frames: wan.lost_frames,
        wan_queue_drops: wan.queue_drops,
        samples: None,
        note: None,
    };
    match report {
        ClientReport::Bulk {
            seconds,
            bytes,
            total_bytes,
            samples,
        } => {
            row.throughput_mbps = Some(round2(mbps(*bytes, *seconds)));
            row.seconds = Some(round2(*seconds));
            row.time_to_90pct_s = time_to_fraction(samples, RAMP_WINDOW_S, 0.9).map(round2);
            // The link carried the drain after the run too.
            row.bytes = *total_bytes;
        }
        ClientReport::Transfer { seconds, bytes } => {
            row.bytes = *bytes;
            row.seconds = seconds.map(round2);
            row.throughput_mbps = seconds.map(|s| round2(mbps(*bytes, s)));
            if let Workload::Transfer(size) = workload {
                row.floor_s = Some(round2(floor_s(size, LINK_MBPS, c.rtt_ms)));
            }
            if seconds.is_none() {
                row.note = Some("did not finish by the deadline".into());
            }
        }
        ClientReport::Rpc {
            latencies_ms,
            bytes,
        } => {
            row.bytes = *bytes;
            row.p50_ms = percentile(latencies_ms, 0.5).map(round2);
            row.p99_ms = percentile(latencies_ms, 0.99).map(round2);
            row.samples = Some(latencies_ms.len());
        }
    }
    row.overhead_pct = overhead_pct(wan.bytes, row.bytes).map(round2);
    row
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lossy::matrix::{Condition, Mode};

    fn cell(mode: Mode) -> Cell {
        Cell {
            condition: Condition {
                rtt_ms: 150,
                loss_pct: 3.0,
                burst: false,
            },
            mode,
            workloads: vec![],
        }
    }

    /// The contract's fields, with its names and types, in every row:
    /// figures that do not apply are `null`, never absent.
    #[test]
    fn rows_keep_the_interface_contract() {
        let samples: Vec<(f64, u64)> = (1..=200).map(|i| (i as f64 * 0.05, i * 570_000)).collect();
        let bulk = ClientReport::Bulk {
            seconds: 10.0,
            bytes: 114_000_000,
            total_bytes: 115_000_000,
            samples,
        };
        let wan = WanDelta {
            bytes: 119_715_000,
            lost_frames: 2_400,
            queue_drops: 10,
        };
        let results = Results {
            scenario: "lossy".into(),
            quick: true,
            settings: serde_json::Value::Null,
            rows: vec![row(
                &cell(Mode::WanoptFec),
                Workload::Bulk,
                "fresh",
                &bulk,
                wan,
            )],
            skipped: vec![],
            flow_resets: vec![],
        };
        let json = serde_json::to_value(&results).unwrap_or_default();
        assert_eq!(json["scenario"], "lossy");
        let r = &json["rows"][0];
        assert_eq!(r["rtt_ms"], 150);
        assert_eq!(r["loss_pct"], 3.0);
        assert_eq!(r["burst"], false);
        assert_eq!(r["jitter_ms"], 10);
        assert_eq!(r["workload"], "bulk");
        assert_eq!(r["mode"], "wanopt-fec");
        assert_eq!(r["throughput_mbps"], 91.2);
        assert_eq!(r["seconds"], 10.0);
        assert!(
            r["time_to_90pct_s"]
                .as_f64()
                .is_some_and(|t| t > 0.0 && t <= 0.6),
            "{r}"
        );
        assert!(r["p99_ms"].is_null() && r.get("p99_ms").is_some());
        assert_eq!(r["overhead_pct"], 4.1);
        assert_eq!(r["tunnel"], "fresh");

        let transfer = ClientReport::Transfer {
            seconds: Some(1.234),
            bytes: 10_000_000,
        };
        let t = row(
            &cell(Mode::Bbr),
            Workload::Transfer(10_000_000),
            "warm",
            &transfer,
            wan,
        );
        let t = serde_json::to_value(&t).unwrap_or_default();
        assert_eq!(t["workload"], "10MB");
        assert_eq!(t["mode"], "bbr");
        assert_eq!(t["seconds"], 1.23);
        assert_eq!(t["floor_s"], 0.95);
        assert_eq!(t["tunnel"], "warm");
        assert!(t["time_to_90pct_s"].is_null() && t["p99_ms"].is_null());
        let late = ClientReport::Transfer {
            seconds: None,
            bytes: 4_000_000,
        };
        let t = row(
            &cell(Mode::Cubic),
            Workload::Transfer(10_000_000),
            "fresh",
            &late,
            wan,
        );
        assert_eq!((t.seconds, t.throughput_mbps), (None, None));
        assert!(t.note.is_some());

        let rpc = ClientReport::Rpc {
            latencies_ms: (1..=200).map(|i| 150.0 + f64::from(i)).collect(),
            bytes: 400_000,
        };
        let r = row(&cell(Mode::Wanopt), Workload::Rpc, "warm", &rpc, wan);
        let r = serde_json::to_value(&r).unwrap_or_default();
        assert_eq!(r["workload"], "rpc");
        assert_eq!(r["p50_ms"], 250.0);
        assert_eq!(r["p99_ms"], 348.0);
        assert_eq!(r["samples"], 200);
        assert!(r["throughput_mbps"].is_null() && r["seconds"].is_null());
        assert_eq!(r["wan_queue_drops"], 10);
        // Every row has every contract key.
        for key in [
            "rtt_ms",
            "loss_pct",
            "burst",
            "jitter_ms",
            "workload",
            "mode",
            "throughput_mbps",
            "seconds",
            "time_to_90pct_s",
            "p99_ms",
            "overhead_pct",
        ] {
            assert!(r.get(key).is_some(), "{key}");
        }
        let back: Results = serde_json::from_value(json).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(back, results);
    }
}
