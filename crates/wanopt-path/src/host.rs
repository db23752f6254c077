//! `wanopt host-check`: this host's TCP settings (window scaling, SACK,
//! buffers, congestion control), read from `/proc/sys`, judged against
//! what a path needs when one is given.

use std::collections::BTreeMap;
use std::fmt;

use thiserror::Error;

use crate::flags::{self, FlagError, Overrides, PathFlags};
use crate::need::{need, Need};
use crate::probed::{probed_paths, read_probe};
use crate::text::{ms_text, rate_text, size_text};
use crate::window::PathError;

/// This host's settings could not be read.
#[derive(Debug, Error)]
pub enum HostCheckError {
    /// Nothing under `/proc/sys/net` could be read.
    #[error("cannot read /proc/sys/net (is /proc mounted?)")]
    NoSettings,
}

/// The settings `host-check` reads, by sysctl name.
pub const SETTINGS: [&str; 13] = [
    "net.ipv4.tcp_window_scaling",
    "net.ipv4.tcp_sack",
    "net.ipv4.tcp_timestamps",
    "net.ipv4.tcp_moderate_rcvbuf",
    "net.ipv4.tcp_rmem",
    "net.ipv4.tcp_wmem",
    "net.core.rmem_max",
    "net.core.wmem_max",
    "net.ipv4.tcp_congestion_control",
    "net.ipv4.tcp_available_congestion_control",
    "net.ipv4.tcp_slow_start_after_idle",
    "net.ipv4.tcp_ecn",
    "net.ipv4.tcp_mtu_probing",
];

/// How a setting fares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// As wanted.
    Ok,
    /// Falls short: it costs throughput on the path (exit code 3).
    Short,
    /// Worth changing for some applications; does not fail the check.
    Advice,
    /// Shown for the record.
    Info,
}

impl Verdict {
    /// The word `host-check` prints for it.
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Ok => "ok",
            Verdict::Short => "SHORT",
            Verdict::Advice => "advice",
            Verdict::Info => "info",
        }
    }
}

/// One line of `host-check`.
#[derive(Debug, Clone, PartialEq)]
pub struct Finding {
    /// The sysctl.
    pub setting: &'static str,
    /// Its value on this host (whitespace collapsed), or `absent`.
    pub value: String,
    /// The verdict.
    pub verdict: Verdict,
    /// What is wanted and why.
    pub why: String,
}

/// Reads [`SETTINGS`] from `/proc/sys` (this network namespace's).
pub fn read_settings() -> BTreeMap<&'static str, String> {
    SETTINGS
        .iter()
        .filter_map(|name| {
            let path = format!("/proc/sys/{}", name.replace('.', "/"));
            let text = std::fs::read_to_string(path).ok()?;
            Some((*name, text.split_whitespace().collect::<Vec<_>>().join(" ")))
        })
        .collect()
}

