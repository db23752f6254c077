//! The encoder: plain bytes from the LAN -> frames for the WAN.

use std::collections::VecDeque;

use thiserror::Error;

use crate::cache::PeerCache;
use crate::chunker::{Chunker, ChunkerConfig, ChunkerConfigError, StreamChunker};
use crate::compress::{
    self, delta_compress, stream_engine, Codec, Engine, Framing, Role, STREAM_WINDOW_LOG,
};
use crate::control::{sent_entries, ControlRepr};
use crate::fingerprint::Fingerprint;
use crate::frame::{
    emit_span_list, run_lengths, span_check, split_run, DataRepr, Payload, Run, MAX_RUN_CHUNKS,
    MAX_RUN_LEN, MAX_SPAN_CHUNKS, MAX_SPAN_LEN, VERSION,
};
use crate::stats::EncoderStats;
use crate::store::index::FingerprintMap;
use crate::store::segment::RECORD_HEADER_LEN;

/// How literals are compressed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Compression {
    /// Literals are sent as they are.
    Off,
    /// LZ4 block: a few hundred MB/s per core, for fast links.
    Lz4,
    /// zstd at `level` (1-19): slower, smaller; for links the CPU outruns.
    Zstd {
        /// zstd compression level.
        level: i32,
    },
    /// LZMA2 at `preset` (0-9) in stream runs: 7-20% smaller than zstd at
    /// level 18 on office documents, at 2-4 MB/s per core; for links of a
    /// few Mbit/s and less. Literals that go alone (deltas, repairs, no
    /// stream runs) use zstd at [`LZMA_ALONE_ZSTD_LEVEL`].
    Lzma {
        /// LZMA2 preset (the dictionary is the stream format's, 1 MiB).
        preset: u32,
    },
    /// The smallest: stream runs that are mostly text ([`text_share`] at
    /// least [`PPMD_TEXT_SHARE`], and a PPMd stream keeps PPMd down to
    /// [`PPMD_KEEP_SHARE`]; 8-bit or UTF-16) go through PPMd, the others
    /// through LZMA2 at `preset`. On the Table 1 office files PPMd
    /// makes text runs 15-25% smaller than LZMA2 and binary records
    /// 1-15% larger, hence the choice per run. Encodes at least as fast
    /// as LZMA2 alone, decodes PPMd runs at about 20 MB/s per core (PPMd
    /// is symmetric); for links of a few Mbit/s and less.
    Max {
        /// LZMA2 preset of the runs that are not text.
        preset: u32,
    },
}

/// [`text_share`] at or above which a [`Compression::Max`] stream goes
/// to PPMd (from LZMA2, or at its start). Measured per 128 KiB block of
/// the Table 1 files (BENCHMARKS.md): PPMd smaller on every block from
/// 0.5 up (by 10% between 0.5 and 0.6, 16-24% above), LZMA2 smaller on
/// all but two below. Starting at 0.6 leaves the spreadsheets' first run
/// (workbook globals and shared strings, 0.52) to LZMA2, whose window the
/// cell records after it match into: a change of engine starts the
/// stream anew.
pub const PPMD_TEXT_SHARE: f64 = 0.6;

/// [`text_share`] at or above which a PPMd stream stays PPMd (below it,
/// it goes to LZMA2, anew): PPMd costs 1-4% more than LZMA2 between 0.4
/// and 0.5, less than losing the model would.
pub const PPMD_KEEP_SHARE: f64 = 0.4;

/// Share of `data` that is text: printable ASCII, tab, CR and LF, and a
/// zero byte right after one of those (UTF-16LE text, as Word, Excel and
/// PowerPoint store it). 0 for no data.
pub fn text_share(data: &[u8]) -> f64 {
    let mut text = 0usize;
    let mut after_text = false;
    for &b in data {
        let is_text = matches!(b, 0x20..=0x7e | b'\t' | b'\n' | b'\r');
        if is_text || (b == 0 && after_text) {
            text += 1;
        }
        after_text = is_text;
    }
    text as f64 / data.len().max(1) as f64
}

/// The zstd level of [`Compression::Lzma`]'s literals outside stream runs.
pub const LZMA_ALONE_ZSTD_LEVEL: i32 = 18;

pub use crate::compress::LZMA_ENCODER_BYTES;

impl Compression {
    /// zstd at its default level (3).
    pub const ZSTD: Compression = Compression::Zstd { level: 3 };

    /// Whether this setting compresses slower than about 100 MB/s per core
    /// (zstd above level 5): tens of milliseconds per 128 KiB pushed.
    pub fn is_slow(self) -> bool {
        match self {
            Compression::Zstd { level } => level > 5,
            Compression::Lzma { .. } | Compression::Max { .. } => true,
            Compression::Off | Compression::Lz4 => false,
        }
    }

    /// The zstd level used for literals that go alone (`None` without
    /// zstd or LZMA2).
    pub fn zstd_level(self) -> Option<i32> {
        match self {
            Compression::Zstd { level } => Some(level),
            Compression::Lzma { .. } | Compression::Max { .. } => Some(LZMA_ALONE_ZSTD_LEVEL),
            Compression::Off | Compression::Lz4 => None,
        }
    }

    /// Memory a flow's stream compressor of this setting holds while it
    /// sends, rounded up (what a node budgets for it; 0 for LZ4 and off,
    /// which keep no stream). zstd with the stream's 1 MiB window: 3 MiB up
    /// to level 3, 5 MiB to 6, 7 MiB to 12, 11 MiB above; LZMA2:
    /// [`LZMA_ENCODER_BYTES`], also for [`Compression::Max`] (its PPMd model
    /// is smaller, and a stream holds one engine at a time). A test holds
    /// these above what
    /// [`Encoder::compressor_bytes`] reports for every level.
    pub fn stream_compressor_bytes(self) -> usize {
        match self {
            Compression::Off | Compression::Lz4 => 0,
            Compression::Zstd { level } if level <= 3 => 3 << 20,
            Compression::Zstd { level } if level <= 6 => 5 << 20,
            Compression::Zstd { level } if level <= 12 => 7 << 20,
            Compression::Zstd { .. } => 11 << 20,
            Compression::Lzma { .. } | Compression::Max { .. } => LZMA_ENCODER_BYTES,
        }
    }

