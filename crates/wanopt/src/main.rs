//! The `wanopt` command line.
//!
//! Exit codes: 0 success; 1 runtime failure (a node stopped on an error, a
//! control API unreachable); 2 bad usage or configuration (flags, config file,
//! keys); 3 `host-check` found a setting that falls short (and `lab run` a
//! content mismatch). Errors are one line on stderr.

mod cli;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{CommandFactory, Parser, Subcommand};
use tracing_subscriber::EnvFilter;

use wanopt_node::identity::PrivateKey;

use cli::outcome::{print, Failure, EXIT_FAILURE, EXIT_USAGE};

/// A software WAN optimizer with its own WAN lab.
#[derive(Debug, Parser)]
#[command(name = "wanopt", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Write a new private key (mode 0600) and print its public key.
    Keygen {
        /// Where to write the key; an existing file is never overwritten.
        #[arg(long, value_name = "FILE")]
        out: PathBuf,
    },
    /// Print the public key of a private key file.
    Pubkey {
        /// The private key file.
        file: PathBuf,
    },
    /// Run a core node: accept tunnels, connect to allowed destinations.
    Core(cli::node::CoreArgs),
    /// Run an edge node: intercept client TCP and carry it through the core.
    Edge(Box<cli::node::EdgeArgs>),
    /// Run a node as its config file describes it: accept tunnels (`listen`),
    /// dial the `[[peer]]`s that have an endpoint, or both.
    Run(cli::run::RunArgs),
    /// Ask a running node to re-read its config file (as SIGHUP does):
    /// peers, routes and allowlists change; live flows stay.
    Reload(cli::run::ReloadArgs),
    /// Show a node's state (tunnel, peer, RTT, rates, flow counts).
    Status(cli::status::QueryArgs),
    /// Show a node's live flow table (`--why`: the limit that binds each).
    Flows(cli::flows::FlowsArgs),
    /// Show everything about one live flow: why it runs at its rate.
    Flow(cli::flows::FlowArgs),
    /// A node's persistent byte cache: `stats` or `clear`.
    #[command(subcommand)]
    Cache(cli::cache::CacheCommand),
    /// The WAN lab: namespaces, emulator, scenarios.
    #[command(subcommand)]
    Lab(wanopt_lab::cli::LabCommand),
    /// The TCP window and buffers a path needs (rate x RTT), and what
    /// 64 KB windows, slow start and loss cost on it.
    Window(cli::path::PathArgs),
    /// This host's TCP settings (window scaling, SACK, buffers, congestion
    /// control), checked against a path when given; exit code 3 when
    /// something falls short.
    HostCheck(cli::path::HostCheckArgs),
    /// Probe a path with numbered UDP datagrams: round-trip time, and loss,
    /// reordering and duplication in each direction (`--listen` at the far
    /// end answers them).
    Probe(cli::probe::ProbeArgs),
    /// Print the shell completion script of SHELL, e.g. `wanopt
    /// completions bash > /etc/bash_completion.d/wanopt`.
    Completions(cli::docs::CompletionsArgs),
    /// Print the man page wanopt(1), or write every subcommand's page to
    /// a directory with --dir.
    Man(cli::docs::ManArgs),
}

fn init_logging(default: &str) {
    let filter = EnvFilter::try_from_env("WANOPT_LOG")
        .or_else(|_| EnvFilter::try_from_default_env())
        .unwrap_or_else(|_| EnvFilter::new(default));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_target(false)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .try_init();
}

/// A node's runtime: `threads` workers.
fn node_runtime(threads: usize) -> anyhow::Result<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_multi_thread()
        .worker_threads(threads)
        .enable_all()
        .build()?)
}

/// Raises the open-file limit (before the configuration, whose default
/// flow limits follow it).
fn raise_fd_limit() {
    if let Some((soft, hard)) = wanopt_node::raise_fd_limit() {
        tracing::debug!("open file limit raised from {soft} to {hard}");
    }
}

/// Runs a node until it stops; a failure is exit code 1 (2 when the
/// node found its configuration wrong). `reload` reads the configuration
/// again on SIGHUP and `wanopt reload`.
fn run_node(
    config: wanopt_node::node::NodeConfig,
    reload: wanopt_node::node::Reload,
    threads: usize,
) -> Result<ExitCode, Failure> {
    tracing::debug!("runtime of {threads} worker threads");
    let rt = node_runtime(threads).map_err(Failure::runtime)?;
    let result = rt.block_on(wanopt_node::node::run(
        config,
        Some(reload),
        wanopt_node::shutdown_signal(),
    ));
    match result {
        Ok(()) => Ok(ExitCode::SUCCESS),
        Err(e @ wanopt_node::NodeError::Usage(_)) => Err(Failure::usage(e)),
        Err(e) => Err(Failure::runtime(e)),
    }
}

/// A command-line error as one line (`wanopt: ...`), exit code 2; help and
/// version go out as clap prints them.
fn parse_args() -> Result<Cli, ExitCode> {
    use clap::error::ErrorKind;
    let error = match Cli::try_parse() {
        Ok(cli) => return Ok(cli),
        Err(e) => e,
    };
    if matches!(
        error.kind(),
        ErrorKind::DisplayHelp
            | ErrorKind::DisplayVersion
            | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
    ) {
        error.exit();
    }
    eprintln!("wanopt: {}", clap_line(&error.to_string()));
    Err(ExitCode::from(EXIT_USAGE))
}

