//! `report.md` and the summary of the `cellular` scenario: per buffer a
//! table of trace x mode (medians over the runs), then the goals: wanopt's
//! download at least kernel BBR's rate, and the ping beside it at most
//! kernel BBR's p50 and p95, on every trace.

use std::fmt::Write as _;

use super::matrix::{MODES, RTT_MS};
use super::results::{Results, Row};
use crate::kit::stats::{first_seen, median};
use crate::kit::{markdown, Align, Table};

/// The medians over the runs of one trace, buffer and mode.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Cell {
    /// Runs measured.
    pub runs: usize,
    /// Download Mbit/s.
    pub mbit_s: Option<f64>,
    /// Ping p50, ms.
    pub p50: Option<f64>,
    /// Ping p95, ms.
    pub p95: Option<f64>,
    /// Ping p99, ms.
    pub p99: Option<f64>,
    /// Queue p95, bytes.
    pub queue_p95: Option<f64>,
    /// Queue wait p95, ms.
    pub wait_p95: Option<f64>,
}

/// The medians of `trace`, `buffer`, `mode` over the runs.
pub fn cell(results: &Results, trace: &str, buffer: &str, mode: &str) -> Cell {
    let rows: Vec<&Row> = results
        .rows
        .iter()
        .filter(|r| r.trace == trace && r.buffer == buffer && r.mode == mode)
        .collect();
    let of =
        |f: fn(&Row) -> Option<f64>| median(&rows.iter().filter_map(|r| f(r)).collect::<Vec<_>>());
    Cell {
        runs: rows.len(),
        mbit_s: of(|r| Some(r.mbit_s)),
        p50: of(|r| r.ping_p50_ms),
        p95: of(|r| r.ping_p95_ms),
        p99: of(|r| r.ping_p99_ms),
        queue_p95: of(|r| r.queue_p95_bytes.map(|b| b as f64)),
        wait_p95: of(|r| r.queue_wait_p95_ms),
    }
}

fn buffers(results: &Results) -> Vec<(String, u64)> {
    first_seen(
        results
            .rows
            .iter()
            .map(|r| (r.buffer.clone(), r.buffer_bytes)),
    )
}

fn num(value: Option<f64>, places: usize) -> String {
    value.map_or("n/a".to_string(), |v| format!("{v:.places$}"))
}

/// A goal of one trace and buffer: wanopt against kernel BBR.
#[derive(Debug, Clone, PartialEq)]
pub struct Goal {
    /// The trace.
    pub trace: String,
    /// The buffer.
    pub buffer: String,
    /// wanopt's rate over BBR's.
    pub rate_ratio: Option<f64>,
    /// wanopt's ping p50 over BBR's.
    pub p50_ratio: Option<f64>,
    /// wanopt's ping p95 over BBR's.
    pub p95_ratio: Option<f64>,
}

impl Goal {
    /// At least BBR's rate, at most its p50 and p95.
    pub fn met(&self) -> Option<bool> {
        Some(self.rate_ratio? >= 1.0 && self.p50_ratio? <= 1.0 && self.p95_ratio? <= 1.0)
    }
}

/// The goals of every trace and buffer measured in both modes.
pub fn goals(results: &Results) -> Vec<Goal> {
    let mut out = Vec::new();
    for (buffer, _) in buffers(results) {
        for trace in &results.traces {
            let bbr = cell(results, &trace.name, &buffer, "bbr");
            let wanopt = cell(results, &trace.name, &buffer, "wanopt");
            if bbr.runs == 0 || wanopt.runs == 0 {
                continue;
            }
            let ratio = |a: Option<f64>, b: Option<f64>| Some(a? / b?.max(1e-9));
            out.push(Goal {
                trace: trace.name.clone(),
                buffer: buffer.clone(),
                rate_ratio: ratio(wanopt.mbit_s, bbr.mbit_s),
                p50_ratio: ratio(wanopt.p50, bbr.p50),
                p95_ratio: ratio(wanopt.p95, bbr.p95),
            });
        }
    }
    out
}

