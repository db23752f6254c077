//! Content-defined chunking: an incremental driver over FastCDC 2020.
//!
//! The cut points are exactly those of `fastcdc::v2020::cut` (gear hash
//! with normalized chunking and cut-point skipping below `min`, Xia et al.,
//! "The Design of Fast Content-Defined Chunking for Data Deduplication
//! Based Storage Systems", IEEE TPDS 2020, sections 3.2-3.4; a test checks
//! ours against the crate). The scan is our own: the crate's "rolling two
//! bytes" loop is bound by its hash dependency chain (shift, add, add per
//! two bytes); `scan` advances the chain four bytes with one shift and
//! one add, and computes the three hashes in between off the chain, so the
//! loop is bound by throughput instead (about 1.7x faster here).
//! The driver only asks for a cut point once it holds at least `max` bytes
//! (or at the end of the stream): a cut found in a window of `max` bytes
//! depends only on the bytes before it, so the boundaries are identical to
//! chunking the whole stream at once, however the stream is split into
//! pieces, and no byte is scanned twice.

use std::sync::LazyLock;

use fastcdc::v2020::{get_gear_with_seed, select_masks, Normalization};
use thiserror::Error;

/// Largest chunk the wire format carries (1 MiB).
pub const MAX_CHUNK_LEN: usize = 1 << 20;

/// Chunk size parameters.
///
/// The default, min 2 KiB / avg 8 KiB / max 64 KiB, is the measured sweet
/// spot on the edit workload (see `BENCHMARKS.md`, "Codec").
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ChunkerConfig {
    /// Smallest chunk, except the last one of a stream or of a flush.
    pub min: usize,
    /// Target average chunk size (a power of two works best).
    pub avg: usize,
    /// Largest chunk; must be even.
    pub max: usize,
}

impl Default for ChunkerConfig {
    fn default() -> Self {
        ChunkerConfig {
            min: 2 * 1024,
            avg: 8 * 1024,
            max: 64 * 1024,
        }
    }
}

/// Invalid [`ChunkerConfig`].
#[derive(Debug, Error, PartialEq, Eq)]
pub enum ChunkerConfigError {
    /// The sizes are not ordered `64 <= min <= avg <= max`.
    #[error("chunk sizes must satisfy 64 <= min <= avg <= max")]
    Unordered,
    /// `avg` is outside FastCDC's supported range.
    #[error("average chunk size must be between 256 bytes and 4 MiB")]
    AverageOutOfRange,
    /// `max` is odd or larger than [`MAX_CHUNK_LEN`].
    #[error("maximum chunk size must be even and at most 1 MiB")]
    MaximumOutOfRange,
}

impl ChunkerConfig {
    /// Check the sizes.
    pub fn validate(&self) -> Result<(), ChunkerConfigError> {
        if !(64 <= self.min && self.min <= self.avg && self.avg <= self.max) {
            return Err(ChunkerConfigError::Unordered);
        }
        if !(256..=4 << 20).contains(&self.avg) {
            return Err(ChunkerConfigError::AverageOutOfRange);
        }
        if !self.max.is_multiple_of(2) || self.max > MAX_CHUNK_LEN || self.max < 1024 {
            return Err(ChunkerConfigError::MaximumOutOfRange);
        }
        Ok(())
    }
}

/// FastCDC 2020's gear table (the crate's, unseeded).
static GEAR: LazyLock<[u64; 256]> = LazyLock::new(|| {
    let (gear, _) = get_gear_with_seed(0);
    let mut table = [0u64; 256];
    table.copy_from_slice(&gear);
    table
});

/// Stateless cut-point finder for one configuration.
#[derive(Clone, Debug)]
pub struct Chunker {
    config: ChunkerConfig,
    mask_s: u64,
    mask_l: u64,
    gear: &'static [u64; 256],
}

