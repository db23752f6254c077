//! The data frames (encoder -> decoder) as a typed [`DataRepr`], and
//! writing them.

use crate::compress::Codec;
use crate::fingerprint::{Fingerprint, FINGERPRINT_LEN};

use super::header::{emit_header, MAGIC};
use super::kind;
use super::payload::Payload;
use super::run::{Run, STREAM_FRESH, STREAM_LZMA, STREAM_PPMD};
use super::span::SPAN_ENTRY_LEN;

/// A parsed data frame (encoder -> decoder).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DataRepr<'a> {
    /// Stream preamble carrying the format version.
    Preamble {
        /// Format version.
        version: u8,
    },
    /// A chunk carried in full.
    Literal(Payload<'a>),
    /// A chunk the decoder holds in its cache.
    Reference {
        /// Fingerprint of the chunk.
        fingerprint: Fingerprint,
        /// Its length.
        raw_len: u32,
    },
    /// A chunk sent in answer to a `NeedChunk`; not part of the byte stream
    /// at this position, it resolves earlier references.
    Repair {
        /// Fingerprint of the chunk.
        fingerprint: Fingerprint,
        /// The chunk.
        payload: Payload<'a>,
    },
    /// End of the encoded stream.
    End,
    /// A chunk compressed against a base chunk the decoder holds.
    Delta {
        /// Fingerprint of the chunk carried (checked after decoding).
        target: Fingerprint,
        /// Fingerprint of the base chunk (the zstd prefix).
        base: Fingerprint,
        /// Length of the chunk once decoded.
        raw_len: u32,
        /// The zstd frame.
        bytes: &'a [u8],
        /// The chunk begins with the bytes the decoder holds as pieces,
        /// which it completes (a `PieceDelta` frame; see the module
        /// documentation).
        after_pieces: bool,
    },
    /// Consecutive literal chunks compressed together.
    Run(Run<'a>),
    /// Consecutive literal chunks continuing the flow's compression stream
    /// (the run's codec is its engine, [`Codec::Zstd`](crate::frame::Codec::Zstd), [`Codec::Lzma`](crate::frame::Codec::Lzma) or
    /// [`Codec::Ppmd`](crate::frame::Codec::Ppmd));
    /// decode with a [`StreamDecoder`](crate::frame::StreamDecoder).
    StreamRun {
        /// Whether the run starts a new stream.
        fresh: bool,
        /// The chunks' lengths and the stream's bytes.
        run: Run<'a>,
    },
    /// The encoder freed its zstd stream (the flow went idle): the next
    /// `StreamRun` starts a new one.
    StreamEnd,
    /// Bytes of the chunk being cut, sent before it is complete (see the
    /// module documentation).
    Piece {
        /// 0, or the length of the chunk that the bytes held as pieces
        /// (these included) now complete, from the first held byte.
        cut: u32,
        /// The bytes, if any (a cut may add none).
        payload: Option<Payload<'a>>,
    },
    /// The chunk whose start the decoder holds as pieces is `cut` bytes
    /// long; its rest is the first chunk of the next frame, a literal or a
    /// run (see the module documentation).
    PieceRest {
        /// Length of the whole chunk, from the first byte held.
        cut: u32,
    },
    /// The chunk whose start the decoder holds as pieces is this one,
    /// which it holds in its store: the bytes after the pieces (see the
    /// module documentation).
    PieceRef {
        /// Fingerprint of the whole chunk.
        fingerprint: Fingerprint,
        /// Its length (more than the bytes held as pieces).
        raw_len: u32,
    },
    /// A chunk carried in full with its fingerprint (stored under it
    /// unhashed; see the module documentation).
    Named {
        /// Fingerprint of the chunk, as the encoder computed it.
        fingerprint: Fingerprint,
        /// The chunk.
        payload: Payload<'a>,
    },
    /// Consecutive chunks the decoder holds in its store, by the first.
    Span {
        /// Fingerprint of the first chunk.
        first: Fingerprint,
        /// How many chunks (2 to [`MAX_SPAN_CHUNKS`](crate::frame::MAX_SPAN_CHUNKS)).
        count: u16,
        /// Their total length (at most [`MAX_SPAN_LEN`](crate::frame::MAX_SPAN_LEN)).
        raw_len: u32,
        /// [`span_check`](crate::frame::span_check) of their fingerprints.
        check: Fingerprint,
    },
    /// The chunks of the span with `check`, one by one; not part of the
    /// byte stream at this position.
    SpanList {
        /// The span's check.
        check: Fingerprint,
        /// `(fingerprint, raw length u32)` entries, 20 bytes each (read
        /// them with [`span_entries`](crate::frame::span_entries)).
        entries: &'a [u8],
    },
}

impl DataRepr<'_> {
    /// Append the frame to `out`.
    pub fn emit(&self, out: &mut Vec<u8>) {
        match self {
            DataRepr::Preamble { version } => {
                emit_header(out, kind::PREAMBLE, 5);
                out.extend_from_slice(&MAGIC);
                out.push(*version);
            }
            DataRepr::Literal(payload) => {
                emit_header(out, kind::LITERAL, payload.body_len());
                payload.emit_body(out);
            }
            DataRepr::Reference {
                fingerprint,
                raw_len,
            }
            | DataRepr::PieceRef {
                fingerprint,
                raw_len,
            } => {
                let t = if matches!(self, DataRepr::Reference { .. }) {
                    kind::REFERENCE
                } else {
                    kind::PIECE_REF
                };
                emit_header(out, t, FINGERPRINT_LEN + 4);
                out.extend_from_slice(fingerprint.as_bytes());
                out.extend_from_slice(&raw_len.to_be_bytes());
            }
            DataRepr::Repair {
                fingerprint,
                payload,
            }
            | DataRepr::Named {
                fingerprint,
                payload,
            } => {
                let t = if matches!(self, DataRepr::Repair { .. }) {
                    kind::REPAIR
                } else {
                    kind::NAMED
                };
                emit_header(out, t, FINGERPRINT_LEN + payload.body_len());
                out.extend_from_slice(fingerprint.as_bytes());
                payload.emit_body(out);
            }
            DataRepr::End => emit_header(out, kind::END, 0),
            DataRepr::StreamEnd => emit_header(out, kind::STREAM_END, 0),
            DataRepr::PieceRest { cut } => {
                emit_header(out, kind::PIECE_REST, 4);
                out.extend_from_slice(&cut.to_be_bytes());
            }
            DataRepr::Piece { cut, payload } => {
                emit_header(out, kind::PIECE, 4 + payload.map_or(0, |p| p.body_len()));
                out.extend_from_slice(&cut.to_be_bytes());
                if let Some(payload) = payload {
                    payload.emit_body(out);
                }
            }
            DataRepr::Delta {
                target,
                base,
                raw_len,
                bytes,
                after_pieces,
            } => {
                let t = if *after_pieces {
                    kind::PIECE_DELTA
                } else {
                    kind::DELTA
                };
                emit_header(out, t, 2 * FINGERPRINT_LEN + 4 + bytes.len());
                out.extend_from_slice(target.as_bytes());
                out.extend_from_slice(base.as_bytes());
                out.extend_from_slice(&raw_len.to_be_bytes());
                out.extend_from_slice(bytes);
            }
            DataRepr::Span {
                first,
                count,
                raw_len,
                check,
            } => {
                emit_header(out, kind::SPAN, 2 * FINGERPRINT_LEN + 6);
                out.extend_from_slice(first.as_bytes());
                out.extend_from_slice(&count.to_be_bytes());
                out.extend_from_slice(&raw_len.to_be_bytes());
                out.extend_from_slice(check.as_bytes());
            }
            DataRepr::SpanList { check, entries } => {
                emit_header(out, kind::SPAN_LIST, FINGERPRINT_LEN + 2 + entries.len());
                out.extend_from_slice(check.as_bytes());
                out.extend_from_slice(&((entries.len() / SPAN_ENTRY_LEN) as u16).to_be_bytes());
                out.extend_from_slice(entries);
            }
            DataRepr::Run(run) => run.emit(kind::RUN, run.codec.to_byte(), out),
            DataRepr::StreamRun { fresh, run } => {
                let mut flags = if *fresh { STREAM_FRESH } else { 0 };
                match run.codec {
                    Codec::Lzma => flags |= STREAM_LZMA,
                    Codec::Ppmd => flags |= STREAM_PPMD,
                    Codec::Raw | Codec::Lz4 | Codec::Zstd => {}
                }
                run.emit(kind::STREAM_RUN, flags, out)
            }
        }
    }
}
