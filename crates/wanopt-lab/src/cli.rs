//! `wanopt lab ...` command line.

use clap::Subcommand;

/// The `wanopt lab` subcommands.
#[derive(Debug, Subcommand)]
pub enum LabCommand {
    /// Remove every namespace and process of the lab (idempotent).
    Down,
}

/// Runs one lab subcommand; returns the process exit code.
pub fn run(command: LabCommand) -> anyhow::Result<i32> {
    match command {
        LabCommand::Down => anyhow::bail!("lab down: not built yet"),
    }
}
