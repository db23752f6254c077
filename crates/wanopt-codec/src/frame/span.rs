//! Spans: the check over a span's fingerprints and the entries of a
//! `SpanList`.

use crate::fingerprint::{Fingerprint, FINGERPRINT_LEN};

use super::header::emit_header;
use super::kind;

/// Length of one `SpanList` entry.
pub const SPAN_ENTRY_LEN: usize = FINGERPRINT_LEN + 4;

/// The check of a span: the fingerprint of its chunks' fingerprints, in
/// order.
pub fn span_check<'f>(fingerprints: impl IntoIterator<Item = &'f Fingerprint>) -> Fingerprint {
    let mut hasher = blake3::Hasher::new();
    for fp in fingerprints {
        hasher.update(fp.as_bytes());
    }
    Fingerprint::from_hash(&hasher.finalize())
}

/// The `(fingerprint, raw length)` entries of a `SpanList` body.
pub fn span_entries(entries: &[u8]) -> impl Iterator<Item = (Fingerprint, u32)> + '_ {
    entries.chunks_exact(SPAN_ENTRY_LEN).map(|e| {
        let mut fp = [0u8; FINGERPRINT_LEN];
        fp.copy_from_slice(&e[..FINGERPRINT_LEN]);
        let len = u32::from_be_bytes([e[16], e[17], e[18], e[19]]);
        (Fingerprint(fp), len)
    })
}

/// Append a `SpanList` frame for `entries` to `out`.
pub fn emit_span_list(check: &Fingerprint, entries: &[(Fingerprint, u32)], out: &mut Vec<u8>) {
    emit_header(
        out,
        kind::SPAN_LIST,
        FINGERPRINT_LEN + 2 + entries.len() * SPAN_ENTRY_LEN,
    );
    out.extend_from_slice(check.as_bytes());
    out.extend_from_slice(&(entries.len() as u16).to_be_bytes());
    for (fp, len) in entries {
        out.extend_from_slice(fp.as_bytes());
        out.extend_from_slice(&len.to_be_bytes());
    }
}
