//! The `fwsm` scenario on the lab: for each configuration and mode a
//! fresh lab (the firewall as the emulated link, its rules as the
//! middlebox, the path's MTU on every interface), the idle round trip by
//! `ping`, then the downloads ([`crate::download`]).

use std::path::Path;
use std::time::Instant;

use super::matrix::{Config, Mode, Plan, CONFIGS, MODES, SCENARIO};
use super::report;
use super::results::{Results, Row, Run, Skipped};
use crate::bringup::{self, UpConfig};
use crate::download;
use crate::kit::output;
use crate::scenario::runner::{humantime, Env, Finished, Plan as RunPlan, Scenario};
use crate::scenario::RunError;
use crate::topology::{Lab, Node, SERVER_ADDR};

/// The `fwsm` scenario and its results so far.
#[derive(Debug)]
pub struct Fwsm {
    plan: Plan,
    results: Results,
    tunnel: Result<(), String>,
    started: Option<Instant>,
}

impl Fwsm {
    /// The scenario, full or `--quick`, with `runs` downloads per cell
    /// (default: 3, or 1 quick).
    pub fn new(quick: bool, runs: Option<usize>) -> Fwsm {
        let plan = Plan::new(quick, runs);
        Fwsm {
            results: Results {
                scenario: SCENARIO.into(),
                quick,
                runs: plan.runs,
                seconds: plan.seconds,
                rows: Vec::new(),
                skipped: Vec::new(),
                flow_resets: Vec::new(),
            },
            plan,
            tunnel: Ok(()),
            started: None,
        }
    }

    fn skip(&mut self, env: &Env<'_>, config: &Config, mode: Mode, reason: String, steps: usize) {
        env.say(format!(
            "  {} {}: not measured: {reason}",
            config.name,
            mode.name()
        ));
        env.bar.inc(steps as u64);
        self.results.skipped.push(Skipped {
            config: config.name.into(),
            mode: mode.name().into(),
            reason,
        });
    }

    /// The downloads of `mode` over `config`, on a fresh lab.
    fn cell(&mut self, env: &Env<'_>, config: &Config, mode: Mode) {
        env.bar
            .set_message(format!("{} {}", config.name, mode.name()));
        if let (true, Err(reason)) = (mode.tunnel(), self.tunnel.clone()) {
            self.skip(env, config, mode, reason, self.plan.runs);
            return;
        }
        if let Err(reason) = up(env, config, mode) {
            self.skip(env, config, mode, reason, self.plan.runs);
            return;
        }
        let idle_rtt_ms = idle_rtt_ms(env.lab);
        let mut runs = Vec::new();
        for done in 0..self.plan.runs {
            let download = download::bulk(
                env.lab,
                env.exe,
                self.plan.seconds,
                mode.congestion(),
                !mode.tunnel(),
            );
            env.bar.inc(1);
            match download {
                Ok(d) => runs.push(Run {
                    mbit_s: d.mbit_s(),
                    retrans_segs: d.retrans_segs,
                    reordered: d.link.both(|x| x.reordered),
                    queue_drops: d.link.both(|x| x.queue_drops),
                    cpu_busy_pct: d.cpu_busy_pct,
                }),
                Err(reason) => {
                    self.skip(env, config, mode, reason, self.plan.runs - done - 1);
                    break;
                }
            }
        }
        if mode.tunnel() {
            let resets = env.flow_resets(config.name);
            self.results.flow_resets.extend(resets);
        }
        if runs.len() == self.plan.runs {
            let row = Row::new(config, mode, idle_rtt_ms, &runs);
            if env.bar.is_hidden() {
                eprintln!(
                    "  {} {}: {} Mbit/s (guide {}, ceiling {})",
                    config.name,
                    mode.name(),
                    row.mbit_s,
                    row.guide_mbit_s.map_or("-".into(), |g| g.to_string()),
                    row.ceiling_mbit_s
                );
            }
            self.results.rows.push(row);
            let _ = Fwsm::write_outputs(&self.results, env.out);
        }
    }
}

