//! The frame format shared by data and control messages.
//!
//! Every message on a codec stream is one frame:
//!
//! ```text
//!  0        1                 4
//! +--------+-----------------+----------------------+
//! |  type  | body length u24 | body (length bytes)  |
//! +--------+-----------------+----------------------+
//! ```
//!
//! Integers are big-endian. Data frames (encoder -> decoder):
//!
//! | type | name      | body |
//! | ---- | --------- | ---- |
//! | 0x01 | Preamble  | magic `"WOPC"`, version u8 (= [`VERSION`]) |
//! | 0x02 | Literal   | codec u8 (0 raw, 1 LZ4 block, 2 zstd frame), raw length u32, payload |
//! | 0x03 | Reference | fingerprint (16), raw length u32 |
//! | 0x04 | Repair    | fingerprint (16), codec u8, raw length u32, payload |
//! | 0x05 | End       | empty |
//! | 0x06 | Delta     | target fingerprint (16), base fingerprint (16), raw length u32, zstd frame |
//! | 0x07 | Run       | codec u8 (1 LZ4 block, 2 zstd frame), count u16, count x raw length u32, payload |
//! | 0x08 | Named     | fingerprint (16), codec u8, raw length u32, payload |
//! | 0x09 | Span      | first fingerprint (16), count u16, raw length u32, check (16) |
//! | 0x0a | SpanList  | check (16), count u16, count x (fingerprint (16), raw length u32) |
//! | 0x0b | StreamRun | flags u8 (bit 0: new stream, bit 1: LZMA2), count u16, count x raw length u32, stream bytes |
//! | 0x0c | StreamEnd | empty |
//! | 0x0d | Piece     | cut u32, then (unless the body ends) codec u8, raw length u32, payload |
//! | 0x0e | PieceRef  | fingerprint (16), raw length u32 |
//! | 0x0f | PieceDelta | as Delta |
//! | 0x10 | PieceRest | cut u32 |
//!
//! A `Span` stands for `count` chunks the decoder holds one after the other
//! in its store (the encoder knows from the positions in the decoder's
//! `Ack`s): the first one's fingerprint, the total length and a check, the
//! fingerprint of the chunks' fingerprints concatenated
//! ([`span_check`]). A file the peer has seen before crosses as one 42-byte
//! frame per 256 chunks instead of 24 bytes per chunk: on a 384 kbit/s
//! uplink, 60 ms less for a 1 MB file. The decoder follows its store from
//! the first chunk, reads each one verified, and compares the check; when
//! anything differs (evicted, damaged, another order) it asks with
//! `NeedSpan` and the encoder answers with a `SpanList`, the span's chunks
//! one by one, which the decoder resolves like references (asking for the
//! missing ones with `NeedChunk`). A `SpanList` is not part of the byte
//! stream at its position, like a `Repair`.
//!
//! A `Piece` carries bytes of the chunk being cut before the chunk is
//! complete: a source that trickles (small writes less than a couple of
//! milliseconds apart, never quiet long enough for the encoder's idle
//! flush) would otherwise wait for its chunk's content-defined end, tens
//! to hundreds of milliseconds. The decoder delivers a piece's bytes at
//! once and holds them; a piece with a non-zero `cut` says that the first
//! `cut` bytes held (this piece's included) form a chunk, which the decoder
//! stores like a literal, keeping the rest. Chunk boundaries do not move,
//! so what crosses again later still crosses as references. When the
//! chunk the pieces begin turns out to be one the decoder holds, a
//! `PieceRef` completes it: the decoder reads the chunk from its store,
//! checks that it begins with the bytes held, and delivers the rest (a
//! request sent at once, and the body behind it, crosses warm as
//! references all the same). A `PieceDelta` does the same for a chunk
//! encoded against a base the decoder holds (an upload of a file just
//! downloaded, behind its own request line), and is stored like a delta.
//! A `PieceRest` says that the chunk the pieces begin is `cut` bytes long
//! and that its rest is the first chunk of the next frame, a `Literal`,
//! `Named`, `Run` or `StreamRun`: the rest of a response's first chunk,
//! behind its header sent at once, goes into the flow's compression
//! stream with what follows it instead of being compressed alone.
//!
//! A `Named` literal is a `Literal` that carries its chunk's fingerprint,
//! so the decoder stores it without hashing it: a third of the decoder's
//! time on fresh data. The encoder names its literals where the CPU, not
//! the link, is the limit (LZ4 or no compression); with zstd, on slow
//! links, the 16 bytes per chunk are not worth it and the decoder hashes.
//! A wrong name cannot deliver a wrong byte: every read from the store is
//! checked against the fingerprint it is read by, and a chunk that fails
//! is dropped and asked for again like any damaged one.
//!
//! A `Run` carries consecutive literal chunks compressed together: the
//! compressor sees up to [`MAX_RUN_LEN`] bytes of context instead of one
//! chunk's (office documents come out a sixth to a third smaller than
//! chunk by chunk). The decoder decompresses the run and splits it at the
//! raw lengths; each piece is a chunk like a literal's.
//!
//! A `StreamRun` is a `Run` whose bytes continue one zstd (or LZMA2, see
//! below) stream, flushed at the end of each run, from one `StreamRun` to
//! the next of the same flow: the compressor keeps the flow's last [`STREAM_WINDOW_LOG`] bits
//! of history (1 MiB) instead of starting from nothing at each run, and
//! at the levels used on slow links it also picks its larger-input
//! parameters. Office documents cross 5-11% smaller than in independent
//! runs. Bit 0 of the flags starts a new stream (the decoder resets its
//! context first): the first run, a change of level or engine, and the
//! run after one that did not pay (sent raw, so the compressor's history
//! no longer matches the decoder's). The decoder keeps one decompression
//! context per flow ([`StreamDecoder`]) whose window is capped at
//! [`STREAM_WINDOW_LOG`]; a run must decode to exactly its raw length.
//! A `StreamEnd` says the encoder freed its compressor (the flow went
//! idle): the decoder frees its context too (about 1.5 MiB for zstd, 1
//! MiB for LZMA2), and the next `StreamRun` must start a new stream. It
//! carries no byte of the stream, so it may come between the pieces of a
//! chunk (a flow that went quiet with a chunk open).
//!
//! Bit 1 of a `StreamRun`'s flags says the stream is raw LZMA2
//! ([`Codec::Lzma`], dictionary [`STREAM_WINDOW_LOG`], each run ended by a
//! sync flush) instead of zstd: slower to compress (2-4 MB/s per core)
//! and 7-20% smaller on office documents, for links of a few Mbit/s and
//! less, where the CPU has time to spare. A stream keeps the engine it
//! started with: a run that continues a stream with the other engine is
//! an error. The decoder's dictionary is fixed by this format, never by
//! the peer (a hostile stream cannot make it allocate more).
//!
//! Bit 2 of a `StreamRun`'s flags (format 9) says the stream is PPMd
//! ([`Codec::Ppmd`]: PPMd var. H with 7-Zip's range coder, model order
//! [`PPMD_ORDER`] and [`PPMD_MEMORY`] bytes of model, both fixed by this
//! format): a context model (prediction by partial matching), 15-25% smaller than LZMA2
//! on text (8-bit or UTF-16) and worse on binary records, so encoders use
//! it for runs that are mostly text. A PPMd run's bytes are the CRC-32 of
//! its raw bytes (big-endian), then a range-coded stream ended at the
//! run's end (5 bytes); the next run starts a new range-coded stream with
//! the model kept. PPMd has no end of its own (an end marker would leave a
//! model that cannot go on), so the decoder checks the CRC: a model out of
//! step or a wrong length fails the run, never a wrong byte. Bits 1 and 2
//! together are an error.
//!
//! A `Delta` carries a chunk compressed by zstd with another chunk, the
//! *base*, as its prefix (single-use dictionary): an edited chunk crosses
//! as little more than the edit when the decoder holds the version before
//! it. The decoder reads the base from its cache, decodes, and checks the
//! result against the target fingerprint; when it cannot (base missing or
//! damaged), it asks for the target with `NeedChunk` like a missing
//! reference.
//!
//! Control frames (decoder -> the peer's encoder, see [`crate::control`])
//! use types 0x41..=0x44; `Sent` (0x45), an encoder's note of the chunks
//! it stored as it sent them, travels on the data stream like them; the
//! tunnel handshake [`crate::Hello`] is 0x60.
//! Every length is bounded by [`MAX_FRAME_BODY`]; a raw length above
//! [`MAX_CHUNK_LEN`] or a payload that does not decompress to exactly the
//! raw length is an error, never a panic or an unbounded allocation.

