//! A link capacity that follows a recorded trace of delivery opportunities.
//!
//! The format is Mahimahi's (`mm-link`, Netravali et al., USENIX ATC 2015;
//! the cellular traces of Winstein et al., "Stochastic Forecasts Achieve
//! High Throughput and Low Delay over Cellular Networks", NSDI 2013): one
//! line per opportunity to deliver one 1500-byte packet, holding the
//! opportunity's time in milliseconds from the start of the trace; several
//! opportunities in one millisecond repeat the timestamp. Timestamps never
//! decrease, and the trace repeats with a period of its last timestamp, so
//! the file `1` is a link of one packet per millisecond (12 Mbit/s).
//!
//! The link serves its queue the way `mm-link` does
//! ([`crate::link`], `LinkQueue::rationalize` in Mahimahi): each opportunity
//! carries up to [`OPPORTUNITY_BYTES`] of the queue, several small packets
//! or part of a large one (a packet leaves at the opportunity that carries
//! its last byte); an opportunity that finds the queue empty is lost, and a
//! packet can use only opportunities after its arrival.
//!
//! ```
//! use wanopt_netem::DeliveryTrace;
//!
//! let trace = DeliveryTrace::parse("1\n1\n3\n4\n").unwrap();
//! assert_eq!(trace.period_ms(), 4);
//! // 4 packets of 1500 bytes every 4 ms.
//! assert_eq!(trace.mean_rate().0, 12_000_000);
//! // The fifth opportunity is the first of the second period.
//! assert_eq!(trace.time_ns(4), 5_000_000);
//! ```

use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::units::BitsPerSecond;

mod server;
pub mod synthetic;

pub use server::TraceServer;

/// Bytes one delivery opportunity carries (Mahimahi's `PACKET_SIZE`).
pub const OPPORTUNITY_BYTES: u32 = 1500;

/// The most opportunities a trace may hold (a recorded two-hour drive at
/// 50 Mbit/s has about 30 million; longer traces are refused rather than
/// read into memory unbounded).
pub const MAX_OPPORTUNITIES: usize = 50_000_000;

pub(crate) const NANOS_PER_MS: u64 = 1_000_000;

/// Why a trace did not parse.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum TraceError {
    /// A line is not a whole number of milliseconds.
    #[error("line {line}: `{text}` is not a time in whole milliseconds (a trace has one number per line, like Mahimahi's)")]
    NotANumber {
        /// The line number, from 1.
        line: usize,
        /// The line as written (cut to 40 characters).
        text: String,
    },
    /// A timestamp is smaller than the one before it.
    #[error("line {line}: {ms} ms comes after {previous} ms: timestamps must never decrease")]
    Decreasing {
        /// The line number, from 1.
        line: usize,
        /// The timestamp of the line.
        ms: u32,
        /// The timestamp before it.
        previous: u32,
    },
    /// The trace has no opportunity at all.
    #[error("the trace holds no delivery opportunity (one line per opportunity, in milliseconds)")]
    Empty,
    /// Every opportunity is at time 0: the trace would repeat with period 0.
    #[error("the trace lasts 0 ms: its last timestamp must be above 0 (it is the period the trace repeats with)")]
    ZeroLength,
    /// More opportunities than [`MAX_OPPORTUNITIES`].
    #[error("the trace holds more than {MAX_OPPORTUNITIES} delivery opportunities")]
    TooLong,
}

/// A recorded list of delivery opportunities, repeating (see the module
/// documentation). Always valid: non-empty, never decreasing, lasting more
/// than 0 ms.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "Vec<u32>", into = "Vec<u32>")]
pub struct DeliveryTrace {
    times_ms: Vec<u32>,
}

impl TryFrom<Vec<u32>> for DeliveryTrace {
    type Error = TraceError;

    fn try_from(times_ms: Vec<u32>) -> Result<DeliveryTrace, TraceError> {
        if times_ms.len() > MAX_OPPORTUNITIES {
            return Err(TraceError::TooLong);
        }
        if let Some(index) = times_ms.windows(2).position(|pair| pair[1] < pair[0]) {
            return Err(TraceError::Decreasing {
                line: index + 2,
                ms: times_ms[index + 1],
                previous: times_ms[index],
            });
        }
        match times_ms.last() {
            None => Err(TraceError::Empty),
            Some(0) => Err(TraceError::ZeroLength),
            Some(_) => Ok(DeliveryTrace { times_ms }),
        }
    }
}

impl From<DeliveryTrace> for Vec<u32> {
    fn from(trace: DeliveryTrace) -> Vec<u32> {
        trace.times_ms
    }
}

impl DeliveryTrace {
    /// Parses a trace in Mahimahi's format. Blank lines and surrounding
    /// whitespace are skipped; anything else that is not a number of
    /// milliseconds is refused with its line number.
    pub fn parse(text: &str) -> Result<DeliveryTrace, TraceError> {
        let mut times_ms = Vec::new();
        for (index, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() {
                continue;
            }
            let ms: u32 = line.parse().map_err(|_| TraceError::NotANumber {
                line: index + 1,
                text: line.chars().take(40).collect(),
            })?;
            if let Some(&previous) = times_ms.last() {
                if ms < previous {
                    return Err(TraceError::Decreasing {
                        line: index + 1,
                        ms,
                        previous,
                    });
                }
            }
            if times_ms.len() == MAX_OPPORTUNITIES {
                return Err(TraceError::TooLong);
            }
            times_ms.push(ms);
        }
        DeliveryTrace::try_from(times_ms)
    }

