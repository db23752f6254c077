//! What a probing run measured ([`Report`], the JSON of
//! `wanopt probe --json`), the statistics it is made of, the warnings of
//! probes that load the bottleneck they measure, and its text for people.

use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

use crate::text::rate_text;

/// One direction's arrivals.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Direction {
    /// Datagrams sent.
    pub sent: u32,
    /// Distinct datagrams that arrived.
    pub received: u32,
    /// Sent minus received.
    pub lost: u32,
    /// Lost as a share of sent, percent.
    pub loss_percent: f64,
    /// Arrivals after a higher-numbered datagram.
    pub reordered: u32,
    /// Datagrams that arrived more than once.
    pub duplicated: u32,
}

impl Direction {
    /// The counts of a direction where `sent` datagrams went and
    /// `received` distinct ones arrived.
    pub fn new(sent: u32, received: u32, reordered: u32, duplicated: u32) -> Direction {
        let lost = sent.saturating_sub(received);
        Direction {
            sent,
            received,
            lost,
            loss_percent: if sent == 0 {
                0.0
            } else {
                f64::from(lost) * 100.0 / f64::from(sent)
            },
            reordered,
            duplicated,
        }
    }
}

/// Round-trip times of the probes that came back, milliseconds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Rtt {
    /// Smallest.
    pub min_ms: f64,
    /// Median.
    pub median_ms: f64,
    /// 90th percentile.
    pub p90_ms: f64,
    /// 99th percentile.
    pub p99_ms: f64,
    /// Largest.
    pub max_ms: f64,
    /// Mean difference between consecutive probes' RTTs.
    pub jitter_ms: f64,
}

/// What `wanopt probe` measured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Report {
    /// The reflector.
    pub target: String,
    /// Probes sent.
    pub probes: u32,
    /// Payload bytes per datagram.
    pub size: usize,
    /// Time between probes, milliseconds.
    pub interval_ms: f64,
    /// Round-trip times (absent when no probe came back).
    pub rtt: Option<Rtt>,
    /// Here to the reflector (absent when the reflector's final counters
    /// never arrived).
    pub forward: Option<Direction>,
    /// The reflector to here.
    pub reverse: Option<Direction>,
    /// The bottleneck rate each way (absent with `--trains 0`).
    pub rate: Option<Rates>,
    /// What may make these figures the probe's own rather than the
    /// path's (probes that load a bottleneck the trains measured).
    #[serde(default)]
    pub warnings: Vec<String>,
}

/// What the packet trains measured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Rates {
    /// Trains sent.
    pub trains: u32,
    /// Datagrams per train.
    pub train_len: u32,
    /// UDP payload bytes per train datagram.
    pub train_size: usize,
    /// Here to the reflector (absent when no train gave an estimate).
    pub forward: Option<RateEstimate>,
    /// The reflector to here.
    pub reverse: Option<RateEstimate>,
}

/// One direction's rate over the trains that gave an estimate.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RateEstimate {
    /// Median, bits per second of IP packets.
    pub median_bps: f64,
    /// Smallest train estimate.
    pub min_bps: f64,
    /// Largest train estimate.
    pub max_bps: f64,
    /// Trains that gave an estimate (at least two datagrams arrived, at
    /// different times).
    pub trains: u32,
    /// The sender (this host forward, the reflector reverse) put the
    /// trains on the wire about this fast or slower: the path may be
    /// faster.
    pub sender_limited: bool,
}

impl RateEstimate {
    /// The estimate of per-train rates (`None` without any).
    pub fn of(mut rates: Vec<f64>, sender_limited: bool) -> Option<RateEstimate> {
        if rates.is_empty() {
            return None;
        }
        rates.sort_by(f64::total_cmp);
        Some(RateEstimate {
            median_bps: quantile(&rates, 0.5).round(),
            min_bps: rates[0].round(),
            max_bps: rates[rates.len() - 1].round(),
            trains: rates.len() as u32,
            sender_limited,
        })
    }
}

/// Bits per second of `n` datagrams of `wire` IP bytes each that arrived
/// `span_ns` apart from first to last: the first one's own transmission
/// ended when the clock started, so `n - 1` of them count.
pub fn train_rate(n: usize, wire: usize, span_ns: u64) -> Option<f64> {
    (n >= 2 && span_ns > 0).then(|| ((n - 1) * wire * 8) as f64 * 1e9 / span_ns as f64)
}

/// Quantile `q` of sorted values (nearest rank).
fn quantile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}

