//! `report.md` and the summary of the `sites` scenario.

use std::fmt::Write as _;

use super::matrix::Mode;
use super::results::{CellRow, Results, SiteRow};
use crate::kit::{markdown, Align, Table};

/// The mean goodput per site of a cell, Mbit/s, and the slowest site's.
fn per_site(results: &Results, cell: &CellRow) -> Option<(f64, f64)> {
    let rates: Vec<f64> = rows_of(results, cell).map(|r| r.goodput_mbps).collect();
    if rates.is_empty() {
        return None;
    }
    let mean = rates.iter().sum::<f64>() / rates.len() as f64;
    let min = rates.iter().copied().fold(f64::INFINITY, f64::min);
    Some((mean, min))
}

fn rows_of<'a>(results: &'a Results, cell: &'a CellRow) -> impl Iterator<Item = &'a SiteRow> {
    results
        .rows
        .iter()
        .filter(move |r| r.sites == cell.sites && r.mode == cell.mode)
}

/// wanopt's mean goodput per site over direct-bbr's, for `sites` sites.
fn ratio(results: &Results, sites: u8) -> Option<f64> {
    let mean = |mode: Mode| {
        results
            .cells
            .iter()
            .find(|c| c.sites == sites && c.mode == mode)
            .and_then(|c| per_site(results, c))
            .map(|(mean, _)| mean)
    };
    match (mean(Mode::Wanopt), mean(Mode::DirectBbr)) {
        (Some(w), Some(d)) if d > 0.0 => Some(w / d),
        _ => None,
    }
}

fn or_dash(value: Option<f64>, decimals: usize) -> String {
    value.map_or_else(|| "-".to_string(), |v| format!("{v:.decimals$}"))
}

/// `report.md`.
pub fn markdown(results: &Results) -> String {
    let mut md = String::new();
    let _ = writeln!(md, "# sites: several branch sites at once\n");
    let _ = writeln!(
        md,
        "Every site's link: {} Mbit/s, RTT {} ms, a 1 BDP queue. Each site's client \
         downloads {} MB from the one server, all sites at once, one stream each; \
         payloads are pseudo-random and data reduction is off. `direct-bbr`: routed, \
         kernel BBR at both ends. `wanopt`: through each site's edge and the one core. \
         Core CPU is user + system time of the `wanopt core` process over the \
         transfers (`/proc/PID/stat`), per GB (10^9 bytes) of payload received.{}\n",
        results.link_mbit,
        results.rtt_ms,
        results.bytes_per_site / 1_000_000,
        if results.quick { " Quick run." } else { "" }
    );
    let _ = writeln!(md, "## Per cell\n");
    let mut cells = site_columns(&[
        "mean Mbit/s per site",
        "slowest site",
        "of link",
        "wanopt / direct",
        "payload MB",
        "core CPU s",
        "core CPU s/GB",
    ]);
    for cell in &results.cells {
        let rates = per_site(results, cell);
        cells.row([
            cell.sites.to_string(),
            cell.mode.name().to_string(),
            or_dash(rates.map(|r| r.0), 2),
            or_dash(rates.map(|r| r.1), 2),
            or_dash(rates.map(|r| r.0 / f64::from(results.link_mbit)), 3),
            match cell.mode {
                Mode::Wanopt => or_dash(ratio(results, cell.sites), 3),
                Mode::DirectBbr => String::new(),
            },
            format!("{:.1}", cell.bytes as f64 / 1e6),
            or_dash(cell.core_cpu_seconds, 2),
            or_dash(cell.core_cpu_seconds_per_gb, 1),
        ]);
    }
    md.push_str(&cells.to_string());
    let _ = writeln!(md, "\n## Each site\n");
    let mut sites = site_columns(&["site", "Mbit/s", "of link", "seconds"]);
    for row in &results.rows {
        sites.row([
            row.sites.to_string(),
            row.mode.name().to_string(),
            row.site.to_string(),
            format!("{:.2}", row.goodput_mbps),
            format!("{:.3}", row.of_link),
            format!("{:.2}", row.seconds),
        ]);
    }
    md.push_str(&sites.to_string());
    if !results.skipped.is_empty() {
        let skipped = results.skipped.iter().map(|s| {
            let (sites, mode, reason) = (s.sites, s.mode.name(), &s.reason);
            format!("{sites} site(s) {mode}: {reason}")
        });
        md.push('\n');
        markdown::list(&mut md, "Skipped", skipped);
    }
    if !results.flow_resets.is_empty() {
        md.push('\n');
        markdown::flow_resets(
            &mut md,
            "Flow resets (the run FAILED)",
            &results.flow_resets,
        );
    }
    md
}

