//! Figures of a set of samples, and the rounding `results.json` keeps:
//! every scenario's medians, percentiles and averages are these.

/// `value` rounded to one decimal.
pub fn round1(value: f64) -> f64 {
    (value * 10.0).round() / 10.0
}

/// `value` rounded to two decimals.
pub fn round2(value: f64) -> f64 {
    (value * 100.0).round() / 100.0
}

/// `value` rounded to three decimals (a millisecond of seconds, a
/// microsecond of milliseconds).
pub fn round3(value: f64) -> f64 {
    (value * 1000.0).round() / 1000.0
}

/// `value` rounded to four decimals (0.1 ms of seconds).
pub fn round4(value: f64) -> f64 {
    (value * 10_000.0).round() / 10_000.0
}

/// The average of runs in the way of the `tcp-opt` reference: with 3 or
/// more runs, drop the highest and the lowest and average the rest;
/// otherwise the plain mean (0 without runs).
pub fn trimmed_mean(samples: &[f64]) -> f64 {
    let v = sorted(samples);
    let kept = if v.len() >= 3 {
        &v[1..v.len() - 1]
    } else {
        &v[..]
    };
    if kept.is_empty() {
        return 0.0;
    }
    kept.iter().sum::<f64>() / kept.len() as f64
}

/// The median of `values` (the mean of the middle two for an even
/// count), `None` when empty.
pub fn median(values: &[f64]) -> Option<f64> {
    let v = sorted(values);
    let middle = v.len() / 2;
    match v.len() {
        0 => None,
        n if n % 2 == 1 => Some(v[middle]),
        _ => Some((v[middle - 1] + v[middle]) / 2.0),
    }
}

/// The `q` quantile (0 to 1) of `values` by nearest rank, `None` when
/// empty.
pub fn percentile(values: &[f64], q: f64) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    let v = sorted(values);
    let rank = (q * v.len() as f64).ceil() as usize;
    Some(v[rank.clamp(1, v.len()) - 1])
}

/// The distinct values of `values`, in the order they first appear (the
/// order a scenario measured its cells in).
pub fn first_seen<T: PartialEq>(values: impl IntoIterator<Item = T>) -> Vec<T> {
    let mut out: Vec<T> = Vec::new();
    for value in values {
        if !out.contains(&value) {
            out.push(value);
        }
    }
    out
}

fn sorted(values: &[f64]) -> Vec<f64> {
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trimmed_mean_drops_extremes() {
        assert_eq!(trimmed_mean(&[1.0, 100.0, 10.0, 20.0, 30.0]), 20.0);
        assert_eq!(trimmed_mean(&[4.0, 6.0]), 5.0);
        assert_eq!(trimmed_mean(&[]), 0.0);
    }

    #[test]
    fn medians() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), Some(2.5));
        assert_eq!(median(&[3.0, 1.0, 2.0, 10.0]), Some(2.5));
        assert_eq!(median(&[]), None);
    }

    #[test]
    fn percentiles_are_nearest_rank() {
        let v: Vec<f64> = (1..=200).map(f64::from).collect();
        assert_eq!(percentile(&v, 0.5), Some(100.0));
        assert_eq!(percentile(&v, 0.99), Some(198.0));
        assert_eq!(percentile(&[7.0], 0.99), Some(7.0));
        assert_eq!(percentile(&[], 0.5), None);
        let hundred: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(percentile(&hundred, 0.95), Some(95.0));
    }

    #[test]
    fn rounding_keeps_the_decimals_asked_for() {
        assert_eq!(round1(12.345), 12.3);
        assert_eq!(round2(12.345_6), 12.35);
        assert_eq!(round3(0.123_45), 0.123);
        assert_eq!(round4(0.000_149), 0.0001);
    }

    #[test]
    fn first_seen_keeps_the_order_of_measurement() {
        assert_eq!(first_seen([3, 1, 3, 2, 1]), vec![3, 1, 2]);
    }
}
