//! The `bond` scenario on the lab: every run of every cell of the
//! [`Plan`] on a fresh lab with both links, the download (and the voice
//! stream) at once, link 1 cut meanwhile in `cut` cells; each cell's row
//! written as it comes.

use std::path::Path;
use std::process::{Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use super::client::DownloadReport;
use super::matrix::{Cell, Event, Mode, Plan, CUT, LINK1_MBPS, LINK1_RTT_MS, SCENARIO};
use super::measure::{cut_marks, download_figures, voice_figures};
use super::report;
use super::results::{CellSeries, Results, Row, Skipped};
use crate::bringup::{self, UpConfig};
use crate::clock::unix_ms;
use crate::kit::output;
use crate::kit::process::{finish, ok_output};
use crate::kit::stats::round1;
use crate::link::{cut_between, CutTimes, WanLink};
use crate::lossy::run::BBR;
use crate::optimize::{node_status, wait_edge, wait_tunnel_up, CORE_CONTROL, EDGE_CONTROL};
use crate::realtime::peer::{peer_command, read_log, Streams};
use crate::scenario::runner::{humantime, Env, Finished, Plan as RunPlan, Scenario};
use crate::scenario::RunError;
use crate::topology::{Lab, Node, EDGE_LAN_ADDR, SERVER_ADDR};
use crate::traffic::{GENERATOR_PORT, MAX_SEED};

/// Time between starting the server's voice peer and the cell's start.
const LEAD_IN: Duration = Duration::from_millis(700);
/// How long the processes of a cell may take beyond its length (the
/// download's drain, the peers' grace).
const OVERRUN: Duration = Duration::from_secs(35);
/// How long the voice baseline waits for link 2 to carry the tunnel once
/// link 1 is cut.
const FAILOVER_WAIT: Duration = Duration::from_secs(10);

/// Whether this executable's edge takes `--path-mode bond`: its parser is
/// asked (`wanopt edge --path-mode bond --help` fails on a mode it does
/// not know); the error says what it answered.
pub fn supports_bond(exe: &Path) -> Result<(), String> {
    let out = Command::new(exe)
        .args(["edge", "--path-mode", "bond", "--help"])
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("cannot run {}: {e}", exe.display()))?;
    if out.status.success() {
        return Ok(());
    }
    let said = String::from_utf8_lossy(&out.stderr);
    let first = said.lines().next().unwrap_or("").trim();
    Err(format!(
        "not available: this build's edge has no `--path-mode bond` ({first})"
    ))
}

/// The edge's arguments of `cell`: its path mode, its `--path`s with
/// their rates when it declares them, and the voice stream's
/// `--forward-udp` (the `realtime` scenario's).
pub fn edge_args(cell: &Cell) -> Vec<String> {
    let mut args = Vec::new();
    if let Some(mode) = cell.mode.path_mode() {
        args.extend(["--path-mode".to_string(), mode.to_string()]);
    }
    if let Some(rates) = cell.mode.declared_mbps() {
        for (path, mbps) in crate::optimize::two_paths().iter().zip(rates) {
            let kbit = (mbps * 1000.0).round() as u64;
            args.extend(["--path".to_string(), format!("{path},rate={kbit}kbit")]);
        }
    }
    if cell.voice() {
        args.extend(crate::realtime::run::edge_args());
    }
    if cell.mode == Mode::WanoptSla {
        args.extend(["--class".to_string(), super::matrix::SLA_CLASS.to_string()]);
    }
    args
}

/// The path the edge's real-time datagrams take, from its `/status`
/// (`None`: no SLA's choice).
fn realtime_path(status: &serde_json::Value) -> Option<u8> {
    status["peers"]
        .as_array()?
        .iter()
        .find_map(|p| p["paths"]["realtime"]["path"].as_u64())
        .and_then(|n| u8::try_from(n).ok())
}

