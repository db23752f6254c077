//! The `fwsm` scenario's report: the guide's table beside ours, the
//! window arithmetic of each row, what the firewall did, the goals, and a
//! plot of the table.

use std::fmt::Write as _;
use std::path::Path;

use super::matrix::{CONFIGS, FIREWALL_MBPS, FIREWALL_PER_PACKET_NS, MODES, REORDER};
use super::results::{Results, Row, CPU_BOUND_PCT};
use crate::kit::goal::Goal;
use crate::kit::markdown;
use crate::kit::plot::{mode_colour, BarChart, Bars, PlotError};
use crate::kit::Table;

/// What "meets" allows below the figure it is held to.
const MEETS: f64 = 0.95;

fn dash<T: ToString>(value: Option<T>) -> String {
    value.map_or("-".into(), |v| v.to_string())
}

/// `" (CPU 97% busy)"` after a miss whose row the machine bound.
fn cpu_note(row: &Row) -> String {
    match row.cpu_busy_pct {
        Some(pct) if row.cpu_bound() => format!(" (CPU {pct}% busy: this machine's bound)"),
        _ => String::new(),
    }
}

fn goodput_table(results: &Results) -> String {
    let mut table = Table::text_then_figures(
        3,
        &[
            "configuration",
            "rules",
            "MTU",
            "loss %",
            "guide",
            "ceiling",
        ],
    );
    for mode in MODES {
        table = table.column(mode.name(), crate::kit::Align::Right);
    }
    for config in &CONFIGS {
        let Some(any) = results.rows.iter().find(|r| r.config == config.name) else {
            continue;
        };
        let mut cells = vec![
            config.name.to_string(),
            if config.rules.is_empty() && !config.reorder {
                "none".into()
            } else {
                format!(
                    "{}{}",
                    if config.rules.is_empty() {
                        String::new()
                    } else {
                        format!("`{}`", config.rules)
                    },
                    if config.reorder { ", reorders" } else { "" }
                )
            },
            config.mtu.to_string(),
            config.loss_pct.to_string(),
            dash(config.guide_mbps),
            any.ceiling_mbit_s.to_string(),
        ];
        for mode in MODES {
            cells.push(dash(
                results.row(config.name, mode.name()).map(|r| r.mbit_s),
            ));
        }
        table.row(cells);
    }
    format!(
        "### One TCP download through the firewall, Mbit/s of payload (median of {} x {} s)\n\n{table}\n",
        results.runs, results.seconds
    )
}

fn window_table(results: &Results) -> String {
    let mut table = Table::text_then_figures(
        1,
        &[
            "configuration",
            "idle RTT ms",
            "payload bytes",
            "window needed, bytes",
            "256 KB / RTT, Mbit/s",
            "arithmetic",
        ],
    );
    for config in &CONFIGS {
        let Some(row) = results
            .rows
            .iter()
            .find(|r| r.config == config.name && r.idle_rtt_ms.is_some())
        else {
            continue;
        };
        table.row([
            config.name.to_string(),
            dash(row.idle_rtt_ms),
            row.payload_bytes.to_string(),
            dash(row.bdp_bytes),
            dash(row.window_ceiling_mbit_s),
            row.window_command()
                .map_or("-".into(), |c| format!("`{c}`")),
        ]);
    }
    format!(
        "### Window arithmetic: throughput = window / RTT, the window a path needs = rate x RTT\n\n{table}\n"
    )
}

fn firewall_table(results: &Results) -> String {
    let mut table = Table::text_then_figures(
        2,
        &[
            "configuration",
            "mode",
            "each download, Mbit/s",
            "retransmitted (median)",
            "reordered",
            "queue drops",
            "CPU busy %",
        ],
    );
    for row in &results.rows {
        table.row([
            row.config.clone(),
            row.mode.clone(),
            row.runs_mbit_s
                .iter()
                .map(f64::to_string)
                .collect::<Vec<_>>()
                .join(", "),
            dash(row.retrans_segs),
            row.reordered.to_string(),
            row.queue_drops.to_string(),
            dash(row.cpu_busy_pct),
        ]);
    }
    format!("### What the firewall did (over all downloads)\n\n{table}\n")
}

