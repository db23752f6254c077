//! `wanopt probe`: its flags, and what it prints. The probing itself is
//! the `wanopt-path` crate's ([`wanopt_path::probe`]).

use std::io::IsTerminal as _;
use std::net::SocketAddr;
use std::process::ExitCode;

use clap::Args;
use wanopt_path::probe::{ProbeConfig, ProbeFlags, UdpReflector};

use super::outcome::{print, Failure};

/// Arguments of `wanopt probe`.
#[derive(Debug, Args)]
pub struct ProbeArgs {
    /// The reflector to probe (`HOST:PORT`, where `wanopt probe --listen`
    /// runs).
    #[arg(required_unless_present = "listen", conflicts_with = "listen")]
    pub target: Option<String>,
    /// Be the reflector: answer probes on this UDP address
    /// (`0.0.0.0:7009`) until interrupted.
    #[arg(long, value_name = "ADDR")]
    pub listen: Option<SocketAddr>,
    /// Probes to send.
    #[arg(long, default_value_t = 1000, value_name = "N")]
    pub count: u32,
    /// Time between probes (`10ms`).
    #[arg(long, default_value = "10ms", value_name = "TIME")]
    pub interval: String,
    /// UDP payload bytes of each probe and echo (44 to 1472).
    #[arg(long, default_value_t = 200, value_name = "BYTES")]
    pub size: usize,
    /// Packet trains sent each way after the probes, to measure the
    /// bottleneck rate (0: none).
    #[arg(long, default_value_t = 10, value_name = "N")]
    pub trains: u32,
    /// Datagrams in each train (2 to 64); a train should fit the path's
    /// smallest queue, or it measures drops.
    #[arg(long, default_value_t = 16, value_name = "N")]
    pub train_len: u32,
    /// UDP payload bytes of each train datagram (44 to 1472).
    #[arg(long, default_value_t = 1472, value_name = "BYTES")]
    pub train_size: usize,
    /// Print the results as JSON.
    #[arg(long)]
    pub json: bool,
}

/// `wanopt probe`: a reflector with `--listen`, else a probing run (bad
/// flags are usage errors, a run that fails a runtime failure).
pub fn run(args: &ProbeArgs) -> Result<ExitCode, Failure> {
    if let Some(addr) = args.listen {
        listen(addr)?;
        return Ok(ExitCode::SUCCESS);
    }
    let config = ProbeConfig::new(&ProbeFlags {
        target: args.target.as_deref().unwrap_or_default(),
        count: args.count,
        interval: &args.interval,
        size: args.size,
        trains: args.trains,
        train_len: args.train_len,
        train_size: args.train_size,
    })
    .map_err(Failure::usage)?;
    // A run longer than a few seconds says how far it got, on a terminal.
    let terminal = std::io::stderr().is_terminal();
    let report = wanopt_path::probe::probe(&config, &mut |progress| {
        if terminal {
            eprintln!("wanopt probe: {progress}");
        }
    })
    .map_err(Failure::runtime)?;
    if args.json {
        let json = serde_json::to_string_pretty(&report).unwrap_or_default();
        print(&format!("{json}\n"))?;
    } else {
        print(&wanopt_path::probe::text(&report))?;
    }
    Ok(ExitCode::SUCCESS)
}

/// Runs a reflector on `addr` until the process is interrupted.
fn listen(addr: SocketAddr) -> Result<(), Failure> {
    let reflector = UdpReflector::bind(addr).map_err(Failure::runtime)?;
    eprintln!(
        "wanopt probe: answering probes on {}",
        reflector.local_addr().unwrap_or(addr)
    );
    reflector.run().map_err(Failure::runtime)
}
