//! The `wanopt` command line.
//!
//! Exit codes: 0 success; 1 runtime failure (a node stopped on an error, a
//! control API unreachable); 2 bad usage or configuration (flags, config file,
//! keys); 3 `host-check` found a setting that falls short (and `lab run` a
//! content mismatch). Errors are one line on stderr.

mod cli;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use tracing_subscriber::EnvFilter;

use wanopt_node::identity::PrivateKey;

/// wanopt: a software WAN optimizer with its own WAN lab.
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
    Edge(cli::node::EdgeArgs),
    /// Show a node's state (tunnel, peer, RTT, rates, flow counts).
    Status(cli::status::QueryArgs),
    /// Show a node's live flow table.
    Flows(cli::status::QueryArgs),
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
}

/// Exit code of a usage or configuration error.
const EXIT_USAGE: u8 = 2;
/// Exit code of a runtime failure.
const EXIT_FAILURE: u8 = 1;
/// Exit code of `host-check` when a setting falls short.
const EXIT_SHORT: u8 = 3;

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

fn fail(code: u8, error: &anyhow::Error) -> ExitCode {
    eprintln!("wanopt: {}", one_line(error));
    ExitCode::from(code)
}

/// The chain of causes joined on one line, never a backtrace; a cause that
/// an error's own message already quotes is not repeated.
fn one_line(error: &anyhow::Error) -> String {
    let mut line = String::new();
    for cause in error.chain() {
        let cause = cause.to_string();
        if line.contains(&cause) {
            continue;
        }
        if !line.is_empty() {
            line.push_str(": ");
        }
        line.push_str(&cause);
    }
    line.replace('\n', " ")
}

fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_multi_thread()
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

/// Runs a node until it stops; a failure is exit code 1.
fn run_node(
    node: impl std::future::Future<Output = Result<(), wanopt_node::NodeError>>,
) -> ExitCode {
    let result = runtime().and_then(|rt| {
        rt.block_on(async {
            wanopt_node::ignore_hangups();
            node.await
        })
        .map_err(anyhow::Error::from)
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            let usage = matches!(
                e.downcast_ref::<wanopt_node::NodeError>(),
                Some(wanopt_node::NodeError::Usage(_))
            );
            fail(if usage { EXIT_USAGE } else { EXIT_FAILURE }, &e)
        }
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
    let cli = match parse_args() {
        Ok(cli) => cli,
        Err(code) => return code,
    };
    match cli.command {
        Command::Keygen { out } => {
            let key = PrivateKey::generate();
            match key.write_new(&out) {
                Ok(()) => {
                    println!("{}", key.public_key());
                    ExitCode::SUCCESS
                }
                Err(e) => fail(EXIT_USAGE, &e.into()),
            }
        }
        Command::Pubkey { file } => match PrivateKey::read(&file) {
            Ok(key) => {
                println!("{}", key.public_key());
                ExitCode::SUCCESS
            }
            Err(e) => fail(EXIT_USAGE, &e.into()),
        },
        Command::Core(args) => {
            init_logging("info");
            raise_fd_limit();
            let config = match cli::node::core_config(&args) {
                Ok(c) => c,
                Err(e) => return fail(EXIT_USAGE, &e),
            };
            run_node(wanopt_node::core::run(
                config,
                wanopt_node::shutdown_signal(),
            ))
        }
        Command::Edge(args) => {
            init_logging("info");
            if args.print_firewall {
                return match cli::node::firewall_rules(&args) {
                    Ok(rules) => {
                        print!("{rules}");
                        ExitCode::SUCCESS
                    }
                    Err(e) => fail(EXIT_USAGE, &e),
                };
            }
            raise_fd_limit();
            let config = match cli::node::edge_config(&args) {
                Ok(c) => c,
                Err(e) => return fail(EXIT_USAGE, &e),
            };
            run_node(wanopt_node::edge::run(
                config,
                wanopt_node::shutdown_signal(),
            ))
        }
        Command::Status(args) => match cli::status::status(&args) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => fail(EXIT_FAILURE, &e),
        },
        Command::Flows(args) => match cli::status::flows(&args) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => fail(EXIT_FAILURE, &e),
        },
        Command::Cache(cmd) => match cli::cache::run(&cmd) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => fail(EXIT_FAILURE, &e),
        },
        Command::Window(args) => match cli::path::window(&args) {
            Ok(text) => {
                print!("{text}");
                ExitCode::SUCCESS
            }
            Err(e) => fail(EXIT_USAGE, &e),
        },
        Command::HostCheck(args) => {
            let need = match cli::path::host_need(&args) {
                Ok(need) => need,
                Err(e) => return fail(EXIT_USAGE, &e),
            };
            let (need, direction) = need.map_or((None, None), |(n, d)| (Some(n), d));
            match cli::path::host_check(need.as_ref(), direction.as_deref()) {
                Ok((text, short)) => {
                    print!("{text}");
                    if short {
                        ExitCode::from(EXIT_SHORT)
                    } else {
                        ExitCode::SUCCESS
                    }
                }
                Err(e) => fail(EXIT_FAILURE, &e),
            }
        }
        Command::Probe(args) => {
            if let Some(addr) = args.listen {
                return match cli::probe::listen(addr) {
                    Ok(()) => ExitCode::SUCCESS,
                    Err(e) => fail(EXIT_FAILURE, &e),
                };
            }
            let (addr, interval) = match cli::probe::parse(&args) {
                Ok(x) => x,
                Err(e) => return fail(EXIT_USAGE, &e),
            };
            match cli::probe::probe(&args, addr, interval) {
                Ok(report) => {
                    if args.json {
                        println!(
                            "{}",
                            serde_json::to_string_pretty(&report).unwrap_or_default()
                        );
                    } else {
                        print!("{}", cli::probe::text(&report));
                    }
                    ExitCode::SUCCESS
                }
                Err(e) => fail(EXIT_FAILURE, &e),
            }
        }
        Command::Lab(cmd) => {
            init_logging("warn");
            match wanopt_lab::cli::run(cmd) {
                Ok(code) => ExitCode::from(u8::try_from(code).unwrap_or(EXIT_FAILURE)),
                Err(e) => fail(EXIT_FAILURE, &e),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{clap_line, one_line};

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

    /// An error whose message quotes its source, as `thiserror`'s
    /// `#[error("...: {source}")]` does.
    #[derive(Debug)]
    struct Quoting(std::io::Error);

    impl std::fmt::Display for Quoting {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            write!(f, "cannot read key file k: {}", self.0)
        }
    }

    impl std::error::Error for Quoting {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            Some(&self.0)
        }
    }

    #[test]
    fn causes_are_joined_once_on_one_line() {
        let io = || std::io::Error::other("disk\non fire");
        let quoted = anyhow::Error::new(Quoting(io()));
        assert_eq!(one_line(&quoted), "cannot read key file k: disk on fire");
        let context = anyhow::Error::new(io()).context("starting the core");
        assert_eq!(one_line(&context), "starting the core: disk on fire");
    }
}
