//! `realtime-delay.svg`/`.png` and `realtime-loss.svg`/`.png`: one-way
//! delay (the highest per 0.5 s) and delivered loss (per second) over a
//! cell's time, one line per mode, stream and direction, at link 1's 5%
//! random loss
//! (or the first condition measured); with `link1-down` cells, the same
//! as `realtime-delay-link1-down` and `realtime-loss-link1-down`, the cut
//! and the restore marked.

use std::path::Path;

use plotters::style::RGBColor;

use super::measure::Bin;
use super::results::{CellSeries, Results};
use crate::kit::plot::{Line, LineChart, PlotError};

/// A line's colour: a hue per mode, darkest for voice down, lightest
/// for video.
fn colour(s: &CellSeries) -> RGBColor {
    let shades = match s.mode.as_str() {
        "direct" => [(90, 60, 50), (150, 110, 100), (196, 156, 148)],
        "wanopt-fec" => [(180, 20, 20), (240, 90, 90), (255, 160, 150)],
        _ => [(30, 120, 30), (80, 180, 70), (160, 225, 140)],
    };
    let (r, g, b) = match (s.stream.as_str(), s.direction.as_str()) {
        ("voice", "down") => shades[0],
        ("voice", _) => shades[1],
        _ => shades[2],
    };
    RGBColor(r, g, b)
}

/// Bins merged `n` at a time: (middle, sent, lost, highest delay).
fn merged(bins: &[Bin], n: usize) -> Vec<(f64, u32, u32, Option<f64>)> {
    bins.chunks(n.max(1))
        .map(|c| {
            let width = c.last().map_or(0.0, |b| b.t_s) - c[0].t_s;
            (
                c[0].t_s + (width + 0.1) / 2.0,
                c.iter().map(|b| b.sent).sum(),
                c.iter().map(|b| b.lost).sum(),
                c.iter().filter_map(|b| b.delay_max_ms).reduce(f64::max),
            )
        })
        .collect()
}

/// The series the plots of `event` show: the 5% random condition's, or
/// the first condition's.
fn picked<'a>(series: &'a [CellSeries], event: &str) -> Vec<&'a CellSeries> {
    let of_event: Vec<&CellSeries> = series.iter().filter(|s| s.event == event).collect();
    let Some(first) = of_event.first() else {
        return Vec::new();
    };
    let (loss, burst) = of_event
        .iter()
        .find(|s| s.loss_pct == 5.0 && !s.burst)
        .map_or((first.loss_pct, first.burst), |s| (s.loss_pct, s.burst));
    of_event
        .into_iter()
        .filter(|s| s.loss_pct == loss && s.burst == burst)
        .collect()
}

/// Vertical lines at the marks, up to `top`.
fn marks(series: &[&CellSeries], top: f64) -> Vec<Line> {
    let Some(s) = series.iter().find(|s| !s.marks.is_empty()) else {
        return Vec::new();
    };
    s.marks
        .iter()
        .map(|(name, t)| Line {
            name: name.clone(),
            colour: RGBColor(0, 0, 0),
            width: 1,
            points: vec![(*t, 0.0), (*t, top)],
        })
        .collect()
}

fn lines(series: &[&CellSeries], value: impl Fn(&CellSeries) -> Vec<(f64, f64)>) -> Vec<Line> {
    series
        .iter()
        .map(|s| Line {
            name: format!("{} {} {}", s.mode, s.stream, s.direction),
            colour: colour(s),
            width: if s.stream == "voice" { 2 } else { 1 },
            points: value(s),
        })
        .filter(|l| !l.points.is_empty())
        .collect()
}

