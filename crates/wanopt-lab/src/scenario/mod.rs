//! Scenarios: grids of link settings, endpoint profiles and paths (direct
//! and through wanopt), run back to back on the same machine, written as
//! `results.json`, `report.md` and plots.

pub mod spec;

use anyhow::Context as _;
use std::path::PathBuf;
use std::time::Duration;

use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};
use serde::{Deserialize, Serialize};

use crate::bringup::{self, UpConfig};
use crate::link::LinkOptions;
use crate::profile::Profile;
use crate::topology::{Lab, Node, SERVER_ADDR};
use crate::traffic::{self, Direction, TrafficReport, GENERATOR_PORT};
use spec::{Mode, ScenarioSpec};

/// Options of `lab run`.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// `tcp-opt`, `waas-3g` or a path to a scenario TOML file.
    pub scenario: String,
    /// Output directory.
    #[arg(long, default_value = "lab-results")]
    pub out: PathBuf,
    /// Runs per grid point (default: the scenario's).
    #[arg(long)]
    pub runs: Option<usize>,
    /// A reduced grid for a fast look (tcp-opt: RTT 0/100/250 ms, 4 x 10 MB, 1 run; waas-3g: 3 files, 1 run).
    #[arg(long)]
    pub quick: bool,
    /// waas-3g: only these tests (comma-separated: http-download, download, upload, edit-save,
    /// cifs-copy-down, cifs-copy-up, cifs-open, cifs-save).
    #[arg(long, value_delimiter = ',', value_name = "TEST,...")]
    pub tests: Vec<crate::waas::transfer::Test>,
    /// waas-3g: Samba's `smb encrypt` for the CIFS tests (`default`: Samba's default, sessions
    /// not encrypted; `required`: every session encrypted).
    #[arg(long, value_name = "MODE")]
    pub smb_encrypt: Option<crate::waas::servers::SmbEncrypt>,
}

/// One grid point's result.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Row {
    /// Round-trip time, ms.
    pub rtt_ms: u64,
    /// Endpoint profile.
    pub profile: String,
    /// `direct` or `wanopt`.
    pub mode: String,
    /// The middlebox rules of the point (absent: none).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub middlebox: String,
    /// Aggregate payload throughput, Mbit/s (trimmed mean of the runs).
    pub throughput_mbps: f64,
    /// Completion time, seconds (trimmed mean of the runs).
    pub seconds: f64,
    /// Runs measured.
    pub runs: usize,
    /// Each run's throughput, Mbit/s.
    pub samples_mbps: Vec<f64>,
    /// Each run's completion time, s.
    pub samples_seconds: Vec<f64>,
    /// How the runs were averaged.
    pub method: String,
    /// The link spec of the up (client to server) direction.
    pub link_up: String,
    /// The link spec of the down direction.
    pub link_down: String,
    /// Streams x bytes per stream.
    pub workload: String,
    /// Runs that failed (not averaged), with the reason.
    #[serde(default)]
    pub failed_runs: Vec<String>,
}

/// A grid point that could not be measured.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Skipped {
    /// Round-trip time, ms.
    pub rtt_ms: u64,
    /// Endpoint profile.
    pub profile: String,
    /// `direct` or `wanopt`.
    pub mode: String,
    /// The middlebox rules of the point (absent: none).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub middlebox: String,
    /// Why.
    pub reason: String,
}

/// `results.json`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Results {
    /// The scenario's name.
    pub scenario: String,
    /// Measured grid points.
    pub rows: Vec<Row>,
    /// Grid points not measured, with the reason.
    pub skipped: Vec<Skipped>,
    /// Whether this was a `--quick` run.
    pub quick: bool,
    /// The scenario as run.
    pub spec: ScenarioSpec,
    /// Effective TCP settings of the endpoints per profile.
    pub endpoints: serde_json::Value,
    /// Every flow reset the nodes logged (WARN lines naming a flow and a
    /// reset), quoted with the log they came from: any fails the run.
    #[serde(default)]
    pub flow_resets: Vec<String>,
}

