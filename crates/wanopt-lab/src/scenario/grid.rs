//! The grid workload (`tcp-opt` and scenario TOML files): every point of
//! a grid of RTTs, middlebox rules, endpoint profiles and paths (direct
//! and through wanopt), each a few bulk transfers with the traffic
//! generator on a freshly built lab.

use std::path::Path;
use std::time::Duration;

use super::results::{Results, Row, Skipped};
use super::runner::{humantime, Env, Finished, Plan, Scenario};
use super::spec::{self, Mode, ScenarioSpec};
use super::{RunArgs, RunError};
use crate::bringup::{self, UpConfig};
use crate::kit::output;
use crate::kit::stats::{round2, trimmed_mean};
use crate::link::{LinkOptions, LinkSpecs};
use crate::profile::Profile;
use crate::topology::{Lab, Node, SERVER_ADDR};
use crate::traffic::{self, Direction, TrafficReport, GENERATOR_PORT};

/// Bytes per stream of the unmeasured warm-up transfer of the wanopt mode.
const WARM_UP_BYTES: u64 = 10_000_000;

/// One grid point.
#[derive(Debug, Clone)]
struct Point {
    rtt_ms: u64,
    specs: LinkSpecs,
    profile: &'static Profile,
    mode: Mode,
}

impl Point {
    /// The point in a progress line.
    fn label(&self) -> String {
        let (rtt_ms, name, mode) = (self.rtt_ms, self.profile.name, self.mode.name());
        if self.specs.middlebox.is_empty() {
            format!("rtt {rtt_ms}ms {name} {mode}")
        } else {
            format!(
                "rtt {rtt_ms}ms middlebox [{}] {name} {mode}",
                self.specs.middlebox
            )
        }
    }

