//! What a `reach` run measures: the cases (what happens to UDP on the
//! path), the modes, the link and the sizes of the transfers, for a full
//! run and for `--quick`.

use serde::{Deserialize, Serialize};

use crate::link::LinkOptions;

/// The scenario's name.
pub const SCENARIO: &str = "reach";

/// The link's rate, Mbit/s (each way).
pub const LINK_MBIT: u32 = 50;
/// The link's round trip, ms.
pub const RTT_MS: u32 = 40;
/// The emulator's seed.
pub const SEED: u64 = 47;
/// The rate UDP is policed to in the `policed` case.
pub const POLICE_RATE: &str = "2mbit";
/// The middlebox rule that drops every UDP datagram.
pub const BLOCK_UDP: &str = "block-udp";

/// What happens to UDP on the path.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Case {
    /// UDP crosses untouched.
    Open,
    /// Every UDP datagram dropped from before the edge starts.
    Blocked,
    /// UDP open at first, every datagram dropped from the middle of a
    /// download on.
    BlockedMid,
    /// UDP held to [`POLICE_RATE`] (a token bucket on UDP only) from
    /// before the edge starts, TCP free to use the link.
    Policed,
    /// UDP blocked from before the edge starts, then let through again.
    Returns,
}

/// Every case, in the order a run takes them.
pub const CASES: [Case; 5] = [
    Case::Open,
    Case::Blocked,
    Case::BlockedMid,
    Case::Policed,
    Case::Returns,
];

impl Case {
    /// Its name in results and reports.
    pub fn name(self) -> &'static str {
        match self {
            Case::Open => "open",
            Case::Blocked => "blocked",
            Case::BlockedMid => "blocked-mid",
            Case::Policed => "policed",
            Case::Returns => "returns",
        }
    }

    /// The middlebox rules in place when the lab comes up (and the edge
    /// starts): empty for none.
    pub fn rules_at_start(self) -> String {
        match self {
            Case::Open | Case::BlockedMid => String::new(),
            Case::Blocked | Case::Returns => BLOCK_UDP.into(),
            Case::Policed => format!("police-udp {POLICE_RATE}"),
        }
    }

    /// The rules the case changes to while it runs, if it does.
    pub fn rules_mid_run(self) -> Option<&'static str> {
        match self {
            Case::BlockedMid => Some(BLOCK_UDP),
            Case::Returns => Some(""),
            Case::Open | Case::Blocked | Case::Policed => None,
        }
    }

    /// What the case does to UDP, in a line.
    pub fn description(self) -> String {
        match self {
            Case::Open => "UDP open".into(),
            Case::Blocked => "UDP blocked from the start".into(),
            Case::BlockedMid => "UDP blocked in the middle of a download".into(),
            Case::Policed => format!(
                "UDP policed to {} Mbit/s on the {LINK_MBIT} Mbit/s link",
                POLICE_RATE.trim_end_matches("mbit")
            ),
            Case::Returns => "UDP blocked from the start, then let through again".into(),
        }
    }
}

/// How the traffic crosses the path.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mode {
    /// Routed, kernel TCP with BBR at both ends.
    Direct,
    /// Through the wanopt nodes, the edge with `--transport auto`.
    Wanopt,
}

/// Both modes, in the order a case runs them.
pub const MODES: [Mode; 2] = [Mode::Direct, Mode::Wanopt];

impl Mode {
    /// Its name in results and reports.
    pub fn name(self) -> &'static str {
        match self {
            Mode::Direct => "direct",
            Mode::Wanopt => "wanopt",
        }
    }
}

/// The settings of a run.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    /// `--quick`.
    pub quick: bool,
    /// Runs of every case and mode (each on a fresh lab).
    pub runs: u32,
    /// The cases, in order.
    pub cases: Vec<Case>,
    /// The measured bulk download, bytes.
    pub bulk_bytes: u64,
    /// The download in flight when UDP is blocked (`blocked-mid`), and the
    /// one that gives a policed tunnel traffic to notice, bytes.
    pub long_bytes: u64,
    /// What crosses a new tunnel before the fetches (a warm tunnel), bytes.
    pub warm_bytes: u64,
    /// The fetch timed on a warm tunnel, bytes.
    pub fetch_bytes: u64,
    /// Fetches per run (the row has their median).
    pub fetches: u32,
    /// The small downloads that probe for a working new flow, bytes.
    pub probe_bytes: u64,
}

