//! `lossy-bulk.svg` and `.png`: bulk goodput against random loss, one line
//! per RTT and mode.

use std::path::Path;

use plotters::prelude::*;

use super::results::Results;
use crate::plot::PlotError;

/// One line: its name, colour, dash (RTT) and points.
type Line = (String, RGBColor, usize, Vec<(f64, f64)>);

fn lines(results: &Results) -> Vec<Line> {
    let colours = [
        ("cubic", RGBColor(140, 86, 75)),
        ("bbr", RGBColor(31, 119, 180)),
        ("wanopt", RGBColor(44, 160, 44)),
        ("wanopt-fec", RGBColor(214, 39, 40)),
    ];
    let mut rtts: Vec<u64> = results.rows.iter().map(|r| r.rtt_ms).collect();
    rtts.sort_unstable();
    rtts.dedup();
    let mut out = Vec::new();
    for (i, rtt) in rtts.iter().enumerate() {
        for (mode, colour) in colours {
            let mut pts: Vec<(f64, f64)> = results
                .rows
                .iter()
                .filter(|r| r.rtt_ms == *rtt && r.mode == mode && r.workload == "bulk" && !r.burst)
                .filter_map(|r| r.throughput_mbps.map(|t| (r.loss_pct, t)))
                .collect();
            pts.sort_by(|a, b| a.0.total_cmp(&b.0));
            if !pts.is_empty() {
                out.push((format!("{mode} {rtt} ms"), colour, i, pts));
            }
        }
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
    let all = lines(results);
    let max_x = all
        .iter()
        .flat_map(|l| l.3.iter().map(|p| p.0))
        .fold(1.0, f64::max);
    let mut chart = ChartBuilder::on(&root)
        .caption("lossy: bulk goodput vs random loss", ("sans-serif", 22))
        .margin(15)
        .x_label_area_size(40)
        .y_label_area_size(55)
        .build_cartesian_2d(0.0..max_x * 1.05, 0.0..110.0)
        .map_err(|e| e.to_string())?;
    chart
        .configure_mesh()
        .x_desc("loss each way (%)")
        .y_desc("goodput (Mbit/s)")
        .draw()
        .map_err(|e| e.to_string())?;
    for (name, colour, rtt_index, pts) in all {
        let style = ShapeStyle::from(&colour).stroke_width(3 - rtt_index.min(2) as u32);
        chart
            .draw_series(LineSeries::new(pts.clone(), style))
            .map_err(|e| e.to_string())?
            .label(name)
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], colour));
        chart
            .draw_series(pts.iter().map(|p| Circle::new(*p, 3, colour.filled())))
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

/// Writes `lossy-bulk.svg` and `lossy-bulk.png` into `dir`.
pub fn bulk_vs_loss(results: &Results, dir: &Path) -> Result<(), PlotError> {
    let svg = dir.join("lossy-bulk.svg");
    draw(
        SVGBackend::new(&svg, (900, 560)).into_drawing_area(),
        results,
    )
    .map_err(|message| PlotError::Draw {
        file: svg.display().to_string(),
        message,
    })?;
    let png = dir.join("lossy-bulk.png");
    draw(
        BitMapBackend::new(&png, (900, 560)).into_drawing_area(),
        results,
    )
    .map_err(|message| PlotError::Draw {
        file: png.display().to_string(),
        message,
    })
}
