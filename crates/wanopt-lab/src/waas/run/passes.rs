//! The passes of a `waas-3g` run: bringing the lab up with or without
//! the nodes, the transfers of each pass (cold and warm around a cache
//! clear), and what is kept after it (logs, cache statistics, flow
//! resets).

use std::collections::BTreeMap;
use std::thread;
use std::time::Duration;

use super::super::files;
use super::super::results::{self, Skipped};
use super::super::servers;
use super::super::transfer::Test;
use super::apps::transfer;
use super::context::{units, Context, Failure, Mode, Stop, Unit, WARM_UP_DOWN, WARM_UP_UP};
use super::counters::{cache_stats, counted_resets};
use crate::bringup::{self, UpConfig};
use crate::optimize::{self, CORE_CONTROL, EDGE_CONTROL};
use crate::profile::Profile;
use crate::scenario::runner::{humantime, say};
use crate::topology::{Node, SERVER_ADDR};
use crate::traffic::GENERATOR_PORT;

/// Brings the lab up for a pass and starts the file server.
pub(super) fn bring_up(ctx: &mut Context<'_>, optimize: bool) -> Result<(), String> {
    let config = UpConfig {
        specs: ctx.specs.clone(),
        profile: ctx.profile,
        optimize,
        reduce: true,
        node_args: Vec::new(),
        edge_args: Vec::new(),
        core_args: Vec::new(),
        link2: None,
        sites: crate::sites::Sites::ONE,
        cluster: None,
        edges: Default::default(),
    };
    bringup::up(ctx.lab, &config, ctx.exe).map_err(|e| format!("lab up failed: {e}"))?;
    if ctx.endpoints.is_null() {
        ctx.endpoints = serde_json::json!({
            "sysctls": Profile::effective(ctx.lab, Node::Server),
            "congestion_control": ctx.profile.congestion_control.unwrap_or("(namespace default)"),
        });
    }
    start_server(ctx)
}

fn start_server(ctx: &Context<'_>) -> Result<(), String> {
    let mut sets: BTreeMap<&'static str, Vec<(&'static str, &[u8])>> = BTreeMap::new();
    for name in ctx.library.keys() {
        if let (Some(spec), Some(data)) = (files::find(name), ctx.library.get(name)) {
            sets.entry(files::set_name(spec))
                .or_default()
                .push((spec.name, data.as_slice()));
        }
    }
    servers::start(ctx.lab, &ctx.layout, &sets, ctx.options.smb_encrypt)
        .map_err(|e| format!("the servers did not start: {e}"))
}

fn skip_pass(ctx: &mut Context<'_>, run: usize, mode: &str, reason: String, transfers: u64) {
    ctx.bar
        .println(format!("run {}: {mode} not measured: {reason}", run + 1));
    ctx.bar.inc(transfers);
    ctx.skipped.push(Skipped {
        run: run + 1,
        mode: mode.into(),
        reason,
    });
}

fn transfers_in_plan(ctx: &Context<'_>) -> u64 {
    ctx.options
        .plan
        .iter()
        .map(|(t, f)| units(*t, f).len() as u64)
        .sum()
}

pub(super) fn baseline_pass(ctx: &mut Context<'_>, run: usize) -> Result<(), Stop> {
    if let Err(reason) = bring_up(ctx, false) {
        let n = transfers_in_plan(ctx);
        skip_pass(ctx, run, "baseline", reason, n);
        return Ok(());
    }
    let plan = ctx.options.plan.clone();
    let mut result = Ok(());
    'tests: for (test, files) in &plan {
        for unit in units(*test, files) {
            result = measure(ctx, run, *test, &unit, Mode::Baseline);
            if result.is_err() {
                break 'tests;
            }
        }
    }
    servers::stop(ctx.lab);
    save_server_log(ctx, run, "baseline");
    result
}

