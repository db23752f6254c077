//! The decoder: frames from the WAN -> plain bytes for the LAN, plus control
//! frames for the reverse direction.

use std::collections::VecDeque;

use thiserror::Error;

use crate::cache::PeerCache;
use crate::chunker::MAX_CHUNK_LEN;
use crate::control::{ControlRepr, RecentChunks, MAX_ACK_ENTRIES};
use crate::fingerprint::Fingerprint;
use crate::frame::{
    delta_decompress, span_check, span_entries, split_run, DataRepr, Frame, FrameError, Payload,
    Run, StreamDecoder, HEADER_LEN, MAX_FRAME_BODY,
};
use crate::stats::DecoderStats;
use crate::store::index::FingerprintMap;

/// Decoder settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct DecoderConfig {
    /// Bound on the bytes held back behind an unresolved reference while
    /// its repair is on the way (about one round trip of data).
    pub max_backlog: usize,
    /// Bound on control frames from the peer waiting for
    /// [`Decoder::poll_peer_control`].
    pub max_peer_control: usize,
}

impl Default for DecoderConfig {
    fn default() -> Self {
        DecoderConfig {
            max_backlog: 64 << 20,
            max_peer_control: 1 << 16,
        }
    }
}

/// Error decoding the stream. Every variant is fatal for the flow: reset
/// the stream (no byte is delivered wrong; none is delivered after this).
#[derive(Debug, Error, PartialEq, Eq)]
pub enum DecodeError {
    /// A frame is malformed.
    #[error(transparent)]
    Frame(#[from] FrameError),
    /// The stream does not start with a preamble.
    #[error("stream does not start with a codec preamble")]
    MissingPreamble,
    /// A second preamble.
    #[error("duplicate preamble")]
    DuplicatePreamble,
    /// A data frame after `End`.
    #[error("data frame after end of stream")]
    DataAfterEnd,
    /// A reference's length differs from the chunk it names.
    #[error("reference length does not match the cached chunk")]
    LengthMismatch,
    /// A repair's data does not match its fingerprint (or a span list its
    /// check).
    #[error("repair data does not match its fingerprint")]
    RepairMismatch,
    /// Too many bytes wait behind unresolved references.
    #[error("backlog behind unresolved references exceeds the limit")]
    BacklogFull,
    /// Too many control frames wait for the local encoder.
    #[error("too many unread control frames from the peer")]
    ControlOverflow,
    /// Pieces that do not add up: a cut beyond the bytes held, more held
    /// than a chunk can be, another frame carrying bytes of the stream
    /// (or its end) while a chunk's pieces are unfinished (control frames,
    /// repairs, span lists and `StreamEnd` may come between them), a
    /// `PieceRef`, `PieceDelta` or `PieceRest` without
    /// pieces or no longer than them, a chunk that does not begin with
    /// them, or a rest that does not make the length its `PieceRest` said.
    #[error("pieces of a chunk out of order")]
    PieceOrder,
}

#[derive(Debug)]
enum Pending {
    Data(Vec<u8>),
    /// A chunk to be repaired; `prefix` is what was delivered of it as
    /// pieces (empty for a reference), the rest is delivered.
    Missing {
        fingerprint: Fingerprint,
        len: u32,
        prefix: Vec<u8>,
    },
    MissingSpan {
        check: Fingerprint,
        len: u32,
    },
    End,
}

/// Decodes one direction of one flow. Sans-IO: bytes in, bytes out.
#[derive(Debug)]
pub struct Decoder {
    cache: PeerCache,
    config: DecoderConfig,
    partial: Vec<u8>,
    started: bool,
    end_seen: bool,
    finished: bool,
    backlog: VecDeque<Pending>,
    backlog_bytes: usize,
    missing: FingerprintMap<()>,
    missing_spans: FingerprintMap<()>,
    control: VecDeque<ControlRepr>,
    acks: Vec<(Fingerprint, u64)>,
    peer_control: VecDeque<ControlRepr>,
    /// The chunks decoded last, for the peer's `Sent` frames.
    recent: RecentChunks,
    stream: StreamDecoder,
    /// Bytes delivered as `Piece`s whose chunk is not cut yet.
    pieces: Vec<u8>,
    /// After a `PieceRest`: the length of the chunk the pieces begin,
    /// whose rest is the next literal's or run's first chunk.
    rest: Option<u32>,
    stats: DecoderStats,
}

impl Decoder {
    /// A decoder for a new flow from the peer of `cache`.
    pub fn new(cache: PeerCache, config: DecoderConfig) -> Self {
        Decoder {
            cache,
            config,
            partial: Vec::new(),
            started: false,
            end_seen: false,
            finished: false,
            backlog: VecDeque::new(),
            backlog_bytes: 0,
            missing: FingerprintMap::default(),
            missing_spans: FingerprintMap::default(),
            control: VecDeque::new(),
            acks: Vec::new(),
            peer_control: VecDeque::new(),
            recent: RecentChunks::default(),
            stream: StreamDecoder::default(),
            pieces: Vec::new(),
            rest: None,
            stats: DecoderStats::default(),
        }
    }

