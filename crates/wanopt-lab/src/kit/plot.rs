//! What every scenario's plots share: the line chart most of them draw,
//! the colours of the modes, and writing a figure as SVG and PNG.

use std::path::Path;

use plotters::coord::Shift;
use plotters::prelude::*;

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

/// The colours lines take in turn (the first eight of matplotlib's
/// `tab10`).
pub const PALETTE: [RGBColor; 8] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(23, 190, 207),
];

/// The colour of a mode in every scenario's plots: `cubic` brown, `bbr`
/// blue, `wanopt-fec` red, `wanopt` (and any other) green.
pub fn mode_colour(mode: &str) -> RGBColor {
    match mode {
        "cubic" => PALETTE[5],
        "bbr" => PALETTE[0],
        "wanopt-fec" => PALETTE[3],
        _ => PALETTE[2],
    }
}

/// A figure drawn the same way on any backend.
pub trait Figure {
    /// Draws the figure on `root`; the error says what failed.
    fn draw<DB: DrawingBackend>(&self, root: DrawingArea<DB, Shift>) -> Result<(), String>
    where
        DB::ErrorType: 'static;
}

/// Writes `figure` as `STEM.svg` and `STEM.png` into `dir`, `size`
/// pixels.
pub fn write_svg_and_png(
    figure: &impl Figure,
    dir: &Path,
    stem: &str,
    size: (u32, u32),
) -> Result<(), PlotError> {
    let svg = dir.join(format!("{stem}.svg"));
    figure
        .draw(SVGBackend::new(&svg, size).into_drawing_area())
        .map_err(|message| PlotError::Draw {
            file: svg.display().to_string(),
            message,
        })?;
    let png = dir.join(format!("{stem}.png"));
    figure
        .draw(BitMapBackend::new(&png, size).into_drawing_area())
        .map_err(|message| PlotError::Draw {
            file: png.display().to_string(),
            message,
        })
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

impl Figure for LineChart {
    fn draw<DB: DrawingBackend>(&self, root: DrawingArea<DB, Shift>) -> Result<(), String>
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
}

impl LineChart {
    /// Writes `STEM.svg` and `STEM.png` into `dir`.
    pub fn write(&self, dir: &Path, stem: &str) -> Result<(), PlotError> {
        write_svg_and_png(self, dir, stem, (900, 560))
    }
}

/// One series of a [`BarChart`]: a bar in each group that has a value.
pub struct Bars {
    /// Its legend.
    pub name: String,
    /// Its colour.
    pub colour: RGBColor,
    /// A value per group, in the groups' order (`None`: no bar).
    pub values: Vec<Option<f64>>,
}

/// Grouped bars on a linear axis from zero, a group per category and a
/// bar per series in each, with a legend, written as SVG and PNG.
pub struct BarChart {
    /// The title.
    pub caption: String,
    /// The groups' labels, left to right.
    pub groups: Vec<String>,
    /// The y axis's name.
    pub y_desc: &'static str,
    /// The series, drawn left to right within each group.
    pub series: Vec<Bars>,
}

impl BarChart {
    /// Where bar `s` of group `g` stands on the x axis (groups at 0, 1, ...).
    fn bar_x(&self, g: usize, s: usize) -> (f64, f64) {
        let width = 0.8 / self.series.len().max(1) as f64;
        let x0 = g as f64 - 0.4 + s as f64 * width;
        (x0, x0 + width * 0.9)
    }

    /// Writes `STEM.svg` and `STEM.png` into `dir`.
    pub fn write(&self, dir: &Path, stem: &str) -> Result<(), PlotError> {
        write_svg_and_png(self, dir, stem, (900, 560))
    }
}

impl Figure for BarChart {
    fn draw<DB: DrawingBackend>(&self, root: DrawingArea<DB, Shift>) -> Result<(), String>
    where
        DB::ErrorType: 'static,
    {
        root.fill(&WHITE).map_err(|e| e.to_string())?;
        let n = self.groups.len().max(1);
        // Room above the tallest bar for the legend.
        let max_y = self
            .series
            .iter()
            .flat_map(|s| s.values.iter().flatten())
            .fold(1.0, |m: f64, v| m.max(*v))
            * 1.3;
        let label = |x: &f64| {
            let i = x.round();
            if (x - i).abs() < 1e-6 && i >= 0.0 {
                self.groups.get(i as usize).cloned().unwrap_or_default()
            } else {
                String::new()
            }
        };
        let mut chart = ChartBuilder::on(&root)
            .caption(&self.caption, ("sans-serif", 22))
            .margin(15)
            .x_label_area_size(40)
            .y_label_area_size(55)
            .build_cartesian_2d(-0.5f64..(n as f64 - 0.5), 0.0..max_y)
            .map_err(|e| e.to_string())?;
        chart
            .configure_mesh()
            .disable_x_mesh()
            .x_labels(n + 1)
            .x_label_formatter(&label)
            .y_desc(self.y_desc)
            .draw()
            .map_err(|e| e.to_string())?;
        for (s, series) in self.series.iter().enumerate() {
            let colour = series.colour;
            let bars: Vec<Rectangle<(f64, f64)>> = series
                .values
                .iter()
                .enumerate()
                .filter_map(|(g, v)| {
                    let (x0, x1) = self.bar_x(g, s);
                    Some(Rectangle::new([(x0, 0.0), (x1, (*v)?)], colour.filled()))
                })
                .collect();
            chart
                .draw_series(bars)
                .map_err(|e| e.to_string())?
                .label(series.name.clone())
                .legend(move |(x, y)| {
                    Rectangle::new([(x, y - 5), (x + 12, y + 5)], colour.filled())
                });
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
}
