//! The `realtime` scenario on the lab: every cell of the [`Plan`] on a
//! fresh lab, the streams and the bulk download at once, each cell's rows
//! written as they come.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::thread;
use std::time::{Duration, Instant};

use super::matrix::SCENARIO;
use super::matrix::{Cell, Event, Mode, Plan, Size, CUT, JITTER_MS, LINK_MBPS, RTT_MS};
use super::measure::{recovery_s, series, stream_figures};
use super::peer::{
    peer_command, read_log, Record, Stream, Streams, VIDEO_BYTES, VIDEO_PORT, VOICE_BYTES,
    VOICE_PORT,
};
use super::report;
use super::results::CellSeries;
use super::results::{fill_added_delay, Results, Row, Skipped};
use crate::bringup::{self, UpConfig};
use crate::clock::unix_ms;
use crate::kit::output;
use crate::kit::process::{finish, ok_output};
use crate::kit::stats::round2;
use crate::link::{cut_between, link_totals, CutTimes};
use crate::lossy::client::ClientReport;
use crate::lossy::measure::{mbps, overhead_pct};
use crate::lossy::results::WanDelta;
use crate::lossy::run::supports_fec;
use crate::optimize::{node_status, wait_tunnel_up, OptimizeError, CORE_CONTROL, EDGE_CONTROL};
use crate::profile::LINUX;
use crate::scenario::runner::{humantime, Env, Finished, Plan as RunPlan, Scenario};
use crate::scenario::RunError;
use crate::topology::{Lab, Node, EDGE_LAN_ADDR, SERVER_ADDR};
use crate::traffic::GENERATOR_PORT;

/// Time between starting the server's peer and the cell's start.
const LEAD_IN: Duration = Duration::from_millis(700);
/// How long the processes of a cell may take beyond its length (the
/// peers' grace, the bulk download's drain).
const OVERRUN: Duration = Duration::from_secs(40);
/// Width of a series bin, ms.
const BIN_MS: u64 = 100;
/// The window of the bulk download's recovery, s.
const RECOVERY_WINDOW_S: f64 = 0.1;
/// The share of the rate before the event the bulk must be back at.
const RECOVERY_SHARE: f64 = 0.8;

/// The edge's arguments: a `--forward-udp` per stream, at the edge's LAN
/// address to the server.
pub fn edge_args() -> Vec<String> {
    [VOICE_PORT, VIDEO_PORT]
        .iter()
        .flat_map(|port| {
            [
                "--forward-udp".to_string(),
                format!("{EDGE_LAN_ADDR}:{port}={SERVER_ADDR}:{port}"),
            ]
        })
        .collect()
}

/// The core's arguments: UDP to the server's stream ports.
pub fn core_args() -> Vec<String> {
    vec![
        "--allow-udp".into(),
        format!("{SERVER_ADDR}:{VOICE_PORT}-{VIDEO_PORT}"),
    ]
}

/// Where the client sends its streams in `mode`: the server, or the
/// edge's forward.
pub fn stream_target(mode: Mode) -> &'static str {
    if mode.tunnel() {
        EDGE_LAN_ADDR
    } else {
        SERVER_ADDR
    }
}

/// The `realtime` scenario and its results so far.
#[derive(Debug)]
pub struct Realtime {
    plan: Plan,
    results: Results,
    tunnel: Result<(), String>,
    fec: bool,
    started: Option<Instant>,
}

/// What one cell measured.
struct Measured {
    rows: Vec<Row>,
    series: Vec<CellSeries>,
}

impl Realtime {
    /// The scenario of plan `size`.
    pub fn new(size: Size) -> Realtime {
        let plan = Plan::new(size);
        let settings = serde_json::json!({
            "seconds": plan.seconds,
            "link1": format!("rtt {RTT_MS}ms rate {LINK_MBPS}mbit queue 1bdp jitter {JITTER_MS}ms"),
            "voice": "50 packets/s of 200 B each way, UDP 5004, DSCP EF",
            "video": "2 Mbit/s down, 30 frames/s of 7 x 1200 B, UDP 5006, DSCP AF41",
            "bulk": "1 TCP download",
            "plan": match size {
                Size::Full => "full",
                Size::Quick => "quick",
                Size::Smoke => "smoke",
            },
        });
        Realtime {
            results: Results {
                scenario: SCENARIO.into(),
                quick: size != Size::Full,
                settings,
                rows: Vec::new(),
                skipped: Vec::new(),
                flow_resets: Vec::new(),
                series: Vec::new(),
            },
            plan,
            tunnel: Ok(()),
            fec: false,
            started: None,
        }
    }

