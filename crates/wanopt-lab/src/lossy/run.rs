//! The `lossy` scenario on the lab: every cell of the [`Plan`] on fresh
//! labs, each measurement's row written as it comes.

use std::path::Path;
use std::process::Command;
use std::thread;
use std::time::{Duration, Instant};

use super::client::ClientReport;
use super::matrix::SCENARIO;
use super::matrix::{Cell, Mode, Plan, Workload, RPC_BYTES};
use super::report;
use super::results::{row, Results, Skipped, WanDelta};
use crate::bringup::{self, UpConfig};
use crate::clock::unix_ms;
use crate::kit::output;
use crate::link::link_totals;
use crate::optimize::OptimizeError;
use crate::profile::{Profile, LINUX};
use crate::scenario::runner::{humantime, Env, Finished, Plan as RunPlan, Scenario};
use crate::scenario::RunError;
use crate::topology::{Lab, Node, SERVER_ADDR};
use crate::traffic::GENERATOR_PORT;

/// The endpoints of the `cubic` mode: this kernel's defaults, CUBIC.
pub(crate) static CUBIC: Profile = Profile {
    name: "linux-cubic",
    description: "this kernel's defaults with CUBIC",
    congestion_control: Some("cubic"),
    ..LINUX
};

/// The endpoints of the `bbr` mode: this kernel's defaults, BBR.
pub(crate) static BBR: Profile = Profile {
    name: "linux-bbr",
    description: "this kernel's defaults with BBR",
    congestion_control: Some("bbr"),
    ..LINUX
};

/// Whether this executable's nodes take `--fec` (`wanopt edge --help`).
pub fn supports_fec(exe: &Path) -> bool {
    Command::new(exe)
        .args(["edge", "--help"])
        .output()
        .map(|o| o.status.success() && String::from_utf8_lossy(&o.stdout).contains("--fec"))
        .unwrap_or(false)
}

/// The node arguments of a tunnel mode: `--fec` when the nodes have it.
pub fn node_args(mode: Mode, fec_supported: bool) -> Vec<String> {
    match (mode.fec(), fec_supported) {
        (Some(fec), true) => vec!["--fec".into(), fec.into()],
        _ => Vec::new(),
    }
}

/// The `lossy` scenario and its results so far.
#[derive(Debug)]
pub struct Lossy {
    plan: Plan,
    results: Results,
    tunnel: Result<(), String>,
    fec: bool,
    started: Option<Instant>,
}

impl Lossy {
    /// The scenario, full or `--quick`.
    pub fn new(quick: bool) -> Lossy {
        let plan = Plan::new(quick);
        let settings = serde_json::json!({
            "bulk_streams": plan.bulk_streams,
            "bulk_seconds": plan.bulk_seconds,
            "rpc_samples": plan.rpc_connections * plan.rpc_requests,
            "rpc_connections": plan.rpc_connections,
            "transfer_deadline_seconds": plan.transfer_deadline_seconds,
            "direction": "server to client",
            "reduce": false,
        });
        Lossy {
            results: Results {
                scenario: SCENARIO.into(),
                quick,
                settings,
                rows: Vec::new(),
                skipped: Vec::new(),
                flow_resets: Vec::new(),
            },
            plan,
            tunnel: Ok(()),
            fec: false,
            started: None,
        }
    }

    fn skip(&mut self, env: &Env<'_>, cell: &Cell, workload: Workload, reason: &str) {
        let steps = if matches!(workload, Workload::Transfer(_)) {
            2
        } else {
            1
        };
        env.bar.inc(steps);
        self.results.skipped.push(Skipped {
            rtt_ms: cell.condition.rtt_ms,
            loss_pct: cell.condition.loss_pct,
            burst: cell.condition.burst,
            workload: workload.name(),
            mode: cell.mode.name().into(),
            reason: reason.into(),
        });
    }

    /// A fresh lab for `cell`.
    fn up(&self, env: &Env<'_>, cell: &Cell) -> Result<(), String> {
        let specs = cell.condition.link().specs().map_err(|e| e.to_string())?;
        let config = UpConfig {
            specs,
            profile: match cell.mode {
                Mode::Cubic => &CUBIC,
                Mode::Bbr => &BBR,
                Mode::Wanopt | Mode::WanoptFec => &LINUX,
            },
            optimize: cell.mode.tunnel(),
            reduce: false,
            node_args: node_args(cell.mode, self.fec),
            edge_args: Vec::new(),
            core_args: Vec::new(),
            link2: None,
            sites: crate::sites::Sites::ONE,
            cluster: None,
            edges: Default::default(),
        };
        bringup::up(env.lab, &config, env.exe).map_err(|e| format!("lab up failed: {e}"))
    }

    /// Checks the nodes' logs of the lab for flow resets (kept under
    /// `logs/` when there are any).
    fn check_logs(&mut self, env: &Env<'_>, cell: &Cell, what: &str) {
        if !cell.mode.tunnel() {
            return;
        }
        let c = &cell.condition;
        let label = format!(
            "rtt{}ms-loss{}{}-{}-{what}",
            c.rtt_ms,
            c.loss_pct,
            if c.burst { "-bursts" } else { "" },
            cell.mode.name()
        );
        let resets = env.flow_resets(&label);
        self.results.flow_resets.extend(resets);
    }

