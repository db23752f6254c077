//! The decoder: frames from the WAN -> plain bytes for the LAN, plus control
//! frames for the reverse direction.
//!
//! [`Decoder`] takes the stream in pieces cut anywhere; whole frames come
//! out of `framing.rs`, and `dispatch.rs` checks where each may come and
//! hands it on. The stream's bytes come in the frame (`literal.rs`:
//! literals, runs, the flow's compression stream, and pieces of a chunk
//! not cut yet, held in `pieces.rs`), from the store (`resolve.rs`:
//! references, spans, deltas) or late: what could not be had is asked
//! for, and the bytes after it wait in the backlog (`backlog.rs`) until
//! its repair or the span's list arrives (`repair.rs`). Control frames go
//! both ways (`peer_control.rs`). Settings are in `config.rs`, the error
//! in `error.rs`.

mod backlog;
mod config;
mod dispatch;
mod error;
mod framing;
mod literal;
mod peer_control;
mod pieces;
mod repair;
mod resolve;

use crate::cache::PeerCache;
use crate::control::ControlRepr;
use crate::frame::StreamDecoder;
use crate::stats::DecoderStats;

use self::backlog::Backlog;
use self::framing::FrameBuffer;
use self::peer_control::{FromPeer, ToPeer};
use self::pieces::Pieces;

pub use self::config::DecoderConfig;
pub use self::error::DecodeError;

/// Decodes one direction of one flow. Sans-IO: bytes in, bytes out.
#[derive(Debug)]
pub struct Decoder {
    cache: PeerCache,
    /// The start of a frame the next push completes.
    framing: FrameBuffer,
    /// The preamble was read.
    started: bool,
    /// `End` was read.
    end_seen: bool,
    /// `End` was read and every byte before it delivered.
    finished: bool,
    /// Bytes held back behind chunks that could not be had.
    backlog: Backlog,
    /// Control frames for the peer's encoder.
    to_peer: ToPeer,
    /// Control frames from the peer for the local encoder.
    from_peer: FromPeer,
    /// The flow's decompression stream (`StreamRun` frames).
    stream: StreamDecoder,
    /// The chunk being delivered ahead in pieces.
    pieces: Pieces,
    stats: DecoderStats,
}

impl Decoder {
    /// A decoder for a new flow from the peer of `cache`.
    pub fn new(cache: PeerCache, config: DecoderConfig) -> Self {
        Decoder {
            cache,
            framing: FrameBuffer::default(),
            started: false,
            end_seen: false,
            finished: false,
            backlog: Backlog::new(config.max_backlog),
            to_peer: ToPeer::default(),
            from_peer: FromPeer::new(config.max_peer_control),
            stream: StreamDecoder::default(),
            pieces: Pieces::default(),
            stats: DecoderStats::default(),
        }
    }

    /// Decode `wire` (any piece of the stream); plain bytes are appended to
    /// `out` in order. Afterwards drain [`Decoder::poll_control`] (to the
    /// peer) and [`Decoder::poll_peer_control`] (to the local encoder).
    pub fn push(&mut self, wire: &[u8], out: &mut Vec<u8>) -> Result<(), DecodeError> {
        self.stats.wan_bytes_in += wire.len() as u64;
        let before = out.len();
        let result = self.push_frames(wire, out);
        self.stats.lan_bytes_out += (out.len() - before) as u64;
        result
    }

    fn push_frames(&mut self, mut wire: &[u8], out: &mut Vec<u8>) -> Result<(), DecodeError> {
        while let Some(frame) = self.framing.next_frame(&mut wire)? {
            self.handle_frame(&frame, out)?;
        }
        Ok(())
    }

    /// Next control frame for the peer's encoder (write it with
    /// [`ControlRepr::emit`] on the reverse direction of this flow).
    #[must_use]
    pub fn poll_control(&mut self) -> Option<ControlRepr> {
        self.to_peer.poll(&self.cache, &mut self.stats)
    }

    /// Write every pending control frame to `out` (convenience over
    /// [`Decoder::poll_control`]).
    pub fn emit_control(&mut self, out: &mut Vec<u8>) {
        while let Some(c) = self.poll_control() {
            c.emit(out);
        }
    }

    /// Next control frame that arrived from the peer's decoder, for the
    /// local [`crate::Encoder::handle_peer`].
    #[must_use]
    pub fn poll_peer_control(&mut self) -> Option<ControlRepr> {
        self.from_peer.poll()
    }

    /// True once `End` was decoded and every byte before it delivered (the
    /// LAN side can be shut down for writing).
    pub fn is_finished(&self) -> bool {
        self.finished
    }

    /// Bytes held back behind unresolved references (for back-pressure).
    pub fn backlog_bytes(&self) -> usize {
        self.backlog.bytes()
    }

    /// Bytes held by the flow's stream decompression context, zstd or
    /// LZMA2 (0 when it has none): about 1.5 MiB or 1 MiB (the 1 MiB
    /// window and its buffers) while the peer's encoder keeps a stream.
    pub fn decompressor_bytes(&self) -> usize {
        self.stream.context_bytes()
    }

    /// Whether the flow's stream is in an engine that decodes at tens of
    /// MB/s (PPMd, LZMA2): a caller on an async runtime should decode off
    /// its worker. False before the peer's first stream run.
    pub fn decodes_slowly(&self) -> bool {
        self.stream.is_slow()
    }

    /// Whether pushing `wire` completes at least one frame, and so may
    /// decode a run, rather than only keeping part of one for later.
    pub fn push_completes_frame(&self, wire: &[u8]) -> bool {
        self.framing.completes_frame(wire)
    }

    /// Counters.
    pub fn stats(&self) -> DecoderStats {
        self.stats
    }
}
