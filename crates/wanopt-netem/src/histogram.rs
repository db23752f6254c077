//! A histogram of non-negative integers in logarithmic buckets, for the
//! queue the link held (bytes, weighted by the time it held them) and the
//! time packets waited in it.
//!
//! Values below 16 have a bucket each; above, every power of two is cut
//! into 16 buckets, so a bucket's bounds are within 1/16 (6.25%) of each
//! other and a quantile is read to that precision. Histograms are
//! cumulative: the figures of an interval are the difference of two
//! snapshots ([`LogHistogram::since`]).

use serde::{Deserialize, Serialize};

/// Sub-buckets per power of two.
const SUB_BUCKETS: u64 = 16;
const SUB_BITS: u32 = 4;

/// A cumulative histogram: weight per logarithmic bucket of value.
/// Serialized sparsely as `[[low, weight], ...]`, lowest first.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(from = "Vec<(u64, u64)>", into = "Vec<(u64, u64)>")]
pub struct LogHistogram {
    weights: Vec<u64>,
}

/// The bucket of `value`.
fn bucket(value: u64) -> usize {
    if value < SUB_BUCKETS {
        return value as usize;
    }
    let exponent = 63 - value.leading_zeros();
    let sub = (value >> (exponent - SUB_BITS)) & (SUB_BUCKETS - 1);
    ((u64::from(exponent - SUB_BITS + 1)) * SUB_BUCKETS + sub) as usize
}

/// The smallest value of bucket `index`.
fn low(index: usize) -> u64 {
    let index = index as u64;
    if index < SUB_BUCKETS {
        return index;
    }
    let exponent = index / SUB_BUCKETS + u64::from(SUB_BITS) - 1;
    let sub = index % SUB_BUCKETS;
    (SUB_BUCKETS + sub) << (exponent - u64::from(SUB_BITS))
}

impl LogHistogram {
    /// Adds `weight` to the bucket of `value`.
    pub fn record(&mut self, value: u64, weight: u64) {
        if weight == 0 {
            return;
        }
        let index = bucket(value);
        if self.weights.len() <= index {
            self.weights.resize(index + 1, 0);
        }
        self.weights[index] = self.weights[index].saturating_add(weight);
    }

    /// The total weight.
    pub fn total(&self) -> u64 {
        self.weights
            .iter()
            .fold(0u64, |sum, w| sum.saturating_add(*w))
    }

    /// The value below which a share `q` (0..=1) of the weight lies: the
    /// low bound of the bucket where the cumulative weight reaches it.
    /// `None` when the histogram is empty.
    pub fn quantile(&self, q: f64) -> Option<u64> {
        let total = self.total();
        if total == 0 {
            return None;
        }
        let target = ((q.clamp(0.0, 1.0) * total as f64).ceil() as u64).max(1);
        let mut sum = 0u64;
        for (index, weight) in self.weights.iter().enumerate() {
            sum = sum.saturating_add(*weight);
            if sum >= target {
                return Some(low(index));
            }
        }
        self.weights.len().checked_sub(1).map(low)
    }

    /// The weighted mean, taking each bucket at its low bound.
    pub fn mean(&self) -> Option<f64> {
        let total = self.total();
        (total > 0).then(|| {
            let sum: f64 = self
                .weights
                .iter()
                .enumerate()
                .map(|(index, w)| low(index) as f64 * *w as f64)
                .sum();
            sum / total as f64
        })
    }

    /// What was recorded after `earlier`, a snapshot of the same histogram.
    pub fn since(&self, earlier: &LogHistogram) -> LogHistogram {
        let weights = self
            .weights
            .iter()
            .enumerate()
            .map(|(index, w)| w.saturating_sub(earlier.weights.get(index).copied().unwrap_or(0)))
            .collect();
        LogHistogram { weights }
    }
}

impl From<Vec<(u64, u64)>> for LogHistogram {
    fn from(buckets: Vec<(u64, u64)>) -> LogHistogram {
        let mut histogram = LogHistogram::default();
        for (value, weight) in buckets {
            histogram.record(value, weight);
        }
        histogram
    }
}

impl From<LogHistogram> for Vec<(u64, u64)> {
    fn from(histogram: LogHistogram) -> Vec<(u64, u64)> {
        histogram
            .weights
            .iter()
            .enumerate()
            .filter(|(_, w)| **w > 0)
            .map(|(index, w)| (low(index), *w))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_within_a_sixteenth() {
        for value in (0..100_000u64).chain([u64::MAX / 3, u64::MAX]) {
            let index = bucket(value);
            let bottom = low(index);
            assert!(bottom <= value, "{value}: {bottom}");
            assert!(index + 1 > 975 || low(index + 1) > value, "{value}");
            assert!((value - bottom) * 16 <= value.max(16), "{value}: {bottom}");
        }
        assert_eq!(bucket(u64::MAX), 975);
    }

    #[test]
    fn quantiles_of_time_weighted_levels() {
        let mut h = LogHistogram::default();
        assert_eq!(h.quantile(0.5), None);
        // 90 s empty, 10 s at 100 kB.
        h.record(0, 90);
        h.record(100_000, 10);
        assert_eq!(h.quantile(0.5), Some(0));
        assert_eq!(h.quantile(0.9), Some(0));
        let p95 = h.quantile(0.95).unwrap_or(0);
        assert!((94_000..=100_000).contains(&p95), "{p95}");
        assert!((h.mean().unwrap_or(0.0) - 10_000.0).abs() < 700.0);
    }

    #[test]
    fn an_interval_is_the_difference_of_snapshots_and_survives_json() {
        let mut h = LogHistogram::default();
        h.record(5, 3);
        let before = h.clone();
        h.record(5_000, 7);
        let interval = h.since(&before);
        assert_eq!(interval.total(), 7);
        assert_eq!(interval.quantile(0.0), Some(4864));
        let json = serde_json::to_string(&h).unwrap_or_default();
        assert_eq!(serde_json::from_str::<LogHistogram>(&json).ok(), Some(h));
    }
}
