//! The emulator process (`lab emulate`, inside the `wan` namespace): its
//! typed configuration and its main loop.
//!
//! The process that starts the emulator turns the link specs into an
//! [`EmulatorConfig`] once ([`EmulatorConfig::new`]: every spec string
//! parsed into a [`LinkConfig`], trace files read, the middlebox rules
//! parsed into [`Rule`]s) and hands it over as a JSON file in the lab's
//! state directory (`lab emulate --config FILE`: a recorded trace is too
//! long for a command line); the emulator deserializes it and runs it,
//! reading no spec or trace again.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use wanopt_netem::middlebox::Rule;
use wanopt_netem::LinkConfig;

use crate::driver::{self, Direction, DriverError};
use crate::link::{CutState, RulesSwitch};
use crate::link::{LinkOptionError, LinkSpecs};

/// Everything the emulator process needs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EmulatorConfig {
    /// Interface facing the edge (frames in from it go up).
    pub edge_if: String,
    /// Interface facing the core (frames in from it go down).
    pub core_if: String,
    /// Where to publish the counters.
    pub counters: PathBuf,
    /// The link as given (spec strings, seed, rules): published with the
    /// counters for `lab status`.
    pub specs: LinkSpecs,
    /// What the bump in the wire does to frames.
    pub bump: BumpConfig,
}

/// What the emulator does to the frames of both directions.
// Read once per emulator process: its size does not matter.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum BumpConfig {
    /// Forward frames untouched (measures the driver's own ceiling).
    Wire,
    /// The middlebox rules (if any), then the link, per direction.
    Emulated {
        /// The client-to-server direction, seeded with the specs' seed.
        up: LinkConfig,
        /// The server-to-client direction, seeded with the seed + 1.
        down: LinkConfig,
        /// First-match rules applied to both directions before the link,
        /// keyed by the specs' seed (so both directions agree on each
        /// flow's sequence offset).
        middlebox: Vec<Rule>,
    },
}

impl EmulatorConfig {
    /// The emulator of `specs` between two interfaces, publishing its
    /// counters to `counters`: each spec and the rules parsed once, here.
    pub fn new(
        specs: &LinkSpecs,
        edge_if: &str,
        core_if: &str,
        counters: PathBuf,
    ) -> Result<EmulatorConfig, LinkOptionError> {
        Ok(EmulatorConfig {
            edge_if: edge_if.to_string(),
            core_if: core_if.to_string(),
            counters,
            specs: specs.clone(),
            bump: BumpConfig::Emulated {
                up: parse_direction("up", &specs.up)?,
                down: parse_direction("down", &specs.down)?,
                middlebox: wanopt_netem::middlebox::parse_rules(&specs.middlebox).map_err(|e| {
                    LinkOptionError::Middlebox {
                        rules: specs.middlebox.clone(),
                        message: e.to_string(),
                    }
                })?,
            },
        })
    }

    /// The JSON of the file `lab emulate --config` reads.
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }

    /// Reads the JSON of the file of `lab emulate --config`.
    pub fn from_json(text: &str) -> Result<EmulatorConfig, EmulateError> {
        serde_json::from_str(text).map_err(EmulateError::Config)
    }

    /// Reads the file of `lab emulate --config`.
    pub fn read(path: &std::path::Path) -> Result<EmulatorConfig, EmulateError> {
        let text = std::fs::read_to_string(path).map_err(|cause| EmulateError::ConfigFile {
            path: path.to_path_buf(),
            cause,
        })?;
        EmulatorConfig::from_json(&text)
    }
}

/// One direction's spec as a link configuration.
fn parse_direction(direction: &'static str, spec: &str) -> Result<LinkConfig, LinkOptionError> {
    crate::model::config(spec).map_err(|e| LinkOptionError::Spec {
        direction,
        spec: spec.to_string(),
        message: e.to_string(),
    })
}

/// Errors of the emulator process.
#[derive(Debug, thiserror::Error)]
pub enum EmulateError {
    /// The configuration does not read.
    #[error("bad emulator configuration: {0}")]
    Config(serde_json::Error),
    /// The configuration file could not be read.
    #[error("cannot read the emulator configuration {path}: {cause}")]
    ConfigFile {
        /// The file.
        path: PathBuf,
        /// The underlying error.
        cause: std::io::Error,
    },
    /// The SIGTERM/SIGINT handler could not be installed.
    #[error("cannot install the signal handler: {0}")]
    Signal(nix::Error),
    /// The thread that takes SIGUSR1/SIGUSR2 (`lab link`) could not start.
    #[error("cannot take SIGUSR1/SIGUSR2 for `lab link`: {0}")]
    CutSignals(std::io::Error),
    /// The packet driver stopped.
    #[error(transparent)]
    Driver(#[from] DriverError),
}

static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    STOP.store(true, Ordering::Relaxed);
}

