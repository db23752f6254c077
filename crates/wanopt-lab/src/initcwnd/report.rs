//! The `initcwnd` scenario's report: a table per path (completion time of
//! each file per mode, and how many times its floor), the post's figures
//! beside, the goals, and the plot of the post's file against the RTT.

use std::fmt::Write as _;
use std::path::Path;

use super::matrix::{Mode, MODES, POST, POST_FILE, REFERENCE};
use super::results::{Results, Row};
use crate::kit::goal::Goal;
use crate::kit::markdown;
use crate::kit::plot::{mode_colour, Line, LineChart, PlotError, PALETTE};
use crate::kit::stats::first_seen;
use crate::kit::{Align, Table};

/// How close to its floor a warm tunnel carries the post's file.
pub const WARM_GOAL_X_FLOOR: f64 = 1.1;

/// A cell: `0.84 s (3.1x)`, `DNF` or `-`.
fn cell(row: Option<&Row>) -> String {
    match row {
        None => "-".into(),
        Some(r) => match (r.seconds, r.x_floor) {
            (Some(s), Some(x)) => format!("{s} s ({x}x)"),
            _ => "DNF".into(),
        },
    }
}

/// The tables, one per path.
fn tables(results: &Results) -> String {
    let mut out = String::new();
    for path in first_seen(results.rows.iter().map(|r| r.path.as_str())) {
        let Some(first) = results.rows.iter().find(|r| r.path == path) else {
            continue;
        };
        let _ = writeln!(
            out,
            "### {path}: {} Mbit/s, {} ms, {}% loss\n",
            first.rate_mbps, first.rtt_ms, first.loss_pct
        );
        let mut table = Table::new([("file", Align::Left), ("floor", Align::Right)]);
        for mode in MODES {
            table = table.column(mode.name(), Align::Right);
        }
        let has_reference = results
            .rows
            .iter()
            .any(|r| r.path == path && r.reference_s.is_some());
        if has_reference {
            table = table.column("the post (icw2 / icw10)", Align::Right);
        }
        let sizes = first_seen(
            results
                .rows
                .iter()
                .filter(|r| r.path == path)
                .map(|r| r.size.as_str()),
        );
        for size in sizes {
            let row = |mode: Mode| results.row(path, size, mode.name());
            let floor = MODES
                .iter()
                .find_map(|&m| row(m))
                .map_or("-".into(), |r| format!("{} s", r.floor_s));
            let mut cells = vec![size.to_string(), floor];
            cells.extend(MODES.iter().map(|&mode| cell(row(mode))));
            if has_reference {
                let reference = |mode: Mode| {
                    row(mode)
                        .and_then(|r| r.reference_s)
                        .map_or("-".into(), |s| format!("{s} s"))
                };
                cells.push(format!(
                    "{} / {}",
                    reference(Mode::Icw2),
                    reference(Mode::Icw10)
                ));
            }
            table.row(cells);
        }
        let _ = writeln!(out, "{table}");
    }
    out
}

