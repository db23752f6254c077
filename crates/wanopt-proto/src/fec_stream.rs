//! Continuous forward error correction under QUIC: every datagram the
//! tunnel sends to a peer can be a *source* of a Reed-Solomon block, and
//! the receiver rebuilds lost sources from the block's *repair* datagrams
//! before QUIC notices they were lost.
//!
//! [`crate::fec`] protects only the end of a transfer; this protects all of
//! it, on paths that lose packets at random. The sender wraps each QUIC
//! datagram in a five-byte header with a sequence number; after `k`
//! sources of a block (or a flush deadline, so a sparse sender never waits
//! for a block to fill) it sends `m` repair datagrams. Blocks may be
//! interleaved: with depth `d`, a block takes every `d`-th source, so a
//! burst of up to `d` consecutive losses costs each block one source.
//!
//! The receiver strips the header, hands the QUIC datagram on at once,
//! keeps a copy, rebuilds missing sources when a block's repairs arrive
//! (any `m` losses of `k + m`), and counts, in sequence order, the sources
//! that arrived, that were lost before repair, that repair rebuilt, and
//! the runs of consecutive losses (burst length). It reports those counts
//! to the sender now and then ([`Report`]): they are the loss the path
//! really has, which the sender's QUIC no longer sees once FEC repairs it,
//! so the [`Policy`] chooses the redundancy from them, and the sender's
//! congestion controller is told of repaired packets apart from received
//! ones.
//!
//! QUIC authenticates every packet: a rebuilt datagram that were wrong (a
//! peer that lies, a stranger's repair) is dropped by it, never delivered.
//!
//! # Datagrams (version 1)
//!
//! The first byte has QUIC's fixed bit (0x40) clear, so none of these is
//! ever a QUIC packet between wanopt nodes (which do not let their peer
//! grease that bit, RFC 9287), nor the tail parity of [`crate::fec`]
//! (0x21).
//!
//! ```text
//! source  0x22 | seq u32 | the QUIC datagram
//! repair  0x23 | first u32 | k u8 | stride u8 | m u8 | index u8 | shard
//! report  0x24 | received u32 | lost u32 | recovered u32 | runs u32
//!              | repairs u32
//! ```
//!
//! A second strand ([`Strand::Calls`]) has the same three datagrams as
//! 0x26, 0x27 and 0x28: the sender codes the QUIC datagrams that carry
//! real-time UDP flows apart from the rest, in short blocks with a full
//! code, so a call beside a bulk transfer is not coded as the bulk's
//! lean code (0x25 is a path probe, [`crate::path`]).
//!
//! All integers are big endian. A block's sources are the sequence numbers
//! `first + i * stride`, `i < k`. Each source is coded as a symbol: its
//! length (u16) and bytes, zero-padded to the shard's length (even, the
//! longest source plus two, rounded up). The report's counts are totals
//! since the receiver began (they wrap), so a lost report costs nothing.
//!
//! Sans-IO: an [`Encoder`] per destination, a [`Decoder`] per source of
//! datagrams, a [`Policy`] per destination; no clocks but the `Instant`s
//! the caller passes in.

mod decoder;
mod encoder;
mod policy;
mod wire;

#[cfg(test)]
mod simulation;
#[cfg(test)]
mod tests;

pub use decoder::{Decoder, DecoderStats, Received, RING};
pub use encoder::{Encoder, EncoderStats, PARTIAL, SPARSE};
pub use policy::{
    flush_after, FecMode, FecState, Policy, DATAGRAM_BUDGET, DATAGRAM_FLUSH, DEFAULT_BUDGET,
};
pub use wire::{
    classify, kind, parse_repair, parse_report, parse_source, Kind, Params, Repair, Report, Strand,
    StreamFecError, MAX_DEPTH, MAX_K, MAX_M, REPAIR_HEADER, REPAIR_OVERHEAD, REPORT_LEN,
    SOURCE_HEADER,
};
