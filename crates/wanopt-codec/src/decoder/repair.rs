//! Bytes that come late: a chunk the store could not give is asked for
//! (`NeedChunk`), a span it could not follow too (`NeedSpan`), while the
//! bytes after them wait in the backlog; the answers (`Repair`, verified
//! against its fingerprint, and `SpanList`, against its check) fill their
//! places and let the backlog go.

use crate::control::ControlRepr;
use crate::fingerprint::Fingerprint;
use crate::frame::{span_check, span_entries, Payload};

use super::error::DecodeError;
use super::resolve::read_chunk;
use super::Decoder;

impl Decoder {
    /// Hold the place of the chunk `fingerprint` (of which `prefix` was
    /// delivered as pieces) in the backlog, and ask for it.
    pub(super) fn wait_for_chunk(
        &mut self,
        fingerprint: Fingerprint,
        len: u32,
        prefix: Vec<u8>,
    ) -> Result<(), DecodeError> {
        if self.backlog.wait_for_chunk(fingerprint, len, prefix)? {
            self.to_peer.push(ControlRepr::NeedChunk { fingerprint });
        }
        Ok(())
    }

    /// Hold the place of the span `check` in the backlog, and ask for its
    /// list.
    pub(super) fn wait_for_span(
        &mut self,
        check: Fingerprint,
        len: u32,
    ) -> Result<(), DecodeError> {
        if self.backlog.wait_for_span(check, len)? {
            self.to_peer.push(ControlRepr::NeedSpan { check });
        }
        Ok(())
    }

    /// A repair: the chunk, verified and stored, fills the places that
    /// waited for it.
    pub(super) fn handle_repair(
        &mut self,
        fingerprint: Fingerprint,
        payload: Payload<'_>,
        out: &mut Vec<u8>,
    ) -> Result<(), DecodeError> {
        let mut data = Vec::with_capacity(payload.raw_len as usize);
        payload.decode_into(&mut data)?;
        if !fingerprint.matches(&data) {
            return Err(DecodeError::RepairMismatch);
        }
        self.stats.repairs_received += 1;
        self.store(&data);
        if !self.backlog.fill_chunk(&fingerprint, &data)? {
            return Ok(());
        }
        self.drain_backlog(out);
        Ok(())
    }

    /// The chunks of a span this decoder could not resolve: each is looked
    /// up like a reference, the missing ones asked for with `NeedChunk`.
    pub(super) fn handle_span_list(
        &mut self,
        check: Fingerprint,
        entries: &[u8],
        out: &mut Vec<u8>,
    ) -> Result<(), DecodeError> {
        if !self.backlog.take_span(&check) {
            return Ok(());
        }
        let list: Vec<(Fingerprint, u32)> = span_entries(entries).collect();
        if span_check(list.iter().map(|(fp, _)| fp)) != check {
            return Err(DecodeError::RepairMismatch);
        }
        let (cache, stats) = (&self.cache, &mut self.stats);
        let ask = self.backlog.expand_span(check, &list, |fingerprint, len| {
            let mut data = Vec::new();
            Ok(read_chunk(cache, stats, fingerprint, len, &mut data)?.then_some(data))
        })?;
        for fingerprint in ask {
            self.to_peer.push(ControlRepr::NeedChunk { fingerprint });
        }
        self.drain_backlog(out);
        Ok(())
    }

    /// Deliver the backlog up to its first unresolved entry.
    fn drain_backlog(&mut self, out: &mut Vec<u8>) {
        if self.backlog.drain(out) {
            self.finish();
        }
    }
}