/// The average of runs in the reference's way: with 3 or more runs, drop
/// the highest and the lowest and average the rest; otherwise plain mean.
pub fn trimmed_mean(samples: &[f64]) -> f64 {
    let mut v = samples.to_vec();
    v.sort_by(f64::total_cmp);
    let kept = if v.len() >= 3 {
        &v[1..v.len() - 1]
    } else {
        &v[..]
    };
    if kept.is_empty() {
        return 0.0;
    }
    kept.iter().sum::<f64>() / kept.len() as f64
}

fn parse_rtt_ms(text: &str) -> Result<u64, String> {
    wanopt_netem::units::parse_duration(text)
        .map(|d| d.as_millis() as u64)
        .map_err(|e| format!("rtt `{text}`: {e}"))
}

/// The middlebox rules of each point: the grid's list, or the `[link]`
/// table's rules (if any) at every point.
fn middleboxes(spec: &ScenarioSpec) -> Result<Vec<Option<String>>, String> {
    match (spec.grid.middlebox.is_empty(), &spec.link.middlebox) {
        (true, rules) => Ok(vec![rules.clone()]),
        (false, None) => Ok(spec.grid.middlebox.iter().cloned().map(Some).collect()),
        (false, Some(_)) => Err(
            "give `middlebox` under [link] (every point) or under [grid] (a list), not both".into(),
        ),
    }
}

/// Runs a scenario; returns the exit code.
pub fn run(lab: &Lab, args: RunArgs) -> anyhow::Result<i32> {
    if args.scenario == crate::waas::SCENARIO {
        return crate::waas::run(lab, &args);
    }
    if !args.tests.is_empty() || args.smb_encrypt.is_some() {
        eprintln!("wanopt lab: --tests and --smb-encrypt are options of the waas-3g scenario");
        return Ok(2);
    }
    let mut spec = match spec::load(&args.scenario, args.quick) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("wanopt lab: {e}");
            return Ok(2);
        }
    };
    if let Some(runs) = args.runs {
        if runs == 0 || runs > 100 {
            eprintln!("wanopt lab: --runs must be between 1 and 100");
            return Ok(2);
        }
        spec.runs = runs;
    }
    // Validate everything before any work starts.
    let bytes = match traffic::parse_size(&spec.workload.bytes) {
        Ok(b) => b,
        Err(e) => {
            eprintln!("wanopt lab: {e}");
            return Ok(2);
        }
    };
    let middleboxes = match middleboxes(&spec) {
        Ok(m) => m,
        Err(e) => {
            eprintln!("wanopt lab: {e}");
            return Ok(2);
        }
    };
    let mut points = Vec::new();
    for rtt in &spec.grid.rtt {
        let rtt_ms = match parse_rtt_ms(rtt) {
            Ok(r) => r,
            Err(e) => {
                eprintln!("wanopt lab: {e}");
                return Ok(2);
            }
        };
        for middlebox in &middleboxes {
            let link = LinkOptions {
                rtt: Some(rtt.clone()),
                middlebox: middlebox.clone(),
                ..spec.link.clone()
            };
            let specs = match link.specs() {
                Ok(s) => s,
                Err(e) => {
                    eprintln!("wanopt lab: {e}");
                    return Ok(2);
                }
            };
            for profile in &spec.grid.profile {
                let profile = match Profile::named(profile) {
                    Ok(p) => p,
                    Err(e) => {
                        eprintln!("wanopt lab: {e}");
                        return Ok(2);
                    }
                };
                for mode in &spec.grid.mode {
                    points.push((rtt_ms, specs.clone(), profile, *mode));
                }
            }
        }
    }
    std::fs::create_dir_all(&args.out)
        .with_context(|| format!("cannot create output directory {}", args.out.display()))?;
    let exe = bringup::private_exe()?;
    let result = run_points(lab, &args, spec, points, bytes, &exe);
    let _ = std::fs::remove_file(&exe);
    result
}

/// Bytes per stream of the unmeasured warm-up transfer of the wanopt mode.
const WARM_UP_BYTES: u64 = 10_000_000;