use std::ops::Range;

use thiserror::Error;

use crate::chunker::MAX_CHUNK_LEN;
use crate::compress::decompress_block;
use crate::fingerprint::{Fingerprint, FINGERPRINT_LEN};

/// Length of the frame header.
pub const HEADER_LEN: usize = 4;
/// Most chunks in one `Run` frame.
pub const MAX_RUN_CHUNKS: usize = 1024;
/// Most raw bytes in one `Run` frame.
pub const MAX_RUN_LEN: usize = MAX_CHUNK_LEN;
/// Largest frame body accepted (a repair frame of a maximal raw chunk, a
/// delta frame, whose payload is shorter than its chunk, or a run frame,
/// whose payload is shorter than its raw bytes).
pub const MAX_FRAME_BODY: usize = MAX_CHUNK_LEN + 3 + 4 * MAX_RUN_CHUNKS;
/// Most chunks in one `Span` (and `SpanList`) frame.
pub const MAX_SPAN_CHUNKS: usize = 256;
/// Most raw bytes one `Span` stands for.
pub const MAX_SPAN_LEN: usize = 4 << 20;

/// Magic bytes at the start of the preamble body.
pub const MAGIC: [u8; 4] = *b"WOPC";
/// Version of the frame format written by this crate (2: zstd literals,
/// delta frames; 3: run frames; 4: named literals; 5: spans; 6: stream
/// runs; 7: stream end; 8: LZMA2 stream runs; 9: PPMd stream runs; 10:
/// `Sent` acks; 11: pieces; 12: pieces completed by reference or delta).
pub const VERSION: u8 = 12;
pub use crate::compress::{
    delta_compress, delta_decompress, lzma_options, Codec, StreamDecoder, LZMA_DECODER_BYTES,
    PPMD_BYTES, PPMD_MEMORY, PPMD_ORDER, STREAM_WINDOW_LOG,
};

mod field {
    use std::ops::Range;
    pub const TYPE: usize = 0;
    pub const LENGTH: Range<usize> = 1..4;
}

/// Frame type codes.
pub mod kind {
    /// Stream preamble (magic and version).
    pub const PREAMBLE: u8 = 0x01;
    /// Literal chunk.
    pub const LITERAL: u8 = 0x02;
    /// Reference to a chunk by fingerprint.
    pub const REFERENCE: u8 = 0x03;
    /// Literal sent in answer to a `NeedChunk`.
    pub const REPAIR: u8 = 0x04;
    /// End of the encoded stream.
    pub const END: u8 = 0x05;
    /// Chunk encoded against a base chunk the decoder holds.
    pub const DELTA: u8 = 0x06;
    /// Consecutive literal chunks compressed together.
    pub const RUN: u8 = 0x07;
    /// Literal chunk with its fingerprint.
    pub const NAMED: u8 = 0x08;
    /// Consecutive chunks the decoder holds, by the first one.
    pub const SPAN: u8 = 0x09;
    /// The chunks of a `Span`, one by one (answer to `NeedSpan`).
    pub const SPAN_LIST: u8 = 0x0a;
    /// Consecutive literal chunks continuing the flow's zstd stream.
    pub const STREAM_RUN: u8 = 0x0b;
    /// The encoder freed its zstd stream: the decoder frees its context.
    pub const STREAM_END: u8 = 0x0c;
    /// Bytes of a chunk not yet complete (and where it ends, once known).
    pub const PIECE: u8 = 0x0d;
    /// The chunk the pieces held begin, by reference: the rest of it.
    pub const PIECE_REF: u8 = 0x0e;
    /// The chunk the pieces held begin, as a delta: the rest of it.
    pub const PIECE_DELTA: u8 = 0x0f;
    /// The chunk the pieces held begin ends in the next literal or run.
    pub const PIECE_REST: u8 = 0x10;
    /// Control: the decoder cannot resolve a reference.
    pub const NEED_CHUNK: u8 = 0x41;
    /// Control: the decoder stored chunks in its cache.
    pub const ACK: u8 = 0x42;
    /// Control: the decoder delivered everything up to `End`.
    pub const DONE: u8 = 0x43;
    /// Control: the decoder cannot resolve a span.
    pub const NEED_SPAN: u8 = 0x44;
    /// Control, on the data stream: the encoder stored the chunks it just
    /// sent (fingerprints by their first bytes).
    pub const SENT: u8 = 0x45;
    /// Tunnel handshake.
    pub const HELLO: u8 = 0x60;
}

/// Malformed frame.
#[derive(Debug, Error, PartialEq, Eq, Clone)]
pub enum FrameError {
    /// The buffer ends before the header or the body does.
    #[error("truncated frame")]
    Truncated,
    /// The body length is above [`MAX_FRAME_BODY`].
    #[error("frame body of {0} bytes exceeds the limit")]
    TooLong(usize),
    /// The type code is unknown.
    #[error("unknown frame type {0:#04x}")]
    UnknownType(u8),
    /// The body does not have the layout its type requires.
    #[error("malformed body of frame type {0:#04x}")]
    Malformed(u8),
    /// The preamble magic is wrong.
    #[error("not a wanopt codec stream (bad magic)")]
    BadMagic,
    /// The preamble announces a version this crate does not speak.
    #[error("unsupported codec version {0}")]
    UnsupportedVersion(u8),
    /// A raw length is zero or above [`MAX_CHUNK_LEN`].
    #[error("chunk length {0} out of range")]
    ChunkLength(u32),
    /// The compression codec byte is unknown.
    #[error("unknown compression codec {0}")]
    UnknownCodec(u8),
    /// A compressed payload does not decompress to its raw length.
    #[error("corrupt compressed payload")]
    Decompress,
}

/// Checked view of one frame at the start of a buffer.
#[derive(Debug, Clone)]
pub struct Frame<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Frame<T> {
    /// Wrap without checks (use [`Frame::new_checked`] for network bytes).
    pub fn new_unchecked(buffer: T) -> Self {
        Frame { buffer }
    }

    /// Wrap and check that the header and the whole body are present and
    /// that the body length is within bounds.
    pub fn new_checked(buffer: T) -> Result<Self, FrameError> {
        let frame = Frame::new_unchecked(buffer);
        frame.check_len()?;
        Ok(frame)
    }

    /// Check lengths (see [`Frame::new_checked`]).
    pub fn check_len(&self) -> Result<(), FrameError> {
        let data = self.buffer.as_ref();
        if data.len() < HEADER_LEN {
            return Err(FrameError::Truncated);
        }
        let body = self.body_len();
        if body > MAX_FRAME_BODY {
            return Err(FrameError::TooLong(body));
        }
        if data.len() < HEADER_LEN + body {
            return Err(FrameError::Truncated);
        }
        Ok(())
    }

    /// Type code.
    pub fn frame_type(&self) -> u8 {
        self.buffer.as_ref()[field::TYPE]
    }

    /// Body length from the header.
    pub fn body_len(&self) -> usize {
        let b = &self.buffer.as_ref()[field::LENGTH];
        (usize::from(b[0]) << 16) | (usize::from(b[1]) << 8) | usize::from(b[2])
    }

    /// Header plus body length.
    pub fn total_len(&self) -> usize {
        HEADER_LEN + self.body_len()
    }

    /// The body.
    pub fn body(&self) -> &[u8] {
        &self.buffer.as_ref()[HEADER_LEN..self.total_len()]
    }
}

/// Write a frame header for a body of `body_len` bytes.
pub fn emit_header(out: &mut Vec<u8>, frame_type: u8, body_len: usize) {
    debug_assert!(body_len <= MAX_FRAME_BODY);
    let len = body_len as u32;
    out.push(frame_type);
    out.extend_from_slice(&len.to_be_bytes()[1..]);
}