fn tables(results: &Results) -> String {
    if results.rows.is_empty() {
        return String::new();
    }
    [
        goodput_table(results),
        window_table(results),
        firewall_table(results),
    ]
    .concat()
}

/// The goals, each a pass/fail line.
pub fn goals(results: &Results) -> Vec<Goal> {
    // The guide's order: no firewall, jumbo frames, tuned, default.
    let order = ["no-firewall", "jumbo", "tuned", "default"];
    let mut shape = Goal {
        text: "the best direct download keeps the guide's order (no firewall > jumbo > tuned > default)"
            .into(),
        mode: "direct".into(),
        checked: 0,
        misses: Vec::new(),
    };
    for pair in order.windows(2) {
        if let (Some(a), Some(b)) = (results.best_direct(pair[0]), results.best_direct(pair[1])) {
            shape.checked += 1;
            if a.mbit_s <= b.mbit_s {
                shape.misses.push(format!(
                    "{} {} Mbit/s not above {} {}",
                    pair[0], a.mbit_s, pair[1], b.mbit_s
                ));
            }
        }
    }
    let mut meets = Goal {
        text: format!("in every configuration, at least {MEETS} x the best direct download"),
        mode: "wanopt".into(),
        checked: 0,
        misses: Vec::new(),
    };
    for config in &CONFIGS {
        if let (Some(w), Some(d)) = (
            results.row(config.name, "wanopt"),
            results.best_direct(config.name),
        ) {
            meets.checked += 1;
            if w.mbit_s < MEETS * d.mbit_s {
                meets.misses.push(format!(
                    "{} {} Mbit/s against {} {}{}",
                    config.name,
                    w.mbit_s,
                    d.mode,
                    d.mbit_s,
                    cpu_note(w)
                ));
            }
        }
    }
    let mut absent = Goal {
        text: format!(
            "through the default firewall, at least {MEETS} x the best direct download through the tuned one on the same path (its TCP policy crossed as if absent)"
        ),
        mode: "wanopt".into(),
        checked: 0,
        misses: Vec::new(),
    };
    for (default, tuned) in [("default", "tuned"), ("default-loss", "tuned-loss")] {
        if let (Some(w), Some(d)) = (results.row(default, "wanopt"), results.best_direct(tuned)) {
            absent.checked += 1;
            if w.mbit_s < MEETS * d.mbit_s {
                absent.misses.push(format!(
                    "{default} {} Mbit/s against {tuned} {} {}{}",
                    w.mbit_s,
                    d.mode,
                    d.mbit_s,
                    cpu_note(w)
                ));
            }
        }
    }
    vec![shape, meets, absent]
}

fn goal_lines(results: &Results) -> String {
    crate::kit::goal::lines(&goals(results))
}

/// The text printed at the end of a run.
pub fn summary(results: &Results) -> String {
    format!("{}goals:\n{}", tables(results), goal_lines(results))
}

/// `report.md`.
pub fn markdown(results: &Results) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "# fwsm{}\n", markdown::quick(results.quick));
    let (reorder, gap) = REORDER;
    let _ = write!(
        out,
        "The firewall single-flow guide's table on the lab: one TCP download \
         (the lab's generator, pseudo-random payload) between two hosts whose \
         receive window is about 256 KB (the guide's `iperf -w 256K`), on 1 Gbit/s \
         ports, through a stateful firewall or not; direct with CUBIC or BBR at \
         both hosts, or through wanopt (data reduction off), whose edge and core \
         stand on either side of the firewall and whose tunnel is UDP. The \
         firewall is the emulated link: {FIREWALL_MBPS} Mbit/s of bytes plus \
         {FIREWALL_PER_PACKET_NS} ns per packet (the fit of the guide's tuned and \
         jumbo rows: a packet-rate cap per flow), its TCP rules as the lab's \
         middlebox, and with its completion unit off it holds back {reorder} of \
         the packets by {gap}. `ceiling`: what one flow of full segments can carry \
         through it. The guide's figures come from 2010 hosts and an FWSM 4.0; \
         the order of its rows is what a lab can reproduce, not its hosts' \
         817 Mbit/s. `CPU busy`: this machine's cores, shared by the emulator, \
         both nodes and both hosts; at {CPU_BOUND_PCT}% or more the machine, not \
         the path, set the rate.\n\n"
    );
    out.push_str(&tables(results));
    let _ = writeln!(out, "## Goals\n");
    out.push_str(&goal_lines(results));
    markdown::not_measured_and_resets(
        &mut out,
        results
            .skipped
            .iter()
            .map(|s| format!("{} {}: {}", s.config, s.mode, s.reason)),
        &results.flow_resets,
    );
    out
}

