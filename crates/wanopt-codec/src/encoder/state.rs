//! The encoder's state apart from the chunker ([`Core`]), and the preamble.

use std::collections::VecDeque;

use crate::cache::PeerCache;
use crate::compress::{Codec, Engine};
use crate::fingerprint::Fingerprint;
use crate::frame::{DataRepr, VERSION};
use crate::stats::EncoderStats;
use crate::store::index::FingerprintMap;

use super::config::EncoderConfig;
use super::retain::Retained;
use super::span::PendingSpan;
use super::stream::LiteralStream;

/// Everything but the chunker (split so the chunker can lend chunks).
#[derive(Debug)]
pub(super) struct Core {
    pub(super) cache: PeerCache,
    pub(super) config: EncoderConfig,
    pub(super) started: bool,
    pub(super) flow_sent: FingerprintMap<()>,
    pub(super) flow_order: VecDeque<Fingerprint>,
    pub(super) retained: Retained,
    pub(super) scratch: Vec<u8>,
    pub(super) compressed_len: usize,
    pub(super) skip_compression: u32,
    pub(super) compress_backoff: u32,
    /// The block engine of the last literal compressed alone, its codec
    /// and level.
    pub(super) block: Option<(Codec, i32, Box<dyn Engine>)>,
    pub(super) stream: Option<LiteralStream>,
    /// Literals waiting to be compressed together: their bytes and their
    /// lengths (big-endian u32s, as the `Run` frame carries them).
    pub(super) run: Vec<u8>,
    pub(super) run_lengths: Vec<u8>,
    pub(super) run_fingerprints: Vec<Fingerprint>,
    pub(super) stored: Vec<(Fingerprint, u64)>,
    pub(super) span: PendingSpan,
    pub(super) sent_spans: FingerprintMap<Vec<(Fingerprint, u32)>>,
    pub(super) sent_span_order: VecDeque<Fingerprint>,
    pub(super) cursor: Option<Fingerprint>,
    pub(super) base_scratch: Vec<u8>,
    pub(super) delta_scratch: Vec<u8>,
    /// How many of the chunker's held bytes went out as `Piece`s.
    pub(super) pieces_sent: usize,
    /// The run's first literal is the rest of a chunk begun as pieces,
    /// this long in all (a `PieceRest` goes before the run).
    pub(super) run_rest: Option<u32>,
    pub(super) stats: EncoderStats,
}

impl Core {
    /// The state of a new flow to the peer of `cache`.
    pub(super) fn new(cache: PeerCache, config: EncoderConfig) -> Self {
        Core {
            cache,
            config,
            started: false,
            flow_sent: FingerprintMap::default(),
            flow_order: VecDeque::new(),
            retained: Retained::default(),
            scratch: Vec::new(),
            compressed_len: 0,
            skip_compression: 0,
            compress_backoff: 0,
            block: None,
            stream: None,
            run: Vec::new(),
            run_lengths: Vec::new(),
            run_fingerprints: Vec::new(),
            stored: Vec::new(),
            span: PendingSpan::default(),
            sent_spans: FingerprintMap::default(),
            sent_span_order: VecDeque::new(),
            cursor: None,
            base_scratch: Vec::new(),
            delta_scratch: Vec::new(),
            pieces_sent: 0,
            run_rest: None,
            stats: EncoderStats::default(),
        }
    }

    /// Write the stream preamble if not done yet.
    pub(super) fn start(&mut self, out: &mut Vec<u8>) {
        if !self.started {
            let before = out.len();
            DataRepr::Preamble { version: VERSION }.emit(out);
            self.stats.wan_bytes_out += (out.len() - before) as u64;
            self.started = true;
        }
    }
}