/// The download's payload seed of run `run` of `cell` (24 bits).
pub fn payload_seed(cell: &Cell, run: usize) -> u32 {
    let name = format!("{}-{run}", cell.stem());
    (crate::rng::hash_name(name.as_bytes()) as u32) & MAX_SEED
}

/// The `bond` scenario and its results so far.
#[derive(Debug)]
pub struct Bond {
    plan: Plan,
    results: Results,
    tunnel: Result<(), String>,
    bond: Result<(), String>,
    started: Option<Instant>,
}

impl Bond {
    /// The scenario, full or `--quick`.
    pub fn new(quick: bool) -> Bond {
        let plan = Plan::new(quick);
        let settings = serde_json::json!({
            "seconds": plan.seconds,
            "runs": plan.runs,
            "link1": format!("rtt {LINK1_RTT_MS}ms rate {LINK1_MBPS}mbit queue 1bdp"),
            "link2": super::matrix::link2_spec(),
            "loss": format!("{}% random on link 1 each way", super::matrix::LOSS_PCT),
            "cut": format!("link 1 down at a third of the download for {} s", CUT.as_secs()),
            "bulk": "1 TCP download, every byte checked",
            "voice": "50 packets/s of 200 B each way, UDP 5004, DSCP EF",
            "endpoint_congestion_control": BBR.congestion_control,
            "reduce": false,
        });
        Bond {
            results: Results {
                scenario: SCENARIO.into(),
                quick,
                settings,
                rows: Vec::new(),
                skipped: Vec::new(),
                flow_resets: Vec::new(),
                series: Vec::new(),
            },
            plan,
            tunnel: Ok(()),
            bond: Ok(()),
            started: None,
        }
    }

    fn skip(&mut self, env: &Env<'_>, cell: &Cell, reason: &str) {
        env.say(format!("  {}: not measured: {reason}", cell.stem()));
        self.results.skipped.push(Skipped {
            mode: cell.mode.name().into(),
            event: cell.event.name().into(),
            workload: cell.workload.name().into(),
            reason: reason.into(),
        });
    }

    /// A fresh lab with both links for `cell`, the tunnel up in wanopt
    /// modes (on link 2 alone in `wanopt-path2`).
    fn up(&self, env: &Env<'_>, cell: &Cell) -> Result<(), String> {
        let specs = cell.link1().specs().map_err(|e| e.to_string())?;
        let tunnel = cell.mode.tunnel();
        let config = UpConfig {
            specs,
            profile: &BBR,
            optimize: tunnel,
            reduce: false,
            node_args: Vec::new(),
            edge_args: if tunnel { edge_args(cell) } else { Vec::new() },
            core_args: if tunnel && cell.voice() {
                crate::realtime::run::core_args()
            } else {
                Vec::new()
            },
            link2: cell.link2().map_err(|e| e.to_string())?,
            sites: crate::sites::Sites::ONE,
            cluster: None,
            edges: Default::default(),
        };
        bringup::up(env.lab, &config, env.exe).map_err(|e| format!("lab up failed: {e}"))?;
        if !tunnel {
            return Ok(());
        }
        wait_tunnel_up(env.lab, env.exe)?;
        if cell.mode == Mode::WanoptPath2 {
            crate::link::set_link(env.lab, 1, true).map_err(|e| e.to_string())?;
            wait_edge(
                env.lab,
                env.exe,
                FAILOVER_WAIT,
                "link 2 did not carry the tunnel with link 1 cut",
                |s| s["peers"][0]["paths"]["paths"][1]["data"] == true,
            )?;
        }
        Ok(())
    }

