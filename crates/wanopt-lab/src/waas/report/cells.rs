//! Table cells of the `waas-3g` report: seconds, bytes, speed-ups, and
//! the rows they come from.

use super::super::results::{Results, Row};
use super::super::transfer::Test;

/// Seconds for a table cell.
pub(super) fn secs(v: f64) -> String {
    if v < 0.1 {
        format!("{v:.3}")
    } else if v < 10.0 {
        format!("{v:.2}")
    } else {
        format!("{v:.1}")
    }
}

/// Seconds for a table cell, `n/a` when missing.
pub(super) fn opt_secs(v: Option<f64>) -> String {
    v.map(secs).unwrap_or_else(|| "n/a".into())
}

/// Bytes in decimal units.
pub fn bytes(v: u64) -> String {
    let f = v as f64;
    if f >= 1e6 {
        format!("{:.2} MB", f / 1e6)
    } else if f >= 1e3 {
        format!("{:.1} KB", f / 1e3)
    } else {
        format!("{v} B")
    }
}

/// `a / b` as a speed-up, `n/a` when either is missing or zero.
pub(super) fn ratio(a: Option<f64>, b: Option<f64>) -> String {
    match (a, b) {
        (Some(a), Some(b)) if a > 0.0 && b > 0.0 => {
            let r = a / b;
            if r >= 100.0 {
                format!("{r:.0}x")
            } else {
                format!("{r:.1}x")
            }
        }
        _ => "n/a".into(),
    }
}

/// The row of `test`, `file` and `mode`.
pub(super) fn row<'a>(results: &'a Results, test: Test, file: &str, mode: &str) -> Option<&'a Row> {
    results.find(test, file, mode)
}

/// A row's time as the goal or table at hand reads it.
pub(super) type Time = fn(&Row) -> Option<f64>;

/// The client's time to the last byte or the server's `OK`.
pub(super) fn confirmed(r: &Row) -> Option<f64> {
    Some(r.seconds)
}

/// An upload's time until the client's TCP peer acknowledged its last
/// byte (the reference's FTP client's figure); other tests as [`confirmed`].
pub(super) fn sent(r: &Row) -> Option<f64> {
    if r.test == Test::Upload.name() {
        r.sent_seconds
    } else {
        Some(r.seconds)
    }
}