    fn skip(&mut self, cell: &Cell, reason: &str) {
        self.results.skipped.push(Skipped {
            loss_pct: cell.condition.loss_pct,
            burst: cell.condition.burst,
            mode: cell.mode.name().into(),
            event: cell.event.name().into(),
            reason: reason.into(),
        });
    }

    /// A fresh lab for `cell`, the tunnel up in wanopt modes.
    fn up(&self, env: &Env<'_>, cell: &Cell) -> Result<(), String> {
        let specs = cell.condition.link().specs().map_err(|e| e.to_string())?;
        let tunnel = cell.mode.tunnel();
        let config = UpConfig {
            specs,
            profile: &LINUX,
            optimize: tunnel,
            reduce: false,
            node_args: if tunnel {
                vec!["--fec".into(), "auto".into()]
            } else {
                Vec::new()
            },
            edge_args: match cell.mode {
                Mode::Direct => Vec::new(),
                Mode::WanoptFec => edge_args(),
                Mode::WanoptDup => {
                    let mut args = edge_args();
                    args.extend(["--path-mode".into(), "duplicate".into()]);
                    args
                }
            },
            core_args: if tunnel { core_args() } else { Vec::new() },
            link2: cell.condition.link2().map_err(|e| e.to_string())?,
            sites: crate::sites::Sites::ONE,
            cluster: None,
            edges: Default::default(),
        };
        bringup::up(env.lab, &config, env.exe).map_err(|e| format!("lab up failed: {e}"))?;
        if tunnel {
            wait_tunnel_up(env.lab, env.exe)?;
        }
        Ok(())
    }

    /// Checks the nodes' logs for flow resets (kept under `logs/` when
    /// there are any) and keeps their `/status` under `status/`; returns
    /// the edge's and the core's.
    fn after_cell(&mut self, env: &Env<'_>, cell: &Cell) -> NodeStatus {
        let mut status = NodeStatus::default();
        if !cell.mode.tunnel() {
            return status;
        }
        let dir = env.out.join("status");
        let _ = std::fs::create_dir_all(&dir);
        for (node, control, role) in [
            (Node::Edge, EDGE_CONTROL, "edge"),
            (Node::Core, CORE_CONTROL, "core"),
        ] {
            if let Ok(json) = node_status(env.lab, env.exe, node, control) {
                let text = serde_json::to_string_pretty(&json).unwrap_or_default();
                let _ = std::fs::write(dir.join(format!("{}-{role}.json", cell.stem())), text);
                match node {
                    Node::Edge => status.edge = Some(json),
                    _ => status.core = Some(json),
                }
            }
        }
        let state = env.lab.state_dir();
        let logs = [state.join("wanopt-edge.log"), state.join("wanopt-core.log")];
        let resets = crate::optimize::flow_resets(&logs);
        if let Some(first) = resets.first() {
            let label = cell.stem();
            crate::optimize::save_logs(env.lab, env.out, &label);
            env.say(format!("{label}: FLOW RESET: the run fails: {first}"));
            self.results.flow_resets.extend(resets);
        }
        status
    }

    fn run_cell(&mut self, env: &Env<'_>, cell: &Cell) {
        env.bar.set_message(cell.stem());
        if cell.mode.tunnel() {
            if let Err(reason) = self.tunnel.clone() {
                self.skip(cell, &reason);
                return;
            }
            if !self.fec {
                self.skip(cell, "not available: this build's nodes have no --fec");
                return;
            }
        }
        if let Err(reason) = self.up(env, cell) {
            env.say(format!("  {}: {reason}", cell.stem()));
            self.skip(cell, &reason);
            return;
        }
        if let Ok(cc) = env
            .lab
            .read_sysctl(Node::Client, "net.ipv4.tcp_congestion_control")
        {
            self.results.settings["endpoint_congestion_control"] = cc.into();
        }
        let outcome = measure(env.lab, env.exe, env.out, cell, self.plan.seconds);
        let status = self.after_cell(env, cell);
        match outcome {
            Ok(mut m) => {
                for r in &mut m.rows {
                    r.fec_residual_pct = status.fec_residual_pct(&r.direction);
                }
                for r in &m.rows {
                    env.say(format!("  {}: {}", cell.stem(), row_figure(r)));
                }
                self.results.rows.extend(m.rows);
                fill_added_delay(&mut self.results.rows);
                self.results.series.extend(m.series);
            }
            Err(reason) => {
                env.say(format!("  {}: failed: {reason}", cell.stem()));
                self.skip(cell, &reason);
            }
        }
        let _ = Realtime::write_outputs(&self.results, env.out);
    }
}

