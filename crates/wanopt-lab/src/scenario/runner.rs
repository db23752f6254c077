//! The one runner every scenario goes through.
//!
//! A scenario is a workload ([`Scenario`]: the grid of `tcp-opt` and the
//! TOML files, or `waas-3g`) with its own typed results. The runner does
//! what all of them share: the output directory, a private copy of the
//! executable for the lab's processes, the header line and the progress
//! bar, tearing the lab down, the final `results.json`, `report.md` and
//! plots, the summary on stdout, and the verdict (flow resets, a stop).

use std::path::Path;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressStyle};
use serde::Serialize;

use super::error::RunError;
use crate::bringup;
use crate::topology::Lab;

/// What a scenario tells the runner before it starts.
#[derive(Debug, Clone)]
pub struct Plan {
    /// The line printed before the work starts (`scenario NAME: ...`).
    pub header: String,
    /// Steps the progress bar counts (transfers or runs).
    pub steps: u64,
}

/// What a scenario's run leaves.
#[derive(Debug, Clone)]
pub struct Finished<R> {
    /// The results (of the steps that ran, if it stopped).
    pub results: R,
    /// Why the run stopped before its end (a byte arrived wrong), if it did.
    pub stopped: Option<String>,
}

/// What a lab run of a scenario needs.
pub struct Env<'a> {
    /// The lab.
    pub lab: &'a Lab,
    /// The executable lab processes run.
    pub exe: &'a Path,
    /// The output directory (exists).
    pub out: &'a Path,
    /// The progress bar (hidden without a terminal).
    pub bar: ProgressBar,
}

impl Env<'_> {
    /// A line above the progress bar, or on stderr when there is no bar to
    /// print above (no terminal: the bar is hidden and would drop it).
    pub fn say(&self, line: String) {
        say(&self.bar, line);
    }

    /// The flow resets the lab's edge and core have logged so far: when
    /// there are any, their logs are kept as `logs/{label}-edge.log` and
    /// `-core.log` in the output directory and the first is said (a run
    /// with any fails).
    pub fn flow_resets(&self, label: &str) -> Vec<String> {
        let state = self.lab.state_dir();
        let logs = [state.join("wanopt-edge.log"), state.join("wanopt-core.log")];
        let resets = crate::optimize::flow_resets(&logs);
        if let Some(first) = resets.first() {
            crate::optimize::save_logs(self.lab, self.out, label);
            self.say(format!("{label}: FLOW RESET: the run fails: {first}"));
        }
        resets
    }
}

/// A workload the runner runs.
pub trait Scenario {
    /// What `results.json` holds.
    type Results: Serialize;

    /// The scenario's name, as in `results.json`.
    fn name(&self) -> &str;

    /// Prepares the run with `exe` as the lab's executable.
    fn plan(&mut self, exe: &Path) -> Plan;

    /// Runs the workload on the lab, writing the outputs as it goes
    /// ([`Scenario::write_outputs`]), so an interrupted run leaves what it
    /// measured.
    fn run(&mut self, env: &Env<'_>) -> Finished<Self::Results>;

    /// Writes `results.json`, `report.md` and the plots to `out`.
    fn write_outputs(results: &Self::Results, out: &Path) -> Result<(), RunError>;

    /// The text printed on stdout at the end.
    fn summary(results: &Self::Results) -> String;

    /// What was written to `out`, for the last line on stderr.
    fn written(results: &Self::Results, out: &Path) -> String;

    /// The flow resets the nodes logged: any fails the run.
    fn flow_resets(results: &Self::Results) -> &[String];
}

/// How a scenario's run ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Every step ran and no flow was reset.
    Passed,
    /// The run failed: flows reset, or it stopped early.
    Failed {
        /// The scenario's name.
        scenario: String,
        /// The flow resets the nodes logged.
        flow_resets: Vec<String>,
        /// Why it stopped early, if it did.
        stopped: Option<String>,
    },
}

impl Verdict {
    /// Whether the run passed.
    pub fn passed(&self) -> bool {
        *self == Verdict::Passed
    }
}

/// A scenario's results and verdict.
#[derive(Debug, Clone)]
pub struct Report<R> {
    /// What `results.json` holds.
    pub results: R,
    /// How the run ended.
    pub verdict: Verdict,
}

/// Runs `scenario` on `lab`, writing to `out` (created if needed), with a
/// private copy of this executable as the lab's processes.
pub fn run<S: Scenario>(
    lab: &Lab,
    scenario: &mut S,
    out: &Path,
) -> Result<Report<S::Results>, RunError> {
    std::fs::create_dir_all(out).map_err(|source| RunError::OutputDir {
        path: out.to_path_buf(),
        source,
    })?;
    let exe = bringup::private_exe().map_err(RunError::Executable)?;
    let result = run_with(lab, scenario, out, &exe);
    let _ = std::fs::remove_file(&exe);
    result
}

/// Runs `scenario` with `exe` as the lab's executable (it must have the
/// `wanopt lab` subcommands, and the nodes for the optimized paths);
/// `out` must exist.
pub fn run_with<S: Scenario>(
    lab: &Lab,
    scenario: &mut S,
    out: &Path,
    exe: &Path,
) -> Result<Report<S::Results>, RunError> {
    let plan = scenario.plan(exe);
    eprintln!("{}", plan.header);
    let env = Env {
        lab,
        exe,
        out,
        bar: progress_bar(plan.steps),
    };
    let finished = scenario.run(&env);
    env.bar.finish_and_clear();
    let _ = lab.destroy();
    S::write_outputs(&finished.results, out)?;
    let summary = S::summary(&finished.results);
    // A closed pipe (`| head`) is not an error.
    let _ = std::io::Write::write_all(&mut std::io::stdout().lock(), summary.as_bytes());
    eprintln!("{}", S::written(&finished.results, out));
    let flow_resets = S::flow_resets(&finished.results).to_vec();
    let verdict = if flow_resets.is_empty() && finished.stopped.is_none() {
        Verdict::Passed
    } else {
        Verdict::Failed {
            scenario: scenario.name().to_string(),
            flow_resets,
            stopped: finished.stopped,
        }
    };
    Ok(Report {
        results: finished.results,
        verdict,
    })
}

/// The progress bar of a run of `steps` steps.
fn progress_bar(steps: u64) -> ProgressBar {
    let bar = ProgressBar::new(steps);
    bar.set_style(
        ProgressStyle::with_template("{elapsed_precise} [{bar:30}] {pos}/{len} {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> "),
    );
    bar
}

/// A line above `bar`, or on stderr when there is no bar to print above
/// (no terminal: the bar is hidden and would drop it).
pub fn say(bar: &ProgressBar, line: String) {
    if bar.is_hidden() {
        eprintln!("{line}");
    } else {
        bar.println(line);
    }
}

/// `h:mm:ss` since the run started, for progress lines.
pub fn humantime(elapsed: Duration) -> String {
    let secs = elapsed.as_secs();
    format!("{}:{:02}:{:02}", secs / 3600, secs / 60 % 60, secs % 60)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn elapsed_time_reads_as_a_clock() {
        assert_eq!(humantime(Duration::from_secs(3723)), "1:02:03");
    }
}