/// Writes the plots into `dir`; returns the stems written.
pub fn over_time(results: &Results, dir: &Path) -> Result<Vec<String>, PlotError> {
    let mut written = Vec::new();
    for event in ["none", "link1-down"] {
        let series = picked(&results.series, event);
        let Some(first) = series.first() else {
            continue;
        };
        let suffix = if event == "none" {
            String::new()
        } else {
            format!("-{event}")
        };
        let condition = format!(
            "link 1 {}% {}{}",
            first.loss_pct,
            if first.burst { "bursts" } else { "loss" },
            if event == "none" {
                String::new()
            } else {
                format!(", {event}")
            }
        );
        let mut delay = lines(&series, |s| {
            merged(&s.bins, 5)
                .into_iter()
                .filter_map(|(t, _, _, d)| d.map(|d| (t, d)))
                .collect()
        });
        let top = delay
            .iter()
            .flat_map(|l| l.points.iter().map(|p| p.1))
            .fold(60.0, f64::max);
        delay.extend(marks(&series, top));
        LineChart {
            caption: format!("realtime: one-way delay, highest per 0.5 s ({condition})"),
            x_desc: "time (s)",
            y_desc: "one-way delay (ms)",
            y_floor: 60.0,
            lines: delay,
        }
        .write(dir, &format!("realtime-delay{suffix}"))?;
        let mut loss = lines(&series, |s| {
            merged(&s.bins, 10)
                .into_iter()
                .filter(|(_, sent, _, _)| *sent > 0)
                .map(|(t, sent, lost, _)| (t, f64::from(lost) * 100.0 / f64::from(sent)))
                .collect()
        });
        loss.extend(marks(&series, 100.0));
        LineChart {
            caption: format!("realtime: delivered loss per second ({condition})"),
            x_desc: "time (s)",
            y_desc: "delivered loss (%)",
            y_floor: 10.0,
            lines: loss,
        }
        .write(dir, &format!("realtime-loss{suffix}"))?;
        written.push(format!("realtime-delay{suffix}"));
        written.push(format!("realtime-loss{suffix}"));
    }
    Ok(written)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn draws_delay_and_loss_over_time_per_mode() {
        let bins: Vec<Bin> = (0..50)
            .map(|i| Bin {
                t_s: f64::from(i) / 10.0,
                sent: 5,
                lost: u32::from(i % 7 == 0),
                delay_p50_ms: Some(20.0),
                delay_max_ms: Some(20.0 + f64::from(i % 5)),
            })
            .collect();
        let cell = |mode: &str, event: &str, stream: &str| CellSeries {
            mode: mode.into(),
            event: event.into(),
            loss_pct: 5.0,
            burst: false,
            stream: stream.into(),
            direction: "down".into(),
            marks: if event == "none" {
                vec![]
            } else {
                vec![("link 1 down".into(), 1.5), ("link 1 up".into(), 3.0)]
            },
            bins: bins.clone(),
        };
        let results = Results {
            scenario: "realtime".into(),
            quick: true,
            settings: serde_json::Value::Null,
            rows: vec![],
            skipped: vec![],
            flow_resets: vec![],
            series: vec![
                cell("direct", "none", "voice"),
                cell("wanopt-fec", "none", "voice"),
                cell("wanopt-fec", "none", "video"),
                cell("wanopt-fec", "link1-down", "voice"),
            ],
        };
        let dir = std::env::temp_dir().join(format!("rt-plot-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{e}"));
        let written = over_time(&results, &dir).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(written.len(), 4, "{written:?}");
        let svg = std::fs::read_to_string(dir.join("realtime-delay.svg")).unwrap_or_default();
        for name in [
            "direct voice down",
            "wanopt-fec voice down",
            "wanopt-fec video down",
        ] {
            assert!(svg.contains(name), "{name} missing from the legend");
        }
        let cut =
            std::fs::read_to_string(dir.join("realtime-loss-link1-down.svg")).unwrap_or_default();
        assert!(cut.contains("link 1 down") && cut.contains("link 1 up"));
        assert!(std::fs::metadata(dir.join("realtime-loss.png")).map_or(0, |m| m.len()) > 1_000);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
