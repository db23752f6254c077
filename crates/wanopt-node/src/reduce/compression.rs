//! Compression choice: how flows with `reduce` compress their literals
//! (the `--compression` modes), what `auto` picks by the tunnel's rate, and
//! each flow's `CodecChoice`, which follows that rate within the node's
//! compressor budget.

use std::sync::Arc;
use std::time::Duration;

use wanopt_codec::{Compression, Encoder};

use super::budget::{CompressorBudget, Reservation};
use crate::transport::model;

/// Below this estimated tunnel rate, `auto` compresses literals with zstd
/// or LZMA2 (about a third fewer bytes than LZ4 on office documents, at a
/// quarter of its speed and less: a core still compresses several hundred
/// Mbit/s, so the WAN, not the CPU, stays the bottleneck); above it, LZ4.
pub const ZSTD_BELOW_BPS: f64 = 100e6;

/// What `auto` uses by tunnel rate: (below this rate, compression). A
/// slower link leaves more CPU time per byte to spend. The whole encoder
/// (chunking, fingerprints, store, runs continuing one stream per flow),
/// cold, on the Table 1 Word and Excel files in 64 KiB reads (`cargo run
/// -p wanopt-codec --release --example stream_runs`), one core of the lab
/// VM: zstd level 3 at 80-190 MB/s, 9 at 20-45, 16 at 2.4-5.5 and 18 at
/// 2-4 MB/s; LZMA2 preset 5 at 3.5-4 and 6 at 3-3.5 MB/s, 7-20% smaller
/// than zstd 18 (most on spreadsheets: LZMA2 models a byte's position in
/// fixed-size records). Each step keeps the encoder at least twice as fast
/// as the link can carry data compressed 4 to 1 (1.5 MB/s of input at 3
/// Mbit/s, 0.5 MB/s at 1 Mbit/s).
///
/// Below 3 Mbit/s the runs that are mostly text go through PPMd instead
/// of LZMA2 ([`Compression::Max`]): 6-15% fewer bytes on the Word files,
/// within 1% on spreadsheets, and faster to encode (BENCHMARKS.md).
pub const AUTO_STEPS: [(f64, Compression); 4] = [
    (1e6, Compression::Max { preset: 6 }),
    (3e6, Compression::Max { preset: 5 }),
    (10e6, Compression::Zstd { level: 9 }),
    (ZSTD_BELOW_BPS, Compression::Zstd { level: 3 }),
];

/// How far (a fraction) the rate must leave the band of `auto`'s current
/// choice before the choice changes: a change of zstd level restarts the
/// flow's stream (its 1 MiB of history, and a new compressor of up to
/// 13 MiB), so a rate wavering around a threshold must not flip it.
pub const RATE_MARGIN: f64 = 0.2;

/// How flows with `reduce` compress their literals.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CompressionMode {
    /// zstd or LZMA2 while the tunnel's estimated rate
    /// ([`model::estimated_rate_bps`]) is below [`ZSTD_BELOW_BPS`], slower and
    /// smaller the slower the link ([`AUTO_STEPS`]); LZ4 above; re-checked
    /// as the flow runs.
    #[default]
    Auto,
    /// Always LZ4.
    Lz4,
    /// Always zstd (level 3).
    Zstd,
    /// Always LZMA2 (preset 6: 3-3.5 MB/s per core; for links of a few
    /// Mbit/s at most).
    Lzma,
    /// Always PPMd for runs of text and LZMA2 (preset 6) for the others:
    /// the fewest bytes, for links of a few Mbit/s at most.
    Max,
    /// No compression (deduplication only).
    Off,
}

impl std::str::FromStr for CompressionMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "auto" => Ok(CompressionMode::Auto),
            "lz4" => Ok(CompressionMode::Lz4),
            "zstd" => Ok(CompressionMode::Zstd),
            "lzma" => Ok(CompressionMode::Lzma),
            "max" => Ok(CompressionMode::Max),
            "off" => Ok(CompressionMode::Off),
            other => Err(format!(
                "unknown compression {other:?} (expected auto, lz4, zstd, lzma, max or off)"
            )),
        }
    }
}

