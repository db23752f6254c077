//! The `cluster` scenario: six branch sites downloading at once through a
//! core cluster (`lab up --cores N --sites 6`), each replica held to a
//! small share of a CPU so that one replica is the bottleneck.
//!
//! - **steady**: every site downloads [`Plan::bytes_per_site`] at once
//!   through 1, 2 and 3 replicas (`--quick`: 1 and 3): the total through 3
//!   against the total through 1 (the goal: at least 2.7x).
//! - **failover**: through 3 replicas without a CPU cap (the links are the
//!   bottleneck, so that what the other sites keep measures the failover,
//!   not the capacity the dead replica took with it), every site downloads
//!   for about [`Plan::failover_seconds`]; a third of the way in the
//!   replica carrying site 1 is killed with SIGKILL. The sites it carried
//!   open a small new flow every 100 ms until one works (`first_flow_ms`,
//!   the goal: within 3 s); the other sites' downloads go on (the goal: no
//!   reset, and their rate after the kill at least 90% of theirs before).
//! - **added**: through 3 capped replicas, the last one stopped first (its
//!   sites move), then started again a third of the way into the
//!   downloads: every download completes, and every site then opens a new
//!   flow.
//! - **redials** (with data reduction): site 1's replica is killed and
//!   started again, so that site 1's edge lives on another replica than
//!   the one the director now hashes it to; a file crosses once, then ten
//!   times the site's link is cut for longer than the tunnel timeout and
//!   the director's connection entries for the edge are deleted: the edge
//!   redials, and is back on its replica, where the file crosses as
//!   references (the goal: 10 of 10).
//!
//! Every transfer is checked byte for byte ([`transfer`]): `wrong_bytes`
//! must be 0 everywhere. Outputs: `results.json` ([`results`]) and
//! `report.md` ([`report`]).

pub mod report;
pub mod results;
pub mod run;
pub mod transfer;

use std::path::Path;
use std::time::{Duration, Instant};

use crate::cluster::{Cores, CpuShare};
use crate::kit::output;
use crate::link::LinkOptions;
use crate::scenario::runner::{humantime, Env, Finished, Plan as RunPlan, Scenario};
use crate::scenario::RunError;
pub use results::{Phase, Results, Row};

/// The scenario's name.
pub const SCENARIO: &str = "cluster";

/// What a run measures.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    /// `--quick`.
    pub quick: bool,
    /// Sites downloading at once.
    pub sites: u8,
    /// Every site's link rate, Mbit/s.
    pub link_mbit: u32,
    /// Every site's link round trip, ms.
    pub rtt_ms: u32,
    /// Each replica's share of one CPU in the steady and added phases.
    pub core_cpu: CpuShare,
    /// Replica counts of the steady phases.
    pub steady: Vec<u8>,
    /// Bytes each site downloads in the steady and added phases.
    pub bytes_per_site: u64,
    /// Seconds the failover phase's downloads take at the link's rate.
    pub failover_seconds: u32,
    /// Redials of site 1 while its replica lives.
    pub redials: u32,
    /// How long the link is cut for each redial (longer than the tunnel
    /// timeout, 1.5 s).
    pub cut: Duration,
    /// The repeated file of the redials, bytes.
    pub file_bytes: u64,
}

impl Plan {
    /// A full run (1, 2 and 3 replicas, 40 MB per site) or `--quick` (1
    /// and 3, 20 MB).
    pub fn new(quick: bool) -> Plan {
        Plan {
            quick,
            sites: 6,
            link_mbit: 50,
            rtt_ms: 20,
            // 50 thousandths: 0.05 of a CPU.
            core_cpu: CpuShare(50),
            steady: if quick { vec![1, 3] } else { vec![1, 2, 3] },
            bytes_per_site: if quick { 20_000_000 } else { 40_000_000 },
            failover_seconds: 12,
            redials: 10,
            cut: Duration::from_millis(2500),
            file_bytes: 4_000_000,
        }
    }

    /// Every site's link.
    pub fn link(&self) -> LinkOptions {
        LinkOptions {
            rtt: Some(format!("{}ms", self.rtt_ms)),
            rate: Some(format!("{}mbit", self.link_mbit)),
            queue: Some("1bdp".into()),
            ..LinkOptions::default()
        }
    }

    /// Bytes each site downloads in the failover phase: its link's rate
    /// for [`Plan::failover_seconds`].
    pub fn failover_bytes(&self) -> u64 {
        u64::from(self.link_mbit) * 1_000_000 / 8 * u64::from(self.failover_seconds)
    }

    /// Labs the run brings up.
    fn steps(&self) -> u64 {
        self.steady.len() as u64 + 3
    }
}

/// The `cluster` scenario and its results so far.
#[derive(Debug)]
pub struct ClusterScenario {
    plan: Plan,
    results: Results,
    /// Whether the executable has the wanopt nodes (why not, if not).
    tunnel: Result<(), String>,
}

impl ClusterScenario {
    /// A full run, or `--quick`.
    pub fn new(quick: bool) -> ClusterScenario {
        let plan = Plan::new(quick);
        ClusterScenario {
            results: Results {
                scenario: SCENARIO.into(),
                quick,
                sites: plan.sites,
                link_mbit: plan.link_mbit,
                rtt_ms: plan.rtt_ms,
                core_cpu: plan.core_cpu.fraction(),
                bytes_per_site: plan.bytes_per_site,
                ..Results::default()
            },
            plan,
            tunnel: Ok(()),
        }
    }

