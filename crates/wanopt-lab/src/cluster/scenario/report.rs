//! `report.md` and the summary of the `cluster` scenario: the tables, and
//! each goal with what was measured against it.

use std::fmt::Write as _;

use super::results::{Phase, Results, Row};
use crate::kit::{Align, Table};

/// The goals: steady scaling through 3 replicas against 1.
pub const SCALING_GOAL: f64 = 2.7;
/// A moved site's first new flow after the kill, ms.
pub const FIRST_FLOW_GOAL_MS: f64 = 3000.0;
/// The other sites' rate after the kill against before.
pub const KEEP_GOAL: f64 = 0.9;
/// A repeated file's bytes on the link against its size, after a redial
/// back to the replica that holds it ("crosses as references").
pub const WARM_GOAL: f64 = 0.1;

fn dash(value: Option<f64>, decimals: usize) -> String {
    value.map_or_else(|| "-".into(), |v| format!("{v:.decimals$}"))
}

fn median(mut values: Vec<f64>) -> Option<f64> {
    values.sort_by(f64::total_cmp);
    let n = values.len();
    match n {
        0 => None,
        _ if n % 2 == 1 => Some(values[n / 2]),
        _ => Some((values[n / 2 - 1] + values[n / 2]) / 2.0),
    }
}

/// Each goal as a line: `met`/`MISSED`/`not measured`, the figure.
pub fn goals(results: &Results) -> Vec<(bool, String)> {
    let mut lines = Vec::new();
    let measured = |ok: bool, text: String| (ok, text);
    match results.scaling(3) {
        Some(x) => lines.push(measured(
            x >= SCALING_GOAL,
            format!(
                "steady: 3 replicas carry {x:.2}x what 1 carries (goal: at least {SCALING_GOAL}x)"
            ),
        )),
        None => lines.push((false, "steady: scaling not measured".into())),
    }
    let failover: Vec<&Row> = results.rows_of(Phase::Failover).collect();
    if failover.is_empty() {
        lines.push((false, "failover: not measured".into()));
    } else {
        let firsts: Vec<Option<f64>> = failover
            .iter()
            .filter(|r| r.replica == results.killed)
            .map(|r| r.first_flow_ms)
            .collect();
        let worst = firsts
            .iter()
            .map(|f| f.unwrap_or(f64::INFINITY))
            .fold(0.0, f64::max);
        let med = median(firsts.iter().flatten().copied().collect());
        lines.push(measured(
            !firsts.is_empty() && worst <= FIRST_FLOW_GOAL_MS,
            format!(
                "failover: the {} site(s) of the killed replica had a new flow after {} ms median, {} ms at worst (goal: within {FIRST_FLOW_GOAL_MS:.0})",
                firsts.len(),
                dash(med, 0),
                if worst.is_finite() { format!("{worst:.0}") } else { "never".into() }
            ),
        ));
        let others: Vec<&&Row> = failover
            .iter()
            .filter(|r| r.replica != results.killed)
            .collect();
        let resets: u32 = others.iter().map(|r| r.resets).sum();
        let keep: Vec<f64> = others
            .iter()
            .filter_map(|r| Some(r.mbit_s? / r.mbit_s_before?))
            .collect();
        let lowest = keep.iter().copied().fold(f64::INFINITY, f64::min);
        lines.push(measured(
            resets == 0 && keep.len() == others.len() && lowest >= KEEP_GOAL,
            format!(
                "failover: the other {} sites: {resets} reset(s), their rate after the kill {} of before at the lowest (goal: no reset, at least {KEEP_GOAL})",
                others.len(),
                if lowest.is_finite() { format!("{lowest:.2}") } else { "-".into() }
            ),
        ));
    }
    let added: Vec<&Row> = results.rows_of(Phase::Added).collect();
    if added.is_empty() {
        lines.push((false, "added: not measured".into()));
    } else {
        let resets: u32 = added.iter().map(|r| r.resets).sum();
        let failed = added.iter().filter(|r| r.failure.is_some()).count();
        let no_flow = added.iter().filter(|r| r.first_flow_ms.is_none()).count();
        lines.push(measured(
            resets == 0 && failed == 0 && no_flow == 0,
            format!(
                "added: {} downloads, {failed} incomplete, {resets} reset(s); a new flow afterwards from {} of {} sites (goal: all complete, no reset, every site)",
                added.len(),
                added.len() - no_flow,
                added.len()
            ),
        ));
    }
    match &results.redials {
        Some(r) => {
            let warm = median(
                r.wan_bytes
                    .iter()
                    .map(|&b| b as f64 / r.file_bytes.max(1) as f64)
                    .collect(),
            );
            lines.push(measured(
                r.redials >= 10 && r.returned == r.redials && warm.is_some_and(|w| w <= WARM_GOAL),
                format!(
                    "redials: back on its replica (core{}, the director's core{}) {} of {} times; the repeated file crossed as {} of its size (median; goal: 10 of 10, as references: at most {WARM_GOAL})",
                    r.replica,
                    r.home,
                    r.returned,
                    r.redials,
                    dash(warm, 3)
                ),
            ));
        }
        None => lines.push((false, "redials: not measured".into())),
    }
    let wrong: u64 = results.rows.iter().map(|r| r.wrong_bytes).sum::<u64>()
        + results.redials.as_ref().map_or(0, |r| r.wrong_bytes);
    let transfers = !results.rows.is_empty() || results.redials.is_some();
    lines.push(measured(
        wrong == 0 && transfers,
        format!("every transfer checked byte for byte: {wrong} wrong byte(s) (goal: 0)"),
    ));
    lines
}

