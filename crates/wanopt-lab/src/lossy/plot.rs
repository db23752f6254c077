//! `lossy-bulk.svg` and `.png`: bulk goodput against random loss, one line
//! per RTT and mode.

use std::path::Path;

use super::matrix::MODES;
use super::results::Results;
use crate::kit::plot::{mode_colour, Line, LineChart, PlotError};

fn lines(results: &Results) -> Vec<Line> {
    let mut rtts: Vec<u64> = results.rows.iter().map(|r| r.rtt_ms).collect();
    rtts.sort_unstable();
    rtts.dedup();
    let mut out = Vec::new();
    for (i, rtt) in rtts.iter().enumerate() {
        for mode in MODES.map(|m| m.name()) {
            let mut points: Vec<(f64, f64)> = results
                .rows
                .iter()
                .filter(|r| r.rtt_ms == *rtt && r.mode == mode && r.workload == "bulk" && !r.burst)
                .filter_map(|r| r.throughput_mbps.map(|t| (r.loss_pct, t)))
                .collect();
            points.sort_by(|a, b| a.0.total_cmp(&b.0));
            if !points.is_empty() {
                out.push(Line {
                    name: format!("{mode} {rtt} ms"),
                    colour: mode_colour(mode),
                    // Thinner for longer RTTs.
                    width: 3 - i.min(2) as u32,
                    points,
                });
            }
        }
    }
    out
}

/// Writes `lossy-bulk.svg` and `lossy-bulk.png` into `dir`.
pub fn bulk_vs_loss(results: &Results, dir: &Path) -> Result<(), PlotError> {
    LineChart {
        caption: "lossy: bulk goodput vs random loss".into(),
        x_desc: "loss each way (%)",
        y_desc: "goodput (Mbit/s)",
        y_floor: 110.0,
        lines: lines(results),
    }
    .write(dir, "lossy-bulk")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn draws_a_line_per_rtt_and_mode_as_svg_and_png() {
        let row = |rtt: u64, loss: f64, mode: &str, mbps: f64| {
            serde_json::json!({
                "rtt_ms": rtt, "loss_pct": loss, "burst": false, "jitter_ms": 10,
                "workload": "bulk", "mode": mode, "throughput_mbps": mbps,
                "seconds": 10.0, "time_to_90pct_s": 1.0, "p50_ms": null,
                "p99_ms": null, "overhead_pct": 5.0, "tunnel": "fresh",
                "link_mbps": 100, "floor_s": null, "bytes": 1, "wan_bytes": 1,
                "wan_lost_frames": 0, "wan_queue_drops": 0, "samples": null,
                "note": null
            })
        };
        let mut rows = Vec::new();
        for (rtt, mode) in [(50, "bbr"), (50, "wanopt-fec"), (150, "wanopt")] {
            for loss in [0.0, 1.0, 5.0] {
                rows.push(row(rtt, loss, mode, 90.0 - loss));
            }
        }
        let results: Results = serde_json::from_value(serde_json::json!({
            "scenario": "lossy", "quick": true, "settings": {}, "rows": rows,
            "skipped": [], "flow_resets": []
        }))
        .unwrap();
        let dir = std::env::temp_dir().join(format!("lossy-plot-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        bulk_vs_loss(&results, &dir).unwrap();
        let svg = std::fs::read_to_string(dir.join("lossy-bulk.svg")).unwrap();
        for name in ["bbr 50 ms", "wanopt-fec 50 ms", "wanopt 150 ms"] {
            assert!(svg.contains(name), "{name} missing from the legend");
        }
        assert!(std::fs::metadata(dir.join("lossy-bulk.png")).unwrap().len() > 1_000);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