    /// Keeps the nodes' `/status` under `status/` and checks their logs
    /// for flow resets (kept under `logs/` when there are any).
    fn after_run(&mut self, env: &Env<'_>, cell: &Cell, label: &str) -> Option<u8> {
        if !cell.mode.tunnel() {
            return None;
        }
        let mut realtime = None;
        let dir = env.out.join("status");
        let _ = std::fs::create_dir_all(&dir);
        for (node, control, role) in [
            (Node::Edge, EDGE_CONTROL, "edge"),
            (Node::Core, CORE_CONTROL, "core"),
        ] {
            if let Ok(json) = node_status(env.lab, env.exe, node, control) {
                if node == Node::Edge {
                    realtime = realtime_path(&json);
                }
                let text = serde_json::to_string_pretty(&json).unwrap_or_default();
                let _ = std::fs::write(dir.join(format!("{label}-{role}.json")), text);
            }
        }
        let resets = env.flow_resets(label);
        self.results.flow_resets.extend(resets);
        realtime
    }

    fn run_cell(&mut self, env: &Env<'_>, cell: &Cell) {
        env.bar.set_message(cell.stem());
        let runs = self.plan.runs;
        let unavailable = match cell.mode {
            Mode::Direct => None,
            Mode::WanoptBond => self.tunnel.clone().and(self.bond.clone()).err(),
            _ => self.tunnel.clone().err(),
        };
        if let Some(reason) = unavailable {
            self.skip(env, cell, &reason);
            env.bar.inc(runs as u64);
            return;
        }
        let mut rows = Vec::new();
        let mut failure = None;
        for run in 1..=runs {
            let label = if runs > 1 {
                format!("{}-run{run}", cell.stem())
            } else {
                cell.stem()
            };
            let outcome = self.up(env, cell).and_then(|()| {
                measure(
                    env.lab,
                    env.exe,
                    cell,
                    self.plan.seconds,
                    (run, payload_seed(cell, run)),
                )
            });
            let realtime = self.after_run(env, cell, &label);
            if cell.voice() {
                keep_voice_logs(env, &label);
            }
            env.bar.inc(1);
            match outcome {
                Ok((mut row, series)) => {
                    row.realtime_path = realtime;
                    env.say(format!("  {label}: {}", row_figure(&row)));
                    self.save_series(env, &label, series.as_ref());
                    self.results.series.extend(series);
                    rows.push(row);
                }
                Err(reason) => {
                    env.say(format!("  {label}: failed: {reason}"));
                    failure.get_or_insert(reason);
                }
            }
        }
        match Row::of_runs(&rows) {
            Some(mut row) => {
                if let Some(reason) = failure {
                    let note = format!("{} of {runs} runs failed: {reason}", runs - rows.len());
                    row.note = Some(match row.note {
                        Some(n) => format!("{n}; {note}"),
                        None => note,
                    });
                }
                self.results.rows.push(row);
            }
            None => {
                let reason = failure.unwrap_or_else(|| "no run".into());
                self.skip(env, cell, &reason);
            }
        }
        let _ = Bond::write_outputs(&self.results, env.out);
    }

    fn save_series(&self, env: &Env<'_>, label: &str, series: Option<&CellSeries>) {
        let Some(series) = series else { return };
        let dir = env.out.join("series");
        let _ = std::fs::create_dir_all(&dir);
        let text = serde_json::to_string(series).unwrap_or_default();
        let _ = std::fs::write(dir.join(format!("{label}.json")), text);
    }
}

/// A run's figures for a progress line.
fn row_figure(r: &Row) -> String {
    let mut parts = Vec::new();
    if let Some(m) = r.mbit_s {
        parts.push(format!(
            "{m} Mbit/s, longest stall {} ms, {} resets, {} wrong bytes",
            r.longest_stall_ms.unwrap_or(0.0),
            r.resets.unwrap_or(0),
            r.wrong_bytes.unwrap_or(0)
        ));
    }
    if let Some(s) = r.recovered_s {
        parts.push(format!("sum again after {s} s"));
    }
    if let (Some(up), Some(down)) = (r.p99_up_ms, r.p99_down_ms) {
        parts.push(format!(
            "voice p99 {up} / {down} ms, loss {}% / {}%",
            r.loss_up_pct.unwrap_or(0.0),
            r.loss_down_pct.unwrap_or(0.0)
        ));
    }
    parts.join("; ")
}

