//! Running `waas-3g`: per run, a baseline pass on the lab without wanopt
//! nodes, then an optimized pass (nodes with data reduction) where every
//! transfer is measured cold (both caches cleared just before) and then
//! warm (the same transfer again). WAN bytes come from the emulator's
//! counters, read before and after each transfer. The servers (nginx,
//! vsftpd, Samba: [`super::servers`]) start with each pass, the clients
//! (curl, smbclient: [`super::clients`]) run per transfer, and the lab
//! checks every file that arrived, on either side, against the bytes it
//! expects. A flow reset in the nodes' logs fails the run.
//!
//! [`Waas3g`] is the scenario the runner ([`crate::scenario::runner`])
//! runs; `context` holds a run's state, `passes` the passes,
//! `apps` one transfer with the real clients, `counters` what is read
//! around it.

use std::path::Path;

use super::files;
use super::results::Results;
use super::setup::{link_options, link_summary, plan, PROFILE, SCENARIO};
use crate::kit::output;
use crate::link::LinkSpecs;
use crate::optimize;
use crate::profile::Profile;
use crate::scenario::runner::{self, Env, Finished, Plan, Report, Scenario};
use crate::scenario::{RunArgs, RunError};
use crate::topology::Lab;

mod apps;
mod context;
mod counters;
mod passes;

use context::{collect, Context, Stop};
pub use context::{file_infos, units, Mode, Options, Unit};
use passes::{baseline_pass, optimized_pass};

/// The `waas-3g` scenario, checked and ready to run.
#[derive(Debug)]
pub struct Waas3g {
    options: Options,
    specs: LinkSpecs,
    profile: &'static Profile,
    /// Whether the nodes can run the cold and warm modes (why not).
    optimized: Result<(), optimize::OptimizeError>,
}

impl Waas3g {
    /// The scenario with the options of `lab run waas-3g`.
    pub fn from_args(args: &RunArgs) -> Result<Waas3g, RunError> {
        let runs = match args.runs()? {
            Some(r) => r,
            None if args.quick => 1,
            None => 3,
        };
        Waas3g::new(Options {
            out: args.out.clone(),
            quick: args.quick,
            runs,
            seed: files::DEFAULT_SEED,
            plan: plan(args.quick)
                .into_iter()
                .filter(|(test, _)| args.tests.is_empty() || args.tests.contains(test))
                .collect(),
            smb_encrypt: args.smb_encrypt.unwrap_or_default(),
        })
    }

    /// The scenario with `options`.
    pub fn new(options: Options) -> Result<Waas3g, RunError> {
        Ok(Waas3g {
            specs: link_options().specs()?,
            profile: Profile::named(PROFILE)?,
            options,
            optimized: Ok(()),
        })
    }

    /// Transfers per pass and mode.
    fn transfers(&self) -> usize {
        self.options
            .plan
            .iter()
            .map(|(t, f)| units(*t, f).len())
            .sum()
    }
}

impl Scenario for Waas3g {
    type Results = Results;

    fn name(&self) -> &str {
        SCENARIO
    }

    fn plan(&mut self, exe: &Path) -> Plan {
        self.optimized = optimize::available(exe).and_then(|()| {
            if optimize::supports_reduce(exe) {
                Ok(())
            } else {
                Err(optimize::OptimizeError::NoReduce)
            }
        });
        let (transfers, runs) = (self.transfers(), self.options.runs);
        let modes = if self.optimized.is_ok() { 3 } else { 1 };
        Plan {
            header: format!(
                "scenario {SCENARIO}: {transfers} transfers x {modes} modes x {runs} runs{}; link: {}",
                if self.options.quick { " (quick)" } else { "" },
                link_summary()
            ),
            steps: (transfers * modes * runs) as u64,
        }
    }

    fn run(&mut self, env: &Env<'_>) -> Finished<Results> {
        let mut ctx = Context::new(env, &self.options, self.specs.clone(), self.profile);
        let mut outcome = Ok(());
        for run in 0..self.options.runs {
            outcome = baseline_pass(&mut ctx, run);
            if outcome.is_ok() {
                outcome = match &self.optimized {
                    Ok(()) => optimized_pass(&mut ctx, run),
                    Err(reason) => {
                        ctx.skipped.push(super::results::Skipped {
                            run: run + 1,
                            mode: "cold+warm".into(),
                            reason: reason.to_string(),
                        });
                        Ok(())
                    }
                };
            }
            if outcome.is_ok() {
                ctx.runs_done = run + 1;
            }
            let _ = write_outputs(&collect(&ctx), env.out);
            if outcome.is_err() {
                break;
            }
        }
        Finished {
            results: collect(&ctx),
            stopped: match outcome {
                Err(Stop::Corrupted(message)) => Some(message),
                Ok(()) | Err(Stop::Resets) => None,
            },
        }
    }

    fn write_outputs(results: &Results, out: &Path) -> Result<(), RunError> {
        write_outputs(results, out)
    }

    fn summary(results: &Results) -> String {
        super::report::summary(results)
    }

    fn written(_: &Results, out: &Path) -> String {
        format!(
            "wrote {}/results.json, report.md, {SCENARIO}-*.svg/.png, logs/",
            out.display()
        )
    }

    fn flow_resets(results: &Results) -> &[String] {
        &results.flow_resets
    }
}

/// Runs the scenario with `exe` as the lab's executable (it must have the
/// `wanopt lab` subcommands, and the nodes for the cold and warm modes);
/// `options.out` must exist.
pub fn run_with(lab: &Lab, options: &Options, exe: &Path) -> Result<Report<Results>, RunError> {
    let mut scenario = Waas3g::new(options.clone())?;
    runner::run_with(lab, &mut scenario, &options.out, exe)
}

/// Writes `results.json`, `report.md` and the plots.
pub fn write_outputs(results: &Results, out: &Path) -> Result<(), RunError> {
    output::write_results(out, results, super::report::markdown(results))?;
    output::plotted(super::plot::draw_all(results, out));
    Ok(())
}
