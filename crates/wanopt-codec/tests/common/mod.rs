//! Test harness: an edge and a core cache, and a lossless in-memory "stream"
//! between an encoder and a decoder, pumped deterministically.

#![allow(dead_code)]

mod data;

#[allow(unused_imports)] // Not every test file uses every generator.
pub use data::{random, rng, text};
use rand::Rng;
use tempfile::TempDir;
use wanopt_codec::{
    CacheConfig, CacheId, Compression, Decoder, DecoderConfig, Encoder, EncoderConfig, PeerCache,
    PeerControlError, StoreConfig,
};

pub struct Pair {
    pub edge_dir: TempDir,
    pub core_dir: TempDir,
    pub edge: PeerCache,
    pub core: PeerCache,
    pub config: CacheConfig,
    /// Encoder settings of every flow (both ends).
    pub encoder: EncoderConfig,
}

pub fn small_config() -> CacheConfig {
    CacheConfig {
        store: StoreConfig {
            capacity: 64 << 20,
            segment_size: 4 << 20,
        },
        max_peer_entries: 1 << 20,
    }
}

impl Pair {
    pub fn new(config: CacheConfig) -> Pair {
        let edge_dir = tempfile::tempdir().unwrap();
        let core_dir = tempfile::tempdir().unwrap();
        let edge = PeerCache::open(edge_dir.path(), config, CacheId([1; 16])).unwrap();
        let core = PeerCache::open(core_dir.path(), config, CacheId([2; 16])).unwrap();
        let pair = Pair {
            edge_dir,
            core_dir,
            edge,
            core,
            config,
            encoder: EncoderConfig::default(),
        };
        pair.handshake();
        pair
    }

    pub fn handshake(&self) {
        self.core.handle_hello(&self.edge.hello());
        self.edge.handle_hello(&self.core.hello());
    }

    /// Restart the core node: checkpoint, drop, reopen from disk.
    pub fn restart_core(&mut self, new_id: CacheId) {
        self.core.checkpoint().unwrap();
        self.core = PeerCache::open(self.core_dir.path(), self.config, new_id).unwrap();
        self.edge.handle_tunnel_down();
        self.handshake();
    }

    /// Restart the edge node.
    pub fn restart_edge(&mut self, new_id: CacheId) {
        self.edge.checkpoint().unwrap();
        self.edge = PeerCache::open(self.edge_dir.path(), self.config, new_id).unwrap();
        self.core.handle_tunnel_down();
        self.handshake();
    }

    /// Send `data` from edge to core on a new flow, in pieces of the given
    /// sizes (cycled). Returns (bytes delivered at the core, WAN bytes).
    pub fn transfer(&self, data: &[u8], pieces: &[usize]) -> (Vec<u8>, u64) {
        self.transfer_between(&self.edge, &self.core, data, pieces)
    }

    /// Send `data` from core to edge (the other direction).
    pub fn transfer_back(&self, data: &[u8], pieces: &[usize]) -> (Vec<u8>, u64) {
        self.transfer_between(&self.core, &self.edge, data, pieces)
    }

    fn transfer_between(
        &self,
        from: &PeerCache,
        to: &PeerCache,
        data: &[u8],
        pieces: &[usize],
    ) -> (Vec<u8>, u64) {
        let mut flow = Flow::with_config(from, to, self.encoder);
        let mut offset = 0;
        let mut i = 0;
        while offset < data.len() {
            let n = pieces
                .get(i % pieces.len().max(1))
                .copied()
                .unwrap_or(128 << 10)
                .clamp(1, data.len() - offset);
            flow.send(&data[offset..offset + n]);
            offset += n;
            i += 1;
            flow.pump();
        }
        flow.finish();
        (flow.delivered, flow.enc.stats().wan_bytes_out)
    }
}

/// One flow, edge -> core, with the reverse direction carrying the core's
/// control frames (behind the core encoder's preamble).
pub struct Flow {
    pub enc: Encoder,
    pub edge_dec: Decoder,
    pub dec: Decoder,
    pub core_enc: Encoder,
    pub wire: Vec<u8>,
    pub back: Vec<u8>,
    pub delivered: Vec<u8>,
    pub need_chunks: u64,
}

impl Flow {
    pub fn new(edge: &PeerCache, core: &PeerCache) -> Flow {
        Flow::with_config(edge, core, EncoderConfig::default())
    }

    pub fn with_config(edge: &PeerCache, core: &PeerCache, config: EncoderConfig) -> Flow {
        let mut flow = Flow {
            enc: Encoder::new(edge.clone(), config).unwrap(),
            edge_dec: Decoder::new(edge.clone(), DecoderConfig::default()),
            dec: Decoder::new(core.clone(), DecoderConfig::default()),
            core_enc: Encoder::new(core.clone(), config).unwrap(),
            wire: Vec::new(),
            back: Vec::new(),
            delivered: Vec::new(),
            need_chunks: 0,
        };
        flow.enc.start(&mut flow.wire);
        flow.core_enc.start(&mut flow.back);
        flow
    }