/// The scenario's goals.
pub fn goals(results: &Results) -> Vec<Goal> {
    let post_file = |r: &&Row| r.bytes == POST_FILE;
    let clean = |r: &&Row| r.loss_pct == 0.0;
    let warm: Vec<&Row> = results
        .rows
        .iter()
        .filter(|r| r.mode == Mode::WanoptWarm.name())
        .filter(post_file)
        .filter(clean)
        .collect();
    let warm_goal = Goal {
        text: format!(
            "the post's 180 KB file within {WARM_GOAL_X_FLOOR} x its floor on every loss-free path"
        ),
        mode: Mode::WanoptWarm.name().into(),
        checked: warm.len(),
        misses: warm
            .iter()
            .filter(|r| !r.x_floor.is_some_and(|x| x <= WARM_GOAL_X_FLOOR))
            .map(|r| format!("{} {}: {}", r.path, r.size, cell(Some(r))))
            .collect(),
    };
    let best_direct = |r: &Row| {
        [Mode::Icw2, Mode::Icw4, Mode::Icw10]
            .iter()
            .filter_map(|m| results.row(&r.path, &r.size, m.name())?.seconds)
            .fold(None, |best: Option<f64>, s| {
                Some(best.map_or(s, |b| b.min(s)))
            })
    };
    let beats = |mode: Mode| {
        let rows: Vec<&Row> = results
            .rows
            .iter()
            .filter(|r| r.mode == mode.name())
            .collect();
        let misses = rows
            .iter()
            .filter_map(|r| {
                let best = best_direct(r)?;
                match r.seconds {
                    Some(s) if s <= best => None,
                    _ => Some(format!(
                        "{} {}: {} against {best} s",
                        r.path,
                        r.size,
                        cell(Some(r))
                    )),
                }
            })
            .collect();
        Goal {
            text: "no slower than the best initial window, direct, on every path and file".into(),
            mode: mode.name().into(),
            checked: rows.iter().filter(|r| best_direct(r).is_some()).count(),
            misses,
        }
    };
    // The post's shape: a larger initial window is faster.
    let icw10: Vec<&Row> = results
        .rows
        .iter()
        .filter(|r| r.mode == Mode::Icw10.name())
        .filter(clean)
        .collect();
    let shape = Goal {
        text: "direct, an initial window of 10 at least as fast as one of 2 on loss-free paths (the post's shape)".into(),
        mode: Mode::Icw10.name().into(),
        checked: icw10
            .iter()
            .filter(|r| results.row(&r.path, &r.size, Mode::Icw2.name()).is_some())
            .count(),
        misses: icw10
            .iter()
            .filter_map(|r| {
                let two = results.row(&r.path, &r.size, Mode::Icw2.name())?;
                match (r.seconds, two.seconds) {
                    (Some(ten), Some(two)) if ten <= two => None,
                    (_, None) => None,
                    _ => Some(format!("{} {}: {} against {}", r.path, r.size, cell(Some(r)), cell(Some(two)))),
                }
            })
            .collect(),
    };
    vec![
        warm_goal,
        beats(Mode::WanoptWarm),
        beats(Mode::WanoptFresh),
        shape,
    ]
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
    let _ = writeln!(out, "# initcwnd{}\n", markdown::quick(results.quick));
    let _ = writeln!(
        out,
        "One file downloaded over a long path on a fresh TCP connection, the server's \
         initial congestion window set to 2, 4 or 10 segments on its route (`icw2`, `icw4`, \
         `icw10`, kernel defaults otherwise), and through wanopt: a new tunnel's first flow \
         (`wanopt-fresh`) and the same file again after 1 MB crossed it (`wanopt-warm`). \
         Each cell is the median of {} run(s), from just before the connect to the last byte \
         (`DNF`: not done in 60 s), and how many times its floor: one round trip plus the \
         file at the link's rate, what an open connection with an open window would take. \
         A queue of one bandwidth-delay product, data reduction off.\n",
        results.runs
    );
    let _ = writeln!(
        out,
        "The post's figures: its 180 KB file took {} s with an initial window of 2 and {} s \
         with 10, over a path it does not describe; the `{}` path ({}) is fitted to them.\n",
        REFERENCE[0].1,
        REFERENCE[1].1,
        POST.name,
        POST.label()
    );
    out.push_str(&tables(results));
    let _ = writeln!(out, "## Goals\n");
    out.push_str(&goal_lines(results));
    markdown::not_measured_and_resets(
        &mut out,
        results
            .skipped
            .iter()
            .map(|s| format!("{} {} {}: {}", s.path, s.size, s.mode, s.reason)),
        &results.flow_resets,
    );
    out
}

