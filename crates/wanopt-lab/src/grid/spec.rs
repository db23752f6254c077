//! Scenario definitions: the built-in `tcp-opt` and TOML files.
//!
//! A TOML scenario looks like this (every key optional except `name`):
//!
//! ```toml
//! name = "satellite"
//! runs = 3                 # per grid point; with 3 or more, the highest and
//!                          # lowest are dropped and the rest averaged
//! [link]                   # the options of `wanopt lab up`
//! rate = "20mbit"
//! queue = "1bdp"
//! loss = "0.5%"
//! [grid]
//! rtt = ["300ms", "600ms"]
//! profile = ["linux", "legacy"]
//! mode = ["direct", "wanopt"]
//! middlebox = ["", "strip-wscale"]   # rules per point ("" none); or one
//!                                    # `middlebox` under [link] for all
//! [workload]
//! streams = 4
//! bytes = "10MB"
//! direction = "download"   # or "upload"
//! [node]                   # the wanopt nodes of the `wanopt` mode
//! reduce = true            # data reduction on top of TCP optimization
//! warm_up = true           # one unmeasured transfer first (a deployed tunnel is long-lived)
//! ```

use serde::{Deserialize, Serialize};

use crate::link::LinkOptions;
use crate::traffic::Direction;

/// Errors in a scenario file.
#[derive(Debug, thiserror::Error)]
pub enum SpecError {
    /// The file could not be read.
    #[error("cannot read scenario {path}: {cause}")]
    Read {
        /// The file.
        path: String,
        /// The underlying error.
        cause: std::io::Error,
    },
    /// The file is not valid TOML for a scenario.
    #[error("bad scenario {path}: {message}")]
    Parse {
        /// The file.
        path: String,
        /// What is wrong.
        message: String,
    },
    /// The name is neither built in nor a file.
    #[error("unknown scenario `{name}`: use {known} or a path to a .toml file")]
    Unknown {
        /// The name as given.
        name: String,
        /// The built-in names, as a list for the message.
        known: String,
    },
}

/// Path through the lab.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// Edge and core only route.
    Direct,
    /// Through the wanopt edge and core (`lab up --optimize`).
    Wanopt,
}

impl Mode {
    /// `direct` or `wanopt`.
    pub fn name(self) -> &'static str {
        match self {
            Mode::Direct => "direct",
            Mode::Wanopt => "wanopt",
        }
    }
}

/// The grid of parameters.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Grid {
    /// Round-trip times (`"100ms"`).
    #[serde(default = "default_rtts")]
    pub rtt: Vec<String>,
    /// Endpoint profiles.
    #[serde(default = "default_profiles")]
    pub profile: Vec<String>,
    /// Paths.
    #[serde(default = "default_modes")]
    pub mode: Vec<Mode>,
    /// Middlebox rules, one entry per point (`""`: none); empty: the
    /// `[link]` table's `middlebox`, if any, at every point.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub middlebox: Vec<String>,
}

fn default_rtts() -> Vec<String> {
    vec!["0ms".into()]
}
fn default_profiles() -> Vec<String> {
    vec!["linux".into()]
}
fn default_modes() -> Vec<Mode> {
    vec![Mode::Direct, Mode::Wanopt]
}

impl Default for Grid {
    fn default() -> Self {
        Grid {
            rtt: default_rtts(),
            profile: default_profiles(),
            mode: default_modes(),
            middlebox: Vec::new(),
        }
    }
}

/// The workload of every run.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkloadSpec {
    /// Parallel streams.
    #[serde(default = "default_streams")]
    pub streams: usize,
    /// Bytes per stream (`"100MB"`).
    #[serde(default = "default_bytes")]
    pub bytes: String,
    /// Which way.
    #[serde(default = "default_direction")]
    pub direction: Direction,
}

fn default_streams() -> usize {
    4
}
fn default_bytes() -> String {
    "10MB".into()
}
fn default_direction() -> Direction {
    Direction::Download
}

impl Default for WorkloadSpec {
    fn default() -> Self {
        WorkloadSpec {
            streams: default_streams(),
            bytes: default_bytes(),
            direction: default_direction(),
        }
    }
}

/// How the wanopt nodes of the `wanopt` mode run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NodeSpec {
    /// Data reduction (compression and the byte cache) on top of TCP
    /// optimization; `false` runs the nodes with `--no-reduce`.
    #[serde(default = "default_true")]
    pub reduce: bool,
    /// Before the measured runs of each point, one unmeasured transfer of
    /// the workload (at most 10 MB per stream) through the freshly started
    /// nodes: a deployed tunnel is long-lived, and without this every point
    /// would measure BBR's startup on a cold tunnel.
    #[serde(default = "default_true")]
    pub warm_up: bool,
}

fn default_true() -> bool {
    true
}

impl Default for NodeSpec {
    fn default() -> Self {
        NodeSpec {
            reduce: true,
            warm_up: true,
        }
    }
}

