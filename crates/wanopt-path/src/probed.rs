//! A path as `wanopt probe` measured it: its report read back
//! (`--probe FILE`), each direction with what it needs.
//!
//! Each direction the probe measured a rate for is taken at the probes'
//! smallest round-trip time (the path's own: a probe that fills a slow
//! uplink queues behind itself, and the median then holds that queue) and
//! that direction's loss; flags given with it override what the probe
//! measured.

use std::io::Read as _;
use std::path::Path;
use std::time::Duration;

use thiserror::Error;

use crate::flags::Overrides;
use crate::need::{need, Need};
use crate::probe::report::Report;
use crate::text::number_text;

/// Longest round-trip time taken from a probe's report (a probe waits
/// for its echoes far less; anything longer is not a measurement).
const MAX_PROBED_RTT: Duration = Duration::from_secs(60);

/// Fastest rate taken from a probe's report, bits per second (10 Tbit/s).
const MAX_PROBED_BPS: f64 = 1e13;

/// A `--probe` file that cannot be read as a probe's report.
#[derive(Debug, Error)]
pub enum ProbeFileError {
    /// Standard input could not be read.
    #[error("--probe {name}: reading standard input: {source}")]
    Stdin {
        /// The file as given (`-`).
        name: String,
        /// Why.
        source: std::io::Error,
    },
    /// The file could not be read.
    #[error("--probe {name}: {source}")]
    Read {
        /// The file as given.
        name: String,
        /// Why.
        source: std::io::Error,
    },
    /// The file is not `wanopt probe --json` output.
    #[error("--probe {name}: not the output of `wanopt probe --json` ({source})")]
    NotAProbe {
        /// The file as given.
        name: String,
        /// Where the JSON parser gave up.
        source: serde_json::Error,
    },
}

/// A probe's report that does not say what a path needs.
#[derive(Debug, Error)]
pub enum ProbedPathError {
    /// The smallest round-trip time is zero, negative, not a number or
    /// beyond any probe's wait.
    #[error("--probe: a smallest round-trip time of {} ms is not a path's; give --rtt", number_text(*.min_ms))]
    NotAnRtt {
        /// The report's smallest round-trip time, milliseconds.
        min_ms: f64,
    },
    /// No probe came back, so there is no round-trip time.
    #[error("--probe: no probe came back from {target} (no round-trip time); give --rtt")]
    NoRtt {
        /// The probed reflector.
        target: String,
    },
    /// A measured rate below 1 bit/s or beyond 10 Tbit/s.
    #[error("--probe: a rate of {} bit/s is not a path's; give --rate", number_text(*.bps))]
    NotARate {
        /// The measured rate, bits per second.
        bps: f64,
    },
    /// No rate either way (the probe sent no trains, or none came back).
    #[error(
        "--probe: no rate measured either way to {target} (probe with --trains above 0); give --rate"
    )]
    NoRate {
        /// The probed reflector.
        target: String,
    },
}

/// One direction of a probed path.
#[derive(Debug, Clone, PartialEq)]
pub struct ProbedPath {
    /// Which way: `here -> HOST:PORT` or `HOST:PORT -> here`.
    pub direction: String,
    /// What it needs.
    pub need: Need,
    /// The probe's trains left this direction's sender about as fast as
    /// they arrived: the path may be faster than measured.
    pub sender_limited: bool,
}

/// Reads `wanopt probe --json` output from `file` (`-`: standard input).
pub fn read_probe(file: &Path) -> Result<Report, ProbeFileError> {
    let name = file.display().to_string();
    let text = if file == Path::new("-") {
        let mut text = String::new();
        match std::io::stdin().read_to_string(&mut text) {
            Ok(_) => text,
            Err(source) => return Err(ProbeFileError::Stdin { name, source }),
        }
    } else {
        match std::fs::read_to_string(file) {
            Ok(text) => text,
            Err(source) => return Err(ProbeFileError::Read { name, source }),
        }
    };
    serde_json::from_str(&text).map_err(|source| ProbeFileError::NotAProbe { name, source })
}