impl Chunker {
    /// A chunker for `config`.
    pub fn new(config: ChunkerConfig) -> Result<Self, ChunkerConfigError> {
        config.validate()?;
        let (mask_s, mask_l) = select_masks(config.avg, Normalization::Level1);
        Ok(Chunker {
            config,
            mask_s,
            mask_l,
            gear: &GEAR,
        })
    }

    /// The configuration.
    pub fn config(&self) -> ChunkerConfig {
        self.config
    }

    /// Length of the next chunk at the start of `data`, or `None` when more
    /// input is needed to decide. With `end_of_stream`, `data` is all that is
    /// left and a chunk is always returned (if `data` is not empty).
    pub fn next_chunk_len(&self, data: &[u8], end_of_stream: bool) -> Option<usize> {
        if data.is_empty() {
            return None;
        }
        if data.len() < self.config.max && !end_of_stream {
            return None;
        }
        let window = &data[..data.len().min(self.config.max)];
        // `cut` returns at least `min` (>= 64) for a non-empty window; guard
        // anyway so a caller loop always makes progress.
        Some(self.cut(window).clamp(1, window.len()))
    }

    /// Length of the next chunk at the start of `data` if it is already
    /// decided, even with fewer than `max` bytes: a cut found before the
    /// end of `data` is the cut the full window would give, because every
    /// position before it is tested with the same mask and the same hash.
    ///
    /// The scan resumes where an earlier call on a prefix of `data` with
    /// the same `state` stopped: the positions that call tested are not
    /// tested again (a chunk that grows by small reads is scanned once, not
    /// once per read; see the `chunk` benchmark). `state` must start
    /// [`ScanState::default`] for each chunk; `data` may only grow between
    /// calls with the same state.
    fn decided_len_from(&self, data: &[u8], state: &mut ScanState) -> Option<usize> {
        let ChunkerConfig { min, avg, max } = self.config;
        let len = data.len();
        if len <= min {
            // `cut` returns the whole window: decided only once it is `max`.
            return (len >= max && len > 0).then_some(len.min(max).max(1));
        }
        // The positions `cut` tests on a window of `len` bytes: from
        // `start` to the even bound below the window's end, with the strict
        // mask below `middle` and the relaxed one from there. A longer
        // window tests the same positions with the same masks, and more.
        let start = min / 2 * 2;
        let middle = avg / 2 * 2;
        let end = len.min(max) / 2 * 2;
        if state.pos < start {
            *state = ScanState {
                pos: start,
                hash: 0,
            };
        }
        for (to, mask) in [(middle.min(end), self.mask_s), (end, self.mask_l)] {
            if state.pos < to {
                let from = state.pos;
                if let Some(p) = scan(self.gear, &data[from..to], &mut state.hash, mask) {
                    return Some(from + p);
                }
                state.pos = to;
            }
        }
        (len >= max).then_some(max)
    }

    /// Length of the first chunk of `source`, exactly as
    /// `fastcdc::v2020::cut` computes it: positions `min..avg` are tested
    /// with the strict mask, `avg..max` with the relaxed one (normalized
    /// chunking, level 1), a hit at position `p` cuts before `p`, and the
    /// crate's pairwise loop tests only positions below an even bound.
    fn cut(&self, source: &[u8]) -> usize {
        let ChunkerConfig { min, avg, max } = self.config;
        let mut remaining = source.len();
        if remaining <= min {
            return remaining;
        }
        let mut center = avg;
        if remaining > max {
            remaining = max;
        } else if remaining < center {
            center = remaining;
        }
        let (start, middle, end) = (min / 2 * 2, center / 2 * 2, remaining / 2 * 2);
        let mut hash = 0;
        if let Some(p) = scan(self.gear, &source[start..middle], &mut hash, self.mask_s) {
            return start + p;
        }
        if let Some(p) = scan(self.gear, &source[middle..end], &mut hash, self.mask_l) {
            return middle + p;
        }
        remaining
    }

