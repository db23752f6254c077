//! Frame type codes.

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
