//! The `cellular` scenario on the lab: every cell of the [`Plan`] on a
//! fresh lab, each measurement's row written as it comes.

use std::path::{Path, PathBuf};
use std::thread;
use std::time::{Duration, Instant};

use super::client::ClientReport;
use super::matrix::SCENARIO;
use super::matrix::{Cell, Mode, Plan, RTT_MS};
use super::report;
use super::results::{row, LinkDelta, Results, Row, Skipped};
use crate::bringup::{self, counters_path, UpConfig};
use crate::clock::unix_ms;
use crate::kit::output;
use crate::lossy::run::{BBR, CUBIC};
use crate::optimize::OptimizeError;
use crate::profile::LINUX;
use crate::scenario::runner::{humantime, Env, Finished, Plan as RunPlan, Scenario};
use crate::scenario::RunError;
use crate::topology::{Lab, Node, SERVER_ADDR};
use crate::traffic::GENERATOR_PORT;

/// The `cellular` scenario and its results so far.
#[derive(Debug)]
pub struct Cellular {
    plan: Plan,
    results: Results,
    tunnel: Result<(), String>,
    started: Option<Instant>,
}

impl Cellular {
    /// The scenario, full or `--quick`, with recorded traces from `traces`
    /// (or a Mahimahi installation's) and `runs` runs of every cell; the
    /// synthetic trace is written under `out`.
    pub fn new(
        quick: bool,
        traces: Option<&Path>,
        out: &Path,
        runs: usize,
    ) -> Result<Cellular, RunError> {
        let plan = Plan::new(quick, traces, out, runs).map_err(RunError::Traces)?;
        let settings = serde_json::json!({
            "rtt_ms": RTT_MS,
            "seconds": plan.seconds,
            "runs": plan.runs,
            "ping": "64-byte request, 64-byte response, every 100 ms, one connection",
            "download": "one connection, server to client",
            "reduce": false,
        });
        Ok(Cellular {
            results: Results {
                scenario: SCENARIO.into(),
                quick,
                settings,
                traces: plan.traces.clone(),
                missing_traces: plan.missing.clone(),
                rows: Vec::new(),
                skipped: Vec::new(),
                flow_resets: Vec::new(),
            },
            plan,
            tunnel: Ok(()),
            started: None,
        })
    }

    fn label(&self, cell: &Cell) -> String {
        format!(
            "{} {} {}",
            self.plan.traces[cell.trace].name,
            cell.buffer.name(),
            cell.mode.name()
        )
    }

    fn skip(&mut self, cell: &Cell, reason: String) {
        self.results.skipped.push(Skipped {
            trace: self.plan.traces[cell.trace].name.clone(),
            buffer: cell.buffer.name().into(),
            mode: cell.mode.name().into(),
            reason,
        });
    }

    /// A fresh lab for `cell`.
    fn up(&self, env: &Env<'_>, cell: &Cell) -> Result<(), String> {
        let specs = self.plan.link(cell).specs().map_err(|e| e.to_string())?;
        let config = UpConfig {
            specs,
            profile: match cell.mode {
                Mode::Cubic => &CUBIC,
                Mode::Bbr => &BBR,
                Mode::Wanopt => &LINUX,
            },
            optimize: cell.mode == Mode::Wanopt,
            reduce: false,
            node_args: Vec::new(),
            edge_args: Vec::new(),
            core_args: Vec::new(),
            link2: None,
            sites: crate::sites::Sites::ONE,
            cluster: None,
            edges: Default::default(),
        };
        bringup::up(env.lab, &config, env.exe).map_err(|e| format!("lab up failed: {e}"))
    }

    fn run_cell(&mut self, env: &Env<'_>, cell: &Cell, run: usize) {
        let label = self.label(cell);
        env.bar.set_message(label.clone());
        if cell.mode == Mode::Wanopt {
            if let Err(reason) = self.tunnel.clone() {
                env.bar.inc(1);
                self.skip(cell, reason);
                return;
            }
        }
        let outcome = self
            .up(env, cell)
            .and_then(|()| measure(env.lab, env.exe, self.plan.seconds, cell.mode));
        env.bar.inc(1);
        match outcome {
            Ok((report, link)) => {
                let row = row(
                    &self.plan.traces[cell.trace],
                    cell.buffer,
                    cell.mode,
                    run,
                    &report,
                    &link,
                );
                env.say(format!("  {label}: {}", figure(&row)));
                self.results.rows.push(row);
                let _ = Cellular::write_outputs(&self.results, env.out);
            }
            Err(reason) => {
                env.say(format!("  {label}: failed: {reason}"));
                self.skip(cell, reason);
            }
        }
        if cell.mode == Mode::Wanopt {
            let state = env.lab.state_dir();
            let logs = [state.join("wanopt-edge.log"), state.join("wanopt-core.log")];
            let resets = crate::optimize::flow_resets(&logs);
            if let Some(first) = resets.first() {
                let name = label.replace(' ', "-");
                crate::optimize::save_logs(env.lab, env.out, &name);
                env.say(format!("{label}: FLOW RESET: the run fails: {first}"));
                self.results.flow_resets.extend(resets);
            }
        }
    }
}