impl Codec {
    fn from_byte(b: u8) -> Result<Self, FrameError> {
        match b {
            0 => Ok(Codec::Raw),
            1 => Ok(Codec::Lz4),
            2 => Ok(Codec::Zstd),
            other => Err(FrameError::UnknownCodec(other)),
        }
    }

    fn to_byte(self) -> u8 {
        match self {
            Codec::Raw => 0,
            Codec::Lz4 => 1,
            Codec::Zstd => 2,
            // Never written in a codec byte (`StreamRun` flags carry them).
            Codec::Lzma => 3,
            Codec::Ppmd => 4,
        }
    }
}

/// A (possibly compressed) chunk payload as carried by literal and repair
/// frames.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Payload<'a> {
    /// How `bytes` is encoded.
    pub codec: Codec,
    /// Length of the chunk once decoded.
    pub raw_len: u32,
    /// The encoded bytes.
    pub bytes: &'a [u8],
}

impl Payload<'_> {
    /// Decode into `out` (appended). `out` grows by exactly `raw_len` on
    /// success and is left unchanged on error.
    pub fn decode_into(&self, out: &mut Vec<u8>) -> Result<(), FrameError> {
        // Only a stream run carries LZMA2 or PPMd (its own decoder).
        decompress_block(self.codec, self.bytes, self.raw_len as usize, out)
            .map_err(|_| FrameError::Decompress)
    }

    fn parse(body: &[u8], frame_type: u8) -> Result<Payload<'_>, FrameError> {
        let codec = Codec::from_byte(*body.first().ok_or(FrameError::Malformed(frame_type))?)?;
        let raw_len = read_u32(body, 1..5).ok_or(FrameError::Malformed(frame_type))?;
        if raw_len == 0 || raw_len as usize > MAX_CHUNK_LEN {
            return Err(FrameError::ChunkLength(raw_len));
        }
        let bytes = &body[5..];
        match codec {
            Codec::Raw if bytes.len() != raw_len as usize => Err(FrameError::Malformed(frame_type)),
            Codec::Lz4 | Codec::Zstd | Codec::Lzma | Codec::Ppmd
                if bytes.len() > raw_len as usize || bytes.is_empty() =>
            {
                Err(FrameError::Malformed(frame_type))
            }
            _ => Ok(Payload {
                codec,
                raw_len,
                bytes,
            }),
        }
    }

    fn emit_body(&self, out: &mut Vec<u8>) {
        out.push(self.codec.to_byte());
        out.extend_from_slice(&self.raw_len.to_be_bytes());
        out.extend_from_slice(self.bytes);
    }

    fn body_len(&self) -> usize {
        5 + self.bytes.len()
    }
}

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
    /// (the run's codec is its engine, [`Codec::Zstd`], [`Codec::Lzma`] or
    /// [`Codec::Ppmd`]);
    /// decode with a [`StreamDecoder`].
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
        /// How many chunks (2 to [`MAX_SPAN_CHUNKS`]).
        count: u16,
        /// Their total length (at most [`MAX_SPAN_LEN`]).
        raw_len: u32,
        /// [`span_check`] of their fingerprints.
        check: Fingerprint,
    },
    /// The chunks of the span with `check`, one by one; not part of the
    /// byte stream at this position.
    SpanList {
        /// The span's check.
        check: Fingerprint,
        /// `(fingerprint, raw length u32)` entries, 20 bytes each (read
        /// them with [`span_entries`]).
        entries: &'a [u8],
    },
}

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

/// Lengths carried as big-endian u32s (a `Run` frame's), as `usize`s.
pub fn run_lengths(lengths: &[u8]) -> impl Iterator<Item = usize> + '_ {
    lengths
        .chunks_exact(4)
        .map(|b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]) as usize)
}

/// `data` cut into consecutive pieces of the given lengths; ends early
/// rather than panic if the lengths add up to more than `data`.
pub fn split_run(data: &[u8], lengths: impl Iterator<Item = usize>) -> impl Iterator<Item = &[u8]> {
    lengths.scan(0usize, move |at, len| {
        let piece = data.get(*at..at.checked_add(len)?)?;
        *at += len;
        Some(piece)
    })
}

/// Consecutive literal chunks compressed together (a `Run` frame).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Run<'a> {
    /// How `bytes` is encoded (LZ4 or zstd; never raw).
    pub codec: Codec,
    /// The chunks' raw lengths, each a big-endian u32.
    pub lengths: &'a [u8],
    /// The chunks, concatenated and compressed.
    pub bytes: &'a [u8],
}

