//! `bond-cut.svg`/`.png` and `bond-clean.svg`/`.png`: the download's
//! goodput per 0.5 s over its time, a line per mode (each cell's first
//! run), with link 1 cut and restored (`cut`) or both links clean
//! (`none`), beside the two links' sum.

use std::path::Path;

use plotters::style::RGBColor;

use super::matrix::SUM_MBPS;
use super::results::{CellSeries, Results};
use crate::kit::plot::{Line, LineChart, PlotError, PALETTE};

/// Bins of 100 ms merged into one point.
const MERGE: usize = 5;

/// A mode's colour.
fn colour(mode: &str) -> RGBColor {
    match mode {
        "direct" => PALETTE[0],
        "wanopt-failover" => PALETTE[1],
        "wanopt-bond" => PALETTE[2],
        "wanopt-shaped" | "wanopt-sla" => PALETTE[3],
        _ => PALETTE[4],
    }
}

/// A series as points: the mean of every 5 bins (0.5 s) at their middle.
pub fn points(mbit_s: &[f64]) -> Vec<(f64, f64)> {
    mbit_s
        .chunks(MERGE)
        .enumerate()
        .map(|(i, c)| {
            let t = (i * MERGE) as f64 * 0.1 + c.len() as f64 * 0.05;
            (t, c.iter().sum::<f64>() / c.len() as f64)
        })
        .collect()
}

/// The chart of the bulk cells of `event`, or `None` if none has a series.
fn chart(results: &Results, event: &str, caption: String) -> Option<LineChart> {
    let series: Vec<&CellSeries> = results
        .series
        .iter()
        .filter(|s| s.event == event && s.workload == "bulk" && s.run == 1)
        .collect();
    let last = series.iter().map(|s| s.mbit_s.len()).max()?;
    let mut lines: Vec<Line> = series
        .iter()
        .map(|s| Line {
            name: s.mode.clone(),
            colour: colour(&s.mode),
            width: 2,
            points: points(&s.mbit_s),
        })
        .collect();
    lines.push(Line {
        name: format!("sum of the links ({SUM_MBPS:.0} Mbit/s)"),
        colour: RGBColor(110, 110, 110),
        width: 2,
        points: vec![(0.0, SUM_MBPS), (last as f64 * 0.1, SUM_MBPS)],
    });
    let marks: Vec<String> = series
        .first()
        .map(|s| {
            s.marks
                .iter()
                .map(|(name, t)| format!("{name} at {t:.1} s"))
                .collect()
        })
        .unwrap_or_default();
    let caption = if marks.is_empty() {
        caption
    } else {
        format!("{caption} ({})", marks.join(", "))
    };
    Some(LineChart {
        caption,
        x_desc: "seconds since the download's start",
        y_desc: "goodput, Mbit/s (per 0.5 s)",
        y_floor: SUM_MBPS * 1.1,
        lines,
    })
}

/// Writes the plots of `results` into `out`; returns their stems.
pub fn over_time(results: &Results, out: &Path) -> Result<Vec<&'static str>, PlotError> {
    let mut written = Vec::new();
    for (event, stem, caption) in [
        ("cut", "bond-cut", "one download, link 1 cut and restored"),
        ("none", "bond-clean", "one download, both links clean"),
    ] {
        if let Some(chart) = chart(results, event, caption.into()) {
            chart.write(out, stem)?;
            written.push(stem);
        }
    }
    Ok(written)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn points_are_half_second_means_at_their_middle() {
        let series: Vec<f64> = (0..12).map(|i| if i < 5 { 10.0 } else { 20.0 }).collect();
        assert_eq!(points(&series), [(0.25, 10.0), (0.75, 20.0), (1.1, 20.0)]);
        assert!(points(&[]).is_empty());
    }

    #[test]
    fn a_run_with_series_writes_its_plots() {
        let series = |mode: &str, event: &str| CellSeries {
            mode: mode.into(),
            event: event.into(),
            workload: "bulk".into(),
            run: 1,
            marks: vec![("link 1 down".into(), 5.0), ("link 1 up".into(), 10.0)],
            mbit_s: (0..150).map(|i| f64::from(i % 50)).collect(),
        };
        let results = Results {
            scenario: "bond".into(),
            quick: true,
            settings: serde_json::Value::Null,
            rows: vec![],
            skipped: vec![],
            flow_resets: vec![],
            series: vec![series("direct", "cut"), series("wanopt-failover", "cut")],
        };
        let dir = std::env::temp_dir().join(format!("bond-plot-{}", std::process::id()));
        let _ = std::fs::create_dir_all(&dir);
        let written = over_time(&results, &dir);
        let svg = std::fs::read_to_string(dir.join("bond-cut.svg")).unwrap_or_default();
        let _ = std::fs::remove_dir_all(&dir);
        assert_eq!(written.ok(), Some(vec!["bond-cut"]));
        assert!(svg.contains("wanopt-failover") && svg.contains("link 1 down at 5.0 s"));
    }
}