/// RTT statistics of per-probe round trips (`None`: never came back).
pub fn rtt_stats(rtts: &[Option<f64>]) -> Option<Rtt> {
    let mut sorted: Vec<f64> = rtts.iter().flatten().copied().collect();
    if sorted.is_empty() {
        return None;
    }
    sorted.sort_by(f64::total_cmp);
    let pairs: Vec<f64> = rtts
        .windows(2)
        .filter_map(|w| match (w[0], w[1]) {
            (Some(a), Some(b)) => Some((b - a).abs()),
            _ => None,
        })
        .collect();
    let round = |v: f64| (v * 1000.0).round() / 1000.0;
    Some(Rtt {
        min_ms: round(sorted[0]),
        median_ms: round(quantile(&sorted, 0.5)),
        p90_ms: round(quantile(&sorted, 0.9)),
        p99_ms: round(quantile(&sorted, 0.99)),
        max_ms: round(sorted[sorted.len() - 1]),
        jitter_ms: if pairs.is_empty() {
            0.0
        } else {
            round(pairs.iter().sum::<f64>() / pairs.len() as f64)
        },
    })
}

/// Share of a bottleneck the probes may take before their own queue shows
/// in the RTT and loss once other traffic shares the link.
pub const PROBE_LOAD_WARN: f64 = 0.5;

/// Share of the slower bottleneck the suggested `--interval` loads.
pub const PROBE_LOAD_SUGGESTED: f64 = 0.25;

/// Warnings for each direction whose bottleneck (as the trains measured
/// it, and not the trains' sender) the probes, `overhead` IP and UDP
/// bytes on top of their payload, load to [`PROBE_LOAD_WARN`] or more:
/// probes above the bottleneck's rate queue behind each other until the
/// queue overflows, and the RTT and loss measured are then the probe's.
/// Echoes are as large as probes, so both directions carry the same load.
pub fn load_warnings(r: &Report, overhead: usize) -> Vec<String> {
    let Some(rates) = &r.rate else {
        return Vec::new();
    };
    if r.interval_ms.is_nan() || r.interval_ms <= 0.0 {
        return Vec::new();
    }
    let wire = (r.size + overhead) as f64;
    let load = wire * 8.0 * 1000.0 / r.interval_ms;
    let measured: Vec<(&str, f64)> = [("forward", &rates.forward), ("reverse", &rates.reverse)]
        .into_iter()
        .filter_map(|(name, e)| {
            let e = e.as_ref()?;
            (!e.sender_limited && e.median_bps > 0.0).then_some((name, e.median_bps))
        })
        .collect();
    let slowest = measured
        .iter()
        .map(|&(_, bps)| bps)
        .fold(f64::INFINITY, f64::min);
    // The interval that loads the slower bottleneck to PROBE_LOAD_SUGGESTED,
    // rounded up to a whole millisecond.
    let suggested_ms = (wire * 8.0 * 1000.0 / (PROBE_LOAD_SUGGESTED * slowest)).ceil();
    measured
        .iter()
        .filter(|&&(_, bps)| load >= PROBE_LOAD_WARN * bps)
        .map(|&(name, bps)| {
            let what = if load >= bps {
                "exceed it: they queue behind each other until the queue overflows, so the RTT and this direction's loss are mostly the probe's own"
            } else {
                "queue behind each other as soon as other traffic shares it: the RTT and this direction's loss may include the probe's own queueing"
            };
            format!(
                "the probes ({} of {} bytes every {} ms) are {:.0}% of the {name} bottleneck ({}) and {what}; probe with --interval {suggested_ms}ms or more",
                rate_text(load),
                r.size,
                r.interval_ms,
                load * 100.0 / bps,
                rate_text(bps),
            )
        })
        .collect()
}

/// Whether arrivals came about as fast as their sender sent (medians
/// within 20%): then they measured the sender, and the path is at least
/// that fast.
pub fn sender_limited(arrived: &[f64], sent: &[f64]) -> bool {
    let median = |v: &[f64]| {
        let mut v = v.to_vec();
        v.sort_by(f64::total_cmp);
        quantile(&v, 0.5)
    };
    !arrived.is_empty() && !sent.is_empty() && median(arrived) >= 0.8 * median(sent)
}

fn direction_line(d: &Direction) -> String {
    format!(
        "{} of {} lost ({:.2}%), {} reordered, {} duplicated",
        d.lost, d.sent, d.loss_percent, d.reordered, d.duplicated
    )
}