impl<'a> Run<'a> {
    /// The chunks' raw lengths, in order.
    pub fn lengths(&self) -> impl Iterator<Item = usize> + 'a {
        run_lengths(self.lengths)
    }

    /// How many chunks the run carries.
    pub fn count(&self) -> usize {
        self.lengths.len() / 4
    }

    /// Total raw length (what [`Run::decode_into`] appends).
    pub fn raw_len(&self) -> usize {
        self.lengths().sum()
    }

    /// Decode the concatenated chunks into `out` (appended); `out` grows by
    /// exactly [`Run::raw_len`] on success and is unchanged on error.
    pub fn decode_into(&self, out: &mut Vec<u8>) -> Result<(), FrameError> {
        Payload {
            codec: self.codec,
            raw_len: self.raw_len() as u32,
            bytes: self.bytes,
        }
        .decode_into(out)
    }

    fn parse(body: &'a [u8]) -> Result<Run<'a>, FrameError> {
        let codec = Codec::from_byte(*body.first().ok_or(FrameError::Malformed(kind::RUN))?)?;
        Run::parse_rest(codec, &body[1..], kind::RUN)
    }

    /// The body after its first byte (a `Run`'s codec, a `StreamRun`'s
    /// flags).
    fn parse_rest(codec: Codec, body: &'a [u8], t: u8) -> Result<Run<'a>, FrameError> {
        let malformed = FrameError::Malformed(t);
        let count = body
            .get(..2)
            .map(|b| usize::from(u16::from_be_bytes([b[0], b[1]])))
            .ok_or(malformed.clone())?;
        if codec == Codec::Raw || count == 0 || count > MAX_RUN_CHUNKS {
            return Err(malformed);
        }
        let lengths = body.get(2..2 + 4 * count).ok_or(malformed.clone())?;
        let bytes = &body[2 + 4 * count..];
        let run = Run {
            codec,
            lengths,
            bytes,
        };
        let mut total = 0usize;
        for len in run.lengths() {
            if len == 0 || len > MAX_CHUNK_LEN {
                return Err(FrameError::ChunkLength(len as u32));
            }
            total += len;
        }
        if total > MAX_RUN_LEN || bytes.is_empty() || bytes.len() > total {
            return Err(malformed);
        }
        Ok(run)
    }

    fn body_len(&self) -> usize {
        3 + self.lengths.len() + self.bytes.len()
    }

    /// Append the frame of type `t` whose body starts with `first` (the
    /// codec or the flags).
    fn emit(&self, t: u8, first: u8, out: &mut Vec<u8>) {
        emit_header(out, t, self.body_len());
        out.push(first);
        out.extend_from_slice(&(self.count() as u16).to_be_bytes());
        out.extend_from_slice(self.lengths);
        out.extend_from_slice(self.bytes);
    }
}

/// `StreamRun` flag: the run starts a new stream.
const STREAM_FRESH: u8 = 1;
/// `StreamRun` flag: the stream is LZMA2, not zstd.
const STREAM_LZMA: u8 = 2;
/// `StreamRun` flag: the stream is PPMd, not zstd.
const STREAM_PPMD: u8 = 4;

impl StreamDecoder {
    /// Decode a stream run into `out` (appended): `out` grows by exactly
    /// the run's raw length on success and is unchanged on error. A run
    /// that does not start a stream needs one started before it, with the
    /// same engine; after an error the stream is dropped (the flow cannot
    /// go on anyway).
    pub fn decode_into(
        &mut self,
        fresh: bool,
        run: &Run<'_>,
        out: &mut Vec<u8>,
    ) -> Result<(), FrameError> {
        self.decode_run(fresh, run.codec, run.bytes, run.raw_len(), out)
            .map_err(|_| FrameError::Decompress)
    }
}

fn read_u32(body: &[u8], range: Range<usize>) -> Option<u32> {
    Some(u32::from_be_bytes(body.get(range)?.try_into().ok()?))
}

/// Read a big-endian u64 at `range` of `body`.
pub(crate) fn read_u64(body: &[u8], range: Range<usize>) -> Option<u64> {
    Some(u64::from_be_bytes(body.get(range)?.try_into().ok()?))
}

impl<'a> DataRepr<'a> {
    /// Parse a data frame; `Ok(None)` when the frame is a control frame
    /// (types 0x40..=0x7f) that the caller should hand to
    /// [`crate::ControlRepr::parse`].
    pub fn parse(frame: &'a Frame<&'a [u8]>) -> Result<Option<DataRepr<'a>>, FrameError> {
        let body = frame.body();
        let t = frame.frame_type();
        let repr = match t {
            kind::PREAMBLE => {
                if body.len() != 5 {
                    return Err(FrameError::Malformed(t));
                }
                if body[..4] != MAGIC {
                    return Err(FrameError::BadMagic);
                }
                if body[4] != VERSION {
                    return Err(FrameError::UnsupportedVersion(body[4]));
                }
                DataRepr::Preamble { version: body[4] }
            }
            kind::LITERAL => DataRepr::Literal(Payload::parse(body, t)?),
            kind::PIECE => {
                let cut = read_u32(body, 0..4).ok_or(FrameError::Malformed(t))?;
                if cut as usize > MAX_CHUNK_LEN {
                    return Err(FrameError::ChunkLength(cut));
                }
                let payload = match &body[4..] {
                    [] if cut == 0 => return Err(FrameError::Malformed(t)),
                    [] => None,
                    rest => Some(Payload::parse(rest, t)?),
                };
                DataRepr::Piece { cut, payload }
            }
            kind::PIECE_REST => {
                if body.len() != 4 {
                    return Err(FrameError::Malformed(t));
                }
                let cut = read_u32(body, 0..4).ok_or(FrameError::Malformed(t))?;
                if cut < 2 || cut as usize > MAX_CHUNK_LEN {
                    return Err(FrameError::ChunkLength(cut));
                }
                DataRepr::PieceRest { cut }
            }
            kind::REFERENCE | kind::PIECE_REF => {
                if body.len() != FINGERPRINT_LEN + 4 {
                    return Err(FrameError::Malformed(t));
                }
                let fingerprint = Fingerprint::from_slice(body).ok_or(FrameError::Malformed(t))?;
                let raw_len = read_u32(body, FINGERPRINT_LEN..FINGERPRINT_LEN + 4)
                    .ok_or(FrameError::Malformed(t))?;
                if raw_len == 0 || raw_len as usize > MAX_CHUNK_LEN {
                    return Err(FrameError::ChunkLength(raw_len));
                }
                if t == kind::REFERENCE {
                    DataRepr::Reference {
                        fingerprint,
                        raw_len,
                    }
                } else {
                    DataRepr::PieceRef {
                        fingerprint,
                        raw_len,
                    }
                }
            }
            kind::REPAIR | kind::NAMED => {
                let fingerprint = Fingerprint::from_slice(body).ok_or(FrameError::Malformed(t))?;
                let payload = Payload::parse(&body[FINGERPRINT_LEN..], t)?;
                if t == kind::REPAIR {
                    DataRepr::Repair {
                        fingerprint,
                        payload,
                    }
                } else {
                    DataRepr::Named {
                        fingerprint,
                        payload,
                    }
                }
            }
            kind::END => {
                if !body.is_empty() {
                    return Err(FrameError::Malformed(t));
                }
                DataRepr::End
            }
            kind::STREAM_END => {
                if !body.is_empty() {
                    return Err(FrameError::Malformed(t));
                }
                DataRepr::StreamEnd
            }
            kind::DELTA | kind::PIECE_DELTA => {
                const FIXED: usize = 2 * FINGERPRINT_LEN + 4;
                let target = Fingerprint::from_slice(body).ok_or(FrameError::Malformed(t))?;
                let base = body
                    .get(FINGERPRINT_LEN..)
                    .and_then(Fingerprint::from_slice)
                    .ok_or(FrameError::Malformed(t))?;
                let raw_len =
                    read_u32(body, 2 * FINGERPRINT_LEN..FIXED).ok_or(FrameError::Malformed(t))?;
                if raw_len == 0 || raw_len as usize > MAX_CHUNK_LEN {
                    return Err(FrameError::ChunkLength(raw_len));
                }
                let bytes = &body[FIXED..];
                if bytes.is_empty() || bytes.len() >= raw_len as usize {
                    return Err(FrameError::Malformed(t));
                }
                DataRepr::Delta {
                    target,
                    base,
                    raw_len,
                    bytes,
                    after_pieces: t == kind::PIECE_DELTA,
                }
            }
            kind::RUN => DataRepr::Run(Run::parse(body)?),
            kind::STREAM_RUN => {
                let flags = *body.first().ok_or(FrameError::Malformed(t))?;
                let codec = match flags & !STREAM_FRESH {
                    0 => Codec::Zstd,
                    STREAM_LZMA => Codec::Lzma,
                    STREAM_PPMD => Codec::Ppmd,
                    _ => return Err(FrameError::Malformed(t)),
                };
                DataRepr::StreamRun {
                    fresh: flags & STREAM_FRESH != 0,
                    run: Run::parse_rest(codec, &body[1..], t)?,
                }
            }
            kind::SPAN => {
                const LEN: usize = 2 * FINGERPRINT_LEN + 6;
                if body.len() != LEN {
                    return Err(FrameError::Malformed(t));
                }
                let first = Fingerprint::from_slice(body).ok_or(FrameError::Malformed(t))?;
                let count = u16::from_be_bytes([body[16], body[17]]);
                let raw_len = read_u32(body, 18..22).ok_or(FrameError::Malformed(t))?;
                let check = Fingerprint::from_slice(&body[22..]).ok_or(FrameError::Malformed(t))?;
                if !(2..=MAX_SPAN_CHUNKS).contains(&usize::from(count))
                    || raw_len < u32::from(count)
                    || raw_len as usize > MAX_SPAN_LEN
                {
                    return Err(FrameError::Malformed(t));
                }
                DataRepr::Span {
                    first,
                    count,
                    raw_len,
                    check,
                }
            }
            kind::SPAN_LIST => {
                let check = Fingerprint::from_slice(body).ok_or(FrameError::Malformed(t))?;
                let count = body
                    .get(FINGERPRINT_LEN..FINGERPRINT_LEN + 2)
                    .map(|b| usize::from(u16::from_be_bytes([b[0], b[1]])))
                    .ok_or(FrameError::Malformed(t))?;
                let entries = &body[FINGERPRINT_LEN + 2..];
                if !(1..=MAX_SPAN_CHUNKS).contains(&count)
                    || entries.len() != count * SPAN_ENTRY_LEN
                {
                    return Err(FrameError::Malformed(t));
                }
                if let Some((_, len)) =
                    span_entries(entries).find(|&(_, len)| len == 0 || len as usize > MAX_CHUNK_LEN)
                {
                    return Err(FrameError::ChunkLength(len));
                }
                DataRepr::SpanList { check, entries }
            }
            0x40..=0x7f => return Ok(None),
            other => return Err(FrameError::UnknownType(other)),
        };
        Ok(Some(repr))
    }

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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compress::{Engine, Role};
    use proptest::prelude::*;

    fn round_trip(repr: DataRepr<'_>) {
        let mut buf = Vec::new();
        repr.emit(&mut buf);
        let frame = Frame::new_checked(&buf[..]).unwrap();
        assert_eq!(frame.total_len(), buf.len());
        assert_eq!(DataRepr::parse(&frame).unwrap(), Some(repr));
    }

    #[test]
    fn data_frames_round_trip() {
        let fp = Fingerprint::of(b"x");
        round_trip(DataRepr::Preamble { version: VERSION });
        round_trip(DataRepr::Literal(Payload {
            codec: Codec::Raw,
            raw_len: 3,
            bytes: b"abc",
        }));
        round_trip(DataRepr::Reference {
            fingerprint: fp,
            raw_len: 8192,
        });
        round_trip(DataRepr::Repair {
            fingerprint: fp,
            payload: Payload {
                codec: Codec::Raw,
                raw_len: 1,
                bytes: b"x",
            },
        });
        round_trip(DataRepr::End);
        round_trip(DataRepr::StreamEnd);
        round_trip(DataRepr::Piece {
            cut: 0,
            payload: Some(Payload {
                codec: Codec::Raw,
                raw_len: 3,
                bytes: b"abc",
            }),
        });
        round_trip(DataRepr::Piece {
            cut: 9000,
            payload: None,
        });
        round_trip(DataRepr::PieceRef {
            fingerprint: fp,
            raw_len: 9000,
        });
        round_trip(DataRepr::PieceRest { cut: 9000 });
        for (body, err) in [
            (&[0u8, 0, 0][..], FrameError::Malformed(kind::PIECE_REST)),
            (
                &[0, 0, 0, 0, 0][..],
                FrameError::Malformed(kind::PIECE_REST),
            ),
            (&[0, 0, 0, 1][..], FrameError::ChunkLength(1)),
            (&[0, 0x10, 0, 1][..], FrameError::ChunkLength(0x0010_0001)),
        ] {
            let mut buf = Vec::new();
            emit_header(&mut buf, kind::PIECE_REST, body.len());
            buf.extend_from_slice(body);
            let frame = Frame::new_checked(&buf[..]).unwrap();
            assert_eq!(DataRepr::parse(&frame).map(|_| ()), Err(err));
        }
        // References (to whole chunks or after pieces) of the wrong size,
        // of no bytes, or longer than a chunk may be.
        for t in [kind::REFERENCE, kind::PIECE_REF] {
            let parse = |body: &[u8]| {
                let mut buf = Vec::new();
                emit_header(&mut buf, t, body.len());
                buf.extend_from_slice(body);
                let frame = Frame::new_checked(&buf[..]).unwrap();
                DataRepr::parse(&frame).map(|_| ())
            };
            let mut body = fp.as_bytes().to_vec();
            assert_eq!(parse(&body), Err(FrameError::Malformed(t)));
            body.extend_from_slice(&0u32.to_be_bytes());
            assert_eq!(parse(&body), Err(FrameError::ChunkLength(0)));
            body.truncate(FINGERPRINT_LEN);
            body.extend_from_slice(&(MAX_CHUNK_LEN as u32 + 1).to_be_bytes());
            assert_eq!(
                parse(&body),
                Err(FrameError::ChunkLength(MAX_CHUNK_LEN as u32 + 1))
            );
            body.push(0);
            assert_eq!(parse(&body), Err(FrameError::Malformed(t)));
        }
        // Pieces that cannot be: too short for the cut, a cut beyond the
        // largest chunk, neither bytes nor a cut, a bad payload.
        let piece = |body: &[u8]| {
            let mut buf = Vec::new();
            emit_header(&mut buf, kind::PIECE, body.len());
            buf.extend_from_slice(body);
            let frame = Frame::new_checked(&buf[..]).unwrap();
            DataRepr::parse(&frame).map(|_| ())
        };
        assert_eq!(piece(&[0, 0, 1]), Err(FrameError::Malformed(kind::PIECE)));
        let too_long = (MAX_CHUNK_LEN as u32 + 1).to_be_bytes();
        assert_eq!(
            piece(&too_long),
            Err(FrameError::ChunkLength(MAX_CHUNK_LEN as u32 + 1))
        );
        assert_eq!(piece(&[0; 4]), Err(FrameError::Malformed(kind::PIECE)));
        assert_eq!(
            piece(&[0, 0, 0, 0, 0, 0, 0, 0, 4, b'a']),
            Err(FrameError::Malformed(kind::PIECE))
        );
        round_trip(DataRepr::Named {
            fingerprint: fp,
            payload: Payload {
                codec: Codec::Raw,
                raw_len: 1,
                bytes: b"x",
            },
        });
        round_trip(DataRepr::Span {
            first: fp,
            count: 3,
            raw_len: 30_000,
            check: span_check(&[fp, fp, fp]),
        });
        let list = [(fp, 10_000u32), (Fingerprint::of(b"y"), 20_000)];
        let mut buf = Vec::new();
        emit_span_list(&fp, &list, &mut buf);
        let f = Frame::new_checked(&buf[..]).unwrap();
        let Ok(Some(DataRepr::SpanList { check, entries })) = DataRepr::parse(&f) else {
            panic!("span list does not parse");
        };
        assert_eq!(check, fp);
        assert_eq!(span_entries(entries).collect::<Vec<_>>(), list);
        round_trip(DataRepr::SpanList { check, entries });
        // The check depends on every fingerprint and their order.
        let (a, b) = (Fingerprint::of(b"a"), Fingerprint::of(b"b"));
        assert_ne!(span_check(&[a, b]), span_check(&[b, a]));
        assert_ne!(span_check(&[a, b]), span_check(&[a, b, b]));
        // A named literal too short for its fingerprint.
        let mut short = Vec::new();
        emit_header(&mut short, kind::NAMED, 10);
        short.extend_from_slice(&[0; 10]);
        let f = Frame::new_checked(&short[..]).unwrap();
        assert_eq!(
            DataRepr::parse(&f).unwrap_err(),
            FrameError::Malformed(kind::NAMED)
        );
    }

    fn run_frame(codec: u8, lengths: &[u32], payload: &[u8]) -> Vec<u8> {
        typed_run_frame(kind::RUN, codec, lengths, payload)
    }

    /// A `Run` (first byte: the codec) or `StreamRun` (the flags) frame.
    fn typed_run_frame(t: u8, first: u8, lengths: &[u32], payload: &[u8]) -> Vec<u8> {
        let mut body = vec![first];
        body.extend_from_slice(&(lengths.len() as u16).to_be_bytes());
        for len in lengths {
            body.extend_from_slice(&len.to_be_bytes());
        }
        body.extend_from_slice(payload);
        let mut frame = Vec::new();
        emit_header(&mut frame, t, body.len());
        frame.extend_from_slice(&body);
        frame
    }

    /// `pieces` compressed as one zstd stream with a window of
    /// `2^window_log` bytes, flushed after each piece, as the encoder
    /// writes `StreamRun` payloads.
    fn zstd_stream(pieces: &[&[u8]], window_log: u32) -> Vec<Vec<u8>> {
        use zstd::zstd_safe::{zstd_sys::ZSTD_EndDirective, CCtx, CParameter, InBuffer, OutBuffer};
        let mut cctx = CCtx::create();
        cctx.set_parameter(CParameter::WindowLog(window_log))
            .unwrap();
        pieces
            .iter()
            .map(|piece| {
                let mut out = Vec::with_capacity(zstd::zstd_safe::compress_bound(piece.len()) + 64);
                let mut input = InBuffer::around(piece);
                let mut output = OutBuffer::around(&mut out);
                let left = cctx
                    .compress_stream2(&mut output, &mut input, ZSTD_EndDirective::ZSTD_e_flush)
                    .unwrap();
                assert_eq!(left, 0);
                out
            })
            .collect()
    }

    #[test]
    fn stream_runs_round_trip_and_continue_one_stream() {
        let a = b"quarterly revenue table, quarterly revenue figure. ".repeat(200);
        let b = b"quarterly revenue table, quarterly revenue figure! ".repeat(150);
        let packed = zstd_stream(&[&a, &b], STREAM_WINDOW_LOG);
        // The second piece leans on the first: far smaller than alone.
        assert!(packed[1].len() < zstd::bulk::compress(&b, 3).unwrap().len() / 2);
        let mut runs = Vec::new();
        for (i, (raw, bytes)) in [(&a, &packed[0]), (&b, &packed[1])].into_iter().enumerate() {
            let half = raw.len() as u32 / 2;
            let lengths = [half, raw.len() as u32 - half];
            runs.push(typed_run_frame(
                kind::STREAM_RUN,
                u8::from(i == 0),
                &lengths,
                bytes,
            ));
        }
        let parsed: Vec<_> = runs
            .iter()
            .map(|frame| {
                let frame = Frame::new_checked(&frame[..]).unwrap();
                let Ok(Some(DataRepr::StreamRun { fresh, run })) = DataRepr::parse(&frame) else {
                    panic!("not a stream run");
                };
                assert_eq!(run.codec, Codec::Zstd);
                let mut again = Vec::new();
                DataRepr::StreamRun { fresh, run }.emit(&mut again);
                assert_eq!(again, frame_bytes(&frame));
                (fresh, run.bytes.to_vec(), run.lengths.to_vec())
            })
            .collect();
        assert!(parsed[0].0 && !parsed[1].0);
        let run_of = |i: usize| Run {
            codec: Codec::Zstd,
            lengths: &parsed[i].2,
            bytes: &parsed[i].1,
        };
        let mut stream = StreamDecoder::default();
        let mut out = vec![7];
        stream.decode_into(true, &run_of(0), &mut out).unwrap();
        stream.decode_into(false, &run_of(1), &mut out).unwrap();
        assert_eq!(out, [&[7][..], &a, &b].concat());
        // A stream whose window is above the cap is refused.
        let wide = zstd_stream(&[&a], STREAM_WINDOW_LOG + 1);
        let run = Run {
            codec: Codec::Zstd,
            lengths: &parsed[0].2,
            bytes: &wide[0],
        };
        let mut out = Vec::new();
        assert_eq!(
            StreamDecoder::default().decode_into(true, &run, &mut out),
            Err(FrameError::Decompress)
        );
        assert!(out.is_empty());
        // The second run alone, without the stream it continues, fails.
        let mut fresh = StreamDecoder::default();
        let mut out = vec![7];
        assert_eq!(
            fresh.decode_into(false, &run_of(1), &mut out),
            Err(FrameError::Decompress)
        );
        assert_eq!(
            fresh.decode_into(true, &run_of(1), &mut out),
            Err(FrameError::Decompress)
        );
        assert_eq!(out, vec![7]);
        // Lengths that sum to more or less than the stream holds.
        for delta in [1i64, -1] {
            let total = (a.len() as i64 + delta) as u32;
            let lengths: Vec<u8> = [total / 2, total - total / 2]
                .iter()
                .flat_map(|l| l.to_be_bytes())
                .collect();
            let run = Run {
                codec: Codec::Zstd,
                lengths: &lengths,
                bytes: &parsed[0].1,
            };
            let mut stream = StreamDecoder::default();
            let mut out = vec![7];
            assert_eq!(
                stream.decode_into(true, &run, &mut out),
                Err(FrameError::Decompress)
            );
            assert_eq!(out, vec![7]);
            // ... and the stream is gone after the error.
            assert_eq!(
                stream.decode_into(false, &run_of(1), &mut out),
                Err(FrameError::Decompress)
            );
        }
    }

    #[test]
    fn ppmd_stream_runs_continue_and_refuse_what_does_not_fit() {
        let a = b"Quarterly revenue by region, in thousands. ".repeat(1500);
        let b = b"The budget table below totals each office. ".repeat(1000);
        let mut encoder = crate::compress::Ppmd::compressor().unwrap();
        let mut runs = Vec::new();
        for data in [&a, &b] {
            let mut out = Vec::new();
            assert!(encoder.compress(data, &mut out).is_ok());
            assert!(out.len() < data.len() / 10, "{}", out.len());
            runs.push(out);
        }
        fn run<'a>(lengths: &'a [u8], bytes: &'a [u8]) -> Run<'a> {
            Run {
                codec: Codec::Ppmd,
                lengths,
                bytes,
            }
        }
        let lengths = |n: usize| (n as u32).to_be_bytes();
        let (la, lb) = (&lengths(a.len())[..], &lengths(b.len())[..]);
        let (ra, rb) = (&runs[0][..], &runs[1][..]);
        // Round trip through emit and parse, the flag says PPMd.
        let mut wire = Vec::new();
        DataRepr::StreamRun {
            fresh: false,
            run: run(lb, rb),
        }
        .emit(&mut wire);
        assert_eq!(wire[HEADER_LEN], STREAM_PPMD);
        let frame = Frame::new_checked(&wire[..]).unwrap();
        assert_eq!(
            DataRepr::parse(&frame).unwrap(),
            Some(DataRepr::StreamRun {
                fresh: false,
                run: run(lb, rb)
            })
        );
        // PPMd and LZMA2 at once is malformed.
        wire[HEADER_LEN] = STREAM_PPMD | STREAM_LZMA;
        let frame = Frame::new_checked(&wire[..]).unwrap();
        assert!(DataRepr::parse(&frame).is_err());
        // The two runs continue one model.
        let mut stream = StreamDecoder::default();
        let mut out = vec![7];
        stream.decode_into(true, &run(la, ra), &mut out).unwrap();
        assert_eq!(stream.context_bytes(), PPMD_BYTES);
        stream.decode_into(false, &run(lb, rb), &mut out).unwrap();
        assert!(out == [&[7][..], &a, &b].concat());
        // The second run without the first (its model), fresh or not,
        // fails: nothing delivered.
        for fresh in [false, true] {
            let mut out = vec![7];
            let result = StreamDecoder::default().decode_into(fresh, &run(lb, rb), &mut out);
            assert_eq!(result, Err(FrameError::Decompress), "fresh {fresh}");
            assert_eq!(out, [7], "nothing delivered on error");
        }
        // Lengths that sum to more or less than the run holds, a byte
        // more or less in the run, a damaged byte, a wrong CRC: an error,
        // nothing delivered.
        let longer = [ra, &[0][..]].concat();
        let mut damaged = ra.to_vec();
        damaged[ra.len() / 2] ^= 0x10;
        let mut wrong_crc = ra.to_vec();
        wrong_crc[0] ^= 1;
        for (lengths, bytes) in [
            (lengths(a.len() + 1), ra),
            (lengths(a.len() - 1), ra),
            (lengths(a.len()), &longer[..]),
            (lengths(a.len()), &ra[..ra.len() - 1]),
            (lengths(a.len()), &damaged[..]),
            (lengths(a.len()), &wrong_crc[..]),
            (lengths(a.len()), &ra[..4]),
            (lengths(a.len()), &ra[..3]),
        ] {
            let mut stream = StreamDecoder::default();
            let mut out = vec![7];
            assert_eq!(
                stream.decode_into(true, &run(&lengths, bytes), &mut out),
                Err(FrameError::Decompress),
                "{} raw bytes in {} bytes",
                u32::from_be_bytes(lengths),
                bytes.len()
            );
            assert_eq!(out, [7]);
            assert_eq!(stream.context_bytes(), 0, "the stream is dropped");
        }
    }

    #[test]
    fn lzma_stream_runs_continue_and_refuse_wrong_lengths() {
        let a = b"row 0001;cell;12.50;".repeat(3000);
        let b = b"row 0002;cell;13.75;".repeat(2000);
        let mut encoder = crate::compress::Lzma2::new(Role::Compress { level: 6 }).unwrap();
        let mut runs = Vec::new();
        for data in [&a, &b] {
            let mut out = Vec::new();
            assert!(encoder.compress(data, &mut out).is_ok());
            assert!(out.len() < data.len() / 10, "{}", out.len());
            runs.push(out);
        }
        fn run<'a>(lengths: &'a [u8], bytes: &'a [u8]) -> Run<'a> {
            Run {
                codec: Codec::Lzma,
                lengths,
                bytes,
            }
        }
        let lengths = |n: usize| (n as u32).to_be_bytes();
        let (la, lb) = (&lengths(a.len())[..], &lengths(b.len())[..]);
        let (ra, rb) = (&runs[0][..], &runs[1][..]);
        // Round trip through emit and parse, the flag says LZMA2.
        let mut wire = Vec::new();
        DataRepr::StreamRun {
            fresh: true,
            run: run(la, ra),
        }
        .emit(&mut wire);
        assert_eq!(wire[HEADER_LEN], STREAM_FRESH | STREAM_LZMA);
        let frame = Frame::new_checked(&wire[..]).unwrap();
        assert_eq!(
            DataRepr::parse(&frame).unwrap(),
            Some(DataRepr::StreamRun {
                fresh: true,
                run: run(la, ra)
            })
        );
        let mut stream = StreamDecoder::default();
        let mut out = vec![7];
        stream.decode_into(true, &run(la, ra), &mut out).unwrap();
        assert_eq!(stream.context_bytes(), LZMA_DECODER_BYTES);
        stream.decode_into(false, &run(lb, rb), &mut out).unwrap();
        assert!(out == [&[7][..], &a, &b].concat());
        // The second run without the first, fresh or not, fails.
        let mut out = vec![7];
        for fresh in [false, true] {
            assert_eq!(
                StreamDecoder::default().decode_into(fresh, &run(lb, rb), &mut out),
                Err(FrameError::Decompress)
            );
        }
        // Lengths that sum to more or less than the run holds.
        for wrong in [a.len() + 1, a.len() - 1] {
            let mut stream = StreamDecoder::default();
            assert_eq!(
                stream.decode_into(true, &run(&lengths(wrong), ra), &mut out),
                Err(FrameError::Decompress)
            );
            assert_eq!(stream.context_bytes(), 0, "dropped after an error");
        }
        assert_eq!(out, vec![7]);
        // An LZMA2 run cannot continue a zstd stream.
        let zstd = zstd_stream(&[&a], STREAM_WINDOW_LOG);
        let mut stream = StreamDecoder::default();
        let zrun = Run {
            codec: Codec::Zstd,
            lengths: la,
            bytes: &zstd[0],
        };
        stream.decode_into(true, &zrun, &mut out).unwrap();
        assert_eq!(
            stream.decode_into(false, &run(lb, rb), &mut out),
            Err(FrameError::Decompress)
        );
        assert!(out == [&[7][..], &a].concat());
    }

    fn frame_bytes<T: AsRef<[u8]>>(frame: &Frame<T>) -> Vec<u8> {
        frame.buffer.as_ref()[..frame.total_len()].to_vec()
    }

    #[test]
    fn rejects_bad_stream_run_frames() {
        let parse = |frame: Vec<u8>| {
            let frame = Frame::new_checked(&frame[..]).map(|f| DataRepr::parse(&f).map(|_| ()));
            frame.and_then(|r| r)
        };
        let malformed = Err(FrameError::Malformed(kind::STREAM_RUN));
        let frame = |flags: u8, lengths: &[u32], payload: &[u8]| {
            typed_run_frame(kind::STREAM_RUN, flags, lengths, payload)
        };
        assert_eq!(parse(frame(1, &[10, 10], &[1; 5])), Ok(()));
        assert_eq!(parse(frame(0, &[10, 10], &[1; 5])), Ok(()));
        // Bit 1: LZMA2.
        assert_eq!(parse(frame(3, &[10, 10], &[1; 5])), Ok(()));
        assert_eq!(parse(frame(2, &[10, 10], &[1; 5])), Ok(()));
        // Bit 2: PPMd; not with bit 1.
        assert_eq!(parse(frame(5, &[10, 10], &[1; 5])), Ok(()));
        assert_eq!(parse(frame(4, &[10, 10], &[1; 5])), Ok(()));
        assert_eq!(parse(frame(6, &[10, 10], &[1; 5])), malformed);
        assert_eq!(parse(frame(7, &[10, 10], &[1; 5])), malformed);
        // Unknown flags, no chunks, empty payload, payload longer than raw.
        assert_eq!(parse(frame(8, &[10, 10], &[1; 5])), malformed);
        assert_eq!(parse(frame(0x83, &[10, 10], &[1; 5])), malformed);
        assert_eq!(parse(frame(1, &[], &[1; 5])), malformed);
        assert_eq!(parse(frame(1, &[10, 10], &[])), malformed);
        assert_eq!(parse(frame(1, &[4, 4], &[1; 9])), malformed);
        let mut empty = Vec::new();
        emit_header(&mut empty, kind::STREAM_RUN, 0);
        assert_eq!(parse(empty), malformed);
        let big = MAX_CHUNK_LEN as u32;
        assert_eq!(
            parse(frame(1, &[big + 1], &[1; 2])),
            Err(FrameError::ChunkLength(big + 1))
        );
        // A stream end carries nothing.
        let mut end = Vec::new();
        emit_header(&mut end, kind::STREAM_END, 1);
        end.push(0);
        assert_eq!(parse(end), Err(FrameError::Malformed(kind::STREAM_END)));
    }

    #[test]
    fn run_frames_round_trip_and_split_at_their_lengths() {
        let chunks: [&[u8]; 3] = [&[b'a'; 3000], &[b'b'; 5000], &[b'a'; 1000]];
        let raw = chunks.concat();
        let packed = lz4_flex::block::compress(&raw);
        let lengths: Vec<u8> = chunks
            .iter()
            .flat_map(|c| (c.len() as u32).to_be_bytes())
            .collect();
        let run = Run {
            codec: Codec::Lz4,
            lengths: &lengths,
            bytes: &packed,
        };
        round_trip(DataRepr::Run(run));
        assert_eq!(run.lengths().collect::<Vec<_>>(), vec![3000, 5000, 1000]);
        assert_eq!(run.raw_len(), 9000);
        let mut out = vec![7];
        run.decode_into(&mut out).unwrap();
        assert_eq!(&out[1..], &raw[..]);
        // A run whose lengths sum to more (or less) than the payload holds.
        for lengths in [[3000u32, 5000, 1001], [3000, 5000, 999]] {
            let frame = run_frame(1, &lengths, &packed);
            let frame = Frame::new_checked(&frame[..]).unwrap();
            let Ok(Some(DataRepr::Run(bad))) = DataRepr::parse(&frame) else {
                panic!("{lengths:?} should parse");
            };
            let mut out = vec![7];
            assert_eq!(bad.decode_into(&mut out), Err(FrameError::Decompress));
            assert_eq!(out, vec![7]);
        }
    }

    #[test]
    fn rejects_bad_run_frames() {
        let parse = |frame: Vec<u8>| {
            let frame = Frame::new_checked(&frame[..]).map(|f| DataRepr::parse(&f).map(|_| ()));
            frame.and_then(|r| r)
        };
        let malformed = Err(FrameError::Malformed(kind::RUN));
        // Raw codec, no chunks, lengths cut short, empty payload.
        assert_eq!(parse(run_frame(0, &[10, 10], &[1; 5])), malformed);
        assert_eq!(parse(run_frame(1, &[], &[1; 5])), malformed);
        assert_eq!(parse(run_frame(1, &[10, 10], &[])), malformed);
        let mut short = run_frame(1, &[10, 10], &[]);
        short[6] = 3; // count 3, two lengths
        short[3] = 3 + 8;
        assert_eq!(parse(short), malformed);
        // Payload longer than the raw bytes, a zero length, too much in all.
        assert_eq!(parse(run_frame(1, &[4, 4], &[1; 9])), malformed);
        assert_eq!(
            parse(run_frame(1, &[4, 0], &[1; 2])),
            Err(FrameError::ChunkLength(0))
        );
        let big = MAX_CHUNK_LEN as u32;
        assert_eq!(parse(run_frame(2, &[big, 1], &[1; 2])), malformed);
        assert_eq!(
            parse(run_frame(2, &[big + 1], &[1; 2])),
            Err(FrameError::ChunkLength(big + 1))
        );
        assert_eq!(
            parse(run_frame(9, &[4], &[1])),
            Err(FrameError::UnknownCodec(9))
        );
    }

    #[test]
    fn rejects_bad_span_frames() {
        let span = |count: u16, raw_len: u32| {
            let mut buf = Vec::new();
            DataRepr::Span {
                first: Fingerprint::of(b"a"),
                count,
                raw_len,
                check: Fingerprint::of(b"c"),
            }
            .emit(&mut buf);
            buf
        };
        let parse = |buf: &[u8]| {
            let f = Frame::new_checked(buf).unwrap();
            DataRepr::parse(&f).map(|_| ())
        };
        let malformed = Err(FrameError::Malformed(kind::SPAN));
        assert_eq!(parse(&span(2, 2)), Ok(()));
        assert_eq!(parse(&span(1, 100)), malformed);
        assert_eq!(parse(&span(257, 100_000)), malformed);
        assert_eq!(parse(&span(3, 2)), malformed);
        assert_eq!(parse(&span(2, (MAX_SPAN_LEN + 1) as u32)), malformed);
        let mut long = span(2, 100);
        long.push(0);
        long[3] += 1;
        assert_eq!(parse(&long), malformed);
        let list = |entries: &[(Fingerprint, u32)]| {
            let mut buf = Vec::new();
            emit_span_list(&Fingerprint::of(b"c"), entries, &mut buf);
            buf
        };
        let fp = Fingerprint::of(b"x");
        assert_eq!(parse(&list(&[(fp, 5)])), Ok(()));
        assert_eq!(
            parse(&list(&[])),
            Err(FrameError::Malformed(kind::SPAN_LIST))
        );
        assert_eq!(
            parse(&list(&[(fp, 5), (fp, 0)])),
            Err(FrameError::ChunkLength(0))
        );
        let mut cut = list(&[(fp, 5), (fp, 6)]);
        cut.truncate(cut.len() - 1);
        cut[3] -= 1;
        assert_eq!(parse(&cut), Err(FrameError::Malformed(kind::SPAN_LIST)));
    }

    #[test]
    fn rejects_bad_frames() {
        assert_eq!(
            Frame::new_checked(&[2u8, 0, 0][..]).unwrap_err(),
            FrameError::Truncated
        );
        assert!(matches!(
            Frame::new_checked(&[2u8, 0xff, 0xff, 0xff][..]).unwrap_err(),
            FrameError::TooLong(_)
        ));
        let bad_magic = [1u8, 0, 0, 5, b'X', b'O', b'P', b'C', 1];
        let f = Frame::new_checked(&bad_magic[..]).unwrap();
        assert_eq!(DataRepr::parse(&f).unwrap_err(), FrameError::BadMagic);
        let zero_len = [
            3u8, 0, 0, 20, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
        ];
        let f = Frame::new_checked(&zero_len[..]).unwrap();
        assert_eq!(DataRepr::parse(&f).unwrap_err(), FrameError::ChunkLength(0));
        // LZ4 payload claiming more raw bytes than it decodes to.
        let payload = Payload {
            codec: Codec::Lz4,
            raw_len: 100,
            bytes: &[0x10, b'a'],
        };
        let mut out = vec![9];
        assert_eq!(payload.decode_into(&mut out), Err(FrameError::Decompress));
        assert_eq!(out, vec![9]);
    }

    #[test]
    fn delta_frames_round_trip_and_need_their_base() {
        // Not repetitive: every byte of the edited chunk can only come
        // from the same place in the base.
        let mut x = 0x2545_f491_u32;
        let base: Vec<u8> = (0..8000)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 17;
                x ^= x << 5;
                x as u8
            })
            .collect();
        let mut edited = base.clone();
        edited[4000..4016].copy_from_slice(b"sixteen changed!");
        let mut packed = Vec::new();
        let n = delta_compress(&edited, &base, 3, &mut packed).unwrap();
        assert!(n < 100, "delta of a 16-byte edit is {n} bytes");
        for after_pieces in [false, true] {
            round_trip(DataRepr::Delta {
                target: Fingerprint::of(&edited),
                base: Fingerprint::of(&base),
                raw_len: edited.len() as u32,
                bytes: &packed[..n],
                after_pieces,
            });
        }
        let mut out = vec![0u8; edited.len()];
        assert_eq!(
            delta_decompress(&packed[..n], &base, &mut out),
            Some(edited.len())
        );
        assert_eq!(out, edited);
        // Against the wrong base the result differs (the decoder's
        // fingerprint check catches it) or fails.
        let mut wrong_base = base.clone();
        wrong_base[10] ^= 1;
        wrong_base[7000] ^= 1;
        let mut out2 = vec![0u8; edited.len()];
        let decoded = delta_decompress(&packed[..n], &wrong_base, &mut out2);
        assert!(decoded.is_none() || out2 != edited);
        // A payload not shorter than the chunk is malformed.
        let mut buf = Vec::new();
        DataRepr::Delta {
            target: Fingerprint::of(b"a"),
            base: Fingerprint::of(b"b"),
            raw_len: 3,
            bytes: b"xyz",
            after_pieces: false,
        }
        .emit(&mut buf);
        let f = Frame::new_checked(&buf[..]).unwrap();
        assert_eq!(
            DataRepr::parse(&f).unwrap_err(),
            FrameError::Malformed(kind::DELTA)
        );
    }

    #[test]
    fn zstd_payloads_decode_only_to_their_exact_length() {
        let raw: Vec<u8> = b"all work and no play ".repeat(200);
        let packed = zstd::bulk::compress(&raw, 3).unwrap();
        let good = Payload {
            codec: Codec::Zstd,
            raw_len: raw.len() as u32,
            bytes: &packed,
        };
        round_trip(DataRepr::Literal(good));
        let mut out = vec![7];
        good.decode_into(&mut out).unwrap();
        assert_eq!(&out[1..], &raw[..]);
        // Claiming one byte more or less than the frame holds is an error
        // that leaves `out` as it was.
        for raw_len in [raw.len() as u32 - 1, raw.len() as u32 + 1] {
            let mut out = vec![7];
            let wrong = Payload { raw_len, ..good };
            assert_eq!(wrong.decode_into(&mut out), Err(FrameError::Decompress));
            assert_eq!(out, vec![7]);
        }
        // Garbage is an error too.
        let garbage = Payload {
            codec: Codec::Zstd,
            raw_len: 100,
            bytes: &[0x28, 0xb5, 0x2f, 0xfd, 0xff, 0xff],
        };
        assert_eq!(
            garbage.decode_into(&mut Vec::new()),
            Err(FrameError::Decompress)
        );
        // The codec byte 3 is unknown.
        let mut body = vec![3u8, 0, 0, 0, 1, b'x'];
        let mut frame = Vec::new();
        emit_header(&mut frame, kind::LITERAL, body.len());
        frame.append(&mut body);
        let f = Frame::new_checked(&frame[..]).unwrap();
        assert_eq!(
            DataRepr::parse(&f).unwrap_err(),
            FrameError::UnknownCodec(3)
        );
    }

    proptest! {
        #[test]
        fn run_frames_from_the_network_decode_exactly_or_fail(
            codec in 0u8..4,
            lengths in proptest::collection::vec(0u32..70_000, 0..6),
            payload in proptest::collection::vec(any::<u8>(), 0..300),
            valid in any::<bool>(),
        ) {
            // Either a real compressed run with lengths that may not match,
            // or arbitrary bytes as the payload.
            let raw: Vec<u8> = (0..lengths.iter().sum::<u32>().min(200_000)).map(|i| (i % 7) as u8).collect();
            let payload = if valid { lz4_flex::block::compress(&raw) } else { payload };
            let frame = run_frame(codec, &lengths, &payload);
            let frame = Frame::new_checked(&frame[..]).unwrap();
            if let Ok(Some(DataRepr::Run(run))) = DataRepr::parse(&frame) {
                let mut out = vec![1, 2, 3];
                match run.decode_into(&mut out) {
                    Ok(()) => prop_assert_eq!(out.len(), 3 + run.raw_len()),
                    Err(_) => prop_assert_eq!(out, vec![1, 2, 3]),
                }
            }
        }

        #[test]
        fn parse_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
            if let Ok(frame) = Frame::new_checked(&bytes[..]) {
                match DataRepr::parse(&frame) {
                    Ok(Some(
                        DataRepr::Literal(p)
                        | DataRepr::Repair { payload: p, .. }
                        | DataRepr::Named { payload: p, .. },
                    )) => {
                        let mut out = Vec::new();
                        let _ = p.decode_into(&mut out);
                    }
                    Ok(Some(DataRepr::Run(run))) => {
                        let mut out = Vec::new();
                        if run.decode_into(&mut out).is_ok() {
                            prop_assert_eq!(out.len(), run.raw_len());
                        }
                    }
                    Ok(Some(DataRepr::StreamRun { fresh, run })) => {
                        let mut out = Vec::new();
                        let mut stream = StreamDecoder::default();
                        if stream.decode_into(fresh, &run, &mut out).is_ok() {
                            prop_assert_eq!(out.len(), run.raw_len());
                        }
                    }
                    _ => {}
                }
            }
        }
    }
}
