//! Tail duplication as the node is set and shows it: the duplication
//! mode of the command line and a path's status in `/status`.

use std::fmt;

use serde::{Deserialize, Serialize};

/// When the tunnel repeats datagrams.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum DuplicationMode {
    /// Never.
    Off,
    /// Repeat burst tails on every path.
    Tails,
    /// Repeat burst tails on paths whose measured loss is at least 0.1%
    /// (off again below 0.05%).
    #[default]
    Auto,
}

impl DuplicationMode {
    /// The mode's name on the command line.
    pub fn as_str(self) -> &'static str {
        match self {
            DuplicationMode::Off => "off",
            DuplicationMode::Tails => "tails",
            DuplicationMode::Auto => "auto",
        }
    }
}

impl std::str::FromStr for DuplicationMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "off" => Ok(DuplicationMode::Off),
            "tails" => Ok(DuplicationMode::Tails),
            "auto" => Ok(DuplicationMode::Auto),
            other => Err(format!(
                "unknown duplication mode {other:?} (expected auto, tails or off)"
            )),
        }
    }
}

impl fmt::Display for DuplicationMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A path's duplication as `/status` shows it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct DuplicationStatus {
    /// The node's mode (`off`, `tails`, `auto`).
    pub mode: DuplicationMode,
    /// Whether tails are repeated on this path now.
    pub active: bool,
    /// Whether the last sample found the path carrying bulk traffic (more
    /// than half its capacity), which pauses `auto`.
    #[serde(default)]
    pub bulk: bool,
    /// The loss monitor's estimate for this path (packets declared lost
    /// over packets sent, recent), percent.
    pub loss_percent: f64,
    /// Silence that ends a burst, milliseconds (when active).
    pub quiet_ms: Option<f64>,
    /// Most bytes repeated per burst (when active).
    pub tail_bytes: Option<usize>,
    /// Bursts whose tail was repeated.
    pub bursts: u64,
    /// Datagrams repeated.
    pub datagrams: u64,
    /// Bytes repeated.
    pub bytes: u64,
    /// Datagrams left out because the path's budget for copies was spent.
    pub over_budget: u64,
    /// Datagrams left out because their burst began while the path was
    /// busy (no idle link time to spend on copies).
    #[serde(default)]
    pub busy: u64,
    /// Bursts that began on a busy path and were repeated anyway because
    /// a stream was ending on it.
    #[serde(default)]
    pub stream_ends: u64,
    /// Streams whose last bytes are written and not yet acknowledged.
    #[serde(default)]
    pub ending_streams: usize,
    /// Tails sent as Reed-Solomon parity (stream ends).
    #[serde(default)]
    pub parity_groups: u64,
    /// Datagrams left out because the sender still had data waiting for
    /// its congestion window when the path went quiet (not an end).
    #[serde(default)]
    pub stalled: u64,
    /// Datagrams from this peer rebuilt from its parity (what the peer
    /// did not have to retransmit).
    #[serde(default)]
    pub rebuilt: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes_parse_and_print() {
        for mode in [
            DuplicationMode::Off,
            DuplicationMode::Tails,
            DuplicationMode::Auto,
        ] {
            assert_eq!(mode.to_string().parse::<DuplicationMode>(), Ok(mode));
        }
        let err = "twice".parse::<DuplicationMode>().unwrap_err();
        assert!(err.contains("expected auto, tails or off"), "{err}");
        assert_eq!(DuplicationMode::default(), DuplicationMode::Auto);
    }
}
