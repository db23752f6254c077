//! The `reach` scenario on the lab: every case, mode and run on a fresh
//! lab, each row written as it comes.

use std::path::Path;
use std::time::Instant;

use super::cases::CaseRun;
use super::nodes;
use super::plan::{Case, Mode, Plan, LINK_MBIT, MODES, RTT_MS, SCENARIO};
use super::report;
use super::results::{Results, Row};
use super::transfer;
use crate::bringup::{self, UpConfig};
use crate::kit::output;
use crate::lossy::run::BBR;
use crate::profile::LINUX;
use crate::scenario::runner::{humantime, Env, Finished, Plan as RunPlan, Scenario};
use crate::scenario::RunError;

/// The `reach` scenario and its results so far.
#[derive(Debug)]
pub struct Reach {
    plan: Plan,
    results: Results,
    /// Whether the executable has the wanopt nodes (why not, if not).
    tunnel: Result<(), String>,
}

impl Reach {
    /// A full run, or `--quick`.
    pub fn new(quick: bool) -> Reach {
        let plan = Plan::new(quick);
        Reach {
            results: Results {
                scenario: SCENARIO.into(),
                quick,
                link_mbit: LINK_MBIT,
                rtt_ms: RTT_MS,
                bulk_bytes: plan.bulk_bytes,
                fetch_bytes: plan.fetch_bytes,
                ..Results::default()
            },
            plan,
            tunnel: Ok(()),
        }
    }

    /// A fresh lab for `case` in `mode`, the case's rules in place, and
    /// the checked server on it.
    fn up(&self, env: &Env<'_>, case: Case, mode: Mode) -> Result<transfer::Server, String> {
        let specs = self
            .plan
            .link(&case.rules_at_start())
            .specs()
            .map_err(|e| e.to_string())?;
        let config = UpConfig {
            specs,
            profile: match mode {
                Mode::Direct => &BBR,
                Mode::Wanopt => &LINUX,
            },
            optimize: mode == Mode::Wanopt,
            reduce: false,
            edge_args: nodes::edge_args(self.results.edge_transport),
            ..UpConfig::default()
        };
        bringup::up(env.lab, &config, env.exe).map_err(|e| format!("lab up failed: {e}"))?;
        transfer::serve(
            env.lab,
            BBR.congestion_control.filter(|_| mode == Mode::Direct),
        )
    }

    /// One case in one mode, one run, on a fresh lab.
    fn cell(&mut self, env: &Env<'_>, case: Case, mode: Mode, run: u32) {
        let label = format!("{} {} run {run}", case.name(), mode.name());
        env.bar.set_message(label.clone());
        if let (Mode::Wanopt, Err(e)) = (mode, &self.tunnel) {
            self.results.skipped.push(format!("{label}: {e}"));
            env.bar.inc(1);
            return;
        }
        match self.up(env, case, mode) {
            Ok(_server) => {
                let say = |line: String| env.say(line);
                let row = CaseRun::new(env.lab, env.exe, &self.plan, &say, (case, mode, run)).run();
                env.say(format!("  {label}: {}", figures(&row)));
                self.results.rows.push(row);
                // The open flows of blocked-mid are meant to be reset.
                if mode == Mode::Wanopt && case != Case::BlockedMid {
                    let label = format!("{}-{}-run{run}", case.name(), mode.name());
                    self.results.flow_resets.extend(env.flow_resets(&label));
                }
            }
            Err(e) => {
                env.say(format!("  {label}: {e}"));
                self.results.skipped.push(format!("{label}: {e}"));
            }
        }
        let _ = env.lab.destroy();
        env.bar.inc(1);
        let _ = Self::write_outputs(&self.results, env.out);
    }
}

/// A row's figures for its progress line.
fn figures(row: &Row) -> String {
    let or = |v: Option<f64>, unit: &str, decimals: usize| {
        v.map_or("-".to_string(), |v| format!("{v:.decimals$} {unit}"))
    };
    let mut line = format!(
        "{} bulk, first byte {}, fetch {} (floor {:.0} ms)",
        or(row.mbit_s, "Mbit/s", 1),
        or(row.first_byte_ms, "ms", 0),
        or(row.fetch_ms, "ms", 0),
        row.floor_ms
    );
    if let Some(t) = &row.transport {
        line.push_str(&format!(", on {t}"));
    }
    if let Some(m) = row.moved_after_ms {
        line.push_str(&format!(", moved after {:.1} s", m / 1e3));
    }
    if let Some(o) = &row.open_flow {
        line.push_str(&format!(", the open flow {o}"));
    }
    if row.resets > 0 || row.wrong_bytes > 0 {
        line.push_str(&format!(
            ", {} reset(s), {} wrong byte(s)",
            row.resets, row.wrong_bytes
        ));
    }
    if let Some(f) = row.failures.first() {
        line.push_str(&format!("; {f}"));
    }
    line
}

impl Scenario for Reach {
    type Results = Results;

    fn name(&self) -> &str {
        SCENARIO
    }

    fn plan(&mut self, exe: &Path) -> RunPlan {
        self.tunnel = crate::optimize::available(exe).map_err(|e| e.to_string());
        self.results.edge_transport = self.tunnel.is_ok() && nodes::supports_transport(exe);
        let p = &self.plan;
        RunPlan {
            header: format!(
                "scenario reach: {} Mbit/s, RTT {} ms, 1 BDP queue; UDP open, blocked, blocked mid-transfer, policed, returning; direct (kernel BBR) and wanopt{}; {} run(s), bulk {} MB, {} fetch(es) of {} KB{}{}",
                LINK_MBIT,
                RTT_MS,
                if self.results.edge_transport {
                    " (--transport auto)"
                } else {
                    " (this build's edge has no --transport: QUIC only)"
                },
                p.runs,
                p.bulk_bytes / 1_000_000,
                p.fetches,
                p.fetch_bytes / 1000,
                match &self.tunnel {
                    Ok(()) => String::new(),
                    Err(e) => format!("; wanopt skipped: {e}"),
                },
                if p.quick { " (quick)" } else { "" }
            ),
            steps: p.steps(),
        }
    }

    fn run(&mut self, env: &Env<'_>) -> Finished<Results> {
        let started = Instant::now();
        let plan = self.plan.clone();
        for run in 1..=plan.runs {
            for &case in &plan.cases {
                env.say(format!(
                    "[{}] {}: {}{}",
                    humantime(started.elapsed()),
                    case.name(),
                    case.description(),
                    if plan.runs > 1 {
                        format!(" (run {run} of {})", plan.runs)
                    } else {
                        String::new()
                    }
                ));
                for mode in MODES {
                    self.cell(env, case, mode, run);
                }
            }
        }
        Finished {
            results: self.results.clone(),
            stopped: None,
        }
    }

    fn write_outputs(results: &Results, out: &Path) -> Result<(), RunError> {
        Ok(output::write_results(
            out,
            results,
            report::markdown(results),
        )?)
    }

    fn summary(results: &Results) -> String {
        report::summary(results)
    }

    fn written(_: &Results, out: &Path) -> String {
        format!(
            "wrote {}/results.json, report.md{}",
            out.display(),
            output::logs_note(out, "node logs of labs with flow resets")
        )
    }

    fn flow_resets(results: &Results) -> &[String] {
        &results.flow_resets
    }
}
