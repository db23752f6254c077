//! `waas-3g` end to end in a real lab (namespace prefix
//! `${WANOPT_LAB_PREFIX}wlw-`), kept short: two small files through every
//! test (the copy tests copy the two as a set), on the scenario's 3G link,
//! with the real servers and clients (nginx, vsftpd, Samba; curl,
//! smbclient).
//!
//! One test binary without the libtest harness, like `emulator.rs`: the
//! binary is also the lab's executable (`<this> lab ...` runs the `wanopt
//! lab` subcommands: emulator, file server, client). The cold and warm
//! modes need wanopt nodes: the test uses the `wanopt` binary next to its
//! own directory (`target/<profile>/wanopt`, built by `cargo test
//! --workspace`), and fails when there is none with data reduction.
//! Needs root and iproute2, ethtool, iptables, nginx, vsftpd, Samba, curl
//! and smbclient (`scripts/deps`); fails, saying why, without them.
//! The end-to-end run takes about 3 minutes: it is ignored unless asked
//! for (`-- --ignored`), and the scenario tier (`scripts/test-scenarios`)
//! runs it; `scripts/test` runs the quick check of wrong bytes.

use std::path::PathBuf;
use std::process::Command;
use std::time::Instant;

use clap::{Parser, Subcommand};

use wanopt_lab::cli::LabCommand;
use wanopt_lab::topology::{Lab, Node, SERVER_ADDR};
use wanopt_lab::waas::files::find;
use wanopt_lab::waas::results::{Results, Row};
use wanopt_lab::waas::run::{run_with, Options};
use wanopt_lab::waas::servers::SmbEncrypt;
use wanopt_lab::waas::transfer::{Test, EXIT_MISMATCH};

#[derive(Parser)]
struct Cli {
    #[command(subcommand)]
    command: Top,
}

#[derive(Subcommand)]
enum Top {
    #[command(subcommand)]
    Lab(Box<LabCommand>),
}

/// Deletes the lab when dropped.
struct Guard(Lab);

impl Drop for Guard {
    fn drop(&mut self) {
        let _ = self.0.destroy();
    }
}

const FILES: [&str; 2] = ["50K.doc", "50K.xls"];

/// The wanopt binary beside this test's directory, if it has the nodes
/// with data reduction.
fn wanopt_binary() -> Option<PathBuf> {
    let me = std::env::current_exe().ok()?;
    let candidate = me.parent()?.parent()?.join("wanopt");
    let help = Command::new(&candidate)
        .args(["edge", "--help"])
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&help.stdout);
    (help.status.success() && text.contains("--cache-dir")).then_some(candidate)
}

fn check(results: &Results, optimized: bool) -> Result<(), String> {
    if results.scenario != "waas-3g" {
        return Err(format!("scenario {}", results.scenario));
    }
    if !results.corrupted.is_empty() {
        return Err(format!("corrupted: {:?}", results.corrupted));
    }
    for test in Test::ALL {
        // A copy test copies the two files as one set.
        let files: &[&str] = if test.is_copy() {
            &["office-set"]
        } else {
            &FILES
        };
        for file in files.iter().copied() {
            let size = if test.is_copy() {
                FILES
                    .iter()
                    .filter_map(|f| find(f))
                    .map(|f| f.size as u64)
                    .sum()
            } else {
                find(file).map(|f| f.size as u64).unwrap_or(0)
            };
            let base = results
                .find(test, file, "baseline")
                .ok_or_else(|| format!("no baseline row for {} {file}", test.name()))?;
            // The plain TCP path carries at least the file (plus headers).
            let moved = if matches!(test, Test::EditSave) {
                2 * size
            } else {
                size
            };
            if base.wan_bytes < moved || base.seconds <= 0.0 {
                return Err(format!("baseline {} {file}: {base:?}", test.name()));
            }
            // An FTP transfer is part of its session (login and commands
            // around it); the other tests have no session time.
            let ftp = matches!(test, Test::Download | Test::Upload | Test::EditSave);
            let within_session = |r: &Row| match (r.session_seconds, ftp) {
                (Some(session), true) => session + 0.001 >= r.seconds,
                (None, false) => true,
                _ => false,
            };
            if !within_session(base) {
                return Err(format!("baseline {} {file}: session {base:?}", test.name()));
            }
            if !optimized {
                continue;
            }
            let cold = results
                .find(test, file, "cold")
                .ok_or_else(|| format!("no cold row for {} {file}", test.name()))?;
            let warm = results
                .find(test, file, "warm")
                .ok_or_else(|| format!("no warm row for {} {file}", test.name()))?;
            println!(
                "  {} {file}: seconds {:.2} / {:.2} / {:.2}, WAN bytes {} / {} / {}",
                test.name(),
                base.seconds,
                cold.seconds,
                warm.seconds,
                base.wan_bytes,
                cold.wan_bytes,
                warm.wan_bytes
            );
            if !within_session(cold) || !within_session(warm) {
                return Err(format!("{} {file}: session {cold:?} {warm:?}", test.name()));
            }
            // A warm transfer crosses the WAN as references: far less than
            // the file, which the baseline carried whole.
            if warm.wan_bytes * 4 > base.wan_bytes {
                return Err(format!(
                    "warm {} {file} moved {} WAN bytes, baseline {}",
                    test.name(),
                    warm.wan_bytes,
                    base.wan_bytes
                ));
            }
        }
    }
    if !optimized && !results.skipped.iter().any(|s| s.mode == "cold+warm") {
        return Err("cold and warm were neither measured nor reported as skipped".into());
    }
    Ok(())
}

