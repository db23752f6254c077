//! `report.md` and the summary of the `reach` scenario: each goal with
//! its figure, met or missed, and a row per case, mode and run.

use std::fmt::Write as _;

use super::plan::{Case, Mode, CASES, MODES};
use super::results::{Results, Row};
use crate::kit::{Align, Table};

/// A new flow's first byte after the edge's start (or the block), ms.
pub const FIRST_BYTE_GOAL_MS: f64 = 5000.0;
/// Bulk through the tunnel against direct kernel BBR on the same path.
pub const BULK_GOAL: f64 = 0.9;
/// The warm fetch against its floor.
pub const FETCH_GOAL_X_FLOOR: f64 = 1.1;
/// From the edge's start to the TCP transport under policing, ms.
pub const POLICED_MOVE_GOAL_MS: f64 = 10_000.0;
/// From UDP's return to new flows on QUIC, ms.
pub const RETURN_GOAL_MS: f64 = 60_000.0;

fn dash(value: Option<f64>, decimals: usize) -> String {
    value.map_or_else(|| "-".into(), |v| format!("{v:.decimals$}"))
}

/// The worst of `values` (a missing one is the worst of all).
fn worst(values: impl IntoIterator<Item = Option<f64>>) -> Option<f64> {
    values
        .into_iter()
        .map(|v| v.unwrap_or(f64::INFINITY))
        .reduce(f64::max)
}

/// `123{unit}` for a finite figure, `never` for a missing one.
fn or_never(value: f64, decimals: usize, unit: &str) -> String {
    if value.is_finite() {
        format!("{value:.decimals$}{unit}")
    } else {
        "never".into()
    }
}

/// A goal that a figure of every wanopt row of `case` stays under
/// `limit` (not measured: missed).
fn at_most(
    results: &Results,
    case: Case,
    figure: impl Fn(&Row) -> Option<f64>,
    limit: f64,
    text: impl Fn(String) -> String,
) -> (bool, String) {
    match worst(results.rows_of(case, Mode::Wanopt).map(figure)) {
        Some(w) => (w <= limit, text(or_never(w, 0, " ms"))),
        None => (false, text("not measured".into())),
    }
}

/// The bulk goal of `case`: every wanopt run at least [`BULK_GOAL`] of
/// direct's median, on the transport `on`.
fn bulk_goal(results: &Results, case: Case, on: &str) -> (bool, String) {
    let direct = results.median_mbit_s(case, Mode::Direct);
    let rows: Vec<&Row> = results.rows_of(case, Mode::Wanopt).collect();
    let lowest = worst(rows.iter().map(|r| r.mbit_s.map(|m| -m))).map(|m| -m);
    let transports: Vec<&str> = rows
        .iter()
        .map(|r| r.transport.as_deref().unwrap_or("?"))
        .collect();
    let ratio = match (lowest, direct) {
        (Some(l), Some(d)) if l.is_finite() && d > 0.0 => Some(l / d),
        _ => None,
    };
    (
        ratio.is_some_and(|r| r >= BULK_GOAL) && transports.iter().all(|t| *t == on),
        format!(
            "{}: bulk through wanopt {} Mbit/s (lowest run, on {}) against direct kernel BBR {} Mbit/s: {} (goal: at least {BULK_GOAL}, on {on})",
            case.name(),
            dash(lowest.filter(|l| l.is_finite()), 1),
            if transports.is_empty() { "-".into() } else { transports.join("/") },
            dash(direct, 1),
            dash(ratio, 2)
        ),
    )
}

