//! Fuzz the codec's frame decoder on a peer's bytes alone: arbitrary bytes
//! (after a valid preamble, and without one) must give an error or plain
//! bytes, never a panic or an unbounded allocation, and a piece that
//! completes no frame decodes nothing. The first part of `codec_frames`
//! without its round trips, which take tens of milliseconds an input: here
//! the decoders (LZ4, zstd, LZMA2, PPMd, deltas, references) meet thousands
//! of hostile inputs a second.
//!
//! `scripts/fuzz codec_wire`

#![no_main]

use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use wanopt_codec::{CacheConfig, CacheId, Decoder, DecoderConfig, PeerCache, StoreConfig};

// Large blocks are reused across inputs (fuzz/common/reuse.rs says why).
#[path = "../common/reuse.rs"]
mod reuse;

#[global_allocator]
static ALLOCATOR: reuse::Reuse = reuse::Reuse;

/// The decoding side's cache, with the encoding side's hello.
fn cache() -> &'static PeerCache {
    static CACHE: OnceLock<PeerCache> = OnceLock::new();
    CACHE.get_or_init(|| {
        let base = std::env::temp_dir().join(format!("wanopt-fuzz-wire-{}", std::process::id()));
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
        core
    })
}

fuzz_target!(|data: &[u8]| {
    let core = cache();

    // Arbitrary bytes, with and without a preamble, split in two pieces.
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
});