/// The voice peers' logs in the lab's state directory, emptied.
fn voice_logs(lab: &Lab) -> (std::path::PathBuf, std::path::PathBuf) {
    let state = lab.state_dir();
    let logs = (state.join("bond-client.log"), state.join("bond-server.log"));
    let _ = std::fs::remove_file(&logs.0);
    let _ = std::fs::remove_file(&logs.1);
    logs
}

/// Keeps the voice peers' logs of run `label` under `voice/` (each
/// datagram's send and arrival times: where a p99 comes from).
fn keep_voice_logs(env: &Env<'_>, label: &str) {
    let dir = env.out.join("voice");
    let _ = std::fs::create_dir_all(&dir);
    let state = env.lab.state_dir();
    for (from, side) in [("bond-client.log", "client"), ("bond-server.log", "server")] {
        let _ = std::fs::copy(state.join(from), dir.join(format!("{label}-{side}.log")));
    }
}

/// Runs the download and the voice stream of `cell` on the lab as it is,
/// cutting link 1 in `cut` cells: run `run`'s row, and the download's
/// series.
fn measure(
    lab: &Lab,
    exe: &Path,
    cell: &Cell,
    seconds: u64,
    (run, seed): (usize, u32),
) -> Result<(Row, Option<CellSeries>), String> {
    let (client_log, server_log) = voice_logs(lab);
    let start_ms = unix_ms() + LEAD_IN.as_millis() as u64;
    let start = Instant::now() + LEAD_IN;
    let until = start_ms + seconds * 1_000;
    let target = if cell.mode.tunnel() {
        EDGE_LAN_ADDR
    } else {
        SERVER_ADDR
    };
    let peer = |node, address, log| {
        peer_command(lab, exe, node, address, until, log, Streams::Voice)
            .spawn()
            .map_err(|e| format!("voice peer: {e}"))
    };
    let server = match cell.voice() {
        true => Some(peer(Node::Server, SERVER_ADDR, &server_log)?),
        false => None,
    };
    thread::sleep(start.saturating_duration_since(Instant::now()));
    let client = match cell.voice() {
        true => Some(peer(Node::Client, target, &client_log)?),
        false => None,
    };
    let bulk = match cell.bulk() {
        true => {
            let mut cmd = lab.command(Node::Client, &exe.to_string_lossy());
            cmd.args(["lab", "bond-client", "--connect"])
                .arg(format!("{SERVER_ADDR}:{GENERATOR_PORT}"))
                .args(["--seconds", &seconds.to_string()])
                .args(["--seed", &seed.to_string()])
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped());
            Some(cmd.spawn().map_err(|e| format!("download: {e}"))?)
        }
        false => None,
    };
    let length = Duration::from_secs(seconds);
    let cut = thread::scope(|s| {
        let cutter = (cell.event == Event::Cut)
            .then(|| s.spawn(|| cut_between(lab, 1, start + length / 3, start + length / 3 + CUT)));
        cutter.map(|h| {
            h.join()
                .unwrap_or_else(|_| Err("the link switch panicked".into()))
        })
    });
    let deadline = start + length + OVERRUN;
    let wait = |child: Option<std::process::Child>, what: &str| {
        child
            .map(|c| finish(c, deadline, what).and_then(|o| ok_output(o, what)))
            .transpose()
    };
    let client = wait(client, "voice client");
    let server = wait(server, "voice server");
    let bulk = wait(bulk, "download");
    let cut: Option<CutTimes> = cut.transpose()?;
    client?;
    server?;
    let download = match bulk? {
        Some(out) => Some(
            serde_json::from_slice::<DownloadReport>(&out.stdout)
                .map_err(|e| format!("download: {e}"))?,
        ),
        None => None,
    };
    let voice = match cell.voice() {
        true => {
            let client = read_log(&client_log).map_err(|e| e.to_string())?;
            let server = read_log(&server_log).map_err(|e| e.to_string())?;
            Some(voice_figures(&client, &server))
        }
        false => None,
    };
    let figures = download.as_ref().map(|d| download_figures(d, cut));
    let mut row = Row::run(cell, seconds, figures.as_ref(), voice.as_ref());
    row.peak_mbit_s = link_peaks(lab).map(|p| p.to_vec());
    let series = download.as_ref().zip(figures).map(|(d, f)| {
        let (down, up) = cut.map_or((None, None), |c| cut_marks(c, d.start_unix_ms));
        CellSeries {
            mode: cell.mode.name().into(),
            event: cell.event.name().into(),
            workload: cell.workload.name().into(),
            run,
            marks: [("link 1 down", down), ("link 1 up", up)]
                .into_iter()
                .filter_map(|(name, at)| Some((name.to_string(), at?)))
                .collect(),
            mbit_s: f.series_mbit_s,
        }
    });
    Ok((row, series))
}