    /// Whether literals are gathered into runs (zstd or LZMA2: slow links,
    /// where each byte counts).
    fn gathers(self) -> bool {
        self.zstd_level().is_some()
    }
}

/// Encoder settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct EncoderConfig {
    /// Chunk sizes.
    pub chunker: ChunkerConfig,
    /// How literals are compressed (see also [`Encoder::set_compression`]).
    pub compression: Compression,
    /// Keep the literals this encoder sends in the local store and tell the
    /// peer so (an `Ack` on the stream), so that the peer's encoders may
    /// reference them in the other direction: a file downloaded once
    /// uploads as references.
    pub store_sent: bool,
    /// Send a literal compressed only if that saves at least this many
    /// percent of its size.
    pub min_saving_percent: u8,
    /// Bytes of referenced chunks kept in memory to answer `NeedChunk`
    /// (FIFO); beyond them, a repair is read from the local store.
    pub retain_bytes: usize,
    /// Fingerprints of this flow's literals remembered for in-flow
    /// references.
    pub max_flow_chunks: usize,
    /// With zstd, consecutive literals are compressed together, in `Run`
    /// frames of up to about this many raw bytes (0: each chunk on its
    /// own). Never held back waiting for input: a run ends with each push.
    /// LZ4, picked where the CPU rather than the link is the limit, stays
    /// chunk by chunk: on inputs of 64 KiB and more it is 10-15% slower
    /// (a larger match table) for about 6% fewer bytes.
    #[serde(default = "default_run_len")]
    pub run_len: usize,
    /// With zstd, each run continues one compression stream per flow
    /// (`StreamRun` frames: 1 MiB of history across runs, about 10 MiB of
    /// compressor state at levels 9 and up, until [`Encoder::finish`] or
    /// [`Encoder::release_compressor`]) instead of starting afresh.
    #[serde(default = "default_stream_runs")]
    pub stream_runs: bool,
}

fn default_run_len() -> usize {
    DEFAULT_RUN_LEN
}

fn default_stream_runs() -> bool {
    true
}

/// Default [`EncoderConfig::run_len`]: at 128 KiB a compressor has most of
/// the context it can use on office documents (zstd level 3: 28-30% of
/// the Table 1 Word files against 35% chunk by chunk).
pub const DEFAULT_RUN_LEN: usize = 128 << 10;

impl Default for EncoderConfig {
    fn default() -> Self {
        EncoderConfig {
            chunker: ChunkerConfig::default(),
            compression: Compression::Lz4,
            store_sent: true,
            min_saving_percent: 3,
            retain_bytes: 32 << 20,
            max_flow_chunks: 1 << 16,
            run_len: DEFAULT_RUN_LEN,
            stream_runs: true,
        }
    }
}

/// Error handling a control frame from the peer's decoder.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum PeerControlError {
    /// The peer asked for a chunk that is neither retained nor readable
    /// from the local store. The flow cannot continue correctly: reset
    /// the stream.
    #[error(
        "peer needs chunk {0:?} which is neither retained nor in the local store; reset the flow"
    )]
    ChunkUnavailable(Fingerprint),
    /// The peer asked for the list of a span that is no longer remembered.
    #[error("peer needs span {0:?} which is no longer remembered; reset the flow")]
    SpanUnavailable(Fingerprint),
}

/// Spans remembered to answer `NeedSpan` (per flow, oldest forgotten
/// first; a list is at most 256 x 20 bytes).
const MAX_SENT_SPANS: usize = 1024;

/// References to chunks the peer holds one after the other, gathered into
/// a `Span` frame.
#[derive(Debug, Default)]
struct PendingSpan {
    chunks: Vec<(Fingerprint, u32)>,
    len: usize,
    /// Where the peer's next record starts, after the last chunk's.
    next_position: u64,
}

/// The compressing side of a flow's stream (`StreamRun` frames).
struct LiteralStream {
    /// The setting the stream was started for (zstd, LZMA2 or both LZMA2
    /// and PPMd).
    compression: Compression,
    engine: Box<dyn Engine>,
    /// The next run starts the stream (anew).
    fresh: bool,
    /// Bytes through the stream since it started.
    fed: u64,
    /// The chunks in the compressor's window: where each starts in the
    /// stream, oldest first, and by fingerprint.
    window: VecDeque<(Fingerprint, u64)>,
    in_window: FingerprintMap<u64>,
    /// Compressed over raw bytes of the stream's last run, since it
    /// started: what a chunk is likely to cost in the next run.
    ratio: Option<f64>,
}

impl std::fmt::Debug for LiteralStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LiteralStream")
            .field("compression", &self.compression)
            .field("fresh", &self.fresh)
            .finish_non_exhaustive()
    }
}

impl LiteralStream {
    /// A stream for `compression` whose first run is `first`.
    fn new(compression: Compression, first: &[u8]) -> Option<Self> {
        let engine = match compression {
            Compression::Zstd { level } => Self::engine(Codec::Zstd, level)?,
            Compression::Lzma { preset } => Self::lzma(preset)?,
            Compression::Max { preset } => match text_share(first) >= PPMD_TEXT_SHARE {
                true => Self::engine(Codec::Ppmd, 0)?,
                false => Self::lzma(preset)?,
            },
            Compression::Off | Compression::Lz4 => return None,
        };
        Some(LiteralStream {
            compression,
            engine,
            fresh: true,
            fed: 0,
            window: VecDeque::new(),
            in_window: FingerprintMap::default(),
            ratio: None,
        })
    }

    fn engine(codec: Codec, level: i32) -> Option<Box<dyn Engine>> {
        stream_engine(codec, Role::Compress { level }).ok()
    }

    fn lzma(preset: u32) -> Option<Box<dyn Engine>> {
        Self::engine(Codec::Lzma, i32::try_from(preset).ok()?)
    }

    /// Bytes the compression context holds.
    fn context_bytes(&self) -> usize {
        self.engine.state_bytes()
    }

