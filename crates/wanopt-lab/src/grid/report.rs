//! The grid's `report.md` and the table `lab run` prints at its end.

use std::collections::BTreeSet;
use std::fmt::Write as _;

use super::results::{Results, Row};
use super::spec::TCP_OPT_REFERENCE;
use crate::kit::{markdown, Align, Table};

fn find<'a>(
    results: &'a Results,
    rtt: u64,
    middlebox: &str,
    profile: &str,
    mode: &str,
) -> Option<&'a Row> {
    results.rows.iter().find(|r| {
        r.rtt_ms == rtt && r.middlebox == middlebox && r.profile == profile && r.mode == mode
    })
}

/// Whether any point had middlebox rules (the tables then name them).
fn has_middleboxes(results: &Results) -> bool {
    results.rows.iter().any(|r| !r.middlebox.is_empty())
        || results.skipped.iter().any(|s| !s.middlebox.is_empty())
}

/// A point's rules for a table cell: `none`, or the rules in backticks.
fn rules_cell(rules: &str) -> String {
    if rules.is_empty() {
        "none".into()
    } else {
        format!("`{rules}`")
    }
}

/// `RTT 100 ms, linux, wanopt` (with the middlebox when there is one).
fn point_text(rtt: u64, middlebox: &str, profile: &str, mode: &str) -> String {
    if middlebox.is_empty() {
        format!("RTT {rtt} ms, {profile}, {mode}")
    } else {
        format!("RTT {rtt} ms, middlebox `{middlebox}`, {profile}, {mode}")
    }
}

fn reference(results: &Results, rtt: u64) -> Option<(f64, f64)> {
    if results.scenario != "tcp-opt" {
        return None;
    }
    TCP_OPT_REFERENCE
        .iter()
        .find(|(r, _, _)| *r == rtt)
        .map(|(_, off, on)| (*off, *on))
}

fn cell(row: Option<&Row>) -> (String, String) {
    match row {
        Some(r) => (
            format!("{:.1}", r.throughput_mbps),
            format!("{:.1}", r.seconds),
        ),
        None => ("n/a".into(), "n/a".into()),
    }
}

/// The comparison table: one line per (RTT, profile), direct and wanopt side
/// by side with their ratio, and the reference's figures when the scenario
/// is `tcp-opt`.
pub fn table(results: &Results) -> String {
    // In the grid's order of middleboxes, not alphabetical.
    let order = |rules: &str| {
        results
            .rows
            .iter()
            .map(|r| r.middlebox.as_str())
            .chain(results.skipped.iter().map(|s| s.middlebox.as_str()))
            .position(|m| m == rules)
            .unwrap_or(0)
    };
    let mut keys: BTreeSet<(u64, usize, String, String)> = BTreeSet::new();
    for r in &results.rows {
        keys.insert((
            r.rtt_ms,
            order(&r.middlebox),
            r.middlebox.clone(),
            r.profile.clone(),
        ));
    }
    for s in &results.skipped {
        keys.insert((
            s.rtt_ms,
            order(&s.middlebox),
            s.middlebox.clone(),
            s.profile.clone(),
        ));
    }
    let middleboxes = has_middleboxes(results);
    // The reference's columns only where there is a reference.
    let referenced = results.scenario == "tcp-opt";
    let mut table = point_columns(middleboxes);
    for heading in [
        "direct Mbit/s",
        "direct s",
        "wanopt Mbit/s",
        "wanopt s",
        "wanopt/direct",
    ] {
        table = table.column(heading, Align::Right);
    }
    if referenced {
        for heading in [
            "reference disabled Mbit/s",
            "reference enabled Mbit/s",
            "reference ratio",
        ] {
            table = table.column(heading, Align::Right);
        }
    }
    for (rtt, _, middlebox, profile) in keys {
        let direct = find(results, rtt, &middlebox, &profile, "direct");
        let wanopt = find(results, rtt, &middlebox, &profile, "wanopt");
        let (dm, ds) = cell(direct);
        let (wm, ws) = cell(wanopt);
        let ratio = match (direct, wanopt) {
            (Some(d), Some(w)) if d.throughput_mbps > 0.0 => {
                format!("{:.2}", w.throughput_mbps / d.throughput_mbps)
            }
            _ => "n/a".into(),
        };
        let mut cells = point_cells(rtt, middleboxes.then_some(middlebox.as_str()), &profile);
        cells.extend([dm, ds, wm, ws, ratio]);
        match (referenced, reference(results, rtt)) {
            (false, _) => {}
            (true, Some((off, on))) => {
                cells.extend([off.to_string(), on.to_string(), format!("{:.2}", on / off)])
            }
            // No reference at this RTT: its three cells, empty, as this
            // table has always written them (`| | | |`).
            (true, None) => cells.push("| |".into()),
        }
        table.row(cells);
    }
    table.to_string()
}