/// `initcwnd.svg`/`.png`: the post's file on the loss-free 20 Mbit/s
/// paths, seconds against the RTT, a line per mode, and the floor.
pub fn plot(results: &Results, out: &Path) -> Result<(), PlotError> {
    let on_clean = |r: &&Row| r.bytes == POST_FILE && r.loss_pct == 0.0 && r.path != POST.name;
    let mut lines: Vec<Line> = MODES
        .iter()
        .enumerate()
        .map(|(i, mode)| Line {
            name: mode.name().into(),
            colour: if mode.tunnel() {
                mode_colour(if *mode == Mode::WanoptWarm {
                    "wanopt"
                } else {
                    "wanopt-fec"
                })
            } else {
                PALETTE[(i + 4) % PALETTE.len()]
            },
            width: 2,
            points: results
                .rows
                .iter()
                .filter(on_clean)
                .filter(|r| r.mode == mode.name())
                .filter_map(|r| Some((r.rtt_ms as f64, r.seconds?)))
                .collect(),
        })
        .collect();
    let mut floor: Vec<(f64, f64)> = first_seen(
        results
            .rows
            .iter()
            .filter(on_clean)
            .map(|r| (r.rtt_ms, r.floor_s.to_bits())),
    )
    .into_iter()
    .map(|(rtt, floor)| (rtt as f64, f64::from_bits(floor)))
    .collect();
    floor.sort_by(|a, b| a.0.total_cmp(&b.0));
    lines.push(Line {
        name: "floor".into(),
        colour: plotters::style::RGBColor(0, 0, 0),
        width: 1,
        points: floor,
    });
    LineChart {
        caption: "180 KB over 20 Mbit/s: completion time".into(),
        x_desc: "RTT, ms",
        y_desc: "seconds",
        y_floor: 0.5,
        lines,
    }
    .write(out, "initcwnd")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::initcwnd::matrix::{RTT200, RTT200_LOSS1};

    fn results(rows: Vec<Row>) -> Results {
        Results {
            scenario: "initcwnd".into(),
            quick: true,
            runs: 1,
            rows,
            skipped: Vec::new(),
            flow_resets: Vec::new(),
        }
    }

    #[test]
    fn the_report_has_a_table_per_path_and_goals_that_can_fail() {
        let rows = vec![
            Row::new(&RTT200, POST_FILE, Mode::Icw2, vec![Some(1.45)]),
            Row::new(&RTT200, POST_FILE, Mode::Icw4, vec![Some(1.3)]),
            Row::new(&RTT200, POST_FILE, Mode::Icw10, vec![Some(1.1)]),
            Row::new(&RTT200, POST_FILE, Mode::WanoptFresh, vec![Some(0.5)]),
            Row::new(&RTT200, POST_FILE, Mode::WanoptWarm, vec![Some(0.28)]),
            Row::new(&RTT200_LOSS1, POST_FILE, Mode::Icw10, vec![Some(1.5)]),
            Row::new(&RTT200_LOSS1, POST_FILE, Mode::WanoptWarm, vec![None]),
        ];
        let r = results(rows);
        let md = markdown(&r);
        assert!(
            md.contains("### rtt200: 20 Mbit/s, 200 ms, 0% loss"),
            "{md}"
        );
        assert!(md.contains("| 180KB | 0.272 s | 1.45 s (5.33x) |"), "{md}");
        assert!(
            md.contains("| 180KB | 0.272 s | - | - | 1.5 s (5.51x) | - | DNF |"),
            "{md}"
        );
        let goals = goals(&r);
        assert_eq!(goals[0].verdict(), "PASS", "{:?}", goals[0]);
        assert_eq!(goals[0].checked, 1);
        // The lossy path's warm run did not finish: slower than icw10.
        assert_eq!(goals[1].verdict(), "FAIL");
        assert_eq!(goals[1].misses, ["rtt200-loss1 180KB: DNF against 1.5 s"]);
        assert_eq!(goals[2].verdict(), "PASS");
        assert_eq!(goals[3].verdict(), "PASS");
        let slow = results(vec![
            Row::new(&RTT200, POST_FILE, Mode::Icw2, vec![Some(1.0)]),
            Row::new(&RTT200, POST_FILE, Mode::Icw10, vec![Some(1.2)]),
            Row::new(&RTT200, POST_FILE, Mode::WanoptWarm, vec![Some(0.31)]),
        ]);
        let goals = super::goals(&slow);
        assert_eq!(goals[0].verdict(), "FAIL");
        assert_eq!(goals[3].verdict(), "FAIL");
    }
}
