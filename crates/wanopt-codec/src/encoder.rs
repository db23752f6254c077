//! The encoder: plain bytes from the LAN -> frames for the WAN.

use std::collections::VecDeque;

use thiserror::Error;

use crate::cache::PeerCache;
use crate::chunker::{Chunker, ChunkerConfig, ChunkerConfigError, StreamChunker};
use crate::control::ControlRepr;
use crate::fingerprint::Fingerprint;
use crate::frame::{Codec, DataRepr, Payload, VERSION};
use crate::stats::EncoderStats;
use crate::store::index::FingerprintMap;

/// Encoder settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct EncoderConfig {
    /// Chunk sizes.
    pub chunker: ChunkerConfig,
    /// Try LZ4 on literals.
    pub compress: bool,
    /// Send a literal compressed only if that saves at least this many
    /// percent of its size.
    pub min_saving_percent: u8,
    /// Bytes of referenced chunks kept to answer `NeedChunk` (FIFO).
    pub retain_bytes: usize,
    /// Fingerprints of this flow's literals remembered for in-flow
    /// references.
    pub max_flow_chunks: usize,
}

impl Default for EncoderConfig {
    fn default() -> Self {
        EncoderConfig {
            chunker: ChunkerConfig::default(),
            compress: true,
            min_saving_percent: 3,
            retain_bytes: 32 << 20,
            max_flow_chunks: 1 << 16,
        }
    }
}

/// Error handling a control frame from the peer's decoder.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum PeerControlError {
    /// The peer asked for a chunk that is no longer retained. The flow
    /// cannot continue correctly: reset the stream.
    #[error("peer needs chunk {0:?} which is no longer retained; reset the flow")]
    ChunkUnavailable(Fingerprint),
}

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
    /// input, [`Encoder::flush`] or [`Encoder::finish`].
    pub fn push(&mut self, input: &[u8], out: &mut Vec<u8>) {
        debug_assert!(!self.finished, "push after finish");
        let before = out.len();
        self.core.start(out);
        self.core.stats.lan_bytes_in += input.len() as u64;
        let core = &mut self.core;
        self.chunker
            .push(input, |chunk| core.encode_chunk(chunk, out));
        self.core.stats.wan_bytes_out += (out.len() - before) as u64;
    }

    /// Encode the pending bytes now (call when the LAN side goes idle, so
    /// interactive traffic is not held back; boundaries then depend on
    /// where the flush happened).
    pub fn flush(&mut self, out: &mut Vec<u8>) {
        let before = out.len();
        self.core.start(out);
        let core = &mut self.core;
        self.chunker.flush(|chunk| core.encode_chunk(chunk, out));
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
                let Some(data) = self.core.retained.data.remove(fingerprint) else {
                    return Err(PeerControlError::ChunkUnavailable(*fingerprint));
                };
                let core = &mut self.core;
                let codec = core.compress(&data);
                let payload = core.payload(codec, &data);
                DataRepr::Repair {
                    fingerprint: *fingerprint,
                    payload,
                }
                .emit(out);
                core.stats.repairs_sent += 1;
                core.stats.wan_bytes_out += (out.len() - before) as u64;
                // Keep it: the peer may need it again on another miss.
                core.retained.data.insert(*fingerprint, data);
            }
            ControlRepr::Ack { low_water, entries } => {
                self.core.cache.lock().peer.handle_ack(*low_water, entries);
            }
            ControlRepr::Done => self.peer_done = true,
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

    fn encode_chunk(&mut self, chunk: &[u8], out: &mut Vec<u8>) {
        let fingerprint = Fingerprint::of(chunk);
        self.stats.chunks += 1;
        let referable =
            self.flow_sent.contains_key(&fingerprint) || self.cache.lock().peer.holds(&fingerprint);
        if referable {
            DataRepr::Reference {
                fingerprint,
                raw_len: chunk.len() as u32,
            }
            .emit(out);
            self.retained
                .insert(fingerprint, chunk, self.config.retain_bytes);
            self.stats.references += 1;
            self.stats.referenced_bytes += chunk.len() as u64;
            return;
        }
        let codec = self.compress(chunk);
        let payload = self.payload(codec, chunk);
        DataRepr::Literal(payload).emit(out);
        match codec {
            Codec::Raw => self.stats.literals_raw += 1,
            Codec::Lz4 => self.stats.literals_compressed += 1,
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

    /// Compress `chunk` into `scratch` when that pays; returns the codec.
    /// After a chunk that did not compress, the next 1, 2, 4 .. 16 chunks
    /// are sent raw without trying (incompressible streams stay fast).
    fn compress(&mut self, chunk: &[u8]) -> Codec {
        if !self.config.compress {
            return Codec::Raw;
        }
        if self.skip_compression > 0 {
            self.skip_compression -= 1;
            return Codec::Raw;
        }
        let max = lz4_flex::block::get_maximum_output_size(chunk.len());
        if self.scratch.len() < max {
            self.scratch.resize(max, 0);
        }
        let limit = chunk.len() - chunk.len() * usize::from(self.config.min_saving_percent) / 100;
        match lz4_flex::block::compress_into(chunk, &mut self.scratch) {
            Ok(n) if n > 0 && n <= limit => {
                self.compressed_len = n;
                self.compress_backoff = 0;
                Codec::Lz4
            }
            _ => {
                self.compress_backoff = (self.compress_backoff * 2).clamp(1, 16);
                self.skip_compression = self.compress_backoff;
                Codec::Raw
            }
        }
    }

    fn payload<'a>(&'a self, codec: Codec, chunk: &'a [u8]) -> Payload<'a> {
        match codec {
            Codec::Raw => Payload {
                codec,
                raw_len: chunk.len() as u32,
                bytes: chunk,
            },
            Codec::Lz4 => Payload {
                codec,
                raw_len: chunk.len() as u32,
                bytes: &self.scratch[..self.compressed_len],
            },
        }
    }
}