    /// Decode `wire` (any piece of the stream); plain bytes are appended to
    /// `out` in order. Afterwards drain [`Decoder::poll_control`] (to the
    /// peer) and [`Decoder::poll_peer_control`] (to the local encoder).
    pub fn push(&mut self, mut wire: &[u8], out: &mut Vec<u8>) -> Result<(), DecodeError> {
        self.stats.wan_bytes_in += wire.len() as u64;
        let before = out.len();
        let result = (|| {
            if !self.partial.is_empty() {
                // Complete the frame started by an earlier piece.
                if self.partial.len() < HEADER_LEN {
                    let take = (HEADER_LEN - self.partial.len()).min(wire.len());
                    self.partial.extend_from_slice(&wire[..take]);
                    wire = &wire[take..];
                    if self.partial.len() < HEADER_LEN {
                        return Ok(());
                    }
                }
                let total = frame_total_len(&self.partial)?;
                let take = (total - self.partial.len()).min(wire.len());
                self.partial.extend_from_slice(&wire[..take]);
                wire = &wire[take..];
                if self.partial.len() < total {
                    return Ok(());
                }
                let frame = std::mem::take(&mut self.partial);
                self.handle_frame(&frame, out)?;
            }
            while !wire.is_empty() {
                if wire.len() < HEADER_LEN {
                    break;
                }
                let total = frame_total_len(wire)?;
                if wire.len() < total {
                    break;
                }
                self.handle_frame(&wire[..total], out)?;
                wire = &wire[total..];
            }
            if !wire.is_empty() {
                if wire.len() >= HEADER_LEN {
                    frame_total_len(wire)?;
                }
                self.partial.extend_from_slice(wire);
            }
            Ok(())
        })();
        self.stats.lan_bytes_out += (out.len() - before) as u64;
        result
    }

    /// Next control frame for the peer's encoder (write it with
    /// [`ControlRepr::emit`] on the reverse direction of this flow).
    #[must_use]
    pub fn poll_control(&mut self) -> Option<ControlRepr> {
        if !self.acks.is_empty() {
            let low_water = {
                let mut shared = self.cache.lock();
                // The literals stored since the last Ack reach the file
                // (one write) before the peer hears we hold them.
                if shared.store.flush_announced(&mut self.acks).is_err() {
                    self.stats.store_errors += 1;
                }
                shared.store.low()
            };
            if !self.acks.is_empty() {
                let take = self.acks.len().min(MAX_ACK_ENTRIES);
                let entries: Vec<_> = self.acks.drain(..take).collect();
                return Some(ControlRepr::Ack { low_water, entries });
            }
        }
        self.control.pop_front()
    }

    /// Write every pending control frame to `out` (convenience over
    /// [`Decoder::poll_control`]).
    pub fn emit_control(&mut self, out: &mut Vec<u8>) {
        while let Some(c) = self.poll_control() {
            c.emit(out);
        }
    }

