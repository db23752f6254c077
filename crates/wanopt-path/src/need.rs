//! What a path needs from TCP: the bandwidth-delay product, the window
//! scale, the buffers, slow start, and the Mathis bound under loss; and
//! `wanopt window`'s text of it.

use std::fmt::Write as _;
use std::time::Duration;

use crate::text::{ms_text, percent_text, rate_text, size_text};

/// TCP's largest window without scaling.
pub const UNSCALED: u64 = 65_535;
/// The largest window-scale shift (RFC 7323, section 2.3).
pub const MAX_SHIFT: u32 = 14;
/// Linux's initial congestion window, segments (RFC 6928).
pub const INITIAL_WINDOW: f64 = 10.0;
/// The segment size assumed when none is given: 1448 payload bytes, a
/// 1500-byte MTU with TCP timestamps.
pub const DEFAULT_MSS: u32 = 1448;

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

/// The need as `wanopt window` prints it.
pub fn window_text(n: &Need) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "path: {}, RTT {}, MSS {} bytes",
        rate_text(n.rate_bps as f64),
        ms_text(n.rtt),
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

#[cfg(test)]
mod tests {
    use super::*;

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
}
