//! The flow's compressors, and the choice per literal: the block engine
//! of literals compressed alone, the compression stream that runs
//! continue (`stream.rs`), the buffer they compress into, and a backoff
//! over incompressible data. A literal goes compressed only when that
//! saves enough.

use crate::compress::{self, Codec, Engine, Framing, Role};
use crate::fingerprint::Fingerprint;
use crate::frame::{run_lengths, DataRepr, Payload, Run};

use super::compression::Compression;
use super::config::EncoderConfig;
use super::stream::LiteralStream;

/// What compresses the flow's literals, and how.
#[derive(Debug)]
pub(super) struct Compressor {
    /// The setting in use (the node may change it during the flow).
    setting: Compression,
    /// Send compressed only if that saves at least this many percent.
    min_saving_percent: u8,
    /// Runs continue one compression stream per flow (with zstd or LZMA2).
    stream_runs: bool,
    /// The block engine of the last literal compressed alone, its codec
    /// and level.
    block: Option<(Codec, i32, Box<dyn Engine>)>,
    /// The flow's stream, once a run went into it.
    stream: Option<LiteralStream>,
    /// What the engines compress into: the last literal compressed alone
    /// is its first `compressed_len` bytes.
    scratch: Vec<u8>,
    compressed_len: usize,
    /// Literals still to send raw without trying.
    skip: u32,
    /// How many the next literal that does not compress skips (doubled
    /// each time, up to 16).
    backoff: u32,
}

impl Compressor {
    /// The compressors of a new flow (none made yet).
    pub(super) fn new(config: &EncoderConfig) -> Self {
        Compressor {
            setting: config.compression,
            min_saving_percent: config.min_saving_percent,
            stream_runs: config.stream_runs,
            block: None,
            stream: None,
            scratch: Vec::new(),
            compressed_len: 0,
            skip: 0,
            backoff: 0,
        }
    }

    /// The setting in use.
    pub(super) fn setting(&self) -> Compression {
        self.setting
    }

    /// Use `setting` for the following literals; a change starts the
    /// backoff over.
    pub(super) fn set_setting(&mut self, setting: Compression) {
        if self.setting != setting {
            self.setting = setting;
            self.skip = 0;
            self.backoff = 0;
        }
    }

    /// Whether literals are gathered into runs (zstd or LZMA2: slow links,
    /// where each byte counts).
    pub(super) fn gathers(&self) -> bool {
        self.setting.gathers()
    }

    /// Whether runs continue the flow's stream.
    pub(super) fn streams_runs(&self) -> bool {
        self.stream_runs && self.setting.gathers()
    }

    /// Whether the backoff sends the next literal raw without trying.
    pub(super) fn is_backing_off(&self) -> bool {
        self.skip > 0
    }

    /// Compress `chunk` into `scratch` when that pays; returns the codec.
    /// After a chunk that did not compress, the next 1, 2, 4 .. 16 chunks
    /// are sent raw without trying (incompressible streams stay fast).
    pub(super) fn compress(&mut self, chunk: &[u8]) -> Codec {
        if self.setting == Compression::Off {
            return Codec::Raw;
        }
        if self.skip > 0 {
            self.skip -= 1;
            return Codec::Raw;
        }
        self.compress_now(chunk)
    }

