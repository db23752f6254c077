//! Running the `sites` scenario's cells on the lab.

use std::path::Path;
use std::process::{Child, Stdio};
use std::time::Instant;

use super::cpu::{cpu_ticks, TICKS_PER_SECOND};
use super::matrix::{Cell, Mode, Plan, LINK_MBIT, RTT_MS, SCENARIO};
use super::report;
use super::results::{seconds_per_gb, CellRow, Results, SiteRow, Skipped};
use crate::bringup::{self, UpConfig};
use crate::kit::output;
use crate::lossy::run::BBR;
use crate::profile::LINUX;
use crate::scenario::runner::{humantime, Env, Finished, Plan as RunPlan, Scenario};
use crate::scenario::RunError;
use crate::topology::{Lab, Node, SERVER_ADDR};
use crate::traffic::{TrafficReport, GENERATOR_PORT};

/// The `sites` scenario and its results so far.
#[derive(Debug)]
pub struct SitesScenario {
    plan: Plan,
    results: Results,
    /// Whether the executable has the wanopt nodes (why not, if not).
    tunnel: Result<(), String>,
}

impl SitesScenario {
    /// A full run, or `--quick`.
    pub fn new(quick: bool) -> SitesScenario {
        let plan = Plan::new(quick);
        SitesScenario {
            results: Results {
                scenario: SCENARIO.into(),
                quick,
                link_mbit: LINK_MBIT,
                rtt_ms: RTT_MS,
                bytes_per_site: plan.bytes_per_site(),
                ..Results::default()
            },
            plan,
            tunnel: Ok(()),
        }
    }

    fn skip(&mut self, cell: &Cell, reason: String) {
        self.results.skipped.push(Skipped {
            sites: cell.sites.count(),
            mode: cell.mode,
            reason,
        });
    }

    /// Brings a fresh lab up for `cell` and measures it.
    fn run_cell(&mut self, env: &Env<'_>, cell: &Cell) -> Result<(), String> {
        let config = UpConfig {
            specs: Plan::link().specs().map_err(|e| e.to_string())?,
            profile: match cell.mode {
                Mode::DirectBbr => &BBR,
                Mode::Wanopt => &LINUX,
            },
            optimize: cell.mode == Mode::Wanopt,
            reduce: false,
            node_args: Vec::new(),
            edge_args: Vec::new(),
            core_args: Vec::new(),
            link2: None,
            sites: cell.sites,
            cluster: None,
            edges: Default::default(),
        };
        bringup::up(env.lab, &config, env.exe).map_err(|e| format!("lab up failed: {e}"))?;
        let measured = measure(env.lab, env.exe, &self.plan, cell);
        if cell.mode == Mode::Wanopt {
            let label = format!("sites{}-{}", cell.sites, cell.mode.name());
            let logs = crate::optimize::save_logs(env.lab, env.out, &label);
            let resets = crate::optimize::flow_resets(&logs);
            if resets.is_empty() {
                for log in logs {
                    let _ = std::fs::remove_file(log);
                }
                let _ = std::fs::remove_dir(env.out.join("logs"));
            }
            self.results.flow_resets.extend(resets);
        }
        let (rows, totals) = measured?;
        self.results.rows.extend(rows);
        self.results.cells.push(totals);
        Ok(())
    }
}

/// The core process's CPU ticks so far, if it runs.
fn core_ticks(lab: &Lab) -> Option<u64> {
    let pid = lab.running_pid("wanopt-core")?;
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    cpu_ticks(&stat)
}

