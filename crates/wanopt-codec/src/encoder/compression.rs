//! Compression choice: the setting ([`Compression`]) and what it implies
//! (runs, stream engines, levels, memory), and the share of text that
//! sends a stream through PPMd.

pub use crate::compress::LZMA_ENCODER_BYTES;

/// How literals are compressed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Compression {
    /// Literals are sent as they are.
    Off,
    /// LZ4 block: a few hundred MB/s per core, for fast links.
    Lz4,
    /// zstd at `level` (1-19): slower, smaller; for links the CPU outruns.
    Zstd {
        /// zstd compression level.
        level: i32,
    },
    /// LZMA2 at `preset` (0-9) in stream runs: 7-20% smaller than zstd at
    /// level 18 on office documents, at 2-4 MB/s per core; for links of a
    /// few Mbit/s and less. Literals that go alone (deltas, repairs, no
    /// stream runs) use zstd at [`LZMA_ALONE_ZSTD_LEVEL`].
    Lzma {
        /// LZMA2 preset (the dictionary is the stream format's, 1 MiB).
        preset: u32,
    },
    /// The smallest: stream runs that are mostly text ([`text_share`] at
    /// least [`PPMD_TEXT_SHARE`], and a PPMd stream keeps PPMd down to
    /// [`PPMD_KEEP_SHARE`]; 8-bit or UTF-16) go through PPMd, the others
    /// through LZMA2 at `preset`. On the Table 1 office files PPMd
    /// makes text runs 15-25% smaller than LZMA2 and binary records
    /// 1-15% larger, hence the choice per run. Encodes at least as fast
    /// as LZMA2 alone, decodes PPMd runs at about 20 MB/s per core (PPMd
    /// is symmetric); for links of a few Mbit/s and less.
    Max {
        /// LZMA2 preset of the runs that are not text.
        preset: u32,
    },
}

/// [`text_share`] at or above which a [`Compression::Max`] stream goes
/// to PPMd (from LZMA2, or at its start). Measured per 128 KiB block of
/// the Table 1 files (BENCHMARKS.md): PPMd smaller on every block from
/// 0.5 up (by 10% between 0.5 and 0.6, 16-24% above), LZMA2 smaller on
/// all but two below. Starting at 0.6 leaves the spreadsheets' first run
/// (workbook globals and shared strings, 0.52) to LZMA2, whose window the
/// cell records after it match into: a change of engine starts the
/// stream anew.
pub const PPMD_TEXT_SHARE: f64 = 0.6;

/// [`text_share`] at or above which a PPMd stream stays PPMd (below it,
/// it goes to LZMA2, anew): PPMd costs 1-4% more than LZMA2 between 0.4
/// and 0.5, less than losing the model would.
pub const PPMD_KEEP_SHARE: f64 = 0.4;

/// Share of `data` that is text: printable ASCII, tab, CR and LF, and a
/// zero byte right after one of those (UTF-16LE text, as Word, Excel and
/// PowerPoint store it). 0 for no data.
pub fn text_share(data: &[u8]) -> f64 {
    let mut text = 0usize;
    let mut after_text = false;
    for &b in data {
        let is_text = matches!(b, 0x20..=0x7e | b'\t' | b'\n' | b'\r');
        if is_text || (b == 0 && after_text) {
            text += 1;
        }
        after_text = is_text;
    }
    text as f64 / data.len().max(1) as f64
}

/// The zstd level of [`Compression::Lzma`]'s literals outside stream runs.
pub const LZMA_ALONE_ZSTD_LEVEL: i32 = 18;

impl Compression {
    /// zstd at its default level (3).
    pub const ZSTD: Compression = Compression::Zstd { level: 3 };

    /// Whether this setting compresses slower than about 100 MB/s per core
    /// (zstd above level 5): tens of milliseconds per 128 KiB pushed.
    pub fn is_slow(self) -> bool {
        match self {
            Compression::Zstd { level } => level > 5,
            Compression::Lzma { .. } | Compression::Max { .. } => true,
            Compression::Off | Compression::Lz4 => false,
        }
    }

    /// The zstd level used for literals that go alone (`None` without
    /// zstd or LZMA2).
    pub fn zstd_level(self) -> Option<i32> {
        match self {
            Compression::Zstd { level } => Some(level),
            Compression::Lzma { .. } | Compression::Max { .. } => Some(LZMA_ALONE_ZSTD_LEVEL),
            Compression::Off | Compression::Lz4 => None,
        }
    }

    /// Memory a flow's stream compressor of this setting holds while it
    /// sends, rounded up (what a node budgets for it; 0 for LZ4 and off,
    /// which keep no stream). zstd with the stream's 1 MiB window: 3 MiB up
    /// to level 3, 5 MiB to 6, 7 MiB to 12, 11 MiB above; LZMA2:
    /// [`LZMA_ENCODER_BYTES`], also for [`Compression::Max`] (its PPMd model
    /// is smaller, and a stream holds one engine at a time). A test holds
    /// these above what
    /// [`Encoder::compressor_bytes`](crate::Encoder::compressor_bytes) reports for every level.
    pub fn stream_compressor_bytes(self) -> usize {
        match self {
            Compression::Off | Compression::Lz4 => 0,
            Compression::Zstd { level } if level <= 3 => 3 << 20,
            Compression::Zstd { level } if level <= 6 => 5 << 20,
            Compression::Zstd { level } if level <= 12 => 7 << 20,
            Compression::Zstd { .. } => 11 << 20,
            Compression::Lzma { .. } | Compression::Max { .. } => LZMA_ENCODER_BYTES,
        }
    }

    /// Whether literals are gathered into runs (zstd or LZMA2: slow links,
    /// where each byte counts).
    pub(super) fn gathers(self) -> bool {
        self.zstd_level().is_some()
    }
}