/// `report.md`.
pub fn markdown(results: &Results) -> String {
    let mut md = String::new();
    let _ = writeln!(md, "# cellular{}\n", markdown::quick(results.quick));
    let seconds = results.settings["seconds"].as_u64().unwrap_or(0);
    let runs = results.settings["runs"].as_u64().unwrap_or(1);
    let _ = writeln!(
        md,
        "Each cell: one {seconds} s download (server to client) and, beside it on its own \
         connection, a 64-byte request answered by 64 bytes every 100 ms; the link's \
         capacity follows the trace each way, base RTT {RTT_MS} ms, a drop-tail buffer \
         each way; direct with kernel CUBIC and kernel BBR, and through wanopt. Figures \
         are medians of {runs} run(s). The queue is the downlink's, from the emulator: \
         its 95th percentile over time and the 95th percentile of the frames' wait in it.\n"
    );
    let mut traces = Table::text_then_figures(2, &["trace", "kind", "down Mbit/s", "up Mbit/s"]);
    for t in &results.traces {
        traces.row([
            t.name.clone(),
            t.kind.clone(),
            format!("{:.2}", t.down_mbit_s),
            format!("{:.2}", t.up_mbit_s),
        ]);
    }
    md.push_str(&traces.to_string());
    if !results.missing_traces.is_empty() {
        let _ = writeln!(
            md,
            "\nRecorded traces not found (give `--traces DIR`, Mahimahi's `traces/`):"
        );
        for (name, why) in &results.missing_traces {
            let _ = writeln!(md, "- {name}: {why}");
        }
    }
    for (buffer, bytes) in buffers(results) {
        let _ = writeln!(md, "\n## {buffer} buffer ({} KB)\n", bytes / 1000);
        let mut table = Table::text_then_figures(
            2,
            &[
                "trace",
                "mode",
                "download Mbit/s",
                "ping p50 ms",
                "p95",
                "p99",
                "queue p95 kB",
                "wait p95 ms",
                "runs",
            ],
        );
        for trace in &results.traces {
            for mode in MODES {
                let c = cell(results, &trace.name, &buffer, mode.name());
                if c.runs == 0 {
                    continue;
                }
                table.row([
                    trace.name.clone(),
                    mode.name().to_string(),
                    num(c.mbit_s, 2),
                    num(c.p50, 0),
                    num(c.p95, 0),
                    num(c.p99, 0),
                    num(c.queue_p95.map(|b| b / 1000.0), 0),
                    num(c.wait_p95, 0),
                    c.runs.to_string(),
                ]);
            }
        }
        md.push_str(&table.to_string());
    }
    let goals = goals(results);
    if !goals.is_empty() {
        let _ = writeln!(
            md,
            "\n## Goals: wanopt against kernel BBR\n\nwanopt's download at least BBR's rate, the ping beside it at most BBR's p50 and p95.\n"
        );
        let mut table =
            Table::text_then_figures(2, &["trace", "buffer", "rate", "ping p50", "ping p95"])
                .column("met", Align::Left);
        for g in &goals {
            table.row([
                g.trace.clone(),
                g.buffer.clone(),
                format!("{}x", num(g.rate_ratio, 2)),
                format!("{}x", num(g.p50_ratio, 2)),
                format!("{}x", num(g.p95_ratio, 2)),
                match g.met() {
                    Some(true) => "yes",
                    Some(false) => "no",
                    None => "n/a",
                }
                .to_string(),
            ]);
        }
        md.push_str(&table.to_string());
    }
    let plots = super::plot::files(results);
    if !plots.is_empty() {
        let _ = writeln!(
            md,
            "\n## Over time ({} buffer, run 1)\n",
            buffers(results)[0].0
        );
        for plot in plots
            .iter()
            .filter(|p| p.extension().is_some_and(|e| e == "png"))
        {
            let _ = writeln!(md, "![{0}]({0})", plot.display());
        }
    }
    if !results.skipped.is_empty() {
        let skipped = results.skipped.iter().map(|s| {
            let (trace, buffer, mode, reason) = (&s.trace, &s.buffer, &s.mode, &s.reason);
            format!("{trace} {buffer} {mode}: {reason}")
        });
        md.push('\n');
        markdown::list(&mut md, "Not measured", skipped);
    }
    md
}

