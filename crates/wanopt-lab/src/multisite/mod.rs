//! The `sites` scenario: several branch sites at once
//! (`lab up --sites N`), each downloading from the one server over its
//! own emulated link, direct with kernel BBR at both ends (the baseline)
//! and through wanopt (one edge per site, one core for all).
//!
//! - **Cells**: 1 and 3 sites (and 10 in a full run), each direct-bbr
//!   then wanopt, on a fresh lab. Every site's link is the same
//!   ([`Plan::link`]: 20 Mbit/s, RTT 40 ms, a 1 BDP queue).
//! - **Workload**: every site's client downloads the same byte count
//!   (the link's rate for [`Plan::seconds`]) from the generator server at
//!   once, one stream each; payloads are pseudo-random, data reduction is
//!   off.
//! - **Figures** ([`Results`]): each site's goodput against its link's
//!   rate, and the core's CPU seconds (user + system, `/proc/PID/stat`
//!   of the `wanopt core` process, read before the first client starts
//!   and after the last one ends) per GB of payload the sites received:
//!   what one more tunnel costs the core.
//! - **Outputs** ([`report`]): `results.json`, `report.md`.

pub mod report;
pub mod run;

use serde::{Deserialize, Serialize};

use crate::link::LinkOptions;
use crate::sites::Sites;

pub use run::SitesScenario;

/// The scenario's name.
pub const SCENARIO: &str = "sites";

/// Every site's link rate, Mbit/s (IP bytes).
pub const LINK_MBIT: u32 = 20;

/// Every site's link round trip, ms.
pub const RTT_MS: u32 = 40;

/// How a cell's sites reach the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mode {
    /// Routed, kernel BBR at the client and the server.
    DirectBbr,
    /// Through each site's wanopt edge and the one core.
    Wanopt,
}

impl Mode {
    /// The mode's name in results and reports.
    pub fn name(self) -> &'static str {
        match self {
            Mode::DirectBbr => "direct-bbr",
            Mode::Wanopt => "wanopt",
        }
    }
}

/// One lab of the run: how many sites, which way.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cell {
    /// The sites, all downloading at once.
    pub sites: Sites,
    /// Direct or through wanopt.
    pub mode: Mode,
}

/// What a run measures.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    /// `--quick`: 1 and 3 sites, 8 s transfers.
    pub quick: bool,
    /// Seconds each site's download takes at its link's rate.
    pub seconds: u32,
    /// The cells, in order.
    pub cells: Vec<Cell>,
}

impl Plan {
    /// The plan of a full run (1, 3 and 10 sites, 20 s transfers) or of
    /// `--quick` (1 and 3 sites, 8 s).
    pub fn new(quick: bool) -> Plan {
        let counts: &[u8] = if quick { &[1, 3] } else { &[1, 3, 10] };
        let cells = counts
            .iter()
            .filter_map(|&n| Sites::new(n))
            .flat_map(|sites| [Mode::DirectBbr, Mode::Wanopt].map(|mode| Cell { sites, mode }))
            .collect();
        Plan {
            quick,
            seconds: if quick { 8 } else { 20 },
            cells,
        }
    }

    /// Every site's link options.
    pub fn link() -> LinkOptions {
        LinkOptions {
            rtt: Some(format!("{RTT_MS}ms")),
            rate: Some(format!("{LINK_MBIT}mbit")),
            queue: Some("1bdp".into()),
            ..LinkOptions::default()
        }
    }

    /// Bytes each site downloads: its link's rate for [`Plan::seconds`].
    pub fn bytes_per_site(&self) -> u64 {
        u64::from(LINK_MBIT) * 1_000_000 / 8 * u64::from(self.seconds)
    }
}

/// One site's download in a cell.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SiteRow {
    /// How many sites the cell had.
    pub sites: u8,
    /// `direct-bbr` or `wanopt`.
    pub mode: Mode,
    /// The site's number (1 is `client`).
    pub site: u8,
    /// Payload bytes received.
    pub bytes: u64,
    /// Seconds from the connect to the last byte.
    pub seconds: f64,
    /// Payload goodput, Mbit/s.
    pub goodput_mbps: f64,
    /// The goodput over the link's rate (IP bytes: about 0.96 at best
    /// with 1500-byte packets).
    pub of_link: f64,
}

