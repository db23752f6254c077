//! The figures of a stream from its sender's and receiver's logs:
//! delivered loss, duplicates delivered, one-way delay percentiles, RFC
//! 3550 jitter, the longest gap between arrivals; per-100 ms series; and
//! the bulk download's recovery after an event.

use std::collections::HashSet;

use serde::{Deserialize, Serialize};

use super::peer::Record;
use crate::kit::stats::{percentile, round3};

/// What a stream's logs show.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct StreamFigures {
    /// Packets sent (distinct numbers).
    pub sent: usize,
    /// Packets of those delivered (first copies).
    pub delivered: usize,
    /// Copies delivered more than once.
    pub duplicates: usize,
    /// `1 - delivered / sent`, percent; `None` if nothing was sent.
    pub delivered_loss_pct: Option<f64>,
    /// Median one-way delay, ms.
    pub delay_p50_ms: Option<f64>,
    /// 99th percentile one-way delay, ms.
    pub delay_p99_ms: Option<f64>,
    /// RFC 3550 interarrival jitter, averaged over the run, ms.
    pub jitter_ms: Option<f64>,
    /// The longest time between consecutive arrivals, ms.
    pub max_gap_ms: Option<f64>,
    /// Packets that arrived before they were sent (a clock step).
    pub negative_delays: usize,
}

/// Nanoseconds to milliseconds, signed.
fn ms(ns: i128) -> f64 {
    ns as f64 / 1e6
}

/// The first copy of each packet `sent` lists, in arrival order: the
/// rest are duplicates (counted) or packets nobody logged sending
/// (ignored).
fn first_arrivals<'a>(sent: &HashSet<u32>, received: &'a [Record]) -> (Vec<&'a Record>, usize) {
    let mut arrivals: Vec<&Record> = received.iter().collect();
    arrivals.sort_by_key(|r| r.recv_ns);
    let mut seen = HashSet::new();
    let mut duplicates = 0;
    let mut first = Vec::new();
    for r in arrivals {
        if !sent.contains(&r.seq) {
            continue;
        }
        if seen.insert(r.seq) {
            first.push(r);
        } else {
            duplicates += 1;
        }
    }
    (first, duplicates)
}

/// RFC 3550 section 6.4.1 interarrival jitter over `arrivals` (in arrival
/// order): `J += (|D(i-1, i)| - J) / 16`, with `D` the difference of
/// consecutive packets' transit times (arrival minus send, so the
/// sender's own timing cancels out). Returns the mean of `J` over the run
/// and its last value, ms.
pub fn rfc3550_jitter(arrivals: &[(u64, u64)]) -> Option<(f64, f64)> {
    let mut j = 0.0;
    let mut sum = 0.0;
    let mut n = 0usize;
    for w in arrivals.windows(2) {
        let transit = |(sent, recv): (u64, u64)| i128::from(recv) - i128::from(sent);
        let d = ms(transit(w[1]) - transit(w[0])).abs();
        j += (d - j) / 16.0;
        sum += j;
        n += 1;
    }
    (n > 0).then(|| (sum / n as f64, j))
}

/// The longest time between consecutive arrival times (sorted), ms.
pub fn max_gap_ms(arrival_ns: &[u64]) -> Option<f64> {
    arrival_ns
        .windows(2)
        .map(|w| ms(i128::from(w[1]) - i128::from(w[0])))
        .reduce(f64::max)
}

/// The figures of one stream and direction: `sent` from the sender's log,
/// `received` from the receiver's (both of that stream only).
pub fn stream_figures(sent: &[Record], received: &[Record]) -> StreamFigures {
    let numbers: HashSet<u32> = sent.iter().map(|r| r.seq).collect();
    let (first, duplicates) = first_arrivals(&numbers, received);
    let delays: Vec<f64> = first
        .iter()
        .map(|r| ms(i128::from(r.recv_ns) - i128::from(r.sent_ns)))
        .collect();
    let pairs: Vec<(u64, u64)> = first.iter().map(|r| (r.sent_ns, r.recv_ns)).collect();
    let arrival_ns: Vec<u64> = first.iter().map(|r| r.recv_ns).collect();
    let sent_count = numbers.len();
    StreamFigures {
        sent: sent_count,
        delivered: first.len(),
        duplicates,
        delivered_loss_pct: (sent_count > 0)
            .then(|| (1.0 - first.len() as f64 / sent_count as f64) * 100.0),
        delay_p50_ms: percentile(&delays, 0.5),
        delay_p99_ms: percentile(&delays, 0.99),
        jitter_ms: rfc3550_jitter(&pairs).map(|(mean, _)| mean),
        max_gap_ms: max_gap_ms(&arrival_ns),
        negative_delays: delays.iter().filter(|d| **d < 0.0).count(),
    }
}

