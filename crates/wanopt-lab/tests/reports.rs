//! Every scenario's outputs, rendered from a fixed `results.json` and
//! compared with the files beside it (`tests/reports/SCENARIO/`):
//! `results.json` written back byte for byte, `report.md`, and what a run
//! prints at its end (`stdout.txt`: the summary, then the line that says
//! what was written). The plots go to the target's scratch folder
//! (`reports/SCENARIO/`), to look at.
//!
//! `WANOPT_BLESS=1` rewrites the expected files (the fixture too, as the
//! code writes it back) from what the code renders now: for a change that
//! means to change an output.

use std::path::{Path, PathBuf};

use serde::de::DeserializeOwned;
use wanopt_lab::cellular::Cellular;
use wanopt_lab::grid::Grid;
use wanopt_lab::kit::output::read_results;
use wanopt_lab::lossy::Lossy;
use wanopt_lab::multisite::SitesScenario;
use wanopt_lab::realtime::Realtime;
use wanopt_lab::scenario::runner::Scenario;
use wanopt_lab::waas::Waas3g;

/// The folder of a scenario's fixture and expected files.
fn fixture(scenario: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/reports")
        .join(scenario)
}

/// `actual` is the expected file `name` of `dir` (or becomes it, blessed).
fn expect(dir: &Path, name: &str, actual: &str) {
    let path = dir.join(name);
    if std::env::var_os("WANOPT_BLESS").is_some() {
        std::fs::write(&path, actual).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        return;
    }
    let expected =
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    if expected != actual {
        let line = expected
            .lines()
            .zip(actual.lines())
            .position(|(a, b)| a != b)
            .unwrap_or_else(|| expected.lines().count().min(actual.lines().count()));
        panic!(
            "{} differs from what the code renders, first at line {}:\nexpected: {:?}\nactual:   {:?}",
            path.display(),
            line + 1,
            expected.lines().nth(line),
            actual.lines().nth(line)
        );
    }
}

/// Renders scenario `S`'s outputs from its fixture and compares them.
fn check<S: Scenario>(scenario: &str)
where
    S::Results: DeserializeOwned,
{
    let dir = fixture(scenario);
    let results: S::Results = read_results(&dir).unwrap_or_else(|e| panic!("{e}"));
    let out = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("reports")
        .join(scenario);
    let _ = std::fs::remove_dir_all(&out);
    std::fs::create_dir_all(&out).unwrap_or_else(|e| panic!("{}: {e}", out.display()));
    S::write_outputs(&results, &out).unwrap_or_else(|e| panic!("{scenario}: {e}"));
    let read = |name: &str| {
        std::fs::read_to_string(out.join(name)).unwrap_or_else(|e| panic!("{scenario}: {e}"))
    };
    // Written back as it was read: the fixture is the code's own output.
    expect(&dir, "results.json", &read("results.json"));
    expect(&dir, "report.md", &read("report.md"));
    let written = S::written(&results, &out).replace(&out.display().to_string(), "OUT");
    expect(
        &dir,
        "stdout.txt",
        &format!("{}--- then on stderr:\n{written}\n", S::summary(&results)),
    );
}

#[test]
fn tcp_opt() {
    check::<Grid>("tcp-opt");
}

#[test]
fn grid_of_middleboxes() {
    check::<Grid>("brokenness");
}

#[test]
fn waas_3g() {
    check::<Waas3g>("waas-3g");
}

#[test]
fn lossy() {
    check::<Lossy>("lossy");
}

#[test]
fn realtime() {
    check::<Realtime>("realtime");
}

#[test]
fn sites() {
    check::<SitesScenario>("sites");
}

#[test]
fn cellular() {
    check::<Cellular>("cellular");
}
