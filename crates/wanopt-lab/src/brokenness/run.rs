//! The `path-brokenness` scenario on the lab: every cell on a fresh lab, one
//! download each ([`crate::download`]: the `lossy` scenario's client, timed
//! and sampled, the link's counters and the server's retransmissions read
//! around it); the
//! window-scale sweeps search the smallest shift that fills the link,
//! starting from the one window arithmetic gives.

use std::path::Path;
use std::time::Instant;

use super::matrix::{
    needed_wscale, paper_wscale, Cell, Experiment, Mode, Plan, Policy, WscaleSweep,
    COMPUTED_RATE_MBPS, SCENARIO,
};
use super::report;
use super::results::{Counters, Results, Row, Skipped, WscaleMinimum};
use crate::bringup::{self, UpConfig};
use crate::download;
use crate::kit::output;
use crate::scenario::runner::{humantime, Env, Finished, Plan as RunPlan, Scenario};
use crate::scenario::RunError;
use crate::topology::{Lab, Node};

/// Downloads of a window-scale sweep: a binary search over the 15 shifts.
const SWEEP_TRIES: usize = 4;

/// The `path-brokenness` scenario and its results so far.
#[derive(Debug)]
pub struct Brokenness {
    plan: Plan,
    results: Results,
    tunnel: Result<(), String>,
    congestion: String,
    started: Option<Instant>,
}

impl Brokenness {
    /// The scenario, full or `--quick`.
    pub fn new(quick: bool) -> Brokenness {
        let plan = Plan::new(quick);
        Brokenness {
            results: Results {
                scenario: SCENARIO.into(),
                quick,
                rows: Vec::new(),
                wscale_minimums: plan
                    .wscale_rtts
                    .iter()
                    .map(|&rtt| WscaleMinimum::computed(COMPUTED_RATE_MBPS, rtt))
                    .collect(),
                skipped: Vec::new(),
                flow_resets: Vec::new(),
            },
            plan,
            tunnel: Ok(()),
            congestion: String::new(),
            started: None,
        }
    }

    /// Why `cell` cannot run on this machine, if it cannot.
    fn unavailable(&self, mode: Mode) -> Option<String> {
        if mode.tunnel() {
            return self.tunnel.clone().err();
        }
        let cc = mode.congestion()?;
        (!self.congestion.split_whitespace().any(|c| c == cc)).then(|| {
            format!(
                "this kernel has no {cc} (tcp_available_congestion_control: {})",
                self.congestion.trim()
            )
        })
    }

    /// Measures `cell` on a fresh lab; its row, or why not.
    fn measure(&mut self, env: &Env<'_>, cell: &Cell) -> Option<Row> {
        env.bar.set_message(cell.label());
        let outcome = measure(env, cell);
        env.bar.inc(1);
        if cell.mode.tunnel() {
            let resets = env.flow_resets(&cell.label().replace(' ', "-"));
            self.results.flow_resets.extend(resets);
        }
        match outcome {
            Ok(row) => {
                if env.bar.is_hidden() {
                    eprintln!(
                        "  {}: {} Mbit/s ({} of the rate in the second half), longest stall {} s",
                        cell.label(),
                        row.mbit_s,
                        row.of_rate,
                        row.longest_stall_s
                    );
                }
                self.results.rows.push(row.clone());
                let _ = Brokenness::write_outputs(&self.results, env.out);
                Some(row)
            }
            Err(reason) => {
                env.say(format!("  {}: failed: {reason}", cell.label()));
                self.results.skipped.push(Skipped {
                    cell: cell.label(),
                    reason,
                });
                None
            }
        }
    }

    fn skip(&mut self, env: &Env<'_>, label: String, reason: String, steps: u64) {
        env.bar.inc(steps);
        self.results.skipped.push(Skipped {
            cell: label,
            reason,
        });
    }

    /// The smallest shift that fills the sweep's link, by binary search
    /// over 0-14 in [`SWEEP_TRIES`] downloads (`null` if none tried
    /// filled).
    fn sweep(&mut self, env: &Env<'_>, sweep: &WscaleSweep) {
        let computed = needed_wscale(sweep.link.rate_mbps, sweep.link.rtt_ms);
        let cell = |shift: u8| Cell {
            experiment: Experiment::Wscale,
            link: sweep.link,
            policy: Policy {
                name: "wscale",
                paper: "tcp.opt.ws.changed",
                rules: "",
            },
            wscale: Some(shift),
            mode: sweep.mode,
            seconds: sweep.seconds,
        };
        if let Some(reason) = self.unavailable(sweep.mode) {
            self.skip(env, cell(computed).label(), reason, SWEEP_TRIES as u64);
        } else {
            // Binary search over 0 to the receiver's own shift (up to it
            // a larger shift never fills less): four downloads. Above it
            // the sender reads every window larger than the receiver
            // meant and overruns it, so a larger shift can fill less;
            // the receiver's shift is read from the lab of the first try.
            let (mut lo, mut hi) = (0u8, 14u8);
            let mut filled: Option<u8> = None;
            let mut tries = 0;
            while lo <= hi && tries < SWEEP_TRIES {
                let shift = lo + (hi - lo) / 2;
                tries += 1;
                let Some(row) = self.measure(env, &cell(shift)) else {
                    break;
                };
                if row.fills() {
                    filled = Some(shift);
                    if shift == 0 {
                        break;
                    }
                    hi = shift - 1;
                } else {
                    lo = shift + 1;
                }
                if let Some(receiver) = receiver_shift(env.lab) {
                    hi = hi.min(receiver);
                }
            }
            env.bar.inc((SWEEP_TRIES - tries) as u64);
            self.results.wscale_minimums.push(WscaleMinimum {
                rate_mbps: sweep.link.rate_mbps,
                rtt_ms: sweep.link.rtt_ms,
                mode: Some(sweep.mode.name().into()),
                measured: filled,
                computed,
                paper: paper_wscale(sweep.link.rate_mbps, sweep.link.rtt_ms),
                receiver_shift: receiver_shift(env.lab),
            });
            let _ = Brokenness::write_outputs(&self.results, env.out);
        }
    }
}

