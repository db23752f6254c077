//! The built-in scenarios, in one table: each one's name, what it measures,
//! the options of `lab run` that are its own, and how it is built and run.
//! A name that is not in the table is a scenario TOML file (the grid).

use super::args::RunArgs;
use super::error::RunError;
use super::runner::{self, Verdict};
use crate::grid::Grid;
use crate::topology::Lab;

/// An option of `lab run` that only some scenarios take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScenarioOption {
    /// `--runs`.
    Runs,
    /// `--tests` and `--smb-encrypt`.
    WaasTests,
    /// `--smoke`.
    Smoke,
    /// `--traces`.
    Traces,
}

impl ScenarioOption {
    /// Every option, in the order they are checked.
    pub const ALL: [ScenarioOption; 4] = [
        ScenarioOption::WaasTests,
        ScenarioOption::Smoke,
        ScenarioOption::Traces,
        ScenarioOption::Runs,
    ];

    /// Whether `args` gives it.
    fn given(self, args: &RunArgs) -> bool {
        match self {
            ScenarioOption::Runs => args.runs.is_some(),
            ScenarioOption::WaasTests => !args.tests.is_empty() || args.smb_encrypt.is_some(),
            ScenarioOption::Smoke => args.smoke,
            ScenarioOption::Traces => args.traces.is_some(),
        }
    }

    /// The refusal when `scenario` does not take it.
    pub fn refusal(self, scenario: &str) -> String {
        let owners = || {
            SCENARIOS
                .iter()
                .filter(|s| s.takes.contains(&self))
                .map(|s| s.name)
                .collect::<Vec<_>>()
                .join(", ")
        };
        match self {
            ScenarioOption::Runs => {
                format!("--runs is not an option of the {scenario} scenario (one run per cell)")
            }
            ScenarioOption::WaasTests => format!(
                "--tests and --smb-encrypt are options of the {} scenario",
                owners()
            ),
            ScenarioOption::Smoke => format!("--smoke is an option of the {} scenario", owners()),
            ScenarioOption::Traces => {
                format!("--traces is an option of the {} scenario", owners())
            }
        }
    }
}

/// A built-in scenario.
pub struct Entry {
    /// Its name on the command line and in `results.json`.
    pub name: &'static str,
    /// What it measures, in a line.
    pub summary: &'static str,
    /// The options of `lab run` that are its own.
    pub takes: &'static [ScenarioOption],
    /// Builds it from the options (checked) and runs it on the lab.
    pub run: fn(&Lab, &RunArgs) -> Result<Verdict, RunError>,
}

/// Every built-in scenario.
pub const SCENARIOS: &[Entry] = &[
    Entry {
        name: "tcp-opt",
        summary: "the Cisco TCP optimization table: 4 bulk streams on 250 Mbit/s at RTT 0-250 ms",
        takes: &[ScenarioOption::Runs],
        run: run_grid,
    },
    Entry {
        name: crate::waas::SCENARIO,
        summary: "the Cisco WAAS 3G tables: HTTP, FTP and CIFS with nginx, vsftpd and Samba, cold and warm",
        takes: &[ScenarioOption::Runs, ScenarioOption::WaasTests],
        run: |lab, args| {
            let mut scenario = crate::waas::Waas3g::from_args(args)?;
            runner::run(lab, &mut scenario, &args.out).map(|r| r.verdict)
        },
    },
    Entry {
        name: crate::lossy::SCENARIO,
        summary: "random loss and bursts on 100 Mbit/s: bulk, transfers and requests against kernel CUBIC and BBR",
        takes: &[],
        run: |lab, args| {
            let mut scenario = crate::lossy::Lossy::new(args.quick);
            runner::run(lab, &mut scenario, &args.out).map(|r| r.verdict)
        },
    },
    Entry {
        name: crate::realtime::SCENARIO,
        summary: "voice, video and a download at once over one or two lossy links",
        takes: &[ScenarioOption::Smoke],
        run: |lab, args| {
            use crate::realtime::matrix::Size;
            let size = match (args.smoke, args.quick) {
                (true, _) => Size::Smoke,
                (false, true) => Size::Quick,
                (false, false) => Size::Full,
            };
            let mut scenario = crate::realtime::Realtime::new(size);
            runner::run(lab, &mut scenario, &args.out).map(|r| r.verdict)
        },
    },
    Entry {
        name: crate::bond::SCENARIO,
        summary: "two links as one: a download on 30 + 20 Mbit/s links, clean, lossy and with a cut, and voice beside it",
        takes: &[],
        run: |lab, args| {
            let mut scenario = crate::bond::Bond::new(args.quick);
            runner::run(lab, &mut scenario, &args.out).map(|r| r.verdict)
        },
    },
    Entry {
        name: crate::multisite::SCENARIO,
        summary: "several branch sites downloading at once through one core",
        takes: &[],
        run: |lab, args| {
            let mut scenario = crate::multisite::SitesScenario::new(args.quick);
            runner::run(lab, &mut scenario, &args.out).map(|r| r.verdict)
        },
    },
    Entry {
        name: crate::cluster::scenario::SCENARIO,
        summary: "a core cluster: six sites through 1-3 replicas, a replica killed, one added, redials",
        takes: &[],
        run: |lab, args| {
            let mut scenario = crate::cluster::scenario::ClusterScenario::new(args.quick);
            runner::run(lab, &mut scenario, &args.out).map(|r| r.verdict)
        },
    },
    Entry {
        name: crate::reach::SCENARIO,
        summary: "paths that block or police UDP: the tunnel's TCP transport against kernel BBR, and its way back to QUIC",
        takes: &[],
        run: |lab, args| {
            let mut scenario = crate::reach::Reach::new(args.quick);
            runner::run(lab, &mut scenario, &args.out).map(|r| r.verdict)
        },
    },
    Entry {
        name: crate::cellular::SCENARIO,
        summary: "recorded cellular traces: a download and an interactive ping beside it",
        takes: &[ScenarioOption::Runs, ScenarioOption::Traces],
        run: |lab, args| {
            let runs = args.runs()?.unwrap_or(1);
            let mut scenario = crate::cellular::Cellular::new(
                args.quick,
                args.traces.as_deref(),
                &args.out,
                runs,
            )?;
            runner::run(lab, &mut scenario, &args.out).map(|r| r.verdict)
        },
    },
    Entry {
        name: crate::brokenness::SCENARIO,
        summary: "the path-brokenness paper: SACK against loss, the smallest window scale against RTT, ECN policies on a marking queue",
        takes: &[],
        run: |lab, args| {
            let mut scenario = crate::brokenness::Brokenness::new(args.quick);
            runner::run(lab, &mut scenario, &args.out).map(|r| r.verdict)
        },
    },
    Entry {
        name: crate::initcwnd::SCENARIO,
        summary: "the initial-window post: a short file over long paths, initial windows 2, 4 and 10, and a fresh and a warm tunnel",
        takes: &[ScenarioOption::Runs],
        run: |lab, args| {
            let mut scenario = crate::initcwnd::Initcwnd::new(args.quick, args.runs()?);
            runner::run(lab, &mut scenario, &args.out).map(|r| r.verdict)
        },
    },
    Entry {
        name: crate::fwsm::SCENARIO,
        summary: "the firewall single-flow guide: one TCP flow through a firewall's defaults, tuned, and with jumbo frames",
        takes: &[ScenarioOption::Runs],
        run: |lab, args| {
            let mut scenario = crate::fwsm::Fwsm::new(args.quick, args.runs()?);
            runner::run(lab, &mut scenario, &args.out).map(|r| r.verdict)
        },
    },
];

