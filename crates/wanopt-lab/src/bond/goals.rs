//! The bond scenario's goals, checked against a run's rows: each a
//! PASS/FAIL line for a wanopt mode with the figure it was judged on, or
//! "not measured" with why (a cell skipped, as the bond cells are when the
//! binary has no `--path-mode bond`).

use super::matrix::{Event, Mode, Workload, LINK1_MBPS, LOSS_PCT, SLA_PATH, SUM_MBPS};
use super::results::{Results, Row};

/// The share of the sum one download must reach with both links clean.
pub const CLEAN_SHARE: f64 = 0.9;
/// The share of the sum one download must reach with loss on link 1.
pub const LOSSY_SHARE: f64 = 0.8;
/// The longest stall a cut of link 1 may cause, ms.
pub const CUT_STALL_MS: f64 = 300.0;
/// How soon after link 1's return the sum must be back, s.
pub const RECOVERY_S: f64 = 5.0;
/// How much the voice stream's p99 may exceed its better path's alone, ms.
pub const VOICE_ADDED_P99_MS: f64 = 5.0;
/// The voice stream's delivered loss must stay under this, percent.
pub const VOICE_LOSS_PCT: f64 = 0.1;
/// The most a link declared at a rate may be handed in any 100 ms, as a
/// share of that rate (20.4 Mbit/s for 20).
pub const DECLARED_SLACK: f64 = 1.02;

/// A goal's verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Met.
    Pass,
    /// Missed.
    Fail,
    /// Not checked: the cell it needs was not measured.
    NotMeasured,
}

/// One goal for one mode.
#[derive(Debug, Clone, PartialEq)]
pub struct Goal {
    /// What it asks.
    pub text: String,
    /// The mode checked.
    pub mode: String,
    /// The verdict.
    pub verdict: Verdict,
    /// The figure it was judged on, or why it was not measured.
    pub figure: String,
}

impl Goal {
    /// The goal as a Markdown list item.
    pub fn line(&self) -> String {
        let verdict = match self.verdict {
            Verdict::Pass => "PASS",
            Verdict::Fail => "FAIL",
            Verdict::NotMeasured => "not measured",
        };
        format!(
            "- **{verdict}** {}: {}: {}",
            self.mode, self.text, self.figure
        )
    }
}

/// The row of a cell, if it was measured.
fn row(results: &Results, mode: Mode, event: Event, workload: Workload) -> Option<&Row> {
    results
        .rows
        .iter()
        .find(|r| r.mode == mode.name() && r.event == event.name() && r.workload == workload.name())
}

/// Why a cell has no row: its skip reason, or that it did not run.
fn why_missing(results: &Results, mode: Mode, event: Event, workload: Workload) -> String {
    results
        .skipped
        .iter()
        .find(|s| s.mode == mode.name() && s.event == event.name() && s.workload == workload.name())
        .map_or_else(
            || {
                format!(
                    "no {} {} {} row",
                    mode.name(),
                    event.name(),
                    workload.name()
                )
            },
            |s| s.reason.clone(),
        )
}

/// A goal judged on the row of `(mode, event, workload)` by `judge`
/// (whether it passed, and the figure), or not measured.
fn on_row(
    results: &Results,
    text: &str,
    (mode, event, workload): (Mode, Event, Workload),
    judge: impl Fn(&Row) -> (bool, String),
) -> Goal {
    let (verdict, figure) = match row(results, mode, event, workload) {
        Some(r) => {
            let (pass, figure) = judge(r);
            (if pass { Verdict::Pass } else { Verdict::Fail }, figure)
        }
        None => (
            Verdict::NotMeasured,
            why_missing(results, mode, event, workload),
        ),
    };
    Goal {
        text: text.into(),
        mode: mode.name().into(),
        verdict,
        figure,
    }
}

/// `12.3 Mbit/s` or `-`.
fn mbit(v: Option<f64>) -> String {
    v.map_or("-".into(), |v| format!("{v:.1} Mbit/s"))
}

/// `12.3` or `-`.
fn ms(v: Option<f64>) -> String {
    v.map_or("-".into(), |v| format!("{v:.1}"))
}

