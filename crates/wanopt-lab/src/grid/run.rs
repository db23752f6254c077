//! The grid workload (`tcp-opt` and scenario TOML files): every point of
//! a grid of RTTs, middlebox rules, endpoint profiles and paths (direct
//! and through wanopt), each a few bulk transfers with the traffic
//! generator on a freshly built lab.

use std::path::Path;
use std::time::Duration;

use super::points::{points, slug, Point};
use super::results::{Results, Row};
use super::spec::{self, Mode, ScenarioSpec};
use super::{plot, report};
use crate::bringup::{self, UpConfig};
use crate::kit::output;
use crate::kit::stats::{round2, trimmed_mean};
use crate::profile::Profile;
use crate::scenario::runner::{humantime, Env, Finished, Plan, Scenario};
use crate::scenario::{RunArgs, RunError};
use crate::topology::{Lab, Node, SERVER_ADDR};
use crate::traffic::{self, Direction, TrafficReport, GENERATOR_PORT};

/// Bytes per stream of the unmeasured warm-up transfer of the wanopt mode.
const WARM_UP_BYTES: u64 = 10_000_000;

/// A grid scenario, validated, and its results so far.
#[derive(Debug)]
pub struct Grid {
    spec: ScenarioSpec,
    points: Vec<Point>,
    bytes: u64,
    quick: bool,
    wanopt_available: Result<(), crate::optimize::OptimizeError>,
    results: Results,
    endpoints: serde_json::Map<String, serde_json::Value>,
}

impl Grid {
    /// The scenario `lab run` names (`tcp-opt` or a TOML file), checked
    /// whole before any work starts.
    pub fn from_args(args: &RunArgs) -> Result<Grid, RunError> {
        let mut spec = spec::load(&args.scenario, args.quick)?;
        if let Some(runs) = args.runs()? {
            spec.runs = runs;
        }
        Grid::new(spec, args.quick)
    }

    /// The scenario of `spec`, checked whole.
    pub fn new(spec: ScenarioSpec, quick: bool) -> Result<Grid, RunError> {
        let bytes = traffic::parse_size(&spec.workload.bytes)?;
        let points = points(&spec)?;
        Ok(Grid {
            results: Results {
                scenario: spec.name.clone(),
                rows: Vec::new(),
                skipped: Vec::new(),
                quick,
                spec: spec.clone(),
                endpoints: serde_json::Value::Null,
                flow_resets: Vec::new(),
            },
            spec,
            points,
            bytes,
            quick,
            wanopt_available: Ok(()),
            endpoints: serde_json::Map::new(),
        })
    }

    /// The results so far.
    fn results(&self) -> Results {
        Results {
            endpoints: serde_json::Value::Object(self.endpoints.clone()),
            ..self.results.clone()
        }
    }

    /// Measures one point on a freshly built lab.
    fn run_point(&mut self, env: &Env<'_>, point: &Point) {
        let runs = self.spec.runs;
        let label = point.label();
        env.bar.set_message(label.clone());
        if point.mode == Mode::Wanopt {
            if let Err(reason) = &self.wanopt_available {
                env.bar.inc(runs as u64);
                self.results.skipped.push(point.skipped(reason.to_string()));
                return;
            }
        }
        let config = UpConfig {
            specs: point.specs.clone(),
            profile: point.profile,
            optimize: point.mode == Mode::Wanopt,
            reduce: self.spec.node.reduce,
            node_args: Vec::new(),
            edge_args: Vec::new(),
            core_args: Vec::new(),
            link2: None,
            sites: crate::sites::Sites::ONE,
            cluster: None,
            edges: Default::default(),
        };
        if let Err(e) = bringup::up(env.lab, &config, env.exe) {
            env.bar.inc(runs as u64);
            let reason = format!("lab up failed: {e}");
            self.results.skipped.push(point.skipped(reason));
            return;
        }
        let profile = point.profile;
        self.endpoints
            .entry(profile.name.to_string())
            .or_insert_with(|| {
                serde_json::json!({
                    "sysctls": Profile::effective(env.lab, Node::Server),
                    "generator_congestion_control": profile.congestion_control.unwrap_or("(namespace default)"),
                })
            });
        let (samples, failures) = self.transfers(env, point, &label);
        if point.mode == Mode::Wanopt {
            self.keep_logs(env, point, &label);
        }
        self.record(env, point, &label, samples, failures);
    }