    /// The codec of the stream's runs.
    fn codec(&self) -> Codec {
        self.engine.codec()
    }

    /// For [`Compression::Max`]: put the engine `data` calls for in place
    /// (a change starts the stream anew); `false` if it cannot be made.
    fn pick_engine(&mut self, data: &[u8]) -> bool {
        let Compression::Max { preset } = self.compression else {
            return true;
        };
        let ppmd = self.engine.codec() == Codec::Ppmd;
        let share = text_share(data);
        let wants_ppmd = match ppmd {
            true => share >= PPMD_KEEP_SHARE,
            false => share >= PPMD_TEXT_SHARE,
        };
        if wants_ppmd == ppmd {
            return true;
        }
        let engine = match wants_ppmd {
            true => Self::engine(Codec::Ppmd, 0),
            false => Self::lzma(preset),
        };
        let Some(engine) = engine else {
            return false;
        };
        self.engine = engine;
        self.forget();
        true
    }

    /// Whether `fingerprint`'s chunk went through the stream within its
    /// window (the compressor can still match all of it).
    fn holds(&self, fingerprint: &Fingerprint) -> bool {
        self.in_window.contains_key(fingerprint)
    }

    /// Chunks (fingerprint, length) that went through the stream. A PPMd
    /// model has no window to match in, but it has learned from them: a
    /// similar chunk costs less in the stream than as a delta against one
    /// of them (which gives up the stream's context), as with LZMA2.
    fn fed(&mut self, chunks: impl Iterator<Item = (Fingerprint, usize)>) {
        for (fingerprint, len) in chunks {
            self.window.push_back((fingerprint, self.fed));
            self.in_window.insert(fingerprint, self.fed);
            self.fed += len as u64;
        }
        let window = 1u64 << STREAM_WINDOW_LOG;
        while let Some(&(fingerprint, start)) = self.window.front() {
            if self.fed - start <= window {
                break;
            }
            self.window.pop_front();
            // Unless it went through again since.
            if self.in_window.get(&fingerprint) == Some(&start) {
                self.in_window.remove(&fingerprint);
            }
        }
    }

    /// Compress `data` into `out` (cleared first), flushed so the peer can
    /// decode all of it; `None` on failure (then [`LiteralStream::restart`]).
    fn compress(&mut self, data: &[u8], out: &mut Vec<u8>) -> Option<usize> {
        out.clear();
        if !self.pick_engine(data) {
            return None;
        }
        self.engine.compress(data, out).ok()
    }

    /// The next run starts a new stream (the caller makes a new context).
    fn forget(&mut self) {
        self.fresh = true;
        self.fed = 0;
        self.ratio = None;
        self.window.clear();
        self.in_window.clear();
    }

    /// Forget the history: the next run starts a new stream. `false` when
    /// no new context could be made (drop the stream).
    fn restart(&mut self) -> bool {
        self.forget();
        self.engine.restart().is_ok()
    }
}

/// Bytes of appends the local store must be able to take before it could
/// evict a referenced chunk for the encoder to rely on reading a repair
/// from it instead of keeping a copy: far more than a round trip's worth.
const REPAIR_MARGIN: u64 = 128 << 20;

/// Pieces shorter than this (a request line, a keystroke) failing to
/// compress do not start the compression backoff.
const SHORT_PIECE: usize = 1024;

/// Bounded FIFO of chunk data by fingerprint.
#[derive(Debug, Default)]
struct Retained {
    data: FingerprintMap<Vec<u8>>,
    order: VecDeque<Fingerprint>,
    bytes: usize,
}

impl Retained {
    fn insert(&mut self, fp: Fingerprint, chunk: &[u8], limit: usize) {
        if self.data.contains_key(&fp) {
            return;
        }
        while self.bytes + chunk.len() > limit {
            let Some(old) = self.order.pop_front() else {
                break;
            };
            if let Some(v) = self.data.remove(&old) {
                self.bytes -= v.len();
            }
        }
        if chunk.len() <= limit {
            self.data.insert(fp, chunk.to_vec());
            self.order.push_back(fp);
            self.bytes += chunk.len();
        }
    }
}

/// Everything but the chunker (split so the chunker can lend chunks).
#[derive(Debug)]
struct Core {
    cache: PeerCache,
    config: EncoderConfig,
    started: bool,
    flow_sent: FingerprintMap<()>,
    flow_order: VecDeque<Fingerprint>,
    retained: Retained,
    scratch: Vec<u8>,
    compressed_len: usize,
    skip_compression: u32,
    compress_backoff: u32,
    /// The block engine of the last literal compressed alone, its codec
    /// and level.
    block: Option<(Codec, i32, Box<dyn Engine>)>,
    stream: Option<LiteralStream>,
    /// Literals waiting to be compressed together: their bytes and their
    /// lengths (big-endian u32s, as the `Run` frame carries them).
    run: Vec<u8>,
    run_lengths: Vec<u8>,
    run_fingerprints: Vec<Fingerprint>,
    stored: Vec<(Fingerprint, u64)>,
    span: PendingSpan,
    sent_spans: FingerprintMap<Vec<(Fingerprint, u32)>>,
    sent_span_order: VecDeque<Fingerprint>,
    cursor: Option<Fingerprint>,
    base_scratch: Vec<u8>,
    delta_scratch: Vec<u8>,
    /// How many of the chunker's held bytes went out as `Piece`s.
    pieces_sent: usize,
    /// The run's first literal is the rest of a chunk begun as pieces,
    /// this long in all (a `PieceRest` goes before the run).
    run_rest: Option<u32>,
    stats: EncoderStats,
}

/// Encodes one direction of one flow. Sans-IO: bytes in, bytes out.
///
/// The frames written to `out` go, in order, on the flow's QUIC stream to
/// the peer's [`crate::Decoder`]. Control frames from the peer's decoder
/// (read by the local decoder on the reverse direction) are handed to
/// [`Encoder::handle_peer`].
#[derive(Debug)]
pub struct Encoder {
    core: Core,
    chunker: StreamChunker,
    finished: bool,
    peer_done: bool,
}

