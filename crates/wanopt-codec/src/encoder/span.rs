//! The span of references being gathered.

use crate::fingerprint::Fingerprint;

/// Spans remembered to answer `NeedSpan` (per flow, oldest forgotten
/// first; a list is at most 256 x 20 bytes).
pub(super) const MAX_SENT_SPANS: usize = 1024;

/// References to chunks the peer holds one after the other, gathered into
/// a `Span` frame.
#[derive(Debug, Default)]
pub(super) struct PendingSpan {
    pub(super) chunks: Vec<(Fingerprint, u32)>,
    pub(super) len: usize,
    /// Where the peer's next record starts, after the last chunk's.
    pub(super) next_position: u64,
}
