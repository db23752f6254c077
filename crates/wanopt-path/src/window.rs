//! `wanopt window`: the TCP window and buffers a path needs, and what it
//! costs to go without them, for a path given by its rate and RTT or as
//! `wanopt probe --json` measured it.

use std::fmt::Write as _;

use thiserror::Error;

use crate::flags::{self, check_mss, FlagError, Overrides, PathFlags};
use crate::need::{need, window_text, Need};
use crate::probed::{probed_paths, read_probe, ProbeFileError, ProbedPathError};
use crate::text::rate_text;

/// A path that cannot be worked out from the flags given (a usage error).
#[derive(Debug, Error)]
pub enum PathError {
    /// A flag is missing or its value is wrong.
    #[error(transparent)]
    Flag(#[from] FlagError),
    /// The `--probe` file cannot be read as a probe's report.
    #[error(transparent)]
    ProbeFile(#[from] ProbeFileError),
    /// The probe's report does not say what the path needs.
    #[error(transparent)]
    Probed(#[from] ProbedPathError),
}

/// `wanopt window`'s report: the need of the path `flags` describe, or
/// of each direction the `--probe` report measured.
pub fn window(flags: &PathFlags<'_>) -> Result<String, PathError> {
    check_mss(flags.mss)?;
    if let Some(file) = flags.probe {
        let given = Overrides::of(flags)?;
        let report = read_probe(file)?;
        let mut out = String::new();
        for (i, path) in probed_paths(&report, given, flags.mss)?.iter().enumerate() {
            if i > 0 {
                out.push('\n');
            }
            let _ = writeln!(
                out,
                "{} (probed{}):",
                path.direction,
                if path.sender_limited {
                    "; the trains were sender-limited, the path may be faster"
                } else {
                    ""
                }
            );
            out.push_str(&window_text(&path.need));
            out.push_str(&held_to(&path.need, flags.window));
        }
        // The loss above is the probe's: say when the probe doubted it.
        for w in &report.warnings {
            let _ = writeln!(out, "\nthe probe warned: {w}");
        }
        return Ok(out);
    }
    let (Some(rate), Some(rtt)) = (flags.rate, flags.rtt) else {
        return Err(FlagError::NoPath.into());
    };
    let (rate, rtt) = (flags::rate(rate)?, flags::rtt(rtt)?);
    let loss = flags.loss.map(flags::loss).transpose()?;
    let need = need(rate, rtt, flags.mss, loss);
    Ok(window_text(&need) + &held_to(&need, flags.window))
}

/// What a receive window of `window` bytes allows on the path: window /
/// RTT (the line `--window` adds; nothing without it).
fn held_to(need: &Need, window: Option<u64>) -> String {
    let Some(window) = window else {
        return String::new();
    };
    let bps = window as f64 * 8.0 / need.rtt.as_secs_f64();
    let share = bps / need.rate_bps as f64 * 100.0;
    format!(
        "with a {window}-byte window: at most {}{}\n",
        rate_text(bps.min(need.rate_bps as f64)),
        if share < 100.0 {
            format!(" ({share:.1}% of the path)")
        } else {
            format!(
                " (the window alone would allow {}: it does not bind)",
                rate_text(bps)
            )
        }
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_paths_are_one_line_errors() {
        let args = |rate: &'static str, rtt: &'static str, loss: Option<&'static str>, mss: u32| {
            PathFlags {
                rate: Some(rate),
                rtt: Some(rtt),
                loss,
                mss,
                probe: None,
                window: None,
            }
        };
        for (a, needle) in [
            (args("10mbps", "100ms", None, 1448), "--rate"),
            (args("10mbit", "0ms", None, 1448), "above zero"),
            (args("10mbit", "fast", None, 1448), "--rtt"),
            (args("10mbit", "100ms", Some("150%"), 1448), "--loss"),
            (args("10mbit", "100ms", None, 10), "below TCP's minimum"),
            (args("10mbit", "100ms", None, 70_000), "16-bit"),
        ] {
            let e = window(&a).err().map(|e| e.to_string()).unwrap_or_default();
            assert!(e.contains(needle), "{needle:?} not in {e:?}");
            assert!(!e.contains('\n'), "{e}");
        }
    }

    #[test]
    fn a_window_caps_the_rate_at_window_over_rtt() {
        let flags = |rate, rtt| PathFlags {
            rate: Some(rate),
            rtt: Some(rtt),
            loss: None,
            mss: 1448,
            probe: None,
            window: Some(262_144),
        };
        let text = window(&flags("1gbit", "20ms")).unwrap_or_default();
        assert!(
            text.ends_with(
                "with a 262144-byte window: at most 104.86 Mbit/s (10.5% of the path)\n"
            ),
            "{text}"
        );
        let text = window(&flags("600mbit", "250us")).unwrap_or_default();
        assert!(
            text.contains(
                "at most 600 Mbit/s (the window alone would allow 8.39 Gbit/s: it does not bind)"
            ),
            "{text}"
        );
    }
}