/// One download over `cell` on a fresh lab, and its row.
fn measure(env: &Env<'_>, cell: &Cell) -> Result<Row, String> {
    let specs = cell
        .link
        .options(&cell.rules())
        .specs()
        .map_err(|e| e.to_string())?;
    let config = UpConfig {
        specs,
        profile: cell.mode.profile(cell.experiment == Experiment::Ecn),
        optimize: cell.mode.tunnel(),
        reduce: false,
        node_args: Vec::new(),
        edge_args: Vec::new(),
        core_args: Vec::new(),
        link2: None,
        sites: crate::sites::Sites::ONE,
        cluster: None,
        edges: Default::default(),
    };
    bringup::up(env.lab, &config, env.exe).map_err(|e| format!("lab up failed: {e}"))?;
    let download = download::bulk(
        env.lab,
        env.exe,
        cell.seconds,
        cell.mode.congestion(),
        !cell.mode.tunnel(),
    )?;
    let link = &download.link;
    Ok(Row::new(
        cell,
        download.seconds,
        download.bytes,
        &download.samples,
        Counters {
            retrans_segs: download.retrans_segs,
            ce_marked: link.both(|d| d.ce_marked),
            queue_drops: link.both(|d| d.queue_drops + d.red_drops),
            lost_frames: link.both(|d| d.lost_frames),
        },
    ))
}

/// The window-scale shift the client's kernel announces (Linux:
/// `ilog2(max(tcp_rmem max, rmem_max)) - 15`, from 0 to 14).
fn receiver_shift(lab: &Lab) -> Option<u8> {
    let tcp_max: u64 = lab
        .read_sysctl(Node::Client, "net.ipv4.tcp_rmem")
        .ok()?
        .split_whitespace()
        .nth(2)?
        .parse()
        .ok()?;
    let core_max: u64 = lab
        .read_sysctl(Node::Client, "net.core.rmem_max")
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0);
    Some(shift_for_buffer(tcp_max.max(core_max)))
}

/// Linux's receive window shift for a receive buffer of at most `space`
/// bytes (`tcp_select_initial_window`).
fn shift_for_buffer(space: u64) -> u8 {
    let space = space.clamp(1, u64::from(u16::MAX) << 14);
    (space.ilog2().saturating_sub(15) as u8).min(14)
}

impl Scenario for Brokenness {
    type Results = Results;

    fn name(&self) -> &str {
        SCENARIO
    }

    fn plan(&mut self, exe: &Path) -> RunPlan {
        self.tunnel = crate::optimize::available(exe).map_err(|e| e.to_string());
        self.congestion =
            std::fs::read_to_string("/proc/sys/net/ipv4/tcp_available_congestion_control")
                .unwrap_or_default();
        let plan = &self.plan;
        RunPlan {
            header: format!(
                "scenario path-brokenness: {} downloads, {} window-scale sweeps{}",
                plan.cells.len() + plan.wscale_tunnel.len(),
                plan.sweeps.len(),
                if self.results.quick { " (quick)" } else { "" }
            ),
            steps: plan.steps(),
        }
    }

    fn run(&mut self, env: &Env<'_>) -> Finished<Results> {
        let started = *self.started.get_or_insert_with(Instant::now);
        let plan = self.plan.clone();
        let mut experiment = None;
        for cell in plan.cells.iter().chain(&plan.wscale_tunnel) {
            if experiment != Some(cell.experiment) {
                experiment = Some(cell.experiment);
                env.say(format!(
                    "[{}] {}",
                    humantime(started.elapsed()),
                    cell.experiment.name()
                ));
            }
            match self.unavailable(cell.mode) {
                Some(reason) => self.skip(env, cell.label(), reason, 1),
                None => {
                    self.measure(env, cell);
                }
            }
        }
        env.say(format!("[{}] wscale sweeps", humantime(started.elapsed())));
        for sweep in &plan.sweeps {
            self.sweep(env, sweep);
        }
        Finished {
            results: self.results.clone(),
            stopped: None,
        }
    }

    fn write_outputs(results: &Results, out: &Path) -> Result<(), RunError> {
        output::write_results(out, results, report::markdown(results))?;
        output::plotted(report::plots(results, out));
        Ok(())
    }

    fn summary(results: &Results) -> String {
        report::summary(results)
    }

    fn written(_: &Results, out: &Path) -> String {
        format!(
            "wrote {}/results.json, report.md, brokenness-sack.svg/.png, brokenness-wscale.svg/.png{}",
            out.display(),
            output::logs_note(out, "node logs of labs with flow resets")
        )
    }

    fn flow_resets(results: &Results) -> &[String] {
        &results.flow_resets
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_receivers_shift_follows_its_largest_buffer() {
        // This kernel's 32 MiB maximum announces a shift of 10.
        assert_eq!(shift_for_buffer(33_554_432), 10);
        assert_eq!(shift_for_buffer(6_291_456), 7);
        assert_eq!(shift_for_buffer(1 << 40), 14);
        assert_eq!(shift_for_buffer(0), 0);
    }
}