/// The nodes' `/status` at the end of a wanopt cell.
#[derive(Debug, Default)]
struct NodeStatus {
    edge: Option<serde_json::Value>,
    core: Option<serde_json::Value>,
}

impl NodeStatus {
    /// The FEC residual loss the sender of `direction` (`up`: the edge,
    /// `down`: the core) reports for its peer, percent.
    fn fec_residual_pct(&self, direction: &str) -> Option<f64> {
        let sender = if direction == "up" {
            &self.edge
        } else {
            &self.core
        };
        sender.as_ref()?["peers"][0]["fec"]["residual_loss_percent"]
            .as_f64()
            .map(round2)
    }
}

/// A row's figures for a progress line.
fn row_figure(r: &Row) -> String {
    let or_na = |v: Option<f64>| v.map_or("n/a".to_string(), |v| v.to_string());
    match r.throughput_mbps {
        Some(t) => format!("{} {}: {t} Mbit/s", r.stream, r.direction),
        None => format!(
            "{} {}: loss {}%, delay p50 {} p99 {} ms, jitter {} ms, max gap {} ms",
            r.stream,
            r.direction,
            or_na(r.delivered_loss_pct),
            or_na(r.delay_p50_ms),
            or_na(r.delay_p99_ms),
            or_na(r.jitter_ms),
            or_na(r.max_gap_ms)
        ),
    }
}

/// Runs the streams and the bulk download of `cell` on the lab as it is.
fn measure(
    lab: &Lab,
    exe: &Path,
    out: &Path,
    cell: &Cell,
    seconds: u64,
) -> Result<Measured, String> {
    let state = lab.state_dir();
    let client_log = state.join("rt-client.log");
    let server_log = state.join("rt-server.log");
    let _ = std::fs::remove_file(&client_log);
    let _ = std::fs::remove_file(&server_log);
    let before = link_totals(lab, unix_ms())?;
    let start_ms = unix_ms() + LEAD_IN.as_millis() as u64;
    let start = Instant::now() + LEAD_IN;
    let until = start_ms + seconds * 1_000;
    let streams = Streams::VoiceAndVideo;
    let server = peer_command(
        lab,
        exe,
        Node::Server,
        SERVER_ADDR,
        until,
        &server_log,
        streams,
    )
    .spawn()
    .map_err(|e| format!("rt-peer server: {e}"))?;
    thread::sleep(start.saturating_duration_since(Instant::now()));
    let client = peer_command(
        lab,
        exe,
        Node::Client,
        stream_target(cell.mode),
        until,
        &client_log,
        streams,
    )
    .spawn()
    .map_err(|e| format!("rt-peer client: {e}"))?;
    let mut bulk = lab.command(Node::Client, &exe.to_string_lossy());
    bulk.args(["lab", "lossy-client", "--connect"])
        .arg(format!("{SERVER_ADDR}:{GENERATOR_PORT}"))
        .args(["--workload", "bulk", "--streams", "1"])
        .args(["--seconds", &seconds.to_string()])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let bulk_start_ms = unix_ms();
    let bulk = bulk.spawn().map_err(|e| format!("bulk client: {e}"))?;
    let length = Duration::from_secs(seconds);
    let cut = thread::scope(|s| {
        let cutter = (cell.event == Event::Link1Down)
            .then(|| s.spawn(|| cut_between(lab, 1, start + length / 3, start + length / 3 + CUT)));
        cutter.map(|h| {
            h.join()
                .unwrap_or_else(|_| Err("the link switch panicked".into()))
        })
    });
    let deadline = start + length + OVERRUN;
    let client =
        finish(client, deadline, "rt-peer client").and_then(|o| ok_output(o, "rt-peer client"));
    let server =
        finish(server, deadline, "rt-peer server").and_then(|o| ok_output(o, "rt-peer server"));
    let bulk = finish(bulk, deadline, "bulk client").and_then(|o| ok_output(o, "bulk client"));
    let cut = cut.transpose()?.unwrap_or_default();
    client?;
    server?;
    let bulk = bulk?;
    let wan = WanDelta::from(link_totals(lab, unix_ms())?.since(&before));
    let client = read_log(&client_log).map_err(|e| e.to_string())?;
    let server = read_log(&server_log).map_err(|e| e.to_string())?;
    let report: ClientReport =
        serde_json::from_slice(&bulk.stdout).map_err(|e| format!("bulk client: {e}"))?;
    let measured = figures(
        cell,
        seconds,
        &client,
        &server,
        &report,
        wan,
        (start_ms, bulk_start_ms, cut),
    );
    let dir = out.join("series");
    let _ = std::fs::create_dir_all(&dir);
    let text = serde_json::to_string(&measured.series).unwrap_or_default();
    let _ = std::fs::write(dir.join(format!("{}.json", cell.stem())), text);
    Ok(measured)
}