    /// Next control frame that arrived from the peer's decoder, for the
    /// local [`crate::Encoder::handle_peer`].
    #[must_use]
    pub fn poll_peer_control(&mut self) -> Option<ControlRepr> {
        self.peer_control.pop_front()
    }

    /// True once `End` was decoded and every byte before it delivered (the
    /// LAN side can be shut down for writing).
    pub fn is_finished(&self) -> bool {
        self.finished
    }

    /// Bytes held back behind unresolved references (for back-pressure).
    pub fn backlog_bytes(&self) -> usize {
        self.backlog_bytes
    }

    /// Bytes held by the flow's stream decompression context, zstd or
    /// LZMA2 (0 when it has none): about 1.5 MiB or 1 MiB (the 1 MiB
    /// window and its buffers) while the peer's encoder keeps a stream.
    pub fn decompressor_bytes(&self) -> usize {
        self.stream.context_bytes()
    }

    /// Whether the flow's stream is in an engine that decodes at tens of
    /// MB/s (PPMd, LZMA2): a caller on an async runtime should decode off
    /// its worker. False before the peer's first stream run.
    pub fn decodes_slowly(&self) -> bool {
        self.stream.is_slow()
    }

    /// Whether pushing `wire` completes at least one frame, and so may
    /// decode a run, rather than only keeping part of one for later.
    pub fn push_completes_frame(&self, wire: &[u8]) -> bool {
        let have = self.partial.len();
        if have + wire.len() < HEADER_LEN {
            return false;
        }
        let mut header = [0u8; HEADER_LEN];
        let from_partial = have.min(HEADER_LEN);
        header[..from_partial].copy_from_slice(&self.partial[..from_partial]);
        header[from_partial..].copy_from_slice(&wire[..HEADER_LEN - from_partial]);
        // A bad header is an error the push reports at once: cheap.
        frame_total_len(&header).map_or(true, |total| have + wire.len() >= total)
    }

    /// Counters.
    pub fn stats(&self) -> DecoderStats {
        self.stats
    }

    fn handle_frame(&mut self, bytes: &[u8], out: &mut Vec<u8>) -> Result<(), DecodeError> {
        let frame = Frame::new_checked(bytes)?;
        let Some(repr) = DataRepr::parse(&frame)? else {
            return self.handle_control(&frame);
        };
        if self.handle_out_of_stream(repr, out)? {
            return Ok(());
        }
        self.handle_data(repr, out)
    }

    /// A control frame from the peer's decoder (or the peer's encoder's
    /// `Sent`), queued for the local encoder.
    fn handle_control(&mut self, frame: &Frame<&[u8]>) -> Result<(), DecodeError> {
        let Some(control) = ControlRepr::parse(frame)? else {
            return Err(FrameError::UnknownType(frame.frame_type()).into());
        };
        if self.peer_control.len() >= self.config.max_peer_control {
            return Err(DecodeError::ControlOverflow);
        }
        let control = match control {
            // The peer's encoder stored what it just sent: name the
            // chunks for the local encoder.
            ControlRepr::Sent { low_water, entries } => {
                let (entries, dropped) = self.recent.resolve(&entries);
                self.stats.sent_unresolved += dropped as u64;
                ControlRepr::Ack { low_water, entries }
            }
            other => other,
        };
        self.peer_control.push_back(control);
        Ok(())
    }