/// What a scenario TOML file takes: the grid's options.
const FILE_TAKES: &[ScenarioOption] = &[ScenarioOption::Runs];

fn run_grid(lab: &Lab, args: &RunArgs) -> Result<Verdict, RunError> {
    let mut scenario = Grid::from_args(args)?;
    runner::run(lab, &mut scenario, &args.out).map(|r| r.verdict)
}

/// The built-in scenario called `name`, if any.
pub fn find(name: &str) -> Option<&'static Entry> {
    SCENARIOS.iter().find(|entry| entry.name == name)
}

/// The built-in names, for messages: `` `tcp-opt`, `waas-3g`, ... ``.
pub fn names() -> String {
    SCENARIOS
        .iter()
        .map(|entry| format!("`{}`", entry.name))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Refuses the options of `args` that its scenario does not take, before
/// any work starts.
pub fn check_options(args: &RunArgs) -> Result<(), RunError> {
    let takes = find(&args.scenario).map_or(FILE_TAKES, |entry| entry.takes);
    if let Some(option) = ScenarioOption::ALL
        .into_iter()
        .find(|option| option.given(args) && !takes.contains(option))
    {
        return Err(RunError::NotItsOption(option.refusal(&args.scenario)));
    }
    args.runs()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_every_option_has_an_owner() {
        let mut all: Vec<&str> = SCENARIOS.iter().map(|s| s.name).collect();
        all.sort_unstable();
        all.dedup();
        assert_eq!(all.len(), SCENARIOS.len());
        for option in ScenarioOption::ALL {
            assert!(
                SCENARIOS.iter().any(|s| s.takes.contains(&option)),
                "{option:?}"
            );
        }
        assert_eq!(
            ScenarioOption::Traces.refusal("lossy"),
            "--traces is an option of the cellular scenario"
        );
        assert_eq!(
            ScenarioOption::WaasTests.refusal("lossy"),
            "--tests and --smb-encrypt are options of the waas-3g scenario"
        );
        assert!(names().starts_with("`tcp-opt`, `waas-3g`"), "{}", names());
    }

    #[test]
    fn bad_options_are_the_users_errors() {
        let args = |scenario: &str, runs: Option<usize>, tests: bool| RunArgs {
            scenario: scenario.into(),
            out: "/nonexistent/out".into(),
            runs,
            quick: true,
            tests: if tests {
                vec![crate::waas::transfer::Test::Download]
            } else {
                Vec::new()
            },
            smb_encrypt: None,
            smoke: false,
            traces: None,
        };
        for (args, message) in [
            (
                args("tcp-opt", Some(0), false),
                "--runs must be between 1 and 100",
            ),
            (
                args("tcp-opt", Some(101), false),
                "--runs must be between 1 and 100",
            ),
            (
                args("tcp-opt", None, true),
                "--tests and --smb-encrypt are options of the waas-3g scenario",
            ),
            (
                args("no-such-scenario", None, false),
                "unknown scenario `no-such-scenario`: use `tcp-opt`, `waas-3g`, `lossy`, `realtime`, `bond`, `sites`, `cluster`, `reach`, `cellular`, `path-brokenness`, `initcwnd`, `fwsm` or a path to a .toml file",
            ),
        ] {
            // `lab run` checks the options before anything runs.
            let e = crate::scenario::run(&crate::topology::Lab::new("t9-"), &args).err();
            assert_eq!(e.as_ref().map(|e| e.to_string()).as_deref(), Some(message));
            assert!(e.is_some_and(|e| e.is_usage()));
        }
        let e = crate::waas::Waas3g::from_args(&args("waas-3g", Some(0), false)).err();
        assert!(e.is_some_and(|e| e.is_usage() && e.to_string().contains("--runs")));
    }
}
