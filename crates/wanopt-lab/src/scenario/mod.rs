//! Scenarios: workloads run back to back on the same machine, direct and
//! through wanopt, written as `results.json`, `report.md` and plots.
//!
//! The built-in scenarios are declared in one table ([`registry`]: name,
//! summary, their own options, how each is built); a name that is not in
//! it is a scenario TOML file, a grid of link settings, endpoint profiles
//! and paths ([`crate::grid`]). Every scenario goes through the one
//! [`runner`] as a [`Scenario`].

mod args;
mod error;
pub mod registry;
pub mod runner;

pub use args::{RunArgs, MAX_RUNS};
pub use error::RunError;
pub use runner::{Report, Scenario, Verdict};

use crate::grid::{spec, Grid};
use crate::topology::Lab;

/// Runs the scenario `args` names through the runner: a built-in one
/// ([`registry::SCENARIOS`]) or a TOML file (the grid), its options
/// checked first.
pub fn run(lab: &Lab, args: &RunArgs) -> Result<Verdict, RunError> {
    registry::check_options(args)?;
    match registry::find(&args.scenario) {
        Some(entry) => (entry.run)(lab, args),
        None if !args.scenario.ends_with(".toml")
            && !std::path::Path::new(&args.scenario).exists() =>
        {
            Err(spec::SpecError::Unknown {
                name: args.scenario.clone(),
                known: registry::names(),
            }
            .into())
        }
        None => {
            let mut scenario = Grid::from_args(args)?;
            runner::run(lab, &mut scenario, &args.out).map(|r| r.verdict)
        }
    }
}