/// `fwsm.svg`/`.png`: the guide's figure and each mode's, per configuration.
pub fn plot(results: &Results, out: &Path) -> Result<(), PlotError> {
    if results.rows.is_empty() {
        return Ok(());
    }
    let configs: Vec<_> = CONFIGS
        .iter()
        .filter(|c| results.rows.iter().any(|r| r.config == c.name))
        .collect();
    let mut series = vec![Bars {
        name: "the guide".into(),
        colour: plotters::style::RGBColor(90, 90, 90),
        values: configs.iter().map(|c| c.guide_mbps).collect(),
    }];
    for mode in MODES {
        series.push(Bars {
            name: mode.name().into(),
            colour: mode_colour(mode.name()),
            values: configs
                .iter()
                .map(|c| results.row(c.name, mode.name()).map(|r| r.mbit_s))
                .collect(),
        });
    }
    BarChart {
        caption: "One TCP flow through a firewall".into(),
        groups: configs.iter().map(|c| c.name.to_string()).collect(),
        y_desc: "Mbit/s",
        series,
    }
    .write(out, "fwsm")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fwsm::matrix::Mode;
    use crate::fwsm::results::{Row, Run};

    fn results(figures: &[(usize, Mode, f64)]) -> Results {
        Results {
            scenario: "fwsm".into(),
            quick: true,
            runs: 1,
            seconds: 4,
            rows: figures
                .iter()
                .map(|&(c, mode, mbit_s)| {
                    Row::new(
                        &CONFIGS[c],
                        mode,
                        Some(0.2),
                        &[Run {
                            mbit_s,
                            retrans_segs: (!mode.tunnel()).then_some(5),
                            reordered: 0,
                            queue_drops: 0,
                            cpu_busy_pct: Some(if mode.tunnel() { 97.0 } else { 60.0 }),
                        }],
                    )
                })
                .collect(),
            skipped: Vec::new(),
            flow_resets: Vec::new(),
        }
    }

    #[test]
    fn goals_hold_the_guides_order_and_wanopt_to_the_best_direct() {
        // no-firewall 0, default 1, tuned 2, jumbo 3.
        let good = results(&[
            (0, Mode::Bbr, 900.0),
            (1, Mode::Cubic, 420.0),
            (1, Mode::Bbr, 500.0),
            (1, Mode::Wanopt, 590.0),
            (2, Mode::Bbr, 600.0),
            (2, Mode::Wanopt, 598.0),
            (3, Mode::Bbr, 680.0),
            (3, Mode::Wanopt, 650.0),
        ]);
        let verdicts: Vec<&str> = goals(&good).iter().map(Goal::verdict).collect();
        assert_eq!(verdicts, ["PASS", "PASS", "PASS"]);
        let bad = results(&[
            (0, Mode::Bbr, 900.0),
            (1, Mode::Bbr, 620.0),
            (1, Mode::Wanopt, 400.0),
            (2, Mode::Bbr, 600.0),
        ]);
        let goals = goals(&bad);
        assert_eq!(goals[0].misses, ["tuned 600 Mbit/s not above default 620"]);
        assert_eq!(
            goals[1].misses,
            ["default 400 Mbit/s against bbr 620 (CPU 97% busy: this machine's bound)"]
        );
        assert_eq!(
            goals[2].misses,
            ["default 400 Mbit/s against tuned bbr 600 (CPU 97% busy: this machine's bound)"]
        );
        let report = markdown(&bad);
        assert!(
            report.contains(
                "| default | `mss 1380 randomize-seq-broken-sack`, reorders | 1500 | 0 | 458 |"
            ),
            "{report}"
        );
        assert!(report
            .contains("`wanopt window --rate 605mbit --rtt 200us --mss 1368 --window 262144`"));
        assert!(report.contains("**FAIL** wanopt"));
    }
}