/// Each goal as a line: met or not, and its figure.
pub fn goals(results: &Results) -> Vec<(bool, String)> {
    let mut lines = vec![at_most(
        results,
        Case::Blocked,
        |r| r.first_byte_ms,
        FIRST_BYTE_GOAL_MS,
        |w| {
            format!("blocked: the first byte of a new flow {w} after the edge's start (worst run; goal: within {FIRST_BYTE_GOAL_MS:.0} ms)")
        },
    )];
    lines.push(bulk_goal(results, Case::Blocked, "tcp"));
    let fetch = worst(
        results
            .rows_of(Case::Blocked, Mode::Wanopt)
            .map(|r| Some(r.fetch_ms? / r.floor_ms)),
    );
    lines.push((
        fetch.is_some_and(|x| x <= FETCH_GOAL_X_FLOOR),
        format!(
            "blocked: a {} KB fetch on a warm tunnel at {} its floor of {} ms (worst run's median; goal: within {FETCH_GOAL_X_FLOOR} x)",
            results.fetch_bytes / 1000,
            fetch.map_or("not measured".into(), |x| or_never(x, 2, " x")),
            dash(results.rows.first().map(|r| r.floor_ms), 1)
        ),
    ));
    let mid: Vec<&Row> = results.rows_of(Case::BlockedMid, Mode::Wanopt).collect();
    let ended_well = |r: &&Row| match r.open_flow.as_deref() {
        Some("continued") => true,
        Some("reset") => !r.reset_reasons.is_empty(),
        _ => false,
    };
    lines.push((
        !mid.is_empty() && mid.iter().all(ended_well),
        format!(
            "blocked-mid: the open download {} (goal: a reset counted by a reason, or it continues)",
            if mid.is_empty() {
                "not measured".to_string()
            } else {
                mid.iter()
                    .map(|r| {
                        let reasons: Vec<String> =
                            r.reset_reasons.iter().map(|(k, v)| format!("{k} {v}")).collect();
                        format!(
                            "{}{}",
                            r.open_flow.as_deref().unwrap_or("?"),
                            if reasons.is_empty() { String::new() } else { format!(" (counted: {})", reasons.join(", ")) }
                        )
                    })
                    .collect::<Vec<_>>()
                    .join("; ")
            }
        ),
    ));
    lines.push(at_most(
        results,
        Case::BlockedMid,
        |r| r.first_byte_ms,
        FIRST_BYTE_GOAL_MS,
        |w| format!("blocked-mid: the first byte of a new flow {w} after the block (worst run; goal: within {FIRST_BYTE_GOAL_MS:.0} ms)"),
    ));
    lines.push(at_most(
        results,
        Case::Policed,
        |r| r.moved_after_ms,
        POLICED_MOVE_GOAL_MS,
        |w| format!("policed: the edge on TCP {w} after its start (worst run; goal: within {POLICED_MOVE_GOAL_MS:.0} ms)"),
    ));
    lines.push(bulk_goal(results, Case::Policed, "tcp"));
    lines.push(at_most(
        results,
        Case::Returns,
        |r| r.moved_after_ms,
        RETURN_GOAL_MS,
        |w| format!("returns: new flows on QUIC {w} after UDP came back (worst run; goal: within {RETURN_GOAL_MS:.0} ms)"),
    ));
    let open: Vec<&Row> = results.rows_of(Case::Open, Mode::Wanopt).collect();
    lines.push((
        !open.is_empty() && open.iter().all(|r| r.transport.as_deref() == Some("quic")),
        format!(
            "open: the tunnel on {} (goal: QUIC)",
            if open.is_empty() {
                "- (not measured)".to_string()
            } else {
                open.iter()
                    .map(|r| r.transport.as_deref().unwrap_or("?"))
                    .collect::<Vec<_>>()
                    .join("/")
            }
        ),
    ));
    let wrong: u64 = results.rows.iter().map(|r| r.wrong_bytes).sum();
    lines.push((
        wrong == 0 && !results.rows.is_empty(),
        format!("every download checked byte for byte: {wrong} wrong byte(s) (goal: 0)"),
    ));
    lines
}

