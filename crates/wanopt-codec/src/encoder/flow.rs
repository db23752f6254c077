//! [`Encoder`]: one direction of one flow, the public face of the
//! encoder.

use crate::cache::PeerCache;
use crate::chunker::ChunkerConfigError;
use crate::control::ControlRepr;
use crate::fingerprint::Fingerprint;
use crate::frame::{DataRepr, VERSION};
use crate::stats::EncoderStats;

use super::chunking::Chunking;
use super::compression::Compression;
use super::config::EncoderConfig;
use super::error::PeerControlError;
use super::state::Core;

/// Encodes one direction of one flow. Sans-IO: bytes in, bytes out.
///
/// The frames written to `out` go, in order, on the flow's QUIC stream to
/// the peer's [`crate::Decoder`]. Control frames from the peer's decoder
/// (read by the local decoder on the reverse direction) are handed to
/// [`Encoder::handle_peer`].
#[derive(Debug)]
pub struct Encoder {
    core: Core,
    chunking: Chunking,
    /// The preamble was written.
    started: bool,
    /// `End` was written.
    finished: bool,
    /// The peer's decoder delivered everything up to `End`.
    peer_done: bool,
}

impl Encoder {
    /// An encoder for a new flow to the peer of `cache`.
    pub fn new(cache: PeerCache, config: EncoderConfig) -> Result<Self, ChunkerConfigError> {
        let chunking = Chunking::new(config.chunker)?;
        Ok(Encoder {
            core: Core::new(cache, config),
            chunking,
            started: false,
            finished: false,
            peer_done: false,
        })
    }

    /// Write the stream preamble if not done yet. Call this before writing
    /// anything else (such as the local decoder's control frames) to the
    /// stream; every other method calls it too.
    pub fn start(&mut self, out: &mut Vec<u8>) {
        if !self.started {
            let before = out.len();
            DataRepr::Preamble { version: VERSION }.emit(out);
            self.core.stats.wan_bytes_out += (out.len() - before) as u64;
            self.started = true;
        }
    }

    /// Encode `input`. Frames for every chunk that is now decided are
    /// appended to `out`; up to one maximal chunk stays pending until more
    /// input, [`Encoder::flush`] or [`Encoder::finish`], and so does a span
    /// of references that the next push may extend (call `flush` when the
    /// input goes idle).
    pub fn push(&mut self, input: &[u8], out: &mut Vec<u8>) {
        debug_assert!(!self.finished, "push after finish");
        let before = out.len();
        self.start(out);
        self.core.stats.lan_bytes_in += input.len() as u64;
        let core = &mut self.core;
        self.chunking
            .push(input, |chunk, sent| core.encode_chunk(chunk, sent, out));
        // A pending span waits: a file read in 128 KiB pieces crosses as
        // one span per 256 chunks, not one per read. It costs no delay the
        // chunker's held-back chunk does not already cost.
        self.core.flush_run(out);
        self.core.view.emit_sent(out, &mut self.core.stats);
        self.core.stats.wan_bytes_out += (out.len() - before) as u64;
    }

    /// Change how the following literals are compressed (the node picks by
    /// the tunnel's rate). The peer decodes every codec whatever the choice.
    pub fn set_compression(&mut self, compression: Compression) {
        self.core.compressor.set_setting(compression);
    }

    /// The compression in use.
    pub fn compression(&self) -> Compression {
        self.core.compressor.setting()
    }

    /// Encode the pending bytes now (call when the LAN side goes idle, so
    /// interactive traffic is not held back; boundaries then depend on
    /// where the flush happened).
    pub fn flush(&mut self, out: &mut Vec<u8>) {
        let before = out.len();
        self.start(out);
        let core = &mut self.core;
        self.chunking
            .flush(|chunk, sent| core.encode_chunk(chunk, sent, out));
        self.core.flush_pending(out);
        self.core.view.emit_sent(out, &mut self.core.stats);
        self.core.stats.wan_bytes_out += (out.len() - before) as u64;
    }

    /// Bytes held back (the chunk being cut) that have not gone out as
    /// [`Encoder::send_held`] pieces.
    pub fn held_len(&self) -> usize {
        self.chunking.unsent_len()
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
        if self.chunking.held().len() <= self.chunking.pieces_sent() {
            let before = out.len();
            self.core.flush_pending(out);
            self.core.view.emit_sent(out, &mut self.core.stats);
            self.core.stats.wan_bytes_out += (out.len() - before) as u64;
            return;
        }
        if self.chunking.pieces_sent() == 0
            && self
                .core
                .view
                .peer_holds(&Fingerprint::of(self.chunking.held()))
        {
            self.flush(out);
            return;
        }
        let before = out.len();
        self.start(out);
        // Whatever was decided before the held bytes goes first.
        self.core.flush_pending(out);
        self.core.view.emit_sent(out, &mut self.core.stats);
        self.core.piece(0, self.chunking.unsent(), out);
        self.chunking.mark_sent();
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
        self.core.compressor.end_stream();
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
                self.start(out);
                self.core.repair_chunk(fingerprint, out)?;
                self.core.stats.wan_bytes_out += (out.len() - before) as u64;
            }
            ControlRepr::Ack { low_water, entries } => {
                self.core.view.handle_ack(*low_water, entries);
            }
            // The decoder turns these into `Ack`s (it knows the chunks they
            // name); one that reaches us unresolved names nothing.
            ControlRepr::Sent { .. } => {}
            ControlRepr::Done => self.peer_done = true,
            ControlRepr::NeedSpan { check } => {
                let before = out.len();
                self.start(out);
                self.core.repair_span(check, out)?;
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
        self.core.compressor.stream_bytes()
    }

    /// Frees the flow's stream compressor, for a flow that went idle:
    /// the next literals start a new stream (they no longer match against
    /// what the flow sent before, which the byte cache still covers).
    /// Literals held for a run not yet sent go into the new stream. When
    /// runs of the stream were sent, a `StreamEnd` frame (4 bytes) is
    /// written to `out` so that the peer's decoder frees its context too.
    pub fn release_compressor(&mut self, out: &mut Vec<u8>) {
        let Some(stream) = self.core.compressor.end_stream() else {
            return;
        };
        if !stream.is_fresh() {
            let before = out.len();
            DataRepr::StreamEnd.emit(out);
            self.core.stats.wan_bytes_out += (out.len() - before) as u64;
        }
    }
}