/// One interval of a stream's series, by send time.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Bin {
    /// The interval's start, seconds since the cell's start.
    pub t_s: f64,
    /// Packets sent in it.
    pub sent: u32,
    /// Of those, never delivered.
    pub lost: u32,
    /// Median one-way delay of those delivered, ms.
    pub delay_p50_ms: Option<f64>,
    /// Highest one-way delay of those delivered, ms.
    pub delay_max_ms: Option<f64>,
}

/// The stream's series in intervals of `bin_ms` by send time, from
/// `t0_ns` (the cell's start).
pub fn series(sent: &[Record], received: &[Record], t0_ns: u64, bin_ms: u64) -> Vec<Bin> {
    let numbers: HashSet<u32> = sent.iter().map(|r| r.seq).collect();
    let (first, _) = first_arrivals(&numbers, received);
    let delivered: std::collections::HashMap<u32, f64> = first
        .iter()
        .map(|r| (r.seq, ms(i128::from(r.recv_ns) - i128::from(r.sent_ns))))
        .collect();
    let bin_ns = bin_ms.max(1) * 1_000_000;
    let index = |sent_ns: u64| (sent_ns.saturating_sub(t0_ns) / bin_ns) as usize;
    let Some(last) = sent.iter().map(|r| index(r.sent_ns)).max() else {
        return Vec::new();
    };
    let mut delays: Vec<Vec<f64>> = vec![Vec::new(); last + 1];
    let mut bins: Vec<Bin> = (0..=last)
        .map(|i| Bin {
            t_s: (i as u64 * bin_ms) as f64 / 1e3,
            sent: 0,
            lost: 0,
            delay_p50_ms: None,
            delay_max_ms: None,
        })
        .collect();
    for r in sent {
        let i = index(r.sent_ns);
        bins[i].sent += 1;
        match delivered.get(&r.seq) {
            Some(d) => delays[i].push(*d),
            None => bins[i].lost += 1,
        }
    }
    for (bin, d) in bins.iter_mut().zip(&delays) {
        bin.delay_p50_ms = percentile(d, 0.5).map(round3);
        bin.delay_max_ms = d.iter().copied().reduce(f64::max).map(round3);
    }
    bins
}

/// Bytes received by `t` in a run sampled as `(seconds since the start,
/// bytes received so far)`: the latest sample at or before `t`.
fn bytes_at(samples: &[(f64, u64)], t: f64) -> u64 {
    samples
        .iter()
        .rev()
        .find(|(s, _)| *s <= t + 1e-9)
        .map_or(0, |(_, b)| *b)
}

