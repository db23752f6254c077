//! Path tools: `wanopt window` (the TCP window and buffers a path needs,
//! and what it costs to go without them) and `wanopt host-check` (this
//! host's TCP settings against that need).
//!
//! The arithmetic is the first two reference documents': a single TCP
//! connection moves at most one window per round trip, so filling a path
//! takes a window of rate x RTT (the bandwidth-delay product); beyond 64 KB
//! that needs window scaling; Linux advertises about half of a socket's
//! buffer as window (the rest pays for the kernel's per-packet overhead),
//! so the buffers' maximum must be twice the product; and on a lossy path
//! a loss-based TCP is held to about `MSS / RTT x 1.22 / sqrt(loss)`
//! (Mathis, Semke, Mahdavi and Ott, 1997) whatever its window.
//!
//! Both read a path from `wanopt probe --json` output too (`--probe FILE`):
//! each direction the probe measured a rate for, at the probes' smallest
//! round-trip time (the path's own: a probe that fills a slow uplink
//! queues behind itself, and the median then holds that queue) and that
//! direction's loss; flags given with it override what the probe
//! measured.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{bail, Context, Result};
use clap::Args;
use wanopt_netem::units::{parse_duration, parse_percent, parse_rate};

/// TCP's largest window without scaling.
const UNSCALED: u64 = 65_535;
/// The largest window-scale shift (RFC 7323).
const MAX_SHIFT: u32 = 14;
/// Linux's initial congestion window, segments.
const INITIAL_WINDOW: f64 = 10.0;

/// A path: its bottleneck rate, round-trip time, segment size and loss.
#[derive(Debug, Args)]
pub struct PathArgs {
    /// The path's bottleneck rate (`250mbit`, `2mbit`, `1gbit`).
    #[arg(long, value_name = "RATE", required_unless_present = "probe")]
    pub rate: Option<String>,
    /// The path's round-trip time (`150ms`).
    #[arg(long, value_name = "TIME", required_unless_present = "probe")]
    pub rtt: Option<String>,
    /// Random packet loss on the path (`0.5%`): adds what a loss-based TCP
    /// can reach there.
    #[arg(long, value_name = "PERCENT")]
    pub loss: Option<String>,
    /// TCP payload bytes per segment (1448: a 1500-byte MTU with timestamps).
    #[arg(long, default_value_t = 1448, value_name = "BYTES")]
    pub mss: u32,
    /// The path as `wanopt probe --json` measured it (`-`: standard
    /// input): each direction with a rate, at the probes' smallest RTT
    /// and its own loss; --rate, --rtt and --loss override the probe's values.
    #[arg(long, value_name = "FILE")]
    pub probe: Option<PathBuf>,
}

/// Arguments of `wanopt host-check`.
#[derive(Debug, Args)]
pub struct HostCheckArgs {
    /// The path to check the buffers against (`--rate` and `--rtt`
    /// together); without it only the switches are checked.
    #[arg(long, value_name = "RATE")]
    pub rate: Option<String>,
    /// The path's round-trip time (`150ms`).
    #[arg(long, value_name = "TIME")]
    pub rtt: Option<String>,
    /// Random packet loss on the path (`0.5%`): weighs the congestion
    /// control.
    #[arg(long, value_name = "PERCENT")]
    pub loss: Option<String>,
    /// The path as `wanopt probe --json` measured it (`-`: standard
    /// input): checked against the direction that needs the larger window;
    /// --rate, --rtt and --loss override the probe's values.
    #[arg(long, value_name = "FILE")]
    pub probe: Option<PathBuf>,
}

/// What a path needs from TCP.
#[derive(Debug, Clone, PartialEq)]
pub struct Need {
    /// Bits per second.
    pub rate_bps: u64,
    /// Round-trip time.
    pub rtt: Duration,
    /// Payload bytes per segment.
    pub mss: u32,
    /// Bandwidth-delay product, bytes.
    pub bdp: u64,
    /// The smallest window-scale shift whose largest window holds the
    /// product; `None` beyond TCP's largest window (shift 14, about 1 GiB).
    pub shift: Option<u32>,
    /// What the buffers' maximum should be: twice the product.
    pub buffer: u64,
    /// The fastest one connection goes with a 64 KB window.
    pub unscaled_bps: f64,
    /// Round trips slow start takes from 10 segments to the product.
    pub slow_start_rtts: u32,
    /// The loss rate, and the Mathis bound of a loss-based TCP under it.
    pub loss: Option<(f64, f64)>,
}

