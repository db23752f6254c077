//! The scenario's matrix: the traces, the buffers and the modes, for a full
//! run and for `--quick`.
//!
//! **Recorded traces** are Mahimahi's cellular traces (recorded with the
//! Saturator of Winstein et al., NSDI 2013, on US networks while driving),
//! found in the directory `--traces` names, or where a Mahimahi
//! installation keeps them. They are not shipped here; without them the
//! scenario runs its synthetic traces alone and says so. Three of them are
//! the ones the controller was tuned on ([`TUNED`]); the others are held out
//! ([`HELD_OUT`]) and never tuned on, so a gain that holds there is not a
//! fit to three recordings. **Synthetic traces** ([`SYNTHETIC`]) are drawn
//! by [`wanopt_netem::trace::synthetic`] from a seed and written to the
//! output directory, so any emulator can replay them.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use wanopt_netem::trace::synthetic::CellularWalk;
use wanopt_netem::units::BitsPerSecond;

use crate::link::LinkOptions;

/// The scenario's name.
pub const SCENARIO: &str = "cellular";

/// The base round-trip time, ms (the link's propagation delay, both ways).
pub const RTT_MS: u64 = 60;

/// A drop-tail buffer of the link, each way.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Buffer {
    /// 500 KB: a cellular base station's deep buffer (seconds at a few Mbit/s).
    #[serde(rename = "deep")]
    Deep,
    /// 100 KB: a shallow one (about 50-150 ms at these rates).
    #[serde(rename = "shallow")]
    Shallow,
}

impl Buffer {
    /// The buffer's name in `results.json`.
    pub fn name(self) -> &'static str {
        match self {
            Buffer::Deep => "deep",
            Buffer::Shallow => "shallow",
        }
    }

    /// Its size in bytes.
    pub fn bytes(self) -> u64 {
        match self {
            Buffer::Deep => 500_000,
            Buffer::Shallow => 100_000,
        }
    }
}

/// How the traffic crosses the link.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Mode {
    /// Direct, kernel CUBIC at both ends.
    #[serde(rename = "cubic")]
    Cubic,
    /// Direct, kernel BBR at both ends.
    #[serde(rename = "bbr")]
    Bbr,
    /// Through the wanopt tunnel (data reduction off).
    #[serde(rename = "wanopt")]
    Wanopt,
}

/// Every mode, in the order the tables show them.
pub const MODES: [Mode; 3] = [Mode::Cubic, Mode::Bbr, Mode::Wanopt];

impl Mode {
    /// The mode's name in `results.json`.
    pub fn name(self) -> &'static str {
        match self {
            Mode::Cubic => "cubic",
            Mode::Bbr => "bbr",
            Mode::Wanopt => "wanopt",
        }
    }

    /// The endpoints' congestion control on a direct path.
    pub fn congestion(self) -> Option<&'static str> {
        match self {
            Mode::Cubic => Some("cubic"),
            Mode::Bbr => Some("bbr"),
            Mode::Wanopt => None,
        }
    }
}

/// A recorded trace pair by its file names (`NAME.down`, `NAME.up`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Recorded {
    /// The name the files share.
    pub name: &'static str,
    /// The uplink's file when there is no `NAME.up` (Mahimahi's snapshot
    /// of `TMobile-LTE-driving.up` is too large for some mirrors).
    pub up: Option<&'static str>,
}

/// The recorded traces the controller was tuned on: LTE at 16.7, 5.0 and
/// 4.6 Mbit/s downlink on average.
pub const TUNED: [Recorded; 3] = [
    Recorded {
        name: "TMobile-LTE-short",
        up: None,
    },
    Recorded {
        name: "Verizon-LTE-short",
        up: None,
    },
    Recorded {
        name: "ATT-LTE-driving-2016",
        up: None,
    },
];

/// Recorded traces held out: never tuned on (LTE at 12.8 and 5.2 Mbit/s,
/// UMTS at 2.0).
pub const HELD_OUT: [Recorded; 3] = [
    Recorded {
        name: "TMobile-LTE-driving",
        up: Some("TMobile-LTE-short.up"),
    },
    Recorded {
        name: "ATT-LTE-driving",
        up: None,
    },
    Recorded {
        name: "TMobile-UMTS-driving",
        up: None,
    },
];