/// A fresh lab for `config` with `mode`'s hosts (and nodes).
fn up(env: &Env<'_>, config: &Config, mode: Mode) -> Result<(), String> {
    let specs = config.link().specs().map_err(|e| e.to_string())?;
    let lab = UpConfig {
        specs,
        profile: mode.profile(),
        optimize: mode.tunnel(),
        reduce: false,
        node_args: mode.node_args(config.mtu),
        edge_args: Vec::new(),
        core_args: Vec::new(),
        link2: None,
        sites: crate::sites::Sites::ONE,
        cluster: None,
        edges: Default::default(),
    };
    bringup::up(env.lab, &lab, env.exe).map_err(|e| format!("lab up failed: {e}"))
}

/// The idle path's round trip from the client to the server: the minimum
/// of five pings, ms (`None` if `ping` cannot say).
fn idle_rtt_ms(lab: &Lab) -> Option<f64> {
    let out = lab
        .command(Node::Client, "ping")
        .args(["-n", "-q", "-c", "5", "-i", "0.2", SERVER_ADDR])
        .output()
        .ok()?;
    parse_ping_min(&String::from_utf8_lossy(&out.stdout))
}

/// The minimum of `ping -q`'s summary line (`rtt min/avg/max/mdev =
/// 0.081/0.095/0.120/0.013 ms`).
fn parse_ping_min(text: &str) -> Option<f64> {
    let line = text.lines().find(|l| l.contains("min/avg/max"))?;
    let values = line.split('=').nth(1)?.trim();
    values.split('/').next()?.trim().parse().ok()
}

impl Scenario for Fwsm {
    type Results = Results;

    fn name(&self) -> &str {
        SCENARIO
    }

    fn plan(&mut self, exe: &Path) -> RunPlan {
        self.tunnel = crate::optimize::available(exe).map_err(|e| e.to_string());
        let plan = &self.plan;
        RunPlan {
            header: format!(
                "scenario fwsm: {} configurations x {} modes, {} downloads of {} s{}",
                CONFIGS.len(),
                MODES.len(),
                plan.steps(),
                plan.seconds,
                if self.results.quick { " (quick)" } else { "" }
            ),
            steps: plan.steps(),
        }
    }

    fn run(&mut self, env: &Env<'_>) -> Finished<Results> {
        let started = *self.started.get_or_insert_with(Instant::now);
        for (i, config) in CONFIGS.iter().enumerate() {
            env.say(format!(
                "[{}] configuration {}/{}: {} ({})",
                humantime(started.elapsed()),
                i + 1,
                CONFIGS.len(),
                config.name,
                config.guide
            ));
            for mode in MODES {
                self.cell(env, config, mode);
            }
        }
        Finished {
            results: self.results.clone(),
            stopped: None,
        }
    }

    fn write_outputs(results: &Results, out: &Path) -> Result<(), RunError> {
        output::write_results(out, results, report::markdown(results))?;
        output::plotted(report::plot(results, out));
        Ok(())
    }

    fn summary(results: &Results) -> String {
        report::summary(results)
    }

    fn written(_: &Results, out: &Path) -> String {
        format!(
            "wrote {}/results.json, report.md, fwsm.svg, fwsm.png{}",
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
    fn the_idle_round_trip_is_pings_minimum() {
        let text = "PING 198.18.3.2 (198.18.3.2) 56(84) bytes of data.\n\n\
                    --- 198.18.3.2 ping statistics ---\n\
                    5 packets transmitted, 5 received, 0% packet loss, time 804ms\n\
                    rtt min/avg/max/mdev = 0.181/0.230/0.301/0.044 ms\n";
        assert_eq!(parse_ping_min(text), Some(0.181));
        assert_eq!(
            parse_ping_min("ping: connect: Network is unreachable\n"),
            None
        );
    }
}
