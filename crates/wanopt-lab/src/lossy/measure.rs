//! The figures of a row, computed from what a workload reports: goodput,
//! the time to reach 90% of the final rate and wire overhead.

/// The window the ramp is measured over, seconds: long enough that a
/// burst of delayed segments arriving together does not count as the rate.
pub const RAMP_WINDOW_S: f64 = 0.5;

/// Bits of `bytes` over `seconds`, Mbit/s (10^6).
pub fn mbps(bytes: u64, seconds: f64) -> f64 {
    if seconds <= 0.0 {
        return 0.0;
    }
    bytes as f64 * 8.0 / seconds / 1e6
}

/// The final rate of a run sampled as `(seconds since the start,
/// bytes received so far)`: the rate over its second half, bytes/s.
pub fn final_rate(samples: &[(f64, u64)]) -> Option<f64> {
    let &(end, total) = samples.last()?;
    let half = end / 2.0;
    let &(t0, b0) = samples
        .iter()
        .rev()
        .find(|(t, _)| *t <= half)
        .unwrap_or(&(0.0, 0));
    (end > t0).then(|| total.saturating_sub(b0) as f64 / (end - t0))
}

/// When the run first delivered `fraction` of its final rate over a
/// window of `window` seconds: the end of the first such window, seconds
/// since the start (which counts as a sample of no bytes). `None` if it
/// never did (or nothing arrived).
pub fn time_to_fraction(samples: &[(f64, u64)], window: f64, fraction: f64) -> Option<f64> {
    let target = fraction * final_rate(samples)?;
    if target <= 0.0 {
        return None;
    }
    let mut points = vec![(0.0, 0u64)];
    points.extend_from_slice(samples);
    for (j, &(t, bytes)) in points.iter().enumerate().skip(1) {
        // Only whole windows: a first sample alone is no rate.
        if t < window - 1e-9 {
            continue;
        }
        // The latest point at least a window earlier.
        let &(t0, b0) = points[..j]
            .iter()
            .rev()
            .find(|(s, _)| *s <= t - window)
            .unwrap_or(&points[0]);
        if t > t0 && bytes.saturating_sub(b0) as f64 / (t - t0) >= target {
            return Some(t);
        }
    }
    None
}

/// Wire bytes over payload delivered, minus 1, percent; `None` without
/// payload.
pub fn overhead_pct(wire_bytes: u64, payload: u64) -> Option<f64> {
    (payload > 0).then(|| (wire_bytes as f64 / payload as f64 - 1.0) * 100.0)
}

/// The floor of a transfer of `bytes`: serialization at the link rate
/// plus one round trip, seconds.
pub fn floor_s(bytes: u64, link_mbps: u64, rtt_ms: u64) -> f64 {
    bytes as f64 * 8.0 / (link_mbps as f64 * 1e6) + rtt_ms as f64 / 1e3
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A run sampled every 100 ms: `rate(t)` bytes/s.
    fn run(seconds: f64, rate: impl Fn(f64) -> f64) -> Vec<(f64, u64)> {
        let mut out = Vec::new();
        let mut total = 0.0;
        let mut t = 0.0;
        while t < seconds - 1e-9 {
            total += rate(t) * 0.1;
            t += 0.1;
            out.push((t, total as u64));
        }
        out
    }

    #[test]
    fn a_run_at_rate_from_the_start_reaches_90_percent_in_one_window() {
        let samples = run(10.0, |_| 10e6);
        assert!((final_rate(&samples).unwrap_or(0.0) - 10e6).abs() < 1e3);
        let t = time_to_fraction(&samples, RAMP_WINDOW_S, 0.9).unwrap_or(0.0);
        // The first window that is whole: 0.5 s, give or take a sample.
        assert!((t - 0.5).abs() < 0.11, "{t}");
    }

    #[test]
    fn a_linear_ramp_reaches_90_percent_where_the_window_averages_it() {
        // 0 to 10 MB/s over 4 s, then flat: the 0.5 s window ending at t
        // averages the rate of its 100 ms steps, that at t - 0.3, which is
        // 9 MB/s at t = 3.9.
        let samples = run(12.0, |t| (t / 4.0).min(1.0) * 10e6);
        let t = time_to_fraction(&samples, RAMP_WINDOW_S, 0.9).unwrap_or(0.0);
        assert!((t - 3.9).abs() < 0.15, "{t}");
        // A run that never delivers is not "at 90%" at any time.
        assert_eq!(time_to_fraction(&run(5.0, |_| 0.0), 0.5, 0.9), None);
        assert_eq!(time_to_fraction(&[], 0.5, 0.9), None);
    }

    #[test]
    fn a_short_burst_early_does_not_count_as_the_rate() {
        // 100 ms at 3x the final rate, then nothing until 2 s, then the
        // final rate: the burst alone averages 0.6x over the window.
        let samples = run(10.0, |t| {
            if t < 0.1 {
                30e6
            } else if t < 2.0 {
                0.0
            } else {
                10e6
            }
        });
        let t = time_to_fraction(&samples, RAMP_WINDOW_S, 0.9).unwrap_or(0.0);
        assert!(t > 2.0 && t < 2.7, "{t}");
    }

    #[test]
    fn overhead_and_floor() {
        assert!((overhead_pct(1_050, 1_000).unwrap_or(0.0) - 5.0).abs() < 1e-9);
        assert_eq!(overhead_pct(1_050, 0), None);
        assert!((floor_s(10_000_000, 100, 150) - 0.95).abs() < 1e-12);
        assert!((mbps(12_500_000, 1.0) - 100.0).abs() < 1e-12);
    }
}