impl Encoder {
    /// An encoder for a new flow to the peer of `cache`.
    pub fn new(cache: PeerCache, config: EncoderConfig) -> Result<Self, ChunkerConfigError> {
        let chunker = StreamChunker::new(Chunker::new(config.chunker)?);
        Ok(Encoder {
            core: Core {
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
            },
            chunker,
            finished: false,
            peer_done: false,
        })
    }

    /// Write the stream preamble if not done yet. Call this before writing
    /// anything else (such as the local decoder's control frames) to the
    /// stream; every other method calls it too.
    pub fn start(&mut self, out: &mut Vec<u8>) {
        self.core.start(out);
    }

    /// Encode `input`. Frames for every chunk that is now decided are
    /// appended to `out`; up to one maximal chunk stays pending until more
    /// input, [`Encoder::flush`] or [`Encoder::finish`], and so does a span
    /// of references that the next push may extend (call `flush` when the
    /// input goes idle).
    pub fn push(&mut self, input: &[u8], out: &mut Vec<u8>) {
        debug_assert!(!self.finished, "push after finish");
        let before = out.len();
        self.core.start(out);
        self.core.stats.lan_bytes_in += input.len() as u64;
        let core = &mut self.core;
        self.chunker
            .push(input, |chunk| core.encode_chunk(chunk, out));
        // A pending span waits: a file read in 128 KiB pieces crosses as
        // one span per 256 chunks, not one per read. It costs no delay the
        // chunker's held-back chunk does not already cost.
        self.core.flush_run(out);
        self.core.emit_stored(out);
        self.core.stats.wan_bytes_out += (out.len() - before) as u64;
    }

    /// Change how the following literals are compressed (the node picks by
    /// the tunnel's rate). The peer decodes every codec whatever the choice.
    pub fn set_compression(&mut self, compression: Compression) {
        if self.core.config.compression != compression {
            self.core.config.compression = compression;
            self.core.skip_compression = 0;
            self.core.compress_backoff = 0;
        }
    }

    /// The compression in use.
    pub fn compression(&self) -> Compression {
        self.core.config.compression
    }

    /// Encode the pending bytes now (call when the LAN side goes idle, so
    /// interactive traffic is not held back; boundaries then depend on
    /// where the flush happened).
    pub fn flush(&mut self, out: &mut Vec<u8>) {
        let before = out.len();
        self.core.start(out);
        let core = &mut self.core;
        self.chunker.flush(|chunk| core.encode_chunk(chunk, out));
        self.core.flush_pending(out);
        self.core.emit_stored(out);
        self.core.stats.wan_bytes_out += (out.len() - before) as u64;
    }

    /// Bytes held back (the chunk being cut) that have not gone out as
    /// [`Encoder::send_held`] pieces.
    pub fn held_len(&self) -> usize {
        self.chunker.pending_len() - self.core.pieces_sent
    }

    /// Send the bytes held back now, as a `Piece`, without cutting their
    /// chunk: call it when the source trickles (reads keep coming, each
    /// too soon for the idle flush, but a chunk's worth takes long). The
    /// decoder delivers them at once; the chunk is cut where its content
    /// says, as if nothing had been sent early, so chunk boundaries do
    /// not depend on timing. The chunk then goes out as the piece that
    /// completes it, or as a `PieceRef` when the peer holds it.
    ///
    /// Held bytes that are, as they stand, a whole chunk the peer holds
    /// (the same request as before, cut there by an earlier idle flush)
    /// are cut there and go as a reference instead.
    ///
    /// With nothing held that has not gone as pieces, it only sends what
    /// was decided before (a pending span or run), keeping the chunk open.
    pub fn send_held(&mut self, out: &mut Vec<u8>) {
        let held = self.chunker.pending();
        if held.len() <= self.core.pieces_sent {
            let before = out.len();
            self.core.flush_pending(out);
            self.core.emit_stored(out);
            self.core.stats.wan_bytes_out += (out.len() - before) as u64;
            return;
        }
        if self.core.pieces_sent == 0 && self.core.peer_holds(&Fingerprint::of(held)) {
            self.flush(out);
            return;
        }
        let before = out.len();
        self.core.start(out);
        // Whatever was decided before the held bytes goes first.
        self.core.flush_pending(out);
        self.core.emit_stored(out);
        let bytes = &held[self.core.pieces_sent..];
        self.core.piece(0, bytes, out);
        self.core.pieces_sent = held.len();
        self.core.stats.wan_bytes_out += (out.len() - before) as u64;
    }

    /// End of the LAN stream: flush and write the `End` frame. Keep the
    /// stream open and keep feeding [`Encoder::handle_peer`] until
    /// [`Encoder::is_done`]: the peer may still ask for repairs.
    pub fn finish(&mut self, out: &mut Vec<u8>) {
        if self.finished {
            return;
        }
        self.flush(out);
        // No more literals: free the stream's compressor (about 10 MiB at
        // the slow levels) while the flow waits for the peer's `Done`.
        self.core.stream = None;
        let before = out.len();
        DataRepr::End.emit(out);
        self.core.stats.wan_bytes_out += (out.len() - before) as u64;
        self.finished = true;
    }