/// Judges `settings` (sysctl name to value), against `need` when given.
pub fn check(settings: &BTreeMap<&'static str, String>, need: Option<&Need>) -> Vec<Finding> {
    let mut out = Vec::new();
    for setting in SETTINGS {
        let Some(value) = settings.get(setting) else {
            out.push(Finding {
                setting,
                value: "absent".into(),
                verdict: Verdict::Info,
                why: "not on this kernel".into(),
            });
            continue;
        };
        let num = |i: usize| value.split(' ').nth(i).and_then(|v| v.parse::<u64>().ok());
        let switch = |want_on: bool, why_off: &str, why_on: &str| {
            let on = num(0).is_some_and(|v| v != 0);
            if on == want_on {
                (Verdict::Ok, why_on.to_string())
            } else {
                (Verdict::Short, why_off.to_string())
            }
        };
        let buffer = |max: Option<u64>, what: &str, short: Verdict| match (max, need) {
            (Some(max), Some(n)) if max >= n.buffer => (
                Verdict::Ok,
                format!(
                    "{what} {} >= {} (twice the product)",
                    size_text(max),
                    size_text(n.buffer)
                ),
            ),
            (Some(max), Some(n)) => (
                short,
                format!(
                    "{what} {} < {} (twice the product): one connection reaches about {}",
                    size_text(max),
                    size_text(n.buffer),
                    rate_text(
                        (max as f64 / 2.0 * 8.0 / n.rtt.as_secs_f64()).min(n.rate_bps as f64)
                    )
                ),
            ),
            (Some(max), None) => (
                Verdict::Info,
                format!(
                    "{what} {}: windows up to about {}",
                    size_text(max),
                    size_text(max / 2)
                ),
            ),
            (None, _) => (Verdict::Info, "not a number".into()),
        };
        let (verdict, why) = match setting {
            "net.ipv4.tcp_window_scaling" => switch(
                true,
                "off: every window is capped at 64 KB",
                "on: windows beyond 64 KB",
            ),
            "net.ipv4.tcp_sack" => switch(
                true,
                "off: a loss costs a window of retransmissions or a timeout",
                "on: several losses per round trip are repaired at once",
            ),
            "net.ipv4.tcp_timestamps" => switch(
                true,
                "off: no RTT measurement per ACK and no PAWS at large windows",
                "on: RTT per ACK, PAWS",
            ),
            "net.ipv4.tcp_moderate_rcvbuf" => switch(
                true,
                "off: receive buffers stay at tcp_rmem's default instead of growing to its maximum",
                "on: receive buffers grow toward tcp_rmem's maximum",
            ),
            "net.ipv4.tcp_rmem" => buffer(num(2), "maximum", Verdict::Short),
            "net.ipv4.tcp_wmem" => buffer(num(2), "maximum", Verdict::Short),
            "net.core.rmem_max" | "net.core.wmem_max" => {
                let (v, why) = buffer(num(0), "limit", Verdict::Advice);
                (v, format!("{why} (only for applications that set SO_RCVBUF/SO_SNDBUF themselves)"))
            }
            "net.ipv4.tcp_slow_start_after_idle" => {
                if num(0) == Some(0) {
                    (Verdict::Ok, "off: an idle connection keeps its window".into())
                } else {
                    (
                        Verdict::Advice,
                        "on: a connection idle for one retransmission timeout starts again from the initial window"
                            .into(),
                    )
                }
            }
            "net.ipv4.tcp_congestion_control" => {
                let available = settings
                    .get("net.ipv4.tcp_available_congestion_control")
                    .map(String::as_str)
                    .unwrap_or("");
                let has_bbr = available.split(' ').any(|c| c == "bbr");
                if value != "bbr" && has_bbr && need.is_some_and(|n| n.loss.is_some()) {
                    (
                        Verdict::Advice,
                        "loss-based; bbr is available and is not held back by random loss".into(),
                    )
                } else {
                    (Verdict::Info, "the default for new connections".into())
                }
            }
            "net.ipv4.tcp_available_congestion_control" => {
                (Verdict::Info, "what applications may choose".into())
            }
            "net.ipv4.tcp_ecn" => (
                Verdict::Info,
                match num(0) {
                    Some(1) => "ECN requested and accepted",
                    Some(2) => "ECN accepted when the peer asks, not requested",
                    _ => "ECN off",
                }
                .into(),
            ),
            "net.ipv4.tcp_mtu_probing" => (
                Verdict::Info,
                match num(0) {
                    Some(0) => "off: a path that drops ICMP 'fragmentation needed' can black-hole large segments",
                    Some(1) => "after an ICMP black hole is detected",
                    _ => "always",
                }
                .into(),
            ),
            _ => (Verdict::Info, String::new()),
        };
        out.push(Finding {
            setting,
            value: value.clone(),
            verdict,
            why,
        });
    }
    out
}

/// The path `host-check` is asked to check against, if any: with
/// `--probe`, the direction that needs the larger window, named.
pub fn host_need(flags: &PathFlags<'_>) -> Result<Option<(Need, Option<String>)>, PathError> {
    if let Some(file) = flags.probe {
        let given = Overrides::of(flags)?;
        let report = read_probe(file)?;
        let paths = probed_paths(&report, given, flags.mss)?;
        return Ok(paths
            .into_iter()
            .max_by_key(|p| p.need.bdp)
            .map(|p| (p.need, Some(p.direction))));
    }
    match (flags.rate, flags.rtt) {
        (Some(rate), Some(rtt)) => {
            let (rate, rtt) = (flags::rate(rate)?, flags::rtt(rtt)?);
            let loss = flags.loss.map(flags::loss).transpose()?;
            Ok(Some((need(rate, rtt, flags.mss, loss), None)))
        }
        (None, None) if flags.loss.is_none() => Ok(None),
        _ => Err(FlagError::HalfAPath.into()),
    }
}

/// What `host-check` found: each setting's verdict, against a path when
/// one was given. Its `Display` is the report `wanopt host-check` prints.
#[derive(Debug, Clone, PartialEq)]
pub struct HostReport {
    /// The path the buffers were checked against.
    pub need: Option<Need>,
    /// The probed direction that path is (the one needing the larger
    /// window).
    pub direction: Option<String>,
    /// One per setting of [`SETTINGS`], in that order.
    pub findings: Vec<Finding>,
}

impl HostReport {
    /// Whether a setting falls short (`wanopt host-check` exits 3).
    pub fn short(&self) -> bool {
        self.findings.iter().any(|f| f.verdict == Verdict::Short)
    }
}

/// Checks this host's settings, against `need` when given (`direction`
/// names the probed direction it is).
pub fn host_check(
    need: Option<Need>,
    direction: Option<String>,
) -> Result<HostReport, HostCheckError> {
    let settings = read_settings();
    if settings.is_empty() {
        return Err(HostCheckError::NoSettings);
    }
    let findings = check(&settings, need.as_ref());
    Ok(HostReport {
        need,
        direction,
        findings,
    })
}

