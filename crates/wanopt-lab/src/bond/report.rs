//! `report.md` and the summary of the `bond` scenario: one table line per
//! cell, then the goals.

use std::fmt::Write as _;

use super::goals::evaluate;
use super::matrix::{link2_spec, CUT, LINK1_MBPS, LINK1_RTT_MS, LOSS_PCT, SUM_MBPS};
use super::results::{Results, Row};
use crate::kit::{markdown, Table};

fn figure(v: Option<f64>) -> String {
    match v {
        Some(v) if v.abs() >= 1_000.0 => format!("{v:.0}"),
        Some(v) => format!("{v:.1}"),
        None => "-".into(),
    }
}

fn count(v: Option<u64>) -> String {
    v.map_or("-".into(), |v| v.to_string())
}

/// `up / down` of a voice figure, `-` without voice.
fn both(up: Option<f64>, down: Option<f64>, decimals: usize) -> String {
    match (up, down) {
        (None, None) => "-".into(),
        (up, down) => {
            let f = |v: Option<f64>| v.map_or("-".into(), |v| format!("{v:.decimals$}"));
            format!("{} / {}", f(up), f(down))
        }
    }
}

/// Each link's peak 100 ms, and its declared rate when there is one:
/// `29.3 (29.1) / 19.5 (19.4)`.
fn peaks(r: &Row) -> String {
    let Some(peak) = &r.peak_mbit_s else {
        return "-".into();
    };
    peak.iter()
        .enumerate()
        .map(
            |(i, p)| match r.declared_mbit_s.as_ref().and_then(|d| d.get(i)) {
                Some(d) => format!("{p:.1} ({d:.1})"),
                None => format!("{p:.1}"),
            },
        )
        .collect::<Vec<_>>()
        .join(" / ")
}

/// The table of every row.
pub fn table(results: &Results) -> String {
    let mut table = Table::text_then_figures(
        3,
        &[
            "mode",
            "event",
            "workload",
            "Mbit/s",
            "% of sum",
            "longest stall ms",
            "resets",
            "wrong bytes",
            "Mbit/s cut",
            "sum again s",
            "voice p99 ms up / down",
            "voice loss % up / down",
            "peak 100 ms Mbit/s link 1 / 2",
            "runs",
        ],
    );
    for r in &results.rows {
        table.row([
            r.mode.clone(),
            r.event.clone(),
            r.workload.clone(),
            figure(r.mbit_s),
            figure(r.of_sum_pct),
            figure(r.longest_stall_ms),
            count(r.resets),
            count(r.wrong_bytes),
            figure(r.cut_mbit_s),
            figure(r.recovered_s),
            both(r.p99_up_ms, r.p99_down_ms, 1),
            both(r.loss_up_pct, r.loss_down_pct, 2),
            peaks(r),
            r.runs.to_string(),
        ]);
    }
    table.to_string()
}

/// The goals as Markdown lines.
pub fn goal_lines(results: &Results) -> String {
    evaluate(results).iter().map(|g| g.line() + "\n").collect()
}

/// What stdout shows at the end: the table and the goals.
pub fn summary(results: &Results) -> String {
    format!("{}\ngoals:\n{}", table(results), goal_lines(results))
}

/// Where a row was measured, for a note.
fn at(r: &Row) -> String {
    format!("{} {} {}", r.mode, r.event, r.workload)
}

