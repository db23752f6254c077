//! The run being gathered: literals waiting to be compressed together in
//! one `Run` or `StreamRun` frame (with zstd or LZMA2, where each byte
//! counts).

use crate::fingerprint::Fingerprint;
use crate::frame::{MAX_RUN_CHUNKS, MAX_RUN_LEN};

/// Literals waiting to be compressed together.
#[derive(Debug)]
pub(super) struct PendingRun {
    /// Their bytes.
    bytes: Vec<u8>,
    /// Their lengths (big-endian u32s, as the `Run` frame carries them).
    lengths: Vec<u8>,
    /// Their fingerprints.
    fingerprints: Vec<Fingerprint>,
    /// The first literal is the rest of a chunk begun as pieces, this
    /// long in all (a `PieceRest` goes before the run).
    rest: Option<u32>,
    /// A run goes out once it has this many bytes (0: literals are not
    /// gathered).
    target_len: usize,
}

impl PendingRun {
    /// An empty run that goes out at `target_len` bytes (0: never
    /// gathered).
    pub(super) fn new(target_len: usize) -> Self {
        PendingRun {
            bytes: Vec::new(),
            lengths: Vec::new(),
            fingerprints: Vec::new(),
            rest: None,
            target_len,
        }
    }

    /// Whether literals are gathered at all.
    pub(super) fn is_enabled(&self) -> bool {
        self.target_len > 0
    }

    /// How many literals are gathered.
    pub(super) fn count(&self) -> usize {
        self.lengths.len() / 4
    }

    /// Whether a literal of `len` bytes would make the run longer than a
    /// frame carries.
    pub(super) fn would_overflow(&self, len: usize) -> bool {
        self.bytes.len() + len > MAX_RUN_LEN
    }

    /// Add a literal.
    pub(super) fn push(&mut self, fingerprint: Fingerprint, chunk: &[u8]) {
        self.bytes.extend_from_slice(chunk);
        self.lengths
            .extend_from_slice(&(chunk.len() as u32).to_be_bytes());
        self.fingerprints.push(fingerprint);
    }

    /// Whether the run is long enough to go out.
    pub(super) fn is_full(&self) -> bool {
        self.bytes.len() >= self.target_len || self.count() >= MAX_RUN_CHUNKS
    }

    /// Whether the chunk `fingerprint` is in the run.
    pub(super) fn holds(&self, fingerprint: &Fingerprint) -> bool {
        self.fingerprints.contains(fingerprint)
    }

    /// The fingerprints of the literals gathered.
    pub(super) fn fingerprints(&self) -> &[Fingerprint] {
        &self.fingerprints
    }

    /// The next literal gathered completes a chunk begun as pieces, `len`
    /// bytes in all.
    pub(super) fn begin_with_rest(&mut self, len: u32) {
        self.rest = Some(len);
    }

    /// The length of the chunk whose rest begins the run, if it does (a
    /// `PieceRest` goes first).
    pub(super) fn take_rest(&mut self) -> Option<u32> {
        self.rest.take()
    }

    /// The run's bytes and lengths, to send; [`PendingRun::restore`] gives
    /// the buffers back once sent.
    pub(super) fn take(&mut self) -> (Vec<u8>, Vec<u8>) {
        (
            std::mem::take(&mut self.bytes),
            std::mem::take(&mut self.lengths),
        )
    }

    /// The run went out: start the next in the same buffers (their
    /// capacity kept).
    pub(super) fn restore(&mut self, mut bytes: Vec<u8>, mut lengths: Vec<u8>) {
        bytes.clear();
        lengths.clear();
        self.bytes = bytes;
        self.lengths = lengths;
        self.fingerprints.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frame::run_lengths;

    #[test]
    fn a_run_is_full_at_its_length_or_its_chunk_count() {
        let mut run = PendingRun::new(100);
        assert!(run.is_enabled());
        run.push(Fingerprint::of(b"a"), &[1; 60]);
        assert!(!run.is_full());
        run.push(Fingerprint::of(b"b"), &[2; 40]);
        assert!(run.is_full());
        assert_eq!(run.count(), 2);
        assert!(run.holds(&Fingerprint::of(b"b")));
        assert!(run.would_overflow(MAX_RUN_LEN - 99));
        assert!(!run.would_overflow(MAX_RUN_LEN - 100));

        let mut tiny = PendingRun::new(usize::MAX);
        for _ in 0..MAX_RUN_CHUNKS {
            assert!(!tiny.is_full());
            tiny.push(Fingerprint::of(b"c"), b"c");
        }
        assert!(tiny.is_full());
        assert!(!PendingRun::new(0).is_enabled());
    }

    #[test]
    fn a_run_taken_out_gives_its_bytes_and_lengths_and_starts_empty() {
        let mut run = PendingRun::new(1 << 10);
        run.begin_with_rest(9);
        run.push(Fingerprint::of(b"x"), b"rest");
        run.push(Fingerprint::of(b"y"), b"second");
        assert_eq!(run.take_rest(), Some(9));
        assert_eq!(run.take_rest(), None);
        let (bytes, lengths) = run.take();
        assert_eq!(bytes, b"restsecond");
        assert_eq!(run_lengths(&lengths).collect::<Vec<_>>(), [4, 6]);
        // The fingerprints stay until the run is restored.
        assert_eq!(run.fingerprints().len(), 2);
        run.restore(bytes, lengths);
        assert_eq!(run.count(), 0);
        assert!(run.fingerprints().is_empty());
        assert!(run.bytes.capacity() >= 10);
    }
}
