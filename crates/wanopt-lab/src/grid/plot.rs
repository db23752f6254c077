//! The grid's plot (SVG and PNG): throughput against RTT, one line per
//! profile and path, with the reference's figures for `tcp-opt`.

use std::path::Path;

use plotters::style::RGBColor;

use super::results::Results;
use super::spec::TCP_OPT_REFERENCE;
use crate::kit::plot::{Line, LineChart, PlotError, PALETTE};

fn series(results: &Results) -> Vec<Line> {
    let mut out: Vec<Line> = Vec::new();
    // In the order the rows were measured (the grid's order).
    let mut keys: Vec<(String, String, String)> = Vec::new();
    for r in &results.rows {
        let key = (r.middlebox.clone(), r.profile.clone(), r.mode.clone());
        if !keys.contains(&key) {
            keys.push(key);
        }
    }
    for (i, (middlebox, profile, mode)) in keys.iter().enumerate() {
        let mut pts: Vec<(f64, f64)> = results
            .rows
            .iter()
            .filter(|r| &r.middlebox == middlebox && &r.profile == profile && &r.mode == mode)
            .map(|r| (r.rtt_ms as f64, r.throughput_mbps))
            .collect();
        pts.sort_by(|a, b| a.0.total_cmp(&b.0));
        let name = if middlebox.is_empty() {
            format!("{profile} {mode}")
        } else {
            format!("{middlebox}: {profile} {mode}")
        };
        out.push(Line {
            name,
            colour: PALETTE[i % PALETTE.len()],
            width: 2,
            points: pts,
        });
    }
    if results.scenario == "tcp-opt" {
        let off = TCP_OPT_REFERENCE
            .iter()
            .map(|(r, o, _)| (*r as f64, *o))
            .collect();
        let on = TCP_OPT_REFERENCE
            .iter()
            .map(|(r, _, n)| (*r as f64, *n))
            .collect();
        out.push(Line {
            name: "reference disabled".into(),
            colour: RGBColor(120, 120, 120),
            width: 1,
            points: off,
        });
        out.push(Line {
            name: "reference enabled".into(),
            colour: RGBColor(0, 0, 0),
            width: 1,
            points: on,
        });
    }
    out
}

/// Writes `throughput.svg` and `throughput.png` into `dir`.
pub fn throughput_vs_rtt(results: &Results, dir: &Path) -> Result<(), PlotError> {
    LineChart {
        caption: format!("{}: throughput vs RTT", results.scenario),
        x_desc: "RTT (ms)",
        y_desc: "throughput (Mbit/s)",
        y_floor: 11.0,
        lines: series(results),
    }
    .write(dir, "throughput")
}