pub(super) fn optimized_pass(ctx: &mut Context<'_>, run: usize) -> Result<(), Stop> {
    if let Err(reason) = bring_up(ctx, true) {
        optimize::save_logs(ctx.lab, &ctx.options.out, &format!("run{}", run + 1));
        let n = transfers_in_plan(ctx) * 2;
        skip_pass(ctx, run, "cold+warm", reason, n);
        return Ok(());
    }
    if let Err(e) = warm_up(ctx) {
        ctx.bar
            .println(format!("run {}: tunnel warm-up failed: {e}", run + 1));
    }
    let plan = ctx.options.plan.clone();
    let mut result = Ok(());
    'tests: for (test, files) in &plan {
        for unit in units(*test, files) {
            if let Err(reason) = clear_caches(ctx) {
                let key = (*test, unit.label, Mode::Cold);
                ctx.samples.entry(key).or_default().1.push(reason.clone());
                let key = (*test, unit.label, Mode::Warm);
                ctx.samples.entry(key).or_default().1.push(reason);
                ctx.bar.inc(2);
                continue;
            }
            result = measure(ctx, run, *test, &unit, Mode::Cold)
                .and_then(|()| measure(ctx, run, *test, &unit, Mode::Warm));
            if result.is_err() {
                break 'tests;
            }
        }
    }
    let mut stats = serde_json::Map::new();
    stats.insert("run".into(), (run + 1).into());
    for (node, control) in [(Node::Edge, EDGE_CONTROL), (Node::Core, CORE_CONTROL)] {
        stats.insert(node.name(), cache_stats(ctx, node, control));
    }
    ctx.cache_stats.push(serde_json::Value::Object(stats));
    servers::stop(ctx.lab);
    // Before the next pass rebuilds the lab and its state directory.
    let counted: Vec<String> = [(Node::Edge, EDGE_CONTROL), (Node::Core, CORE_CONTROL)]
        .into_iter()
        .filter_map(|(node, control)| counted_resets(ctx, node, control))
        .collect();
    let logs = optimize::save_logs(ctx.lab, &ctx.options.out, &format!("run{}", run + 1));
    save_server_log(ctx, run, "optimized");
    let mut resets = optimize::flow_resets(&logs);
    resets.extend(counted);
    if !resets.is_empty() {
        say(
            &ctx.bar,
            format!(
                "run {}: FLOW RESET: the nodes reset {} flow(s); the run fails: {}",
                run + 1,
                resets.len(),
                resets[0]
            ),
        );
        ctx.flow_resets.extend(resets);
        if result.is_ok() {
            result = Err(Stop::Resets);
        }
    }
    result
}

/// Random bytes each way through the freshly started nodes, unmeasured:
/// a deployed tunnel is long-lived, so the first measured transfer should
/// not pay for the tunnel's handshake and its congestion controller's
/// startup (the baseline has no such state: every TCP connection starts
/// cold, and the endpoints do not cache metrics). Random bytes leave
/// nothing useful in the caches, which are cleared before every cold
/// transfer anyway.
fn warm_up(ctx: &Context<'_>) -> Result<(), String> {
    for (reverse, bytes) in [(true, WARM_UP_DOWN), (false, WARM_UP_UP)] {
        let mut cmd = ctx.lab.command(Node::Client, &ctx.exe.to_string_lossy());
        cmd.args(["lab", "gen-client", "--connect"])
            .arg(format!("{SERVER_ADDR}:{GENERATOR_PORT}"))
            .args(["--streams", "1", "--bytes", &bytes.to_string()])
            .args(["--stall-seconds", "60"]);
        if reverse {
            cmd.arg("--reverse");
        }
        if let Some(cc) = ctx.profile.congestion_control {
            cmd.args(["--congestion", cc]);
        }
        let out = cmd.output().map_err(|e| e.to_string())?;
        if !out.status.success() {
            return Err(String::from_utf8_lossy(&out.stderr).trim().to_string());
        }
    }
    Ok(())
}

