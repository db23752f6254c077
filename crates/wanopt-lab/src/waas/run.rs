//! Running `waas-3g`: per run, a baseline pass on the lab without wanopt
//! nodes, then an optimized pass (nodes with data reduction) where every
//! transfer is measured cold (both caches cleared just before) and then
//! warm (the same transfer again). WAN bytes come from the emulator's
//! counters, read before and after each transfer. The servers (nginx,
//! vsftpd, Samba: [`super::servers`]) start with each pass, the clients
//! (curl, smbclient: [`super::clients`]) run per transfer, and the lab
//! checks every file that arrived, on either side, against the bytes it
//! expects. A flow reset in the nodes' logs fails the run.

use anyhow::Context as _;
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::thread;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};

use super::files::{self, FileSpec};
use super::results::{self, FileInfo, LinkInfo, Results, Sample, Skipped, TunnelSample};
use super::servers::{self, Layout, SmbEncrypt};
use super::transfer::Test;
use super::{link_options, link_summary, plan, PROFILE, SCENARIO};
use crate::bringup::{self, counters_path, UpConfig};
use crate::link::LinkSpecs;
use crate::optimize::{self, CORE_CONTROL, EDGE_CONTROL};
use crate::profile::Profile;
use crate::scenario::RunArgs;
use crate::topology::{Lab, Node, SERVER_ADDR};
use crate::traffic::GENERATOR_PORT;

mod apps;

use apps::transfer;

/// A transfer mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Mode {
    /// No wanopt on the path.
    Baseline,
    /// wanopt with reduce, both caches just cleared.
    Cold,
    /// wanopt with reduce, right after the cold transfer.
    Warm,
}

impl Mode {
    /// Every mode, in the reference's column order.
    pub const ALL: [Mode; 3] = [Mode::Baseline, Mode::Cold, Mode::Warm];

    /// `baseline`, `cold` or `warm`.
    pub fn name(self) -> &'static str {
        match self {
            Mode::Baseline => "baseline",
            Mode::Cold => "cold",
            Mode::Warm => "warm",
        }
    }

    fn generation_offset(self) -> u64 {
        match self {
            Mode::Baseline => 1,
            Mode::Cold => 2,
            Mode::Warm => 3,
        }
    }
}

/// How long after a transfer the WAN counters are read: the teardown
/// (FIN, last ACKs, the tunnel's stream close) crosses within two RTTs.
const SETTLE: Duration = Duration::from_millis(500);
/// A transfer that makes no progress for this long fails.
const STALL_SECONDS: u64 = 90;
/// Bytes of the unmeasured warm-up through fresh nodes, down and up.
const WARM_UP_DOWN: u64 = 500_000;
const WARM_UP_UP: u64 = 100_000;