/// The table of every row.
fn rows_table(results: &Results) -> Table {
    let mut table = Table::new([
        ("case", Align::Left),
        ("mode", Align::Left),
        ("run", Align::Right),
        ("transport", Align::Left),
        ("Mbit/s", Align::Right),
        ("x direct", Align::Right),
        ("first byte ms", Align::Right),
        ("fetch ms", Align::Right),
        ("x floor", Align::Right),
        ("moved after ms", Align::Right),
        ("open flow", Align::Left),
        ("resets", Align::Right),
        ("wrong bytes", Align::Right),
    ]);
    for case in CASES {
        let direct = results.median_mbit_s(case, Mode::Direct);
        for mode in MODES {
            for r in results.rows_of(case, mode) {
                let reasons: Vec<String> = r
                    .reset_reasons
                    .iter()
                    .map(|(k, v)| format!("{k} {v}"))
                    .collect();
                table.row([
                    case.name().to_string(),
                    mode.name().to_string(),
                    r.run.to_string(),
                    r.transport.clone().unwrap_or_else(|| "-".into()),
                    dash(r.mbit_s, 1),
                    dash(r.mbit_s.zip(direct).map(|(m, d)| m / d), 2),
                    dash(r.first_byte_ms, 0),
                    dash(r.fetch_ms, 1),
                    dash(r.fetch_ms.map(|f| f / r.floor_ms), 2),
                    dash(r.moved_after_ms, 0),
                    r.open_flow.clone().unwrap_or_else(|| "-".into()),
                    if reasons.is_empty() {
                        r.resets.to_string()
                    } else {
                        format!("{} (edge: {})", r.resets, reasons.join(", "))
                    },
                    r.wrong_bytes.to_string(),
                ]);
            }
        }
    }
    table
}

/// `report.md`.
pub fn markdown(results: &Results) -> String {
    let mut md = String::new();
    let _ = writeln!(md, "# reach: the tunnel where UDP is blocked or policed\n");
    let _ = writeln!(
        md,
        "One link of {} Mbit/s, RTT {} ms, a 1 BDP queue. Cases: UDP open; blocked \
         (every UDP datagram dropped) from before the edge starts; blocked in the middle \
         of a download; policed to 2 Mbit/s (a token bucket on UDP only); blocked, then \
         let through again. Modes: direct (kernel TCP with BBR at both ends) and wanopt \
         (data reduction off; the edge {}). Every download is checked byte for byte; the \
         first byte of a new flow is timed from the edge's start (the path's rules in \
         place; direct, from the lab's readiness), in blocked-mid from the block; the \
         {} KB fetch from its request to its last byte, against one round trip plus its \
         bytes at the link's rate; the bulk download is {} MB.{}\n",
        results.link_mbit,
        results.rtt_ms,
        if results.edge_transport {
            "with `--transport auto`"
        } else {
            "without `--transport`: this build's edge has only QUIC"
        },
        results.fetch_bytes / 1000,
        results.bulk_bytes / 1_000_000,
        if results.quick { " Quick run." } else { "" }
    );
    let _ = writeln!(md, "## Goals\n");
    for (ok, line) in goals(results) {
        let _ = writeln!(md, "- {}: {line}", if ok { "met" } else { "MISSED" });
    }
    let _ = writeln!(md, "\n## Every case\n");
    md.push_str(&rows_table(results).to_string());
    let why: Vec<String> = results
        .rows
        .iter()
        .filter_map(|r| {
            let why = r.transport_why.as_deref()?;
            Some(format!("- {} run {}: {why}", r.case.name(), r.run))
        })
        .collect();
    if !why.is_empty() {
        let _ = writeln!(md, "\n## Why the edge used its transport\n");
        for line in why {
            let _ = writeln!(md, "{line}");
        }
    }
    let failures: Vec<String> = results
        .rows
        .iter()
        .flat_map(|r| {
            r.failures
                .iter()
                .map(move |f| format!("- {} {} run {}: {f}", r.case.name(), r.mode.name(), r.run))
        })
        .collect();
    if !failures.is_empty() {
        let _ = writeln!(md, "\n## What went wrong\n");
        for line in failures {
            let _ = writeln!(md, "{line}");
        }
    }
    if !results.flow_resets.is_empty() {
        let _ = writeln!(md, "\n## Flow resets in the nodes' logs\n");
        for line in &results.flow_resets {
            let _ = writeln!(md, "- {line}");
        }
    }
    if !results.skipped.is_empty() {
        let _ = writeln!(md, "\n## Not measured\n");
        for s in &results.skipped {
            let _ = writeln!(md, "- {s}");
        }
    }
    md
}