/// The wanopt modes the goals are for.
const MODES: [Mode; 2] = [Mode::WanoptFailover, Mode::WanoptBond];
/// The wanopt modes of the voice goal (the shaped bond's queue is its own,
/// where voice goes first).
const VOICE_MODES: [Mode; 4] = [
    Mode::WanoptFailover,
    Mode::WanoptBond,
    Mode::WanoptShaped,
    Mode::WanoptSla,
];

/// Every goal of the scenario, in its order.
pub fn evaluate(results: &Results) -> Vec<Goal> {
    let mut goals = Vec::new();
    for (event, share, what) in [
        (Event::None, CLEAN_SHARE, "both links clean".to_string()),
        (
            Event::Loss,
            LOSSY_SHARE,
            format!("{LOSS_PCT}% random loss on link 1"),
        ),
    ] {
        let want = share * SUM_MBPS;
        let text = format!(
            "one TCP download, {what}: at least {want:.0} Mbit/s ({:.0}% of the {SUM_MBPS:.0} Mbit/s sum)",
            share * 100.0
        );
        let direct = row(results, Mode::Direct, event, Workload::Bulk).and_then(|r| r.mbit_s);
        for mode in MODES {
            goals.push(on_row(results, &text, (mode, event, Workload::Bulk), |r| {
                let figure = format!(
                    "{} ({}% of the sum; direct {})",
                    mbit(r.mbit_s),
                    r.of_sum_pct.map_or("-".into(), |p| format!("{p:.0}")),
                    mbit(direct)
                );
                (r.mbit_s.is_some_and(|m| m >= want), figure)
            }));
        }
    }

    let text = format!(
        "the better link alone (direct, kernel BBR on link 1, {LINK1_MBPS} Mbit/s) measured as the baseline in the same run"
    );
    goals.push(on_row(
        results,
        &text,
        (Mode::Direct, Event::None, Workload::Bulk),
        |r| {
            let lossy =
                row(results, Mode::Direct, Event::Loss, Workload::Bulk).and_then(|r| r.mbit_s);
            let figure = format!(
                "{} clean, {} with {LOSS_PCT}% loss",
                mbit(r.mbit_s),
                mbit(lossy)
            );
            (r.mbit_s.is_some(), figure)
        },
    ));

    let text = format!(
        "link 1 cut mid-transfer: the download goes on over link 2 within {CUT_STALL_MS:.0} ms (its longest stall), no reset, every byte right"
    );
    let direct_stall =
        row(results, Mode::Direct, Event::Cut, Workload::Bulk).and_then(|r| r.longest_stall_ms);
    for mode in MODES {
        goals.push(on_row(results, &text, (mode, Event::Cut, Workload::Bulk), |r| {
            let (resets, wrong) = (r.resets.unwrap_or(0), r.wrong_bytes.unwrap_or(0));
            let figure = format!(
                "longest stall {} ms, {resets} resets, {wrong} wrong bytes of {:.1} MB checked, {} while link 1 was down (direct: stall {} ms)",
                ms(r.longest_stall_ms),
                r.verified_bytes.unwrap_or(0) as f64 / 1e6,
                mbit(r.cut_mbit_s),
                ms(direct_stall),
            );
            let pass = r.longest_stall_ms.is_some_and(|s| s <= CUT_STALL_MS)
                && r.resets == Some(0)
                && r.wrong_bytes == Some(0);
            (pass, figure)
        }));
    }

    let text = format!(
        "link 1 back: the sum again within {RECOVERY_S:.0} s (a whole second at {:.0} Mbit/s or more)",
        super::measure::RECOVERY_SHARE * SUM_MBPS
    );
    for mode in MODES {
        goals.push(on_row(
            results,
            &text,
            (mode, Event::Cut, Workload::Bulk),
            |r| {
                let figure = match r.recovered_s {
                    Some(s) => format!("after {s:.1} s"),
                    None => "not within the download".into(),
                };
                (r.recovered_s.is_some_and(|s| s <= RECOVERY_S), figure)
            },
        ));
    }

    let text = format!(
        "voice beside a bulk download: one-way delay p99 within {VOICE_ADDED_P99_MS:.0} ms of link 2's alone (wanopt-path2), loss under {VOICE_LOSS_PCT}%"
    );
    let baseline = row(results, Mode::WanoptPath2, Event::None, Workload::Voice);
    for mode in VOICE_MODES {
        let mut goal = on_row(results, &text, (mode, Event::None, Workload::Voice), |r| {
            let Some(base) = baseline else {
                return (false, String::new());
            };
            let added = [
                (r.p99_up_ms, base.p99_up_ms),
                (r.p99_down_ms, base.p99_down_ms),
            ]
            .iter()
            .map(|(mine, alone)| match (mine, alone) {
                (Some(m), Some(a)) => Some(m - a),
                _ => None,
            })
            .collect::<Option<Vec<f64>>>()
            .map(|a| a.into_iter().fold(f64::MIN, f64::max));
            let lossless = [r.loss_up_pct, r.loss_down_pct]
                .iter()
                .all(|l| l.is_some_and(|l| l < VOICE_LOSS_PCT));
            let figure = format!(
                "p99 up {} / down {} ms against {} / {} ms alone (+{} ms), loss up {}% / down {}%, beside {}",
                ms(r.p99_up_ms),
                ms(r.p99_down_ms),
                ms(base.p99_up_ms),
                ms(base.p99_down_ms),
                ms(added),
                r.loss_up_pct.map_or("-".into(), |l| format!("{l:.2}")),
                r.loss_down_pct.map_or("-".into(), |l| format!("{l:.2}")),
                mbit(r.mbit_s),
            );
            (
                added.is_some_and(|a| a <= VOICE_ADDED_P99_MS) && lossless,
                figure,
            )
        });
        if baseline.is_none() && goal.verdict != Verdict::NotMeasured {
            goal.verdict = Verdict::NotMeasured;
            goal.figure = format!(
                "needs the voice baseline: {}",
                why_missing(results, Mode::WanoptPath2, Event::None, Workload::Voice)
            );
        }
        goals.push(goal);
    }
    goals.extend(declared_rates(results));
    goals.push(sla_path(results));
    goals
}

