//! Encode and decode throughput (MB/s per core) on fresh compressible data,
//! fresh incompressible data and fully redundant data (second pass). Fresh
//! encodes start from an empty store each iteration, so keeping the sent
//! literals (`store_sent`) is measured; `_zstd` cases use zstd level 3.
//!
//! `cargo bench -p wanopt-codec --bench codec -- --warm-up-time 1 --measurement-time 3`

// criterion_group! generates an undocumented public function.
#![allow(missing_docs)]

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use wanopt_codec::{
    CacheConfig, CacheId, ChunkerConfig, Compression, Decoder, DecoderConfig, Encoder,
    EncoderConfig, PeerCache, StoreConfig,
};

const LEN: usize = 8 << 20;
const READ: usize = 128 << 10;

#[path = "../tests/common/data.rs"]
mod data;

use data::{random, text};

fn config() -> CacheConfig {
    CacheConfig {
        store: StoreConfig {
            capacity: 1 << 30,
            segment_size: 64 << 20,
        },
        max_peer_entries: 1 << 20,
    }
}

struct Pair {
    _dirs: (tempfile::TempDir, tempfile::TempDir),
    edge: PeerCache,
    core: PeerCache,
}

fn pair() -> Pair {
    let a = tempfile::tempdir().unwrap();
    let b = tempfile::tempdir().unwrap();
    let edge = PeerCache::open(a.path(), config(), CacheId([1; 16])).unwrap();
    let core = PeerCache::open(b.path(), config(), CacheId([2; 16])).unwrap();
    core.handle_hello(&edge.hello());
    edge.handle_hello(&core.hello());
    Pair {
        _dirs: (a, b),
        edge,
        core,
    }
}

fn encode(cache: &PeerCache, data: &[u8]) -> Vec<u8> {
    encode_with(cache, data, EncoderConfig::default())
}

/// Chunk sizes 4 / 16 / 128 KiB, for the size trade-off.
fn large_chunks() -> EncoderConfig {
    EncoderConfig {
        chunker: ChunkerConfig {
            min: 4 << 10,
            avg: 16 << 10,
            max: 128 << 10,
        },
        ..EncoderConfig::default()
    }
}

fn encode_with(cache: &PeerCache, data: &[u8], config: EncoderConfig) -> Vec<u8> {
    let mut enc = Encoder::new(cache.clone(), config).unwrap();
    let mut out = Vec::with_capacity(data.len() + data.len() / 8);
    for piece in data.chunks(READ) {
        enc.push(piece, &mut out);
    }
    enc.finish(&mut out);
    out
}

fn decode(cache: &PeerCache, wire: &[u8]) -> (Vec<u8>, Vec<u8>) {
    let mut dec = Decoder::new(cache.clone(), DecoderConfig::default());
    let mut out = Vec::with_capacity(LEN);
    let mut control = Vec::new();
    for piece in wire.chunks(READ) {
        dec.push(piece, &mut out).unwrap();
        dec.emit_control(&mut control);
    }
    (out, control)
}

/// Send `data` once edge -> core and deliver the acks back to the edge.
fn warm(p: &Pair, data: &[u8], config: EncoderConfig) -> Vec<u8> {
    let wire = encode_with(&p.edge, data, config);
    let (out, control) = decode(&p.core, &wire);
    assert_eq!(out, data);
    let mut back = Vec::new();
    Encoder::new(p.core.clone(), EncoderConfig::default())
        .unwrap()
        .start(&mut back);
    back.extend_from_slice(&control);
    let mut edge_dec = Decoder::new(p.edge.clone(), DecoderConfig::default());
    let mut enc = Encoder::new(p.edge.clone(), EncoderConfig::default()).unwrap();
    let mut sink = Vec::new();
    edge_dec.push(&back, &mut sink).unwrap();
    while let Some(m) = edge_dec.poll_peer_control() {
        enc.handle_peer(&m, &mut sink).unwrap();
    }
    wire
}