    /// One phase on a fresh lab; a failure is recorded as skipped.
    fn phase(
        &mut self,
        env: &Env<'_>,
        what: &str,
        body: impl FnOnce(&mut Self, &Env<'_>) -> Result<(), String>,
    ) {
        if let Err(e) = &self.tunnel {
            self.results.skipped.push(format!("{what}: {e}"));
        } else if let Err(e) = body(self, env) {
            env.say(format!("  {what} failed: {e}"));
            self.results.skipped.push(format!("{what}: {e}"));
        }
        let _ = env.lab.destroy();
        env.bar.inc(1);
        let _ = Self::write_outputs(&self.results, env.out);
    }
}

fn cores(n: u8) -> Result<Cores, String> {
    Cores::new(n).ok_or_else(|| format!("{n} replicas"))
}

impl Scenario for ClusterScenario {
    type Results = Results;

    fn name(&self) -> &str {
        SCENARIO
    }

    fn plan(&mut self, exe: &Path) -> RunPlan {
        self.tunnel = crate::optimize::available(exe).map_err(|e| e.to_string());
        let p = &self.plan;
        RunPlan {
            header: format!(
                "scenario cluster: {} sites at once over {} Mbit/s, RTT {} ms; steady through {} replica(s) each held to {} of a CPU, {} MB per site; failover (SIGKILL of a replica, 3 replicas); a replica added; {} redials{}{}",
                p.sites,
                p.link_mbit,
                p.rtt_ms,
                p.steady
                    .iter()
                    .map(u8::to_string)
                    .collect::<Vec<_>>()
                    .join("/"),
                p.core_cpu,
                p.bytes_per_site / 1_000_000,
                p.redials,
                match &self.tunnel {
                    Ok(()) => String::new(),
                    Err(e) => format!("; skipped: {e}"),
                },
                if p.quick { " (quick)" } else { "" }
            ),
            steps: p.steps(),
        }
    }

    fn run(&mut self, env: &Env<'_>) -> Finished<Results> {
        let started = Instant::now();
        let plan = self.plan.clone();
        let cap = Some(plan.core_cpu);
        for &n in &plan.steady {
            env.say(format!(
                "[{}] steady: {} sites through {n} replica(s)",
                humantime(started.elapsed()),
                plan.sites
            ));
            self.phase(env, &format!("steady {n}"), |me, env| {
                let cores = cores(n)?;
                run::up(env.lab, env.exe, &plan, cores, cap, false)?;
                let (rows, cell) = run::steady(env.lab, &plan, cores)?;
                env.say(format!(
                    "  {:.1} Mbit/s in all, sites per replica {:?}",
                    cell.mbit_s, cell.sites_per_replica
                ));
                me.results.rows.extend(rows);
                me.results.steady.push(cell);
                Ok(())
            });
        }
        env.say(format!(
            "[{}] failover: 3 replicas, the one carrying site 1 killed",
            humantime(started.elapsed())
        ));
        self.phase(env, "failover", |me, env| {
            let cores = cores(3)?;
            run::up(env.lab, env.exe, &plan, cores, None, false)?;
            let (rows, killed) = run::failover(env.lab, &plan, cores)?;
            for row in rows.iter().filter(|r| r.first_flow_ms.is_some()) {
                env.say(format!(
                    "  site {}: a new flow {:.0} ms after the kill",
                    row.site,
                    row.first_flow_ms.unwrap_or_default()
                ));
            }
            me.results.killed = Some(killed);
            me.results.rows.extend(rows);
            Ok(())
        });
        env.say(format!(
            "[{}] added: a replica started during the downloads",
            humantime(started.elapsed())
        ));
        self.phase(env, "added", |me, env| {
            let cores = cores(3)?;
            run::up(env.lab, env.exe, &plan, cores, cap, false)?;
            me.results.rows.extend(run::added(env.lab, &plan, cores)?);
            Ok(())
        });
        env.say(format!(
            "[{}] redials: site 1 while its replica lives (data reduction on)",
            humantime(started.elapsed())
        ));
        self.phase(env, "redials", |me, env| {
            let cores = cores(3)?;
            run::up(env.lab, env.exe, &plan, cores, None, true)?;
            let say = |line: String| env.say(line);
            me.results.redials = Some(run::redials(env.lab, &plan, cores, &say)?);
            Ok(())
        });
        Finished {
            results: self.results.clone(),
            stopped: None,
        }
    }

    fn write_outputs(results: &Results, out: &Path) -> Result<(), RunError> {
        Ok(output::write_results(
            out,
            results,
            report::markdown(results),
        )?)
    }

    fn summary(results: &Results) -> String {
        report::summary(results)
    }

    fn written(_: &Results, out: &Path) -> String {
        format!("wrote {}/results.json, report.md", out.display())
    }

    fn flow_resets(_: &Results) -> &[String] {
        // Resets are the failover phase's subject: counted per site in the
        // rows and judged by the report's goals.
        &[]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quick_runs_one_and_three_replicas_and_six_sites_balance_over_three() {
        let quick = Plan::new(true);
        assert_eq!(quick.steady, [1, 3]);
        assert_eq!(Plan::new(false).steady, [1, 2, 3]);
        assert_eq!(quick.core_cpu.fraction(), 0.05);
        assert!(quick.link().specs().is_ok());
        // Two sites a replica: the steady phase through 3 can triple.
        let cores = Cores::new(3).unwrap();
        let homes: Vec<Option<u8>> = (1..=6).map(|s| run::home(s, cores)).collect();
        assert_eq!(
            homes,
            [Some(1), Some(2), Some(3), Some(1), Some(2), Some(3)]
        );
        assert!(quick.cut > Duration::from_millis(1500));
    }
}
