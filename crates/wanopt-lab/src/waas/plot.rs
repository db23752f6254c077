//! Plots of `waas-3g`, one figure per test (`waas-3g-<test>.svg` and
//! `.png`): on top, seconds per file as bars for baseline, cold and warm
//! (log scale) with the reference's figures as rings (for uploads, the
//! time the client's last byte was acknowledged as triangles); below, the
//! bytes that crossed the WAN as a share of the file's size.

use std::path::Path;

use plotters::coord::Shift;
use plotters::prelude::*;

use super::reference;
use super::results::Results;
use super::transfer::Test;
use crate::kit::plot::{write_svg_and_png, Figure, PlotError};

const MODES: [(&str, RGBColor); 3] = [
    ("baseline", RGBColor(214, 39, 40)),
    ("cold", RGBColor(255, 127, 14)),
    ("warm", RGBColor(44, 160, 44)),
];

/// The x position of `mode`'s bar for file `index`.
fn bar_x(index: usize, mode: usize) -> (f64, f64) {
    let left = index as f64 - 0.36 + mode as f64 * 0.24;
    (left, left + 0.22)
}

/// The file under a bar group's x position (empty between groups).
fn file_label(names: &[String], x: &f64) -> String {
    let i = x.round();
    if (x - i).abs() < 0.01 && i >= 0.0 {
        names.get(i as usize).cloned().unwrap_or_default()
    } else {
        String::new()
    }
}

/// One test's plot: seconds per file above, WAN bytes below.
struct TestFigure<'a> {
    results: &'a Results,
    test: Test,
}

impl Figure for TestFigure<'_> {
    fn draw<DB: DrawingBackend>(&self, root: DrawingArea<DB, Shift>) -> Result<(), String>
    where
        DB::ErrorType: 'static,
    {
        let (results, test) = (self.results, self.test);
        root.fill(&WHITE).map_err(|e| e.to_string())?;
        let names = results.files(test);
        let (top, bottom) = root.split_vertically((root.dim_in_pixel().1 as f64 * 0.62) as u32);
        seconds_chart(&top, results, test, &names)?;
        wan_chart(&bottom, results, test, &names)?;
        root.present().map_err(|e| e.to_string())
    }
}

/// Seconds per file and mode, ours as bars, the reference's as rings.
fn seconds_chart<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    results: &Results,
    test: Test,
    names: &[String],
) -> Result<(), String>
where
    DB::ErrorType: 'static,
{
    let n = names.len().max(1);
    let label = |x: &f64| file_label(names, x);
    // Seconds.
    let mut all: Vec<f64> = results
        .rows
        .iter()
        .filter(|r| r.test == test.name())
        .flat_map(|r| [Some(r.seconds), r.sent_seconds].into_iter().flatten())
        .collect();
    all.extend(names.iter().flat_map(|f| {
        MODES
            .iter()
            .filter_map(|(m, _)| reference::seconds(test, f, m))
    }));
    // Room above the tallest bar for the legend (log scale: 1.5 decades).
    let max = all.iter().copied().fold(1.0, f64::max) * 30.0;
    let min = all.iter().copied().filter(|v| *v > 0.0).fold(max, f64::min) / 2.0;
    let min = min.clamp(0.001, 0.1);
    let mut chart = ChartBuilder::on(area)
        .caption(
            format!("{} {}: seconds per file", results.scenario, test.name()),
            ("sans-serif", 20),
        )
        .margin(10)
        .x_label_area_size(30)
        .y_label_area_size(60)
        .build_cartesian_2d(-0.5f64..(n as f64 - 0.5), (min..max).log_scale())
        .map_err(|e| e.to_string())?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(n + 1)
        .x_label_formatter(&label)
        .y_desc("seconds (log)")
        .draw()
        .map_err(|e| e.to_string())?;
    for (m, (mode, color)) in MODES.iter().enumerate() {
        let bars: Vec<Rectangle<(f64, f64)>> = names
            .iter()
            .enumerate()
            .filter_map(|(i, f)| {
                let r = results.find(test, f, mode)?;
                let (x0, x1) = bar_x(i, m);
                Some(Rectangle::new(
                    [(x0, min), (x1, r.seconds.max(min))],
                    color.filled(),
                ))
            })
            .collect();
        let color = *color;
        chart
            .draw_series(bars)
            .map_err(|e| e.to_string())?
            .label(format!("{mode} (ours)"))
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 12, y + 5)], color.filled()));
    }
    // The reference's figures as rings over the matching bars.
    let rings: Vec<Circle<(f64, f64), i32>> = names
        .iter()
        .enumerate()
        .flat_map(|(i, f)| {
            MODES.iter().enumerate().filter_map(move |(m, (mode, _))| {
                let v = reference::seconds(test, f, mode)?;
                let (x0, x1) = bar_x(i, m);
                Some(Circle::new(((x0 + x1) / 2.0, v), 4, BLACK.stroke_width(2)))
            })
        })
        .collect();
    chart
        .draw_series(rings)
        .map_err(|e| e.to_string())?
        .label("reference")
        .legend(|(x, y)| Circle::new((x + 6, y), 4, BLACK.stroke_width(2)));
    // Uploads: when the client's last byte was acknowledged (the
    // reference's FTP-client figure), as triangles over the bars.
    if test == Test::Upload {
        let marks: Vec<TriangleMarker<(f64, f64), i32>> = names
            .iter()
            .enumerate()
            .flat_map(|(i, f)| {
                MODES.iter().enumerate().filter_map(move |(m, (mode, _))| {
                    let v = results.find(test, f, mode)?.sent_seconds?;
                    let (x0, x1) = bar_x(i, m);
                    Some(TriangleMarker::new(
                        ((x0 + x1) / 2.0, v.max(min)),
                        5,
                        BLACK.filled(),
                    ))
                })
            })
            .collect();
        if !marks.is_empty() {
            chart
                .draw_series(marks)
                .map_err(|e| e.to_string())?
                .label("sent: last byte acknowledged (ours)")
                .legend(|(x, y)| TriangleMarker::new((x + 6, y), 5, BLACK.filled()));
        }
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .position(SeriesLabelPosition::UpperLeft)
        .draw()
        .map_err(|e| e.to_string())?;
    Ok(())
}

