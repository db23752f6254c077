//! Repairs: the answers to the peer's decoder when it could not resolve
//! what this encoder sent. A chunk (`NeedChunk`) comes from the chunks
//! retained (`retain.rs`) or the local store, verified; a span's list
//! (`NeedSpan`) from the spans remembered (`span.rs`).

use crate::fingerprint::Fingerprint;
use crate::frame::{emit_span_list, DataRepr};

use super::error::PeerControlError;
use super::state::Core;

impl Core {
    /// Answer `NeedChunk`: a `Repair` frame with the chunk.
    pub(super) fn repair_chunk(
        &mut self,
        fingerprint: &Fingerprint,
        out: &mut Vec<u8>,
    ) -> Result<(), PeerControlError> {
        // The peer lacks it whatever we answer: no later flow may refer
        // to it until the peer acknowledges storing it again (if neither
        // side can supply it, the next flow sends it whole instead of
        // failing on it again).
        self.view.forget(fingerprint);
        let mut read = Vec::new();
        let data = match self.retained.get(fingerprint) {
            // Kept: the peer may need it again on another miss.
            Some(data) => data,
            None => {
                // Beyond the retained bytes (a fast warm flow references
                // far more than it retains in a round trip): the local
                // store usually still holds it, and its reads are
                // verified.
                if !self.view.read_local(fingerprint, &mut read) {
                    return Err(PeerControlError::ChunkUnavailable(*fingerprint));
                }
                self.stats.repairs_from_store += 1;
                &read
            }
        };
        let codec = self.compressor.compress(data);
        let payload = self.compressor.payload(codec, data);
        DataRepr::Repair {
            fingerprint: *fingerprint,
            payload,
        }
        .emit(out);
        self.stats.repairs_sent += 1;
        Ok(())
    }

    /// Answer `NeedSpan`: the span's list, chunk by chunk.
    pub(super) fn repair_span(
        &mut self,
        check: &Fingerprint,
        out: &mut Vec<u8>,
    ) -> Result<(), PeerControlError> {
        let Some(list) = self.spans.list(check) else {
            return Err(PeerControlError::SpanUnavailable(*check));
        };
        emit_span_list(check, list, out);
        self.stats.span_lists_sent += 1;
        Ok(())
    }
}