/// The need of a path at `rate_bps` with round trip `rtt`.
pub fn need(rate_bps: u64, rtt: Duration, mss: u32, loss: Option<f64>) -> Need {
    let secs = rtt.as_secs_f64();
    let bdp = (rate_bps as f64 * secs / 8.0).ceil() as u64;
    let shift = (0..=MAX_SHIFT).find(|s| UNSCALED << s >= bdp);
    let segments = bdp as f64 / f64::from(mss.max(1));
    let slow_start_rtts = if segments > INITIAL_WINDOW {
        (segments / INITIAL_WINDOW).log2().ceil() as u32
    } else {
        0
    };
    Need {
        rate_bps,
        rtt,
        mss,
        bdp,
        shift,
        buffer: bdp.saturating_mul(2),
        unscaled_bps: UNSCALED as f64 * 8.0 / secs,
        slow_start_rtts,
        loss: loss
            .filter(|p| *p > 0.0)
            .map(|p| (p, f64::from(mss) * 8.0 / secs * 1.5f64.sqrt() / p.sqrt())),
    }
}

fn parse_path(rate: &str, rtt: &str) -> Result<(u64, Duration)> {
    Ok((parse_rate(rate).context("--rate")?.0, parse_rtt(rtt)?))
}

fn parse_rtt(rtt: &str) -> Result<Duration> {
    let rtt = parse_duration(rtt).context("--rtt")?;
    if rtt.is_zero() {
        bail!("--rtt: a round-trip time must be above zero");
    }
    Ok(rtt)
}

/// Longest round-trip time taken from a probe's report (a probe waits
/// for its echoes far less; anything longer is not a measurement).
const MAX_PROBED_RTT: Duration = Duration::from_secs(60);

/// Fastest rate taken from a probe's report, bits per second (10 Tbit/s).
const MAX_PROBED_BPS: f64 = 1e13;

