//! The state of a `waas-3g` run: its options, what one transfer moves,
//! the samples so far, and the results they make.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use indicatif::ProgressBar;

use super::super::files::{self, FileSpec};
use super::super::results::{self, FileInfo, LinkInfo, Results, Sample, Skipped};
use super::super::servers::{Layout, SmbEncrypt};
use super::super::setup::{link_summary, SCENARIO};
use super::super::transfer::Test;
use crate::link::LinkSpecs;
use crate::profile::Profile;
use crate::scenario::runner::Env;
use crate::topology::Lab;

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

    pub(super) fn generation_offset(self) -> u64 {
        match self {
            Mode::Baseline => 1,
            Mode::Cold => 2,
            Mode::Warm => 3,
        }
    }
}

/// How long after a transfer the WAN counters are read: the teardown
/// (FIN, last ACKs, the tunnel's stream close) crosses within two RTTs.
pub(super) const SETTLE: Duration = Duration::from_millis(500);
/// A transfer that makes no progress for this long fails.
pub(super) const STALL_SECONDS: u64 = 90;
/// Bytes of the unmeasured warm-up through fresh nodes, down.
pub(super) const WARM_UP_DOWN: u64 = 500_000;
/// Bytes of the unmeasured warm-up through fresh nodes, up.
pub(super) const WARM_UP_UP: u64 = 100_000;

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

/// A row of the results: the test, the file (or set) and the mode.
pub(super) type Key = (Test, &'static str, Mode);

/// The state of a scenario run.
pub(super) struct Context<'a> {
    pub(super) lab: &'a Lab,
    pub(super) exe: &'a Path,
    pub(super) options: &'a Options,
    pub(super) specs: LinkSpecs,
    pub(super) profile: &'static Profile,
    pub(super) bar: ProgressBar,
    pub(super) samples: BTreeMap<Key, (Vec<Sample>, Vec<String>)>,
    pub(super) skipped: Vec<Skipped>,
    pub(super) corrupted: Vec<String>,
    pub(super) cache_stats: Vec<serde_json::Value>,
    pub(super) endpoints: serde_json::Value,
    pub(super) files: Vec<FileInfo>,
    /// The original bytes of every file of the plan.
    pub(super) library: BTreeMap<&'static str, Vec<u8>>,
    pub(super) layout: Layout,
    /// What smbstatus said of the first CIFS session of the run.
    pub(super) smb_session: RefCell<Option<String>>,
    pub(super) flow_resets: Vec<String>,
    pub(super) started: Instant,
    /// Runs whose baseline and optimized passes have finished.
    pub(super) runs_done: usize,
}

impl<'a> Context<'a> {
    /// A run's state at its start: nothing measured yet, every file of
    /// the plan generated.
    pub(super) fn new(
        env: &Env<'a>,
        options: &'a Options,
        specs: LinkSpecs,
        profile: &'static Profile,
    ) -> Context<'a> {
        Context {
            lab: env.lab,
            exe: env.exe,
            options,
            specs,
            profile,
            bar: env.bar.clone(),
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
            layout: Layout::of(env.lab),
            smb_session: RefCell::new(None),
            flow_resets: Vec::new(),
            started: Instant::now(),
            runs_done: 0,
        }
    }
}

/// Why a pass stopped early.
pub(super) enum Stop {
    /// A byte arrived wrong: the whole scenario stops.
    Corrupted(String),
    /// The nodes reset flows: the run failed.
    Resets,
}

/// Why a transfer has no sample.
pub(super) enum Failure {
    /// It failed (the run goes on).
    Failed(String),
    /// A byte arrived wrong (the scenario stops).
    Corrupted(String),
}

/// The results so far.
pub(super) fn collect(ctx: &Context<'_>) -> Results {
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
pub(super) fn plan_files(plan: &[(Test, Vec<&'static FileSpec>)]) -> Vec<&'static FileSpec> {
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