    /// Split `data` into chunks as one complete stream (convenience for
    /// tests and tools).
    pub fn split<'a>(&self, mut data: &'a [u8]) -> Vec<&'a [u8]> {
        let mut chunks = Vec::new();
        while let Some(len) = self.next_chunk_len(data, true) {
            let (chunk, rest) = data.split_at(len);
            chunks.push(chunk);
            data = rest;
        }
        chunks
    }
}

/// First offset `p` in `window` where the gear hash (`hash` is its value
/// before the window; `h = (h << 1) + GEAR[byte]` per byte) has no bit of
/// `mask` set; otherwise `None`, with `hash` advanced over the window.
///
/// Equivalent to the byte-at-a-time loop, and to the crate's pairwise loop
/// (which tests `2h` against `mask << 1`, the same test because no mask
/// has bit 63 set). Four bytes per iteration: the loop-carried hash takes
/// `(h << 4) + c`, where `c` (the next four bytes' share) is computed one
/// iteration ahead and carried in, so the compiler cannot reassociate it
/// back into a chain of four dependent steps.
#[inline]
fn scan(gear: &[u64; 256], window: &[u8], hash: &mut u64, mask: u64) -> Option<usize> {
    let lookup = |quad: &[u8]| -> [u64; 4] {
        [
            gear[usize::from(quad[0])],
            gear[usize::from(quad[1])],
            gear[usize::from(quad[2])],
            gear[usize::from(quad[3])],
        ]
    };
    let share = |g: [u64; 4]| {
        (g[0] << 3)
            .wrapping_add(g[1] << 2)
            .wrapping_add((g[2] << 1).wrapping_add(g[3]))
    };
    let mut h = *hash;
    let quads = window.len() / 4;
    let mut g = window.get(..4).map(lookup).unwrap_or_default();
    let mut c = share(g);
    // Quad k with quad k + 1 as lookahead; the last quad has none.
    let lookahead = window.get(4..quads * 4).unwrap_or_default().chunks_exact(4);
    let last = [0u8; 4];
    for (k, next) in lookahead.chain(std::iter::once(&last[..])).enumerate() {
        if k == quads {
            break;
        }
        let g_next = lookup(next);
        let c_next = share(g_next);
        let h0 = (h << 1).wrapping_add(g[0]);
        let h1 = (h0 << 1).wrapping_add(g[1]);
        let h2 = (h1 << 1).wrapping_add(g[2]);
        let h3 = (h << 4).wrapping_add(c);
        // One branch per four positions.
        let any = (h0 & mask == 0) | (h1 & mask == 0) | (h2 & mask == 0) | (h3 & mask == 0);
        if any {
            let hits = [h0, h1, h2, h3].map(|x| x & mask == 0);
            let offset = hits.iter().position(|&hit| hit).unwrap_or(3);
            return Some(4 * k + offset);
        }
        h = h3;
        g = g_next;
        c = c_next;
    }
    for (i, &byte) in window.iter().enumerate().skip(quads * 4) {
        h = (h << 1).wrapping_add(gear[usize::from(byte)]);
        if h & mask == 0 {
            return Some(i);
        }
    }
    *hash = h;
    None
}

/// Incremental chunker: accepts a stream in arbitrary pieces and hands out
/// chunks with the same boundaries as [`Chunker::split`] on the whole stream
/// (as long as [`StreamChunker::flush`] is only called at the end).
#[derive(Debug)]
pub struct StreamChunker {
    chunker: Chunker,
    pending: Vec<u8>,
    /// How far the pending chunk has been scanned for its cut.
    scan: ScanState,
}

/// Where a scan for a chunk's cut stopped without finding it: the next
/// position to test and the gear hash before it (`pos` 0: not begun).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct ScanState {
    pos: usize,
    hash: u64,
}

impl StreamChunker {
    /// A stream chunker with no pending bytes.
    pub fn new(chunker: Chunker) -> Self {
        StreamChunker {
            chunker,
            pending: Vec::new(),
            scan: ScanState::default(),
        }
    }