/// `report.md`.
pub fn markdown(results: &Results) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "# bond{}\n", markdown::quick(results.quick));
    let _ = writeln!(
        out,
        "Two links between the edge and the core: link 1 `rtt {LINK1_RTT_MS}ms rate \
         {LINK1_MBPS}mbit queue 1bdp` (the faster, and the only one direct traffic takes) and \
         link 2 `{}` (the nearer), {SUM_MBPS:.0} Mbit/s together. Events on link 1: `none`, \
         `loss` ({LOSS_PCT}% random loss each way) and `cut` (down at a third of the download, \
         up {} s later). Workloads: `bulk`, one TCP download from the lab's server whose every \
         byte the client checks against the seeded payload; `voice`, 50 packets/s of 200 B each \
         way (UDP, DSCP EF, through the edge's `--forward-udp`) beside one download. Modes: \
         `direct` (no nodes, kernel BBR at both ends, link 1 only: the better link alone); \
         `wanopt-failover` and `wanopt-bond` (a `--path` on each link, link 1 first, \
         `--path-mode failover` or `bond`); `wanopt-shaped` (bond, each `--path` declaring 97% \
         of its link's rate with `rate=`, so that the queue is the nodes', where voice goes \
         first); `wanopt-sla` (as `wanopt-shaped`, the voice in the class \
         `name=voice,udp,realtime,sla=latency<60ms`: its datagrams on the path that meets the \
         SLA alone, link 2's); `wanopt-path2` (link 1 down for the whole cell, so \
         the tunnel runs on link 2 alone: the voice baseline). The peak is the most each link \
         was handed in any 100 ms, either way (the emulators' counters; the declared rate in \
         parentheses). A new lab (and new nodes) for \
         every run. Settings: `{}`.\n",
        link2_spec(),
        CUT.as_secs(),
        results.settings
    );
    let _ = writeln!(
        out,
        "Figures: `Mbit/s` the download's goodput over its time; `longest stall` the longest \
         time between two arrivals of its bytes; `resets` connections that ended other than by \
         the client's half-close; `wrong bytes` bytes that were not the payload's; `Mbit/s cut` \
         the goodput from 1 s after link 1's cut to its return; `sum again` the time from link \
         1's return to the end of the first whole second at 90% of the sum; voice p99 the \
         one-way delay's 99th percentile (the kernel's arrival stamp minus the sender's, one \
         clock for every namespace) and its delivered loss, each way. With several runs a row \
         holds the medians, and the sums of resets and wrong bytes. Per-100 ms goodput is in \
         `series/`, the nodes' `/status` at the end of each wanopt cell in `status/`.\n"
    );
    out.push_str(&table(results));
    let _ = writeln!(out, "\n## Goals\n");
    out.push_str(&goal_lines(results));
    let skipped = results
        .skipped
        .iter()
        .map(|s| format!("{} {} {}: {}", s.mode, s.event, s.workload, s.reason));
    let notes: Vec<String> = results
        .rows
        .iter()
        .filter_map(|r| Some(format!("{}: {}", at(r), r.note.as_ref()?)))
        .collect();
    if !notes.is_empty() {
        out.push('\n');
        markdown::list(&mut out, "Notes", notes);
    }
    markdown::not_measured_and_resets(&mut out, skipped, &results.flow_resets);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bond::matrix::{Cell, Event, Mode, Workload};
    use crate::bond::results::Skipped;

    #[test]
    fn the_table_has_a_line_per_row_and_the_goals_follow() {
        let cell = Cell {
            mode: Mode::WanoptFailover,
            event: Event::Cut,
            workload: Workload::Bulk,
        };
        let results = Results {
            scenario: "bond".into(),
            quick: true,
            settings: serde_json::Value::Null,
            rows: vec![Row {
                mbit_s: Some(27.25),
                of_sum_pct: Some(54.5),
                longest_stall_ms: Some(212.0),
                resets: Some(0),
                wrong_bytes: Some(0),
                cut_mbit_s: Some(18.9),
                peak_mbit_s: Some(vec![31.2, 20.4]),
                runs: 1,
                note: Some("the drain did not end".into()),
                ..Row::new(&cell, 15)
            }],
            skipped: vec![Skipped {
                mode: "wanopt-bond".into(),
                event: "cut".into(),
                workload: "bulk".into(),
                reason: "no --path-mode bond".into(),
            }],
            flow_resets: vec![],
            series: vec![],
        };
        let md = markdown(&results);
        assert!(md.starts_with("# bond (quick)\n"), "{md}");
        assert!(
            md.contains(
                "| wanopt-failover | cut | bulk | 27.2 | 54.5 | 212.0 | 0 | 0 | 18.9 | - | - | - | 31.2 / 20.4 | 1 |"
            ),
            "{md}"
        );
        // The header, the separator and the rows have as many columns.
        let columns: Vec<usize> = md
            .lines()
            .filter(|l| l.starts_with('|'))
            .map(|l| l.matches('|').count())
            .collect();
        assert!(
            columns.len() == 3 && columns.iter().all(|c| *c == columns[0]),
            "{columns:?}"
        );
        assert!(md.contains("- **not measured** wanopt-bond: link 1 cut mid-transfer"));
        assert!(md.contains("## Not measured\n\n- wanopt-bond cut bulk: no --path-mode bond"));
        assert!(md.contains("## Notes\n\n- wanopt-failover cut bulk: the drain did not end"));
        assert!(summary(&results).contains("goals:\n- **"));
        assert_eq!(both(Some(21.04), None, 1), "21.0 / -");
        assert_eq!(both(None, None, 1), "-");
        let shaped = Row {
            peak_mbit_s: Some(vec![29.3, 19.5]),
            declared_mbit_s: Some(vec![29.1, 19.4]),
            ..Row::new(&cell, 15)
        };
        assert_eq!(peaks(&shaped), "29.3 (29.1) / 19.5 (19.4)");
        assert_eq!(peaks(&Row::new(&cell, 15)), "-");
    }
}