    /// Compress `data` into `scratch` if that pays (whatever the backoff);
    /// a failure starts or doubles the backoff.
    pub(super) fn compress_now(&mut self, chunk: &[u8]) -> Codec {
        let limit = chunk.len() - chunk.len() * usize::from(self.min_saving_percent) / 100;
        let packed = match self.setting {
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
                self.backoff = 0;
                codec
            }
            _ => {
                self.back_off();
                Codec::Raw
            }
        }
    }

    /// [`Compressor::compress_now`], the backoff left as it was: a short
    /// piece (a request line) that does not compress says nothing of the
    /// data behind it.
    pub(super) fn compress_aside(&mut self, chunk: &[u8]) -> Codec {
        let backoff = (self.skip, self.backoff);
        let codec = self.compress_now(chunk);
        (self.skip, self.backoff) = backoff;
        codec
    }

    fn back_off(&mut self) {
        self.backoff = (self.backoff * 2).clamp(1, 16);
        self.skip = self.backoff;
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

    /// The bytes of the last literal compressed alone.
    pub(super) fn compressed(&self) -> &[u8] {
        &self.scratch[..self.compressed_len]
    }

    /// The payload of `chunk` as [`Compressor::compress`] (or
    /// [`Compressor::compress_now`]) just left it, in `codec`.
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
                bytes: self.compressed(),
            },
        }
    }

    /// `run` (its chunks' lengths `lengths`, their fingerprints
    /// `fingerprints`) as a `StreamRun` continuing the flow's stream
    /// (zstd or LZMA2, as set) if that pays; `None` (and compression backs
    /// off) when it does not. A run that does not pay has still gone
    /// through the compressor, so the stream starts anew after it.
    pub(super) fn stream_run<'a>(
        &'a mut self,
        run: &[u8],
        lengths: &'a [u8],
        fingerprints: &[Fingerprint],
    ) -> Option<DataRepr<'a>> {
        let limit = run.len() - run.len() * usize::from(self.min_saving_percent) / 100;
        let setting = self.setting;
        let stream = match &mut self.stream {
            Some(stream) if stream.compression() == setting => stream,
            slot => match LiteralStream::new(setting, run) {
                Some(stream) => slot.insert(stream),
                None => return None,
            },
        };
        match stream.compress(run, &mut self.scratch) {
            Some(n) if n > 0 && n <= limit => {
                let fresh = stream.is_fresh();
                let codec = stream.codec();
                stream.sent(
                    n,
                    run.len(),
                    fingerprints.iter().copied().zip(run_lengths(lengths)),
                );
                self.backoff = 0;
                Some(DataRepr::StreamRun {
                    fresh,
                    run: Run {
                        codec,
                        lengths,
                        bytes: &self.scratch[..n],
                    },
                })
            }
            _ => {
                // A failed run may have left the compressor mid-stream;
                // one that did not pay went through it: start anew.
                if !stream.restart() {
                    self.stream = None;
                }
                self.back_off();
                None
            }
        }
    }

    /// The flow's stream if it is of the setting in use (a stream of
    /// another setting is replaced by the next run).
    pub(super) fn stream(&self) -> Option<&LiteralStream> {
        self.stream
            .as_ref()
            .filter(|stream| stream.compression() == self.setting)
    }

    /// Bytes held by the flow's stream compressor (0 when it has none).
    pub(super) fn stream_bytes(&self) -> usize {
        self.stream.as_ref().map_or(0, LiteralStream::context_bytes)
    }

    /// Free the flow's stream compressor: the next run starts a new
    /// stream. Returns it, if there was one.
    pub(super) fn end_stream(&mut self) -> Option<LiteralStream> {
        self.stream.take()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::encoder::tests::{frames, literals, noise, peers, text};
    use crate::Encoder;

    fn compressor(compression: Compression) -> Compressor {
        Compressor::new(&EncoderConfig {
            compression,
            ..EncoderConfig::default()
        })
    }

    #[test]
    fn a_literal_that_does_not_compress_is_sent_raw() {
        for compression in [Compression::Lz4, Compression::ZSTD] {
            let mut compressor = compressor(compression);
            assert_eq!(compressor.compress(&noise(16 << 10, 3)), Codec::Raw);
        }
        let mut compressor = compressor(Compression::Off);
        assert_eq!(compressor.compress(&text(16 << 10, 3)), Codec::Raw);

        // On the wire: raw literals.
        let peers = peers();
        let mut encoder = Encoder::new(peers.local.clone(), EncoderConfig::default()).unwrap();
        let mut wire = Vec::new();
        encoder.push(&noise(256 << 10, 9), &mut wire);
        encoder.finish(&mut wire);
        let sent: Vec<_> = literals(&frames(&wire)).collect();
        assert!(sent.len() > 4);
        assert!(
            sent.iter().all(|&(codec, _)| codec == Codec::Raw),
            "{sent:?}"
        );
    }

    #[test]
    fn a_literal_that_compresses_is_sent_compressed_with_its_setting() {
        let chunk = text(16 << 10, 4);
        for (compression, codec) in [
            (Compression::Lz4, Codec::Lz4),
            (Compression::ZSTD, Codec::Zstd),
            (Compression::Lzma { preset: 6 }, Codec::Zstd),
        ] {
            let mut compressor = compressor(compression);
            assert_eq!(compressor.compress(&chunk), codec, "{compression:?}");
            let payload = compressor.payload(codec, &chunk);
            assert!(payload.bytes.len() < chunk.len() / 2);
            let mut decoded = Vec::new();
            payload.decode_into(&mut decoded).unwrap();
            assert_eq!(decoded, chunk);
        }
    }

    #[test]
    fn after_a_literal_that_does_not_compress_the_next_are_sent_raw_untried() {
        let mut compressor = compressor(Compression::Lz4);
        let chunk = text(16 << 10, 5);
        assert_eq!(compressor.compress(&noise(16 << 10, 5)), Codec::Raw);
        // Backoff 1: one chunk raw without trying, then tried again.
        assert_eq!(compressor.compress(&chunk), Codec::Raw);
        assert_eq!(compressor.compress(&chunk), Codec::Lz4);
        // Twice in a row doubles it (1, then 2).
        assert_eq!(compressor.compress(&noise(16 << 10, 6)), Codec::Raw);
        assert_eq!(compressor.compress(&chunk), Codec::Raw);
        assert_eq!(compressor.compress(&noise(16 << 10, 7)), Codec::Raw);
        assert_eq!(compressor.compress(&chunk), Codec::Raw);
        assert_eq!(compressor.compress(&chunk), Codec::Raw);
        assert_eq!(compressor.compress(&chunk), Codec::Lz4);
    }

    #[test]
    fn a_short_piece_tried_aside_leaves_the_backoff_and_a_new_setting_ends_it() {
        let mut compressor = compressor(Compression::Lz4);
        assert_eq!(compressor.compress(&noise(16 << 10, 8)), Codec::Raw);
        assert!(compressor.is_backing_off());
        // Tried whatever the backoff, which stays as it was.
        let line = text(200, 8);
        assert_eq!(compressor.compress_aside(&line), Codec::Lz4);
        assert_eq!(compressor.compress_aside(&noise(200, 8)), Codec::Raw);
        assert!(compressor.is_backing_off());
        // The same setting again changes nothing; another one starts over.
        compressor.set_setting(Compression::Lz4);
        assert!(compressor.is_backing_off());
        compressor.set_setting(Compression::ZSTD);
        assert!(!compressor.is_backing_off());
        assert_eq!(compressor.compress(&text(16 << 10, 9)), Codec::Zstd);
    }
}