    /// Handle a control frame from the peer's decoder; a repair, if asked
    /// for, is appended to `out`.
    pub fn handle_peer(
        &mut self,
        message: &ControlRepr,
        out: &mut Vec<u8>,
    ) -> Result<(), PeerControlError> {
        match message {
            ControlRepr::NeedChunk { fingerprint } => {
                let before = out.len();
                self.core.start(out);
                let core = &mut self.core;
                // The peer lacks it whatever we answer: no later flow may
                // refer to it until the peer acknowledges storing it again
                // (if neither side can supply it, the next flow sends it
                // whole instead of failing on it again).
                core.cache.lock().peer.forget(fingerprint);
                let (data, retained) = match core.retained.data.remove(fingerprint) {
                    Some(data) => (data, true),
                    None => {
                        // Beyond the retained bytes (a fast warm flow
                        // references far more than it retains in a round
                        // trip): the local store usually still holds it,
                        // and its reads are verified.
                        let mut data = std::mem::take(&mut core.base_scratch);
                        data.clear();
                        let found = core.cache.lock().store.get(fingerprint, &mut data);
                        if !matches!(found, Ok(true)) {
                            core.base_scratch = data;
                            return Err(PeerControlError::ChunkUnavailable(*fingerprint));
                        }
                        core.stats.repairs_from_store += 1;
                        (data, false)
                    }
                };
                let codec = core.compress(&data);
                let payload = core.payload(codec, &data);
                DataRepr::Repair {
                    fingerprint: *fingerprint,
                    payload,
                }
                .emit(out);
                core.stats.repairs_sent += 1;
                core.stats.wan_bytes_out += (out.len() - before) as u64;
                if retained {
                    // Keep it: the peer may need it again on another miss.
                    core.retained.data.insert(*fingerprint, data);
                } else {
                    core.base_scratch = data;
                }
            }
            ControlRepr::Ack { low_water, entries } => {
                self.core.cache.lock().peer.handle_ack(*low_water, entries);
            }
            // The decoder turns these into `Ack`s (it knows the chunks they
            // name); one that reaches us unresolved names nothing.
            ControlRepr::Sent { .. } => {}
            ControlRepr::Done => self.peer_done = true,
            ControlRepr::NeedSpan { check } => {
                let before = out.len();
                self.core.start(out);
                let Some(list) = self.core.sent_spans.get(check) else {
                    return Err(PeerControlError::SpanUnavailable(*check));
                };
                emit_span_list(check, list, out);
                self.core.stats.span_lists_sent += 1;
                self.core.stats.wan_bytes_out += (out.len() - before) as u64;
            }
        }
        Ok(())
    }

    /// True once the peer's decoder confirmed it delivered everything up to
    /// `End`: the stream can be finished.
    pub fn is_done(&self) -> bool {
        self.peer_done
    }

    /// Counters.
    pub fn stats(&self) -> EncoderStats {
        self.core.stats
    }

    /// Bytes held by the flow's stream compressor (0 when it has none):
    /// zstd about 10 MiB at levels 9 and up, 1-2 MiB below; LZMA2 13 MiB.
    pub fn compressor_bytes(&self) -> usize {
        self.core
            .stream
            .as_ref()
            .map_or(0, LiteralStream::context_bytes)
    }

    /// Frees the flow's stream compressor, for a flow that went idle:
    /// the next literals start a new stream (they no longer match against
    /// what the flow sent before, which the byte cache still covers).
    /// Literals held for a run not yet sent go into the new stream. When
    /// runs of the stream were sent, a `StreamEnd` frame (4 bytes) is
    /// written to `out` so that the peer's decoder frees its context too.
    pub fn release_compressor(&mut self, out: &mut Vec<u8>) {
        let Some(stream) = self.core.stream.take() else {
            return;
        };
        if !stream.fresh {
            let before = out.len();
            DataRepr::StreamEnd.emit(out);
            self.core.stats.wan_bytes_out += (out.len() - before) as u64;
        }
    }
}

impl Core {
    fn start(&mut self, out: &mut Vec<u8>) {
        if !self.started {
            let before = out.len();
            DataRepr::Preamble { version: VERSION }.emit(out);
            self.stats.wan_bytes_out += (out.len() - before) as u64;
            self.started = true;
        }
    }

    /// What a delta of `chunk` would be against: what followed the
    /// previous chunk when this stream last passed, or a stored chunk with
    /// the same first or last 64 bytes.
    fn delta_base(&self, chunk: &[u8]) -> Option<Fingerprint> {
        let shared = self.cache.lock();
        self.cursor
            .and_then(|c| shared.store.successor(&c))
            .or_else(|| shared.store.similar(chunk))
    }

    /// Whether the peer holds the chunk (or was sent it in this flow).
    fn peer_holds(&self, fingerprint: &Fingerprint) -> bool {
        self.flow_sent.contains_key(fingerprint)
            || self.cache.lock().peer.position(fingerprint).is_some()
    }

    fn encode_chunk(&mut self, chunk: &[u8], out: &mut Vec<u8>) {
        let fingerprint = Fingerprint::of(chunk);
        self.stats.chunks += 1;
        // Where the peer holds it (for spans); a chunk first sent in this
        // flow may not be acknowledged yet, and is referred to on its own.
        let in_flow = self.flow_sent.contains_key(&fingerprint);
        let (position, held_locally) = {
            let shared = self.cache.lock();
            let position = if in_flow {
                None
            } else {
                shared.peer.position(&fingerprint)
            };
            let held = (in_flow || position.is_some())
                && shared.store.holds_for(&fingerprint, REPAIR_MARGIN);
            (position, held)
        };
        let peer_holds = in_flow || position.is_some();
        if self.pieces_sent > 0 {
            // Its start is out as pieces: the rest completes it, by
            // reference when the peer holds the chunk and there is a rest.
            let sent = self.pieces_sent.min(chunk.len());
            self.pieces_sent -= sent;
            if peer_holds && sent < chunk.len() {
                self.flush_pending(out);
                DataRepr::PieceRef {
                    fingerprint,
                    raw_len: chunk.len() as u32,
                }
                .emit(out);
                self.retain_reference(fingerprint, chunk, held_locally);
                self.stats.referenced_bytes -= sent as u64;
                return;
            }
            // Or a delta against a chunk like it (an upload of a file just
            // downloaded, behind its own request line).
            let base = (sent < chunk.len())
                .then(|| self.delta_base(chunk))
                .flatten();
            self.cursor = base;
            if !base.is_some_and(|base| self.try_delta(fingerprint, base, chunk, sent, out)) {
                if sent < chunk.len() && self.streams_next_literal() {
                    // The rest goes into the flow's stream with what
                    // follows (compressed alone, a response's first chunk
                    // behind its header cost up to 1.2% of the file).
                    self.flush_span(out);
                    self.flush_run(out);
                    self.run_rest = Some(chunk.len() as u32);
                    self.gather(fingerprint, &chunk[sent..], out);
                } else {
                    self.piece(chunk.len() as u32, &chunk[sent..], out);
                }
            }
            self.note_sent(fingerprint, chunk);
            return;
        }
        if peer_holds {
            self.flush_run(out);
            self.reference(fingerprint, chunk.len(), position, out);
            self.retain_reference(fingerprint, chunk, held_locally);
            return;
        }
        // What followed the previous chunk when this stream last passed:
        // likely the version of this chunk before an edit.
        // Or, at the start of a stream or after another literal, a stored
        // chunk with the same first or last 64 bytes.
        let base = self.delta_base(chunk);
        self.cursor = base;
        if !base.is_some_and(|base| self.try_delta(fingerprint, base, chunk, 0, out)) {
            self.literal(fingerprint, chunk, out);
        }
        self.note_sent(fingerprint, chunk);
    }