/// One cell's totals.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CellRow {
    /// How many sites.
    pub sites: u8,
    /// `direct-bbr` or `wanopt`.
    pub mode: Mode,
    /// Payload bytes every site received together.
    pub bytes: u64,
    /// Wall seconds from the first client's start to the last one's end.
    pub seconds: f64,
    /// The core's CPU seconds (user + system) over that time (wanopt).
    pub core_cpu_seconds: Option<f64>,
    /// The core's CPU seconds per GB (10^9 bytes) of payload (wanopt).
    pub core_cpu_seconds_per_gb: Option<f64>,
}

/// A cell that did not run, and why.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Skipped {
    /// How many sites.
    pub sites: u8,
    /// `direct-bbr` or `wanopt`.
    pub mode: Mode,
    /// Why.
    pub reason: String,
}

/// What `results.json` holds.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Results {
    /// `sites`.
    pub scenario: String,
    /// Whether this was `--quick`.
    pub quick: bool,
    /// Every site's link rate, Mbit/s.
    pub link_mbit: u32,
    /// Every site's link round trip, ms.
    pub rtt_ms: u32,
    /// Bytes each site downloads.
    pub bytes_per_site: u64,
    /// Each site's download per cell.
    pub rows: Vec<SiteRow>,
    /// Each cell's totals.
    pub cells: Vec<CellRow>,
    /// Cells that did not run.
    pub skipped: Vec<Skipped>,
    /// Flow resets the nodes logged (any fails the run).
    pub flow_resets: Vec<String>,
}

/// CPU seconds per GB of payload; `None` without payload.
pub fn seconds_per_gb(cpu_seconds: f64, bytes: u64) -> Option<f64> {
    (bytes > 0).then(|| cpu_seconds / (bytes as f64 / 1e9))
}

/// A process's CPU time (user + system) from the text of its
/// `/proc/PID/stat`, in clock ticks: fields 14 and 15, counted after the
/// parenthesised command name (which may hold spaces and parentheses).
pub fn cpu_ticks(stat: &str) -> Option<u64> {
    let (_, rest) = stat.rsplit_once(')')?;
    // `rest` starts at field 3 (the state).
    let mut fields = rest.split_whitespace().skip(11);
    let user: u64 = fields.next()?.parse().ok()?;
    let system: u64 = fields.next()?.parse().ok()?;
    user.checked_add(system)
}

/// Clock ticks per second of `/proc/PID/stat` (`USER_HZ`, 100 on Linux).
pub const TICKS_PER_SECOND: f64 = 100.0;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quick_runs_one_and_three_sites_full_adds_ten() {
        let quick = Plan::new(true);
        let counts: Vec<(u8, Mode)> = quick
            .cells
            .iter()
            .map(|c| (c.sites.count(), c.mode))
            .collect();
        assert_eq!(
            counts,
            [
                (1, Mode::DirectBbr),
                (1, Mode::Wanopt),
                (3, Mode::DirectBbr),
                (3, Mode::Wanopt)
            ]
        );
        assert_eq!(quick.bytes_per_site(), 20_000_000);
        let full = Plan::new(false);
        assert_eq!(full.cells.len(), 6);
        assert_eq!(full.cells.last().map(|c| c.sites.count()), Some(10));
        assert!(Plan::link().specs().is_ok());
    }

    /// The CPU fields are found after the command name, whatever it holds.
    #[test]
    fn cpu_ticks_are_user_plus_system() {
        let stat = "1234 (wanopt core) S 1 1234 1234 0 -1 4194560 500 0 0 0 \
                    250 75 0 0 20 0 9 0 100 200000000 3000 18446744073709551615";
        assert_eq!(cpu_ticks(stat), Some(325));
        let odd = "7 (a) b (c) R 1 7 7 0 -1 0 0 0 0 0 11 22 0 0";
        assert_eq!(cpu_ticks(odd), Some(33));
        assert_eq!(cpu_ticks("garbage"), None);
        assert_eq!(cpu_ticks("1 (x) S 1 2"), None);
        assert_eq!(cpu_ticks(""), None);
    }

    #[test]
    fn seconds_per_gb_is_cpu_over_payload() {
        assert_eq!(seconds_per_gb(2.0, 500_000_000), Some(4.0));
        assert_eq!(seconds_per_gb(2.0, 0), None);
    }
}
