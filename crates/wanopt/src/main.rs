//! The `wanopt` command line.

use clap::{Parser, Subcommand};

/// wanopt: a software WAN optimizer with its own WAN lab.
#[derive(Debug, Parser)]
#[command(name = "wanopt", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// The WAN lab: namespaces, emulator, scenarios.
    #[command(subcommand)]
    Lab(wanopt_lab::cli::LabCommand),
}

fn main() {
    let cli = Cli::parse();
    let code = match cli.command {
        Command::Lab(cmd) => match wanopt_lab::cli::run(cmd) {
            Ok(code) => code,
            Err(e) => {
                eprintln!("wanopt: {e:#}");
                1
            }
        },
    };
    std::process::exit(code);
}