/// The most each link (1, 2) was handed in any 100 ms since the lab came
/// up, either way, Mbit/s (`None`: an emulator's counters were not read).
fn link_peaks(lab: &Lab) -> Option<[f64; 2]> {
    let now = unix_ms();
    let peak = |link| {
        let path = crate::bringup::link_counters_path(lab, link);
        let totals = crate::link::published::totals_in(&path, now).ok()?;
        let bytes = totals
            .up
            .peak_ip_bytes_100ms
            .max(totals.down.peak_ip_bytes_100ms);
        Some(round1(bytes as f64 * 8.0 / 0.1 / 1e6))
    };
    Some([peak(WanLink::One)?, peak(WanLink::Two)?])
}

impl Scenario for Bond {
    type Results = Results;

    fn name(&self) -> &str {
        SCENARIO
    }

    fn plan(&mut self, exe: &Path) -> RunPlan {
        self.tunnel = crate::optimize::available(exe).map_err(|e| e.to_string());
        self.bond = self.tunnel.clone().and_then(|()| supports_bond(exe));
        let plan = &self.plan;
        RunPlan {
            header: format!(
                "scenario bond: {} cells x {} run(s) of {} s (two links: 30 Mbit/s at 80 ms, 20 Mbit/s at 40 ms){}{}",
                plan.cells.len(),
                plan.runs,
                plan.seconds,
                match (&self.tunnel, &self.bond) {
                    (Err(e), _) => format!("; wanopt modes not available: {e}"),
                    (Ok(()), Err(e)) => format!("; wanopt-bond {e}"),
                    (Ok(()), Ok(())) => String::new(),
                },
                if self.results.quick { " (quick)" } else { "" }
            ),
            steps: (plan.cells.len() * plan.runs) as u64,
        }
    }

    fn run(&mut self, env: &Env<'_>) -> Finished<Results> {
        let started = *self.started.get_or_insert_with(Instant::now);
        let cells = self.plan.cells.clone();
        for (i, cell) in cells.iter().enumerate() {
            env.say(format!(
                "[{}] cell {}/{}: {} {} {}",
                humantime(started.elapsed()),
                i + 1,
                cells.len(),
                cell.mode.name(),
                cell.event.name(),
                cell.workload.name(),
            ));
            self.run_cell(env, cell);
        }
        Finished {
            results: self.results.clone(),
            stopped: None,
        }
    }

    fn write_outputs(results: &Results, out: &Path) -> Result<(), RunError> {
        output::write_results(out, results, report::markdown(results))?;
        output::plotted(super::plot::over_time(results, out));
        Ok(())
    }

    fn summary(results: &Results) -> String {
        report::summary(results)
    }

