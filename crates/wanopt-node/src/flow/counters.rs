//! A flow's data-reduction counters, and a node's over its finished flows.

use std::sync::atomic::{AtomicU64, Ordering};

use wanopt_codec::{Decoder, Encoder};

/// A flow's data-reduction counters, or those of a node's finished flows.
/// The flow's pumps copy them from its encoder's and decoder's stats.
#[derive(Debug, Default)]
pub struct ReduceCounters {
    references: AtomicU64,
    pieces: AtomicU64,
    cache_hits: AtomicU64,
    cache_misses: AtomicU64,
    repairs: AtomicU64,
    compressor_bytes: AtomicU64,
    decompressor_bytes: AtomicU64,
}

/// A snapshot of [`ReduceCounters`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReduceTotals {
    /// Chunks this node's encoders sent as references to the peer's cache.
    pub references: u64,
    /// Pieces this node's encoders sent: held bytes of a trickling source
    /// sent before their chunk's end (`Encoder::send_held`).
    pub pieces: u64,
    /// References this node's decoders resolved from its cache.
    pub cache_hits: u64,
    /// References and spans this node's decoders could not resolve from its
    /// cache and asked the peer for (`NeedChunk`, `NeedSpan`).
    pub cache_misses: u64,
    /// Chunks and chunk lists this node's encoders sent again at the peer's
    /// request (`Repair`, `SpanList`).
    pub repairs: u64,
    /// Memory held now by the stream compressors (zstd or LZMA2) of live
    /// flows (a gauge: finished flows hold none).
    pub compressor_bytes: u64,
    /// Memory held now by the stream decompression contexts of live
    /// flows (a gauge, freed when the peer's encoder frees its compressor).
    pub decompressor_bytes: u64,
}

impl ReduceTotals {
    pub(super) fn plus(self, other: ReduceTotals) -> ReduceTotals {
        ReduceTotals {
            references: self.references + other.references,
            pieces: self.pieces + other.pieces,
            cache_hits: self.cache_hits + other.cache_hits,
            cache_misses: self.cache_misses + other.cache_misses,
            repairs: self.repairs + other.repairs,
            compressor_bytes: self.compressor_bytes + other.compressor_bytes,
            decompressor_bytes: self.decompressor_bytes + other.decompressor_bytes,
        }
    }
}

impl ReduceCounters {
    /// The current values.
    pub fn load(&self) -> ReduceTotals {
        let load = |a: &AtomicU64| a.load(Ordering::Relaxed);
        ReduceTotals {
            references: load(&self.references),
            pieces: load(&self.pieces),
            cache_hits: load(&self.cache_hits),
            cache_misses: load(&self.cache_misses),
            repairs: load(&self.repairs),
            compressor_bytes: load(&self.compressor_bytes),
            decompressor_bytes: load(&self.decompressor_bytes),
        }
    }

    /// Adds a finished flow's counters (not its gauge).
    pub(super) fn add(&self, t: ReduceTotals) {
        self.references.fetch_add(t.references, Ordering::Relaxed);
        self.pieces.fetch_add(t.pieces, Ordering::Relaxed);
        self.cache_hits.fetch_add(t.cache_hits, Ordering::Relaxed);
        self.cache_misses
            .fetch_add(t.cache_misses, Ordering::Relaxed);
        self.repairs.fetch_add(t.repairs, Ordering::Relaxed);
    }

    /// Takes the encoder side's counters from the flow's encoder.
    pub fn record_encoder(&self, encoder: &Encoder) {
        let stats = encoder.stats();
        self.compressor_bytes
            .store(encoder.compressor_bytes() as u64, Ordering::Relaxed);
        self.references.store(stats.references, Ordering::Relaxed);
        self.pieces.store(stats.pieces, Ordering::Relaxed);
        self.repairs.store(
            stats.repairs_sent + stats.span_lists_sent,
            Ordering::Relaxed,
        );
    }

    /// Takes the decoder side's counters from the flow's decoder.
    pub fn record_decoder(&self, decoder: &Decoder) {
        let stats = decoder.stats();
        self.decompressor_bytes
            .store(decoder.decompressor_bytes() as u64, Ordering::Relaxed);
        self.cache_hits.store(stats.cache_hits, Ordering::Relaxed);
        self.cache_misses
            .store(stats.cache_misses + stats.span_misses, Ordering::Relaxed);
    }
}

/// What one configured peer's flows carried: kept by the node's peer
/// book, counted up as each flow is given to the peer and folded into as
/// it ends (a live flow's bytes are added when read).
#[derive(Debug)]
pub struct PeerTraffic {
    /// How the peer is named in `flows` and logs: its `name`, or its key.
    label: std::sync::RwLock<std::sync::Arc<str>>,
    /// Flows given to the peer.
    pub flows: AtomicU64,
    /// Bytes of its finished flows: LAN client to server and server to
    /// client, WAN client to server and server to client.
    pub finished: [AtomicU64; 4],
}

impl PeerTraffic {
    /// Counters for a peer labelled `label`.
    pub fn new(label: &str) -> PeerTraffic {
        PeerTraffic {
            label: std::sync::RwLock::new(label.into()),
            flows: AtomicU64::new(0),
            finished: Default::default(),
        }
    }

    /// The peer's label.
    pub fn label(&self) -> std::sync::Arc<str> {
        self.label.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Names the peer anew (a reload gave it another `name`).
    pub fn relabel(&self, label: &str) {
        if *self.label() != *label {
            *self.label.write().unwrap_or_else(|e| e.into_inner()) = label.into();
        }
    }
}

/// Fraction of `lan` bytes saved on the WAN.
pub fn reduction(lan: u64, wan: u64) -> f64 {
    if lan == 0 {
        0.0
    } else {
        1.0 - wan as f64 / lan as f64
    }
}