/// Every site's client downloads its bytes at once; the rows and the
/// cell's totals.
fn measure(
    lab: &Lab,
    exe: &Path,
    plan: &Plan,
    cell: &Cell,
) -> Result<(Vec<SiteRow>, CellRow), String> {
    let clients: Vec<(u8, Node)> = std::iter::once((1, Node::Client))
        .chain(cell.sites.extra().map(|s| (s.number(), s.client())))
        .collect();
    let cpu_before = core_ticks(lab);
    let started = Instant::now();
    let mut children: Vec<(u8, Child)> = Vec::with_capacity(clients.len());
    for (site, node) in clients {
        let mut cmd = lab.command(node, &exe.to_string_lossy());
        cmd.args(["lab", "gen-client", "--connect"])
            .arg(format!("{SERVER_ADDR}:{GENERATOR_PORT}"))
            .args(["--streams", "1", "--reverse", "--bytes"])
            .arg(plan.bytes_per_site().to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        if cell.mode == Mode::DirectBbr {
            cmd.args(["--congestion", "bbr"]);
        }
        match cmd.spawn() {
            Ok(child) => children.push((site, child)),
            Err(e) => {
                for (_, mut child) in children {
                    let _ = child.kill();
                    let _ = child.wait();
                }
                return Err(format!("site {site}: cannot start its client: {e}"));
            }
        }
    }
    let mut rows = Vec::with_capacity(children.len());
    let mut failures = Vec::new();
    for (site, child) in children {
        let out = match child.wait_with_output() {
            Ok(out) => out,
            Err(e) => {
                failures.push(format!("site {site}: {e}"));
                continue;
            }
        };
        if !out.status.success() {
            let stderr = String::from_utf8_lossy(&out.stderr);
            failures.push(format!("site {site}: {}", stderr.trim()));
            continue;
        }
        match serde_json::from_slice::<TrafficReport>(&out.stdout) {
            Ok(report) => rows.push(SiteRow {
                sites: cell.sites.count(),
                mode: cell.mode,
                site,
                bytes: report.total_bytes,
                seconds: report.seconds,
                goodput_mbps: report.throughput_mbps,
                of_link: report.throughput_mbps / f64::from(LINK_MBIT),
            }),
            Err(e) => failures.push(format!("site {site}: bad report: {e}")),
        }
    }
    let seconds = started.elapsed().as_secs_f64();
    let cpu_after = core_ticks(lab);
    if !failures.is_empty() {
        return Err(failures.join("; "));
    }
    let bytes = rows.iter().map(|r| r.bytes).sum();
    let core_cpu_seconds = match (cpu_before, cpu_after) {
        (Some(before), Some(after)) => Some(after.saturating_sub(before) as f64 / TICKS_PER_SECOND),
        _ => None,
    };
    let totals = CellRow {
        sites: cell.sites.count(),
        mode: cell.mode,
        bytes,
        seconds,
        core_cpu_seconds,
        core_cpu_seconds_per_gb: core_cpu_seconds.and_then(|cpu| seconds_per_gb(cpu, bytes)),
    };
    Ok((rows, totals))
}

impl Scenario for SitesScenario {
    type Results = Results;

    fn name(&self) -> &str {
        SCENARIO
    }

    fn plan(&mut self, exe: &Path) -> RunPlan {
        self.tunnel = crate::optimize::available(exe).map_err(|e| e.to_string());
        RunPlan {
            header: format!(
                "scenario sites: {} cells ({} sites), {} MB per site over {} Mbit/s, RTT {} ms{}{}",
                self.plan.cells.len(),
                self.plan
                    .cells
                    .iter()
                    .map(|c| c.sites.to_string())
                    .collect::<std::collections::BTreeSet<_>>()
                    .into_iter()
                    .collect::<Vec<_>>()
                    .join("/"),
                self.plan.bytes_per_site() / 1_000_000,
                LINK_MBIT,
                RTT_MS,
                match &self.tunnel {
                    Ok(()) => String::new(),
                    Err(e) => format!("; wanopt cells skipped: {e}"),
                },
                if self.plan.quick { " (quick)" } else { "" }
            ),
            steps: self.plan.cells.len() as u64,
        }
    }

    fn run(&mut self, env: &Env<'_>) -> Finished<Results> {
        let started = Instant::now();
        let cells = self.plan.cells.clone();
        for (i, cell) in cells.iter().enumerate() {
            env.say(format!(
                "[{}] cell {}/{}: {} site(s) {}",
                humantime(started.elapsed()),
                i + 1,
                cells.len(),
                cell.sites,
                cell.mode.name()
            ));
            match (&self.tunnel, cell.mode) {
                (Err(e), Mode::Wanopt) => {
                    let reason = e.clone();
                    self.skip(cell, reason);
                }
                _ => {
                    if let Err(e) = self.run_cell(env, cell) {
                        env.say(format!("  failed: {e}"));
                        self.skip(cell, e);
                    }
                }
            }
            let _ = env.lab.destroy();
            env.bar.inc(1);
            let _ = Self::write_outputs(&self.results, env.out);
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
