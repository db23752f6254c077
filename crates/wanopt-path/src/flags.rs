//! The flags that describe a path (`--rate`, `--rtt`, `--loss`, `--mss`,
//! `--probe`), as given, and their checked values.

use std::path::Path;
use std::time::Duration;

use thiserror::Error;
use wanopt_netem::units::{
    parse_duration, parse_percent, parse_rate, ParseDurationError, ParsePercentError,
    ParseRateError,
};

/// A path as given on the command line of `wanopt window` and
/// `wanopt host-check`: the values as typed, checked by the operations
/// that take them.
#[derive(Debug, Clone, Copy)]
pub struct PathFlags<'a> {
    /// `--rate`: the bottleneck rate (`250mbit`).
    pub rate: Option<&'a str>,
    /// `--rtt`: the round-trip time (`150ms`).
    pub rtt: Option<&'a str>,
    /// `--loss`: random loss (`0.5%`).
    pub loss: Option<&'a str>,
    /// `--mss`: TCP payload bytes per segment.
    pub mss: u32,
    /// `--probe`: a `wanopt probe --json` report (`-`: standard input).
    pub probe: Option<&'a Path>,
    /// `--window`: a receive window the hosts are held to, bytes (what it
    /// allows is window / RTT).
    pub window: Option<u64>,
}

/// A flag's value that is not what it should be, or flags missing.
#[derive(Debug, Error)]
pub enum FlagError {
    /// `--rate` is not a rate.
    #[error("--rate: {0}")]
    Rate(#[source] ParseRateError),
    /// `--rtt` is not a time.
    #[error("--rtt: {0}")]
    Rtt(#[source] ParseDurationError),
    /// `--rtt` is zero.
    #[error("--rtt: a round-trip time must be above zero")]
    ZeroRtt,
    /// `--loss` is not a percentage.
    #[error("--loss: {0}")]
    Loss(#[source] ParsePercentError),
    /// `--mss` is below TCP's minimum segment size.
    #[error("--mss: {0} bytes is below TCP's minimum of 88")]
    MssBelowMinimum(u32),
    /// `--mss` does not fit TCP's MSS option.
    #[error("--mss: {0} bytes does not fit TCP's 16-bit MSS option")]
    MssAboveMaximum(u32),
    /// `wanopt window` without a path.
    #[error("--rate and --rtt are needed (or --probe FILE)")]
    NoPath,
    /// `wanopt host-check` with half a path.
    #[error(
        "--rate, --rtt and --loss describe a path: give --rate and --rtt together (or --probe FILE)"
    )]
    HalfAPath,
}

/// Values given on the command line next to `--probe`, which win.
#[derive(Debug, Clone, Copy, Default)]
pub struct Overrides {
    /// `--rate`, bits per second.
    pub rate_bps: Option<u64>,
    /// `--rtt`.
    pub rtt: Option<Duration>,
    /// `--loss`, a fraction.
    pub loss: Option<f64>,
}

impl Overrides {
    /// The values of `flags`' `--rate`, `--rtt` and `--loss`, checked.
    pub fn of(flags: &PathFlags<'_>) -> Result<Overrides, FlagError> {
        Ok(Overrides {
            rate_bps: flags.rate.map(rate).transpose()?,
            rtt: flags.rtt.map(rtt).transpose()?,
            loss: flags.loss.map(loss).transpose()?,
        })
    }
}

/// `--rate`, bits per second.
pub fn rate(text: &str) -> Result<u64, FlagError> {
    parse_rate(text).map(|r| r.0).map_err(FlagError::Rate)
}

/// `--rtt`, above zero.
pub fn rtt(text: &str) -> Result<Duration, FlagError> {
    let rtt = parse_duration(text).map_err(FlagError::Rtt)?;
    if rtt.is_zero() {
        return Err(FlagError::ZeroRtt);
    }
    Ok(rtt)
}

/// `--loss`, a fraction.
pub fn loss(text: &str) -> Result<f64, FlagError> {
    parse_percent(text)
        .map(|p| p.value())
        .map_err(FlagError::Loss)
}

/// `--mss`, within what TCP's MSS option can say.
pub fn check_mss(mss: u32) -> Result<(), FlagError> {
    if mss < 88 {
        return Err(FlagError::MssBelowMinimum(mss));
    }
    if mss > 65_535 {
        return Err(FlagError::MssAboveMaximum(mss));
    }
    Ok(())
}