    /// The warm-up (wanopt, if the scenario wants it) and the measured
    /// runs of a point: each run's report, and why the others failed.
    fn transfers(
        &self,
        env: &Env<'_>,
        point: &Point,
        label: &str,
    ) -> (Vec<TrafficReport>, Vec<String>) {
        let workload = &self.spec.workload;
        let transfer = |bytes| {
            one_run(
                env.lab,
                env.exe,
                workload.streams,
                bytes,
                workload.direction,
                point.profile,
            )
        };
        let mut samples = Vec::new();
        let mut failures = Vec::new();
        if point.mode == Mode::Wanopt && self.spec.node.warm_up {
            env.bar.set_message(format!("{label} (warm-up)"));
            if let Err(e) = transfer(self.bytes.min(WARM_UP_BYTES)) {
                failures.push(format!("warm-up: {e}"));
            }
            env.bar.set_message(label.to_string());
        }
        for _ in 0..self.spec.runs {
            match transfer(self.bytes) {
                Ok(r) => samples.push(r),
                Err(e) => failures.push(e.to_string()),
            }
            env.bar.inc(1);
        }
        (samples, failures)
    }

    /// Saves the nodes' logs of a wanopt point (before the next point
    /// rebuilds the lab and its logs) and records the flow resets in them.
    fn keep_logs(&mut self, env: &Env<'_>, point: &Point, label: &str) {
        let logs = crate::optimize::save_logs(
            env.lab,
            env.out,
            &format!(
                "rtt{}ms-{}{}-{}",
                point.rtt_ms,
                slug(&point.specs.middlebox),
                point.profile.name,
                point.mode.name()
            ),
        );
        let resets = crate::optimize::flow_resets(&logs);
        if let Some(first) = resets.first() {
            env.say(format!("{label}: FLOW RESET: the run fails: {first}"));
        }
        self.results.flow_resets.extend(resets);
    }

    /// Records a point's row (or why it has none) and writes the outputs
    /// so far.
    fn record(
        &mut self,
        env: &Env<'_>,
        point: &Point,
        label: &str,
        samples: Vec<TrafficReport>,
        mut failures: Vec<String>,
    ) {
        let (bar, total) = (&env.bar, self.points.len() * self.spec.runs);
        if samples.is_empty() {
            let reason = failures.pop().unwrap_or_else(|| "no run finished".into());
            self.results.skipped.push(point.skipped(reason));
            if bar.is_hidden() {
                eprintln!("[{}/{total}] {label}: every run failed", bar.position());
            }
            return;
        }
        let mbps: Vec<f64> = samples.iter().map(|r| r.throughput_mbps).collect();
        let secs: Vec<f64> = samples.iter().map(|r| r.seconds).collect();
        if bar.is_hidden() {
            // No terminal (a log file, CI): a line per point instead of the bar.
            eprintln!(
                "[{}/{total}] {} {label}: {:.1} Mbit/s ({} of {} runs)",
                bar.position(),
                humantime(bar.elapsed()),
                trimmed_mean(&mbps),
                samples.len(),
                self.spec.runs
            );
        }
        self.results.rows.push(Row {
            rtt_ms: point.rtt_ms,
            profile: point.profile.name.into(),
            mode: point.mode.name().into(),
            middlebox: point.specs.middlebox.clone(),
            throughput_mbps: round2(trimmed_mean(&mbps)),
            seconds: round2(trimmed_mean(&secs)),
            runs: samples.len(),
            samples_mbps: mbps.iter().map(|v| round2(*v)).collect(),
            samples_seconds: secs.iter().map(|v| round2(*v)).collect(),
            method: if samples.len() >= 3 {
                "highest and lowest dropped, rest averaged".into()
            } else {
                "mean".into()
            },
            link_up: point.specs.up.clone(),
            link_down: point.specs.down.clone(),
            workload: format!(
                "{} x {}",
                self.spec.workload.streams, self.spec.workload.bytes
            ),
            failed_runs: failures,
        });
        let _ = Grid::write_outputs(&self.results(), env.out);
    }
}

