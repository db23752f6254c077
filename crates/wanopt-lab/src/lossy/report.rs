//! `report.md` and the summary of the `lossy` scenario: per RTT a table of
//! loss x workload with each mode's figure and the wanopt modes' advantage
//! over kernel BBR, then the goals.

use std::fmt::Write as _;

use super::goals::{evaluate, loss_free_goodput};
use super::matrix::{BURST_SPEC, JITTER_MS, LINK_MBPS, MODES};
use super::results::{Results, Row};
use crate::kit::stats::first_seen;
use crate::kit::{markdown, Table};

/// A figure of a row.
#[derive(Debug, Clone, Copy)]
struct Measure {
    /// The table's label.
    label: &'static str,
    /// The workload it reads.
    workload: &'static str,
    /// `fresh` or `warm` (`None`: any).
    tunnel: Option<&'static str>,
    /// The figure.
    value: fn(&Row) -> Option<f64>,
    /// Whether more is better (ratios are "times better than BBR").
    higher_better: Option<bool>,
}

const MEASURES: [Measure; 11] = [
    Measure {
        label: "bulk Mbit/s",
        workload: "bulk",
        tunnel: None,
        value: |r| r.throughput_mbps,
        higher_better: Some(true),
    },
    Measure {
        label: "bulk 90% at s",
        workload: "bulk",
        tunnel: None,
        value: |r| r.time_to_90pct_s,
        higher_better: Some(false),
    },
    Measure {
        label: "bulk overhead %",
        workload: "bulk",
        tunnel: None,
        value: |r| r.overhead_pct,
        higher_better: None,
    },
    Measure {
        label: "100KB fresh s",
        workload: "100KB",
        tunnel: Some("fresh"),
        value: |r| r.seconds,
        higher_better: Some(false),
    },
    Measure {
        label: "100KB warm s",
        workload: "100KB",
        tunnel: Some("warm"),
        value: |r| r.seconds,
        higher_better: Some(false),
    },
    Measure {
        label: "1MB fresh s",
        workload: "1MB",
        tunnel: Some("fresh"),
        value: |r| r.seconds,
        higher_better: Some(false),
    },
    Measure {
        label: "1MB warm s",
        workload: "1MB",
        tunnel: Some("warm"),
        value: |r| r.seconds,
        higher_better: Some(false),
    },
    Measure {
        label: "10MB fresh s",
        workload: "10MB",
        tunnel: Some("fresh"),
        value: |r| r.seconds,
        higher_better: Some(false),
    },
    Measure {
        label: "10MB warm s",
        workload: "10MB",
        tunnel: Some("warm"),
        value: |r| r.seconds,
        higher_better: Some(false),
    },
    Measure {
        label: "rpc p50 ms",
        workload: "rpc",
        tunnel: None,
        value: |r| r.p50_ms,
        higher_better: Some(false),
    },
    Measure {
        label: "rpc p99 ms",
        workload: "rpc",
        tunnel: None,
        value: |r| r.p99_ms,
        higher_better: Some(false),
    },
];

/// The loss conditions of `rows` at `rtt_ms`, in the order measured.
fn conditions(rows: &[Row], rtt_ms: u64) -> Vec<(f64, bool)> {
    let at_rtt = rows.iter().filter(|r| r.rtt_ms == rtt_ms);
    first_seen(at_rtt.map(|r| (r.loss_pct, r.burst)))
}

/// The RTTs of `rows`, in the order measured.
fn rtts(rows: &[Row]) -> Vec<u64> {
    first_seen(rows.iter().map(|r| r.rtt_ms))
}

fn find<'a>(
    rows: &'a [Row],
    rtt: u64,
    (loss, burst): (f64, bool),
    m: &Measure,
    mode: &str,
) -> Option<&'a Row> {
    rows.iter().find(|r| {
        r.rtt_ms == rtt
            && r.loss_pct == loss
            && r.burst == burst
            && r.mode == mode
            && r.workload == m.workload
            && m.tunnel.is_none_or(|t| r.tunnel == t)
    })
}

/// One mode's figure as a table cell: `-` not measured, `DNF` a
/// transfer that did not finish.
fn figure(row: Option<&Row>, m: &Measure) -> String {
    match row {
        None => "-".into(),
        Some(r) => match (m.value)(r) {
            Some(v) if v >= 100.0 => format!("{v:.0}"),
            Some(v) => format!("{v:.2}"),
            None if r.note.is_some() => "DNF".into(),
            None => "n/a".into(),
        },
    }
}

/// How many times better than BBR `row` is on `m`.
fn advantage(row: Option<&Row>, bbr: Option<&Row>, m: &Measure) -> String {
    let (Some(higher), Some(a), Some(b)) = (
        m.higher_better,
        row.and_then(|r| (m.value)(r)),
        bbr.and_then(|r| (m.value)(r)),
    ) else {
        return String::new();
    };
    let ratio = if higher { a / b } else { b / a };
    if ratio.is_finite() {
        format!("{ratio:.2}")
    } else {
        String::new()
    }
}

