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
//! [`MAX_CHUNK_LEN`](crate::MAX_CHUNK_LEN) or a payload that does not decompress to exactly the
//! raw length is an error, never a panic or an unbounded allocation.

mod data;
mod error;
mod header;
pub mod kind;
mod parse;
mod payload;
mod run;
mod span;
#[cfg(test)]
mod tests;

pub use crate::compress::{
    delta_compress, delta_decompress, lzma_options, Codec, StreamDecoder, LZMA_DECODER_BYTES,
    PPMD_BYTES, PPMD_MEMORY, PPMD_ORDER, STREAM_WINDOW_LOG,
};
pub use data::DataRepr;
pub use error::FrameError;
pub(crate) use header::read_u64;
pub use header::{
    emit_header, Frame, HEADER_LEN, MAGIC, MAX_FRAME_BODY, MAX_RUN_CHUNKS, MAX_RUN_LEN,
    MAX_SPAN_CHUNKS, MAX_SPAN_LEN, VERSION,
};
pub use payload::Payload;
pub use run::{run_lengths, split_run, Run};
pub use span::{emit_span_list, span_check, span_entries, SPAN_ENTRY_LEN};
