//! The scenario's cells: 1 and 3 sites (and 10 in a full run), each
//! direct with kernel BBR then through wanopt, every site on the same link.

use serde::{Deserialize, Serialize};

use crate::link::LinkOptions;
use crate::sites::Sites;

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
}