/// The text printed at the end of a run.
pub fn summary(results: &Results) -> String {
    let mut out = String::new();
    for (buffer, _) in buffers(results) {
        let _ = writeln!(
            out,
            "{buffer} buffer: trace, mode: Mbit/s, ping p50 / p95 / p99 ms, queue p95 kB"
        );
        for trace in &results.traces {
            for mode in MODES {
                let c = cell(results, &trace.name, &buffer, mode.name());
                if c.runs == 0 {
                    continue;
                }
                let _ = writeln!(
                    out,
                    "  {:<22} {:<7} {:>6} Mbit/s  {:>5} / {:>5} / {:>5} ms  {:>5} kB",
                    trace.name,
                    mode.name(),
                    num(c.mbit_s, 2),
                    num(c.p50, 0),
                    num(c.p95, 0),
                    num(c.p99, 0),
                    num(c.queue_p95.map(|b| b / 1000.0), 0)
                );
            }
        }
    }
    let goals = goals(results);
    let met = goals.iter().filter(|g| g.met() == Some(true)).count();
    if !goals.is_empty() {
        let _ = writeln!(
            out,
            "goals (wanopt at least BBR's rate, at most its ping p50 and p95): met on {met} of {}",
            goals.len()
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cellular::matrix::TracePair;

    fn row(mode: &str, run: usize, mbit_s: f64, p50: f64, p95: f64) -> Row {
        Row {
            trace: "t".into(),
            trace_kind: "synthetic".into(),
            buffer: "deep".into(),
            buffer_bytes: 500_000,
            mode: mode.into(),
            run,
            mbit_s,
            ping_p50_ms: Some(p50),
            ping_p95_ms: Some(p95),
            ping_p99_ms: Some(p95 * 2.0),
            pings: 100,
            queue_p95_bytes: Some(100_000),
            queue_mean_bytes: Some(50_000),
            queue_wait_p95_ms: Some(100.0),
            queue_drops: 0,
            rate_series: vec![],
            ping_series: vec![],
        }
    }

    #[test]
    fn goals_compare_medians_with_bbr() {
        let results = Results {
            scenario: "cellular".into(),
            quick: true,
            settings: serde_json::json!({"seconds": 20, "runs": 3}),
            traces: vec![TracePair {
                name: "t".into(),
                down: "/d".into(),
                up: "/u".into(),
                kind: "synthetic".into(),
                down_mbit_s: 8.0,
                up_mbit_s: 2.0,
            }],
            missing_traces: vec![("Verizon-LTE-short".into(), "no trace directory".into())],
            rows: vec![
                row("bbr", 1, 5.0, 160.0, 480.0),
                row("bbr", 2, 5.2, 170.0, 500.0),
                row("bbr", 3, 5.1, 180.0, 470.0),
                row("wanopt", 1, 5.3, 120.0, 300.0),
                row("wanopt", 2, 5.0, 100.0, 250.0),
                row("wanopt", 3, 5.2, 110.0, 900.0),
            ],
            skipped: vec![],
            flow_resets: vec![],
        };
        let goals = goals(&results);
        assert_eq!(goals.len(), 1);
        let g = &goals[0];
        assert!((g.rate_ratio.unwrap_or(0.0) - 5.2 / 5.1).abs() < 1e-9);
        assert!((g.p50_ratio.unwrap_or(0.0) - 110.0 / 170.0).abs() < 1e-9);
        assert_eq!(g.met(), Some(true));
        let md = markdown(&results);
        assert!(
            md.contains("| t | wanopt | 5.20 | 110 | 300 | 600 | 100 | 100 | 3 |"),
            "{md}"
        );
        assert!(md.contains("- Verizon-LTE-short: no trace directory"));
        assert!(summary(&results).contains("met on 1 of 1"));
    }
}