    /// Checks where a data frame may come, and handles those that are not
    /// bytes of the stream at their position (preamble, repairs, span
    /// lists, pieces): `true` when `repr` was handled here.
    fn handle_out_of_stream(
        &mut self,
        repr: DataRepr<'_>,
        out: &mut Vec<u8>,
    ) -> Result<bool, DecodeError> {
        match repr {
            DataRepr::Preamble { .. } => {
                if self.started {
                    return Err(DecodeError::DuplicatePreamble);
                }
                self.started = true;
            }
            _ if !self.started => return Err(DecodeError::MissingPreamble),
            DataRepr::Repair {
                fingerprint,
                payload,
            } => self.handle_repair(fingerprint, payload, out)?,
            DataRepr::SpanList { check, entries } => self.handle_span_list(check, entries, out)?,
            _ if self.end_seen => return Err(DecodeError::DataAfterEnd),
            // Only a literal or a run may carry the rest of the chunk.
            DataRepr::Literal(_)
            | DataRepr::Named { .. }
            | DataRepr::Run(_)
            | DataRepr::StreamRun { .. }
                if self.rest.is_some() =>
            {
                return Ok(false)
            }
            _ if self.rest.is_some() => return Err(DecodeError::PieceOrder),
            DataRepr::PieceRest { cut } => {
                self.check_pieces(cut)?;
                self.rest = Some(cut);
            }
            DataRepr::Piece { cut, payload } => self.piece(cut, payload, out)?,
            DataRepr::PieceRef {
                fingerprint,
                raw_len,
            } => self.piece_ref(fingerprint, raw_len, out)?,
            DataRepr::Delta {
                target,
                base,
                raw_len,
                bytes,
                after_pieces: true,
            } => {
                self.stats.deltas += 1;
                self.check_pieces(raw_len)?;
                let data = self.resolve_delta(&target, &base, raw_len, bytes);
                if let Some(data) = &data {
                    self.store(data);
                }
                self.complete_pieces(target, raw_len, data, out)?;
            }
            // A `StreamEnd` carries no byte of the stream: the encoder
            // frees its compressor when the flow goes quiet, whether or
            // not a chunk is open as pieces (an interactive session that
            // pauses with a request's chunk open), and the chunk goes on
            // after it.
            DataRepr::StreamEnd => return Ok(false),
            // The encoder finishes a chunk's pieces before anything else
            // of the byte stream.
            _ if !self.pieces.is_empty() => return Err(DecodeError::PieceOrder),
            _ => return Ok(false),
        }
        Ok(true)
    }

    /// A data frame that carries bytes of the stream at its position.
    fn handle_data(&mut self, repr: DataRepr<'_>, out: &mut Vec<u8>) -> Result<(), DecodeError> {
        match repr {
            DataRepr::Literal(payload) => self.literal(None, payload, out)?,
            DataRepr::Named {
                fingerprint,
                payload,
            } => self.literal(Some(fingerprint), payload, out)?,
            DataRepr::Run(run) => self.run(None, run, out)?,
            DataRepr::StreamRun { fresh, run } => self.run(Some(fresh), run, out)?,
            DataRepr::Reference {
                fingerprint,
                raw_len,
            } => self.reference(fingerprint, raw_len, out)?,
            DataRepr::Span {
                first,
                count,
                raw_len,
                check,
            } => self.span(first, count, raw_len, check, out)?,
            DataRepr::Delta {
                target,
                base,
                raw_len,
                bytes,
                after_pieces: _,
            } => self.delta(target, base, raw_len, bytes, out)?,
            DataRepr::StreamEnd => {
                // The encoder freed its compressor: free the context, the
                // next run starts a new stream (a run that does not is an
                // error, as before any stream).
                self.stream = StreamDecoder::default();
            }
            DataRepr::End => {
                self.end_seen = true;
                // No run can follow: free the zstd window (1 MiB) now,
                // not when the flow's other direction ends too.
                self.stream = StreamDecoder::default();
                if self.backlog.is_empty() {
                    self.finish();
                } else {
                    self.backlog.push_back(Pending::End);
                }
            }
            DataRepr::Preamble { .. }
            | DataRepr::Repair { .. }
            | DataRepr::SpanList { .. }
            | DataRepr::Piece { .. }
            | DataRepr::PieceRest { .. }
            | DataRepr::PieceRef { .. } => {}
        }
        Ok(())
    }