    /// Bytes received but not yet handed out as a chunk.
    pub fn pending_len(&self) -> usize {
        self.pending.len()
    }

    /// Those bytes.
    pub fn pending(&self) -> &[u8] {
        &self.pending
    }

    /// Feed `input`; call `on_chunk` for every chunk that is now decided.
    ///
    /// Chunks are handed out as soon as their cut is found (see
    /// [`Chunker`]'s window rule), so what stays pending is only the bytes
    /// after the last cut (less than `max`). The next call copies from its
    /// input only what completes the chunk that starts in them (in steps of
    /// `2 * avg`); the bytes after that cut are then chunked in place.
    pub fn push(&mut self, mut input: &[u8], mut on_chunk: impl FnMut(&[u8])) {
        let step = 2 * self.chunker.config.avg;
        // `borrowed`: how many of the pending bytes were copied from `input`
        // (they sit at the end of `pending` and can be handed back).
        let mut borrowed = 0;
        while !self.pending.is_empty() {
            if let Some(len) = self.chunker.decided_len_from(&self.pending, &mut self.scan) {
                on_chunk(&self.pending[..len]);
                self.scan = ScanState::default();
                let old = self.pending.len() - borrowed;
                if len >= old {
                    // The old tail is consumed: continue in `input`.
                    input = &input[len - old..];
                    self.pending.clear();
                    borrowed = 0;
                } else {
                    self.pending.drain(..len);
                }
                continue;
            }
            let unread = &input[borrowed..];
            if unread.is_empty() {
                return;
            }
            let room = self.chunker.config.max - self.pending.len();
            let take = unread.len().min(step.min(room));
            self.pending.extend_from_slice(&unread[..take]);
            borrowed += take;
        }
        // Each chunk of `input` is scanned once; the scan of its tail,
        // which has no cut yet, goes on from where it stopped next time.
        let mut scan = ScanState::default();
        while let Some(len) = self.chunker.decided_len_from(input, &mut scan) {
            on_chunk(&input[..len]);
            input = &input[len..];
            scan = ScanState::default();
        }
        self.scan = scan;
        self.pending.extend_from_slice(input);
    }