    fn written(results: &Results, out: &Path) -> String {
        let plots: Vec<&str> = ["bond-cut", "bond-clean"]
            .into_iter()
            .filter(|s| out.join(format!("{s}.svg")).exists())
            .collect();
        format!(
            "wrote {}/results.json, report.md{}{}{}{}",
            out.display(),
            if plots.is_empty() {
                String::new()
            } else {
                format!(", {} (.svg, .png)", plots.join(" and "))
            },
            if out.join("series").exists() {
                ", series/"
            } else {
                ""
            },
            if out.join("status").exists() {
                ", status/"
            } else {
                ""
            },
            if results.flow_resets.is_empty() {
                ""
            } else {
                ", logs/ (node logs of labs with flow resets)"
            }
        )
    }

    fn flow_resets(results: &Results) -> &[String] {
        &results.flow_resets
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bond::matrix::Workload;

    fn cell(mode: Mode, workload: Workload) -> Cell {
        Cell {
            mode,
            event: Event::None,
            workload,
        }
    }

    #[test]
    fn the_edge_gets_its_path_mode_and_the_voice_its_forward() {
        assert_eq!(
            edge_args(&cell(Mode::WanoptBond, Workload::Bulk)),
            ["--path-mode", "bond"]
        );
        let voice = edge_args(&cell(Mode::WanoptPath2, Workload::Voice));
        assert_eq!(&voice[..2], ["--path-mode", "failover"]);
        assert!(voice.contains(&"198.18.1.1:5004=198.18.3.2:5004".to_string()));
        assert!(edge_args(&cell(Mode::Direct, Workload::Bulk)).is_empty());
    }

    #[test]
    fn the_shaped_edge_declares_each_link_s_rate_on_its_own_paths() {
        let args = edge_args(&cell(Mode::WanoptShaped, Workload::Bulk));
        assert_eq!(
            args,
            [
                "--path-mode",
                "bond",
                "--path",
                "198.18.2.1=198.18.2.2:4433,rate=29100kbit",
                "--path",
                "198.18.4.1=198.18.4.2:4433,rate=19400kbit",
            ]
        );
    }

    #[test]
    fn seeds_differ_per_cell_and_run_and_fit_a_request() {
        let a = cell(Mode::Direct, Workload::Bulk);
        let b = cell(Mode::WanoptFailover, Workload::Bulk);
        let seeds = [
            payload_seed(&a, 1),
            payload_seed(&a, 2),
            payload_seed(&b, 1),
        ];
        assert!(seeds.iter().all(|s| *s <= MAX_SEED));
        assert!(seeds[0] != seeds[1] && seeds[0] != seeds[2] && seeds[1] != seeds[2]);
        assert_eq!(payload_seed(&a, 1), seeds[0]);
    }

    /// An executable that does not know `--path-mode bond` (here, one that
    /// fails as clap does) is refused with what it said.
    #[test]
    fn bond_support_is_what_the_edges_parser_says() {
        let dir = std::env::temp_dir().join(format!("bond-exe-{}", std::process::id()));
        let _ = std::fs::create_dir_all(&dir);
        let exe = dir.join("wanopt");
        let script = "#!/bin/sh\nfor a in \"$@\"; do [ \"$a\" = bond ] && { echo \"wanopt: invalid value 'bond' for '--path-mode'\" >&2; exit 2; }; done\nexit 0\n";
        let _ = std::fs::write(&exe, script);
        let _ = Command::new("chmod").arg("+x").arg(&exe).status();
        let refused = supports_bond(&exe);
        let ok = supports_bond(Path::new("/bin/true"));
        let _ = std::fs::remove_dir_all(&dir);
        assert_eq!(
            refused.err().as_deref(),
            Some("not available: this build's edge has no `--path-mode bond` (wanopt: invalid value 'bond' for '--path-mode')")
        );
        assert_eq!(ok, Ok(()));
    }
}