/// A row's figures for a progress line.
fn figure(row: &Row) -> String {
    let ms = |v: Option<f64>| v.map_or("n/a".to_string(), |v| format!("{v:.0}"));
    format!(
        "{:.2} Mbit/s, ping p50 {} p95 {} p99 {} ms, queue p95 {} kB",
        row.mbit_s,
        ms(row.ping_p50_ms),
        ms(row.ping_p95_ms),
        ms(row.ping_p99_ms),
        row.queue_p95_bytes.map_or(0, |b| b / 1000)
    )
}

/// Runs the client on the lab as it is, reading the link's counters
/// around it.
fn measure(
    lab: &Lab,
    exe: &Path,
    seconds: u64,
    mode: Mode,
) -> Result<(ClientReport, LinkDelta), String> {
    let mut cmd = lab.command(Node::Client, &exe.to_string_lossy());
    cmd.args(["lab", "cellular-client", "--connect"])
        .arg(format!("{SERVER_ADDR}:{GENERATOR_PORT}"))
        .args(["--seconds", &seconds.to_string()]);
    if let Some(cc) = mode.congestion() {
        cmd.args(["--congestion", cc]);
    }
    let before = down_link(lab, unix_ms())?;
    let out = cmd.output().map_err(|e| e.to_string())?;
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).trim().to_string());
    }
    let report: ClientReport = serde_json::from_slice(&out.stdout).map_err(|e| e.to_string())?;
    let after = down_link(lab, unix_ms())?;
    let delta = LinkDelta {
        queue_bytes_time: after.queue_bytes_time.since(&before.queue_bytes_time),
        queue_delay_ns: after.queue_delay_ns.since(&before.queue_delay_ns),
        queue_drops: after.queue_drops.saturating_sub(before.queue_drops),
    };
    Ok((report, delta))
}

/// The downlink's queue histograms and drops, from a snapshot of the
/// emulator's counters published at or after `not_before_ms`.
fn down_link(lab: &Lab, not_before_ms: u64) -> Result<LinkDelta, String> {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let doc: Option<serde_json::Value> = std::fs::read_to_string(counters_path(lab))
            .ok()
            .and_then(|t| serde_json::from_str(&t).ok());
        if let Some(doc) = doc {
            let down = &doc["down"];
            if down["at_unix_ms"].as_u64().unwrap_or(0) >= not_before_ms {
                let link = &down["link"];
                let histogram = |key: &str| {
                    serde_json::from_value(link[key].clone())
                        .map_err(|e| format!("the emulator's {key}: {e}"))
                };
                return Ok(LinkDelta {
                    queue_bytes_time: histogram("queue_bytes_time")?,
                    queue_delay_ns: histogram("queue_delay_ns")?,
                    queue_drops: link["dropped_queue"].as_u64().unwrap_or(0),
                });
            }
        }
        if Instant::now() > deadline {
            return Err("the emulator's counters are stale (is the emulator running?)".into());
        }
        thread::sleep(Duration::from_millis(40));
    }
}

impl Scenario for Cellular {
    type Results = Results;

    fn name(&self) -> &str {
        SCENARIO
    }

    fn plan(&mut self, exe: &Path) -> RunPlan {
        self.tunnel = crate::optimize::available(exe).map_err(|e: OptimizeError| e.to_string());
        let plan = &self.plan;
        let traces: Vec<String> = plan
            .traces
            .iter()
            .map(|t| format!("{} ({} Mbit/s down)", t.name, t.down_mbit_s))
            .collect();
        let missing = if plan.missing.is_empty() {
            String::new()
        } else {
            format!(
                "; recorded traces not found: {} (give --traces DIR: Mahimahi's traces/)",
                plan.missing
                    .iter()
                    .map(|(name, _)| name.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        };
        RunPlan {
            header: format!(
                "scenario cellular: {} cells x {} run(s) of {} s: {}{missing}{}",
                plan.cells.len(),
                plan.runs,
                plan.seconds,
                traces.join(", "),
                if self.results.quick { " (quick)" } else { "" }
            ),
            steps: plan.steps(),
        }
    }

    fn run(&mut self, env: &Env<'_>) -> Finished<Results> {
        let started = *self.started.get_or_insert_with(Instant::now);
        let cells = self.plan.cells.clone();
        for run in 1..=self.plan.runs {
            for (i, cell) in cells.iter().enumerate() {
                env.say(format!(
                    "[{}] run {run}, cell {}/{}: {}",
                    humantime(started.elapsed()),
                    i + 1,
                    cells.len(),
                    self.label(cell)
                ));
                self.run_cell(env, cell, run);
            }
        }
        Finished {
            results: self.results.clone(),
            stopped: None,
        }
    }

    fn write_outputs(results: &Results, out: &Path) -> Result<(), RunError> {
        output::write_results(out, results, report::markdown(results))?;
        output::plotted(super::plot::over_time(results, out));
        Ok(())
    }

    fn summary(results: &Results) -> String {
        report::summary(results)
    }

    fn written(results: &Results, out: &Path) -> String {
        let plots: Vec<PathBuf> = super::plot::files(results);
        format!(
            "wrote {}/results.json, report.md, traces/, {}{}",
            out.display(),
            plots
                .iter()
                .map(|p| p.to_string_lossy().into_owned())
                .collect::<Vec<_>>()
                .join(", "),
            if out.join("logs").exists() {
                ", logs/ (node logs of labs with flow resets)"
            } else {
                ""
            }
        )
    }

    fn flow_resets(results: &Results) -> &[String] {
        &results.flow_resets
    }
}
