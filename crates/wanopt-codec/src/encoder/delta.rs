//! Deltas: a chunk sent as its difference to a base chunk the peer
//! holds. The base is what followed the previous chunk when the stream
//! last passed (the cursor), or a stored chunk like it; whether the delta
//! beats the literal is the chunk's choice (`chunk.rs`).

use crate::compress::delta_compress;
use crate::fingerprint::Fingerprint;

use super::view::FlowView;

/// The delta encoder's cursor and buffers.
#[derive(Debug, Default)]
pub(super) struct Deltas {
    /// The chunk the stream passed last (referenced, or the base of the
    /// last delta tried): what followed it when the stream last passed is
    /// the likely old version of the next chunk.
    cursor: Option<Fingerprint>,
    /// The base read from the store.
    base: Vec<u8>,
    /// The last delta computed.
    delta: Vec<u8>,
}

impl Deltas {
    /// What a delta of `chunk` would be against: what followed the
    /// previous chunk when this stream last passed, or a stored chunk
    /// with the same first or last 64 bytes.
    pub(super) fn base_for(&self, view: &FlowView, chunk: &[u8]) -> Option<Fingerprint> {
        view.delta_base(self.cursor, chunk)
    }

    /// The chunk the stream passed last.
    pub(super) fn set_cursor(&mut self, cursor: Option<Fingerprint>) {
        self.cursor = cursor;
    }

    /// The delta of `chunk` against `base` at compression `level`, if the
    /// peer holds `base` and the local store gives it: its length (the
    /// bytes are [`Deltas::delta`]).
    pub(super) fn compute(
        &mut self,
        view: &FlowView,
        base: &Fingerprint,
        chunk: &[u8],
        level: i32,
    ) -> Option<usize> {
        self.base.clear();
        if !view.read_base(base, &mut self.base) {
            return None;
        }
        delta_compress(chunk, &self.base, level, &mut self.delta)
    }

    /// The first `len` bytes of the last delta computed.
    pub(super) fn delta(&self, len: usize) -> &[u8] {
        &self.delta[..len]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compress::delta_decompress;
    use crate::encoder::tests::{noise, peers};
    use crate::stats::EncoderStats;
    use crate::EncoderConfig;

    #[test]
    fn a_delta_is_computed_only_against_a_base_the_peer_holds() {
        let peers = peers();
        let mut view = FlowView::new(peers.local.clone(), &EncoderConfig::default());
        let base = noise(16 << 10, 1);
        let mut edited = base.clone();
        edited[8 << 10] ^= 1;
        let base_fp = Fingerprint::of(&base);
        let mut deltas = Deltas::default();
        assert_eq!(deltas.compute(&view, &base_fp, &edited, 1), None);

        // Sent on this flow (and kept locally): the peer holds it.
        view.note_sent(base_fp, &base, &mut EncoderStats::default());
        view.emit_sent(&mut Vec::new(), &mut EncoderStats::default());
        let len = deltas.compute(&view, &base_fp, &edited, 1).unwrap();
        assert!(len < 100, "{len}");
        let mut decoded = vec![0; edited.len()];
        let decoded_len = delta_decompress(deltas.delta(len), &base, &mut decoded);
        assert_eq!(decoded_len, Some(edited.len()));
        assert_eq!(decoded, edited);

        // The stored chunk like it is the base, whatever the cursor.
        deltas.set_cursor(Some(Fingerprint::of(b"not stored")));
        assert_eq!(deltas.base_for(&view, &edited), Some(base_fp));
    }
}
