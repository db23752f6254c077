//! The encoder's state apart from the chunker ([`Core`]): each part owns
//! its fields (`view.rs`, `compressor.rs`, `run.rs`, `span.rs`,
//! `retain.rs`, `delta.rs`); the choices that involve several parts are
//! `Core`'s methods, in the files of the concepts they decide.

use crate::cache::PeerCache;
use crate::stats::EncoderStats;

use super::compressor::Compressor;
use super::config::EncoderConfig;
use super::delta::Deltas;
use super::retain::Retained;
use super::run::PendingRun;
use super::span::Spans;
use super::view::FlowView;

/// Everything but the chunker (split so the chunker can lend chunks).
#[derive(Debug)]
pub(super) struct Core {
    /// What the peer holds, as this flow sees it.
    pub(super) view: FlowView,
    /// The compressors of the flow's literals.
    pub(super) compressor: Compressor,
    /// The literals gathered into a run.
    pub(super) run: PendingRun,
    /// The references gathered into a span, and the spans sent.
    pub(super) spans: Spans,
    /// Referenced chunks kept for repairs.
    pub(super) retained: Retained,
    /// The delta encoder.
    pub(super) deltas: Deltas,
    pub(super) stats: EncoderStats,
}

impl Core {
    /// The state of a new flow to the peer of `cache`.
    pub(super) fn new(cache: PeerCache, config: EncoderConfig) -> Self {
        Core {
            view: FlowView::new(cache, &config),
            compressor: Compressor::new(&config),
            run: PendingRun::new(config.run_len),
            spans: Spans::default(),
            retained: Retained::new(config.retain_bytes),
            deltas: Deltas::default(),
            stats: EncoderStats::default(),
        }
    }
}
