//! The typed results of the `sites` scenario: `results.json`, a row per
//! site and per cell.

use serde::{Deserialize, Serialize};

use super::matrix::Mode;

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seconds_per_gb_is_cpu_over_payload() {
        assert_eq!(seconds_per_gb(2.0, 500_000_000), Some(4.0));
        assert_eq!(seconds_per_gb(2.0, 0), None);
    }
}