    /// After a reference to `chunk`: what a repair needs, and the cursor.
    fn retain_reference(&mut self, fingerprint: Fingerprint, chunk: &[u8], held_locally: bool) {
        // A repair, should the peer need one, is read from the local
        // store when it holds the chunk far from eviction; only the
        // others are copied (a copy per chunk was a tenth of a warm
        // flow's encoding time).
        if !held_locally {
            self.retained
                .insert(fingerprint, chunk, self.config.retain_bytes);
        }
        self.stats.references += 1;
        self.stats.referenced_bytes += chunk.len() as u64;
        self.cursor = Some(fingerprint);
    }

    /// Keeps a chunk just sent in full (literal, delta or pieces) in the
    /// local store, to be named in the next `Sent`, and remembers it for
    /// the rest of the flow.
    fn note_sent(&mut self, fingerprint: Fingerprint, chunk: &[u8]) {
        if self.config.store_sent {
            // The literal is in `out`, or in the run that goes out before
            // this call ends: the peer stores it on receipt;
            // our copy lets it reference the chunk back to us. Written with
            // the others of this call before the `Ack` (`emit_stored`).
            match self.cache.lock().store.insert_buffered(fingerprint, chunk) {
                Ok(position) => self.stored.push((fingerprint, position)),
                Err(_) => self.stats.store_errors += 1,
            }
        }
        if self.flow_sent.insert(fingerprint, ()).is_none() {
            self.flow_order.push_back(fingerprint);
            if self.flow_order.len() > self.config.max_flow_chunks {
                if let Some(old) = self.flow_order.pop_front() {
                    self.flow_sent.remove(&old);
                }
            }
        }
    }

    /// Refer to a chunk the decoder holds (at `position` in its store, when
    /// known): gathered into the pending span when it is right after the
    /// span's last chunk, else (after sending the span) a span of its own
    /// or a `Reference`.
    fn reference(
        &mut self,
        fingerprint: Fingerprint,
        len: usize,
        position: Option<u64>,
        out: &mut Vec<u8>,
    ) {
        let span = &mut self.span;
        let extends = !span.chunks.is_empty()
            && position == Some(span.next_position)
            && span.chunks.len() < MAX_SPAN_CHUNKS
            && span.len + len <= MAX_SPAN_LEN;
        if !extends {
            self.flush_span(out);
        }
        match position {
            Some(position) => {
                let span = &mut self.span;
                span.chunks.push((fingerprint, len as u32));
                span.len += len;
                span.next_position = position + (RECORD_HEADER_LEN + len) as u64;
            }
            None => DataRepr::Reference {
                fingerprint,
                raw_len: len as u32,
            }
            .emit(out),
        }
    }

    /// Send the pending span: a `Span` frame, or a `Reference` for one
    /// chunk. Remembered for a `NeedSpan`.
    fn flush_span(&mut self, out: &mut Vec<u8>) {
        let chunks = std::mem::take(&mut self.span.chunks);
        let len = std::mem::take(&mut self.span.len);
        match chunks[..] {
            [] => {}
            [(fingerprint, raw_len)] => DataRepr::Reference {
                fingerprint,
                raw_len,
            }
            .emit(out),
            _ => {
                let check = span_check(chunks.iter().map(|(fp, _)| fp));
                DataRepr::Span {
                    first: chunks[0].0,
                    count: chunks.len() as u16,
                    raw_len: len as u32,
                    check,
                }
                .emit(out);
                self.stats.spans += 1;
                if self.sent_spans.insert(check, chunks).is_none() {
                    self.sent_span_order.push_back(check);
                    if self.sent_span_order.len() > MAX_SENT_SPANS {
                        if let Some(old) = self.sent_span_order.pop_front() {
                            self.sent_spans.remove(&old);
                        }
                    }
                }
                return;
            }
        }
        // Keep the buffer's capacity.
        self.span.chunks = chunks;
        self.span.chunks.clear();
    }

    /// Send whatever is gathered (a span or a run: never both).
    fn flush_pending(&mut self, out: &mut Vec<u8>) {
        self.flush_span(out);
        self.flush_run(out);
    }

    /// Send `chunk` as a delta against `base` if the peer holds `base` and
    /// the delta is smaller than the literal would be.
    /// `sent`: the chunk's first bytes already went as pieces (the delta
    /// then completes them, and must beat the rest sent alone).
    fn try_delta(
        &mut self,
        fingerprint: Fingerprint,
        base: Fingerprint,
        chunk: &[u8],
        sent: usize,
        out: &mut Vec<u8>,
    ) -> bool {
        let level = match self.config.compression {
            Compression::Off => return false,
            Compression::Lz4 => 1,
            other => other.zstd_level().unwrap_or(1),
        };
        if self.stream_holds(&base) {
            // The next run's compressor sees the base in its history and
            // everything else sent lately too: a delta (the base alone as
            // its dictionary) would cost more, and its own context.
            return false;
        }
        let mut base_data = std::mem::take(&mut self.base_scratch);
        base_data.clear();
        let usable = {
            let mut shared = self.cache.lock();
            (self.flow_sent.contains_key(&base) || shared.peer.holds(&base))
                && shared.store.get(&base, &mut base_data).unwrap_or(false)
        };
        let mut delta = std::mem::take(&mut self.delta_scratch);
        let delta_len = if usable {
            delta_compress(chunk, &base_data, level, &mut delta)
        } else {
            None
        };
        self.base_scratch = base_data;
        let Some(delta_len) = delta_len else {
            self.delta_scratch = delta;
            return false;
        };
        // A delta frame carries 31 bytes more than a literal's header; it
        // must beat the literal. Tiny deltas need no comparison.
        let rest = &chunk[sent..];
        let worth = delta_len < rest.len() / 16 || {
            let alone = match self.compress(rest) {
                Codec::Raw => rest.len(),
                Codec::Lz4 | Codec::Zstd | Codec::Lzma | Codec::Ppmd => self.compressed_len,
            };
            // In a stream run the chunk costs what the stream's runs cost
            // lately, often less than compressed alone: a delta against a
            // merely similar chunk gives up the stream's context for it.
            let in_stream = self
                .stream_ratio()
                .map_or(alone, |ratio| (ratio * rest.len() as f64).ceil() as usize);
            delta_len + 31 < alone.min(in_stream)
        };
        if worth {
            self.flush_pending(out);
            DataRepr::Delta {
                target: fingerprint,
                base,
                raw_len: chunk.len() as u32,
                bytes: &delta[..delta_len],
                after_pieces: sent > 0,
            }
            .emit(out);
            // Kept for a repair: the peer asks for the chunk itself when
            // its copy of the base turns out damaged.
            self.retained
                .insert(fingerprint, chunk, self.config.retain_bytes);
            self.stats.deltas += 1;
            self.stats.delta_bytes += chunk.len() as u64;
        }
        self.delta_scratch = delta;
        worth
    }

