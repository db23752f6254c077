//! Literals: alone, gathered into runs (`run.rs`), continuing the flow's
//! stream, or as pieces of a chunk not yet cut.

use crate::compress::Codec;
use crate::fingerprint::Fingerprint;
use crate::frame::{run_lengths, split_run, DataRepr, Run};

use super::state::Core;

/// Pieces shorter than this (a request line, a keystroke) failing to
/// compress do not start the compression backoff.
const SHORT_PIECE: usize = 1024;

impl Core {
    /// Send `chunk` in full: added to the run being gathered while zstd or
    /// LZMA2 is on and paying, else at once as a `Literal` (zstd or LZMA2:
    /// slow links, where each byte counts) or a `Named` literal (LZ4 or
    /// none: fast links, where the peer's time to hash it would count more
    /// than its 16 bytes).
    pub(super) fn literal(&mut self, fingerprint: Fingerprint, chunk: &[u8], out: &mut Vec<u8>) {
        let slow_link = self.compressor.gathers();
        let gather = self.run.is_enabled() && slow_link && !self.compressor.is_backing_off();
        self.flush_span(out);
        if !gather {
            self.flush_run(out);
            self.single_literal((!slow_link).then_some(fingerprint), chunk, out);
            return;
        }
        self.gather(fingerprint, chunk, out);
    }

    /// Adds a literal to the run, sending the run when it is long enough.
    pub(super) fn gather(&mut self, fingerprint: Fingerprint, chunk: &[u8], out: &mut Vec<u8>) {
        if self.run.would_overflow(chunk.len()) {
            self.flush_run(out);
        }
        self.run.push(fingerprint, chunk);
        if self.run.is_full() {
            self.flush_run(out);
        }
    }

    /// A `Piece`: `bytes` (compressed when that pays) and the `cut`.
    pub(super) fn piece(&mut self, cut: u32, bytes: &[u8], out: &mut Vec<u8>) {
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
                self.compressor.compress_aside(bytes)
            } else {
                self.compressor.compress(bytes)
            };
            Some(self.compressor.payload(codec, bytes))
        };
        DataRepr::Piece { cut, payload }.emit(out);
    }

    fn single_literal(&mut self, name: Option<Fingerprint>, chunk: &[u8], out: &mut Vec<u8>) {
        let codec = self.compressor.compress(chunk);
        let payload = self.compressor.payload(codec, chunk);
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

    /// Send the gathered literals: one `Run` (or `StreamRun`) frame when
    /// they compress, one raw `Literal` each when they do not (then
    /// compression backs off). Called before any frame that must follow
    /// them and at the end of every push.
    pub(super) fn flush_run(&mut self, out: &mut Vec<u8>) {
        let count = self.run.count();
        if count == 0 {
            return;
        }
        if let Some(cut) = self.run.take_rest() {
            // Whatever frame the run becomes, its first chunk comes first.
            DataRepr::PieceRest { cut }.emit(out);
        }
        let (run, lengths) = self.run.take();
        let streamed = self.compressor.streams_runs();
        if count == 1 && !streamed {
            self.single_literal(None, &run, out);
        } else {
            let sent = match streamed {
                true => {
                    let fingerprints = self.run.fingerprints();
                    match self.compressor.stream_run(&run, &lengths, fingerprints) {
                        Some(frame) => {
                            frame.emit(out);
                            true
                        }
                        None => false,
                    }
                }
                _ => match self.compressor.compress_now(&run) {
                    Codec::Raw => false,
                    codec => {
                        DataRepr::Run(Run {
                            codec,
                            lengths: &lengths,
                            bytes: self.compressor.compressed(),
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
                    DataRepr::Literal(self.compressor.payload(Codec::Raw, chunk)).emit(out);
                }
                self.stats.literals_raw += count as u64;
            }
        }
        // Keep the buffers' capacity for the next run.
        self.run.restore(run, lengths);
    }

    /// Whether the next literal goes into a stream run.
    pub(super) fn streams_next_literal(&self) -> bool {
        self.compressor.streams_runs() && self.run.is_enabled() && !self.compressor.is_backing_off()
    }

    /// Compressed over raw bytes of the last run of the stream the next
    /// literal goes into, if it goes into one that has sent a run.
    pub(super) fn stream_ratio(&self) -> Option<f64> {
        self.compressor
            .stream()
            .filter(|_| self.streams_next_literal())
            .and_then(|stream| stream.ratio())
    }

    /// Whether the next literal goes into a stream run whose compressor
    /// still has `base` in its window, or in the run itself.
    pub(super) fn stream_holds(&self, base: &Fingerprint) -> bool {
        self.streams_next_literal()
            && (self.run.holds(base)
                || self
                    .compressor
                    .stream()
                    .is_some_and(|stream| stream.holds(base)))
    }
}