impl Scenario for Grid {
    type Results = Results;

    fn name(&self) -> &str {
        &self.spec.name
    }

    fn plan(&mut self, exe: &Path) -> Plan {
        self.wanopt_available = crate::optimize::available(exe);
        let spec = &self.spec;
        Plan {
            header: format!(
                "scenario {}: {} points x {} runs, {} streams x {} bytes {:?}{}",
                spec.name,
                self.points.len(),
                spec.runs,
                spec.workload.streams,
                self.bytes,
                spec.workload.direction,
                if self.quick { " (quick)" } else { "" }
            ),
            steps: (self.points.len() * spec.runs) as u64,
        }
    }

    fn run(&mut self, env: &Env<'_>) -> Finished<Results> {
        for point in self.points.clone() {
            self.run_point(env, &point);
        }
        Finished {
            results: self.results(),
            stopped: None,
        }
    }

    fn write_outputs(results: &Results, out: &Path) -> Result<(), RunError> {
        output::write_results(out, results, report::markdown(results))?;
        output::plotted(plot::throughput_vs_rtt(results, out));
        Ok(())
    }

    fn summary(results: &Results) -> String {
        report::table(results)
    }

    fn written(_: &Results, out: &Path) -> String {
        format!(
            "wrote {}/results.json, report.md, throughput.svg, throughput.png{}",
            out.display(),
            output::logs_note(out, "node logs per point")
        )
    }

    fn flow_resets(results: &Results) -> &[String] {
        &results.flow_resets
    }
}

/// Errors of one transfer of the generator.
#[derive(Debug, thiserror::Error)]
enum TransferError {
    /// The generator client could not be started.
    #[error(transparent)]
    Spawn(#[from] std::io::Error),
    /// The generator client failed.
    #[error("generator failed: {0}")]
    Generator(String),
    /// Its report does not read.
    #[error(transparent)]
    Report(#[from] serde_json::Error),
}

/// One transfer with the generator client inside the `client` namespace.
fn one_run(
    lab: &Lab,
    exe: &Path,
    streams: usize,
    bytes: u64,
    direction: Direction,
    profile: &Profile,
) -> Result<TrafficReport, TransferError> {
    let mut cmd = lab.command(Node::Client, &exe.to_string_lossy());
    cmd.args(["lab", "gen-client", "--connect"])
        .arg(format!("{SERVER_ADDR}:{GENERATOR_PORT}"))
        .args([
            "--streams",
            &streams.to_string(),
            "--bytes",
            &bytes.to_string(),
        ])
        .args(["--stall-seconds", "30"]);
    if direction == Direction::Download {
        cmd.arg("--reverse");
    }
    if let Some(cc) = profile.congestion_control {
        cmd.args(["--congestion", cc]);
    }
    let out = cmd.output()?;
    if !out.status.success() {
        return Err(TransferError::Generator(
            String::from_utf8_lossy(&out.stderr).trim().to_string(),
        ));
    }
    let report: TrafficReport = serde_json::from_slice(&out.stdout)?;
    std::thread::sleep(Duration::from_millis(200));
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_per_point_come_from_the_option() {
        let args = RunArgs {
            scenario: "tcp-opt".into(),
            out: "/nonexistent/out".into(),
            runs: Some(2),
            quick: true,
            tests: Vec::new(),
            smb_encrypt: None,
            smoke: false,
            traces: None,
        };
        let grid = Grid::from_args(&args);
        assert!(grid.is_ok_and(|g| g.spec.runs == 2 && g.points.len() == 12));
    }
}