/// The SLA's goal: the voice's datagrams take the path that meets its
/// class's SLA (link 2's), read from the edge's status after each run.
fn sla_path(results: &Results) -> Goal {
    let text = format!(
        "voice in a class with an SLA ({}): its datagrams take the path that meets it (path {SLA_PATH}, link 2) alone",
        super::matrix::SLA_CLASS
    );
    on_row(
        results,
        &text,
        (Mode::WanoptSla, Event::None, Workload::Voice),
        |r| {
            let figure = match r.realtime_path {
                Some(p) => format!(
                    "path {p} at the end of every run; p99 up {} / down {} ms",
                    ms(r.p99_up_ms),
                    ms(r.p99_down_ms)
                ),
                None => "no SLA choice in the edge's status (or the runs differ)".into(),
            };
            (r.realtime_path == Some(SLA_PATH), figure)
        },
    )
}

/// The shaped bond's goal: no link handed more than [`DECLARED_SLACK`] of
/// its declared rate in any 100 ms, in every shaped cell.
fn declared_rates(results: &Results) -> Vec<Goal> {
    let text = format!(
        "each link declared at its rate (rate=) never handed more than {:.0}% of it in any 100 ms (the emulators' counters)",
        DECLARED_SLACK * 100.0
    );
    [Workload::Bulk, Workload::Voice]
        .into_iter()
        .map(|workload| {
            let mut goal = on_row(
                results,
                &text,
                (Mode::WanoptShaped, Event::None, workload),
                |r| {
                    let (Some(declared), Some(peak)) = (&r.declared_mbit_s, &r.peak_mbit_s) else {
                        return (false, "no peak counters".into());
                    };
                    let figure = declared
                        .iter()
                        .zip(peak)
                        .enumerate()
                        .map(|(i, (d, p))| {
                            format!("link {}: {p:.1} of {d:.1} Mbit/s declared", i + 1)
                        })
                        .collect::<Vec<_>>()
                        .join(", ");
                    let pass = declared.len() == peak.len()
                        && declared
                            .iter()
                            .zip(peak)
                            .all(|(d, p)| *p <= d * DECLARED_SLACK);
                    let sum: f64 = declared.iter().sum();
                    let goodput = r.mbit_s.map_or("-".into(), |m| {
                        format!(
                            "{m:.1} Mbit/s, {:.0}% of the declared {sum:.1}",
                            m / sum * 100.0
                        )
                    });
                    (
                        pass,
                        format!("{figure} ({} cell; download {goodput})", workload.name()),
                    )
                },
            );
            goal.mode = format!("{} {}", goal.mode, workload.name());
            goal
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bond::matrix::Cell;
    use crate::bond::results::Skipped;

    fn row_of(mode: Mode, event: Event, workload: Workload) -> Row {
        let mut r = Row::new(
            &Cell {
                mode,
                event,
                workload,
            },
            15,
        );
        r.runs = 1;
        r
    }

    fn bulk(mode: Mode, event: Event, mbit_s: f64) -> Row {
        Row {
            mbit_s: Some(mbit_s),
            of_sum_pct: Some(mbit_s * 2.0),
            resets: Some(0),
            wrong_bytes: Some(0),
            verified_bytes: Some(50_000_000),
            longest_stall_ms: Some(40.0),
            ..row_of(mode, event, Workload::Bulk)
        }
    }

    fn voice(mode: Mode, p99: f64, loss: f64) -> Row {
        Row {
            p99_up_ms: Some(p99),
            p99_down_ms: Some(p99 - 1.0),
            loss_up_pct: Some(loss),
            loss_down_pct: Some(0.0),
            ..row_of(mode, Event::None, Workload::Voice)
        }
    }

    fn results(rows: Vec<Row>, skipped: Vec<Skipped>) -> Results {
        Results {
            scenario: "bond".into(),
            quick: true,
            settings: serde_json::Value::Null,
            rows,
            skipped,
            flow_resets: vec![],
            series: vec![],
        }
    }

    fn find<'a>(goals: &'a [Goal], start: &str, mode: &str) -> &'a Goal {
        goals
            .iter()
            .find(|g| g.mode == mode && g.text.starts_with(start))
            .unwrap_or_else(|| panic!("{start} {mode}: {goals:?}"))
    }

    /// Failover measured, bond skipped: failover's goals pass or fail on
    /// their figures, bond's are "not measured" with the skip's reason.
    #[test]
    fn goals_judge_the_figures_and_say_why_a_mode_was_not_measured() {
        let no_bond = "this build's wanopt has no --path-mode bond";
        let skipped: Vec<Skipped> = [Event::None, Event::Loss, Event::Cut]
            .iter()
            .map(|e| Skipped {
                mode: "wanopt-bond".into(),
                event: e.name().into(),
                workload: "bulk".into(),
                reason: no_bond.into(),
            })
            .collect();
        let mut cut = bulk(Mode::WanoptFailover, Event::Cut, 27.0);
        cut.longest_stall_ms = Some(250.0);
        cut.recovered_s = None;
        let mut direct_cut = bulk(Mode::Direct, Event::Cut, 18.0);
        direct_cut.longest_stall_ms = Some(5_600.0);
        let goals = evaluate(&results(
            vec![
                bulk(Mode::Direct, Event::None, 28.5),
                bulk(Mode::WanoptFailover, Event::None, 46.0),
                bulk(Mode::Direct, Event::Loss, 20.0),
                bulk(Mode::WanoptFailover, Event::Loss, 39.0),
                direct_cut,
                cut,
                voice(Mode::WanoptPath2, 21.0, 0.0),
                voice(Mode::WanoptFailover, 26.5, 0.05),
            ],
            skipped,
        ));
        // Two sums, the baseline, the cut, the return, the voice: per mode
        // but the baseline (the shaped bond's voice too), and the shaped
        // bond's declared rates in its two cells.
        assert_eq!(goals.len(), 16);
        let clean = find(
            &goals,
            "one TCP download, both links clean",
            "wanopt-failover",
        );
        assert_eq!(clean.verdict, Verdict::Pass);
        assert_eq!(
            clean.line(),
            "- **PASS** wanopt-failover: one TCP download, both links clean: at least 45 Mbit/s (90% of the 50 Mbit/s sum): 46.0 Mbit/s (92% of the sum; direct 28.5 Mbit/s)"
        );
        let lossy = find(
            &goals,
            "one TCP download, 1% random loss",
            "wanopt-failover",
        );
        assert_eq!(lossy.verdict, Verdict::Fail);
        let base = find(&goals, "the better link alone", "direct");
        assert_eq!(base.verdict, Verdict::Pass);
        assert!(base
            .figure
            .contains("28.5 Mbit/s clean, 20.0 Mbit/s with 1% loss"));
        let cut = find(&goals, "link 1 cut", "wanopt-failover");
        assert_eq!(cut.verdict, Verdict::Pass, "{}", cut.line());
        assert!(cut
            .figure
            .contains("longest stall 250.0 ms, 0 resets, 0 wrong bytes of 50.0 MB"));
        assert!(cut.figure.contains("(direct: stall 5600.0 ms)"));
        let back = find(&goals, "link 1 back", "wanopt-failover");
        assert_eq!(back.verdict, Verdict::Fail);
        assert_eq!(back.figure, "not within the download");
        // Up 26.5 against 21 alone: +5.5 ms.
        let v = find(&goals, "voice beside", "wanopt-failover");
        assert_eq!(v.verdict, Verdict::Fail);
        assert!(v.figure.contains("(+5.5 ms)"), "{}", v.figure);
        for g in goals.iter().filter(|g| g.mode == "wanopt-bond") {
            assert_eq!(g.verdict, Verdict::NotMeasured, "{g:?}");
        }
        assert!(find(&goals, "link 1 cut", "wanopt-bond")
            .line()
            .ends_with(no_bond));
        assert!(find(&goals, "voice beside", "wanopt-bond")
            .figure
            .starts_with("no wanopt-bond none voice row"));
    }

    #[test]
    fn a_reset_or_a_wrong_byte_fails_the_cut_and_voice_needs_its_baseline() {
        let mut cut = bulk(Mode::WanoptBond, Event::Cut, 40.0);
        cut.resets = Some(1);
        cut.recovered_s = Some(2.4);
        let mut wrong = bulk(Mode::WanoptFailover, Event::Cut, 40.0);
        wrong.wrong_bytes = Some(1);
        let goals = evaluate(&results(
            vec![cut, wrong, voice(Mode::WanoptBond, 22.0, 0.0)],
            vec![],
        ));
        assert_eq!(
            find(&goals, "link 1 cut", "wanopt-bond").verdict,
            Verdict::Fail
        );
        assert_eq!(
            find(&goals, "link 1 cut", "wanopt-failover").verdict,
            Verdict::Fail
        );
        assert_eq!(
            find(&goals, "link 1 back", "wanopt-bond").verdict,
            Verdict::Pass
        );
        let v = find(&goals, "voice beside", "wanopt-bond");
        assert_eq!(v.verdict, Verdict::NotMeasured);
        assert_eq!(
            v.figure,
            "needs the voice baseline: no wanopt-path2 none voice row"
        );
        let ok = evaluate(&results(
            vec![
                voice(Mode::WanoptPath2, 21.0, 0.0),
                voice(Mode::WanoptBond, 25.0, 0.05),
            ],
            vec![],
        ));
        assert_eq!(
            find(&ok, "voice beside", "wanopt-bond").verdict,
            Verdict::Pass
        );
    }

    #[test]
    fn a_declared_rate_holds_within_2_percent_in_every_shaped_cell() {
        let shaped = |workload, peak: Vec<f64>| Row {
            peak_mbit_s: Some(peak),
            mbit_s: Some(44.0),
            ..row_of(Mode::WanoptShaped, Event::None, workload)
        };
        let goals = evaluate(&results(
            vec![
                shaped(Workload::Bulk, vec![29.6, 19.7]),
                shaped(Workload::Voice, vec![29.0, 19.9]),
            ],
            vec![],
        ));
        let bulk = find(&goals, "each link declared", "wanopt-shaped bulk");
        assert_eq!(bulk.verdict, Verdict::Pass, "{}", bulk.line());
        assert_eq!(
            bulk.figure,
            "link 1: 29.6 of 29.1 Mbit/s declared, link 2: 19.7 of 19.4 Mbit/s declared (bulk cell; download 44.0 Mbit/s, 91% of the declared 48.5)"
        );
        // 19.9 is over 1.02 x 19.4 = 19.79.
        let voice = find(&goals, "each link declared", "wanopt-shaped voice");
        assert_eq!(voice.verdict, Verdict::Fail);
        let unread = Row {
            peak_mbit_s: None,
            ..shaped(Workload::Bulk, vec![])
        };
        let goals = evaluate(&results(vec![unread], vec![]));
        let bulk = find(&goals, "each link declared", "wanopt-shaped bulk");
        assert_eq!(
            (bulk.verdict, bulk.figure.as_str()),
            (Verdict::Fail, "no peak counters")
        );
        let voice = find(&goals, "each link declared", "wanopt-shaped voice");
        assert_eq!(voice.verdict, Verdict::NotMeasured);
    }
}