type Point = (u64, crate::link::LinkSpecs, &'static Profile, Mode);

fn run_points(
    lab: &Lab,
    args: &RunArgs,
    spec: ScenarioSpec,
    points: Vec<Point>,
    bytes: u64,
    exe: &std::path::Path,
) -> anyhow::Result<i32> {
    let wanopt_available = crate::optimize::available(exe);
    eprintln!(
        "scenario {}: {} points x {} runs, {} streams x {} bytes {:?}{}",
        spec.name,
        points.len(),
        spec.runs,
        spec.workload.streams,
        bytes,
        spec.workload.direction,
        if args.quick { " (quick)" } else { "" }
    );
    let total = points.len() * spec.runs;
    let bar = ProgressBar::new(total as u64);
    bar.set_style(
        ProgressStyle::with_template("{elapsed_precise} [{bar:30}] {pos}/{len} {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> "),
    );
    let mut rows = Vec::new();
    let mut skipped = Vec::new();
    let mut flow_resets: Vec<String> = Vec::new();
    let mut endpoints = serde_json::Map::new();
    for (rtt_ms, specs, profile, mode) in points {
        let middlebox = specs.middlebox.clone();
        let label = if middlebox.is_empty() {
            format!("rtt {rtt_ms}ms {} {}", profile.name, mode.name())
        } else {
            format!(
                "rtt {rtt_ms}ms middlebox [{middlebox}] {} {}",
                profile.name,
                mode.name()
            )
        };
        bar.set_message(label.clone());
        if mode == Mode::Wanopt {
            if let Err(reason) = &wanopt_available {
                bar.inc(spec.runs as u64);
                skipped.push(Skipped {
                    rtt_ms,
                    profile: profile.name.into(),
                    mode: mode.name().into(),
                    middlebox: middlebox.clone(),
                    reason: reason.clone(),
                });
                continue;
            }
        }
        let config = UpConfig {
            specs: specs.clone(),
            profile,
            optimize: mode == Mode::Wanopt,
            reduce: spec.node.reduce,
            node_args: Vec::new(),
        };
        if let Err(e) = bringup::up(lab, &config, exe) {
            bar.inc(spec.runs as u64);
            skipped.push(Skipped {
                rtt_ms,
                profile: profile.name.into(),
                mode: mode.name().into(),
                middlebox: middlebox.clone(),
                reason: format!("lab up failed: {e}"),
            });
            continue;
        }
        endpoints.entry(profile.name.to_string()).or_insert_with(|| {
            serde_json::json!({
                "sysctls": Profile::effective(lab, Node::Server),
                "generator_congestion_control": profile.congestion_control.unwrap_or("(namespace default)"),
            })
        });
        let mut samples = Vec::new();
        let mut failures = Vec::new();
        if mode == Mode::Wanopt && spec.node.warm_up {
            bar.set_message(format!("{label} (warm-up)"));
            if let Err(e) = one_run(
                lab,
                exe,
                spec.workload.streams,
                bytes.min(WARM_UP_BYTES),
                spec.workload.direction,
                profile,
            ) {
                failures.push(format!("warm-up: {e}"));
            }
            bar.set_message(label.clone());
        }
        for _ in 0..spec.runs {
            match one_run(
                lab,
                exe,
                spec.workload.streams,
                bytes,
                spec.workload.direction,
                profile,
            ) {
                Ok(r) => samples.push(r),
                Err(e) => failures.push(e.to_string()),
            }
            bar.inc(1);
        }
        if mode == Mode::Wanopt {
            // Before the next point rebuilds the lab (and its logs).
            let logs = crate::optimize::save_logs(
                lab,
                &args.out,
                &format!(
                    "rtt{rtt_ms}ms-{}{}-{}",
                    slug(&middlebox),
                    profile.name,
                    mode.name()
                ),
            );
            let resets = crate::optimize::flow_resets(&logs);
            if let Some(first) = resets.first() {
                let line = format!("{label}: FLOW RESET: the run fails: {first}");
                if bar.is_hidden() {
                    eprintln!("{line}");
                } else {
                    bar.println(line);
                }
            }
            flow_resets.extend(resets);
        }
        if samples.is_empty() {
            skipped.push(Skipped {
                rtt_ms,
                profile: profile.name.into(),
                mode: mode.name().into(),
                middlebox: middlebox.clone(),
                reason: failures.pop().unwrap_or_else(|| "no run finished".into()),
            });
            if bar.is_hidden() {
                eprintln!("[{}/{total}] {label}: every run failed", bar.position());
            }
            continue;
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
                spec.runs
            );
        }
        rows.push(Row {
            rtt_ms,
            profile: profile.name.into(),
            mode: mode.name().into(),
            middlebox: middlebox.clone(),
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
            link_up: specs.up.clone(),
            link_down: specs.down.clone(),
            workload: format!("{} x {}", spec.workload.streams, spec.workload.bytes),
            failed_runs: failures,
        });
        let partial = Results {
            scenario: spec.name.clone(),
            rows: rows.clone(),
            skipped: skipped.clone(),
            quick: args.quick,
            spec: spec.clone(),
            endpoints: serde_json::Value::Object(endpoints.clone()),
            flow_resets: flow_resets.clone(),
        };
        let _ = write_outputs(&partial, &args.out);
    }
    bar.finish_and_clear();
    let _ = lab.destroy();
    let results = Results {
        scenario: spec.name.clone(),
        rows,
        skipped,
        quick: args.quick,
        spec,
        endpoints: serde_json::Value::Object(endpoints),
        flow_resets,
    };
    write_outputs(&results, &args.out)?;
    let table = crate::report::table(&results);
    let _ = std::io::Write::write_all(&mut std::io::stdout().lock(), table.as_bytes());
    eprintln!(
        "wrote {}/results.json, report.md, throughput.svg, throughput.png{}",
        args.out.display(),
        if args.out.join("logs").exists() {
            ", logs/ (node logs per point)"
        } else {
            ""
        }
    );
    if !results.flow_resets.is_empty() {
        eprintln!(
            "wanopt lab: {} FAILED: the nodes reset {} flow(s) (see report.md):",
            results.scenario,
            results.flow_resets.len()
        );
        for line in &results.flow_resets {
            eprintln!("  {line}");
        }
        return Ok(1);
    }
    Ok(0)
}