impl fmt::Display for HostReport {
    fn fmt(&self, out: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.need {
            Some(n) => writeln!(
                out,
                "this host's TCP settings against {} at RTT {} (bandwidth-delay product {}){}",
                rate_text(n.rate_bps as f64),
                ms_text(n.rtt),
                size_text(n.bdp),
                self.direction.as_ref().map_or(String::new(), |d| format!(
                    ", {d} as probed (the direction that needs the larger window)"
                ))
            )?,
            None => writeln!(
                out,
                "this host's TCP settings (add --rate and --rtt to check the buffers against a path)"
            )?,
        }
        let findings = &self.findings;
        let width = findings.iter().map(|f| f.setting.len()).max().unwrap_or(0);
        let vwidth = findings.iter().map(|f| f.value.len()).max().unwrap_or(0);
        for f in findings {
            writeln!(
                out,
                "{:<6}  {:<width$}  {:<vwidth$}  {}",
                f.verdict.as_str(),
                f.setting,
                f.value,
                f.why
            )?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn host(pairs: &[(&'static str, &str)]) -> BTreeMap<&'static str, String> {
        pairs.iter().map(|(k, v)| (*k, v.to_string())).collect()
    }

    /// A Debian 12 host's defaults.
    fn debian() -> BTreeMap<&'static str, String> {
        host(&[
            ("net.ipv4.tcp_window_scaling", "1"),
            ("net.ipv4.tcp_sack", "1"),
            ("net.ipv4.tcp_timestamps", "1"),
            ("net.ipv4.tcp_moderate_rcvbuf", "1"),
            ("net.ipv4.tcp_rmem", "4096 131072 6291456"),
            ("net.ipv4.tcp_wmem", "4096 16384 4194304"),
            ("net.core.rmem_max", "212992"),
            ("net.core.wmem_max", "212992"),
            ("net.ipv4.tcp_congestion_control", "cubic"),
            (
                "net.ipv4.tcp_available_congestion_control",
                "reno cubic bbr",
            ),
            ("net.ipv4.tcp_slow_start_after_idle", "1"),
            ("net.ipv4.tcp_ecn", "2"),
            ("net.ipv4.tcp_mtu_probing", "0"),
        ])
    }

    fn verdict(findings: &[Finding], setting: &str) -> Verdict {
        findings
            .iter()
            .find(|f| f.setting == setting)
            .map(|f| f.verdict)
            .unwrap_or_else(|| panic!("{setting} missing"))
    }

    #[test]
    fn a_default_host_against_the_long_fat_path() {
        let n = need(250_000_000, Duration::from_millis(150), 1448, Some(0.001));
        let f = check(&debian(), Some(&n));
        assert_eq!(f.len(), SETTINGS.len());
        assert_eq!(verdict(&f, "net.ipv4.tcp_window_scaling"), Verdict::Ok);
        assert_eq!(verdict(&f, "net.ipv4.tcp_sack"), Verdict::Ok);
        // 6 MiB and 4 MiB against 8.94 MiB.
        assert_eq!(verdict(&f, "net.ipv4.tcp_rmem"), Verdict::Short);
        assert_eq!(verdict(&f, "net.ipv4.tcp_wmem"), Verdict::Short);
        let rmem = f
            .iter()
            .find(|x| x.setting == "net.ipv4.tcp_rmem")
            .map(|x| x.why.clone());
        // 3 MiB of window per 150 ms: 167.77 Mbit/s.
        assert_eq!(
            rmem.as_deref(),
            Some("maximum 6.00 MiB < 8.94 MiB (twice the product): one connection reaches about 167.77 Mbit/s")
        );
        assert_eq!(verdict(&f, "net.core.rmem_max"), Verdict::Advice);
        assert_eq!(
            verdict(&f, "net.ipv4.tcp_slow_start_after_idle"),
            Verdict::Advice
        );
        assert_eq!(
            verdict(&f, "net.ipv4.tcp_congestion_control"),
            Verdict::Advice
        );
        // A 2 Mbit/s path: the same host is fine.
        let n = need(2_000_000, Duration::from_millis(150), 1448, None);
        let f = check(&debian(), Some(&n));
        assert_eq!(verdict(&f, "net.ipv4.tcp_rmem"), Verdict::Ok);
        assert_eq!(
            verdict(&f, "net.ipv4.tcp_congestion_control"),
            Verdict::Info
        );
        assert!(!f.iter().any(|x| x.verdict == Verdict::Short));
    }

    #[test]
    fn switches_off_fall_short_and_missing_settings_are_named() {
        let mut h = debian();
        h.insert("net.ipv4.tcp_window_scaling", "0".into());
        h.insert("net.ipv4.tcp_sack", "0".into());
        h.remove("net.ipv4.tcp_mtu_probing");
        let f = check(&h, None);
        assert_eq!(verdict(&f, "net.ipv4.tcp_window_scaling"), Verdict::Short);
        assert_eq!(verdict(&f, "net.ipv4.tcp_sack"), Verdict::Short);
        // Without a path the buffers are only shown.
        assert_eq!(verdict(&f, "net.ipv4.tcp_rmem"), Verdict::Info);
        let probing = f.iter().find(|x| x.setting == "net.ipv4.tcp_mtu_probing");
        assert_eq!(probing.map(|x| x.value.as_str()), Some("absent"));
    }
}