/// The synthetic trace: a walk around 8 Mbit/s down (2 up) with an outage
/// of 300 ms every 15 s on average, 10 minutes long, seed 46.
pub const SYNTHETIC: &str = "synthetic-walk";

/// Where a Mahimahi installation keeps its traces.
pub const MAHIMAHI_DIRS: [&str; 3] = [
    "/usr/share/mahimahi/traces",
    "/usr/local/share/mahimahi/traces",
    "/opt/mahimahi/share/mahimahi/traces",
];

/// One trace pair of the run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TracePair {
    /// Its name in `results.json`.
    pub name: String,
    /// The downlink's file.
    pub down: PathBuf,
    /// The uplink's file.
    pub up: PathBuf,
    /// `recorded-tuned`, `recorded-held-out` or `synthetic`.
    pub kind: String,
    /// The downlink's mean capacity, Mbit/s.
    pub down_mbit_s: f64,
    /// The uplink's mean capacity, Mbit/s.
    pub up_mbit_s: f64,
}

/// One cell: a trace, a buffer and a mode.
#[derive(Debug, Clone, PartialEq)]
pub struct Cell {
    /// Index into [`Plan::traces`].
    pub trace: usize,
    /// The buffer.
    pub buffer: Buffer,
    /// The mode.
    pub mode: Mode,
}

/// The whole run.
#[derive(Debug, Clone)]
pub struct Plan {
    /// The trace pairs.
    pub traces: Vec<TracePair>,
    /// Recorded traces asked for but not found (name, why).
    pub missing: Vec<(String, String)>,
    /// The cells, in order.
    pub cells: Vec<Cell>,
    /// The download's length, seconds.
    pub seconds: u64,
    /// Runs of every cell.
    pub runs: usize,
}

impl Plan {
    /// The plan of a full run or of `--quick`, with recorded traces from
    /// `traces` (or a Mahimahi installation's), the synthetic one written
    /// to `out/traces/`.
    pub fn new(
        quick: bool,
        traces: Option<&Path>,
        out: &Path,
        runs: usize,
    ) -> Result<Plan, String> {
        let mut pairs = Vec::new();
        let mut missing = Vec::new();
        let dir = traces.map(Path::to_path_buf).or_else(|| {
            MAHIMAHI_DIRS
                .iter()
                .map(PathBuf::from)
                .find(|dir| dir.is_dir())
        });
        if let Some(dir) = &dir {
            if !dir.is_dir() {
                return Err(format!("--traces {}: not a directory", dir.display()));
            }
        }
        let recorded: Vec<(Recorded, &str)> = if quick {
            vec![(TUNED[1], "recorded-tuned")]
        } else {
            TUNED
                .iter()
                .map(|r| (*r, "recorded-tuned"))
                .chain(HELD_OUT.iter().map(|r| (*r, "recorded-held-out")))
                .collect()
        };
        for (trace, kind) in recorded {
            let Some(dir) = &dir else {
                missing.push((trace.name.to_string(), "no trace directory".to_string()));
                continue;
            };
            match recorded_pair(dir, trace, kind) {
                Ok(pair) => pairs.push(pair),
                Err(why) => missing.push((trace.name.to_string(), why)),
            }
        }
        pairs.push(synthetic_pair(out)?);
        let buffers: &[Buffer] = if quick {
            &[Buffer::Deep]
        } else {
            &[Buffer::Deep, Buffer::Shallow]
        };
        let mut cells = Vec::new();
        for trace in 0..pairs.len() {
            for &buffer in buffers {
                for mode in MODES {
                    cells.push(Cell {
                        trace,
                        buffer,
                        mode,
                    });
                }
            }
        }
        Ok(Plan {
            traces: pairs,
            missing,
            cells,
            seconds: if quick { 20 } else { 60 },
            runs: runs.max(1),
        })
    }