/// A number from a file for an error message: plain when it is of a
/// sensible size, else in scientific notation.
fn number_text(v: f64) -> String {
    if v.is_finite() && v.abs() < 1e9 {
        format!("{v}")
    } else {
        format!("{v:e}")
    }
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

/// Reads `wanopt probe --json` output from `file` (`-`: standard input).
pub fn read_probe(file: &Path) -> Result<crate::cli::probe::Report> {
    let name = file.display();
    let text = if file == Path::new("-") {
        let mut text = String::new();
        std::io::stdin()
            .read_to_string(&mut text)
            .with_context(|| format!("--probe {name}: reading standard input"))?;
        text
    } else {
        std::fs::read_to_string(file).with_context(|| format!("--probe {name}"))?
    };
    serde_json::from_str(&text).map_err(|e| {
        anyhow::anyhow!("--probe {name}: not the output of `wanopt probe --json` ({e})")
    })
}

/// The directions of a probed path, each with what it needs: those the
/// probe measured a rate for (or all, with `--rate`), at the probes'
/// smallest RTT and each direction's own loss, unless overridden.
pub fn probed_paths(
    report: &crate::cli::probe::Report,
    given: Overrides,
    mss: u32,
) -> Result<Vec<ProbedPath>> {
    let rtt = match (given.rtt, &report.rtt) {
        (Some(rtt), _) => rtt,
        (None, Some(r)) => match Duration::try_from_secs_f64(r.min_ms / 1e3) {
            Ok(rtt) if !rtt.is_zero() && rtt <= MAX_PROBED_RTT => rtt,
            _ => bail!(
                "--probe: a smallest round-trip time of {} ms is not a path's; give --rtt",
                number_text(r.min_ms)
            ),
        },
        (None, None) => bail!(
            "--probe: no probe came back from {} (no round-trip time); give --rtt",
            report.target
        ),
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
                bail!(
                    "--probe: a rate of {} bit/s is not a path's; give --rate",
                    number_text(bps)
                );
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
        bail!(
            "--probe: no rate measured either way to {} (probe with --trains above 0); give --rate",
            report.target
        );
    }
    Ok(paths)
}

fn overrides(
    rate: Option<&String>,
    rtt: Option<&String>,
    loss: Option<&String>,
) -> Result<Overrides> {
    Ok(Overrides {
        rate_bps: rate
            .map(|r| parse_rate(r).context("--rate").map(|r| r.0))
            .transpose()?,
        rtt: rtt.map(|r| parse_rtt(r)).transpose()?,
        loss: parse_loss(loss)?,
    })
}

fn check_mss(mss: u32) -> Result<()> {
    if mss < 88 {
        bail!("--mss: {mss} bytes is below TCP's minimum of 88");
    }
    if mss > 65_535 {
        bail!("--mss: {mss} bytes does not fit TCP's 16-bit MSS option");
    }
    Ok(())
}

/// `wanopt window`.
pub fn window(args: &PathArgs) -> Result<String> {
    check_mss(args.mss)?;
    if let Some(file) = &args.probe {
        let given = overrides(args.rate.as_ref(), args.rtt.as_ref(), args.loss.as_ref())?;
        let report = read_probe(file)?;
        let mut out = String::new();
        for (i, path) in probed_paths(&report, given, args.mss)?.iter().enumerate() {
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
        }
        // The loss above is the probe's: say when the probe doubted it.
        for w in &report.warnings {
            let _ = writeln!(out, "\nthe probe warned: {w}");
        }
        return Ok(out);
    }
    let (Some(rate), Some(rtt)) = (&args.rate, &args.rtt) else {
        bail!("--rate and --rtt are needed (or --probe FILE)");
    };
    let (rate, rtt) = parse_path(rate, rtt)?;
    let loss = parse_loss(args.loss.as_ref())?;
    Ok(window_text(&need(rate, rtt, args.mss, loss)))
}

/// Bits per second for people: at most two decimals, none that are zero
/// (`250 Mbit/s`, `3.5 Mbit/s`, `945.83 kbit/s`).
pub fn rate_text(bps: f64) -> String {
    let (value, unit) = if bps >= 1e9 {
        (bps / 1e9, "Gbit/s")
    } else if bps >= 1e6 {
        (bps / 1e6, "Mbit/s")
    } else if bps >= 1e3 {
        (bps / 1e3, "kbit/s")
    } else {
        (bps, "bit/s")
    };
    let text = format!("{value:.2}");
    let text = text.trim_end_matches('0').trim_end_matches('.');
    format!("{text} {unit}")
}

/// A percentage for people: at most three decimals, none that are zero
/// (`1`, `0.5`, `0.333`).
fn percent_text(percent: f64) -> String {
    let text = format!("{percent:.3}");
    text.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// Bytes for people, binary units as buffer sizes are written.
pub fn size_text(bytes: u64) -> String {
    let b = bytes as f64;
    if b >= 1024.0 * 1024.0 {
        format!("{:.2} MiB", b / 1024.0 / 1024.0)
    } else if b >= 1024.0 {
        format!("{:.1} KiB", b / 1024.0)
    } else {
        format!("{bytes} B")
    }
}

fn ms(d: Duration) -> String {
    let v = d.as_secs_f64() * 1000.0;
    if v.fract() == 0.0 {
        format!("{v:.0} ms")
    } else {
        format!("{v:.1} ms")
    }
}

fn window_text(n: &Need) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "path: {}, RTT {}, MSS {} bytes",
        rate_text(n.rate_bps as f64),
        ms(n.rtt),
        n.mss
    );
    let _ = writeln!(
        out,
        "bandwidth-delay product: {} bytes ({}, {}): the window one TCP connection needs to fill the path",
        n.bdp,
        size_text(n.bdp),
        match (n.bdp as f64 / f64::from(n.mss)).ceil() {
            x if x <= 1.0 => "1 segment".to_string(),
            x => format!("{x:.0} segments"),
        }
    );
    match n.shift {
        Some(0) => {
            let _ = writeln!(
                out,
                "window scaling: not needed (the product fits in 64 KB)"
            );
        }
        Some(s) => {
            let _ = writeln!(
                out,
                "window scaling: needed, shift at least {s} (largest window {} bytes); \
                 a middlebox that strips or lowers it caps the window",
                UNSCALED << s
            );
        }
        None => {
            let _ = writeln!(
                out,
                "window scaling: the product is beyond TCP's largest window ({} bytes at shift 14): \
                 no single connection fills this path; use parallel connections or a tunnel",
                UNSCALED << MAX_SHIFT
            );
        }
    }
    let _ = writeln!(
        out,
        "without window scaling (64 KB): at most {} ({:.1}% of the path)",
        rate_text(n.unscaled_bps.min(n.rate_bps as f64)),
        (n.unscaled_bps / n.rate_bps as f64 * 100.0).min(100.0)
    );
    let _ = writeln!(
        out,
        "buffers (Linux): the maximum of net.ipv4.tcp_rmem and net.ipv4.tcp_wmem at least {} bytes ({}), \
         twice the product: the kernel advertises about half a buffer as window",
        n.buffer,
        size_text(n.buffer)
    );
    let _ = writeln!(
        out,
        "slow start: {} round trips ({:.2} s) from a 10-segment initial window to the product",
        n.slow_start_rtts,
        f64::from(n.slow_start_rtts) * n.rtt.as_secs_f64()
    );
    if let Some((p, bound)) = n.loss {
        let _ = writeln!(
            out,
            "with {}% random loss: a loss-based TCP (Reno; CUBIC does somewhat better) reaches about {} \
             whatever its window (Mathis et al.: MSS / RTT x 1.22 / sqrt(loss)){}",
            percent_text(p * 100.0),
            rate_text(bound.min(n.rate_bps as f64)),
            if bound < n.rate_bps as f64 {
                format!(", {:.1}% of the path", bound / n.rate_bps as f64 * 100.0)
            } else {
                String::new()
            }
        );
    }
    out
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
    fn as_str(self) -> &'static str {
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

fn parse_loss(loss: Option<&String>) -> Result<Option<f64>> {
    loss.map(|l| parse_percent(l).context("--loss").map(|p| p.value()))
        .transpose()
}

/// The path `host-check` is asked to check against, if any (bad flags
/// are usage errors).
/// With `--probe`, the direction that needs the larger window, named.
pub fn host_need(args: &HostCheckArgs) -> Result<Option<(Need, Option<String>)>> {
    if let Some(file) = &args.probe {
        let given = overrides(args.rate.as_ref(), args.rtt.as_ref(), args.loss.as_ref())?;
        let report = read_probe(file)?;
        let paths = probed_paths(&report, given, 1448)?;
        return Ok(paths
            .into_iter()
            .max_by_key(|p| p.need.bdp)
            .map(|p| (p.need, Some(p.direction))));
    }
    match (&args.rate, &args.rtt) {
        (Some(rate), Some(rtt)) => {
            let (rate, rtt) = parse_path(rate, rtt)?;
            Ok(Some((need(rate, rtt, 1448, parse_loss(args.loss.as_ref())?), None)))
        }
        (None, None) if args.loss.is_none() => Ok(None),
        _ => bail!("--rate, --rtt and --loss describe a path: give --rate and --rtt together (or --probe FILE)"),
    }
}

/// `wanopt host-check`: the report and whether something falls short.
pub fn host_check(need: Option<&Need>, direction: Option<&str>) -> Result<(String, bool)> {
    let settings = read_settings();
    if settings.is_empty() {
        bail!("cannot read /proc/sys/net (is /proc mounted?)");
    }
    let findings = check(&settings, need);
    let mut out = String::new();
    match need {
        Some(n) => {
            let _ = writeln!(
                out,
                "this host's TCP settings against {} at RTT {} (bandwidth-delay product {}){}",
                rate_text(n.rate_bps as f64),
                ms(n.rtt),
                size_text(n.bdp),
                direction.map_or(String::new(), |d| format!(
                    ", {d} as probed (the direction that needs the larger window)"
                ))
            );
        }
        None => {
            let _ = writeln!(
                out,
                "this host's TCP settings (add --rate and --rtt to check the buffers against a path)"
            );
        }
    }
    let width = findings.iter().map(|f| f.setting.len()).max().unwrap_or(0);
    let vwidth = findings.iter().map(|f| f.value.len()).max().unwrap_or(0);
    for f in &findings {
        let _ = writeln!(
            out,
            "{:<6}  {:<width$}  {:<vwidth$}  {}",
            f.verdict.as_str(),
            f.setting,
            f.value,
            f.why
        );
    }
    let short = findings.iter().any(|f| f.verdict == Verdict::Short);
    Ok((out, short))
}

#[cfg(test)]
mod tests {
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

    /// The reference's first experiment: 250 Mbit/s at 150 ms.
    #[test]
    fn the_need_of_a_long_fat_path() {
        let n = need(250_000_000, Duration::from_millis(150), 1448, Some(0.01));
        assert_eq!(n.bdp, 4_687_500);
        // 65535 << 6 = 4,194,240 is short of it; << 7 = 8,388,480 holds it.
        assert_eq!(n.shift, Some(7));
        assert_eq!(n.buffer, 9_375_000);
        assert!(
            (n.unscaled_bps - 3_495_200.0).abs() < 1.0,
            "{}",
            n.unscaled_bps
        );
        // 3238 segments from 10: 2^9 = 512 > 323.8 > 2^8.
        assert_eq!(n.slow_start_rtts, 9);
        // 1448 B x 8 / 0.15 s x sqrt(1.5) / sqrt(0.01) = 945.83 kbit/s.
        let (p, bound) = n.loss.unwrap_or_default();
        assert_eq!(p, 0.01);
        assert!((bound - 945_830.0).abs() < 1.0, "{bound}");
        let text = window_text(&n);
        assert!(
            text.contains("bandwidth-delay product: 4687500 bytes (4.47 MiB, 3238 segments)"),
            "{text}"
        );
        assert!(
            text.contains("shift at least 7 (largest window 8388480 bytes)"),
            "{text}"
        );
        assert!(
            text.contains("without window scaling (64 KB): at most 3.5 Mbit/s (1.4% of the path)"),
            "{text}"
        );
        assert!(text.contains("at least 9375000 bytes (8.94 MiB)"), "{text}");
        assert!(
            text.contains("slow start: 9 round trips (1.35 s)"),
            "{text}"
        );
        assert!(text.contains("reaches about 945.83 kbit/s"), "{text}");
    }

    #[test]
    fn rates_read_like_their_flags() {
        assert_eq!(rate_text(250e6), "250 Mbit/s");
        assert_eq!(rate_text(3_495_200.0), "3.5 Mbit/s");
        assert_eq!(rate_text(167_772_160.0), "167.77 Mbit/s");
        assert_eq!(rate_text(384e3), "384 kbit/s");
        assert_eq!(rate_text(1e10), "10 Gbit/s");
        assert_eq!(rate_text(500.0), "500 bit/s");
    }

    /// What `wanopt probe` would report for the waas-3g link (RTT 150 ms,
    /// 384 kbit/s up, 2 Mbit/s down), with `loss` per cent lost back.
    fn probe_report(loss: f64, trains: bool) -> crate::cli::probe::Report {
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
    fn error_of<T>(result: Result<T>) -> String {
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

    #[test]
    fn percentages_read_like_their_flags() {
        assert_eq!(percent_text(0.5), "0.5");
        assert_eq!(percent_text(1.0), "1");
        assert_eq!(percent_text(100.0 / 3.0 / 100.0), "0.333");
    }

    #[test]
    fn small_and_huge_products() {
        // 2 Mbit/s at 150 ms: 37.5 KB, no scaling, no slow start to speak of.
        let n = need(2_000_000, Duration::from_millis(150), 1448, None);
        assert_eq!((n.bdp, n.shift, n.slow_start_rtts), (37_500, Some(0), 2));
        assert!(window_text(&n).contains("window scaling: not needed"));
        assert!(window_text(&n).contains("at most 2 Mbit/s (100.0% of the path)"));
        // 100 Gbit/s at 800 ms: 10 GB, beyond shift 14.
        let n = need(100_000_000_000, Duration::from_millis(800), 1448, None);
        assert_eq!(n.shift, None);
        assert!(window_text(&n).contains("beyond TCP's largest window (1073725440 bytes"));
        // 10 Gbit/s at 800 ms (the path-brokenness paper's far end): 1 GB, shift 14.
        let n = need(10_000_000_000, Duration::from_millis(800), 1448, None);
        assert_eq!(n.shift, Some(14));
    }

    #[test]
    fn bad_paths_are_one_line_errors() {
        let args = |rate: &str, rtt: &str, loss: Option<&str>, mss: u32| PathArgs {
            rate: Some(rate.into()),
            rtt: Some(rtt.into()),
            loss: loss.map(Into::into),
            mss,
            probe: None,
        };
        for (a, needle) in [
            (args("10mbps", "100ms", None, 1448), "--rate"),
            (args("10mbit", "0ms", None, 1448), "above zero"),
            (args("10mbit", "fast", None, 1448), "--rtt"),
            (args("10mbit", "100ms", Some("150%"), 1448), "--loss"),
            (args("10mbit", "100ms", None, 10), "below TCP's minimum"),
            (args("10mbit", "100ms", None, 70_000), "16-bit"),
        ] {
            let e = window(&a)
                .err()
                .map(|e| format!("{e:#}"))
                .unwrap_or_default();
            assert!(e.contains(needle), "{needle:?} not in {e:?}");
            assert!(!e.contains('\n'), "{e}");
        }
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
