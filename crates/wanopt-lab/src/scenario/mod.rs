//! Scenarios: workloads run back to back on the same machine, direct and
//! through wanopt, written as `results.json`, `report.md` and plots.
//!
//! Every scenario goes through the one [`runner`] as a [`Scenario`]:
//! [`grid::Grid`] for `tcp-opt` and scenario TOML files (grids of link
//! settings, endpoint profiles and paths, [`spec`]), and
//! [`crate::waas::Waas3g`] for `waas-3g`, [`crate::lossy::Lossy`] for
//! `lossy`, [`crate::realtime::Realtime`] for `realtime` and
//! [`crate::multisite::SitesScenario`] for `sites` and
//! [`crate::cellular::Cellular`] for `cellular`.

mod args;
mod error;
pub mod grid;
pub mod results;
pub mod runner;
pub mod spec;

pub use args::{RunArgs, MAX_RUNS};
pub use error::RunError;
pub use results::{trimmed_mean, Results, Row, Skipped};
pub use runner::{Report, Scenario, Verdict};

use crate::topology::Lab;

/// Runs the scenario `args` names through the runner.
pub fn run(lab: &Lab, args: &RunArgs) -> Result<Verdict, RunError> {
    if args.smoke && args.scenario != crate::realtime::SCENARIO {
        return Err(RunError::SmokeOption);
    }
    if args.traces.is_some() && args.scenario != crate::cellular::SCENARIO {
        return Err(RunError::TracesOption);
    }
    if args.scenario == crate::cellular::SCENARIO {
        if !args.tests.is_empty() || args.smb_encrypt.is_some() {
            return Err(RunError::WaasOptions);
        }
        let runs = args.runs()?.unwrap_or(1);
        let mut scenario =
            crate::cellular::Cellular::new(args.quick, args.traces.as_deref(), &args.out, runs)?;
        return runner::run(lab, &mut scenario, &args.out).map(|r| r.verdict);
    }
    if args.scenario == crate::realtime::SCENARIO {
        if !args.tests.is_empty() || args.smb_encrypt.is_some() {
            return Err(RunError::WaasOptions);
        }
        if args.runs.is_some() {
            return Err(RunError::RealtimeRuns);
        }
        use crate::realtime::matrix::Size;
        let size = match (args.smoke, args.quick) {
            (true, _) => Size::Smoke,
            (false, true) => Size::Quick,
            (false, false) => Size::Full,
        };
        let mut scenario = crate::realtime::Realtime::new(size);
        return runner::run(lab, &mut scenario, &args.out).map(|r| r.verdict);
    }
    if args.scenario == crate::waas::SCENARIO {
        let mut scenario = crate::waas::Waas3g::from_args(args)?;
        return runner::run(lab, &mut scenario, &args.out).map(|r| r.verdict);
    }
    if args.scenario == crate::lossy::SCENARIO {
        if !args.tests.is_empty() || args.smb_encrypt.is_some() {
            return Err(RunError::WaasOptions);
        }
        if args.runs.is_some() {
            return Err(RunError::LossyRuns);
        }
        let mut scenario = crate::lossy::Lossy::new(args.quick);
        return runner::run(lab, &mut scenario, &args.out).map(|r| r.verdict);
    }
    if args.scenario == crate::multisite::SCENARIO {
        if !args.tests.is_empty() || args.smb_encrypt.is_some() {
            return Err(RunError::WaasOptions);
        }
        if args.runs.is_some() {
            return Err(RunError::SitesRuns);
        }
        let mut scenario = crate::multisite::SitesScenario::new(args.quick);
        return runner::run(lab, &mut scenario, &args.out).map(|r| r.verdict);
    }
    let mut scenario = grid::Grid::from_args(args)?;
    runner::run(lab, &mut scenario, &args.out).map(|r| r.verdict)
}
