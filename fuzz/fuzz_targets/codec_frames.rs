//! Fuzz the codec's frame decoder: arbitrary bytes (after a valid preamble,
//! and without one) must give an error or plain bytes, never a panic or an
//! unbounded allocation, and a piece that completes no frame decodes
//! nothing; and any input split by the first byte round-trips
//! through encoder and decoder, with the stream compressor freed between
//! pieces or not, and held bytes sent early or not; and a body that
//! compresses, then the input as requests sent as pieces with the
//! compressor freed while their chunk is open (the PPMd decoder on its
//! own: `ppmd_run`).
//!
//! `scripts/fuzz codec_frames`, or `CFLAGS=-fno-sanitize-address-use-after-scope
//! cargo fuzz run codec_frames` (see the README's note on zstd's slowest
//! levels).

#![no_main]

use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use wanopt_codec::{
    CacheConfig, CacheId, Compression, Decoder, DecoderConfig, Encoder, EncoderConfig, PeerCache,
    StoreConfig,
};

// Large blocks are reused across inputs (fuzz/common/reuse.rs says why).
#[path = "../common/reuse.rs"]
mod reuse;

#[global_allocator]
static ALLOCATOR: reuse::Reuse = reuse::Reuse;

fn caches() -> &'static (PeerCache, PeerCache) {
    static CACHES: OnceLock<(PeerCache, PeerCache)> = OnceLock::new();
    CACHES.get_or_init(|| {
        let base = std::env::temp_dir().join(format!("wanopt-fuzz-{}", std::process::id()));
        let config = CacheConfig {
            store: StoreConfig {
                capacity: 64 << 20,
                segment_size: 8 << 20,
            },
            max_peer_entries: 1 << 16,
        };
        let edge = PeerCache::open(&base.join("edge"), config, CacheId([1; 16])).unwrap();
        let core = PeerCache::open(&base.join("core"), config, CacheId([2; 16])).unwrap();
        core.handle_hello(&edge.hello());
        edge.handle_hello(&core.hello());
        (edge, core)
    })
}

fuzz_target!(|data: &[u8]| {
    let (edge, core) = caches();

    // 1. Arbitrary bytes, with and without a preamble, split in two pieces.
    let split = data.first().map(|&b| usize::from(b)).unwrap_or(0);
    for prefix in [
        &b""[..],
        &[
            1,
            0,
            0,
            5,
            b'W',
            b'O',
            b'P',
            b'C',
            wanopt_codec::frame::VERSION,
        ][..],
    ] {
        let mut wire = prefix.to_vec();
        wire.extend_from_slice(data);
        let split = split.min(wire.len());
        let mut dec = Decoder::new(core.clone(), DecoderConfig::default());
        let mut out = Vec::new();
        // A piece that completes no frame decodes nothing (a node decodes
        // slow runs off its runtime only for pieces that do).
        let completes = dec.push_completes_frame(&wire[..split]);
        if dec.push(&wire[..split], &mut out).is_ok() {
            assert!(completes || out.is_empty());
            let before = out.len();
            let completes = dec.push_completes_frame(&wire[split..]);
            if dec.push(&wire[split..], &mut out).is_ok() {
                assert!(completes || out.len() == before);
            }
        }
        while dec.poll_control().is_some() {}
        while dec.poll_peer_control().is_some() {}
    }

    // 2. Round trip: encode `data` in pieces, decode, compare; with LZ4
    //    (the default), with zstd, with LZMA2 and with LZMA2 and PPMd
    //    (runs continuing one stream), the stream's compressor freed
    //    after every `release`-th piece (as a node does for a flow quiet
    //    for a second: a StreamEnd) when the second byte says so, after a
    //    flush when the fourth byte is odd and otherwise with the chunk
    //    left open (as pieces, when held bytes were sent), and the held
    //    bytes sent as pieces after every piece (a trickling source) when
    //    the third byte is odd.
    let release = data.get(1).map_or(0, |&b| usize::from(b % 4));
    let held = data.get(2).is_some_and(|&b| b % 2 == 1);
    let flush = data.get(3).is_some_and(|&b| b % 2 == 1);
    for compression in [
        Compression::Lz4,
        Compression::ZSTD,
        Compression::Lzma { preset: 5 },
        Compression::Max { preset: 5 },
    ] {
        let config = EncoderConfig {
            compression,
            ..EncoderConfig::default()
        };
        let mut enc = Encoder::new(edge.clone(), config).unwrap();
        let mut wire = Vec::new();
        for (i, piece) in data.chunks(split.max(1)).enumerate() {
            enc.push(piece, &mut wire);
            if held {
                enc.send_held(&mut wire);
            }
            if release > 0 && i % release == 0 {
                if flush {
                    enc.flush(&mut wire);
                }
                enc.release_compressor(&mut wire);
            }
        }
        enc.finish(&mut wire);
        let mut dec = Decoder::new(core.clone(), DecoderConfig::default());
        let mut out = Vec::new();
        dec.push(&wire, &mut out).expect("own frames decode");
        assert_eq!(out, data);
        assert!(dec.is_finished());
    }

    // 3. An interactive session on a slow link: a body that compresses
    //    (the input repeated) crosses in the flow's compression stream,
    //    then the input's bytes go as requests sent at once as pieces, and
    //    the compressor is freed after each while its chunk is open (a
    //    session quiet for a second between commands). The body is up to
    //    32 KiB in runs of 8 KiB: several runs, as 256 KiB make at the
    //    default 128 KiB, for an eighth of the time (PPMd and LZMA2 took
    //    most of an input's).
    if !data.is_empty() {
        let body: Vec<u8> = data
            .iter()
            .copied()
            .cycle()
            .take((data.len() * 64).min(32 << 10))
            .collect();
        for compression in [
            Compression::Zstd { level: 9 },
            Compression::Max { preset: 5 },
        ] {
            let config = EncoderConfig {
                compression,
                run_len: 8 << 10,
                ..EncoderConfig::default()
            };
            let mut enc = Encoder::new(edge.clone(), config).unwrap();
            let mut wire = Vec::new();
            enc.push(&body, &mut wire);
            enc.flush(&mut wire);
            for piece in data.chunks(split.max(1)) {
                enc.push(piece, &mut wire);
                enc.send_held(&mut wire);
                enc.release_compressor(&mut wire);
            }
            enc.finish(&mut wire);
            let mut dec = Decoder::new(core.clone(), DecoderConfig::default());
            let mut out = Vec::new();
            dec.push(&wire, &mut out).expect("own frames decode");
            assert_eq!(out.len(), body.len() + data.len());
            assert!(out[..body.len()] == body[..] && out[body.len()..] == *data);
            assert!(dec.is_finished());
        }
    }
});