impl std::fmt::Display for CompressionMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            CompressionMode::Auto => "auto",
            CompressionMode::Lz4 => "lz4",
            CompressionMode::Zstd => "zstd",
            CompressionMode::Lzma => "lzma",
            CompressionMode::Max => "max",
            CompressionMode::Off => "off",
        })
    }
}

impl CompressionMode {
    /// The codec setting for a tunnel whose estimated rate is `rate_bps`
    /// (bits per second; `None` when unknown).
    pub fn pick(self, rate_bps: Option<f64>) -> Compression {
        match self {
            CompressionMode::Lz4 => Compression::Lz4,
            CompressionMode::Zstd => Compression::ZSTD,
            CompressionMode::Lzma => Compression::Lzma { preset: 6 },
            CompressionMode::Max => Compression::Max { preset: 6 },
            CompressionMode::Off => Compression::Off,
            CompressionMode::Auto => rate_bps
                .and_then(|rate| AUTO_STEPS.iter().find(|(below, _)| rate < *below))
                .map_or(Compression::Lz4, |&(_, compression)| compression),
        }
    }

    /// Like [`CompressionMode::pick`], for a flow that uses `current`:
    /// `auto` keeps it while the rate stays within [`RATE_MARGIN`] of the
    /// band it picks `current` for.
    pub fn repick(self, rate_bps: Option<f64>, current: Compression) -> Compression {
        let next = self.pick(rate_bps);
        if self != CompressionMode::Auto || next == current {
            return next;
        }
        match (rate_bps, auto_band(current)) {
            (Some(rate), Some((low, high)))
                if rate >= low * (1.0 - RATE_MARGIN) && rate < high * (1.0 + RATE_MARGIN) =>
            {
                current
            }
            _ => next,
        }
    }
}

/// The rates (bits per second, from and below) for which `auto` picks
/// `compression`; `None` for a choice it never makes.
fn auto_band(compression: Compression) -> Option<(f64, f64)> {
    if compression == Compression::Lz4 {
        return Some((ZSTD_BELOW_BPS, f64::INFINITY));
    }
    let i = AUTO_STEPS.iter().position(|&(_, c)| c == compression)?;
    let low = i.checked_sub(1).map_or(0.0, |j| AUTO_STEPS[j].0);
    Some((low, AUTO_STEPS[i].0))
}

/// How often `auto` compression re-reads the tunnel's rate.
const RATE_CHECK: Duration = Duration::from_millis(250);

/// Picks the codec for the tunnel's current rate, at most every
/// [`RATE_CHECK`], within the node's compressor budget.
pub(crate) struct CodecChoice {
    mode: CompressionMode,
    /// The tunnel whose rate `auto` follows.
    pub(crate) connection: Option<quinn::Connection>,
    checked: Option<tokio::time::Instant>,
    /// The last choice made from a rate (what the flow wants).
    current: Option<Compression>,
    /// The tunnel's rate when last read, bits per second.
    pub(crate) tunnel_bps: Option<f64>,
    /// The memory this flow holds of the budget for its compressor.
    pub(crate) reservation: Reservation,
}

impl CodecChoice {
    pub(crate) fn new(
        mode: CompressionMode,
        connection: Option<quinn::Connection>,
        budget: Arc<CompressorBudget>,
    ) -> CodecChoice {
        CodecChoice {
            mode,
            connection,
            checked: None,
            current: None,
            tunnel_bps: None,
            reservation: Reservation::new(budget),
        }
    }

    pub(crate) fn update(&mut self, encoder: &mut Encoder) {
        let now = tokio::time::Instant::now();
        let due = self
            .checked
            .is_none_or(|t| now.duration_since(t) >= RATE_CHECK);
        if due {
            self.checked = Some(now);
            self.tunnel_bps = self.connection.as_ref().and_then(model::estimated_rate_bps);
            let rate = match self.mode {
                CompressionMode::Auto => self.tunnel_bps,
                _ => None,
            };
            let next = match self.current {
                Some(current) => self.mode.repick(rate, current),
                None => self.mode.pick(rate),
            };
            self.current = Some(next);
        }
        // Reserve whenever the rate was read (a flow that stepped down
        // steps back up once there is room) and whenever the flow holds
        // no compressor (it may be about to start one).
        if due || encoder.compressor_bytes() == 0 {
            if let Some(wanted) = self.current {
                encoder.set_compression(self.reservation.choose(wanted));
            }
        }
    }

