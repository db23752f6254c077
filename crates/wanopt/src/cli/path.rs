//! `wanopt window` and `wanopt host-check`: their flags, and what they
//! print. The arithmetic and the host's settings are the `wanopt-path`
//! crate's ([`wanopt_path::window`](mod@wanopt_path::window), [`wanopt_path::host`]).

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;
use wanopt_path::{PathFlags, DEFAULT_MSS};

use super::outcome::{print, Failure, EXIT_SHORT};

/// A path: its bottleneck rate, round-trip time, segment size and loss.
#[derive(Debug, Args)]
pub struct PathArgs {
    /// The path's bottleneck rate (`250mbit`, `2mbit`, `1gbit`).
    #[arg(long, value_name = "RATE", required_unless_present = "probe")]
    pub rate: Option<String>,
    /// The path's round-trip time (`150ms`).
    #[arg(long, value_name = "TIME", required_unless_present = "probe")]
    pub rtt: Option<String>,
    /// Random packet loss on the path (`0.5%`): adds what a loss-based TCP
    /// can reach there.
    #[arg(long, value_name = "PERCENT")]
    pub loss: Option<String>,
    /// TCP payload bytes per segment (1448: a 1500-byte MTU with timestamps).
    #[arg(long, default_value_t = 1448, value_name = "BYTES")]
    pub mss: u32,
    /// A receive window the hosts are held to (`256KiB`, `65535`): adds
    /// what it allows on the path, window / RTT.
    #[arg(long, value_name = "SIZE", value_parser = super::size::parse_size)]
    pub window: Option<u64>,
    /// The path as `wanopt probe --json` measured it (`-`: standard
    /// input): each direction with a rate, at the probes' smallest RTT
    /// and its own loss; --rate, --rtt and --loss override the probe's values.
    #[arg(long, value_name = "FILE")]
    pub probe: Option<PathBuf>,
}

/// Arguments of `wanopt host-check`.
#[derive(Debug, Args)]
pub struct HostCheckArgs {
    /// The path to check the buffers against (`--rate` and `--rtt`
    /// together); without it only the switches are checked.
    #[arg(long, value_name = "RATE")]
    pub rate: Option<String>,
    /// The path's round-trip time (`150ms`).
    #[arg(long, value_name = "TIME")]
    pub rtt: Option<String>,
    /// Random packet loss on the path (`0.5%`): weighs the congestion
    /// control.
    #[arg(long, value_name = "PERCENT")]
    pub loss: Option<String>,
    /// The path as `wanopt probe --json` measured it (`-`: standard
    /// input): checked against the direction that needs the larger window;
    /// --rate, --rtt and --loss override the probe's values.
    #[arg(long, value_name = "FILE")]
    pub probe: Option<PathBuf>,
}

impl PathArgs {
    fn flags(&self) -> PathFlags<'_> {
        PathFlags {
            rate: self.rate.as_deref(),
            rtt: self.rtt.as_deref(),
            loss: self.loss.as_deref(),
            mss: self.mss,
            probe: self.probe.as_deref(),
            window: self.window,
        }
    }
}

impl HostCheckArgs {
    fn flags(&self) -> PathFlags<'_> {
        PathFlags {
            rate: self.rate.as_deref(),
            rtt: self.rtt.as_deref(),
            loss: self.loss.as_deref(),
            mss: DEFAULT_MSS,
            probe: self.probe.as_deref(),
            window: None,
        }
    }
}

/// `wanopt window`: a bad path is a usage error.
pub fn window(args: &PathArgs) -> Result<ExitCode, Failure> {
    let text = wanopt_path::window(&args.flags()).map_err(Failure::usage)?;
    print(&text)?;
    Ok(ExitCode::SUCCESS)
}

/// `wanopt host-check`: a bad path is a usage error, unreadable settings
/// a runtime failure, a setting that falls short exit code 3.
pub fn host_check(args: &HostCheckArgs) -> Result<ExitCode, Failure> {
    let need = wanopt_path::host_need(&args.flags()).map_err(Failure::usage)?;
    let (need, direction) = need.map_or((None, None), |(n, d)| (Some(n), d));
    let report = wanopt_path::host_check(need, direction).map_err(Failure::runtime)?;
    print(&report.to_string())?;
    Ok(if report.short() {
        ExitCode::from(EXIT_SHORT)
    } else {
        ExitCode::SUCCESS
    })
}
