//! Bytes that come in the frame: literals alone, runs (continuing the
//! flow's compression stream or not) and pieces of a chunk not cut yet;
//! each chunk is stored (buffered: written when the next `Ack` is built)
//! for later references.

use crate::fingerprint::Fingerprint;
use crate::frame::{split_run, Payload, Run};

use super::error::DecodeError;
use super::Decoder;

impl Decoder {
    /// Bytes of a chunk not complete yet: delivered now, held until the
    /// piece that cuts the chunk, which is then stored like a literal.
    pub(super) fn piece(
        &mut self,
        cut: u32,
        payload: Option<Payload<'_>>,
        out: &mut Vec<u8>,
    ) -> Result<(), DecodeError> {
        if let Some(payload) = payload {
            let bytes = self.pieces.append(payload)?;
            self.stats.pieces += 1;
            if self.backlog.is_empty() {
                out.extend_from_slice(bytes);
            } else {
                let data = bytes.to_vec();
                self.backlog.hold(data)?;
            }
        }
        if let Some(chunk) = self.pieces.cut(cut)? {
            self.stats.literals += 1;
            self.store(&chunk);
        }
        Ok(())
    }

    /// A literal, stored under `name` when the frame gives one (unhashed:
    /// every read from the store verifies, so a wrong name costs a repair,
    /// never a wrong byte) and under its hash otherwise.
    pub(super) fn literal(
        &mut self,
        name: Option<Fingerprint>,
        payload: Payload<'_>,
        out: &mut Vec<u8>,
    ) -> Result<(), DecodeError> {
        self.stats.literals += 1;
        self.pieces.check_rest(payload.raw_len as usize)?;
        if self.backlog.is_empty() {
            let start = out.len();
            payload.decode_into(out)?;
            self.store_first(name, &out[start..]);
        } else {
            let mut data = Vec::with_capacity(payload.raw_len as usize);
            payload.decode_into(&mut data)?;
            self.store_first(name, &data);
            self.backlog.hold(data)?;
        }
        Ok(())
    }

    /// A run of literals, continuing the flow's stream when `stream`
    /// is set (to whether it starts a new one).
    pub(super) fn run(
        &mut self,
        stream: Option<bool>,
        run: Run<'_>,
        out: &mut Vec<u8>,
    ) -> Result<(), DecodeError> {
        self.stats.literals += run.count() as u64;
        self.pieces.check_rest(run.lengths().next().unwrap_or(0))?;
        let mut data = Vec::new();
        let sink = if self.backlog.is_empty() {
            &mut *out
        } else {
            data.reserve_exact(run.raw_len());
            &mut data
        };
        let start = sink.len();
        match stream {
            Some(fresh) => self.stream.decode_into(fresh, &run, sink)?,
            None => run.decode_into(sink)?,
        }
        if self.backlog.is_empty() {
            self.store_run(&out[start..], run.lengths());
        } else {
            self.store_run(&data, run.lengths());
            self.backlog.hold(data)?;
        }
        Ok(())
    }

    /// Stores a chunk under its hash.
    pub(super) fn store(&mut self, data: &[u8]) {
        self.store_as(Fingerprint::of(data), data);
    }

    /// Stores a chunk under `fingerprint`.
    fn store_as(&mut self, fingerprint: Fingerprint, data: &[u8]) {
        self.from_peer.decoded(fingerprint);
        match self.cache.lock().store.insert_buffered(fingerprint, data) {
            Ok(position) => self.to_peer.stored(fingerprint, position),
            Err(_) => self.stats.store_errors += 1,
        }
    }

    /// Stores each chunk of a decoded run (`data`, split at `lengths`).
    /// The first chunk of a run comes after a `PieceRest` (checked before
    /// decoding).
    fn store_run(&mut self, data: &[u8], lengths: impl Iterator<Item = usize>) {
        let mut chunks = split_run(data, lengths);
        if let Some(first) = chunks.next() {
            self.store_first(None, first);
        }
        for chunk in chunks {
            self.store(chunk);
        }
    }

    /// Stores a literal (under `name`, or its hash), or after a
    /// `PieceRest` the chunk the held pieces and it make.
    fn store_first(&mut self, name: Option<Fingerprint>, first: &[u8]) {
        match self.pieces.join_rest(first) {
            None => {
                let fingerprint = name.unwrap_or_else(|| Fingerprint::of(first));
                self.store_as(fingerprint, first);
            }
            Some(chunk) => {
                let fingerprint = name.unwrap_or_else(|| Fingerprint::of(&chunk));
                self.store_as(fingerprint, &chunk);
            }
        }
    }
}