/// The directions of a probed path, each with what it needs: those the
/// probe measured a rate for (or all, with `--rate`), at the probes'
/// smallest RTT and each direction's own loss, unless overridden.
pub fn probed_paths(
    report: &Report,
    given: Overrides,
    mss: u32,
) -> Result<Vec<ProbedPath>, ProbedPathError> {
    let rtt = match (given.rtt, &report.rtt) {
        (Some(rtt), _) => rtt,
        (None, Some(r)) => match Duration::try_from_secs_f64(r.min_ms / 1e3) {
            Ok(rtt) if !rtt.is_zero() && rtt <= MAX_PROBED_RTT => rtt,
            _ => return Err(ProbedPathError::NotAnRtt { min_ms: r.min_ms }),
        },
        (None, None) => {
            return Err(ProbedPathError::NoRtt {
                target: report.target.clone(),
            })
        }
    };
    let rates = report.rate.as_ref();
    let ways = [
        (
            format!("here -> {}", report.target),
            rates.and_then(|r| r.forward.as_ref()),
            report.forward.as_ref(),
        ),
        (
            format!("{} -> here", report.target),
            rates.and_then(|r| r.reverse.as_ref()),
            report.reverse.as_ref(),
        ),
    ];
    let mut paths = Vec::new();
    for (direction, estimate, counts) in ways {
        let measured = estimate.map(|e| e.median_bps);
        if let Some(bps) = measured.filter(|bps| !(1.0..=MAX_PROBED_BPS).contains(bps)) {
            if given.rate_bps.is_none() {
                return Err(ProbedPathError::NotARate { bps });
            }
        }
        let Some(rate_bps) = given.rate_bps.or(measured.map(|bps| bps.round() as u64)) else {
            continue;
        };
        let loss = given.loss.or_else(|| {
            counts
                .map(|d| d.loss_percent / 100.0)
                .filter(|p| p.is_finite() && *p > 0.0 && *p <= 1.0)
        });
        paths.push(ProbedPath {
            direction,
            need: need(rate_bps, rtt, mss, loss),
            sender_limited: given.rate_bps.is_none() && estimate.is_some_and(|e| e.sender_limited),
        });
    }
    if paths.is_empty() {
        return Err(ProbedPathError::NoRate {
            target: report.target.clone(),
        });
    }
    Ok(paths)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What `wanopt probe` would report for the waas-3g link (RTT 150 ms,
    /// 384 kbit/s up, 2 Mbit/s down), with `loss` per cent lost back.
    fn probe_report(loss: f64, trains: bool) -> Report {
        let json = format!(
            r#"{{"target": "192.0.2.7:7009", "probes": 1000, "size": 200, "interval_ms": 10.0,
            "rtt": {{"min_ms": 150.2, "median_ms": 150.5, "p90_ms": 151.0, "p99_ms": 160.0,
                     "max_ms": 170.0, "jitter_ms": 0.3}},
            "forward": {{"sent": 1000, "received": 1000, "lost": 0, "loss_percent": 0.0,
                         "reordered": 0, "duplicated": 0}},
            "reverse": {{"sent": 1000, "received": 995, "lost": 5, "loss_percent": {loss},
                         "reordered": 0, "duplicated": 0}},
            "rate": {}}}"#,
            if trains {
                r#"{"trains": 10, "train_len": 16, "train_size": 1472,
                   "forward": {"median_bps": 384000.0, "min_bps": 383000.0, "max_bps": 385000.0,
                               "trains": 10, "sender_limited": false},
                   "reverse": {"median_bps": 2000000.0, "min_bps": 1990000.0, "max_bps": 2010000.0,
                               "trains": 9, "sender_limited": true}}"#
            } else {
                "null"
            }
        );
        serde_json::from_str(&json).unwrap_or_else(|e| panic!("{e}: {json}"))
    }

    #[test]
    fn a_probed_path_is_each_direction_at_its_own_rate_and_loss() {
        let paths = probed_paths(&probe_report(0.5, true), Overrides::default(), 1448)
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(paths.len(), 2);
        let (up, down) = (&paths[0], &paths[1]);
        assert_eq!(up.direction, "here -> 192.0.2.7:7009");
        assert_eq!(down.direction, "192.0.2.7:7009 -> here");
        let rtt = Duration::from_secs_f64(0.1502);
        assert_eq!(up.need, need(384_000, rtt, 1448, None));
        assert_eq!(down.need, need(2_000_000, rtt, 1448, Some(0.005)));
        assert_eq!(down.need.bdp, 37_550);
        assert!(!up.sender_limited && down.sender_limited);
        // Given values win, for both directions; a rate given is not the
        // probe's, so not sender-limited.
        let given = Overrides {
            rate_bps: Some(10_000_000),
            rtt: Some(Duration::from_millis(20)),
            loss: Some(0.01),
        };
        let paths =
            probed_paths(&probe_report(0.5, true), given, 1448).unwrap_or_else(|e| panic!("{e}"));
        for p in &paths {
            assert_eq!(
                p.need,
                need(10_000_000, Duration::from_millis(20), 1448, Some(0.01))
            );
            assert!(!p.sender_limited);
        }
    }

    /// The error's text, empty when there was none.
    fn error_of<T>(result: Result<T, ProbedPathError>) -> String {
        result.err().map(|e| e.to_string()).unwrap_or_default()
    }

    #[test]
    fn a_probe_without_what_a_path_needs_is_a_clear_error() {
        let no_rates = probe_report(0.0, false);
        let e = error_of(probed_paths(&no_rates, Overrides::default(), 1448));
        assert!(
            e.contains("no rate measured") && e.contains("--rate"),
            "{e}"
        );
        // With --rate, both directions at that rate.
        let given = Overrides {
            rate_bps: Some(1_000_000),
            ..Overrides::default()
        };
        let paths = probed_paths(&no_rates, given, 1448).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(paths.len(), 2);
        for bad in [0.0, -5.0, 1e300, f64::NAN, 61_000.0] {
            let mut odd = probe_report(0.0, true);
            if let Some(rtt) = odd.rtt.as_mut() {
                rtt.min_ms = bad;
            }
            let e = error_of(probed_paths(&odd, Overrides::default(), 1448));
            assert!(
                e.contains("is not a path's") && e.contains("--rtt"),
                "{bad}: {e}"
            );
        }
        let mut fast = probe_report(0.0, true);
        if let Some(e) = fast.rate.as_mut().and_then(|r| r.reverse.as_mut()) {
            e.median_bps = 1e30;
        }
        let e = error_of(probed_paths(&fast, Overrides::default(), 1448));
        assert!(e.contains("rate of 1e30 bit/s is not a path's"), "{e}");
        let mut silent = probe_report(0.0, true);
        silent.rtt = None;
        let e = error_of(probed_paths(&silent, Overrides::default(), 1448));
        assert!(
            e.contains("no probe came back") && e.contains("--rtt"),
            "{e}"
        );
        // A nonsensical loss is ignored, not used; so is one the
        // reflector's counters never reported.
        let odd = probe_report(250.0, true);
        let paths =
            probed_paths(&odd, Overrides::default(), 1448).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(paths[1].need.loss, None);
        let mut uncounted = probe_report(0.5, true);
        uncounted.reverse = None;
        let paths =
            probed_paths(&uncounted, Overrides::default(), 1448).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(paths[1].need.loss, None);
    }
}