/// The report for people.
pub fn text(r: &Report) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "probe {}: {} probes of {} bytes every {} ms",
        r.target, r.probes, r.size, r.interval_ms
    );
    if let Some(t) = &r.rtt {
        let _ = writeln!(
            out,
            "rtt: min {:.2} ms, median {:.2}, p90 {:.2}, p99 {:.2}, max {:.2}; jitter {:.2} ms",
            t.min_ms, t.median_ms, t.p90_ms, t.p99_ms, t.max_ms, t.jitter_ms
        );
    }
    match (&r.forward, &r.reverse) {
        (Some(f), Some(b)) => {
            let _ = writeln!(out, "forward (here to {}): {}", r.target, direction_line(f));
            let _ = writeln!(out, "reverse ({} to here): {}", r.target, direction_line(b));
        }
        _ => {
            let _ = writeln!(
                out,
                "loss per direction: unknown (the reflector's counters never arrived)"
            );
        }
    }
    if let Some(rates) = &r.rate {
        let _ = writeln!(out, "{}", rate_line(rates));
    }
    for w in &r.warnings {
        let _ = writeln!(out, "warning: {w}");
    }
    out
}

fn estimate_text(e: &Option<RateEstimate>) -> String {
    match e {
        None => "unknown".into(),
        Some(e) => format!(
            "{}{} ({} to {})",
            if e.sender_limited { "at least " } else { "" },
            rate_text(e.median_bps),
            rate_text(e.min_bps),
            rate_text(e.max_bps)
        ),
    }
}