    /// A reference: the chunk from the store, or asked for.
    fn reference(
        &mut self,
        fingerprint: Fingerprint,
        raw_len: u32,
        out: &mut Vec<u8>,
    ) -> Result<(), DecodeError> {
        if self.backlog.is_empty() {
            let start = out.len();
            if self.lookup(&fingerprint, raw_len, out)? {
                return Ok(());
            }
            debug_assert_eq!(out.len(), start);
            self.enqueue_missing(fingerprint, raw_len, Vec::new())?;
        } else {
            let mut data = Vec::new();
            if self.lookup(&fingerprint, raw_len, &mut data)? {
                self.enqueue(Pending::Data(data))?;
            } else {
                self.enqueue_missing(fingerprint, raw_len, Vec::new())?;
            }
        }
        Ok(())
    }

    /// A span: its chunks from the store, or its list asked for.
    fn span(
        &mut self,
        first: Fingerprint,
        count: u16,
        raw_len: u32,
        check: Fingerprint,
        out: &mut Vec<u8>,
    ) -> Result<(), DecodeError> {
        self.stats.spans += 1;
        if self.backlog.is_empty() {
            if !self.resolve_span(first, count, raw_len, check, out) {
                self.enqueue_missing_span(check, raw_len)?;
            }
        } else {
            let mut data = Vec::new();
            if self.resolve_span(first, count, raw_len, check, &mut data) {
                self.enqueue(Pending::Data(data))?;
            } else {
                self.enqueue_missing_span(check, raw_len)?;
            }
        }
        Ok(())
    }

    /// A delta (not after pieces): the chunk decoded against its base, or
    /// asked for.
    fn delta(
        &mut self,
        target: Fingerprint,
        base: Fingerprint,
        raw_len: u32,
        bytes: &[u8],
        out: &mut Vec<u8>,
    ) -> Result<(), DecodeError> {
        self.stats.deltas += 1;
        match self.resolve_delta(&target, &base, raw_len, bytes) {
            Some(data) => {
                self.store(&data);
                if self.backlog.is_empty() {
                    out.extend_from_slice(&data);
                } else {
                    self.enqueue(Pending::Data(data))?;
                }
            }
            // Base missing or damaged: ask for the chunk itself.
            None => self.enqueue_missing(target, raw_len, Vec::new())?,
        }
        Ok(())
    }

    /// The chunk the held pieces begin is `fingerprint`, from the store:
    /// deliver what follows the pieces. A chunk that does not begin with
    /// them is an error (the encoder only says so of a chunk it cut from
    /// those bytes); a missing one is asked for like a reference's.
    fn piece_ref(
        &mut self,
        fingerprint: Fingerprint,
        raw_len: u32,
        out: &mut Vec<u8>,
    ) -> Result<(), DecodeError> {
        self.check_pieces(raw_len)?;
        let mut data = Vec::with_capacity(raw_len as usize);
        let found = self.lookup(&fingerprint, raw_len, &mut data)?;
        self.complete_pieces(fingerprint, raw_len, found.then_some(data), out)
    }

    /// A chunk that completes the held pieces must be longer than them.
    fn check_pieces(&self, raw_len: u32) -> Result<(), DecodeError> {
        let held = self.pieces.len();
        if held == 0 || held >= raw_len as usize {
            return Err(DecodeError::PieceOrder);
        }
        Ok(())
    }

    /// Deliver what `data`, the chunk `fingerprint` the held pieces begin,
    /// adds to them; ask for the chunk when it could not be had.
    fn complete_pieces(
        &mut self,
        fingerprint: Fingerprint,
        raw_len: u32,
        data: Option<Vec<u8>>,
        out: &mut Vec<u8>,
    ) -> Result<(), DecodeError> {
        let held = self.pieces.len();
        let Some(mut data) = data else {
            let prefix = std::mem::take(&mut self.pieces);
            return self.enqueue_missing(fingerprint, raw_len, prefix);
        };
        if data[..held] != self.pieces[..] {
            return Err(DecodeError::PieceOrder);
        }
        self.pieces.clear();
        if self.backlog.is_empty() {
            out.extend_from_slice(&data[held..]);
        } else {
            data.drain(..held);
            self.enqueue(Pending::Data(data))?;
        }
        Ok(())
    }

