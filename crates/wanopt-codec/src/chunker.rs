//! Content-defined chunking: an incremental driver over FastCDC 2020.
//!
//! The cut-point search is `fastcdc::v2020::cut` (gear hash with normalized
//! chunking, Xia et al., "The Design of Fast Content-Defined Chunking for
//! Data Deduplication Based Storage Systems", IEEE TPDS 2020, section 3).
//! The driver only asks for a cut point once it holds at least `max` bytes
//! (or at the end of the stream): a cut found in a window of `max` bytes
//! depends only on the bytes before it, so the boundaries are identical to
//! chunking the whole stream at once, however the stream is split into
//! pieces, and no byte is scanned twice.

use fastcdc::v2020::{cut, select_masks, Normalization};
use thiserror::Error;

/// Largest chunk the wire format carries (1 MiB).
pub const MAX_CHUNK_LEN: usize = 1 << 20;

/// Chunk size parameters.
///
/// The default, min 2 KiB / avg 8 KiB / max 64 KiB, is the measured sweet
/// spot on the edit workload (see `BENCHMARKS.md`, "Codec (issue 4)").
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

/// Stateless cut-point finder for one configuration.
#[derive(Clone, Debug)]
pub struct Chunker {
    config: ChunkerConfig,
    mask_s: u64,
    mask_l: u64,
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
        let (_, len) = cut(
            window,
            self.config.min,
            self.config.avg,
            self.config.max,
            self.mask_s,
            self.mask_l,
            self.mask_s << 1,
            self.mask_l << 1,
        );
        // `cut` returns at least 1 for a non-empty window; guard anyway so a
        // caller loop always makes progress.
        Some(len.clamp(1, window.len()))
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

/// Incremental chunker: accepts a stream in arbitrary pieces and hands out
/// chunks with the same boundaries as [`Chunker::split`] on the whole stream
/// (as long as [`StreamChunker::flush`] is only called at the end).
#[derive(Debug)]
pub struct StreamChunker {
    chunker: Chunker,
    pending: Vec<u8>,
}

impl StreamChunker {
    /// A stream chunker with no pending bytes.
    pub fn new(chunker: Chunker) -> Self {
        StreamChunker {
            chunker,
            pending: Vec::new(),
        }
    }

    /// Bytes received but not yet handed out as a chunk.
    pub fn pending_len(&self) -> usize {
        self.pending.len()
    }

    /// Feed `input`; call `on_chunk` for every chunk that is now decided.
    ///
    /// At most `max` bytes of `input` are copied per call (to join the
    /// previous call's undecided tail); the rest is chunked in place.
    pub fn push(&mut self, mut input: &[u8], mut on_chunk: impl FnMut(&[u8])) {
        if !self.pending.is_empty() {
            let old = self.pending.len();
            let take = self.chunker.config.max.min(input.len());
            self.pending.extend_from_slice(&input[..take]);
            let mut pos = 0;
            while pos < old {
                let Some(len) = self.chunker.next_chunk_len(&self.pending[pos..], false) else {
                    break;
                };
                on_chunk(&self.pending[pos..pos + len]);
                pos += len;
            }
            if pos < old {
                // Not enough to decide: then all of `input` was taken.
                self.pending.drain(..pos);
                return;
            }
            // The old tail is consumed: continue in the caller's buffer.
            input = &input[pos - old..];
            self.pending.clear();
        }
        while let Some(len) = self.chunker.next_chunk_len(input, false) {
            on_chunk(&input[..len]);
            input = &input[len..];
        }
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
