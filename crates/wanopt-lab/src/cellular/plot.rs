//! The scenario's plots: per trace, the download's rate and the ping's
//! round trip over time, one line per mode (the first buffer, run 1):
//! `cellular-TRACE-rate` and `cellular-TRACE-ping`, `.svg` and `.png`.

use std::path::{Path, PathBuf};

use super::matrix::MODES;
use super::results::{Results, Row, RATE_BIN_S};
use crate::kit::plot::{mode_colour, Line, LineChart, PlotError};

/// The rows drawn for `trace`: its first buffer, run 1, one per mode.
fn drawn<'a>(results: &'a Results, trace: &str) -> Vec<&'a Row> {
    let Some(buffer) = results
        .rows
        .iter()
        .find(|r| r.trace == trace)
        .map(|r| &r.buffer)
    else {
        return Vec::new();
    };
    MODES
        .iter()
        .filter_map(|mode| {
            results.rows.iter().find(|r| {
                r.trace == trace && &r.buffer == buffer && r.mode == mode.name() && r.run == 1
            })
        })
        .collect()
}

fn stem(trace: &str, what: &str) -> String {
    format!("cellular-{trace}-{what}")
}

/// The plot files a run with `results` writes.
pub fn files(results: &Results) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for trace in &results.traces {
        if drawn(results, &trace.name).is_empty() {
            continue;
        }
        for what in ["rate", "ping"] {
            for ext in ["svg", "png"] {
                out.push(PathBuf::from(format!("{}.{ext}", stem(&trace.name, what))));
            }
        }
    }
    out
}

/// Writes every trace's two plots into `dir`.
pub fn over_time(results: &Results, dir: &Path) -> Result<(), PlotError> {
    for trace in &results.traces {
        let rows = drawn(results, &trace.name);
        if rows.is_empty() {
            continue;
        }
        let buffer = &rows[0].buffer;
        let rate: Vec<Line> = rows
            .iter()
            .map(|r| Line {
                name: r.mode.clone(),
                colour: mode_colour(&r.mode),
                width: 2,
                points: r
                    .rate_series
                    .iter()
                    .enumerate()
                    .map(|(i, v)| ((i + 1) as f64 * RATE_BIN_S, *v))
                    .collect(),
            })
            .collect();
        LineChart {
            caption: format!("{}, {buffer} buffer: download rate", trace.name),
            x_desc: "time (s)",
            y_desc: "Mbit/s (1 s bins)",
            y_floor: trace.down_mbit_s,
            lines: rate,
        }
        .write(dir, &stem(&trace.name, "rate"))?;
        let ping: Vec<Line> = rows
            .iter()
            .map(|r| Line {
                name: r.mode.clone(),
                colour: mode_colour(&r.mode),
                width: 1,
                points: r.ping_series.clone(),
            })
            .collect();
        LineChart {
            caption: format!("{}, {buffer} buffer: ping beside the download", trace.name),
            x_desc: "time (s)",
            y_desc: "round trip (ms)",
            y_floor: 200.0,
            lines: ping,
        }
        .write(dir, &stem(&trace.name, "ping"))?;
    }
    Ok(())
}