    /// Bytes of a chunk not complete yet: delivered now, held until the
    /// piece that cuts the chunk, which is then stored like a literal.
    fn piece(
        &mut self,
        cut: u32,
        payload: Option<Payload<'_>>,
        out: &mut Vec<u8>,
    ) -> Result<(), DecodeError> {
        let held = self.pieces.len();
        if let Some(payload) = payload {
            if held + payload.raw_len as usize > MAX_CHUNK_LEN {
                return Err(DecodeError::PieceOrder);
            }
            payload.decode_into(&mut self.pieces)?;
            self.stats.pieces += 1;
            let bytes = &self.pieces[held..];
            if self.backlog.is_empty() {
                out.extend_from_slice(bytes);
            } else {
                let data = bytes.to_vec();
                self.enqueue(Pending::Data(data))?;
            }
        }
        let cut = cut as usize;
        if cut > self.pieces.len() {
            return Err(DecodeError::PieceOrder);
        }
        if cut > 0 {
            self.stats.literals += 1;
            let chunk: Vec<u8> = self.pieces.drain(..cut).collect();
            self.store(&chunk);
        }
        Ok(())
    }

    /// A literal, stored under `name` when the frame gives one (unhashed:
    /// every read from the store verifies, so a wrong name costs a repair,
    /// never a wrong byte) and under its hash otherwise.
    fn literal(
        &mut self,
        name: Option<Fingerprint>,
        payload: Payload<'_>,
        out: &mut Vec<u8>,
    ) -> Result<(), DecodeError> {
        self.stats.literals += 1;
        self.check_rest(payload.raw_len as usize)?;
        if self.backlog.is_empty() {
            let start = out.len();
            payload.decode_into(out)?;
            self.store_first(name, &out[start..]);
        } else {
            let mut data = Vec::with_capacity(payload.raw_len as usize);
            payload.decode_into(&mut data)?;
            self.store_first(name, &data);
            self.enqueue(Pending::Data(data))?;
        }
        Ok(())
    }

    /// A run of literals, continuing the flow's stream when `stream`
    /// is set (to whether it starts a new one).
    fn run(
        &mut self,
        stream: Option<bool>,
        run: Run<'_>,
        out: &mut Vec<u8>,
    ) -> Result<(), DecodeError> {
        self.stats.literals += run.count() as u64;
        self.check_rest(run.lengths().next().unwrap_or(0))?;
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
            self.enqueue(Pending::Data(data))?;
        }
        Ok(())
    }

    /// Decode a delta against its base from the store; `None` when the
    /// base is not held (or damaged) or the result does not match `target`.
    fn resolve_delta(
        &mut self,
        target: &Fingerprint,
        base: &Fingerprint,
        raw_len: u32,
        bytes: &[u8],
    ) -> Option<Vec<u8>> {
        let mut base_data = Vec::new();
        let held = self
            .cache
            .lock()
            .store
            .get(base, &mut base_data)
            .unwrap_or(false);
        if !held {
            self.stats.cache_misses += 1;
            return None;
        }
        let mut data = vec![0u8; raw_len as usize];
        let decoded = delta_decompress(bytes, &base_data, &mut data);
        if decoded != Some(data.len()) || !target.matches(&data) {
            self.stats.bad_deltas += 1;
            return None;
        }
        self.stats.cache_hits += 1;
        Some(data)
    }

    fn handle_repair(
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
        if self.missing.remove(&fingerprint).is_none() {
            return Ok(());
        }
        for slot in self.backlog.iter_mut() {
            if let Pending::Missing {
                fingerprint: fp,
                len,
                prefix,
            } = slot
            {
                if *fp == fingerprint {
                    if *len as usize != data.len() {
                        return Err(DecodeError::LengthMismatch);
                    }
                    // Counted at its full length while it waited.
                    let Some(rest) = data.strip_prefix(&prefix[..]) else {
                        return Err(DecodeError::PieceOrder);
                    };
                    self.backlog_bytes -= prefix.len();
                    *slot = Pending::Data(rest.to_vec());
                }
            }
        }
        self.drain_backlog(out);
        Ok(())
    }

