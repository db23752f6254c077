//! `report.md` and the summary of the `realtime` scenario: one table line
//! per stream, direction and mode, then the goals.

use std::fmt::Write as _;

use super::goals::evaluate;
use super::matrix::{BURST_SPEC, JITTER_MS, LINK_MBPS, RTT_MS};
use super::results::{Results, Row};
use crate::kit::{markdown, Table};

fn figure(v: Option<f64>) -> String {
    match v {
        Some(v) if v.abs() >= 100.0 => format!("{v:.0}"),
        Some(v) => format!("{v:.2}"),
        None => "-".into(),
    }
}

fn condition(r: &Row) -> String {
    let link1 = if r.burst {
        format!("{} (bursts)", r.loss_pct)
    } else {
        format!("{}", r.loss_pct)
    };
    match r.link2_loss_pct {
        Some(l) => format!("{link1} / link 2 {l}"),
        None => link1,
    }
}

/// The table of every row.
pub fn table(results: &Results) -> String {
    let mut table = Table::text_then_figures(
        4,
        &[
            "loss %",
            "event",
            "stream",
            "mode",
            "delivered loss %",
            "delay p50 ms",
            "delay p99 ms",
            "+p99 vs direct ms",
            "jitter ms",
            "max gap ms",
            "Mbit/s",
            "dup",
            "FEC residual %",
        ],
    );
    for r in &results.rows {
        table.row([
            condition(r),
            r.event.clone(),
            format!("{} {}", r.stream, r.direction),
            r.mode.clone(),
            match r.delivered_loss_pct {
                Some(l) => format!("{l:.3}"),
                None => "-".into(),
            },
            figure(r.delay_p50_ms),
            figure(r.delay_p99_ms),
            figure(r.added_delay_p99_ms),
            match r.jitter_ms {
                Some(j) => format!("{j:.3}"),
                None => "-".into(),
            },
            figure(r.max_gap_ms),
            figure(r.throughput_mbps),
            r.duplicates_delivered
                .map_or("-".to_string(), |d| d.to_string()),
            figure(r.fec_residual_pct),
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

/// `report.md`.
pub fn markdown(results: &Results) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "# realtime{}\n", markdown::quick(results.quick));
    let _ = writeln!(
        out,
        "Link 1: {LINK_MBPS} Mbit/s each way, RTT {RTT_MS} ms, a queue of 1 BDP, {JITTER_MS} ms \
         jitter, random loss each way or Gilbert-Elliott bursts (`loss-burst {BURST_SPEC}`: \
         3.85% mean, bursts of 4 frames on average). At the same time: voice (UDP, 50 packets/s \
         of 200 B each way, DSCP EF), video (UDP, 2 Mbit/s down as 30 frames/s of 7 x 1,200 B, \
         AF41) and one bulk TCP download. A new lab (and new nodes) for every cell. Settings: \
         `{}`.\n",
        results.settings
    );
    let _ = writeln!(
        out,
        "Modes: `direct` over link 1 without nodes (the endpoints' TCP: the lab's `linux` \
         profile, this kernel's default congestion control, in the settings as \
         `endpoint_congestion_control`); `wanopt-fec` through the tunnel on link 1 \
         with `--fec auto`, the streams through the edge's `--forward-udp`. Figures: delivered \
         loss is packets sent and never delivered; one-way delay is the kernel's arrival stamp \
         minus the sender's (one clock for every namespace); jitter is RFC 3550's estimate \
         averaged over the run; the gap is the longest time between consecutive arrivals; \
         `dup` counts copies delivered twice (must be 0); `FEC residual` is the loss left \
         after FEC in that direction, as the sending node reports it. `+p99 vs direct` is the added \
         one-way delay p99 over the `direct` row of the same condition. Per-100 ms series are \
         in `series/`, the nodes' `/status` at the end of each wanopt cell in `status/`. \
         `link1-down` cuts link 1 for 5 s from a third of the cell.\n"
    );
    out.push_str(&table(results));
    let _ = writeln!(out, "\n## Goals\n");
    out.push_str(&goal_lines(results));
    if !results.skipped.is_empty() {
        let skipped = results.skipped.iter().map(|s| {
            let bursts = if s.burst { " bursts" } else { "" };
            let (mode, loss, event) = (&s.mode, s.loss_pct, &s.event);
            format!("{mode} at {loss}%{bursts} {event}: {}", s.reason)
        });
        out.push('\n');
        markdown::list(&mut out, "Not measured", skipped);
    }
    let notes: Vec<String> = results
        .rows
        .iter()
        .filter_map(|r| {
            let note = r.note.as_deref()?;
            let (mode, stream, direction, loss) = (&r.mode, &r.stream, &r.direction, r.loss_pct);
            Some(format!("{mode} {stream} {direction} at {loss}%: {note}"))
        })
        .collect();
    if !notes.is_empty() {
        out.push('\n');
        markdown::list(&mut out, "Notes", notes);
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
    use crate::realtime::matrix::{Cell, Condition, Event, Mode};

    #[test]
    fn the_table_has_a_line_per_row_and_the_goals_follow() {
        let cell = Cell {
            condition: Condition {
                loss_pct: 5.0,
                burst: false,
                link2_loss_pct: None,
            },
            mode: Mode::WanoptFec,
            event: Event::None,
        };
        let results = Results {
            scenario: "realtime".into(),
            quick: true,
            settings: serde_json::Value::Null,
            rows: vec![Row {
                delivered_loss_pct: Some(0.25),
                delay_p99_ms: Some(24.5),
                duplicates_delivered: Some(0),
                fec_residual_pct: Some(0.31),
                ..Row::new(&cell, "voice", "up", 20)
            }],
            skipped: vec![],
            flow_resets: vec![],
            series: vec![],
        };
        let md = markdown(&results);
        assert!(
            md.contains(
                "| 5 | none | voice up | wanopt-fec | 0.250 | - | 24.50 | - | - | - | - | 0 | 0.31 |"
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
        assert!(md.contains("**PASS** wanopt-fec: voice and video residual loss under 0.5%"));
        assert!(md.contains("**not measured** wanopt-dup"));
    }
}
