//! The typed results of the `cluster` scenario: `results.json`, a row per
//! site and phase, each phase's totals, and what the failover and the
//! redials showed.

use serde::{Deserialize, Serialize};

/// What a row measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Phase {
    /// Every site downloading at once through N replicas.
    Steady,
    /// A replica killed with SIGKILL while every site downloads.
    Failover,
    /// A replica (re)started while every site downloads.
    Added,
}

impl Phase {
    /// Its name in results and reports.
    pub fn name(self) -> &'static str {
        match self {
            Phase::Steady => "steady",
            Phase::Failover => "failover",
            Phase::Added => "added",
        }
    }
}

/// One site in one phase.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Row {
    /// Replicas of the cluster in this phase.
    pub replicas: u8,
    /// Sites downloading at once.
    pub sites: u8,
    /// `steady`, `failover` or `added`.
    pub phase: Phase,
    /// The site (1 is `client`).
    pub site: u8,
    /// The replica that carried the site's tunnel when the phase began.
    pub replica: Option<u8>,
    /// The site's goodput, Mbit/s: over the whole download (`steady`,
    /// `added`), after the kill (`failover`: `None` for a site whose
    /// replica died, its download was reset).
    pub mbit_s: Option<f64>,
    /// `failover`: the site's goodput before the kill, Mbit/s.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mbit_s_before: Option<f64>,
    /// Milliseconds from the kill to the first new flow of the site that
    /// worked (`failover`); from the end of the downloads (`added`: the
    /// sites one after another, so it adds up).
    pub first_flow_ms: Option<f64>,
    /// The site's flows that were reset.
    pub resets: u32,
    /// Bytes that arrived wrong (always 0 unless something broke).
    pub wrong_bytes: u64,
    /// Why the site's download did not complete, if it did not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure: Option<String>,
}

/// A steady phase's totals.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SteadyCell {
    /// Replicas.
    pub replicas: u8,
    /// Payload bytes every site received together.
    pub bytes: u64,
    /// Wall seconds from the first start to the last end.
    pub seconds: f64,
    /// `bytes` over `seconds`, Mbit/s.
    pub mbit_s: f64,
    /// Sites per replica, in replica order.
    pub sites_per_replica: Vec<u8>,
}

/// The redials of a site while its replica lives.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Redials {
    /// The replica the site's edge was on (not its bucket's home).
    pub replica: u8,
    /// Its bucket's home, where the director would send a new tunnel.
    pub home: u8,
    /// Redials made (a cut of the site's link longer than the tunnel
    /// timeout, and the director's connection entries for the edge
    /// deleted).
    pub redials: u32,
    /// Redials after which the edge was on `replica` again.
    pub returned: u32,
    /// The repeated file's size, bytes.
    pub file_bytes: u64,
    /// Bytes the site's link carried down for each repeated download.
    pub wan_bytes: Vec<u64>,
    /// Bytes that arrived wrong, over every download.
    pub wrong_bytes: u64,
}

/// What `results.json` holds.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Results {
    /// `cluster`.
    pub scenario: String,
    /// Whether this was `--quick`.
    pub quick: bool,
    /// Sites downloading at once.
    pub sites: u8,
    /// Every site's link rate, Mbit/s.
    pub link_mbit: u32,
    /// Every site's link round trip, ms.
    pub rtt_ms: u32,
    /// Each replica's share of one CPU in the steady and added phases.
    pub core_cpu: f64,
    /// Bytes each site downloads in the steady and added phases.
    pub bytes_per_site: u64,
    /// Every site in every phase.
    pub rows: Vec<Row>,
    /// The steady phases' totals.
    pub steady: Vec<SteadyCell>,
    /// The replica killed in the failover phase.
    pub killed: Option<u8>,
    /// The redials of a site while its replica lives.
    pub redials: Option<Redials>,
    /// Phases that did not run, and why.
    pub skipped: Vec<String>,
}

impl Results {
    /// The steady total through `replicas` over the total through one.
    pub fn scaling(&self, replicas: u8) -> Option<f64> {
        let total = |n: u8| {
            self.steady
                .iter()
                .find(|c| c.replicas == n)
                .map(|c| c.mbit_s)
        };
        match (total(replicas), total(1)) {
            (Some(n), Some(one)) if one > 0.0 => Some(n / one),
            _ => None,
        }
    }

    /// The rows of `phase`.
    pub fn rows_of(&self, phase: Phase) -> impl Iterator<Item = &Row> {
        self.rows.iter().filter(move |r| r.phase == phase)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_serialize_with_the_documented_names() {
        let row = Row {
            replicas: 3,
            sites: 6,
            phase: Phase::Failover,
            site: 1,
            replica: Some(1),
            mbit_s: None,
            mbit_s_before: None,
            first_flow_ms: Some(812.0),
            resets: 1,
            wrong_bytes: 0,
            failure: None,
        };
        let json = serde_json::to_value(&row).unwrap();
        for key in [
            "replicas",
            "sites",
            "phase",
            "site",
            "mbit_s",
            "first_flow_ms",
            "resets",
            "wrong_bytes",
        ] {
            assert!(json.get(key).is_some(), "{key} missing: {json}");
        }
        assert_eq!(json["phase"], "failover");
        let results = Results {
            steady: vec![
                SteadyCell {
                    replicas: 1,
                    bytes: 1,
                    seconds: 1.0,
                    mbit_s: 40.0,
                    sites_per_replica: vec![6],
                },
                SteadyCell {
                    replicas: 3,
                    bytes: 1,
                    seconds: 1.0,
                    mbit_s: 120.0,
                    sites_per_replica: vec![2, 2, 2],
                },
            ],
            ..Results::default()
        };
        assert_eq!(results.scaling(3), Some(3.0));
        assert_eq!(results.scaling(2), None);
    }
}