    /// The trace in Mahimahi's format, one timestamp per line.
    pub fn to_text(&self) -> String {
        let mut text = String::with_capacity(self.times_ms.len() * 7);
        for ms in &self.times_ms {
            text.push_str(&ms.to_string());
            text.push('\n');
        }
        text
    }

    /// Delivery opportunities in one period.
    pub fn len(&self) -> usize {
        self.times_ms.len()
    }

    /// Always `false`: a trace holds at least one opportunity.
    pub fn is_empty(&self) -> bool {
        self.times_ms.is_empty()
    }

    /// The period the trace repeats with: its last timestamp.
    pub fn period_ms(&self) -> u32 {
        self.times_ms.last().copied().unwrap_or(1)
    }

    fn period_ns(&self) -> u64 {
        u64::from(self.period_ms()) * NANOS_PER_MS
    }

    /// The long-run capacity: every opportunity's 1500 bytes over the period.
    pub fn mean_rate(&self) -> BitsPerSecond {
        let bits = self.len() as u64 * u64::from(OPPORTUNITY_BYTES) * 8 * 1000;
        BitsPerSecond(bits / u64::from(self.period_ms()))
    }

    /// The time of opportunity `index` (counted over every repetition), in
    /// nanoseconds from the start of the trace.
    pub fn time_ns(&self, index: u64) -> u64 {
        let n = self.len() as u64;
        let repetition = index / n;
        let within = self.times_ms[(index % n) as usize];
        repetition
            .saturating_mul(self.period_ns())
            .saturating_add(u64::from(within) * NANOS_PER_MS)
    }

    /// The first opportunity strictly after `ns` (opportunities at the
    /// very time a packet arrives were taken before it was queued, as in
    /// Mahimahi).
    pub fn first_after(&self, ns: u64) -> u64 {
        let n = self.len() as u64;
        let period = self.period_ns();
        let repetition = ns / period;
        let within = ns % period;
        let position =
            self.times_ms
                .partition_point(|&ms| u64::from(ms) * NANOS_PER_MS <= within) as u64;
        repetition.saturating_mul(n).saturating_add(position)
    }

    /// Opportunities in the window `(from_ns, to_ns]`.
    pub fn opportunities_between(&self, from_ns: u64, to_ns: u64) -> u64 {
        if to_ns <= from_ns {
            return 0;
        }
        self.first_after(to_ns) - self.first_after(from_ns)
    }

    /// The capacity in bits per second over consecutive windows of `bin_ms`
    /// from the start, `bins` of them (a picture of the trace).
    pub fn rate_series(&self, bin_ms: u32, bins: usize) -> Vec<BitsPerSecond> {
        let bin_ns = u64::from(bin_ms.max(1)) * NANOS_PER_MS;
        (0..bins as u64)
            .map(|i| {
                // Opportunities in [start, end): first_after(t - 1) counts
                // the one at t itself.
                let start = (i * bin_ns).checked_sub(1);
                let end = (i + 1) * bin_ns - 1;
                let before = start.map_or(0, |s| self.first_after(s));
                let count = self.first_after(end) - before;
                let bits = count * u64::from(OPPORTUNITY_BYTES) * 8;
                BitsPerSecond(bits * 1_000_000_000 / bin_ns)
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn trace(text: &str) -> DeliveryTrace {
        DeliveryTrace::parse(text).unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn bad_traces_say_what_is_wrong() {
        let error = |text: &str| {
            DeliveryTrace::parse(text)
                .err()
                .map(|e| e.to_string())
                .unwrap_or_default()
        };
        assert!(error("1\n2\nx3\n").starts_with("line 3: `x3` is not a time"));
        assert!(error("1\n-2\n").starts_with("line 2: `-2`"));
        assert_eq!(
            error("5\n3\n"),
            "line 2: 3 ms comes after 5 ms: timestamps must never decrease"
        );
        assert!(error("").contains("no delivery opportunity"));
        assert!(error("\n\n").contains("no delivery opportunity"));
        assert!(error("0\n0\n").contains("lasts 0 ms"));
        assert!(DeliveryTrace::try_from(vec![3, 1]).is_err());
        assert!(serde_json::from_str::<DeliveryTrace>("[0]").is_err());
        assert!(serde_json::from_str::<DeliveryTrace>("[0, 4]").is_ok());
    }

    #[test]
    fn blank_lines_and_spaces_are_skipped() {
        let t = trace(" 1 \n\n2\r\n2\n");
        assert_eq!(t.len(), 3);
        assert_eq!(t.to_text(), "1\n2\n2\n");
    }

    #[test]
    fn the_trace_repeats_with_its_last_timestamp() {
        let t = trace("0\n2\n5\n");
        let times: Vec<u64> = (0..7).map(|i| t.time_ns(i) / NANOS_PER_MS).collect();
        assert_eq!(times, [0, 2, 5, 5, 7, 10, 10]);
        assert_eq!(t.first_after(0), 1);
        assert_eq!(t.first_after(1_999_999), 1);
        assert_eq!(t.first_after(2_000_000), 2);
        // 5 ms is both the end of one period and the start of the next.
        assert_eq!(t.first_after(5_000_000), 4);
        assert_eq!(t.time_ns(t.first_after(6_000_000)), 7_000_000);
        assert_eq!(t.opportunities_between(0, 10_000_000), 6);
    }

    #[test]
    fn the_mean_rate_counts_1500_bytes_an_opportunity() {
        assert_eq!(trace("1").mean_rate(), BitsPerSecond(12_000_000));
        let rates = trace("1\n1\n2\n4").rate_series(1, 4);
        let mbit: Vec<u64> = rates.iter().map(|r| r.0 / 1_000_000).collect();
        assert_eq!(mbit, [0, 24, 12, 0]);
    }
}
