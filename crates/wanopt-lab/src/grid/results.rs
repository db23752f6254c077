//! The typed results of a grid scenario (`tcp-opt`, TOML files):
//! `results.json`.

use serde::{Deserialize, Serialize};

use super::spec::ScenarioSpec;

/// One grid point's result.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Row {
    /// Round-trip time, ms.
    pub rtt_ms: u64,
    /// Endpoint profile.
    pub profile: String,
    /// `direct` or `wanopt`.
    pub mode: String,
    /// The middlebox rules of the point (absent: none).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub middlebox: String,
    /// Aggregate payload throughput, Mbit/s (trimmed mean of the runs).
    pub throughput_mbps: f64,
    /// Completion time, seconds (trimmed mean of the runs).
    pub seconds: f64,
    /// Runs measured.
    pub runs: usize,
    /// Each run's throughput, Mbit/s.
    pub samples_mbps: Vec<f64>,
    /// Each run's completion time, s.
    pub samples_seconds: Vec<f64>,
    /// How the runs were averaged.
    pub method: String,
    /// The link spec of the up (client to server) direction.
    pub link_up: String,
    /// The link spec of the down direction.
    pub link_down: String,
    /// Streams x bytes per stream.
    pub workload: String,
    /// Runs that failed (not averaged), with the reason.
    #[serde(default)]
    pub failed_runs: Vec<String>,
}

/// A grid point that could not be measured.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Skipped {
    /// Round-trip time, ms.
    pub rtt_ms: u64,
    /// Endpoint profile.
    pub profile: String,
    /// `direct` or `wanopt`.
    pub mode: String,
    /// The middlebox rules of the point (absent: none).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub middlebox: String,
    /// Why.
    pub reason: String,
}

/// `results.json`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Results {
    /// The scenario's name.
    pub scenario: String,
    /// Measured grid points.
    pub rows: Vec<Row>,
    /// Grid points not measured, with the reason.
    pub skipped: Vec<Skipped>,
    /// Whether this was a `--quick` run.
    pub quick: bool,
    /// The scenario as run.
    pub spec: ScenarioSpec,
    /// Effective TCP settings of the endpoints per profile.
    pub endpoints: serde_json::Value,
    /// Every flow reset the nodes logged (WARN lines naming a flow and a
    /// reset), quoted with the log they came from: any fails the run.
    #[serde(default)]
    pub flow_resets: Vec<String>,
}
