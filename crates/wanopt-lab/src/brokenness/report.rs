//! The `path-brokenness` scenario's report: a table per experiment, the
//! paper's figures beside ours, the goals, and the plots of the paper's
//! shape (goodput against loss; the smallest window-scale shift against
//! the RTT).

use std::fmt::Write as _;
use std::path::Path;

use super::matrix::{Experiment, FILLS, SACK_POLICIES};
use super::results::{Results, Row, WscaleMinimum};
use crate::kit::goal::Goal;
use crate::kit::markdown;
use crate::kit::plot::{mode_colour, Line, LineChart, PlotError, PALETTE};
use crate::kit::stats::first_seen;
use crate::kit::{Align, Table};

fn rows(results: &Results, experiment: Experiment) -> impl Iterator<Item = &Row> {
    results
        .rows
        .iter()
        .filter(move |r| r.experiment == experiment.name())
}

/// The row of `experiment` with `policy` and `mode` on the link of `like`.
fn twin<'a>(results: &'a Results, like: &Row, policy: &str, mode: &str) -> Option<&'a Row> {
    results.rows.iter().find(|r| {
        r.experiment == like.experiment
            && r.policy == policy
            && r.mode == mode
            && r.rate_mbps == like.rate_mbps
            && r.rtt_ms == like.rtt_ms
            && r.loss_pct == like.loss_pct
    })
}

fn sack_table(results: &Results) -> String {
    let modes = first_seen(rows(results, Experiment::Sack).map(|r| r.mode.as_str()));
    if modes.is_empty() {
        return String::new();
    }
    let first = rows(results, Experiment::Sack).next();
    let mut out = format!(
        "### SACK: one download, {} Mbit/s, {} ms, goodput against loss\n\n",
        first.map_or(0, |r| r.rate_mbps),
        first.map_or(0, |r| r.rtt_ms)
    );
    let mut table = Table::new([("loss", Align::Right), ("policy", Align::Left)]);
    for mode in &modes {
        table = table.column(format!("{mode} Mbit/s (longest stall)"), Align::Right);
    }
    for loss in first_seen(rows(results, Experiment::Sack).map(|r| r.loss_pct.to_bits())) {
        let loss = f64::from_bits(loss);
        for policy in SACK_POLICIES {
            let mut cells = vec![
                format!("{loss}%"),
                format!("{} (`{}`)", policy.name, policy.paper),
            ];
            for mode in &modes {
                cells.push(
                    rows(results, Experiment::Sack)
                        .find(|r| r.loss_pct == loss && r.policy == policy.name && r.mode == *mode)
                        .map_or("-".into(), |r| {
                            format!("{} ({} s)", r.mbit_s, r.longest_stall_s)
                        }),
                );
            }
            table.row(cells);
        }
    }
    let _ = writeln!(out, "{table}");
    out
}

fn ecn_table(results: &Results) -> String {
    let ecn: Vec<&Row> = rows(results, Experiment::Ecn).collect();
    let Some(first) = ecn.first() else {
        return String::new();
    };
    let mut out = format!(
        "### ECN: one download, {} Mbit/s, {} ms, a RED queue that marks, ECN requested at both ends\n\n",
        first.rate_mbps, first.rtt_ms
    );
    let mut table = Table::text_then_figures(
        3,
        &[
            "policy",
            "rules",
            "mode",
            "Mbit/s",
            "first byte s",
            "retransmitted",
            "CE marked",
            "queue drops",
        ],
    );
    for r in &ecn {
        table.row([
            format!("{} (`{}`)", r.policy, r.paper_policy),
            if r.middlebox.is_empty() {
                "none".to_string()
            } else {
                format!("`{}`", r.middlebox)
            },
            r.mode.clone(),
            r.mbit_s.to_string(),
            r.first_byte_s.map_or("-".into(), |s| s.to_string()),
            r.retrans_segs.map_or("-".into(), |s| s.to_string()),
            r.ce_marked.to_string(),
            r.queue_drops.to_string(),
        ]);
    }
    let _ = writeln!(out, "{table}");
    out
}