    /// Measures `workload` on the lab as it is, as `tunnel`.
    fn measure(&mut self, env: &Env<'_>, cell: &Cell, workload: Workload, tunnel: &str) -> bool {
        let label = format!(
            "{} {} {} {tunnel}",
            cell.condition.label(),
            cell.mode.name(),
            workload.name()
        );
        env.bar.set_message(label.clone());
        let outcome = measure(env.lab, env.exe, &self.plan, cell.mode, workload);
        env.bar.inc(1);
        match outcome {
            Ok((report, wan)) => {
                let row = row(cell, workload, tunnel, &report, wan);
                let done = row.note.is_none();
                if env.bar.is_hidden() {
                    eprintln!("  {label}: {}", row_figure(&row));
                }
                self.results.rows.push(row);
                let _ = Lossy::write_outputs(&self.results, env.out);
                done
            }
            Err(reason) => {
                env.say(format!("  {label}: failed: {reason}"));
                self.results.skipped.push(Skipped {
                    rtt_ms: cell.condition.rtt_ms,
                    loss_pct: cell.condition.loss_pct,
                    burst: cell.condition.burst,
                    workload: workload.name(),
                    mode: cell.mode.name().into(),
                    reason,
                });
                false
            }
        }
    }

    fn run_cell(&mut self, env: &Env<'_>, cell: &Cell) {
        if cell.mode.tunnel() {
            if let Err(reason) = self.tunnel.clone() {
                for w in &cell.workloads {
                    self.skip(env, cell, *w, &reason);
                }
                return;
            }
        }
        if cell.mode == Mode::WanoptFec && !self.fec {
            for w in &cell.workloads {
                self.skip(
                    env,
                    cell,
                    *w,
                    "not available: this build's nodes have no --fec",
                );
            }
            return;
        }
        // Bulk on a fresh lab, then rpc on the same (warm) one.
        let fresh_lab: Vec<Workload> = cell
            .workloads
            .iter()
            .copied()
            .filter(|w| matches!(w, Workload::Bulk | Workload::Rpc))
            .collect();
        if !fresh_lab.is_empty() {
            match self.up(env, cell) {
                Ok(()) => {
                    for (i, w) in fresh_lab.iter().enumerate() {
                        self.measure(env, cell, *w, if i == 0 { "fresh" } else { "warm" });
                    }
                    self.check_logs(env, cell, "bulk");
                }
                Err(reason) => {
                    for w in fresh_lab {
                        self.skip(env, cell, w, &reason);
                    }
                }
            }
        }
        for w in cell.workloads.clone() {
            let Workload::Transfer(_) = w else { continue };
            if let Err(reason) = self.up(env, cell) {
                self.skip(env, cell, w, &reason);
                continue;
            }
            if self.measure(env, cell, w, "fresh") {
                self.measure(env, cell, w, "warm");
            } else {
                env.bar.inc(1);
                self.results.skipped.push(Skipped {
                    rtt_ms: cell.condition.rtt_ms,
                    loss_pct: cell.condition.loss_pct,
                    burst: cell.condition.burst,
                    workload: w.name(),
                    mode: cell.mode.name().into(),
                    reason: "warm: not run, the fresh transfer did not finish".into(),
                });
            }
            self.check_logs(env, cell, &w.name());
        }
    }
}

/// A row's main figure for a progress line.
fn row_figure(r: &super::results::Row) -> String {
    let or_na = |v: Option<f64>| v.map_or("n/a".to_string(), |v| v.to_string());
    let overhead = or_na(r.overhead_pct);
    match (r.throughput_mbps, r.seconds, r.p99_ms) {
        (_, _, Some(p99)) => format!(
            "p50 {} ms, p99 {p99} ms, overhead {overhead}%",
            or_na(r.p50_ms)
        ),
        (Some(mbps), Some(s), None) if r.workload == "bulk" => format!(
            "{mbps} Mbit/s over {s} s, 90% at {} s, overhead {overhead}%",
            or_na(r.time_to_90pct_s)
        ),
        (Some(mbps), Some(s), None) => format!(
            "{s} s (floor {} s), {mbps} Mbit/s, overhead {overhead}%",
            or_na(r.floor_s)
        ),
        _ => "did not finish by the deadline".into(),
    }
}