    /// Deliver the backlog up to its first unresolved entry.
    fn drain_backlog(&mut self, out: &mut Vec<u8>) {
        while let Some(front) = self.backlog.front() {
            match front {
                Pending::Missing { .. } | Pending::MissingSpan { .. } => break,
                Pending::Data(d) => {
                    self.backlog_bytes -= d.len();
                    out.extend_from_slice(d);
                }
                Pending::End => self.finish(),
            }
            self.backlog.pop_front();
        }
    }

    /// Resolve a span from the store: follow it from `first`, read each
    /// chunk verified, and compare the check and the length. Appends to
    /// `out` and returns true, or leaves `out` as it was.
    fn resolve_span(
        &mut self,
        first: Fingerprint,
        count: u16,
        raw_len: u32,
        check: Fingerprint,
        out: &mut Vec<u8>,
    ) -> bool {
        let start = out.len();
        let mut chain = Vec::with_capacity(usize::from(count));
        chain.push(first);
        {
            let shared = self.cache.lock();
            while chain.len() < usize::from(count) {
                match chain.last().and_then(|last| shared.store.successor(last)) {
                    Some(next) => chain.push(next),
                    None => break,
                }
            }
        }
        // One chunk per lock: other flows of this peer are not held up
        // behind a long span.
        let resolved = chain.len() == usize::from(count)
            && span_check(&chain) == check
            && chain
                .iter()
                .all(|fp| self.cache.lock().store.get(fp, out).unwrap_or(false))
            && out.len() - start == raw_len as usize;
        if resolved {
            self.stats.cache_hits += u64::from(count);
        } else {
            out.truncate(start);
            self.stats.span_misses += 1;
        }
        resolved
    }

    /// The chunks of a span this decoder could not resolve: each is looked
    /// up like a reference, the missing ones asked for with `NeedChunk`.
    fn handle_span_list(
        &mut self,
        check: Fingerprint,
        entries: &[u8],
        out: &mut Vec<u8>,
    ) -> Result<(), DecodeError> {
        if self.missing_spans.remove(&check).is_none() {
            return Ok(());
        }
        let list: Vec<(Fingerprint, u32)> = span_entries(entries).collect();
        if span_check(list.iter().map(|(fp, _)| fp)) != check {
            return Err(DecodeError::RepairMismatch);
        }
        let total: u64 = list.iter().map(|&(_, len)| u64::from(len)).sum();
        let mut backlog = std::mem::take(&mut self.backlog);
        let mut rebuilt = VecDeque::with_capacity(backlog.len() + list.len());
        for pending in backlog.drain(..) {
            let Pending::MissingSpan { check: c, len } = pending else {
                rebuilt.push_back(pending);
                continue;
            };
            if c != check {
                rebuilt.push_back(pending);
                continue;
            }
            if u64::from(len) != total {
                return Err(DecodeError::LengthMismatch);
            }
            for &(fingerprint, len) in &list {
                let mut data = Vec::new();
                if self.lookup(&fingerprint, len, &mut data)? {
                    rebuilt.push_back(Pending::Data(data));
                } else {
                    rebuilt.push_back(Pending::Missing {
                        fingerprint,
                        len,
                        prefix: Vec::new(),
                    });
                    if self.missing.insert(fingerprint, ()).is_none() {
                        self.control
                            .push_back(ControlRepr::NeedChunk { fingerprint });
                    }
                }
            }
        }
        self.backlog = rebuilt;
        self.drain_backlog(out);
        Ok(())
    }

    /// Resolve a reference from the store (verified read).
    fn lookup(
        &mut self,
        fingerprint: &Fingerprint,
        raw_len: u32,
        out: &mut Vec<u8>,
    ) -> Result<bool, DecodeError> {
        let start = out.len();
        let hit = self
            .cache
            .lock()
            .store
            .get(fingerprint, out)
            .unwrap_or(false);
        if !hit {
            self.stats.cache_misses += 1;
            return Ok(false);
        }
        if out.len() - start != raw_len as usize {
            out.truncate(start);
            return Err(DecodeError::LengthMismatch);
        }
        self.stats.cache_hits += 1;
        Ok(true)
    }