/// The bottleneck-rate line of the report.
fn rate_line(r: &Rates) -> String {
    if r.forward.is_none() && r.reverse.is_none() {
        return format!(
            "bottleneck rate: unknown (none of {} trains came back: a reflector older than packet trains does not answer them)",
            r.trains
        );
    }
    let count = |e: &Option<RateEstimate>| e.as_ref().map_or(0, |e| e.trains);
    format!(
        "bottleneck rate (IP bytes; median of {} and {} trains of {} x {} bytes, range): forward {}, reverse {}",
        count(&r.forward),
        count(&r.reverse),
        r.train_len,
        r.train_size,
        estimate_text(&r.forward),
        estimate_text(&r.reverse)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rtt_statistics() {
        let rtts = [Some(10.0), Some(12.0), None, Some(11.0), Some(30.0)];
        let s = rtt_stats(&rtts).unwrap_or_else(|| panic!("four round trips"));
        assert_eq!((s.min_ms, s.median_ms, s.max_ms), (10.0, 11.0, 30.0));
        assert_eq!((s.p90_ms, s.p99_ms), (30.0, 30.0));
        // |12-10| and |30-11|; the pairs around the lost probe do not count.
        assert_eq!(s.jitter_ms, 10.5);
        assert_eq!(rtt_stats(&[None, None]), None);
    }

    #[test]
    fn directions_count_losses() {
        let d = Direction::new(1000, 970, 2, 1);
        assert_eq!((d.lost, d.loss_percent), (30, 3.0));
        assert_eq!(Direction::new(0, 0, 0, 0).loss_percent, 0.0);
        assert_eq!(Direction::new(5, 6, 0, 0).lost, 0);
        assert_eq!(
            direction_line(&d),
            "30 of 1000 lost (3.00%), 2 reordered, 1 duplicated"
        );
    }

    /// A report of the waas-3g link (384 kbit/s up, 2 Mbit/s down) probed
    /// with 200-byte probes every `interval_ms`.
    fn three_g(interval_ms: f64, reverse_sender_limited: bool) -> Report {
        let estimate = |bps: f64, sender_limited| RateEstimate {
            median_bps: bps,
            min_bps: bps,
            max_bps: bps,
            trains: 10,
            sender_limited,
        };
        Report {
            target: "192.0.2.7:7009".into(),
            probes: 1000,
            size: 200,
            interval_ms,
            rtt: rtt_stats(&[Some(150.0)]),
            forward: Some(Direction::new(1000, 560, 0, 0)),
            reverse: Some(Direction::new(560, 560, 0, 0)),
            rate: Some(Rates {
                trains: 10,
                train_len: 16,
                train_size: 1472,
                forward: Some(estimate(384e3, false)),
                reverse: Some(estimate(2e6, reverse_sender_limited)),
            }),
            warnings: Vec::new(),
        }
    }

    /// Probes above a bottleneck's rate are warned about, with the
    /// interval that would not load it; probes well under it are not.
    #[test]
    fn probes_that_load_a_bottleneck_are_warned_about() {
        // 228 IP bytes every 2 ms: 912 kbit/s, 237% of the uplink and 46%
        // of the downlink.
        let w = load_warnings(&three_g(2.0, false), 28);
        assert_eq!(w.len(), 1, "{w:?}");
        assert_eq!(
            w[0],
            "the probes (912 kbit/s of 200 bytes every 2 ms) are 238% of the forward bottleneck \
             (384 kbit/s) and exceed it: they queue behind each other until the queue overflows, \
             so the RTT and this direction's loss are mostly the probe's own; probe with \
             --interval 19ms or more"
        );
        // Every 4 ms: 456 kbit/s, still above the uplink.
        assert!(load_warnings(&three_g(4.0, false), 28)[0].contains("119% of the forward"));
        // Every 6 ms: 304 kbit/s, 79% of the uplink: queues with others.
        let w = load_warnings(&three_g(6.0, false), 28);
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(
            w[0].contains("79% of the forward") && w[0].contains("may include"),
            "{w:?}"
        );
        // The default 10 ms: 182 kbit/s, under half of either.
        assert!(load_warnings(&three_g(10.0, false), 28).is_empty());
        // Every 0.5 ms loads the downlink too (3.6 Mbit/s).
        let w = load_warnings(&three_g(0.5, false), 28);
        assert_eq!(w.len(), 2, "{w:?}");
        assert!(
            w[1].contains("of the reverse bottleneck (2 Mbit/s)"),
            "{w:?}"
        );
        // A sender-limited estimate is not the bottleneck's: no warning on
        // it, and the interval is suggested from the uplink alone.
        let w = load_warnings(&three_g(0.5, true), 28);
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(w[0].contains("--interval 19ms"), "{w:?}");
        // Without trains there is no rate to compare with.
        let mut no_trains = three_g(2.0, false);
        no_trains.rate = None;
        assert!(load_warnings(&no_trains, 28).is_empty());
        // The text report ends with them.
        let mut r = three_g(2.0, false);
        r.warnings = load_warnings(&r, 28);
        assert!(
            text(&r).ends_with("--interval 19ms or more\n"),
            "{}",
            text(&r)
        );
        assert!(text(&r).contains("\nwarning: the probes (912 kbit/s"));
    }

    /// Without the reflector's counters the report still says what was
    /// sent, and that the per-direction loss is unknown.
    #[test]
    fn a_report_without_the_reflectors_counters() {
        let r = Report {
            target: "192.0.2.1:7009".into(),
            probes: 1000,
            size: 200,
            interval_ms: 10.0,
            rtt: rtt_stats(&[Some(60.0)]),
            forward: None,
            reverse: None,
            rate: None,
            warnings: Vec::new(),
        };
        let t = text(&r);
        assert!(
            t.starts_with("probe 192.0.2.1:7009: 1000 probes of 200 bytes every 10 ms\n"),
            "{t}"
        );
        assert!(t.contains("loss per direction: unknown"), "{t}");
    }

    #[test]
    fn train_rates_count_the_gaps_between_arrivals() {
        // 16 datagrams of 1500 bytes, 6 ms apart: 2 Mbit/s.
        assert_eq!(train_rate(16, 1500, 15 * 6_000_000), Some(2e6));
        assert_eq!(train_rate(1, 1500, 0), None);
        assert_eq!(train_rate(5, 1500, 0), None);
        let e = RateEstimate::of(vec![3e6, 1e6, 2e6], false).unwrap_or_else(|| panic!("three"));
        assert_eq!(
            (e.median_bps, e.min_bps, e.max_bps, e.trains),
            (2e6, 1e6, 3e6, 3)
        );
        assert_eq!(RateEstimate::of(vec![], false), None);
        let rates = Rates {
            trains: 10,
            train_len: 16,
            train_size: 1472,
            forward: RateEstimate::of(vec![384e3], true),
            reverse: None,
        };
        assert_eq!(
            rate_line(&rates),
            "bottleneck rate (IP bytes; median of 1 and 0 trains of 16 x 1472 bytes, range): forward at least 384 kbit/s (384 kbit/s to 384 kbit/s), reverse unknown"
        );
        let none = Rates {
            forward: None,
            ..rates
        };
        assert!(rate_line(&none).contains("none of 10 trains came back"));
        // Arrivals as fast as the sends measured the sender.
        assert!(sender_limited(&[9e9, 8e9, 1e9], &[9.5e9, 9e9]));
        assert!(!sender_limited(&[2e6, 2e6], &[9e9]));
        assert!(!sender_limited(&[], &[1.0]));
        assert!(!sender_limited(&[2e6], &[f64::INFINITY]));
    }
}