/// Writes `results.json`, `report.md` and the plots (also after every
/// point, so an interrupted run leaves what it measured).
fn write_outputs(results: &Results, out: &std::path::Path) -> anyhow::Result<()> {
    std::fs::write(
        out.join("results.json"),
        serde_json::to_string_pretty(results)?,
    )?;
    std::fs::write(out.join("report.md"), crate::report::markdown(results))?;
    if let Err(e) = crate::plot::throughput_vs_rtt(results, out) {
        eprintln!("wanopt lab: plot not written: {e}");
    }
    Ok(())
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

fn round2(v: f64) -> f64 {
    (v * 100.0).round() / 100.0
}

/// One transfer with the generator client inside the `client` namespace.
fn one_run(
    lab: &Lab,
    exe: &std::path::Path,
    streams: usize,
    bytes: u64,
    direction: Direction,
    profile: &Profile,
) -> anyhow::Result<TrafficReport> {
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
    anyhow::ensure!(
        out.status.success(),
        "generator failed: {}",
        String::from_utf8_lossy(&out.stderr).trim()
    );
    let report: TrafficReport = serde_json::from_slice(&out.stdout)?;
    std::thread::sleep(Duration::from_millis(200));
    Ok(report)
}

/// `h:mm:ss` since the run started, for progress lines.
pub(crate) fn humantime(elapsed: std::time::Duration) -> String {
    let secs = elapsed.as_secs();
    format!("{}:{:02}:{:02}", secs / 3600, secs / 60 % 60, secs % 60)
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
            middleboxes(&spec),
            Ok(vec![Some(String::new()), Some("strip-wscale".into())])
        );
        let mut both = spec.clone();
        both.link.middlebox = Some("mss 1200".into());
        assert!(middleboxes(&both).is_err_and(|e| e.contains("not both")));
        let mut link_only = both.clone();
        link_only.grid.middlebox.clear();
        assert_eq!(middleboxes(&link_only), Ok(vec![Some("mss 1200".into())]));

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

    #[test]
    fn middlebox_rules_name_files() {
        assert_eq!(slug(""), "");
        assert_eq!(slug("strip-wscale"), "strip-wscale-");
        assert_eq!(slug("port 80 mss 1200; drop"), "port-80-mss-1200-drop-");
        assert_eq!(slug(&"x".repeat(100)).len(), 41);
    }

    #[test]
    fn trimmed_mean_drops_extremes() {
        assert_eq!(trimmed_mean(&[1.0, 100.0, 10.0, 20.0, 30.0]), 20.0);
        assert_eq!(trimmed_mean(&[4.0, 6.0]), 5.0);
        assert_eq!(trimmed_mean(&[]), 0.0);
    }
}