fn wscale_table(results: &Results) -> String {
    if results.wscale_minimums.is_empty() {
        return String::new();
    }
    let mut out = format!(
        "### Window scale: the smallest shift written into both SYNs that still fills the link ({}% of it in the download's second half)\n\n",
        FILLS * 100.0
    );
    let mut table = Table::text_then_figures(
        1,
        &[
            "congestion control",
            "rate Mbit/s",
            "RTT ms",
            "measured",
            "window arithmetic",
            "the paper",
            "the receiver's own shift",
        ],
    );
    for m in &results.wscale_minimums {
        table.row([
            m.mode.clone().unwrap_or_else(|| "(computed)".into()),
            m.rate_mbps.to_string(),
            m.rtt_ms.to_string(),
            match (&m.mode, m.measured) {
                (None, _) => "-".into(),
                (Some(_), Some(shift)) => shift.to_string(),
                (Some(_), None) => "none tried filled".into(),
            },
            m.computed.to_string(),
            m.paper.map_or("-".into(), |p| p.to_string()),
            m.receiver_shift.map_or("-".into(), |p| p.to_string()),
        ]);
    }
    let _ = writeln!(
        out,
        "{table}\nA shift written into the SYNs below the receiver's own makes the sender read \
         its windows 2 to the difference times smaller; window arithmetic assumes the \
         receiver announces the shift and the largest window its 16 bits can carry.\n"
    );
    let tunnel: Vec<&Row> = rows(results, Experiment::Wscale)
        .filter(|r| r.mode == "wanopt")
        .collect();
    if !tunnel.is_empty() {
        let _ = writeln!(
            out,
            "Through wanopt with `wscale 0` on the WAN (the middlebox sees only QUIC):\n"
        );
        let mut table = Table::text_then_figures(
            0,
            &[
                "rate Mbit/s",
                "RTT ms",
                "Mbit/s (second half)",
                "of the rate",
            ],
        );
        for r in tunnel {
            table.row([
                r.rate_mbps.to_string(),
                r.rtt_ms.to_string(),
                r.second_half_mbit_s.to_string(),
                r.of_rate.to_string(),
            ]);
        }
        let _ = writeln!(out, "{table}");
    }
    out
}

fn tables(results: &Results) -> String {
    [
        sack_table(results),
        wscale_table(results),
        ecn_table(results),
    ]
    .concat()
}

/// wanopt's rows of `experiment` against its row of `baseline` on the same
/// link: each policy at least 0.9 x its goodput, its first byte at most
/// 0.5 s later.
fn crossed(results: &Results, experiment: Experiment, baseline: &str) -> Goal {
    let mut checked = 0;
    let mut misses = Vec::new();
    for r in rows(results, experiment).filter(|r| r.mode == "wanopt" && r.policy != baseline) {
        let Some(base) = twin(results, r, baseline, "wanopt") else {
            continue;
        };
        checked += 1;
        let late = match (r.first_byte_s, base.first_byte_s) {
            (Some(a), Some(b)) => a > b + 0.5,
            (None, _) => true,
            (Some(_), None) => false,
        };
        if r.mbit_s < 0.9 * base.mbit_s || late {
            misses.push(format!(
                "{} at {}%: {} Mbit/s, first byte {:?} s, against {} and {:?}",
                r.policy, r.loss_pct, r.mbit_s, r.first_byte_s, base.mbit_s, base.first_byte_s
            ));
        }
    }
    Goal {
        text: format!(
            "every {} policy crossed as if absent (0.9 x the goodput without it, the first byte within 0.5 s)",
            experiment.name()
        ),
        mode: "wanopt".into(),
        checked,
        misses,
    }
}