/// WAN bytes per file and mode as a share of the file.
fn wan_chart<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    results: &Results,
    test: Test,
    names: &[String],
) -> Result<(), String>
where
    DB::ErrorType: 'static,
{
    let n = names.len().max(1);
    let label = |x: &f64| file_label(names, x);
    // WAN bytes as a share of the file.
    let share = |f: &str, mode: &str| {
        results
            .find(test, f, mode)
            .filter(|r| r.file_bytes > 0)
            .map(|r| r.wan_bytes as f64 * 100.0 / r.file_bytes as f64)
    };
    let shares: Vec<f64> = names
        .iter()
        .flat_map(|f| MODES.iter().filter_map(|(m, _)| share(f, m)))
        .collect();
    let top_share = shares.iter().copied().fold(100.0, f64::max) * 2.0;
    // Down to the smallest share (a warm 2 MB file crosses as 0.05%).
    let floor = (shares.iter().copied().fold(0.1, f64::min) / 2.0).max(0.001);
    let mut chart = ChartBuilder::on(area)
        .caption("bytes across the WAN, % of the file", ("sans-serif", 16))
        .margin(10)
        .x_label_area_size(30)
        .y_label_area_size(60)
        .build_cartesian_2d(-0.5f64..(n as f64 - 0.5), (floor..top_share).log_scale())
        .map_err(|e| e.to_string())?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(n + 1)
        .x_label_formatter(&label)
        .y_desc("% of file (log)")
        .draw()
        .map_err(|e| e.to_string())?;
    for (m, (mode, color)) in MODES.iter().enumerate() {
        let bars: Vec<Rectangle<(f64, f64)>> = names
            .iter()
            .enumerate()
            .filter_map(|(i, f)| {
                let v = share(f, mode)?;
                let (x0, x1) = bar_x(i, m);
                Some(Rectangle::new(
                    [(x0, floor), (x1, v.max(floor))],
                    color.filled(),
                ))
            })
            .collect();
        chart.draw_series(bars).map_err(|e| e.to_string())?;
    }
    Ok(())
}

/// Writes `{scenario}-{test}.svg` and `.png` into `dir` for every test
/// with rows.
pub fn draw_all(results: &Results, dir: &Path) -> Result<(), PlotError> {
    for test in Test::ALL {
        if results.files(test).is_empty() {
            continue;
        }
        let width = 260 + 70 * results.files(test).len() as u32;
        let size = (width.max(700), 720);
        let stem = format!("{}-{}", results.scenario, test.name());
        write_svg_and_png(&TestFigure { results, test }, dir, &stem, size)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bars_of_a_file_do_not_overlap_its_neighbours() {
        let (a0, a1) = bar_x(0, 0);
        let (c0, c1) = bar_x(0, 2);
        let (n0, _) = bar_x(1, 0);
        assert!(a0 > -0.5 && a1 < c0 && c1 < 0.5 && c1 < n0);
    }

    #[test]
    fn draws_every_test_as_svg_and_png() -> Result<(), PlotError> {
        use crate::waas::results::{row, sample, sample_results};
        let mut rows = Vec::new();
        for test in Test::ALL {
            for (mode, seconds) in [("baseline", 45.0), ("cold", 20.0), ("warm", 0.2)] {
                let measured = crate::waas::results::Sample {
                    sent_seconds: (test == Test::Upload).then_some(seconds / 100.0),
                    ..sample(seconds, 1_000, (seconds * 50_000.0) as u64)
                };
                rows.extend(row(test, "2M.xls", 2_108_928, mode, &[measured], vec![]));
            }
        }
        let results = sample_results(rows);
        let dir = std::env::temp_dir().join(format!("waas-plot-{}", std::process::id()));
        let _ = std::fs::create_dir_all(&dir);
        draw_all(&results, &dir)?;
        for test in Test::ALL {
            for ext in ["svg", "png"] {
                let file = dir.join(format!("waas-3g-{}.{ext}", test.name()));
                let len = std::fs::metadata(&file).map(|m| m.len()).unwrap_or(0);
                assert!(len > 1000, "{}", file.display());
            }
            // Only the upload figure carries the sender's times.
            let svg = std::fs::read_to_string(dir.join(format!("waas-3g-{}.svg", test.name())))
                .unwrap_or_default();
            assert_eq!(
                svg.contains("sent: last byte acknowledged"),
                test == Test::Upload,
                "{}",
                test.name()
            );
        }
        let _ = std::fs::remove_dir_all(&dir);
        Ok(())
    }
}