    /// End the current data: hand out every pending byte as chunks. Used at
    /// the end of the stream, or when the sender goes idle (boundaries after
    /// a flush then depend on where it happened).
    pub fn flush(&mut self, mut on_chunk: impl FnMut(&[u8])) {
        let mut start = 0;
        while let Some(len) = self.chunker.next_chunk_len(&self.pending[start..], true) {
            on_chunk(&self.pending[start..start + len]);
            start += len;
        }
        self.pending.clear();
        self.scan = ScanState::default();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn data(len: usize, seed: u64) -> Vec<u8> {
        let mut x = seed | 1;
        (0..len)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                (x >> 24) as u8
            })
            .collect()
    }

    fn stream_split(config: ChunkerConfig, pieces: &[&[u8]]) -> Vec<Vec<u8>> {
        let mut chunks = Vec::new();
        let mut sc = StreamChunker::new(Chunker::new(config).unwrap());
        for piece in pieces {
            sc.push(piece, |c| chunks.push(c.to_vec()));
        }
        sc.flush(|c| chunks.push(c.to_vec()));
        chunks
    }

    #[test]
    fn boundaries_match_fastcdc_v2020() {
        let config = ChunkerConfig::default();
        let input = data(1 << 20, 7);
        let ours: Vec<usize> = Chunker::new(config)
            .unwrap()
            .split(&input)
            .iter()
            .map(|c| c.len())
            .collect();
        let theirs: Vec<usize> =
            fastcdc::v2020::FastCDC::new(&input, config.min, config.avg, config.max)
                .map(|c| c.length)
                .collect();
        assert_eq!(ours, theirs);
        let mean = input.len() / ours.len();
        assert!((4096..16384).contains(&mean), "mean chunk {mean}");
    }

    #[test]
    fn config_validation() {
        assert!(ChunkerConfig::default().validate().is_ok());
        let bad = ChunkerConfig {
            min: 9000,
            avg: 8192,
            max: 65536,
        };
        assert_eq!(bad.validate(), Err(ChunkerConfigError::Unordered));
        let odd = ChunkerConfig {
            max: 65535,
            ..ChunkerConfig::default()
        };
        assert_eq!(odd.validate(), Err(ChunkerConfigError::MaximumOutOfRange));
    }

    #[test]
    fn no_mask_has_bit_63() {
        // `scan` relies on it to match the crate's pairwise loop.
        assert!(fastcdc::v2020::MASKS.iter().all(|m| m >> 63 == 0));
    }

    /// Cut point of `fastcdc::v2020::cut` for `config` on `window`.
    fn crate_cut(config: ChunkerConfig, window: &[u8]) -> usize {
        let (mask_s, mask_l) = select_masks(config.avg, Normalization::Level1);
        let (_, len) = fastcdc::v2020::cut(
            window,
            config.min,
            config.avg,
            config.max,
            mask_s,
            mask_l,
            mask_s << 1,
            mask_l << 1,
        );
        len
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]
        /// Our scan cuts exactly where the crate's does, for any sizes
        /// (odd ones included), window lengths, and data from random to
        /// nearly constant (long scans that end at `max`).
        #[test]
        fn cut_matches_crate(
            min in 64usize..3000,
            avg_extra in 0usize..6000,
            max_extra in 0usize..20_000,
            len in 0usize..40_000,
            alphabet in prop_oneof![Just(1u8), Just(2u8), Just(4u8), Just(255u8)],
            seed in any::<u64>(),
        ) {
            let avg = (min + avg_extra).max(256);
            let max = (avg + max_extra).max(1024).next_multiple_of(2);
            // The crate debug-asserts even sizes; odd ones are compared in
            // release builds (the test command's).
            let (min, avg) = if cfg!(debug_assertions) { (min & !1, avg & !1) } else { (min, avg) };
            let config = ChunkerConfig { min, avg, max };
            prop_assume!(config.validate().is_ok());
            let chunker = Chunker::new(config).unwrap();
            let input: Vec<u8> = data(len, seed).into_iter().map(|b| b % alphabet).collect();
            let mut rest = &input[..];
            while !rest.is_empty() {
                let window = &rest[..rest.len().min(max)];
                let ours = chunker.cut(window);
                prop_assert_eq!(ours, crate_cut(config, window));
                rest = &rest[ours.max(1)..];
            }
        }
    }

    /// A read that ends one byte past a cut the chunker could not test yet
    /// (the scan stops at an even bound): the next read finds the cut
    /// inside the bytes already pending, and the scan of the chunk after
    /// it must start afresh, not where the cut's scan stood.
    #[test]
    fn a_cut_found_in_the_pending_bytes_starts_the_next_scan_afresh() {
        let config = ChunkerConfig::default();
        let chunker = Chunker::new(config).unwrap();
        let mut exercised = 0;
        for seed in 0..400 {
            let input = data(200_000, seed);
            let whole = chunker.split(&input);
            let first = whole[0].len();
            if !first.is_multiple_of(2) || first >= config.max {
                continue;
            }
            // `first + 1` bytes: the last tested position is `first - 1`.
            let mut pieces = vec![&input[..first + 1]];
            pieces.extend(input[first + 1..].chunks(100));
            let streamed = stream_split(config, &pieces);
            let whole: Vec<Vec<u8>> = whole.into_iter().map(|c| c.to_vec()).collect();
            assert_eq!(streamed, whole, "seed {seed}");
            exercised += 1;
        }
        assert!(
            exercised >= 50,
            "only {exercised} streams cut inside pending bytes"
        );
    }

    /// A valid configuration from three numbers (min 64 to 8 KiB, avg a
    /// power of two at or above it, max even and at or above avg).
    fn config_of(min: usize, avg_log: u32, extra: usize) -> ChunkerConfig {
        let avg = (1usize << avg_log).max(min.next_power_of_two());
        ChunkerConfig {
            min,
            avg,
            max: (avg + extra) / 2 * 2,
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        /// A chunk fed a few bytes at a time (a trickle, a chatty
        /// protocol) resumes its scan where the last read left it: the
        /// boundaries are still those of the whole stream at once, for any
        /// sizes, odd minimums and maxima equal to the average included.
        #[test]
        fn small_reads_resume_the_scan_and_cut_the_same(
            len in 0usize..120_000,
            seed in any::<u64>(),
            min in 64usize..8192,
            avg_log in 8u32..15,
            extra in prop_oneof![Just(0usize), 0usize..70_000],
            reads in proptest::collection::vec(1usize..1500, 1..64),
        ) {
            let config = config_of(min, avg_log, extra);
            prop_assume!(config.validate().is_ok());
            let input = data(len, seed);
            let whole: Vec<Vec<u8>> = Chunker::new(config).unwrap().split(&input)
                .into_iter().map(|c| c.to_vec()).collect();
            let mut pieces = Vec::new();
            let mut rest = &input[..];
            for size in reads.iter().cycle() {
                if rest.is_empty() {
                    break;
                }
                let (piece, tail) = rest.split_at((*size).min(rest.len()));
                pieces.push(piece);
                rest = tail;
            }
            let streamed = stream_split(config, &pieces);
            prop_assert_eq!(streamed.concat(), input.clone());
            prop_assert_eq!(streamed, whole);
        }

        /// The resumed scan of a growing window decides exactly what a
        /// fresh scan of the same window decides, at every length.
        #[test]
        fn a_resumed_scan_decides_what_a_fresh_one_does(
            seed in any::<u64>(),
            min in 64usize..4096,
            avg_log in 8u32..14,
            extra in 0usize..20_000,
            step in 1usize..900,
        ) {
            let config = config_of(min, avg_log, extra);
            prop_assume!(config.validate().is_ok());
            let chunker = Chunker::new(config).unwrap();
            let input = data(config.max + 2 * step, seed);
            let mut state = ScanState::default();
            let mut len = 0;
            while len <= input.len() {
                let window = &input[..len];
                let resumed = chunker.decided_len_from(window, &mut state);
                // What `cut` (checked against the crate) decides on the
                // window as it stands: a full window always, a shorter one
                // only with a cut before its end.
                let fresh = if len >= config.max {
                    chunker.next_chunk_len(window, false)
                } else {
                    Some(chunker.cut(window)).filter(|&cut| cut < len)
                };
                prop_assert_eq!(resumed, fresh, "at {} bytes", len);
                if resumed.is_some() {
                    break;
                }
                len += step;
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(48))]
        /// Same boundaries whatever the piece sizes.
        #[test]
        fn split_independent_of_pieces(
            len in 0usize..400_000,
            seed in any::<u64>(),
            cuts in proptest::collection::vec(0usize..400_000, 0..40),
        ) {
            let config = ChunkerConfig::default();
            let input = data(len, seed);
            let whole: Vec<Vec<u8>> = Chunker::new(config).unwrap().split(&input)
                .into_iter().map(|c| c.to_vec()).collect();
            let mut points: Vec<usize> = cuts.into_iter().map(|c| c.min(len)).collect();
            points.sort_unstable();
            let mut pieces = Vec::new();
            let mut last = 0;
            for p in points { pieces.push(&input[last..p]); last = p; }
            pieces.push(&input[last..]);
            let streamed = stream_split(config, &pieces);
            prop_assert_eq!(streamed.concat(), input.clone());
            prop_assert_eq!(streamed, whole);
        }
    }
}