fn prefix() -> String {
    format!(
        "{}wlw-",
        std::env::var("WANOPT_LAB_PREFIX").unwrap_or_default()
    )
}

fn scenario_end_to_end() -> Result<(), String> {
    let lab = Lab::new(&prefix());
    let _guard = Guard(lab.clone());
    let (exe, optimized) = match wanopt_binary() {
        Some(bin) => (bin, true),
        None => {
            return Err("no wanopt binary with data reduction beside the tests (target/<profile>/wanopt): build it first (cargo build -p wanopt, or cargo test --workspace)".into());
        }
    };
    let out = std::env::temp_dir().join(format!("wlw-waas-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&out);
    std::fs::create_dir_all(&out).map_err(|e| e.to_string())?;
    let files: Vec<_> = FILES.iter().filter_map(|f| find(f)).collect();
    let options = Options {
        out: out.clone(),
        quick: true,
        runs: 1,
        seed: 11,
        plan: Test::ALL.iter().map(|t| (*t, files.clone())).collect(),
        smb_encrypt: SmbEncrypt::Default,
    };
    let report = run_with(&lab, &options, &exe).map_err(|e| e.to_string())?;
    if !report.verdict.passed() {
        return Err(format!("run_with returned {:?}", report.verdict));
    }
    let text =
        std::fs::read_to_string(out.join("results.json")).map_err(|e| format!("results: {e}"))?;
    let json: serde_json::Value = serde_json::from_str(&text).map_err(|e| e.to_string())?;
    for row in json["rows"].as_array().into_iter().flatten() {
        for key in ["test", "file", "mode"] {
            if !row[key].is_string() {
                return Err(format!("row without {key}: {row}"));
            }
        }
        if !row["seconds"].is_number() || !row["wan_bytes"].is_u64() {
            return Err(format!("row without seconds or wan_bytes: {row}"));
        }
    }
    let results: Results = serde_json::from_str(&text).map_err(|e| e.to_string())?;
    check(&results, optimized)?;
    for name in ["report.md", "waas-3g-upload.svg", "waas-3g-upload.png"] {
        if !out.join(name).exists() {
            return Err(format!("{name} not written"));
        }
    }
    if optimized && !out.join("logs").join("run1-edge.log").exists() {
        return Err("the edge's log was not kept".into());
    }
    if !results.flow_resets.is_empty() {
        return Err(format!("flow resets: {:?}", results.flow_resets));
    }
    let session = &results.smb["session"];
    if !session.as_str().is_some_and(|s| s.starts_with("SMB3")) {
        return Err(format!("no SMB3 session seen: {}", results.smb));
    }
    let _ = std::fs::remove_dir_all(&out);
    Ok(())
}

/// A receiver that expects other bytes fails loudly with its own exit code.
fn wrong_bytes_fail_loudly() -> Result<(), String> {
    let lab = Lab::new(&prefix());
    let _guard = Guard(lab.clone());
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    // The scenario's link and a file server with seed 11; clients with
    // seed 12 expect other bytes.
    let spec = wanopt_lab::waas::link_options()
        .specs()
        .map_err(|e| e.to_string())?;
    let config = wanopt_lab::bringup::UpConfig {
        specs: spec,
        profile: &wanopt_lab::profile::LEGACY,
        optimize: false,
        reduce: false,
        node_args: Vec::new(),
        edge_args: Vec::new(),
        core_args: Vec::new(),
        link2: None,
        sites: wanopt_lab::sites::Sites::ONE,
        cluster: None,
        edges: Default::default(),
    };
    wanopt_lab::bringup::up(&lab, &config, &exe).map_err(|e| e.to_string())?;
    let ready = lab.state_dir().join("waas-server.ready");
    let args: Vec<String> = [
        "lab",
        "waas-server",
        "--http",
        &format!("{SERVER_ADDR}:80"),
        "--file",
        &format!("{SERVER_ADDR}:21"),
        "--seed",
        "11",
        "--ready",
        &ready.to_string_lossy(),
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    lab.spawn_daemon(Node::Server, "waas-server", &exe, &args)
        .map_err(|e| e.to_string())?;
    let start = Instant::now();
    while !ready.exists() {
        if start.elapsed().as_secs() > 30 {
            return Err("the file server did not start".into());
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    for (test, seed, want) in [
        ("download", "11", 0),
        ("download", "12", EXIT_MISMATCH),
        ("upload", "12", EXIT_MISMATCH),
        ("http-download", "12", EXIT_MISMATCH),
    ] {
        let status = lab
            .command(Node::Client, &exe.to_string_lossy())
            .args(["lab", "waas-client", "--server", SERVER_ADDR])
            .args(["--test", test, "--file", "50K.ppt", "--seed", seed])
            .output()
            .map_err(|e| e.to_string())?;
        let got = status.status.code().unwrap_or(-1);
        let stderr = String::from_utf8_lossy(&status.stderr);
        if got != want || (want == EXIT_MISMATCH && !stderr.contains("CONTENT MISMATCH")) {
            return Err(format!(
                "{test} seed {seed}: exit {got}, want {want}: {stderr}"
            ));
        }
    }
    Ok(())
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("lab") {
        let cli = Cli::parse();
        let Top::Lab(command) = cli.command;
        let code = wanopt_lab::cli::run(*command).unwrap_or_else(|e| {
            eprintln!("lab: {e:#}");
            1
        });
        std::process::exit(code);
    }
    // (name, test, ignored): an ignored test runs only with `--ignored`
    // or `--include-ignored`, as libtest has it.
    type Test = (&'static str, fn() -> Result<(), String>, bool);
    let tests: [Test; 2] = [
        ("wrong_bytes_fail_loudly", wrong_bytes_fail_loudly, false),
        // About 3 minutes of a real lab: the scenario tier runs it
        // (scripts/test-scenarios), so that scripts/test stays under 8.
        ("scenario_end_to_end", scenario_end_to_end, true),
    ];
    let only_ignored = args.iter().any(|a| a == "--ignored");
    let with_ignored = only_ignored || args.iter().any(|a| a == "--include-ignored");
    if args.iter().any(|a| a == "--list") {
        for (name, _, _) in tests {
            println!("{name}: test");
        }
        return;
    }
    if !nix::unistd::Uid::effective().is_root() {
        println!("waas tests cannot run: they need root (network namespaces); run them as root, as scripts/test does");
        std::process::exit(1);
    }
    let filters: Vec<&String> = args
        .iter()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .collect();
    let mut failed = 0;
    for (name, test, ignored) in tests {
        if !filters.is_empty() && !filters.iter().any(|f| name.contains(f.as_str())) {
            continue;
        }
        if (ignored && !with_ignored) || (!ignored && only_ignored) {
            if ignored {
                println!(
                    "test {name} ... ignored (the scenario tier runs it: scripts/test-scenarios)"
                );
            }
            continue;
        }
        println!("test {name} ...");
        let start = Instant::now();
        let result = std::panic::catch_unwind(test).unwrap_or_else(|_| Err("panicked".into()));
        match result {
            Ok(()) => println!("test {name} ... ok ({:.1}s)", start.elapsed().as_secs_f64()),
            Err(e) => {
                failed += 1;
                println!("test {name} ... FAILED: {e}");
            }
        }
    }
    if failed > 0 {
        std::process::exit(1);
    }
}