    /// The flow freed its compressor: its memory goes back to the budget.
    pub(crate) fn release(&mut self) {
        self.reservation.release();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compression_modes_parse_and_auto_picks_by_rate() {
        for mode in ["auto", "lz4", "zstd", "lzma", "max", "off"] {
            assert_eq!(mode.parse::<CompressionMode>().unwrap().to_string(), mode);
        }
        assert!("gzip".parse::<CompressionMode>().is_err());
        let auto = CompressionMode::Auto;
        assert_eq!(auto.pick(Some(384e3)), Compression::Max { preset: 6 });
        assert_eq!(auto.pick(Some(2e6)), Compression::Max { preset: 5 });
        assert_eq!(auto.pick(Some(5e6)), Compression::Zstd { level: 9 });
        assert_eq!(auto.pick(Some(50e6)), Compression::ZSTD);
        // The slow levels are encoded off the runtime's workers.
        assert!(auto.pick(Some(2e6)).is_slow() && auto.pick(Some(5e6)).is_slow());
        assert!(!Compression::ZSTD.is_slow() && !Compression::Lz4.is_slow());
        assert_eq!(auto.pick(Some(1e9)), Compression::Lz4);
        assert_eq!(auto.pick(None), Compression::Lz4);
        assert_eq!(CompressionMode::Off.pick(Some(2e6)), Compression::Off);
        assert_eq!(CompressionMode::Lz4.pick(Some(2e6)), Compression::Lz4);
        assert_eq!(CompressionMode::Zstd.pick(Some(1e9)), Compression::ZSTD);
        assert_eq!(
            CompressionMode::Lzma.pick(Some(1e9)),
            Compression::Lzma { preset: 6 }
        );
        assert_eq!(
            CompressionMode::Max.pick(Some(1e9)),
            Compression::Max { preset: 6 }
        );
    }

    #[test]
    fn auto_keeps_its_choice_while_the_rate_wavers_near_a_threshold() {
        let auto = CompressionMode::Auto;
        let z = |level| Compression::Zstd { level };
        let x = |preset| Compression::Max { preset };
        // Around 1 Mbit/s (preset 6 below, 5 above): no flip within 20%.
        assert_eq!(auto.repick(Some(1.1e6), x(6)), x(6));
        assert_eq!(auto.repick(Some(0.9e6), x(5)), x(5));
        // Beyond the margin it changes, both ways.
        assert_eq!(auto.repick(Some(1.3e6), x(6)), x(5));
        assert_eq!(auto.repick(Some(0.7e6), x(5)), x(6));
        // Around 3 Mbit/s, LZMA2 and zstd 9 likewise.
        assert_eq!(auto.repick(Some(3.3e6), x(5)), x(5));
        assert_eq!(auto.repick(Some(2.7e6), z(9)), z(9));
        assert_eq!(auto.repick(Some(4e6), x(5)), z(9));
        // Far from the band it jumps straight to the rate's choice.
        assert_eq!(auto.repick(Some(50e6), x(6)), Compression::ZSTD);
        assert_eq!(auto.repick(Some(2e6), Compression::Lz4), x(5));
        // Around 100 Mbit/s, LZ4 and zstd 3 hold each other off.
        assert_eq!(auto.repick(Some(90e6), Compression::Lz4), Compression::Lz4);
        assert_eq!(
            auto.repick(Some(110e6), Compression::ZSTD),
            Compression::ZSTD
        );
        assert_eq!(
            auto.repick(Some(130e6), Compression::ZSTD),
            Compression::Lz4
        );
        // A level auto never picks, or no rate, gives the plain choice.
        assert_eq!(auto.repick(Some(2e6), z(5)), x(5));
        assert_eq!(auto.repick(Some(2e6), z(16)), x(5));
        assert_eq!(auto.repick(None, x(5)), Compression::Lz4);
        assert_eq!(auto.repick(Some(2e6), Compression::Off), x(5));
        // Fixed modes ignore the current choice.
        assert_eq!(
            CompressionMode::Lz4.repick(Some(2e6), x(5)),
            Compression::Lz4
        );
    }
}