/// The records of `stream` that are sends (`received` false) or arrivals.
fn of(records: &[Record], stream: Stream, received: bool) -> Vec<Record> {
    records
        .iter()
        .filter(|r| r.stream == stream && r.received == received)
        .copied()
        .collect()
}

/// The rows and series of a cell from the peers' logs, the bulk
/// download's report and the link's counters. `times`: the cell's start
/// and the bulk download's, ms since the Unix epoch, and the cut.
fn figures(
    cell: &Cell,
    seconds: u64,
    client: &[Record],
    server: &[Record],
    report: &ClientReport,
    wan: WanDelta,
    (start_ms, bulk_start_ms, cut): (u64, u64, CutTimes),
) -> Measured {
    let streams = [
        (
            "voice",
            "up",
            of(client, Stream::Voice, false),
            of(server, Stream::Voice, true),
        ),
        (
            "voice",
            "down",
            of(server, Stream::Voice, false),
            of(client, Stream::Voice, true),
        ),
        (
            "video",
            "down",
            of(server, Stream::Video, false),
            of(client, Stream::Video, true),
        ),
    ];
    let marks: Vec<(String, f64)> = [("link 1 down", cut.down_ms), ("link 1 up", cut.up_ms)]
        .iter()
        .filter_map(|(name, at)| {
            at.map(|ms| (name.to_string(), (ms as f64 - start_ms as f64) / 1e3))
        })
        .collect();
    let mut rows = Vec::new();
    let mut cell_series = Vec::new();
    let mut payload = 0u64;
    for (stream, direction, sent, received) in &streams {
        let f = stream_figures(sent, received);
        let bytes = if *stream == "video" {
            VIDEO_BYTES
        } else {
            VOICE_BYTES
        };
        payload += f.delivered as u64 * bytes as u64;
        rows.push(Row::stream(cell, stream, direction, seconds, &f));
        cell_series.push(CellSeries {
            mode: cell.mode.name().into(),
            event: cell.event.name().into(),
            loss_pct: cell.condition.loss_pct,
            burst: cell.condition.burst,
            stream: stream.to_string(),
            direction: direction.to_string(),
            marks: marks.clone(),
            bins: series(sent, received, start_ms * 1_000_000, BIN_MS),
        });
    }
    let mut bulk = Row::new(cell, "bulk", "down", seconds);
    if let ClientReport::Bulk {
        seconds: s,
        bytes,
        total_bytes,
        samples,
    } = report
    {
        bulk.throughput_mbps = Some(round2(mbps(*bytes, *s)));
        payload += total_bytes;
        if let Some(down) = cut.down_ms {
            let event_s = (down as f64 - bulk_start_ms as f64) / 1e3;
            bulk.recovery_s =
                recovery_s(samples, event_s, RECOVERY_WINDOW_S, RECOVERY_SHARE).map(round2);
        }
    } else {
        bulk.note = Some("the bulk client reported no bulk run".into());
    }
    rows.push(bulk);
    let overhead = overhead_pct(wan.bytes, payload).map(round2);
    for r in &mut rows {
        r.overhead_pct = overhead;
    }
    Measured {
        rows,
        series: cell_series,
    }
}

impl Scenario for Realtime {
    type Results = Results;

    fn name(&self) -> &str {
        SCENARIO
    }