/// The scenario's goals: wanopt crosses every policy; the direct rows show
/// the paper's shape.
pub fn goals(results: &Results) -> Vec<Goal> {
    let tunnel_wscale: Vec<&Row> = rows(results, Experiment::Wscale)
        .filter(|r| r.mode == "wanopt")
        .collect();
    let wscale = Goal {
        text: "`wscale 0` on the WAN: every window-scale link filled".into(),
        mode: "wanopt".into(),
        checked: tunnel_wscale.len(),
        misses: tunnel_wscale
            .iter()
            .filter(|r| !r.fills())
            .map(|r| {
                format!(
                    "{} Mbit/s {} ms: {} of the rate",
                    r.rate_mbps, r.rtt_ms, r.of_rate
                )
            })
            .collect(),
    };
    // The paper's shape, direct: broken SACK below SACK stripped once
    // there is loss to repair; CE on every ECN-capable packet below half of
    // ECN's goodput; a blocked ECN setup a second late.
    let mut checked = 0;
    let mut misses = Vec::new();
    for r in rows(results, Experiment::Sack)
        .filter(|r| r.mode != "wanopt" && r.policy == "broken-sack" && r.loss_pct >= 0.1)
    {
        if let Some(stripped) = twin(results, r, "no-sack", &r.mode) {
            checked += 1;
            if r.mbit_s >= stripped.mbit_s {
                misses.push(format!(
                    "{} at {}%: broken SACK {} Mbit/s, SACK stripped {}",
                    r.mode, r.loss_pct, r.mbit_s, stripped.mbit_s
                ));
            }
        }
    }
    for r in rows(results, Experiment::Ecn).filter(|r| r.mode != "wanopt") {
        let Some(base) = twin(results, r, "ecn", &r.mode) else {
            continue;
        };
        let miss = match r.policy.as_str() {
            "ce-on-ect" => (r.mbit_s >= 0.5 * base.mbit_s).then(|| {
                format!(
                    "{}: CE on ECT {} Mbit/s against {}",
                    r.mode, r.mbit_s, base.mbit_s
                )
            }),
            "ecn-blocked" => match (r.first_byte_s, base.first_byte_s) {
                (Some(a), Some(b)) if a >= b + 0.9 => None,
                (a, b) => Some(format!(
                    "{}: blocked setup first byte {a:?} s against {b:?}",
                    r.mode
                )),
            },
            _ => continue,
        };
        checked += 1;
        misses.extend(miss);
    }
    let shape = Goal {
        text: "the paper's shape: broken SACK below stripped SACK from 0.1% loss; CE on every ECT packet under half the goodput; a blocked ECN setup a second late".into(),
        mode: "direct".into(),
        checked,
        misses,
    };
    vec![
        crossed(results, Experiment::Sack, "sack"),
        crossed(results, Experiment::Ecn, "ecn"),
        wscale,
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
    let _ = writeln!(out, "# path-brokenness{}\n", markdown::quick(results.quick));
    out.push_str(
        "The path-brokenness paper's experiments: one TCP download per cell on a fresh lab \
         (the lab's generator, pseudo-random payload), the middlebox policy in front of the \
         link's queue, direct with one kernel congestion control at both ends or through \
         wanopt (data reduction off), whose tunnel the TCP middlebox never sees. `longest \
         stall`: the longest time the download delivered nothing; `retransmitted`: the \
         server's `RetransSegs` over the download (direct only).\n\n\
         The paper's figures come from 40 Gbit/s NICs and a Linux 4.9 sender (Fig. 4: \
         SACK stripped beats SACK between 0.01% and 0.1% loss because of the cost of \
         processing SACK blocks at 34 Gbit/s, and loses above; broken SACK stops a flow \
         at its first loss; Fig. 3: CE on every ECN-capable packet throttles the sender, \
         a blocked ECN setup costs the 1 s SYN timeout; Fig. 5: the smallest shift that \
         fills 100 Mbit/s is 6 up to 400 ms and 8 beyond, 1 Gbit/s 8 and 11, 10 Gbit/s 11 \
         and 13). This lab runs at the rates its emulator carries on this machine \
         (about 2 Gbit/s); 10 Gbit/s is computed.\n\n",
    );
    out.push_str(&tables(results));
    let _ = writeln!(out, "## Goals\n");
    out.push_str(&goal_lines(results));
    markdown::not_measured_and_resets(
        &mut out,
        results
            .skipped
            .iter()
            .map(|s| format!("{}: {}", s.cell, s.reason)),
        &results.flow_resets,
    );
    out
}

/// `brokenness-sack` (goodput against loss, a line per policy and mode)
/// and `brokenness-wscale` (the smallest shift against the RTT, a line per
/// rate and congestion control, the window arithmetic and the paper's).
pub fn plots(results: &Results, out: &Path) -> Result<(), PlotError> {
    let sack: Vec<&Row> = rows(results, Experiment::Sack).collect();
    if !sack.is_empty() {
        let mut lines = Vec::new();
        for (p, policy) in SACK_POLICIES.iter().enumerate() {
            for mode in first_seen(sack.iter().map(|r| r.mode.as_str())) {
                let colour = if mode == "wanopt" {
                    mode_colour(if p == 0 { "wanopt" } else { "wanopt-fec" })
                } else {
                    PALETTE[(p * 2 + usize::from(mode == "bbr")) % PALETTE.len()]
                };
                lines.push(Line {
                    name: format!("{mode}, {}", policy.name),
                    colour,
                    width: if mode == "wanopt" { 3 } else { 2 },
                    points: sack
                        .iter()
                        .filter(|r| r.mode == mode && r.policy == policy.name)
                        .map(|r| (r.loss_pct, r.mbit_s))
                        .collect(),
                });
            }
        }
        LineChart {
            caption: "One download against random loss".into(),
            x_desc: "loss each way, %",
            y_desc: "Mbit/s",
            y_floor: 10.0,
            lines,
        }
        .write(out, "brokenness-sack")?;
    }
    let measured: Vec<_> = results
        .wscale_minimums
        .iter()
        .filter(|m| m.mode.is_some())
        .collect();
    if !measured.is_empty() {
        let mut lines = Vec::new();
        let rates = first_seen(results.wscale_minimums.iter().map(|m| m.rate_mbps));
        for (i, rate) in rates.iter().enumerate() {
            let at = |m: &&WscaleMinimum| m.rate_mbps == *rate;
            for mode in first_seen(
                measured
                    .iter()
                    .copied()
                    .filter(at)
                    .filter_map(|m| m.mode.clone()),
            ) {
                lines.push(Line {
                    name: format!("{rate} Mbit/s {mode}"),
                    colour: PALETTE[(i * 3 + lines.len()) % PALETTE.len()],
                    width: 2,
                    points: measured
                        .iter()
                        .copied()
                        .filter(at)
                        .filter(|m| m.mode.as_deref() == Some(mode.as_str()))
                        .filter_map(|m| Some((m.rtt_ms as f64, f64::from(m.measured?))))
                        .collect(),
                });
            }
            let all: Vec<_> = results.wscale_minimums.iter().filter(at).collect();
            let points = |f: &dyn Fn(&WscaleMinimum) -> Option<u8>| -> Vec<(f64, f64)> {
                first_seen(all.iter().filter_map(|m| Some((m.rtt_ms, f(m)?))))
                    .into_iter()
                    .map(|(rtt, shift)| (rtt as f64, f64::from(shift)))
                    .collect()
            };
            lines.push(Line {
                name: format!("{rate} Mbit/s, window arithmetic"),
                colour: plotters::style::RGBColor(90, 90, 90),
                width: 1,
                points: points(&|m: &WscaleMinimum| Some(m.computed)),
            });
            lines.push(Line {
                name: format!("{rate} Mbit/s, the paper"),
                colour: plotters::style::RGBColor(0, 0, 0),
                width: 1,
                points: points(&|m: &WscaleMinimum| m.paper),
            });
        }
        LineChart {
            caption: "The smallest window-scale shift that fills the link".into(),
            x_desc: "RTT, ms",
            y_desc: "shift",
            y_floor: 14.0,
            lines,
        }
        .write(out, "brokenness-wscale")?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::brokenness::matrix::{Cell, Link, Mode, ECN_POLICIES};
    use crate::brokenness::results::Counters;

    fn row(
        experiment: Experiment,
        policy: usize,
        mode: Mode,
        loss: f64,
        mbit: f64,
        first: f64,
    ) -> Row {
        let policy = match experiment {
            Experiment::Ecn => ECN_POLICIES[policy],
            _ => SACK_POLICIES[policy],
        };
        let cell = Cell {
            experiment,
            link: Link {
                rate_mbps: 100,
                rtt_ms: 50,
                loss_pct: loss,
                red: experiment == Experiment::Ecn,
            },
            policy,
            wscale: None,
            mode,
            seconds: 2,
        };
        let bytes = (mbit * 1e6 / 8.0 * 2.0) as u64;
        let mut samples = vec![(first, 1)];
        samples.extend((1..=4u32).map(|k| {
            (
                first + (2.0 - first) * f64::from(k) / 4.0,
                bytes * u64::from(k) / 4,
            )
        }));
        Row::new(&cell, 2.0, bytes, &samples, Counters::default())
    }

    #[test]
    fn goals_compare_each_policy_with_its_baseline() {
        let results = Results {
            scenario: "path-brokenness".into(),
            quick: true,
            rows: vec![
                row(Experiment::Sack, 0, Mode::Wanopt, 1.0, 90.0, 0.0),
                row(Experiment::Sack, 1, Mode::Wanopt, 1.0, 88.0, 0.0),
                row(Experiment::Sack, 2, Mode::Wanopt, 1.0, 40.0, 0.0),
                row(Experiment::Sack, 1, Mode::Cubic, 1.0, 20.0, 0.0),
                row(Experiment::Sack, 2, Mode::Cubic, 1.0, 3.0, 0.0),
                row(Experiment::Ecn, 0, Mode::Cubic, 0.0, 90.0, 0.1),
                row(Experiment::Ecn, 1, Mode::Cubic, 0.0, 80.0, 1.2),
                row(Experiment::Ecn, 4, Mode::Cubic, 0.0, 60.0, 0.1),
            ],
            wscale_minimums: vec![WscaleMinimum::computed(10_000, 800)],
            skipped: Vec::new(),
            flow_resets: Vec::new(),
        };
        let goals = goals(&results);
        assert_eq!(goals[0].verdict(), "FAIL");
        assert_eq!(goals[0].checked, 2);
        assert!(
            goals[0].misses[0].starts_with("broken-sack at 1%"),
            "{:?}",
            goals[0]
        );
        assert_eq!(goals[1].verdict(), "n/a");
        // CE on every ECT packet kept 60 of 90: not the paper's throttling.
        assert_eq!(goals[3].checked, 3);
        assert_eq!(goals[3].misses.len(), 1, "{:?}", goals[3]);
        let md = markdown(&results);
        // Columns in the order the modes were measured: wanopt, cubic.
        assert!(
            md.contains("| 1% | broken-sack (`tcp.seqnum.changed`) | 40 (0.5 s) | 3 (0.5 s) |"),
            "{md}"
        );
        assert!(
            md.contains("| (computed) | 10000 | 800 | - | 14 | 13 | - |"),
            "{md}"
        );
    }
}