/// A whole scenario.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScenarioSpec {
    /// Its name (written to `results.json`).
    pub name: String,
    /// Runs per grid point.
    #[serde(default = "default_runs")]
    pub runs: usize,
    /// Link options shared by every point (the grid's RTT is added).
    #[serde(default)]
    pub link: LinkOptions,
    /// The grid.
    #[serde(default)]
    pub grid: Grid,
    /// The workload.
    #[serde(default)]
    pub workload: WorkloadSpec,
    /// The wanopt nodes.
    #[serde(default)]
    pub node: NodeSpec,
}

fn default_runs() -> usize {
    1
}

/// The reference document's published figures (Mbit/s) for `tcp-opt`:
/// (RTT ms, TCP optimization disabled, enabled).
pub const TCP_OPT_REFERENCE: [(u64, f64, f64); 6] = [
    (0, 248.0, 121.6),
    (50, 99.7, 124.0),
    (100, 71.0, 131.0),
    (150, 66.0, 125.0),
    (200, 59.0, 131.0),
    (250, 63.0, 126.0),
];

/// The built-in `tcp-opt` scenario (the first reference document): 250
/// Mbit/s bottleneck, RTT 0 to 250 ms, 4 x 100 MB server to client, linux and
/// legacy endpoints, direct and wanopt, 5 runs.
///
/// `quick`: RTT 0, 100 and 250 ms, 4 x 10 MB, 1 run.
///
/// The reference measures TCP optimization alone, so the nodes run with
/// `--no-reduce` (the generator's payload is random anyway).
pub fn tcp_opt(quick: bool) -> ScenarioSpec {
    let rtts: &[u64] = if quick {
        &[0, 100, 250]
    } else {
        &[0, 50, 100, 150, 200, 250]
    };
    ScenarioSpec {
        name: "tcp-opt".into(),
        runs: if quick { 1 } else { 5 },
        link: LinkOptions {
            rate: Some("250mbit".into()),
            queue: Some("1bdp".into()),
            ..LinkOptions::default()
        },
        grid: Grid {
            rtt: rtts.iter().map(|r| format!("{r}ms")).collect(),
            profile: vec!["linux".into(), "legacy".into()],
            mode: vec![Mode::Direct, Mode::Wanopt],
            middlebox: Vec::new(),
        },
        workload: WorkloadSpec {
            streams: 4,
            bytes: if quick { "10MB".into() } else { "100MB".into() },
            direction: Direction::Download,
        },
        node: NodeSpec {
            reduce: false,
            warm_up: true,
        },
    }
}

/// Resolves `name`: `tcp-opt` or a TOML file.
pub fn load(name: &str, quick: bool) -> Result<ScenarioSpec, SpecError> {
    if name == "tcp-opt" {
        return Ok(tcp_opt(quick));
    }
    if !name.ends_with(".toml") && !std::path::Path::new(name).exists() {
        return Err(SpecError::Unknown {
            name: name.to_string(),
            known: "`tcp-opt`".to_string(),
        });
    }
    let text = std::fs::read_to_string(name).map_err(|cause| SpecError::Read {
        path: name.to_string(),
        cause,
    })?;
    parse(name, &text)
}

/// Parses a TOML scenario.
pub fn parse(path: &str, text: &str) -> Result<ScenarioSpec, SpecError> {
    let spec: ScenarioSpec = toml::from_str(text).map_err(|e| SpecError::Parse {
        path: path.to_string(),
        message: e.message().to_string(),
    })?;
    if spec.runs == 0 || spec.runs > 100 {
        return Err(SpecError::Parse {
            path: path.to_string(),
            message: "runs must be between 1 and 100".into(),
        });
    }
    Ok(spec)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn toml_scenario_parses() {
        let text = r#"
            name = "sat"
            runs = 3
            [link]
            rate = "20mbit"
            loss-burst = "1%,30%"
            [grid]
            rtt = ["300ms"]
            mode = ["direct"]
            [workload]
            bytes = "1MB"
            direction = "upload"
        "#;
        let spec = parse("x.toml", text);
        assert!(spec.is_ok(), "{spec:?}");
        if let Ok(spec) = spec {
            assert_eq!(spec.runs, 3);
            assert_eq!(spec.link.loss_burst.as_deref(), Some("1%,30%"));
            assert_eq!(spec.grid.mode, vec![Mode::Direct]);
            assert_eq!(spec.workload.direction, Direction::Upload);
            assert!(spec.node.reduce, "reduce is on unless turned off");
        }
        let spec = parse("x.toml", "name = \"a\"\n[node]\nreduce = false\n");
        assert_eq!(spec.map(|s| s.node.reduce).ok(), Some(false));
        assert!(parse("x.toml", "name = \"a\"\n[node]\nfec = true\n").is_err());
        assert!(parse("x.toml", "name = \"a\"\nbogus = 1").is_err());
    }

    #[test]
    fn quick_tcp_opt_is_smaller() {
        let full = tcp_opt(false);
        let quick = tcp_opt(true);
        assert_eq!(full.grid.rtt.len(), 6);
        assert_eq!(full.runs, 5);
        assert!(quick.grid.rtt.len() < full.grid.rtt.len());
        // TCP optimization only, as in the reference.
        assert!(!full.node.reduce && !quick.node.reduce);
    }
}