/// The per-RTT tables.
pub fn tables(results: &Results) -> String {
    let rows = &results.rows;
    let mut out = String::new();
    for rtt in rtts(rows) {
        let _ = writeln!(
            out,
            "\nRTT {rtt} ms (loss-free goodput reference {:.1} Mbit/s)\n",
            loss_free_goodput(rows, rtt)
        );
        let mut table = Table::text_then_figures(
            2,
            &[
                "loss %",
                "figure",
                "cubic",
                "bbr",
                "wanopt",
                "wanopt-fec",
                "wanopt vs bbr",
                "wanopt-fec vs bbr",
            ],
        );
        for condition in conditions(rows, rtt) {
            let label = if condition.1 {
                format!("{} (bursts)", condition.0)
            } else {
                format!("{}", condition.0)
            };
            for m in &MEASURES {
                let cells: Vec<Option<&Row>> = MODES
                    .iter()
                    .map(|mode| find(rows, rtt, condition, m, mode.name()))
                    .collect();
                if cells.iter().all(Option::is_none) {
                    continue;
                }
                let mut row = vec![label.clone(), m.label.to_string()];
                row.extend(cells.iter().map(|r| figure(*r, m)));
                row.push(advantage(cells[2], cells[1], m));
                row.push(advantage(cells[3], cells[1], m));
                table.row(row);
            }
        }
        out.push_str(&table.to_string());
    }
    out
}

/// The goals as Markdown lines.
pub fn goal_lines(results: &Results) -> String {
    let goals = evaluate(results);
    if goals.is_empty() {
        return "- no wanopt rows: no goal checked\n".into();
    }
    goals.iter().map(|g| g.line() + "\n").collect()
}

/// What stdout shows at the end: the tables and the goals.
pub fn summary(results: &Results) -> String {
    format!("{}\ngoals:\n{}", tables(results), goal_lines(results))
}

/// `report.md`.
pub fn markdown(results: &Results) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "# lossy{}\n", markdown::quick(results.quick));
    let _ = writeln!(
        out,
        "{LINK_MBPS} Mbit/s each way, {JITTER_MS} ms jitter, random loss each way or \
         Gilbert-Elliott bursts (`loss-burst {BURST_SPEC}`: 3% mean loss, bursts of 3 \
         frames on average); a new lab (and, through wanopt, new nodes) for every bulk run \
         and every fresh transfer, data reduction off. Settings: `{}`.\n",
        results.settings
    );
    let _ = writeln!(
        out,
        "Modes: `cubic` and `bbr` direct with that kernel congestion control at both ends; \
         `wanopt` through the tunnel with `--fec off`, `wanopt-fec` with `--fec auto`. \
         Figures: bulk goodput over the run, the end of the first 0.5 s window at 90% of \
         the final rate (the rate over the run's second half), IP bytes on the emulated \
         link (both ways) over payload minus 1 (bulk: with the drain after the run, what \
         the path and the nodes still held, so every byte counts); rpc payload is requests \
         and responses; transfer completion times (`DNF`: not done \
         by the deadline; `warm`: the same transfer again right after the fresh one); rpc \
         exchange times. `vs bbr`: how many times better than kernel BBR (goodput over \
         goodput, BBR's time over the mode's).\n"
    );
    out.push_str(&tables(results));
    let _ = writeln!(out, "\n## Goals\n");
    out.push_str(&goal_lines(results));
    if !results.skipped.is_empty() {
        let mut reasons: Vec<(String, String, usize)> = Vec::new();
        for s in &results.skipped {
            match reasons
                .iter_mut()
                .find(|(m, r, _)| *m == s.mode && *r == s.reason)
            {
                Some(entry) => entry.2 += 1,
                None => reasons.push((s.mode.clone(), s.reason.clone(), 1)),
            }
        }
        let reasons = reasons
            .into_iter()
            .map(|(mode, reason, count)| format!("{mode}: {count} measurement(s): {reason}"));
        out.push('\n');
        markdown::list(&mut out, "Not measured", reasons);
    }
    if !results.flow_resets.is_empty() {
        out.push('\n');
        markdown::flow_resets(
            &mut out,
            "Flow resets (the run fails)",
            &results.flow_resets,
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_show_each_mode_and_the_advantage_over_bbr() {
        let row = |mode: &str, mbps: f64| Row {
            rtt_ms: 150,
            loss_pct: 1.0,
            burst: false,
            jitter_ms: 10,
            workload: "bulk".into(),
            mode: mode.into(),
            throughput_mbps: Some(mbps),
            seconds: Some(10.0),
            time_to_90pct_s: Some(1.0),
            p50_ms: None,
            p99_ms: None,
            overhead_pct: Some(5.0),
            tunnel: "fresh".into(),
            link_mbps: 100,
            floor_s: None,
            bytes: 0,
            wan_bytes: 0,
            wan_lost_frames: 0,
            wan_queue_drops: 0,
            samples: None,
            note: None,
        };
        let results = Results {
            scenario: "lossy".into(),
            quick: true,
            settings: serde_json::Value::Null,
            rows: vec![row("cubic", 5.0), row("bbr", 80.0), row("wanopt", 88.0)],
            skipped: vec![],
            flow_resets: vec![],
        };
        let t = tables(&results);
        assert!(
            t.contains("| 1 | bulk Mbit/s | 5.00 | 80.00 | 88.00 | - | 1.10 |  |"),
            "{t}"
        );
        assert!(
            t.contains("| 1 | bulk overhead % | 5.00 | 5.00 | 5.00 | - |  |  |"),
            "{t}"
        );
        assert!(!t.contains("rpc"), "{t}");
        let md = markdown(&results);
        assert!(
            md.contains("**PASS** wanopt: at or above kernel BBR"),
            "{md}"
        );
    }
}