    pub fn send(&mut self, data: &[u8]) {
        self.enc.push(data, &mut self.wire);
    }

    /// Forward direction only: deliver what the edge wrote to the core.
    pub fn deliver_forward(&mut self) {
        let wire = std::mem::take(&mut self.wire);
        self.dec.push(&wire, &mut self.delivered).unwrap();
        while let Some(m) = self.dec.poll_peer_control() {
            self.core_enc.handle_peer(&m, &mut self.back).unwrap();
        }
        while let Some(m) = self.dec.poll_control() {
            if matches!(m, wanopt_codec::ControlRepr::NeedChunk { .. }) {
                self.need_chunks += 1;
            }
            m.emit(&mut self.back);
        }
    }

    /// Reverse direction: deliver the core's control frames to the edge.
    pub fn deliver_back(&mut self) {
        let back = std::mem::take(&mut self.back);
        let mut sink = Vec::new();
        self.edge_dec.push(&back, &mut sink).unwrap();
        assert!(sink.is_empty());
        while let Some(m) = self.edge_dec.poll_peer_control() {
            self.enc.handle_peer(&m, &mut self.wire).unwrap();
        }
    }

    /// [`Flow::deliver_back`] for a flow that may fail: the errors of the
    /// edge encoder's answers (every message is still handled, as a node
    /// does before it resets the flow).
    pub fn deliver_back_errors(&mut self) -> Vec<PeerControlError> {
        let back = std::mem::take(&mut self.back);
        let mut sink = Vec::new();
        self.edge_dec.push(&back, &mut sink).unwrap();
        let mut errors = Vec::new();
        while let Some(m) = self.edge_dec.poll_peer_control() {
            if let Err(e) = self.enc.handle_peer(&m, &mut self.wire) {
                errors.push(e);
            }
        }
        errors
    }

    /// Deliver everything in flight both ways until quiet.
    pub fn pump(&mut self) {
        while !self.wire.is_empty() || !self.back.is_empty() {
            self.deliver_forward();
            self.deliver_back();
        }
    }

    pub fn finish(&mut self) {
        self.enc.finish(&mut self.wire);
        self.pump();
        assert!(self.dec.is_finished(), "decoder did not finish");
        assert!(self.enc.is_done(), "encoder not told done");
    }
}

/// An encoder on `pair`'s edge cache at `compression`.
pub fn encoder_at(pair: &Pair, compression: Compression) -> Encoder {
    let config = EncoderConfig {
        compression,
        ..EncoderConfig::default()
    };
    Encoder::new(pair.edge.clone(), config).unwrap()
}

/// 1 MiB of `len`-byte records of random letters drawn from a pool of
/// `pool` of them.
pub fn pooled_records(seed: u64, pool: usize, len: usize) -> Vec<u8> {
    let mut r = rng(seed);
    let pool: Vec<Vec<u8>> = (0..pool)
        .map(|_| (0..len).map(|_| b'a' + r.random_range(0..26u8)).collect())
        .collect();
    let mut file = Vec::new();
    while file.len() < 1 << 20 {
        file.extend_from_slice(&pool[r.random_range(0..pool.len())]);
    }
    file
}

/// 1 MiB of 32-byte binary records, as a spreadsheet's cells: a row
/// number, a column, a type, a value from a small pool and a computed
/// IEEE-754 amount.
pub fn binary_records(seed: u64) -> Vec<u8> {
    let mut r = rng(seed);
    let prices: Vec<f64> = (0..50)
        .map(|_| f64::from(r.random_range(100..100_000u32)) / 100.0)
        .collect();
    let mut file = Vec::new();
    let mut row = 0u32;
    while file.len() < 1 << 20 {
        row += 1;
        let price = prices[r.random_range(0..prices.len())];
        let quantity = f64::from(r.random_range(1..500u32));
        file.extend_from_slice(&row.to_le_bytes());
        file.extend_from_slice(&(r.random_range(0..12u16)).to_le_bytes());
        file.extend_from_slice(&[0x03, 0x02]);
        file.extend_from_slice(&price.to_le_bytes());
        file.extend_from_slice(&(price * quantity * 1.19).to_le_bytes());
        file.extend_from_slice(&(r.random::<u32>() & 0x00ff_00ff).to_le_bytes());
        file.extend_from_slice(&[0u8; 4]);
    }
    file
}

/// Flip a byte every 20 KB in `cache`'s segment files.
pub fn damage(cache: &PeerCache) {
    for path in cache.segment_paths() {
        let mut bytes = std::fs::read(&path).unwrap();
        for b in bytes.iter_mut().skip(100).step_by(20_011) {
            *b ^= 0x5a;
        }
        std::fs::write(&path, bytes).unwrap();
    }
}