/// `report.md`.
pub fn markdown(results: &Results) -> String {
    let mut md = String::new();
    let _ = writeln!(md, "# cluster: a core cluster behind one address\n");
    let _ = writeln!(
        md,
        "{} sites download at once, each over its own link of {} Mbit/s and RTT {} ms, \
         through a director (nftables hashing the edge's address over 64 buckets, \
         keepalived checking each replica's /health) and N core replicas. In the steady \
         and added phases each replica's wanopt is held to {} of a CPU (a cgroup), so \
         that one replica is the bottleneck; the failover phase runs without the cap, so \
         that the other sites' rates measure the failover and not the capacity the dead \
         replica took with it. Every transfer is checked byte for byte.{}\n",
        results.sites,
        results.link_mbit,
        results.rtt_ms,
        results.core_cpu,
        if results.quick { " Quick run." } else { "" }
    );
    let _ = writeln!(md, "## Goals\n");
    for (ok, line) in goals(results) {
        let _ = writeln!(md, "- {}: {line}", if ok { "met" } else { "MISSED" });
    }
    let _ = writeln!(md, "\n## Steady\n");
    let mut steady = Table::new([
        ("replicas", Align::Right),
        ("Mbit/s in all", Align::Right),
        ("x one replica", Align::Right),
        ("sites per replica", Align::Left),
        ("seconds", Align::Right),
    ]);
    for cell in &results.steady {
        steady.row([
            cell.replicas.to_string(),
            format!("{:.1}", cell.mbit_s),
            dash(results.scaling(cell.replicas), 2),
            format!("{:?}", cell.sites_per_replica),
            format!("{:.1}", cell.seconds),
        ]);
    }
    md.push_str(&steady.to_string());
    let _ = writeln!(md, "\n## Every site\n");
    let mut rows = Table::new([
        ("phase", Align::Left),
        ("replicas", Align::Right),
        ("site", Align::Right),
        ("on", Align::Right),
        ("Mbit/s", Align::Right),
        ("before", Align::Right),
        ("first flow ms", Align::Right),
        ("resets", Align::Right),
        ("wrong bytes", Align::Right),
    ]);
    for r in &results.rows {
        rows.row([
            r.phase.name().to_string(),
            r.replicas.to_string(),
            r.site.to_string(),
            r.replica.map_or("-".into(), |n| format!("core{n}")),
            dash(r.mbit_s, 1),
            dash(r.mbit_s_before, 1),
            dash(r.first_flow_ms, 0),
            r.resets.to_string(),
            r.wrong_bytes.to_string(),
        ]);
    }
    md.push_str(&rows.to_string());
    if let Some(r) = &results.redials {
        let _ = writeln!(
            md,
            "\n## Redials\n\nSite 1's edge on core{} while the director hashes it to core{}; \
             each redial cuts the site's link for longer than the tunnel timeout and deletes \
             the director's connection entries for the edge. Bytes on the link for each \
             download of the {}-byte file: {}.",
            r.replica,
            r.home,
            r.file_bytes,
            r.wan_bytes
                .iter()
                .map(u64::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    if !results.skipped.is_empty() {
        let _ = writeln!(md, "\n## Not measured\n");
        for s in &results.skipped {
            let _ = writeln!(md, "- {s}");
        }
    }
    md
}

/// The lines printed at the end of a run.
pub fn summary(results: &Results) -> String {
    let mut out = String::new();
    for (ok, line) in goals(results) {
        let _ = writeln!(out, "{} {line}", if ok { "met   " } else { "MISSED" });
    }
    for s in &results.skipped {
        let _ = writeln!(out, "not measured: {s}");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::scenario::results::{Redials, SteadyCell};

    fn row(phase: Phase, site: u8, replica: u8) -> Row {
        Row {
            replicas: 3,
            sites: 6,
            phase,
            site,
            replica: Some(replica),
            mbit_s: Some(40.0),
            mbit_s_before: Some(41.0),
            first_flow_ms: None,
            resets: 0,
            wrong_bytes: 0,
            failure: None,
        }
    }

    #[test]
    fn goals_judge_what_was_measured_and_miss_what_was_not() {
        let mut results = Results {
            sites: 6,
            killed: Some(1),
            steady: vec![
                SteadyCell {
                    replicas: 1,
                    bytes: 1,
                    seconds: 1.0,
                    mbit_s: 45.0,
                    sites_per_replica: vec![6],
                },
                SteadyCell {
                    replicas: 3,
                    bytes: 1,
                    seconds: 1.0,
                    mbit_s: 130.0,
                    sites_per_replica: vec![2, 2, 2],
                },
            ],
            ..Results::default()
        };
        let mut moved = row(Phase::Failover, 1, 1);
        moved.mbit_s = None;
        moved.first_flow_ms = Some(900.0);
        moved.resets = 1;
        results.rows = vec![moved, row(Phase::Failover, 2, 2), row(Phase::Added, 1, 1)];
        results.rows[2].first_flow_ms = Some(50.0);
        results.redials = Some(Redials {
            replica: 2,
            home: 1,
            redials: 10,
            returned: 10,
            file_bytes: 4_000_000,
            wan_bytes: vec![40_000; 10],
            wrong_bytes: 0,
        });
        let lines = goals(&results);
        assert!(lines.iter().all(|(ok, _)| *ok), "{lines:?}");
        // A slow first flow, a reset of another site, a wrong byte: missed.
        results.rows[0].first_flow_ms = Some(3500.0);
        results.rows[1].resets = 1;
        results.rows[1].wrong_bytes = 3;
        let missed: Vec<String> = goals(&results)
            .into_iter()
            .filter(|(ok, _)| !ok)
            .map(|(_, l)| l)
            .collect();
        assert_eq!(missed.len(), 3, "{missed:?}");
        let report = markdown(&results);
        assert!(
            report.contains("MISSED: failover: the 1 site(s)"),
            "{report}"
        );
        // Nothing measured: nothing met.
        assert!(goals(&Results::default()).iter().all(|(ok, _)| !ok));
    }
}