    /// The link of a cell: the base RTT, the trace each way, the buffer.
    pub fn link(&self, cell: &Cell) -> LinkOptions {
        let pair = &self.traces[cell.trace];
        LinkOptions {
            rtt: Some(format!("{RTT_MS}ms")),
            queue: Some(format!("{}b", cell.buffer.bytes())),
            trace_down: Some(pair.down.to_string_lossy().into_owned()),
            trace_up: Some(pair.up.to_string_lossy().into_owned()),
            seed: Some(46),
            ..LinkOptions::default()
        }
    }

    /// Measurements in all.
    pub fn steps(&self) -> u64 {
        (self.cells.len() * self.runs) as u64
    }
}

fn mbit(rate: BitsPerSecond) -> f64 {
    (rate.0 as f64 / 1e4).round() / 100.0
}

fn recorded_pair(dir: &Path, trace: Recorded, kind: &str) -> Result<TracePair, String> {
    let down = dir.join(format!("{}.down", trace.name));
    let mut up = dir.join(format!("{}.up", trace.name));
    if let (false, Some(fallback)) = (up.is_file(), trace.up) {
        up = dir.join(fallback);
    }
    let read = |path: &Path| crate::model::read_trace(&path.to_string_lossy());
    let (down_trace, up_trace) = (read(&down)?, read(&up)?);
    Ok(TracePair {
        name: trace.name.to_string(),
        down,
        up,
        kind: kind.to_string(),
        down_mbit_s: mbit(down_trace.mean_rate()),
        up_mbit_s: mbit(up_trace.mean_rate()),
    })
}

fn synthetic_pair(out: &Path) -> Result<TracePair, String> {
    let dir = out.join("traces");
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let length_ms = 600_000;
    let down_trace = CellularWalk::lab(BitsPerSecond(8_000_000), length_ms, 46).generate();
    let up_trace = CellularWalk::lab(BitsPerSecond(2_000_000), length_ms, 47).generate();
    let down = dir.join(format!("{SYNTHETIC}.down"));
    let up = dir.join(format!("{SYNTHETIC}.up"));
    for (path, trace) in [(&down, &down_trace), (&up, &up_trace)] {
        std::fs::write(path, trace.to_text()).map_err(|e| format!("{}: {e}", path.display()))?;
    }
    Ok(TracePair {
        name: SYNTHETIC.to_string(),
        down: std::path::absolute(&down).unwrap_or(down),
        up: std::path::absolute(&up).unwrap_or(up),
        kind: "synthetic".to_string(),
        down_mbit_s: mbit(down_trace.mean_rate()),
        up_mbit_s: mbit(up_trace.mean_rate()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn without_recorded_traces_the_synthetic_one_runs_alone() {
        let out = std::env::temp_dir().join(format!("wanopt-cell-plan-{}", std::process::id()));
        let empty = out.join("empty");
        std::fs::create_dir_all(&empty).unwrap_or_else(|e| panic!("{e}"));
        let plan = Plan::new(false, Some(&empty), &out, 1).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(plan.traces.len(), 1);
        assert_eq!(plan.missing.len(), TUNED.len() + HELD_OUT.len());
        assert_eq!(plan.cells.len(), 2 * MODES.len());
        let link = plan.link(&plan.cells[0]);
        let specs = link.specs().unwrap_or_else(|e| panic!("{e}"));
        assert!(specs.down.contains("trace /"), "{}", specs.down);
        assert!(specs.down.contains("queue 500000b"), "{}", specs.down);
        assert!((6.0..10.0).contains(&plan.traces[0].down_mbit_s));
        // Recorded traces named in a directory are taken.
        std::fs::write(empty.join("Verizon-LTE-short.down"), "1\n2\n").unwrap_or_default();
        std::fs::write(empty.join("Verizon-LTE-short.up"), "2\n").unwrap_or_default();
        let quick = Plan::new(true, Some(&empty), &out, 2).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(quick.traces[0].name, "Verizon-LTE-short");
        assert_eq!(quick.traces[0].down_mbit_s, 12.0);
        assert_eq!(quick.steps(), 2 * 2 * MODES.len() as u64);
        assert!(Plan::new(true, Some(&out.join("none")), &out, 1).is_err());
        let _ = std::fs::remove_dir_all(&out);
    }
}
