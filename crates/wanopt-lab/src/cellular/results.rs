//! What `results.json` holds: a row per measurement, and how a row is made
//! from what the client and the emulator measured.

use serde::{Deserialize, Serialize};
use wanopt_netem::LogHistogram;

use super::client::ClientReport;
use super::matrix::{Buffer, Mode, TracePair};
use crate::kit::stats::{percentile, round1, round3};

/// Width of a bin of the rate series, seconds.
pub const RATE_BIN_S: f64 = 1.0;

/// The link's down direction over a measurement, from the emulator's
/// counters before and after it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LinkDelta {
    /// Time at each queue level (nanoseconds by bytes).
    pub queue_bytes_time: LogHistogram,
    /// Frames by the nanoseconds they waited in the queue.
    pub queue_delay_ns: LogHistogram,
    /// Frames dropped at the full queue.
    pub queue_drops: u64,
}

/// One measurement.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Row {
    /// The trace pair's name.
    pub trace: String,
    /// `recorded-tuned`, `recorded-held-out` or `synthetic`.
    pub trace_kind: String,
    /// `deep` or `shallow`.
    pub buffer: String,
    /// The buffer, bytes each way.
    pub buffer_bytes: u64,
    /// `cubic`, `bbr` or `wanopt`.
    pub mode: String,
    /// The run, from 1.
    pub run: usize,
    /// The download's goodput, Mbit/s of payload over its length.
    pub mbit_s: f64,
    /// The ping's round trips, ms: median, 95th and 99th percentiles.
    pub ping_p50_ms: Option<f64>,
    /// See `ping_p50_ms`.
    pub ping_p95_ms: Option<f64>,
    /// See `ping_p50_ms`.
    pub ping_p99_ms: Option<f64>,
    /// Pings answered within the run.
    pub pings: usize,
    /// The queue the downlink held: its 95th percentile over time, bytes.
    pub queue_p95_bytes: Option<u64>,
    /// Its time-weighted mean, bytes.
    pub queue_mean_bytes: Option<u64>,
    /// The 95th percentile of the frames' wait in the downlink's queue, ms.
    pub queue_wait_p95_ms: Option<f64>,
    /// Frames the downlink's full queue dropped.
    pub queue_drops: u64,
    /// The download's goodput per [`RATE_BIN_S`], Mbit/s.
    pub rate_series: Vec<f64>,
    /// The pings: `(seconds since the start, round trip ms)`.
    pub ping_series: Vec<(f64, f64)>,
}

/// A measurement that did not happen.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Skipped {
    /// The trace pair's name.
    pub trace: String,
    /// The buffer.
    pub buffer: String,
    /// The mode.
    pub mode: String,
    /// Why.
    pub reason: String,
}

/// Everything a run wrote.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Results {
    /// `cellular`.
    pub scenario: String,
    /// Whether it was `--quick`.
    pub quick: bool,
    /// The settings every cell shares.
    pub settings: serde_json::Value,
    /// The trace pairs.
    pub traces: Vec<TracePair>,
    /// Recorded traces asked for and not found: `(name, why)`.
    pub missing_traces: Vec<(String, String)>,
    /// The measurements.
    pub rows: Vec<Row>,
    /// Measurements that did not happen.
    pub skipped: Vec<Skipped>,
    /// Flow resets the nodes logged.
    pub flow_resets: Vec<String>,
}

/// The row of one measurement.
pub fn row(
    trace: &TracePair,
    buffer: Buffer,
    mode: Mode,
    run: usize,
    report: &ClientReport,
    link: &LinkDelta,
) -> Row {
    let rtts: Vec<f64> = report.pings.iter().map(|(_, rtt)| *rtt).collect();
    let seconds = report.seconds.max(1e-3);
    let mut rate_series = Vec::new();
    let mut last = (0.0, 0u64);
    let mut next = RATE_BIN_S;
    for &(at, bytes) in &report.samples {
        if at + 1e-6 >= next {
            let width = (at - last.0).max(1e-3);
            rate_series.push(round3(
                (bytes - last.1.min(bytes)) as f64 * 8.0 / width / 1e6,
            ));
            last = (at, bytes);
            next += RATE_BIN_S;
        }
    }
    Row {
        trace: trace.name.clone(),
        trace_kind: trace.kind.clone(),
        buffer: buffer.name().to_string(),
        buffer_bytes: buffer.bytes(),
        mode: mode.name().to_string(),
        run,
        mbit_s: round3(report.bytes as f64 * 8.0 / seconds / 1e6),
        ping_p50_ms: percentile(&rtts, 0.5).map(round1),
        ping_p95_ms: percentile(&rtts, 0.95).map(round1),
        ping_p99_ms: percentile(&rtts, 0.99).map(round1),
        pings: rtts.len(),
        queue_p95_bytes: link.queue_bytes_time.quantile(0.95),
        queue_mean_bytes: link.queue_bytes_time.mean().map(|m| m as u64),
        queue_wait_p95_ms: link
            .queue_delay_ns
            .quantile(0.95)
            .map(|ns| round1(ns as f64 / 1e6)),
        queue_drops: link.queue_drops,
        rate_series,
        ping_series: report.pings.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_row_has_the_rate_per_second_and_the_pings_percentiles() {
        let trace = TracePair {
            name: "t".into(),
            down: "/t.down".into(),
            up: "/t.up".into(),
            kind: "synthetic".into(),
            down_mbit_s: 8.0,
            up_mbit_s: 2.0,
        };
        // 1 MB a second for 3 s, sampled every 50 ms.
        let samples = (1..=60)
            .map(|i| (f64::from(i) * 0.05, u64::from(i as u32) * 50_000))
            .collect();
        let report = ClientReport {
            seconds: 3.0,
            bytes: 3_000_000,
            samples,
            pings: vec![(0.0, 70.0), (0.1, 90.0), (0.2, 500.0)],
        };
        let mut held = LogHistogram::default();
        held.record(0, 95);
        held.record(200_000, 5);
        let link = LinkDelta {
            queue_bytes_time: held,
            ..LinkDelta::default()
        };
        let row = row(&trace, Buffer::Deep, Mode::Wanopt, 1, &report, &link);
        assert_eq!(row.mbit_s, 8.0);
        assert_eq!(row.rate_series, [8.0, 8.0, 8.0]);
        assert_eq!(row.ping_p50_ms, Some(90.0));
        assert_eq!(row.ping_p95_ms, Some(500.0));
        assert_eq!(row.queue_p95_bytes, Some(0));
        assert_eq!(row.queue_wait_p95_ms, None);
    }
}
