//! Line charts (SVG and PNG): the scenarios' plot of throughput against
//! RTT, one line per profile and path, with the reference's figures for
//! `tcp-opt`, and the chart other scenarios draw theirs with.

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

/// One line of a [`LineChart`].
pub struct Line {
    /// Its legend.
    pub name: String,
    /// Its colour.
    pub colour: RGBColor,
    /// Stroke width, pixels.
    pub width: u32,
    /// Points, in x order.
    pub points: Vec<(f64, f64)>,
}

/// A line chart with a legend, written as SVG and PNG.
pub struct LineChart {
    /// The title.
    pub caption: String,
    /// The x axis's name.
    pub x_desc: &'static str,
    /// The y axis's name.
    pub y_desc: &'static str,
    /// The y axis reaches at least this far (it grows with the data).
    pub y_floor: f64,
    /// The lines, drawn in order.
    pub lines: Vec<Line>,
}

impl LineChart {
    fn draw<DB: DrawingBackend>(
        &self,
        root: DrawingArea<DB, plotters::coord::Shift>,
    ) -> Result<(), String>
    where
        DB::ErrorType: 'static,
    {
        root.fill(&WHITE).map_err(|e| e.to_string())?;
        let points = || self.lines.iter().flat_map(|l| l.points.iter());
        let max_x = points().map(|p| p.0).fold(1.0, f64::max);
        let max_y = points().map(|p| p.1 * 1.1).fold(self.y_floor, f64::max);
        let mut chart = ChartBuilder::on(&root)
            .caption(&self.caption, ("sans-serif", 22))
            .margin(15)
            .x_label_area_size(40)
            .y_label_area_size(55)
            .build_cartesian_2d(0.0..max_x * 1.05, 0.0..max_y)
            .map_err(|e| e.to_string())?;
        chart
            .configure_mesh()
            .x_desc(self.x_desc)
            .y_desc(self.y_desc)
            .draw()
            .map_err(|e| e.to_string())?;
        for line in &self.lines {
            let colour = line.colour;
            let style = ShapeStyle::from(&colour).stroke_width(line.width);
            chart
                .draw_series(LineSeries::new(line.points.clone(), style))
                .map_err(|e| e.to_string())?
                .label(line.name.clone())
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], colour));
            chart
                .draw_series(
                    line.points
                        .iter()
                        .map(|p| Circle::new(*p, 3, colour.filled())),
                )
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

    /// Writes `STEM.svg` and `STEM.png` into `dir`.
    pub fn write(&self, dir: &Path, stem: &str) -> Result<(), PlotError> {
        let svg = dir.join(format!("{stem}.svg"));
        self.draw(SVGBackend::new(&svg, (900, 560)).into_drawing_area())
            .map_err(|message| PlotError::Draw {
                file: svg.display().to_string(),
                message,
            })?;
        let png = dir.join(format!("{stem}.png"));
        self.draw(BitMapBackend::new(&png, (900, 560)).into_drawing_area())
            .map_err(|message| PlotError::Draw {
                file: png.display().to_string(),
                message,
            })
    }
}

fn series(results: &Results) -> Vec<Line> {
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
            colour: palette[i % palette.len()],
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