    /// Send `chunk` in full: added to the run being gathered while zstd or
    /// LZMA2 is on and paying, else at once as a `Literal` (zstd or LZMA2:
    /// slow links, where each byte counts) or a `Named` literal (LZ4 or
    /// none: fast links, where the peer's time to hash it would count more
    /// than its 16 bytes).
    fn literal(&mut self, fingerprint: Fingerprint, chunk: &[u8], out: &mut Vec<u8>) {
        let slow_link = self.config.compression.gathers();
        let gather = self.config.run_len > 0 && slow_link && self.skip_compression == 0;
        self.flush_span(out);
        if !gather {
            self.flush_run(out);
            self.single_literal((!slow_link).then_some(fingerprint), chunk, out);
            return;
        }
        self.gather(fingerprint, chunk, out);
    }

    /// Adds a literal to the run, sending the run when it is long enough.
    fn gather(&mut self, fingerprint: Fingerprint, chunk: &[u8], out: &mut Vec<u8>) {
        if self.run.len() + chunk.len() > MAX_RUN_LEN {
            self.flush_run(out);
        }
        self.run.extend_from_slice(chunk);
        self.run_lengths
            .extend_from_slice(&(chunk.len() as u32).to_be_bytes());
        self.run_fingerprints.push(fingerprint);
        if self.run.len() >= self.config.run_len || self.run_lengths.len() / 4 >= MAX_RUN_CHUNKS {
            self.flush_run(out);
        }
    }

    /// A `Piece`: `bytes` (compressed when that pays) and the `cut`.
    fn piece(&mut self, cut: u32, bytes: &[u8], out: &mut Vec<u8>) {
        self.flush_pending(out);
        let payload = if bytes.is_empty() {
            None
        } else {
            self.stats.pieces += 1;
            self.stats.piece_bytes += bytes.len() as u64;
            let codec = if bytes.len() < SHORT_PIECE {
                // A request line that does not compress says nothing of
                // the body behind it: no backoff (it left the body's first
                // chunk raw).
                let backoff = (self.skip_compression, self.compress_backoff);
                let codec = self.compress_now(bytes);
                (self.skip_compression, self.compress_backoff) = backoff;
                codec
            } else {
                self.compress(bytes)
            };
            Some(self.payload(codec, bytes))
        };
        DataRepr::Piece { cut, payload }.emit(out);
    }

    fn single_literal(&mut self, name: Option<Fingerprint>, chunk: &[u8], out: &mut Vec<u8>) {
        let codec = self.compress(chunk);
        let payload = self.payload(codec, chunk);
        match name {
            Some(fingerprint) => DataRepr::Named {
                fingerprint,
                payload,
            }
            .emit(out),
            None => DataRepr::Literal(payload).emit(out),
        }
        match codec {
            Codec::Raw => self.stats.literals_raw += 1,
            Codec::Lz4 | Codec::Zstd | Codec::Lzma | Codec::Ppmd => {
                self.stats.literals_compressed += 1
            }
        }
    }

    /// Send the gathered literals: one `Run` frame when they compress, one
    /// raw `Literal` each when they do not (then compression backs off).
    /// Called before any frame that must follow them and at the end of
    /// every push.
    fn flush_run(&mut self, out: &mut Vec<u8>) {
        let count = self.run_lengths.len() / 4;
        if count == 0 {
            return;
        }
        if let Some(cut) = self.run_rest.take() {
            // Whatever frame the run becomes, its first chunk comes first.
            DataRepr::PieceRest { cut }.emit(out);
        }
        let run = std::mem::take(&mut self.run);
        let lengths = std::mem::take(&mut self.run_lengths);
        let streamed = self.config.stream_runs && self.config.compression.gathers();
        if count == 1 && !streamed {
            self.single_literal(None, &run, out);
        } else {
            let sent = match streamed {
                true => self.stream_run(&run, &lengths, out),
                _ => match self.compress_now(&run) {
                    Codec::Raw => false,
                    codec => {
                        DataRepr::Run(Run {
                            codec,
                            lengths: &lengths,
                            bytes: &self.scratch[..self.compressed_len],
                        })
                        .emit(out);
                        true
                    }
                },
            };
            if sent {
                self.stats.literals_compressed += count as u64;
            } else {
                for chunk in split_run(&run, run_lengths(&lengths)) {
                    DataRepr::Literal(self.payload(Codec::Raw, chunk)).emit(out);
                }
                self.stats.literals_raw += count as u64;
            }
        }
        // Keep the buffers' capacity for the next run.
        self.run = run;
        self.run.clear();
        self.run_lengths = lengths;
        self.run_lengths.clear();
        self.run_fingerprints.clear();
    }

