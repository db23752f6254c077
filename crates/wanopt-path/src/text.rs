//! Figures for people: rates, sizes, percentages and times as the path
//! tools print them (and as their flags are written).

use std::time::Duration;

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
pub fn percent_text(percent: f64) -> String {
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

/// Milliseconds for people: whole when they are (`150 ms`), else to a
/// tenth (`0.5 ms`).
pub fn ms_text(d: Duration) -> String {
    let v = d.as_secs_f64() * 1000.0;
    if v.fract() == 0.0 {
        format!("{v:.0} ms")
    } else {
        format!("{v:.1} ms")
    }
}

/// A number from a file for an error message: plain when it is of a
/// sensible size, else in scientific notation.
pub fn number_text(v: f64) -> String {
    if v.is_finite() && v.abs() < 1e9 {
        format!("{v}")
    } else {
        format!("{v:e}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_read_like_their_flags() {
        assert_eq!(rate_text(250e6), "250 Mbit/s");
        assert_eq!(rate_text(3_495_200.0), "3.5 Mbit/s");
        assert_eq!(rate_text(167_772_160.0), "167.77 Mbit/s");
        assert_eq!(rate_text(384e3), "384 kbit/s");
        assert_eq!(rate_text(1e10), "10 Gbit/s");
        assert_eq!(rate_text(500.0), "500 bit/s");
    }

    #[test]
    fn percentages_read_like_their_flags() {
        assert_eq!(percent_text(0.5), "0.5");
        assert_eq!(percent_text(1.0), "1");
        assert_eq!(percent_text(100.0 / 3.0 / 100.0), "0.333");
    }
}