    /// Stores a literal (buffered: written when the next `Ack` is built).
    fn store(&mut self, data: &[u8]) {
        self.store_as(Fingerprint::of(data), data);
    }

    /// Stores a literal under `fingerprint`.
    fn store_as(&mut self, fingerprint: Fingerprint, data: &[u8]) {
        self.recent.push(fingerprint);
        match self.cache.lock().store.insert_buffered(fingerprint, data) {
            Ok(position) => self.acks.push((fingerprint, position)),
            Err(_) => self.stats.store_errors += 1,
        }
    }

    /// Stores each chunk of a decoded run (`data`, split at `lengths`).
    /// The first chunk of a run comes after a `PieceRest` (checked with
    /// [`Decoder::check_rest`] before decoding).
    fn store_run(&mut self, data: &[u8], lengths: impl Iterator<Item = usize>) {
        let mut chunks = split_run(data, lengths);
        if let Some(first) = chunks.next() {
            self.store_first(None, first);
        }
        for chunk in chunks {
            self.store(chunk);
        }
    }

    /// After a `PieceRest`, the next literal's or run's first chunk must
    /// be what the pieces lack of the chunk's length.
    fn check_rest(&self, first_len: usize) -> Result<(), DecodeError> {
        match self.rest {
            Some(cut) if self.pieces.len() + first_len != cut as usize => {
                Err(DecodeError::PieceOrder)
            }
            _ => Ok(()),
        }
    }

    /// Stores a literal (under `name`, or its hash), or after a
    /// `PieceRest` the chunk the held pieces and it make.
    fn store_first(&mut self, name: Option<Fingerprint>, first: &[u8]) {
        match self.rest.take() {
            None => {
                let fingerprint = name.unwrap_or_else(|| Fingerprint::of(first));
                self.store_as(fingerprint, first);
            }
            Some(_) => {
                let mut chunk = std::mem::take(&mut self.pieces);
                chunk.extend_from_slice(first);
                let fingerprint = name.unwrap_or_else(|| Fingerprint::of(&chunk));
                self.store_as(fingerprint, &chunk);
            }
        }
    }

    fn enqueue(&mut self, pending: Pending) -> Result<(), DecodeError> {
        let len = match &pending {
            Pending::Data(d) => d.len(),
            Pending::Missing { len, .. } | Pending::MissingSpan { len, .. } => *len as usize,
            Pending::End => 0,
        };
        if self.backlog_bytes + len > self.config.max_backlog {
            return Err(DecodeError::BacklogFull);
        }
        self.backlog_bytes += len;
        self.backlog.push_back(pending);
        Ok(())
    }

    fn enqueue_missing(
        &mut self,
        fingerprint: Fingerprint,
        len: u32,
        prefix: Vec<u8>,
    ) -> Result<(), DecodeError> {
        self.enqueue(Pending::Missing {
            fingerprint,
            len,
            prefix,
        })?;
        if self.missing.insert(fingerprint, ()).is_none() {
            self.control
                .push_back(ControlRepr::NeedChunk { fingerprint });
        }
        Ok(())
    }

    fn enqueue_missing_span(&mut self, check: Fingerprint, len: u32) -> Result<(), DecodeError> {
        self.enqueue(Pending::MissingSpan { check, len })?;
        if self.missing_spans.insert(check, ()).is_none() {
            self.control.push_back(ControlRepr::NeedSpan { check });
        }
        Ok(())
    }

    fn finish(&mut self) {
        if !self.finished {
            self.finished = true;
            self.control.push_back(ControlRepr::Done);
        }
    }
}

/// Total length of the frame whose header starts `bytes` (at least
/// `HEADER_LEN` long), checked against the limit.
fn frame_total_len(bytes: &[u8]) -> Result<usize, FrameError> {
    let frame = Frame::new_unchecked(bytes);
    let body = frame.body_len();
    if body > MAX_FRAME_BODY {
        return Err(FrameError::TooLong(body));
    }
    Ok(HEADER_LEN + body)
}