/// clap's error text on one line: its message and details, without the
/// usage block and the `--help` hint.
fn clap_line(text: &str) -> String {
    let mut parts: Vec<&str> = Vec::new();
    for line in text.lines() {
        let line = line.trim();
        if line.starts_with("Usage:") || line.starts_with("For more information") {
            break;
        }
        if !line.is_empty() {
            parts.push(line.strip_prefix("error: ").unwrap_or(line));
        }
    }
    let mut joined = String::new();
    for part in parts {
        if !joined.is_empty() {
            joined.push_str(if part.starts_with("tip:") { "; " } else { " " });
        }
        joined.push_str(part);
    }
    joined.push_str(" (see --help)");
    joined
}

fn main() -> ExitCode {
    if std::env::args()
        .nth(1)
        .is_some_and(|c| matches!(c.as_str(), "edge" | "core" | "run"))
    {
        wanopt_node::hold_hangups();
    }
    let cli = match parse_args() {
        Ok(cli) => cli,
        Err(code) => return code,
    };
    run(cli.command).unwrap_or_else(Failure::exit)
}

/// Runs a command: its exit code, or how it failed.
fn run(command: Command) -> Result<ExitCode, Failure> {
    match command {
        Command::Keygen { out } => {
            let key = PrivateKey::generate();
            key.write_new(&out).map_err(Failure::usage)?;
            print(&format!("{}\n", key.public_key()))?;
        }
        Command::Pubkey { file } => {
            let key = PrivateKey::read(&file).map_err(Failure::usage)?;
            print(&format!("{}\n", key.public_key()))?;
        }
        Command::Core(args) => {
            init_logging("info");
            raise_fd_limit();
            let config = cli::node::core_config(&args).map_err(Failure::usage)?;
            let threads = cli::node::threads(&args.common).map_err(Failure::usage)?;
            let node = wanopt_node::node::NodeConfig {
                core: Some(config),
                edge: None,
                hash: cli::run::config_hash(&args, args.common.config.as_deref()),
            };
            let reload = cli::run::reloader(move || {
                Ok(wanopt_node::node::NodeConfig {
                    core: Some(cli::node::core_config(&args)?),
                    edge: None,
                    hash: cli::run::config_hash(&args, args.common.config.as_deref()),
                })
            });
            return run_node(node, reload, threads);
        }
        Command::Edge(args) => {
            init_logging("info");
            if args.print_firewall {
                let rules = cli::node::firewall_rules(&args).map_err(Failure::usage)?;
                print(&rules)?;
                return Ok(ExitCode::SUCCESS);
            }
            raise_fd_limit();
            let config = cli::node::edge_config(&args).map_err(Failure::usage)?;
            let threads = cli::node::threads(&args.common).map_err(Failure::usage)?;
            let node = wanopt_node::node::NodeConfig {
                core: None,
                edge: Some(config),
                hash: cli::run::config_hash(&args, args.common.config.as_deref()),
            };
            let reload = cli::run::reloader(move || {
                Ok(wanopt_node::node::NodeConfig {
                    core: None,
                    edge: Some(cli::node::edge_config(&args)?),
                    hash: cli::run::config_hash(&args, args.common.config.as_deref()),
                })
            });
            return run_node(node, reload, threads);
        }
        Command::Run(args) => {
            init_logging("info");
            raise_fd_limit();
            let node = cli::run::run_config(&args).map_err(Failure::usage)?;
            let threads = cli::run::run_threads(&args).map_err(Failure::usage)?;
            let reload = cli::run::reloader(move || cli::run::run_config(&args));
            return run_node(node, reload, threads);
        }
        Command::Reload(args) => cli::run::reload(&args).map_err(Failure::runtime)?,
        Command::Status(args) => cli::status::status(&args).map_err(Failure::runtime)?,
        Command::Flows(args) => cli::flows::flows(&args).map_err(Failure::runtime)?,
        Command::Flow(args) => cli::flows::flow(&args).map_err(Failure::runtime)?,
        Command::Cache(cmd) => cli::cache::run(&cmd).map_err(Failure::runtime)?,
        Command::Window(args) => return cli::path::window(&args),
        Command::HostCheck(args) => return cli::path::host_check(&args),
        Command::Probe(args) => return cli::probe::run(&args),
        Command::Completions(args) => cli::docs::completions(&args, Cli::command())?,
        Command::Man(args) => cli::docs::man(&args, Cli::command())?,
        Command::Lab(cmd) => {
            init_logging("warn");
            let code = wanopt_lab::cli::run(cmd).map_err(Failure::runtime)?;
            return Ok(ExitCode::from(u8::try_from(code).unwrap_or(EXIT_FAILURE)));
        }
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::clap_line;

    #[test]
    fn clap_errors_read_on_one_line() {
        let text = "error: the following required arguments were not provided:\n  <TARGET>\n\nUsage: wanopt probe <TARGET>\n\nFor more information, try '--help'.\n";
        assert_eq!(
            clap_line(text),
            "the following required arguments were not provided: <TARGET> (see --help)"
        );
        let text = "error: unrecognized subcommand 'frob'\n\n  tip: a similar subcommand exists: 'probe'\n\nUsage: wanopt <COMMAND>\n";
        assert_eq!(
            clap_line(text),
            "unrecognized subcommand 'frob'; tip: a similar subcommand exists: 'probe' (see --help)"
        );
    }
}