/// The lines printed at the end of a run.
pub fn summary(results: &Results) -> String {
    let mut out = String::new();
    for (ok, line) in goals(results) {
        let _ = writeln!(out, "{} {line}", if ok { "met   " } else { "MISSED" });
    }
    for s in &results.skipped {
        let _ = writeln!(out, "not measured: {s}");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(case: Case, mode: Mode) -> Row {
        let mut row = Row::new(case, mode, 1, 68.8);
        row.mbit_s = Some(47.0);
        row.first_byte_ms = Some(120.0);
        row.fetch_ms = Some(72.0);
        if mode == Mode::Wanopt {
            row.transport = Some(if case == Case::Open || case == Case::Returns {
                "quic".into()
            } else {
                "tcp".into()
            });
        }
        row
    }

    fn every_case() -> Results {
        let mut rows = Vec::new();
        for case in CASES {
            for mode in MODES {
                let mut r = row(case, mode);
                if mode == Mode::Wanopt {
                    match case {
                        Case::Blocked => r.first_byte_ms = Some(3300.0),
                        Case::BlockedMid => {
                            r.open_flow = Some("reset".into());
                            r.resets = 1;
                            r.reset_reasons.insert("tunnel_lost".into(), 1);
                        }
                        Case::Policed => r.moved_after_ms = Some(4200.0),
                        Case::Returns => r.moved_after_ms = Some(31_000.0),
                        Case::Open => {}
                    }
                }
                rows.push(r);
            }
        }
        Results {
            fetch_bytes: 180_000,
            edge_transport: true,
            rows,
            ..Results::default()
        }
    }

    #[test]
    fn goals_judge_what_was_measured_and_miss_what_was_not() {
        let results = every_case();
        let lines = goals(&results);
        assert!(lines.iter().all(|(ok, _)| *ok), "{lines:#?}");
        assert!(
            lines[2].1.contains("at 1.05 x its floor of 68.8 ms"),
            "{}",
            lines[2].1
        );
        // A slow first byte, a slow bulk, a reset nobody counted, a wrong
        // byte: missed.
        let mut bad = results.clone();
        for r in bad.rows.iter_mut().filter(|r| r.mode == Mode::Wanopt) {
            match r.case {
                Case::Blocked => r.first_byte_ms = Some(5200.0),
                Case::Policed => r.mbit_s = Some(30.0),
                Case::BlockedMid => r.reset_reasons.clear(),
                Case::Open => r.wrong_bytes = 2,
                Case::Returns => {}
            }
        }
        let missed: Vec<String> = goals(&bad)
            .into_iter()
            .filter(|(ok, _)| !ok)
            .map(|(_, l)| l)
            .collect();
        assert_eq!(missed.len(), 4, "{missed:#?}");
        let report = markdown(&bad);
        assert!(
            report.contains("MISSED: blocked: the first byte of a new flow 5200 ms"),
            "{report}"
        );
        assert!(
            report.contains("| blocked-mid | wanopt | 1 | tcp |"),
            "{report}"
        );
        // Nothing measured: nothing met.
        assert!(goals(&Results::default()).iter().all(|(ok, _)| !ok));
        // A run that never moved says so.
        let mut never = results;
        for r in never.rows.iter_mut().filter(|r| r.case == Case::Policed) {
            r.moved_after_ms = None;
        }
        assert!(goals(&never)
            .iter()
            .any(|(ok, l)| !ok && l.starts_with("policed: the edge on TCP never after")));
    }
}