/// Runs the emulator until SIGTERM or SIGINT; SIGUSR1 cuts the link and
/// SIGUSR2 restores it ([`crate::link::cut`]), SIGHUP changes the
/// middlebox rules ([`crate::link::rules`]).
pub fn run(config: EmulatorConfig) -> Result<(), EmulateError> {
    use nix::sys::signal::{sigaction, SaFlags, SigAction, SigHandler, SigSet, Signal};
    // Before any other thread starts: they inherit the blocked signals.
    let cut = Arc::new(CutState::default());
    let rules = Arc::new(RulesSwitch::new(&config.counters));
    crate::link::cut::take_signals(cut.clone(), rules.clone()).map_err(EmulateError::CutSignals)?;
    let handler = SigAction::new(
        SigHandler::Handler(on_signal),
        SaFlags::empty(),
        SigSet::empty(),
    );
    for sig in [Signal::SIGTERM, Signal::SIGINT] {
        // SAFETY: the handler only stores to an atomic.
        unsafe { sigaction(sig, &handler) }.map_err(EmulateError::Signal)?;
    }
    let stop = Arc::new(AtomicBool::new(false));
    let watcher_stop = stop.clone();
    std::thread::spawn(move || loop {
        if STOP.load(Ordering::Relaxed) {
            watcher_stop.store(true, Ordering::Relaxed);
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    });
    let specs = &config.specs;
    let settings = serde_json::json!({
        "up": specs.up, "down": specs.down, "seed": specs.seed,
        "wire": config.bump == BumpConfig::Wire,
        "middlebox": specs.middlebox,
    });
    match &config.bump {
        BumpConfig::Wire => {
            let (up, down) = directions(
                &config,
                &cut,
                driver::Wire::default(),
                driver::Wire::default(),
            );
            driver::run(up, down, settings, &config.counters, stop)?;
        }
        BumpConfig::Emulated {
            up,
            down,
            middlebox,
        } => {
            let seed = specs.seed;
            let (up, down) = directions(
                &config,
                &cut,
                crate::model::build(up.clone(), seed, middlebox, seed).following(rules.clone()),
                crate::model::build(down.clone(), seed.wrapping_add(1), middlebox, seed)
                    .following(rules),
            );
            driver::run(up, down, settings, &config.counters, stop)?;
        }
    }
    Ok(())
}

/// The two directions of the bump: up from the edge's interface to the
/// core's, down the other way.
fn directions<L>(
    config: &EmulatorConfig,
    cut: &Arc<CutState>,
    up: L,
    down: L,
) -> (Direction<L>, Direction<L>) {
    (
        Direction {
            name: "up",
            ingress: config.edge_if.clone(),
            egress: config.core_if.clone(),
            link: up,
            cut: cut.clone(),
        },
        Direction {
            name: "down",
            ingress: config.core_if.clone(),
            egress: config.edge_if.clone(),
            link: down,
            cut: cut.clone(),
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The configuration crosses the process boundary whole: what the
    /// emulator reads is what the starter parsed, rules included.
    #[test]
    fn the_configuration_round_trips_through_json() {
        let specs = crate::link::LinkOptions {
            rtt: Some("100ms".into()),
            rate: Some("250mbit".into()),
            queue: Some("2bdp".into()),
            loss_burst: Some("1%,25%".into()),
            ecn: Some("red".into()),
            middlebox: Some("port 5201 strip-wscale; mss 1200".into()),
            up: Some("rate 2mbit".into()),
            ..Default::default()
        }
        .specs()
        .unwrap_or_else(|e| panic!("{e}"));
        let config = EmulatorConfig::new(&specs, "e0", "c0", "/tmp/counters.json".into())
            .unwrap_or_else(|e| panic!("{e}"));
        let back = EmulatorConfig::from_json(&config.to_json()).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(back, config);
        let BumpConfig::Emulated {
            up,
            down,
            middlebox,
        } = &back.bump
        else {
            panic!("{back:?}")
        };
        assert_eq!(up.rate, Some(wanopt_netem::units::BitsPerSecond(2_000_000)));
        assert_eq!(
            down.rate,
            Some(wanopt_netem::units::BitsPerSecond(250_000_000))
        );
        assert_eq!(down.delay, Duration::from_millis(50));
        assert_eq!(middlebox.len(), 2);
    }

    #[test]
    fn a_bad_configuration_is_one_line() {
        let e = EmulatorConfig::from_json("{\"edge_if\": 3}")
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(e.starts_with("bad emulator configuration: "), "{e}");
        // A probability out of range is refused, as the spec parser does.
        let mut config = EmulatorConfig::new(
            &crate::link::LinkOptions::default()
                .specs()
                .unwrap_or_else(|e| panic!("{e}")),
            "e0",
            "c0",
            "/tmp/c.json".into(),
        )
        .unwrap_or_else(|e| panic!("{e}"));
        config.bump = BumpConfig::Wire;
        let text = config.to_json();
        assert!(EmulatorConfig::from_json(&text).is_ok());
        let mut link = serde_json::to_value(LinkConfig::default()).unwrap_or_default();
        link["loss"] = serde_json::json!(0.5);
        assert!(serde_json::from_value::<LinkConfig>(link.clone()).is_ok());
        link["loss"] = serde_json::json!(2.0);
        assert!(serde_json::from_value::<LinkConfig>(link).is_err());
    }
}