/// How long after `event_s` (seconds since the start) a window of
/// `window_s` first carried `share` of the rate of the 2 s before the
/// event: the window's end minus the event, seconds. `None` if it never
/// did, or nothing arrived before the event.
pub fn recovery_s(samples: &[(f64, u64)], event_s: f64, window_s: f64, share: f64) -> Option<f64> {
    let from = (event_s - 2.0).max(0.0);
    let before = bytes_at(samples, event_s).saturating_sub(bytes_at(samples, from));
    if event_s <= from || before == 0 {
        return None;
    }
    let target = share * before as f64 / (event_s - from);
    samples
        .iter()
        .filter(|(t, _)| *t >= event_s + window_s - 1e-9)
        .find(|(t, b)| {
            b.saturating_sub(bytes_at(samples, t - window_s)) as f64 / window_s >= target
        })
        .map(|(t, _)| t - event_s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::realtime::peer::Stream;

    const MS: u64 = 1_000_000;

    fn sent(seq: u32, at_ms: u64) -> Record {
        Record {
            received: false,
            stream: Stream::Voice,
            seq,
            sent_ns: at_ms * MS,
            recv_ns: 0,
        }
    }

    fn arrived(seq: u32, sent_ms: u64, recv_us: u64) -> Record {
        Record {
            received: true,
            stream: Stream::Voice,
            seq,
            sent_ns: sent_ms * MS,
            recv_ns: recv_us * 1_000,
        }
    }

    /// Sent at 0, 20, 40, 60 ms, transit 100, 101, 99, 105 ms: D is 1, 2
    /// and 6 ms, so J is 1/16 = 0.0625, then 0.0625 + (2 - 0.0625)/16 =
    /// 0.18359375, then 0.18359375 + (6 - 0.18359375)/16 = 0.547119140625;
    /// their mean 0.264404296875.
    #[test]
    fn jitter_follows_rfc_3550_by_hand() {
        let arrivals = [
            (0, 100 * MS),
            (20 * MS, 121 * MS),
            (40 * MS, 139 * MS),
            (60 * MS, 165 * MS),
        ];
        let (mean, last) = rfc3550_jitter(&arrivals).unwrap_or_default();
        assert!((last - 0.547_119_140_625).abs() < 1e-12, "{last}");
        assert!((mean - 0.264_404_296_875).abs() < 1e-12, "{mean}");
        // Constant transit: no jitter, whatever the sender's timing.
        let steady = [(0, 50 * MS), (7 * MS, 57 * MS), (31 * MS, 81 * MS)];
        assert_eq!(rfc3550_jitter(&steady), Some((0.0, 0.0)));
        assert_eq!(rfc3550_jitter(&arrivals[..1]), None);
    }

    #[test]
    fn the_longest_gap_is_between_consecutive_arrivals() {
        assert_eq!(
            max_gap_ms(&[0, 20 * MS, 40 * MS, 160 * MS, 180 * MS]),
            Some(120.0)
        );
        assert_eq!(max_gap_ms(&[5 * MS]), None);
    }

    /// 10 sent; 7 and 8 lost; 3 delivered twice; 5 and 6 arrive swapped:
    /// 20% delivered loss, 1 duplicate, and the figures come from first
    /// copies in arrival order.
    #[test]
    fn loss_counts_distinct_packets_through_duplicates_and_reordering() {
        let sent: Vec<Record> = (0..10).map(|i| sent(i, u64::from(i) * 20)).collect();
        let mut received = Vec::new();
        for i in [0u32, 1, 2, 3, 4, 6, 5, 9] {
            // 20 ms transit; 5 is 30 ms late, so it arrives after 6.
            let extra = if i == 5 { 30_000 } else { 0 };
            received.push(arrived(
                i,
                u64::from(i) * 20,
                (u64::from(i) * 20 + 20) * 1_000 + extra,
            ));
        }
        // A copy of 3, 1 ms after the first.
        received.push(arrived(3, 60, 81_000));
        // A packet nobody sent (another run's) is not counted.
        received.push(arrived(77, 0, 10_000));
        let f = stream_figures(&sent, &received);
        assert_eq!((f.sent, f.delivered, f.duplicates), (10, 8, 1));
        assert!((f.delivered_loss_pct.unwrap_or(0.0) - 20.0).abs() < 1e-9);
        assert_eq!(f.delay_p50_ms, Some(20.0));
        assert_eq!(f.delay_p99_ms, Some(50.0));
        // Arrivals at 20, 40, 60, 80, 100, 140, 150, 200 ms: 9 is 50 ms
        // after 5.
        assert_eq!(f.max_gap_ms, Some(50.0));
        assert!(f.jitter_ms.is_some_and(|j| j > 0.0));
        assert_eq!(f.negative_delays, 0);
        let none = stream_figures(&[], &[]);
        assert_eq!((none.delivered_loss_pct, none.delay_p99_ms), (None, None));
    }

    #[test]
    fn series_bins_by_send_time() {
        let sent: Vec<Record> = (0..10)
            .map(|i| sent(i, 1_000 + u64::from(i) * 20))
            .collect();
        let received: Vec<Record> = (0..10)
            .filter(|i| *i != 2)
            .map(|i| {
                arrived(
                    i,
                    1_000 + u64::from(i) * 20,
                    (1_000 + u64::from(i) * 20 + 20 + u64::from(i)) * 1_000,
                )
            })
            .collect();
        let bins = series(&sent, &received, 1_000 * MS, 100);
        assert_eq!(bins.len(), 2);
        assert_eq!((bins[0].t_s, bins[0].sent, bins[0].lost), (0.0, 5, 1));
        assert_eq!(bins[0].delay_max_ms, Some(24.0));
        assert_eq!((bins[1].t_s, bins[1].sent, bins[1].lost), (0.1, 5, 0));
        assert_eq!(bins[1].delay_p50_ms, Some(27.0));
    }

    #[test]
    fn recovery_is_the_first_window_back_at_share_of_the_rate_before() {
        // 1 MB/s sampled every 50 ms; nothing from 4 s to 5 s; back at
        // full rate from 5 s.
        let mut samples = Vec::new();
        let mut total = 0u64;
        for i in 1..=200u64 {
            let t = i as f64 * 0.05;
            if !(4.0..5.0).contains(&(t - 0.05)) {
                total += 50_000;
            }
            samples.push((t, total));
        }
        let r = recovery_s(&samples, 4.0, 0.1, 0.8).unwrap_or(0.0);
        assert!((r - 1.1).abs() < 1e-6, "{r}");
        assert_eq!(recovery_s(&samples[..10], 0.0, 0.1, 0.8), None);
    }
}
