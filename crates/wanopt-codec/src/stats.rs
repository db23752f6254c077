//! Counters, all serializable for the node's flow table and metrics.

use serde::Serialize;

/// Counters of one [`crate::Encoder`] (one flow direction).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct EncoderStats {
    /// Plain bytes received from the LAN side.
    pub lan_bytes_in: u64,
    /// Encoded bytes written for the WAN side (data frames, repairs).
    pub wan_bytes_out: u64,
    /// Chunks cut.
    pub chunks: u64,
    /// Chunks sent as raw literals (did not compress).
    pub literals_raw: u64,
    /// Chunks sent as compressed literals.
    pub literals_compressed: u64,
    /// Chunks sent as references.
    pub references: u64,
    /// Bytes covered by references.
    pub referenced_bytes: u64,
    /// `NeedChunk` requests answered with a repair.
    pub repairs_sent: u64,
    /// Of those, repairs read from the local store: the chunk was no
    /// longer among the retained ones.
    pub repairs_from_store: u64,
    /// Sent literals that could not be kept in the local store.
    pub store_errors: u64,
    /// Chunks sent as deltas against a chunk the peer holds.
    pub deltas: u64,
    /// Bytes of chunks sent as deltas.
    pub delta_bytes: u64,
    /// `Span` frames sent (each stands for several references).
    pub spans: u64,
    /// `SpanList` frames sent in answer to `NeedSpan`.
    pub span_lists_sent: u64,
    /// `Piece` frames sent with bytes (the source trickled: bytes of an
    /// unfinished chunk went out before its end, see `Encoder::send_held`).
    pub pieces: u64,
    /// Bytes sent in them.
    pub piece_bytes: u64,
}

impl EncoderStats {
    /// WAN bytes per LAN byte (0 when nothing was sent).
    pub fn ratio(&self) -> f64 {
        if self.lan_bytes_in == 0 {
            0.0
        } else {
            self.wan_bytes_out as f64 / self.lan_bytes_in as f64
        }
    }
}

/// Counters of one [`crate::Decoder`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct DecoderStats {
    /// Encoded bytes received from the WAN side.
    pub wan_bytes_in: u64,
    /// Plain bytes delivered to the LAN side.
    pub lan_bytes_out: u64,
    /// Literal frames decoded.
    pub literals: u64,
    /// References resolved from the cache.
    pub cache_hits: u64,
    /// References the cache could not resolve (a `NeedChunk` was sent).
    pub cache_misses: u64,
    /// Repair frames received.
    pub repairs_received: u64,
    /// Chunks that could not be written to the store (still delivered).
    pub store_errors: u64,
    /// Delta frames received.
    pub deltas: u64,
    /// Delta frames that did not decode to their fingerprint (asked for in
    /// full instead).
    pub bad_deltas: u64,
    /// `Span` frames received.
    pub spans: u64,
    /// Spans not resolved from the store (asked for with `NeedSpan`).
    pub span_misses: u64,
    /// Entries of the peer's `Sent` frames that named no chunk decoded
    /// lately, or two (dropped: the local encoder does not reference them).
    pub sent_unresolved: u64,
    /// `Piece` frames received with bytes.
    pub pieces: u64,
}

/// Counters of a [`crate::store::ChunkStore`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct StoreStats {
    /// Chunks indexed.
    pub chunks: u64,
    /// Bytes in segment files.
    pub bytes: u64,
    /// Segment files.
    pub segments: u64,
    /// Records appended since open.
    pub inserts: u64,
    /// Data bytes appended since open.
    pub inserted_bytes: u64,
    /// Verified reads.
    pub hits: u64,
    /// Lookups that found nothing usable.
    pub misses: u64,
    /// Reads that failed verification (damaged records).
    pub corrupt: u64,
    /// Segments deleted by the capacity bound.
    pub evicted_segments: u64,
    /// Bytes cut from damaged or torn tails when opening.
    pub truncated_bytes: u64,
    /// Appends or flushes that failed (a full or failing disk): those
    /// chunks are not held, and the peer is never told they are.
    pub write_errors: u64,
}

/// Counters of a [`crate::PeerCache`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct CacheStats {
    /// Our store (chunks received from the peer).
    pub store: StoreStats,
    /// Chunks the peer acknowledged holding (what our encoders may
    /// reference).
    pub peer_chunks: u64,
    /// True once the peer's `Hello` was seen on this tunnel.
    pub peer_confirmed: bool,
    /// Appends to the peer view's journal that failed (a full or failing
    /// disk): a crash would lose those acknowledgements, a clean stop not.
    pub journal_write_errors: u64,
}

impl CacheStats {
    /// Writes to the cache's directory that failed: the store's and the
    /// peer view journal's.
    pub fn write_errors(&self) -> u64 {
        self.store.write_errors + self.journal_write_errors
    }
}