    fn skipped(&self, reason: String) -> Skipped {
        Skipped {
            rtt_ms: self.rtt_ms,
            profile: self.profile.name.into(),
            mode: self.mode.name().into(),
            middlebox: self.specs.middlebox.clone(),
            reason,
        }
    }
}

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
        output::write_results(out, results, crate::report::markdown(results))?;
        output::plotted(crate::plot::throughput_vs_rtt(results, out));
        Ok(())
    }

    fn summary(results: &Results) -> String {
        crate::report::table(results)
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

fn parse_rtt_ms(text: &str) -> Result<u64, RunError> {
    wanopt_netem::units::parse_duration(text)
        .map(|d| d.as_millis() as u64)
        .map_err(|e| RunError::Rtt {
            text: text.to_string(),
            message: e.to_string(),
        })
}

/// The middlebox rules of each point: the grid's list, or the `[link]`
/// table's rules (if any) at every point.
fn middleboxes(spec: &ScenarioSpec) -> Result<Vec<Option<String>>, RunError> {
    match (spec.grid.middlebox.is_empty(), &spec.link.middlebox) {
        (true, rules) => Ok(vec![rules.clone()]),
        (false, None) => Ok(spec.grid.middlebox.iter().cloned().map(Some).collect()),
        (false, Some(_)) => Err(RunError::MiddleboxTwice),
    }
}

/// Every point of the grid, in its order: RTT, middlebox, profile, mode.
fn points(spec: &ScenarioSpec) -> Result<Vec<Point>, RunError> {
    let middleboxes = middleboxes(spec)?;
    let mut points = Vec::new();
    for rtt in &spec.grid.rtt {
        let rtt_ms = parse_rtt_ms(rtt)?;
        for middlebox in &middleboxes {
            let link = LinkOptions {
                rtt: Some(rtt.clone()),
                middlebox: middlebox.clone(),
                ..spec.link.clone()
            };
            let specs = link.specs()?;
            for profile in &spec.grid.profile {
                let profile = Profile::named(profile)?;
                for mode in &spec.grid.mode {
                    points.push(Point {
                        rtt_ms,
                        specs: specs.clone(),
                        profile,
                        mode: *mode,
                    });
                }
            }
        }
    }
    Ok(points)
}

/// Middlebox rules as the start of a file name (`strip-wscale-`; empty
/// for none): [`crate::optimize::file_safe`], at most 40 characters.
fn slug(rules: &str) -> String {
    if rules.is_empty() {
        return String::new();
    }
    let safe = crate::optimize::file_safe(rules);
    let mut out: String = safe.trim_matches('-').chars().take(40).collect();
    out.push('-');
    out
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

    /// A one-run row at RTT 100 ms, `linux`, 1 s.
    fn row(middlebox: &str, mode: &str, mbps: f64) -> Row {
        Row {
            rtt_ms: 100,
            profile: "linux".into(),
            mode: mode.into(),
            middlebox: middlebox.into(),
            throughput_mbps: mbps,
            seconds: 1.0,
            runs: 1,
            samples_mbps: vec![mbps],
            samples_seconds: vec![1.0],
            method: "mean".into(),
            link_up: String::new(),
            link_down: String::new(),
            workload: String::new(),
            failed_runs: vec![],
        }
    }

    #[test]
    fn results_json_keeps_the_interface_contract() {
        let row = Row {
            profile: "legacy".into(),
            seconds: 26.1,
            runs: 5,
            samples_mbps: vec![],
            samples_seconds: vec![],
            ..row("", "wanopt", 123.4)
        };
        let results = Results {
            scenario: "tcp-opt".into(),
            rows: vec![row],
            skipped: vec![],
            quick: true,
            spec: spec::tcp_opt(true),
            endpoints: serde_json::Value::Null,
            flow_resets: Vec::new(),
        };
        let json = serde_json::to_value(&results).unwrap_or_default();
        assert_eq!(json["scenario"], "tcp-opt");
        let row = &json["rows"][0];
        assert_eq!(row["rtt_ms"], 100);
        assert_eq!(row["profile"], "legacy");
        assert_eq!(row["mode"], "wanopt");
        assert_eq!(row["throughput_mbps"], 123.4);
        assert_eq!(row["seconds"], 26.1);
        assert_eq!(row["runs"], 5);
        // No middlebox, no key: tcp-opt's rows are as they were.
        assert!(row.get("middlebox").is_none(), "{row}");
        let table = crate::report::table(&results);
        assert!(
            table.contains("| 100 | legacy | n/a | n/a | 123.4 | 26.1 | n/a | 71 | 131 | 1.85 |"),
            "{table}"
        );
    }

    #[test]
    fn a_grid_of_middleboxes_is_reported_per_point() {
        let spec: ScenarioSpec = toml::from_str(
            r#"
            name = "brokenness"
            [grid]
            rtt = ["100ms"]
            middlebox = ["", "strip-wscale"]
            "#,
        )
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            middleboxes(&spec).ok(),
            Some(vec![Some(String::new()), Some("strip-wscale".into())])
        );
        let mut both = spec.clone();
        both.link.middlebox = Some("mss 1200".into());
        assert!(middleboxes(&both).is_err_and(|e| e.to_string().contains("not both")));
        let mut link_only = both.clone();
        link_only.grid.middlebox.clear();
        assert_eq!(
            middleboxes(&link_only).ok(),
            Some(vec![Some("mss 1200".into())])
        );

        let results = Results {
            scenario: "brokenness".into(),
            rows: vec![
                row("", "direct", 90.0),
                row("", "wanopt", 92.0),
                row("strip-wscale", "direct", 5.0),
                row("strip-wscale", "wanopt", 90.0),
            ],
            skipped: vec![],
            quick: false,
            spec,
            endpoints: serde_json::Value::Null,
            flow_resets: Vec::new(),
        };
        let table = crate::report::table(&results);
        let lines: Vec<&str> = table.lines().collect();
        assert!(
            lines[0].starts_with("| RTT (ms) | middlebox | profile |"),
            "{table}"
        );
        // In the grid's order: no middlebox first.
        assert!(
            lines[2].starts_with("| 100 | none | linux | 90.0 |"),
            "{table}"
        );
        assert!(
            lines[3] == "| 100 | `strip-wscale` | linux | 5.0 | 1.0 | 90.0 | 1.0 | 18.00 |",
            "{table}"
        );
        let json = serde_json::to_value(&results).unwrap_or_default();
        assert_eq!(json["rows"][2]["middlebox"], "strip-wscale");
        assert!(json["rows"][0].get("middlebox").is_none());
        let md = crate::report::markdown(&results);
        assert!(
            md.contains("| 100 | `strip-wscale` | linux | wanopt | [90.0] |"),
            "{md}"
        );
    }

    /// The scenario files shipped in `scenarios/` parse, and every point's
    /// link and middlebox rules are valid.
    #[test]
    fn shipped_scenarios_are_valid() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios");
        let mut seen = 0;
        for entry in std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
            let path = entry.unwrap_or_else(|e| panic!("{e}")).path();
            let name = path.to_string_lossy().into_owned();
            let spec = spec::load(&name, false).unwrap_or_else(|e| panic!("{e}"));
            let boxes = middleboxes(&spec).unwrap_or_else(|e| panic!("{name}: {e}"));
            for rtt in &spec.grid.rtt {
                for middlebox in &boxes {
                    let link = LinkOptions {
                        rtt: Some(rtt.clone()),
                        middlebox: middlebox.clone(),
                        ..spec.link.clone()
                    };
                    assert!(link.specs().is_ok(), "{name}: {link:?}");
                }
            }
            assert!(traffic::parse_size(&spec.workload.bytes).is_ok(), "{name}");
            for profile in &spec.grid.profile {
                assert!(Profile::named(profile).is_ok(), "{name}: {profile}");
            }
            seen += 1;
        }
        assert!(seen >= 1, "no scenario in {}", dir.display());
    }

    /// A bad option or scenario is the user's error (exit code 2), with
    /// the one line `lab run` always printed; nothing runs.
    #[test]
    fn bad_options_are_the_users_errors() {
        let args = |scenario: &str, runs: Option<usize>, tests: bool| RunArgs {
            scenario: scenario.into(),
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
        for (args, message) in [
            (
                args("tcp-opt", Some(0), false),
                "--runs must be between 1 and 100",
            ),
            (
                args("tcp-opt", Some(101), false),
                "--runs must be between 1 and 100",
            ),
            (
                args("tcp-opt", None, true),
                "--tests and --smb-encrypt are options of the waas-3g scenario",
            ),
            (
                args("no-such-scenario", None, false),
                "unknown scenario `no-such-scenario`: use `tcp-opt`, `waas-3g`, `lossy`, `realtime`, `sites`, `cellular` or a path to a .toml file",
            ),
        ] {
            // `lab run` checks the options before anything runs.
            let e = crate::scenario::run(&crate::topology::Lab::new("t9-"), &args).err();
            assert_eq!(e.as_ref().map(|e| e.to_string()).as_deref(), Some(message));
            assert!(e.is_some_and(|e| e.is_usage()));
        }
        let grid = Grid::from_args(&args("tcp-opt", Some(2), false));
        assert!(grid.is_ok_and(|g| g.spec.runs == 2 && g.points.len() == 12));
        let e = crate::waas::Waas3g::from_args(&args("waas-3g", Some(0), false)).err();
        assert!(e.is_some_and(|e| e.is_usage() && e.to_string().contains("--runs")));
    }

    #[test]
    fn middlebox_rules_name_files() {
        assert_eq!(slug(""), "");
        assert_eq!(slug("strip-wscale"), "strip-wscale-");
        assert_eq!(slug("port 80 mss 1200; drop"), "port-80-mss-1200-drop-");
        assert_eq!(slug(&"x".repeat(100)).len(), 41);
    }
}
