//! The `initcwnd` scenario on the lab: for each path, a lab per direct mode
//! (its initial window set on the server's route) carrying every file as
//! fresh connections; and for each file and run, a lab with a new wanopt
//! tunnel carrying it first (fresh), then 1 MB, then the file again (warm).

use std::path::Path as FsPath;
use std::thread;
use std::time::{Duration, Instant};

use super::matrix::{size_name, Leg, Mode, Plan, MODES, SCENARIO};
use super::report;
use super::results::{Results, Row, Skipped};
use crate::bringup::{self, UpConfig};
use crate::kit::output;
use crate::lossy::client::ClientReport;
use crate::scenario::runner::{humantime, Env, Finished, Plan as RunPlan, Scenario};
use crate::scenario::RunError;
use crate::topology::{Lab, Node, SERVER_ADDR};
use crate::traffic::GENERATOR_PORT;

/// What crosses a warm tunnel before the measured file.
const WARM_UP_BYTES: u64 = 1_000_000;

/// The `initcwnd` scenario and its results so far.
#[derive(Debug)]
pub struct Initcwnd {
    plan: Plan,
    results: Results,
    tunnel: Result<(), String>,
    started: Option<Instant>,
}

impl Initcwnd {
    /// The scenario, full or `--quick`, with `runs` transfers per cell
    /// (default: 3, or 1 quick).
    pub fn new(quick: bool, runs: Option<usize>) -> Initcwnd {
        let plan = Plan::new(quick, runs);
        Initcwnd {
            results: Results {
                scenario: SCENARIO.into(),
                quick,
                runs: plan.runs,
                rows: Vec::new(),
                skipped: Vec::new(),
                flow_resets: Vec::new(),
            },
            plan,
            tunnel: Ok(()),
            started: None,
        }
    }

    /// A fresh lab for `leg` with `mode`'s endpoints (and nodes).
    fn up(&self, env: &Env<'_>, leg: &Leg, mode: Mode) -> Result<(), String> {
        let specs = leg.path.link().specs().map_err(|e| e.to_string())?;
        let config = UpConfig {
            specs,
            profile: mode.profile(),
            optimize: mode.tunnel(),
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

    fn skip(&mut self, env: &Env<'_>, leg: &Leg, bytes: u64, mode: Mode, reason: &str) {
        env.bar.inc(self.plan.runs as u64);
        self.results.skipped.push(Skipped {
            path: leg.path.name.into(),
            size: size_name(bytes),
            mode: mode.name().into(),
            reason: reason.into(),
        });
    }

    fn record(&mut self, env: &Env<'_>, leg: &Leg, bytes: u64, mode: Mode, runs: Vec<Option<f64>>) {
        let row = Row::new(&leg.path, bytes, mode, runs);
        if env.bar.is_hidden() {
            eprintln!(
                "  {} {} {}: {} (floor {} s)",
                leg.path.name,
                row.size,
                row.mode,
                row.seconds
                    .map_or("not done by the deadline".into(), |s| format!("{s} s")),
                row.floor_s
            );
        }
        self.results.rows.push(row);
        let _ = Initcwnd::write_outputs(&self.results, env.out);
    }

    /// Every file over `leg` with the direct `mode`, on one lab.
    fn direct(&mut self, env: &Env<'_>, leg: &Leg, mode: Mode) {
        if let Err(reason) = self.up(env, leg, mode) {
            for &bytes in &leg.sizes {
                self.skip(env, leg, bytes, mode, &reason);
            }
            return;
        }
        for &bytes in &leg.sizes {
            env.bar.set_message(format!(
                "{} {} {}",
                leg.path.name,
                size_name(bytes),
                mode.name()
            ));
            let mut runs = Vec::new();
            let mut failed = None;
            for _ in 0..self.plan.runs {
                match transfer(env.lab, env.exe, bytes, self.plan.deadline_seconds) {
                    Ok(seconds) => runs.push(seconds),
                    Err(reason) => {
                        failed = Some(reason);
                        break;
                    }
                }
                env.bar.inc(1);
            }
            match failed {
                None => self.record(env, leg, bytes, mode, runs),
                Some(reason) => {
                    env.bar.inc((self.plan.runs - runs.len()) as u64);
                    self.results.skipped.push(Skipped {
                        path: leg.path.name.into(),
                        size: size_name(bytes),
                        mode: mode.name().into(),
                        reason,
                    });
                }
            }
        }
    }

    /// Every file over `leg` through new tunnels: fresh, then warm.
    fn tunnel(&mut self, env: &Env<'_>, leg: &Leg) {
        for &bytes in &leg.sizes {
            if let Err(reason) = self.tunnel.clone() {
                for mode in [Mode::WanoptFresh, Mode::WanoptWarm] {
                    self.skip(env, leg, bytes, mode, &reason);
                }
                continue;
            }
            env.bar
                .set_message(format!("{} {} wanopt", leg.path.name, size_name(bytes)));
            let (mut fresh, mut warm) = (Vec::new(), Vec::new());
            let mut failed = None;
            for _ in 0..self.plan.runs {
                let run = self.fresh_and_warm(env, leg, bytes);
                let resets = env.flow_resets(&format!("{}-{}", leg.path.name, size_name(bytes)));
                self.results.flow_resets.extend(resets);
                match run {
                    Ok((f, w)) => {
                        fresh.push(f);
                        warm.push(w);
                    }
                    Err(reason) => {
                        failed = Some(reason);
                        break;
                    }
                }
                env.bar.inc(2);
            }
            match failed {
                None => {
                    self.record(env, leg, bytes, Mode::WanoptFresh, fresh);
                    self.record(env, leg, bytes, Mode::WanoptWarm, warm);
                }
                Some(reason) => {
                    for mode in [Mode::WanoptFresh, Mode::WanoptWarm] {
                        env.bar.inc((self.plan.runs - fresh.len()) as u64);
                        self.results.skipped.push(Skipped {
                            path: leg.path.name.into(),
                            size: size_name(bytes),
                            mode: mode.name().into(),
                            reason: reason.clone(),
                        });
                    }
                }
            }
        }
    }

    /// One run through a new tunnel: the file first, then 1 MB, then the
    /// file again.
    fn fresh_and_warm(
        &self,
        env: &Env<'_>,
        leg: &Leg,
        bytes: u64,
    ) -> Result<(Option<f64>, Option<f64>), String> {
        self.up(env, leg, Mode::WanoptFresh)?;
        let deadline = self.plan.deadline_seconds;
        let fresh = transfer(env.lab, env.exe, bytes, deadline)?;
        transfer(env.lab, env.exe, WARM_UP_BYTES, deadline)?;
        let warm = transfer(env.lab, env.exe, bytes, deadline)?;
        Ok((fresh, warm))
    }
}

/// One download of `bytes` on a fresh connection from the lab's client,
/// seconds from just before the connect to the last byte (`None`: not
/// done within `deadline` seconds).
fn transfer(lab: &Lab, exe: &FsPath, bytes: u64, deadline: u64) -> Result<Option<f64>, String> {
    let out = lab
        .command(Node::Client, &exe.to_string_lossy())
        .args(["lab", "lossy-client", "--workload", "transfer", "--connect"])
        .arg(format!("{SERVER_ADDR}:{GENERATOR_PORT}"))
        .args(["--bytes", &bytes.to_string()])
        .args(["--seconds", &deadline.to_string()])
        .output()
        .map_err(|e| e.to_string())?;
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).trim().to_string());
    }
    let report: ClientReport = serde_json::from_slice(&out.stdout).map_err(|e| e.to_string())?;
    // Let the connection's last segments leave the path.
    thread::sleep(Duration::from_millis(100));
    match report {
        ClientReport::Transfer { seconds, .. } => Ok(seconds),
        other => Err(format!("the client measured something else: {other:?}")),
    }
}