    fn plan(&mut self, exe: &Path) -> RunPlan {
        self.tunnel = crate::optimize::available(exe).map_err(|e: OptimizeError| e.to_string());
        self.fec = self.tunnel.is_ok() && supports_fec(exe);
        RunPlan {
            header: format!(
                "scenario realtime: {} cells of {} s (voice, video and bulk at once){}{}",
                self.plan.cells.len(),
                self.plan.seconds,
                match (&self.tunnel, self.fec) {
                    (Err(e), _) => format!("; wanopt modes not available: {e}"),
                    (Ok(()), false) =>
                        "; wanopt-fec not available (the nodes have no --fec)".into(),
                    (Ok(()), true) => String::new(),
                },
                if self.results.quick { " (quick)" } else { "" }
            ),
            steps: self.plan.cells.len() as u64,
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
                cell.condition.label(),
                cell.mode.name(),
                cell.event.name(),
            ));
            self.run_cell(env, cell);
            env.bar.inc(1);
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
        let plots: Vec<PathBuf> = ["realtime-delay", "realtime-loss"]
            .iter()
            .map(|s| out.join(format!("{s}.svg")))
            .filter(|p| p.exists())
            .collect();
        format!(
            "wrote {}/results.json, report.md, series/{}{}{}",
            out.display(),
            if plots.is_empty() {
                ""
            } else {
                ", realtime-delay and realtime-loss (.svg, .png)"
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
    use crate::realtime::matrix::Condition;

    #[test]
    fn streams_go_through_the_edges_forwards_in_wanopt_modes() {
        assert_eq!(
            edge_args(),
            [
                "--forward-udp",
                "198.18.1.1:5004=198.18.3.2:5004",
                "--forward-udp",
                "198.18.1.1:5006=198.18.3.2:5006"
            ]
        );
        assert_eq!(core_args(), ["--allow-udp", "198.18.3.2:5004-5006"]);
        assert_eq!(stream_target(Mode::Direct), "198.18.3.2");
        assert_eq!(stream_target(Mode::WanoptFec), "198.18.1.1");
    }

    #[test]
    fn the_fec_residual_comes_from_each_directions_sender() {
        let peer = |residual: f64| serde_json::json!({"peers": [{"fec": {"residual_loss_percent": residual}}]});
        let status = NodeStatus {
            edge: Some(peer(0.343)),
            core: Some(peer(3.4368)),
        };
        assert_eq!(status.fec_residual_pct("up"), Some(0.34));
        assert_eq!(status.fec_residual_pct("down"), Some(3.44));
        assert_eq!(NodeStatus::default().fec_residual_pct("up"), None);
    }

    /// A cell's four rows from the peers' logs: voice up and down, video
    /// down, bulk down; the overhead over every stream's payload.
    #[test]
    fn a_cell_gives_a_row_per_stream_and_direction() {
        let cell = Cell {
            condition: Condition {
                loss_pct: 5.0,
                burst: false,
                link2_loss_pct: None,
            },
            mode: Mode::Direct,
            event: Event::None,
        };
        let ms = 1_000_000u64;
        let t0 = 1_000_000 * ms;
        let rec = |received, stream, seq: u32, delay_ms: u64| {
            let sent_ns = t0 + u64::from(seq) * 20 * ms;
            Record {
                received,
                stream,
                seq,
                sent_ns,
                recv_ns: if received { sent_ns + delay_ms * ms } else { 0 },
            }
        };
        let mut client = Vec::new();
        let mut server = Vec::new();
        for seq in 0..100 {
            client.push(rec(false, Stream::Voice, seq, 0));
            server.push(rec(false, Stream::Voice, seq, 0));
            server.push(rec(false, Stream::Video, seq, 0));
            if seq % 10 != 0 {
                server.push(rec(true, Stream::Voice, seq, 21));
            }
            client.push(rec(true, Stream::Voice, seq, 20));
            client.push(rec(true, Stream::Video, seq, 22));
        }
        let report = ClientReport::Bulk {
            seconds: 2.0,
            bytes: 2_500_000,
            total_bytes: 2_600_000,
            samples: vec![(1.0, 1_000_000), (2.0, 2_500_000)],
        };
        let wan = WanDelta {
            bytes: 2_900_000,
            lost_frames: 0,
            queue_drops: 0,
        };
        let m = figures(
            &cell,
            2,
            &client,
            &server,
            &report,
            wan,
            (t0 / ms, t0 / ms, CutTimes::default()),
        );
        let keys: Vec<(&str, &str)> = m
            .rows
            .iter()
            .map(|r| (r.stream.as_str(), r.direction.as_str()))
            .collect();
        assert_eq!(
            keys,
            [
                ("voice", "up"),
                ("voice", "down"),
                ("video", "down"),
                ("bulk", "down")
            ]
        );
        assert_eq!(m.rows[0].delivered_loss_pct, Some(10.0));
        assert_eq!(m.rows[1].delivered_loss_pct, Some(0.0));
        assert_eq!(m.rows[2].delay_p99_ms, Some(22.0));
        assert_eq!(m.rows[3].throughput_mbps, Some(10.0));
        assert!(m.rows[3].delivered_loss_pct.is_none());
        // 90 + 100 voice packets of 200 B, 100 video of 1,200 B, 2.6 MB bulk.
        let payload = 190.0 * 200.0 + 100.0 * 1_200.0 + 2_600_000.0;
        let want = round2((2_900_000.0 / payload - 1.0) * 100.0);
        assert!(m.rows.iter().all(|r| r.overhead_pct == Some(want)));
        assert_eq!(m.series.len(), 3);
        assert_eq!(m.series[0].bins.len(), 20);
    }
}