/// What a run of the scenario needs.
#[derive(Debug, Clone)]
pub struct Options {
    /// Output directory.
    pub out: PathBuf,
    /// `--quick`.
    pub quick: bool,
    /// Runs of every transfer.
    pub runs: usize,
    /// Seed of the file set.
    pub seed: u64,
    /// Tests and their files.
    pub plan: Vec<(Test, Vec<&'static FileSpec>)>,
    /// Samba's `smb encrypt` for the CIFS tests.
    pub smb_encrypt: SmbEncrypt,
}

/// What one transfer moves: a file, or for a copy test a whole set (named
/// by [`files::set_name`]).
#[derive(Debug, Clone)]
pub struct Unit {
    /// The row's `file`: the file's name or the set's.
    pub label: &'static str,
    /// The files.
    pub files: Vec<&'static FileSpec>,
}

/// The transfers of `test` over `files`: one per file, or one per set for
/// a copy test.
pub fn units(test: Test, files: &[&'static FileSpec]) -> Vec<Unit> {
    if !test.is_copy() {
        return files
            .iter()
            .map(|f| Unit {
                label: f.name,
                files: vec![*f],
            })
            .collect();
    }
    let mut out: Vec<Unit> = Vec::new();
    for f in files {
        let label = files::set_name(f);
        match out.iter_mut().find(|u| u.label == label) {
            Some(unit) => unit.files.push(f),
            None => out.push(Unit {
                label,
                files: vec![*f],
            }),
        }
    }
    out
}

type Key = (Test, &'static str, Mode);

/// The state of a scenario run.
struct Context<'a> {
    lab: &'a Lab,
    exe: &'a Path,
    options: &'a Options,
    specs: LinkSpecs,
    profile: &'static Profile,
    bar: ProgressBar,
    samples: BTreeMap<Key, (Vec<Sample>, Vec<String>)>,
    skipped: Vec<Skipped>,
    corrupted: Vec<String>,
    cache_stats: Vec<serde_json::Value>,
    endpoints: serde_json::Value,
    files: Vec<FileInfo>,
    /// The original bytes of every file of the plan.
    library: BTreeMap<&'static str, Vec<u8>>,
    layout: Layout,
    /// What smbstatus said of the first CIFS session of the run.
    smb_session: RefCell<Option<String>>,
    flow_resets: Vec<String>,
    started: Instant,
    /// Runs whose baseline and optimized passes have finished.
    runs_done: usize,
}

/// Why a pass stopped early.
enum Stop {
    /// A byte arrived wrong: the whole scenario stops.
    Corrupted(String),
    /// The nodes reset flows: the run failed.
    Resets,
}

/// `wanopt lab run waas-3g`; returns the exit code.
pub fn run(lab: &Lab, args: &RunArgs) -> anyhow::Result<i32> {
    let runs = match args.runs {
        Some(r) if r == 0 || r > 100 => {
            eprintln!("wanopt lab: --runs must be between 1 and 100");
            return Ok(2);
        }
        Some(r) => r,
        None if args.quick => 1,
        None => 3,
    };
    std::fs::create_dir_all(&args.out)
        .with_context(|| format!("cannot create output directory {}", args.out.display()))?;
    let options = Options {
        out: args.out.clone(),
        quick: args.quick,
        runs,
        seed: files::DEFAULT_SEED,
        plan: plan(args.quick)
            .into_iter()
            .filter(|(test, _)| args.tests.is_empty() || args.tests.contains(test))
            .collect(),
        smb_encrypt: args.smb_encrypt.unwrap_or_default(),
    };
    let exe = bringup::private_exe()?;
    let result = run_with(lab, &options, &exe);
    let _ = std::fs::remove_file(&exe);
    result
}

/// Runs the scenario with `exe` as the lab's executable (it must have the
/// `wanopt lab` subcommands, and the nodes for the cold and warm modes).
pub fn run_with(lab: &Lab, options: &Options, exe: &Path) -> anyhow::Result<i32> {
    let specs = link_options().specs()?;
    let profile = Profile::named(PROFILE)?;
    let transfers: usize = options.plan.iter().map(|(t, f)| units(*t, f).len()).sum();
    let optimized = optimize::available(exe).and_then(|()| {
        if optimize::supports_reduce(exe) {
            Ok(())
        } else {
            Err("this build's nodes have no data reduction (no --cache-dir)".to_string())
        }
    });
    let modes = if optimized.is_ok() { 3 } else { 1 };
    eprintln!(
        "scenario {SCENARIO}: {transfers} transfers x {modes} modes x {} runs{}; link: {}",
        options.runs,
        if options.quick { " (quick)" } else { "" },
        link_summary()
    );
    let bar = ProgressBar::new((transfers * modes * options.runs) as u64);
    bar.set_style(
        ProgressStyle::with_template("{elapsed_precise} [{bar:30}] {pos}/{len} {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> "),
    );
    let mut ctx = Context {
        lab,
        exe,
        options,
        specs,
        profile,
        bar,
        samples: BTreeMap::new(),
        skipped: Vec::new(),
        corrupted: Vec::new(),
        cache_stats: Vec::new(),
        endpoints: serde_json::Value::Null,
        files: file_infos(&plan_files(&options.plan), options.seed),
        library: plan_files(&options.plan)
            .into_iter()
            .map(|f| (f.name, files::generate(f, options.seed)))
            .collect(),
        layout: Layout::of(lab),
        smb_session: RefCell::new(None),
        flow_resets: Vec::new(),
        started: Instant::now(),
        runs_done: 0,
    };
    let mut outcome = Ok(());
    for run in 0..options.runs {
        outcome = baseline_pass(&mut ctx, run);
        if outcome.is_ok() {
            outcome = match &optimized {
                Ok(()) => optimized_pass(&mut ctx, run),
                Err(reason) => {
                    ctx.skipped.push(Skipped {
                        run: run + 1,
                        mode: "cold+warm".into(),
                        reason: reason.clone(),
                    });
                    Ok(())
                }
            };
        }
        if outcome.is_ok() {
            ctx.runs_done = run + 1;
        }
        let _ = write_outputs(&collect(&ctx), &options.out);
        if outcome.is_err() {
            break;
        }
    }
    ctx.bar.finish_and_clear();
    let _ = lab.destroy();
    let results = collect(&ctx);
    write_outputs(&results, &options.out)?;
    let _ = std::io::Write::write_all(
        &mut std::io::stdout().lock(),
        super::report::summary(&results).as_bytes(),
    );
    eprintln!(
        "wrote {}/results.json, report.md, {SCENARIO}-*.svg/.png, logs/",
        options.out.display()
    );
    if !ctx.flow_resets.is_empty() {
        eprintln!(
            "wanopt lab: {SCENARIO} FAILED: the nodes reset {} flow(s) (see report.md):",
            ctx.flow_resets.len()
        );
        for line in &ctx.flow_resets {
            eprintln!("  {line}");
        }
    }
    match outcome {
        Ok(()) if ctx.flow_resets.is_empty() => Ok(0),
        Ok(()) | Err(Stop::Resets) => Ok(1),
        Err(Stop::Corrupted(message)) => {
            eprintln!("wanopt lab: {SCENARIO} stopped: {message}");
            Ok(1)
        }
    }
}

/// Brings the lab up for a pass and starts the file server.
fn bring_up(ctx: &mut Context<'_>, optimize: bool) -> Result<(), String> {
    let config = UpConfig {
        specs: ctx.specs.clone(),
        profile: ctx.profile,
        optimize,
        reduce: true,
        node_args: Vec::new(),
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

fn baseline_pass(ctx: &mut Context<'_>, run: usize) -> Result<(), Stop> {
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

fn optimized_pass(ctx: &mut Context<'_>, run: usize) -> Result<(), Stop> {
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
        stats.insert(node.name().into(), cache_stats(ctx, node, control));
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

/// The flow resets for a codec error a node counted (`wanopt status
/// --json`, `flow_resets`: `codec` and `peer_codec`), as a line for the
/// report, or `None` when it counted none (or cannot be asked).
fn counted_resets(ctx: &Context<'_>, node: Node, control: &str) -> Option<String> {
    let mut cmd = ctx.lab.command(node, &ctx.exe.to_string_lossy());
    cmd.args(["status", "--json", "--control", control]);
    let out = cmd.output().ok().filter(|o| o.status.success())?;
    let status: serde_json::Value = serde_json::from_slice(&out.stdout).ok()?;
    let resets = status["flow_resets"].as_object()?;
    let count = |reason: &str| resets.get(reason).and_then(|v| v.as_u64()).unwrap_or(0);
    let (codec, peer_codec) = (count("codec"), count("peer_codec"));
    (codec + peer_codec > 0).then(|| {
        format!(
            "{}: status counts flow resets for codec errors: codec {codec}, peer_codec {peer_codec}",
            node.name()
        )
    })
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

fn cache_stats(ctx: &Context<'_>, node: Node, control: &str) -> serde_json::Value {
    let mut cmd = ctx.lab.command(node, &ctx.exe.to_string_lossy());
    cmd.args(["cache", "stats", "--json", "--control", control]);
    match cmd.output() {
        Ok(out) if out.status.success() => {
            serde_json::from_slice(&out.stdout).unwrap_or_else(|_| {
                serde_json::Value::String(String::from_utf8_lossy(&out.stdout).into_owned())
            })
        }
        Ok(out) => serde_json::json!({"error": String::from_utf8_lossy(&out.stderr).trim()}),
        Err(e) => serde_json::json!({"error": e.to_string()}),
    }
}

/// The emulator's counters per direction: bytes delivered, frames
/// dropped at random and at a full queue.
#[derive(Debug, Clone, Copy)]
struct WanCounters {
    up: u64,
    down: u64,
    lost_up: u64,
    lost_down: u64,
    queue_up: u64,
    queue_down: u64,
}

/// The emulator's counters as of a snapshot taken at or after
/// `not_before_ms` (both directions).
fn wan_counters(lab: &Lab, not_before_ms: u64) -> Result<WanCounters, String> {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let doc: Option<serde_json::Value> = std::fs::read_to_string(counters_path(lab))
            .ok()
            .and_then(|t| serde_json::from_str(&t).ok());
        if let Some(doc) = doc {
            let at = |d: &str| doc[d]["at_unix_ms"].as_u64().unwrap_or(0);
            let tx = |d: &str| doc[d]["io"]["tx_bytes"].as_u64();
            let link = |d: &str, k: &str| doc[d]["link"][k].as_u64().unwrap_or(0);
            if at("up") >= not_before_ms && at("down") >= not_before_ms {
                if let (Some(up), Some(down)) = (tx("up"), tx("down")) {
                    return Ok(WanCounters {
                        up,
                        down,
                        lost_up: link("up", "dropped_loss"),
                        lost_down: link("down", "dropped_loss"),
                        queue_up: link("up", "dropped_queue"),
                        queue_down: link("down", "dropped_queue"),
                    });
                }
            }
        }
        if Instant::now() > deadline {
            return Err("the emulator's counters are stale (is the emulator running?)".into());
        }
        thread::sleep(Duration::from_millis(40));
    }
}

/// A node's tunnel counters (its first peer in `wanopt status --json`)
/// and its reconnections so far, or `None` when the node cannot be asked:
/// the sample then goes without.
fn tunnel_counters(ctx: &Context<'_>, node: Node, control: &str) -> Option<(TunnelSample, u64)> {
    let mut cmd = ctx.lab.command(node, &ctx.exe.to_string_lossy());
    cmd.args(["status", "--json", "--control", control]);
    let out = cmd.output().ok().filter(|o| o.status.success())?;
    let status: serde_json::Value = serde_json::from_slice(&out.stdout).ok()?;
    let peer = &status["peers"][0];
    let dup = &peer["duplication"];
    let count = |v: &serde_json::Value| v.as_u64().unwrap_or(0);
    let sample = TunnelSample {
        sent_packets: peer["sent_packets"].as_u64()?,
        lost_packets: count(&peer["lost_packets"]),
        duplicated: count(&dup["datagrams"]),
        rebuilt: count(&dup["rebuilt"]),
        tails_on: dup["active"].as_bool().unwrap_or(false),
        loss_percent: dup["loss_percent"].as_f64().unwrap_or(0.0),
    };
    Some((sample, count(&peer["reconnects"])))
}

/// What a node's tunnel counted between two snapshots (the state flags
/// as of the first); nothing if the tunnel reconnected in between (the
/// counters are then a new connection's).
fn tunnel_delta(
    before: Option<(TunnelSample, u64)>,
    after: Option<(TunnelSample, u64)>,
) -> Option<TunnelSample> {
    let ((b, b_reconnects), (a, a_reconnects)) = (before?, after?);
    if a_reconnects != b_reconnects {
        return None;
    }
    Some(TunnelSample {
        sent_packets: a.sent_packets.checked_sub(b.sent_packets)?,
        lost_packets: a.lost_packets.saturating_sub(b.lost_packets),
        duplicated: a.duplicated.saturating_sub(b.duplicated),
        rebuilt: a.rebuilt.saturating_sub(b.rebuilt),
        ..b
    })
}

/// A line above the progress bar, or on stderr when there is no bar to
/// print above (no terminal: the bar is hidden and would drop it).
fn say(bar: &ProgressBar, line: String) {
    if bar.is_hidden() {
        eprintln!("{line}");
    } else {
        bar.println(line);
    }
}

/// Runs one transfer and records its sample or failure.
fn measure(
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
                    crate::scenario::humantime(ctx.bar.elapsed()),
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

enum Failure {
    Failed(String),
    Corrupted(String),
}

/// The results so far.
fn collect(ctx: &Context<'_>) -> Results {
    let mut rows = Vec::new();
    let mut skipped = ctx.skipped.clone();
    for (test, files) in &ctx.options.plan {
        for unit in units(*test, files) {
            let bytes: u64 = unit
                .files
                .iter()
                .map(|f| ctx.library.get(f.name).map_or(f.size, Vec::len) as u64)
                .sum();
            for mode in Mode::ALL {
                if let Some((samples, failed)) = ctx.samples.get(&(*test, unit.label, mode)) {
                    rows.extend(results::row(
                        *test,
                        unit.label,
                        bytes,
                        mode.name(),
                        samples,
                        failed.clone(),
                    ));
                    // Transfers that failed in every run: said so, nothing
                    // invented.
                    if samples.is_empty() && !failed.is_empty() {
                        skipped.push(Skipped {
                            run: 0,
                            mode: format!("{} {} {}", mode.name(), test.name(), unit.label),
                            reason: failed.join("; "),
                        });
                    }
                }
            }
        }
    }
    Results {
        scenario: SCENARIO.into(),
        rows,
        quick: ctx.options.quick,
        // What the figures are: the runs finished so far (results are
        // written after each run, so a stopped scenario says so).
        runs: ctx.runs_done.max(1),
        method: match (ctx.runs_done, ctx.options.runs) {
            (done, planned) if done < planned => format!(
                "{done} of the {planned} planned runs finished{}",
                if done > 1 { "; median of those" } else { "" }
            ),
            (_, 1) => "one run".into(),
            _ => "median of the runs".into(),
        },
        link: LinkInfo {
            up: ctx.specs.up.clone(),
            down: ctx.specs.down.clone(),
            seed: ctx.specs.seed,
            summary: link_summary(),
        },
        profile: ctx.profile.name.into(),
        file_seed: ctx.options.seed,
        files: ctx.files.clone(),
        skipped,
        corrupted: ctx.corrupted.clone(),
        cache_stats: ctx.cache_stats.clone(),
        endpoints: ctx.endpoints.clone(),
        elapsed_seconds: (ctx.started.elapsed().as_secs_f64() * 10.0).round() / 10.0,
        smb: serde_json::json!({
            "smb_encrypt": ctx.options.smb_encrypt.name(),
            "session": *ctx.smb_session.borrow(),
        }),
        flow_resets: ctx.flow_resets.clone(),
    }
}

/// The files of `plan`, each once, in the order of the file sets.
fn plan_files(plan: &[(Test, Vec<&'static FileSpec>)]) -> Vec<&'static FileSpec> {
    files::FILE_SET
        .iter()
        .chain(files::OOXML_SET.iter())
        .filter(|f| {
            plan.iter()
                .any(|(_, fs)| fs.iter().any(|g| g.name == f.name))
        })
        .collect()
}

/// Name, size, kind and estimated LZ ratio of each file.
pub fn file_infos(specs: &[&FileSpec], seed: u64) -> Vec<FileInfo> {
    specs
        .iter()
        .map(|f| {
            let data = files::generate(f, seed);
            FileInfo {
                name: f.name.into(),
                bytes: f.size as u64,
                kind: serde_json::to_value(f.kind)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_string))
                    .unwrap_or_default(),
                lz_ratio: (data.len() as f64 / files::lz_estimate(&data).max(1) as f64 * 100.0)
                    .round()
                    / 100.0,
            }
        })
        .collect()
}

/// Writes `results.json`, `report.md` and the plots.
pub fn write_outputs(results: &Results, out: &Path) -> anyhow::Result<()> {
    std::fs::write(
        out.join("results.json"),
        serde_json::to_string_pretty(results)?,
    )?;
    std::fs::write(out.join("report.md"), super::report::markdown(results))?;
    if let Err(e) = super::plot::draw_all(results, out) {
        eprintln!("wanopt lab: plot not written: {e}");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn snapshot(sent: u64, lost: u64, tails_on: bool) -> (TunnelSample, u64) {
        let sample = TunnelSample {
            sent_packets: sent,
            lost_packets: lost,
            duplicated: sent / 10,
            rebuilt: lost / 2,
            tails_on,
            loss_percent: 1.5,
        };
        (sample, 0)
    }

    /// A transfer's tunnel record is the counters' growth, with the state
    /// as the transfer found it; a node that could not be asked, or whose
    /// tunnel reconnected in between, gives no record.
    #[test]
    fn tunnel_records_are_differences_of_snapshots() {
        let d = tunnel_delta(Some(snapshot(400, 6, true)), Some(snapshot(551, 8, false)));
        assert_eq!(
            d,
            Some(TunnelSample {
                sent_packets: 151,
                lost_packets: 2,
                duplicated: 15,
                rebuilt: 1,
                tails_on: true,
                loss_percent: 1.5,
            })
        );
        assert_eq!(tunnel_delta(None, Some(snapshot(551, 8, true))), None);
        assert_eq!(tunnel_delta(Some(snapshot(400, 6, true)), None), None);
        let reconnected = (snapshot(900, 8, true).0, 1);
        assert_eq!(
            tunnel_delta(Some(snapshot(400, 6, true)), Some(reconnected)),
            None
        );
        assert_eq!(
            tunnel_delta(Some(snapshot(400, 6, true)), Some(snapshot(20, 0, true))),
            None
        );
    }
}
