//! Scenarios: grids of link settings, profiles and modes, run back to back.

use clap::Args;

use crate::topology::Lab;

/// Options of `lab run`.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// `tcp-opt` or a path to a scenario TOML file.
    pub scenario: String,
    /// Output directory.
    #[arg(long, default_value = "lab-results")]
    pub out: std::path::PathBuf,
    /// Runs per grid point (default: the scenario's).
    #[arg(long)]
    pub runs: Option<usize>,
    /// A reduced grid for a fast look.
    #[arg(long)]
    pub quick: bool,
}

/// Runs a scenario; returns the exit code.
pub fn run(lab: &Lab, args: RunArgs) -> anyhow::Result<i32> {
    let _ = (lab, args);
    anyhow::bail!("lab run: not built yet")
}
