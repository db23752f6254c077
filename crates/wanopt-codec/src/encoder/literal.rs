//! Literals: alone, gathered into runs, continuing the flow's stream, or
//! as pieces of a chunk not yet cut; and the `Sent` note of what was
//! stored.

use crate::compress::Codec;
use crate::control::{sent_entries, ControlRepr};
use crate::fingerprint::Fingerprint;
use crate::frame::{run_lengths, split_run, DataRepr, Payload, Run, MAX_RUN_CHUNKS, MAX_RUN_LEN};

use super::state::Core;
use super::stream::LiteralStream;

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
    pub(super) fn gather(&mut self, fingerprint: Fingerprint, chunk: &[u8], out: &mut Vec<u8>) {
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

    pub(super) fn single_literal(
        &mut self,
        name: Option<Fingerprint>,
        chunk: &[u8],
        out: &mut Vec<u8>,
    ) {
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
    pub(super) fn flush_run(&mut self, out: &mut Vec<u8>) {
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
    pub(super) fn stream_run(&mut self, run: &[u8], lengths: &[u8], out: &mut Vec<u8>) -> bool {
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
    pub(super) fn streams_next_literal(&self) -> bool {
        self.config.compression.gathers()
            && self.config.stream_runs
            && self.config.run_len > 0
            && self.skip_compression == 0
    }

    /// The flow's stream the next literal goes into, if it goes into one
    /// (a stream of another setting is replaced by the next run).
    pub(super) fn next_stream(&self) -> Option<&LiteralStream> {
        self.stream.as_ref().filter(|stream| {
            self.streams_next_literal() && stream.compression == self.config.compression
        })
    }

    /// Compressed over raw bytes of the last run of the stream the next
    /// literal goes into, if it goes into one that has sent a run.
    pub(super) fn stream_ratio(&self) -> Option<f64> {
        self.next_stream().and_then(|stream| stream.ratio)
    }

    /// Whether the next literal goes into a stream run whose compressor
    /// still has `base` in its window, or in the run itself.
    pub(super) fn stream_holds(&self, base: &Fingerprint) -> bool {
        self.streams_next_literal()
            && (self.run_fingerprints.contains(base)
                || self.next_stream().is_some_and(|stream| stream.holds(base)))
    }

    /// Write the literals stored since the last call to the store's file
    /// (one write) and tell the peer which we hold (one `Sent`: the peer
    /// has just decoded them, a fingerprint prefix names each).
    pub(super) fn emit_stored(&mut self, out: &mut Vec<u8>) {
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

    pub(super) fn payload<'a>(&'a self, codec: Codec, chunk: &'a [u8]) -> Payload<'a> {
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