/// Keeps the servers' logs that have something to say
/// (`logs/runN-PASS-nginx.log`, `-vsftpd.log`, `-smbd.log`).
fn save_server_log(ctx: &Context<'_>, run: usize, pass: &str) {
    let logs = ctx.options.out.join("logs");
    for name in ["nginx", "vsftpd", "smbd"] {
        let from = ctx.lab.state_dir().join(format!("{name}.log"));
        if std::fs::metadata(&from)
            .map(|m| m.len() > 0)
            .unwrap_or(false)
        {
            let _ = std::fs::create_dir_all(&logs);
            let _ = std::fs::copy(
                &from,
                logs.join(format!("run{}-{pass}-{name}.log", run + 1)),
            );
        }
    }
}

/// `wanopt cache clear` on both nodes.
fn clear_caches(ctx: &Context<'_>) -> Result<(), String> {
    for (node, control) in [(Node::Edge, EDGE_CONTROL), (Node::Core, CORE_CONTROL)] {
        let mut cmd = ctx.lab.command(node, &ctx.exe.to_string_lossy());
        cmd.args(["cache", "clear", "--control", control]);
        let out = cmd
            .output()
            .map_err(|e| format!("wanopt cache clear in {}: {e}", node.name()))?;
        if !out.status.success() {
            return Err(format!(
                "wanopt cache clear in {} failed: {}",
                node.name(),
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
    }
    // The peers are told through the tunnel; let that settle.
    thread::sleep(Duration::from_millis(300));
    Ok(())
}

/// Runs one transfer and records its sample or failure.
pub(super) fn measure(
    ctx: &mut Context<'_>,
    run: usize,
    test: Test,
    unit: &Unit,
    mode: Mode,
) -> Result<(), Stop> {
    let file = unit;
    ctx.bar.set_message(format!(
        "run {}/{} {} {} {}",
        run + 1,
        ctx.options.runs,
        mode.name(),
        test.name(),
        file.label
    ));
    let generation = run as u64 * 10 + mode.generation_offset();
    let outcome = transfer(ctx, test, unit, generation, mode != Mode::Baseline);
    ctx.bar.inc(1);
    let entry = ctx.samples.entry((test, file.label, mode)).or_default();
    match outcome {
        Ok(sample) => {
            if ctx.bar.is_hidden() {
                // No terminal (a log file, CI): a line per transfer instead
                // of the bar.
                let sent = match (sample.sent_seconds, sample.save_seconds) {
                    (Some(s), Some(_)) => {
                        format!(" (the save's last byte acknowledged {s:.3} s into the save)")
                    }
                    (Some(s), None) => format!(" (last byte acknowledged at {s:.3} s)"),
                    _ => String::new(),
                };
                eprintln!(
                    "[{}/{}] {} run {} {} {} {}: {:.2} s{sent}, {} WAN bytes; {}",
                    ctx.bar.position(),
                    ctx.bar.length().unwrap_or(0),
                    humantime(ctx.bar.elapsed()),
                    run + 1,
                    mode.name(),
                    test.name(),
                    file.label,
                    sample.seconds,
                    sample.wan_bytes_up + sample.wan_bytes_down,
                    results::path_text(&sample.path)
                );
            }
            entry.0.push(sample);
            Ok(())
        }
        Err(Failure::Failed(reason)) => {
            say(
                &ctx.bar,
                format!(
                    "run {} {} {} {}: failed: {reason}",
                    run + 1,
                    mode.name(),
                    test.name(),
                    file.label
                ),
            );
            entry.1.push(format!("run {}: {reason}", run + 1));
            Ok(())
        }
        Err(Failure::Corrupted(reason)) => {
            let message = format!(
                "run {} {} {} {}: {reason}",
                run + 1,
                mode.name(),
                test.name(),
                file.label
            );
            say(&ctx.bar, format!("CONTENT MISMATCH: {message}"));
            entry.1.push(format!("run {}: {reason}", run + 1));
            ctx.corrupted.push(message.clone());
            Err(Stop::Corrupted(message))
        }
    }
}