    /// Send `run` as a `StreamRun` continuing the flow's stream (zstd or
    /// LZMA2, as set) if that pays; `false` (and compression backs off)
    /// when it does not. A run that does not pay has still gone through
    /// the compressor, so the stream starts anew after it.
    fn stream_run(&mut self, run: &[u8], lengths: &[u8], out: &mut Vec<u8>) -> bool {
        let limit = run.len() - run.len() * usize::from(self.config.min_saving_percent) / 100;
        let compression = self.config.compression;
        let stream = match &mut self.stream {
            Some(stream) if stream.compression == compression => stream,
            slot => match LiteralStream::new(compression, run) {
                Some(stream) => slot.insert(stream),
                None => return false,
            },
        };
        match stream.compress(run, &mut self.scratch) {
            Some(n) if n > 0 && n <= limit => {
                DataRepr::StreamRun {
                    fresh: stream.fresh,
                    run: Run {
                        codec: stream.codec(),
                        lengths,
                        bytes: &self.scratch[..n],
                    },
                }
                .emit(out);
                stream.fresh = false;
                stream.ratio = Some(n as f64 / run.len() as f64);
                stream.fed(
                    self.run_fingerprints
                        .iter()
                        .copied()
                        .zip(run_lengths(lengths)),
                );
                self.compress_backoff = 0;
                true
            }
            _ => {
                // A failed run may have left the compressor mid-stream;
                // one that did not pay went through it: start anew.
                if !stream.restart() {
                    self.stream = None;
                }
                self.compress_backoff = (self.compress_backoff * 2).clamp(1, 16);
                self.skip_compression = self.compress_backoff;
                false
            }
        }
    }

    /// Whether the next literal goes into a stream run.
    fn streams_next_literal(&self) -> bool {
        self.config.compression.gathers()
            && self.config.stream_runs
            && self.config.run_len > 0
            && self.skip_compression == 0
    }

    /// The flow's stream the next literal goes into, if it goes into one
    /// (a stream of another setting is replaced by the next run).
    fn next_stream(&self) -> Option<&LiteralStream> {
        self.stream.as_ref().filter(|stream| {
            self.streams_next_literal() && stream.compression == self.config.compression
        })
    }

    /// Compressed over raw bytes of the last run of the stream the next
    /// literal goes into, if it goes into one that has sent a run.
    fn stream_ratio(&self) -> Option<f64> {
        self.next_stream().and_then(|stream| stream.ratio)
    }

    /// Whether the next literal goes into a stream run whose compressor
    /// still has `base` in its window, or in the run itself.
    fn stream_holds(&self, base: &Fingerprint) -> bool {
        self.streams_next_literal()
            && (self.run_fingerprints.contains(base)
                || self.next_stream().is_some_and(|stream| stream.holds(base)))
    }

    /// Compress `chunk` into `scratch` when that pays; returns the codec.
    /// After a chunk that did not compress, the next 1, 2, 4 .. 16 chunks
    /// are sent raw without trying (incompressible streams stay fast).
    fn compress(&mut self, chunk: &[u8]) -> Codec {
        let compression = self.config.compression;
        if compression == Compression::Off {
            return Codec::Raw;
        }
        if self.skip_compression > 0 {
            self.skip_compression -= 1;
            return Codec::Raw;
        }
        self.compress_now(chunk)
    }

    /// Compress `data` into `scratch` if that pays (whatever the backoff);
    /// a failure starts or doubles the backoff.
    fn compress_now(&mut self, chunk: &[u8]) -> Codec {
        let compression = self.config.compression;
        let limit = chunk.len() - chunk.len() * usize::from(self.config.min_saving_percent) / 100;
        let packed = match compression {
            Compression::Off => None,
            Compression::Lz4 => self
                .compress_block(Codec::Lz4, 0, chunk)
                .map(|n| (n, Codec::Lz4)),
            other => other
                .zstd_level()
                .and_then(|level| self.compress_block(Codec::Zstd, level, chunk))
                .map(|n| (n, Codec::Zstd)),
        };
        match packed {
            Some((n, codec)) if n > 0 && n <= limit => {
                self.compressed_len = n;
                self.compress_backoff = 0;
                codec
            }
            _ => {
                self.compress_backoff = (self.compress_backoff * 2).clamp(1, 16);
                self.skip_compression = self.compress_backoff;
                Codec::Raw
            }
        }
    }

    /// Compress `chunk` into `scratch` with the block engine of `codec`
    /// at `level` (made anew when the setting changed).
    fn compress_block(&mut self, codec: Codec, level: i32, chunk: &[u8]) -> Option<usize> {
        if self
            .block
            .as_ref()
            .is_none_or(|(c, l, _)| (*c, *l) != (codec, level))
        {
            let engine = compress::engine(codec, Framing::Block, Role::Compress { level }).ok()?;
            self.block = Some((codec, level, engine));
        }
        let (_, _, engine) = self.block.as_mut()?;
        engine.compress(chunk, &mut self.scratch).ok()
    }

    /// Write the literals stored since the last call to the store's file
    /// (one write) and tell the peer which we hold (one `Sent`: the peer
    /// has just decoded them, a fingerprint prefix names each).
    fn emit_stored(&mut self, out: &mut Vec<u8>) {
        if self.stored.is_empty() {
            return;
        }
        let low_water = {
            let mut shared = self.cache.lock();
            // Announce only what is written and still indexed where we
            // stored it.
            if shared.store.flush_announced(&mut self.stored).is_err() {
                self.stats.store_errors += 1;
            }
            shared.store.low()
        };
        if self.stored.is_empty() {
            return;
        }
        ControlRepr::Sent {
            low_water,
            entries: sent_entries(&self.stored),
        }
        .emit(out);
        self.stored.clear();
    }

    fn payload<'a>(&'a self, codec: Codec, chunk: &'a [u8]) -> Payload<'a> {
        match codec {
            Codec::Raw => Payload {
                codec,
                raw_len: chunk.len() as u32,
                bytes: chunk,
            },
            Codec::Lz4 | Codec::Zstd | Codec::Lzma | Codec::Ppmd => Payload {
                codec,
                raw_len: chunk.len() as u32,
                bytes: &self.scratch[..self.compressed_len],
            },
        }
    }
}