/// Runs `workload` with the lab's client, reading the link's counters
/// around it.
fn measure(
    lab: &Lab,
    exe: &Path,
    plan: &Plan,
    mode: Mode,
    workload: Workload,
) -> Result<(ClientReport, WanDelta), String> {
    let mut cmd = lab.command(Node::Client, &exe.to_string_lossy());
    cmd.args(["lab", "lossy-client", "--connect"])
        .arg(format!("{SERVER_ADDR}:{GENERATOR_PORT}"));
    let (kind, streams, seconds, bytes) = match workload {
        Workload::Bulk => ("bulk", plan.bulk_streams, plan.bulk_seconds, 0),
        Workload::Transfer(b) => ("transfer", 1, plan.transfer_deadline_seconds, b),
        Workload::Rpc => (
            "rpc",
            plan.rpc_connections,
            plan.rpc_deadline_seconds,
            RPC_BYTES,
        ),
    };
    cmd.args(["--workload", kind])
        .args(["--streams", &streams.to_string()])
        .args(["--seconds", &seconds.to_string()])
        .args(["--bytes", &bytes.to_string()])
        .args(["--requests", &plan.rpc_requests.to_string()]);
    if let Some(cc) = mode.congestion() {
        cmd.args(["--congestion", cc]);
    }
    let before = link_totals(lab, unix_ms())?;
    let out = cmd.output().map_err(|e| e.to_string())?;
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).trim().to_string());
    }
    let report: ClientReport = serde_json::from_slice(&out.stdout).map_err(|e| e.to_string())?;
    let wan = WanDelta::from(link_totals(lab, unix_ms())?.since(&before));
    thread::sleep(Duration::from_millis(100));
    Ok((report, wan))
}

impl Scenario for Lossy {
    type Results = Results;

    fn name(&self) -> &str {
        SCENARIO
    }

    fn plan(&mut self, exe: &Path) -> RunPlan {
        self.tunnel = crate::optimize::available(exe).map_err(|e: OptimizeError| e.to_string());
        self.fec = self.tunnel.is_ok() && supports_fec(exe);
        let plan = &self.plan;
        RunPlan {
            header: format!(
                "scenario lossy: {} cells, {} measurements; bulk {} x {} s{}{}",
                plan.cells.len(),
                plan.steps(),
                plan.bulk_streams,
                plan.bulk_seconds,
                if self.fec {
                    ""
                } else {
                    "; wanopt-fec not available (the nodes have no --fec)"
                },
                if self.results.quick { " (quick)" } else { "" }
            ),
            steps: plan.steps(),
        }
    }

    fn run(&mut self, env: &Env<'_>) -> Finished<Results> {
        let started = *self.started.get_or_insert_with(Instant::now);
        let cells = self.plan.cells.clone();
        for (i, cell) in cells.iter().enumerate() {
            env.say(format!(
                "[{}] cell {}/{}: {} {}: {}",
                humantime(started.elapsed()),
                i + 1,
                cells.len(),
                cell.condition.label(),
                cell.mode.name(),
                cell.workloads
                    .iter()
                    .map(|w| w.name())
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
            self.run_cell(env, cell);
        }
        Finished {
            results: self.results.clone(),
            stopped: None,
        }
    }

    fn write_outputs(results: &Results, out: &Path) -> Result<(), RunError> {
        output::write_results(out, results, report::markdown(results))?;
        output::plotted(super::plot::bulk_vs_loss(results, out));
        Ok(())
    }

    fn summary(results: &Results) -> String {
        report::summary(results)
    }

    fn written(_: &Results, out: &Path) -> String {
        format!(
            "wrote {}/results.json, report.md, lossy-bulk.svg, lossy-bulk.png{}",
            out.display(),
            output::logs_note(out, "node logs of labs with flow resets")
        )
    }

    fn flow_resets(results: &Results) -> &[String] {
        &results.flow_resets
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fec_is_passed_only_to_nodes_that_have_it() {
        assert_eq!(node_args(Mode::WanoptFec, true), ["--fec", "auto"]);
        assert_eq!(node_args(Mode::Wanopt, true), ["--fec", "off"]);
        assert!(node_args(Mode::Wanopt, false).is_empty());
        assert!(node_args(Mode::Bbr, true).is_empty());
        assert_eq!(BBR.congestion_control, Some("bbr"));
        assert_eq!(CUBIC.sysctls(), LINUX.sysctls());
    }

    /// `--runs` and waas-3g's options are the user's mistakes with
    /// `lossy` (exit code 2), found before any lab is touched.
    #[test]
    fn options_of_other_scenarios_are_refused() {
        let args = |runs, tests: bool| crate::scenario::RunArgs {
            scenario: "lossy".into(),
            out: "/nonexistent/out".into(),
            runs,
            quick: true,
            tests: if tests {
                vec![crate::waas::transfer::Test::Download]
            } else {
                Vec::new()
            },
            smb_encrypt: None,
            smoke: false,
            traces: None,
        };
        let lab = Lab::new("t8-");
        for (args, message) in [
            (
                args(Some(2), false),
                "--runs is not an option of the lossy scenario",
            ),
            (
                args(None, true),
                "--tests and --smb-encrypt are options of the waas-3g",
            ),
        ] {
            let e = crate::scenario::run(&lab, &args).err();
            assert!(
                e.as_ref()
                    .is_some_and(|e| e.is_usage() && e.to_string().starts_with(message)),
                "{e:?}"
            );
        }
    }
}