impl Plan {
    /// A full run (3 runs, 60 MB bulk, 10 fetches) or `--quick` (1 run,
    /// 20 MB bulk, 3 fetches).
    pub fn new(quick: bool) -> Plan {
        Plan {
            quick,
            runs: if quick { 1 } else { 3 },
            cases: CASES.to_vec(),
            bulk_bytes: if quick { 20_000_000 } else { 60_000_000 },
            long_bytes: if quick { 40_000_000 } else { 80_000_000 },
            warm_bytes: 2_000_000,
            fetch_bytes: 180_000,
            fetches: if quick { 3 } else { 10 },
            probe_bytes: 64 * 1024,
        }
    }

    /// The link every case runs on, with `rules` as its middlebox.
    pub fn link(&self, rules: &str) -> LinkOptions {
        LinkOptions {
            rtt: Some(format!("{RTT_MS}ms")),
            rate: Some(format!("{LINK_MBIT}mbit")),
            queue: Some("1bdp".into()),
            seed: Some(SEED),
            middlebox: (!rules.is_empty()).then(|| rules.to_string()),
            ..LinkOptions::default()
        }
    }

    /// The floor of the fetch: one round trip plus its bytes at the link's
    /// rate, ms.
    pub fn floor_ms(&self) -> f64 {
        f64::from(RTT_MS) + self.fetch_bytes as f64 * 8.0 / (f64::from(LINK_MBIT) * 1e3)
    }

    /// How long the bulk download may take: four times its time at the
    /// link's rate, at least 10 s (a tunnel that crawls is measured over
    /// it, not waited for).
    pub fn bulk_deadline(&self) -> std::time::Duration {
        let at_rate = self.bulk_bytes as f64 * 8.0 / (f64::from(LINK_MBIT) * 1e6);
        std::time::Duration::from_secs_f64((4.0 * at_rate).max(10.0))
    }

    /// Progress steps: one per case, mode and run.
    pub fn steps(&self) -> u64 {
        self.cases.len() as u64 * MODES.len() as u64 * u64::from(self.runs)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quick_runs_every_case_once_and_full_runs_more_and_larger() {
        let quick = Plan::new(true);
        let full = Plan::new(false);
        assert_eq!(quick.cases, CASES);
        assert_eq!(quick.steps(), 10);
        assert_eq!(full.steps(), 30);
        assert!(full.bulk_bytes > quick.bulk_bytes && full.fetches > quick.fetches);
        // 180 KB at 50 Mbit/s is 28.8 ms, after a 40 ms round trip.
        assert!((quick.floor_ms() - 68.8).abs() < 1e-9);
        assert_eq!(quick.bulk_deadline().as_secs_f64(), 12.8);
        assert_eq!(full.bulk_deadline().as_secs_f64(), 38.4);
    }

    #[test]
    fn cases_put_their_rules_on_the_link() {
        let plan = Plan::new(true);
        let specs = |case: Case| {
            plan.link(&case.rules_at_start())
                .specs()
                .unwrap_or_else(|e| panic!("{e}"))
        };
        assert_eq!(specs(Case::Open).middlebox, "");
        assert_eq!(specs(Case::Blocked).middlebox, "block-udp");
        assert_eq!(specs(Case::Policed).middlebox, "police-udp 2mbit");
        assert_eq!(
            specs(Case::Open).down,
            "rtt 40ms rate 50mbit queue 1bdp",
            "{:?}",
            specs(Case::Open)
        );
        assert_eq!(Case::Returns.rules_mid_run(), Some(""));
        assert_eq!(Case::BlockedMid.rules_mid_run(), Some("block-udp"));
        assert_eq!(
            serde_json::to_value(Case::BlockedMid).ok(),
            Some("blocked-mid".into())
        );
        assert!(Case::Policed.description().contains("2 Mbit/s on the 50"));
    }
}