/// A table of a cell's sites and mode, then `figures` (right-aligned).
fn site_columns(figures: &[&str]) -> Table {
    let mut table = Table::new([("sites", Align::Right), ("mode", Align::Left)]).spaced_rule();
    for heading in figures {
        table = table.column(*heading, Align::Right);
    }
    table
}

/// One line per cell, for stdout.
pub fn summary(results: &Results) -> String {
    let mut out = String::new();
    for cell in &results.cells {
        let rates: Vec<String> = rows_of(results, cell)
            .map(|r| format!("{:.1}", r.goodput_mbps))
            .collect();
        let _ = writeln!(
            out,
            "{} site(s) {:<10} per site {} Mbit/s of {}{}",
            cell.sites,
            cell.mode.name(),
            rates.join("/"),
            results.link_mbit,
            match cell.core_cpu_seconds_per_gb {
                Some(per_gb) => format!(
                    ", core {:.2} CPU s, {per_gb:.1} CPU s/GB",
                    cell.core_cpu_seconds.unwrap_or_default()
                ),
                None => String::new(),
            }
        );
    }
    for s in &results.skipped {
        let _ = writeln!(
            out,
            "{} site(s) {} skipped: {}",
            s.sites,
            s.mode.name(),
            s.reason
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(sites: u8, mode: Mode, site: u8, mbps: f64) -> SiteRow {
        SiteRow {
            sites,
            mode,
            site,
            bytes: 20_000_000,
            seconds: 8.0,
            goodput_mbps: mbps,
            of_link: mbps / 20.0,
        }
    }

    fn cell(sites: u8, mode: Mode, cpu: Option<f64>) -> CellRow {
        CellRow {
            sites,
            mode,
            bytes: 20_000_000 * u64::from(sites),
            seconds: 8.5,
            core_cpu_seconds: cpu,
            core_cpu_seconds_per_gb: cpu.and_then(|c| {
                crate::multisite::results::seconds_per_gb(c, 20_000_000 * u64::from(sites))
            }),
        }
    }

    #[test]
    fn the_report_compares_wanopt_with_direct_per_site_count() {
        let results = Results {
            scenario: "sites".into(),
            link_mbit: 20,
            rtt_ms: 40,
            bytes_per_site: 20_000_000,
            rows: vec![
                row(2, Mode::DirectBbr, 1, 18.0),
                row(2, Mode::DirectBbr, 2, 16.0),
                row(2, Mode::Wanopt, 1, 19.0),
                row(2, Mode::Wanopt, 2, 19.0),
            ],
            cells: vec![
                cell(2, Mode::DirectBbr, None),
                cell(2, Mode::Wanopt, Some(0.8)),
            ],
            ..Results::default()
        };
        assert_eq!(
            ratio(&results, 2).map(|r| (r * 1000.0).round()),
            Some(1118.0)
        );
        let md = markdown(&results);
        assert!(
            md.contains("| 2 | wanopt | 19.00 | 19.00 | 0.950 | 1.118 | 40.0 | 0.80 | 20.0 |"),
            "{md}"
        );
        assert!(
            md.contains("| 2 | direct-bbr | 17.00 | 16.00 | 0.850 |  | 40.0 | - | - |"),
            "{md}"
        );
        let summary = summary(&results);
        assert!(
            summary.contains("per site 19.0/19.0 Mbit/s of 20, core 0.80 CPU s, 20.0 CPU s/GB"),
            "{summary}"
        );
    }
}