impl Scenario for Initcwnd {
    type Results = Results;

    fn name(&self) -> &str {
        SCENARIO
    }

    fn plan(&mut self, exe: &FsPath) -> RunPlan {
        self.tunnel = crate::optimize::available(exe).map_err(|e| e.to_string());
        let plan = &self.plan;
        RunPlan {
            header: format!(
                "scenario initcwnd: {} paths, {} transfers ({} per cell){}",
                plan.legs.len(),
                plan.steps(),
                plan.runs,
                if self.results.quick { " (quick)" } else { "" }
            ),
            steps: plan.steps(),
        }
    }

    fn run(&mut self, env: &Env<'_>) -> Finished<Results> {
        let started = *self.started.get_or_insert_with(Instant::now);
        let legs = self.plan.legs.clone();
        for (i, leg) in legs.iter().enumerate() {
            env.say(format!(
                "[{}] path {}/{}: {} ({})",
                humantime(started.elapsed()),
                i + 1,
                legs.len(),
                leg.path.name,
                leg.path.label()
            ));
            for mode in MODES.into_iter().filter(|mode| !mode.tunnel()) {
                self.direct(env, leg, mode);
            }
            self.tunnel(env, leg);
        }
        Finished {
            results: self.results.clone(),
            stopped: None,
        }
    }

    fn write_outputs(results: &Results, out: &FsPath) -> Result<(), RunError> {
        output::write_results(out, results, report::markdown(results))?;
        output::plotted(report::plot(results, out));
        Ok(())
    }

    fn summary(results: &Results) -> String {
        report::summary(results)
    }

    fn written(_: &Results, out: &FsPath) -> String {
        format!(
            "wrote {}/results.json, report.md, initcwnd.svg, initcwnd.png{}",
            out.display(),
            output::logs_note(out, "node logs of labs with flow resets")
        )
    }

    fn flow_resets(results: &Results) -> &[String] {
        &results.flow_resets
    }
}