/// The table's first columns: RTT, the middlebox (when any point had
/// one), the profile.
fn point_columns(middleboxes: bool) -> Table {
    let table = Table::new([("RTT (ms)", Align::Right)]);
    let table = if middleboxes {
        table.column("middlebox", Align::Left)
    } else {
        table
    };
    table.column("profile", Align::Left)
}

/// A row's cells under [`point_columns`].
fn point_cells(rtt: u64, middlebox: Option<&str>, profile: &str) -> Vec<String> {
    let mut cells = vec![rtt.to_string()];
    cells.extend(middlebox.map(rules_cell));
    cells.push(profile.to_string());
    cells
}

/// The whole `report.md`.
pub fn markdown(results: &Results) -> String {
    let spec = &results.spec;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "# Scenario `{}`{}\n",
        results.scenario,
        markdown::quick(results.quick)
    );
    if !results.flow_resets.is_empty() {
        let _ = writeln!(
            out,
            "## FLOW RESETS: this run FAILED\n\nThe nodes reset {} flow(s), from their logs \
             (`logs/`):\n",
            results.flow_resets.len()
        );
        for line in &results.flow_resets {
            let _ = writeln!(out, "- `{}`", line.replace('`', "'"));
        }
        out.push('\n');
    }
    if results.scenario == "tcp-opt" {
        let _ = writeln!(
            out,
            "Reproduces the reference experiment (Cisco SD-WAN TCP Optimization): a 250 Mbit/s \
             bottleneck, `iperf -n 100MB -P 4 -R` at several delays, each point run 5 times, \
             highest and lowest dropped, the rest averaged. Here \"disabled\" is our `direct` path \
             (edge and core only route) and \"enabled\" is `wanopt` (split TCP through the wanopt \
             edge and core). The reference's \"Delay\" column is taken as the round-trip time.\n"
        );
    }
    let _ = writeln!(
        out,
        "- Link (each direction; the RTT is the row's): `{}`",
        results
            .rows
            .first()
            .map(|r| r
                .link_down
                .split_whitespace()
                .skip(2)
                .collect::<Vec<_>>()
                .join(" "))
            .unwrap_or_else(|| "see results.json".into())
    );
    let _ = writeln!(
        out,
        "- Link options: `{}`",
        serde_json::to_string(&spec.link).unwrap_or_default()
    );
    let _ = writeln!(
        out,
        "- Workload: {} streams x {} per stream, {:?}; throughput = payload bits / wall time from the first connect to the last byte",
        spec.workload.streams, spec.workload.bytes, spec.workload.direction
    );
    let _ = writeln!(
        out,
        "- Runs per point: {} ({})",
        spec.runs,
        if spec.runs >= 3 {
            "highest and lowest dropped, rest averaged"
        } else {
            "mean"
        }
    );
    let _ = writeln!(
        out,
        "- wanopt nodes: started fresh at each point, data reduction {}; {}",
        if spec.node.reduce {
            "on"
        } else {
            "off (`--no-reduce`)"
        },
        if spec.node.warm_up {
            "one unmeasured warm-up transfer (at most 10 MB per stream) before the measured runs, \
             since a deployed tunnel is long-lived (the direct path gets none: each TCP connection \
             starts cold, and the endpoints do not cache metrics)"
        } else {
            "no warm-up: the first run of each point meets a cold tunnel (BBR startup)"
        }
    );
    let _ = writeln!(
        out,
        "- Endpoint TCP settings per profile (read back from the server namespace): `{}`\n",
        results.endpoints
    );
    let _ = writeln!(out, "## Throughput\n");
    out.push_str(&table(results));
    out.push('\n');
    if !results.skipped.is_empty() {
        let skipped = results.skipped.iter().map(|s| {
            let point = point_text(s.rtt_ms, &s.middlebox, &s.profile, &s.mode);
            format!("{point}: {}", s.reason)
        });
        markdown::list(&mut out, "Not measured", skipped);
        out.push('\n');
    }
    let _ = writeln!(out, "## Every run\n");
    let middleboxes = has_middleboxes(results);
    let mut runs = point_columns(middleboxes)
        .column("mode", Align::Left)
        .column("Mbit/s per run", Align::Left)
        .column("seconds per run", Align::Left);
    for r in &results.rows {
        let middlebox = middleboxes.then_some(r.middlebox.as_str());
        let mut cells = point_cells(r.rtt_ms, middlebox, &r.profile);
        cells.extend([
            r.mode.clone(),
            format!("{:?}", r.samples_mbps),
            format!("{:?}", r.samples_seconds),
        ]);
        runs.row(cells);
    }
    out.push_str(&runs.to_string());
    let failed: Vec<&Row> = results
        .rows
        .iter()
        .filter(|r| !r.failed_runs.is_empty())
        .collect();
    if !failed.is_empty() {
        let _ = writeln!(out, "\n## Failed runs (not averaged)\n");
        for r in failed {
            for f in &r.failed_runs {
                let _ = writeln!(
                    out,
                    "- {}: {}",
                    point_text(r.rtt_ms, &r.middlebox, &r.profile, &r.mode),
                    f
                );
            }
        }
    }
    let _ = writeln!(out, "\n![throughput vs RTT](throughput.svg)");
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::grid::spec::{self, ScenarioSpec};

    /// A one-run row at RTT 100 ms, `linux`, 1 s.
    fn row(middlebox: &str, mode: &str, mbps: f64) -> Row {
        Row {
            rtt_ms: 100,
            profile: "linux".into(),
            mode: mode.into(),
            middlebox: middlebox.into(),
            throughput_mbps: mbps,
            seconds: 1.0,
            runs: 1,
            samples_mbps: vec![mbps],
            samples_seconds: vec![1.0],
            method: "mean".into(),
            link_up: String::new(),
            link_down: String::new(),
            workload: String::new(),
            failed_runs: vec![],
        }
    }

    #[test]
    fn results_json_keeps_the_interface_contract() {
        let row = Row {
            profile: "legacy".into(),
            seconds: 26.1,
            runs: 5,
            samples_mbps: vec![],
            samples_seconds: vec![],
            ..row("", "wanopt", 123.4)
        };
        let results = Results {
            scenario: "tcp-opt".into(),
            rows: vec![row],
            skipped: vec![],
            quick: true,
            spec: spec::tcp_opt(true),
            endpoints: serde_json::Value::Null,
            flow_resets: Vec::new(),
        };
        let json = serde_json::to_value(&results).unwrap_or_default();
        assert_eq!(json["scenario"], "tcp-opt");
        let row = &json["rows"][0];
        assert_eq!(row["rtt_ms"], 100);
        assert_eq!(row["profile"], "legacy");
        assert_eq!(row["mode"], "wanopt");
        assert_eq!(row["throughput_mbps"], 123.4);
        assert_eq!(row["seconds"], 26.1);
        assert_eq!(row["runs"], 5);
        // No middlebox, no key: tcp-opt's rows are as they were.
        assert!(row.get("middlebox").is_none(), "{row}");
        let table = table(&results);
        assert!(
            table.contains("| 100 | legacy | n/a | n/a | 123.4 | 26.1 | n/a | 71 | 131 | 1.85 |"),
            "{table}"
        );
    }

    #[test]
    fn a_grid_of_middleboxes_is_reported_per_point() {
        let spec: ScenarioSpec = toml::from_str(
            r#"
            name = "brokenness"
            [grid]
            rtt = ["100ms"]
            middlebox = ["", "strip-wscale"]
            "#,
        )
        .unwrap_or_else(|e| panic!("{e}"));
        let results = Results {
            scenario: "brokenness".into(),
            rows: vec![
                row("", "direct", 90.0),
                row("", "wanopt", 92.0),
                row("strip-wscale", "direct", 5.0),
                row("strip-wscale", "wanopt", 90.0),
            ],
            skipped: vec![],
            quick: false,
            spec,
            endpoints: serde_json::Value::Null,
            flow_resets: Vec::new(),
        };
        let table = table(&results);
        let lines: Vec<&str> = table.lines().collect();
        assert!(
            lines[0].starts_with("| RTT (ms) | middlebox | profile |"),
            "{table}"
        );
        // In the grid's order: no middlebox first.
        assert!(
            lines[2].starts_with("| 100 | none | linux | 90.0 |"),
            "{table}"
        );
        assert!(
            lines[3] == "| 100 | `strip-wscale` | linux | 5.0 | 1.0 | 90.0 | 1.0 | 18.00 |",
            "{table}"
        );
        let json = serde_json::to_value(&results).unwrap_or_default();
        assert_eq!(json["rows"][2]["middlebox"], "strip-wscale");
        assert!(json["rows"][0].get("middlebox").is_none());
        let md = markdown(&results);
        assert!(
            md.contains("| 100 | `strip-wscale` | linux | wanopt | [90.0] |"),
            "{md}"
        );
    }
}
