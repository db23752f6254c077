//! Plot of throughput against RTT (SVG and PNG), one line per profile and
//! path, with the reference's figures for `tcp-opt`.

use std::path::Path;

use plotters::prelude::*;

use crate::scenario::spec::TCP_OPT_REFERENCE;
use crate::scenario::Results;

/// Errors drawing a plot.
#[derive(Debug, thiserror::Error)]
pub enum PlotError {
    /// The drawing backend failed.
    #[error("cannot draw {file}: {message}")]
    Draw {
        /// The output file.
        file: String,
        /// What failed.
        message: String,
    },
}

type Series = (String, RGBColor, bool, Vec<(f64, f64)>);

fn series(results: &Results) -> Vec<Series> {
    let palette = [
        RGBColor(31, 119, 180),
        RGBColor(255, 127, 14),
        RGBColor(44, 160, 44),
        RGBColor(214, 39, 40),
        RGBColor(148, 103, 189),
        RGBColor(140, 86, 75),
        RGBColor(227, 119, 194),
        RGBColor(23, 190, 207),
    ];
    let mut out: Vec<Series> = Vec::new();
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
        out.push((name, palette[i % palette.len()], false, pts));
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
        out.push((
            "reference disabled".into(),
            RGBColor(120, 120, 120),
            true,
            off,
        ));
        out.push(("reference enabled".into(), RGBColor(0, 0, 0), true, on));
    }
    out
}

fn draw<DB: DrawingBackend>(
    root: DrawingArea<DB, plotters::coord::Shift>,
    results: &Results,
) -> Result<(), String>
where
    DB::ErrorType: 'static,
{
    root.fill(&WHITE).map_err(|e| e.to_string())?;
    let all = series(results);
    let max_x = all
        .iter()
        .flat_map(|s| s.3.iter().map(|p| p.0))
        .fold(10.0, f64::max);
    let max_y = all
        .iter()
        .flat_map(|s| s.3.iter().map(|p| p.1))
        .fold(10.0, f64::max)
        * 1.1;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            format!("{}: throughput vs RTT", results.scenario),
            ("sans-serif", 22),
        )
        .margin(15)
        .x_label_area_size(40)
        .y_label_area_size(55)
        .build_cartesian_2d(0.0..max_x * 1.05, 0.0..max_y)
        .map_err(|e| e.to_string())?;
    chart
        .configure_mesh()
        .x_desc("RTT (ms)")
        .y_desc("throughput (Mbit/s)")
        .draw()
        .map_err(|e| e.to_string())?;
    for (name, color, dashed, pts) in all {
        let style = ShapeStyle::from(&color).stroke_width(if dashed { 1 } else { 2 });
        let line = chart
            .draw_series(LineSeries::new(pts.clone(), style))
            .map_err(|e| e.to_string())?;
        line.label(name)
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color));
        chart
            .draw_series(pts.iter().map(|p| Circle::new(*p, 3, color.filled())))
            .map_err(|e| e.to_string())?;
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .position(SeriesLabelPosition::UpperRight)
        .draw()
        .map_err(|e| e.to_string())?;
    root.present().map_err(|e| e.to_string())
}

/// Writes `throughput.svg` and `throughput.png` into `dir`.
pub fn throughput_vs_rtt(results: &Results, dir: &Path) -> Result<(), PlotError> {
    let svg = dir.join("throughput.svg");
    draw(
        SVGBackend::new(&svg, (900, 560)).into_drawing_area(),
        results,
    )
    .map_err(|message| PlotError::Draw {
        file: svg.display().to_string(),
        message,
    })?;
    let png = dir.join("throughput.png");
    draw(
        BitMapBackend::new(&png, (900, 560)).into_drawing_area(),
        results,
    )
    .map_err(|message| PlotError::Draw {
        file: png.display().to_string(),
        message,
    })?;
    Ok(())
}
