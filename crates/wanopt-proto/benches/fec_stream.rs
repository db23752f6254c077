//! Continuous FEC's cost per datagram: the sender (wrap, keep, encode a
//! block's repairs) and the receiver (unwrap, keep, count; and rebuilding
//! a block's losses), for 1,400-byte datagrams in blocks of 128 with 8
//! repairs (6%, the code for about 3.5% loss). Throughput is datagram
//! bytes per second.

// criterion_group! generates an undocumented public function.
#![allow(missing_docs)]

use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use wanopt_proto::fec_stream::{Decoder, Encoder, Params};

const LEN: usize = 1400;
const BLOCK: usize = 128;

fn datagrams() -> Vec<Vec<u8>> {
    (0..BLOCK)
        .map(|i| (0..LEN).map(|j| (i * 31 + j * 7) as u8 | 0x40).collect())
        .collect()
}

/// One block through an encoder: the wrapped sources and the repairs.
fn one_block(sources: &[Vec<u8>]) -> (Vec<Vec<u8>>, Vec<Vec<u8>>) {
    let mut enc = Encoder::new();
    let mut repairs = Vec::new();
    enc.set_params(
        Some(Params::new(128, 8, 1).unwrap()),
        Duration::from_millis(20),
        &mut repairs,
    );
    let now = Instant::now();
    let mut wrapped = Vec::new();
    for s in sources {
        let mut w = Vec::with_capacity(LEN + 5);
        enc.wrap(0, s, &mut w);
        enc.on_sent(now, s, &mut repairs);
        wrapped.push(w);
    }
    (wrapped, repairs)
}

fn bench(c: &mut Criterion) {
    let sources = datagrams();
    let mut group = c.benchmark_group("fec_stream");
    group.throughput(Throughput::Bytes((BLOCK * LEN) as u64));
    group.bench_function("encode_block_128_8", |b| {
        b.iter(|| one_block(&sources));
    });
    let (wrapped, repairs) = one_block(&sources);
    group.bench_function("decode_block_nothing_lost", |b| {
        b.iter_batched(
            Decoder::new,
            |mut dec| {
                for w in &wrapped {
                    dec.on_source(w).unwrap();
                }
                dec
            },
            BatchSize::SmallInput,
        );
    });
    group.bench_function("decode_block_8_lost", |b| {
        b.iter_batched(
            Decoder::new,
            |mut dec| {
                let mut rebuilt = Vec::new();
                for (i, w) in wrapped.iter().enumerate() {
                    if i % 16 != 5 {
                        dec.on_source(w).unwrap();
                    }
                }
                for r in &repairs {
                    let _ = dec.on_repair(r, &mut rebuilt);
                }
                assert_eq!(rebuilt.len(), 8);
                dec
            },
            BatchSize::SmallInput,
        );
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
