//! Spans: references to chunks the peer stored one after the other,
//! gathered into one `Span` frame; and the spans sent, remembered to
//! answer `NeedSpan` with their lists.

use std::collections::VecDeque;

use crate::fingerprint::Fingerprint;
use crate::frame::{span_check, DataRepr, MAX_SPAN_CHUNKS, MAX_SPAN_LEN};
use crate::store::index::FingerprintMap;
use crate::store::segment::RECORD_HEADER_LEN;

/// Spans remembered to answer `NeedSpan` (per flow, oldest forgotten
/// first; a list is at most 256 x 20 bytes).
const MAX_SENT_SPANS: usize = 1024;

/// The span being gathered, and the spans sent.
#[derive(Debug, Default)]
pub(super) struct Spans {
    /// The chunks of the span being gathered, and their bytes in all.
    chunks: Vec<(Fingerprint, u32)>,
    len: usize,
    /// Where the peer's next record starts, after the last chunk's.
    next_position: u64,
    /// The spans sent, by check, with their oldest first.
    sent: FingerprintMap<Vec<(Fingerprint, u32)>>,
    sent_order: VecDeque<Fingerprint>,
}

impl Spans {
    /// Whether a chunk of `len` bytes at `position` in the peer's store
    /// extends the span being gathered: right after its last chunk, and
    /// the span not full.
    pub(super) fn extends(&self, position: Option<u64>, len: usize) -> bool {
        !self.chunks.is_empty()
            && position == Some(self.next_position)
            && self.chunks.len() < MAX_SPAN_CHUNKS
            && self.len + len <= MAX_SPAN_LEN
    }

    /// Add the chunk `fingerprint`, `len` bytes at `position` in the
    /// peer's store.
    pub(super) fn push(&mut self, fingerprint: Fingerprint, len: usize, position: u64) {
        self.chunks.push((fingerprint, len as u32));
        self.len += len;
        self.next_position = position + (RECORD_HEADER_LEN + len) as u64;
    }

    /// Send the span being gathered: a `Span` frame, remembered for a
    /// `NeedSpan`, or a `Reference` for one chunk. `true` when a `Span`
    /// frame went out.
    pub(super) fn flush(&mut self, out: &mut Vec<u8>) -> bool {
        let chunks = std::mem::take(&mut self.chunks);
        let len = std::mem::take(&mut self.len);
        match chunks[..] {
            [] => {}
            [(fingerprint, raw_len)] => DataRepr::Reference {
                fingerprint,
                raw_len,
            }
            .emit(out),
            _ => {
                let check = span_check(chunks.iter().map(|(fp, _)| fp));
                DataRepr::Span {
                    first: chunks[0].0,
                    count: chunks.len() as u16,
                    raw_len: len as u32,
                    check,
                }
                .emit(out);
                self.remember(check, chunks);
                return true;
            }
        }
        // Keep the buffer's capacity.
        self.chunks = chunks;
        self.chunks.clear();
        false
    }

    fn remember(&mut self, check: Fingerprint, chunks: Vec<(Fingerprint, u32)>) {
        if self.sent.insert(check, chunks).is_none() {
            self.sent_order.push_back(check);
            if self.sent_order.len() > MAX_SENT_SPANS {
                if let Some(old) = self.sent_order.pop_front() {
                    self.sent.remove(&old);
                }
            }
        }
    }

    /// The chunks of the span sent with `check`, if still remembered.
    pub(super) fn list(&self, check: &Fingerprint) -> Option<&[(Fingerprint, u32)]> {
        self.sent.get(check).map(Vec::as_slice)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frame::Frame;

    fn chunk(n: u32) -> Fingerprint {
        Fingerprint::of(&n.to_be_bytes())
    }

    /// The data frames in `wire`.
    fn parsed(mut wire: &[u8]) -> Vec<String> {
        let mut seen = Vec::new();
        while !wire.is_empty() {
            let frame = Frame::new_checked(wire).unwrap();
            seen.push(format!("{:?}", DataRepr::parse(&frame).unwrap().unwrap()));
            wire = &wire[frame.total_len()..];
        }
        seen
    }

    #[test]
    fn chunks_one_after_the_other_in_the_peers_store_make_one_span() {
        let mut spans = Spans::default();
        assert!(!spans.extends(Some(0), 100));
        spans.push(chunk(0), 100, 0);
        let next = (RECORD_HEADER_LEN + 100) as u64;
        assert!(!spans.extends(Some(next + 1), 100));
        assert!(!spans.extends(None, 100));
        assert!(spans.extends(Some(next), 100));
        spans.push(chunk(1), 100, next);
        let mut wire = Vec::new();
        assert!(spans.flush(&mut wire));
        let check = span_check(&[chunk(0), chunk(1)]);
        let span = DataRepr::Span {
            first: chunk(0),
            count: 2,
            raw_len: 200,
            check,
        };
        assert_eq!(parsed(&wire), [format!("{span:?}")]);
        assert_eq!(
            spans.list(&check),
            Some(&[(chunk(0), 100), (chunk(1), 100)][..])
        );
        // Nothing gathered: nothing sent.
        assert!(!spans.flush(&mut wire));
        assert_eq!(parsed(&wire).len(), 1);
    }

    #[test]
    fn a_span_of_one_chunk_is_a_reference_and_a_span_is_bounded() {
        let mut spans = Spans::default();
        spans.push(chunk(7), 10, 0);
        let mut wire = Vec::new();
        assert!(!spans.flush(&mut wire));
        let reference = DataRepr::Reference {
            fingerprint: chunk(7),
            raw_len: 10,
        };
        assert_eq!(parsed(&wire), [format!("{reference:?}")]);

        let mut position = 0;
        for n in 0..MAX_SPAN_CHUNKS as u32 {
            assert!(n == 0 || spans.extends(Some(position), 10));
            spans.push(chunk(n), 10, position);
            position += (RECORD_HEADER_LEN + 10) as u64;
        }
        assert!(!spans.extends(Some(position), 10));
        let mut big = Spans::default();
        big.push(chunk(0), MAX_SPAN_LEN - 10, 0);
        let next = (RECORD_HEADER_LEN + MAX_SPAN_LEN - 10) as u64;
        assert!(big.extends(Some(next), 10));
        assert!(!big.extends(Some(next), 11));
    }

    #[test]
    fn the_oldest_spans_sent_are_forgotten_first() {
        let mut spans = Spans::default();
        let mut checks = Vec::new();
        for n in 0..MAX_SENT_SPANS as u32 + 1 {
            spans.push(chunk(2 * n), 10, 0);
            spans.push(chunk(2 * n + 1), 10, (RECORD_HEADER_LEN + 10) as u64);
            assert!(spans.flush(&mut Vec::new()));
            checks.push(span_check(&[chunk(2 * n), chunk(2 * n + 1)]));
        }
        assert_eq!(spans.list(&checks[0]), None);
        assert!(checks[1..].iter().all(|check| spans.list(check).is_some()));
    }
}