fn bench(c: &mut Criterion) {
    let inputs = [("text", text(LEN, 1)), ("random", random(LEN, 2))];
    let mut g = c.benchmark_group("encode");
    g.throughput(Throughput::Bytes(LEN as u64));
    g.sample_size(10);
    let zstd = EncoderConfig {
        compression: Compression::ZSTD,
        ..EncoderConfig::default()
    };
    // The levels `--compression auto` uses on slower links (the node's
    // `reduce::ZSTD_LEVELS`).
    let zstd_at = |level| EncoderConfig {
        compression: Compression::Zstd { level },
        ..EncoderConfig::default()
    };
    let cases = [
        ("fresh_text", &inputs[0].1, EncoderConfig::default()),
        ("fresh_random", &inputs[1].1, EncoderConfig::default()),
        ("fresh_text_zstd", &inputs[0].1, zstd),
        ("fresh_text_zstd9", &inputs[0].1, zstd_at(9)),
        ("fresh_text_zstd14", &inputs[0].1, zstd_at(14)),
    ];
    for (name, data, config) in cases {
        g.bench_function(name, |b| {
            b.iter_batched(
                pair,
                |p| {
                    let wire = encode_with(&p.edge, data, config);
                    (p, black_box(wire))
                },
                BatchSize::PerIteration,
            )
        });
    }
    {
        let (_, data) = &inputs[0];
        let p = pair();
        warm(&p, data, EncoderConfig::default());
        g.bench_function("redundant", |b| b.iter(|| black_box(encode(&p.edge, data))));
        let p = pair();
        warm(&p, data, large_chunks());
        g.bench_function("redundant_16k", |b| {
            b.iter(|| black_box(encode_with(&p.edge, data, large_chunks())))
        });
    }
    g.finish();
    // The chunker alone, fed in reads of different sizes: a trickling
    // source's 200-byte reads must not cost more per byte than a bulk
    // transfer's 128 KiB ones (each byte scanned once).
    let mut g = c.benchmark_group("chunk");
    g.throughput(Throughput::Bytes(LEN as u64));
    g.sample_size(10);
    for (name, read) in [("reads_200", 200), ("reads_4k", 4096), ("reads_128k", READ)] {
        let data = &inputs[1].1;
        g.bench_function(name, |b| {
            b.iter(|| {
                let chunker = wanopt_codec::Chunker::new(ChunkerConfig::default()).unwrap();
                let mut stream = wanopt_codec::StreamChunker::new(chunker);
                let mut chunks = 0usize;
                for piece in data.chunks(read) {
                    stream.push(piece, |_| chunks += 1);
                }
                stream.flush(|_| chunks += 1);
                black_box(chunks)
            })
        });
    }
    g.finish();

    let mut g = c.benchmark_group("decode");
    g.throughput(Throughput::Bytes(LEN as u64));
    g.sample_size(10);
    for (name, data, config) in cases {
        g.bench_function(name, |b| {
            // Encoded here, not before: criterion calls this only for a
            // bench its filter selects, so a filtered run (or a profile of
            // one bench) does not pay for every case's encoding (zstd 14
            // takes seconds).
            let wire = encode_with(&pair().edge, data, config);
            b.iter_batched(
                pair,
                // Return the pair: criterion drops outputs after timing, so
                // deleting the temporary store is not measured as decoding.
                |p| {
                    let decoded = decode(&p.core, &wire);
                    (p, black_box(decoded))
                },
                BatchSize::PerIteration,
            )
        });
    }
    {
        let (_, data) = &inputs[0];
        let p = pair();
        warm(&p, data, EncoderConfig::default());
        let wire = encode(&p.edge, data);
        assert!(wire.len() < LEN / 50);
        g.bench_function("redundant", |b| {
            b.iter(|| black_box(decode(&p.core, &wire)))
        });
        let p = pair();
        warm(&p, data, large_chunks());
        let wire = encode_with(&p.edge, data, large_chunks());
        assert!(wire.len() < LEN / 50);
        g.bench_function("redundant_16k", |b| {
            b.iter(|| black_box(decode(&p.core, &wire)))
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
