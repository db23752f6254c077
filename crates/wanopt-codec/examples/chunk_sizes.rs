//! Measure chunk-size choices on an edit workload: dedup (bytes that must
//! cross as literals after 20 small edits, plus 20 bytes per reference) vs
//! chunking + fingerprinting speed.
//!
//! `cargo run -p wanopt-codec --release --example chunk_sizes`

use std::collections::HashSet;
use std::time::Instant;

use rand::{Rng, RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;
use wanopt_codec::{Chunker, ChunkerConfig, Fingerprint};

fn main() {
    let mut r = ChaCha8Rng::seed_from_u64(42);
    // 16 MiB "office file": text runs with embedded random (compressed) parts.
    let mut base = Vec::new();
    while base.len() < 16 << 20 {
        let n = r.random_range(1000..200_000);
        if r.random_range(0..4) == 0 {
            let mut b = vec![0u8; n];
            r.fill_bytes(&mut b);
            base.extend(b);
        } else {
            base.extend((0..n).map(|_| b"etaoin shrdlu "[r.random_range(0..14)]));
        }
    }
    let mut edited = base.clone();
    for _ in 0..20 {
        let p = r.random_range(0..edited.len() - 100);
        match r.random_range(0..3) {
            0 => edited[p] ^= 1,
            1 => edited
                .splice(p..p, (0..r.random_range(1..500)).map(|i| i as u8))
                .for_each(drop),
            _ => edited.drain(p..p + r.random_range(1..100)).for_each(drop),
        }
    }
    println!("| min / avg / max | mean chunk | literal bytes after 20 edits | WAN estimate | chunk+hash MB/s |");
    println!("| --- | --- | --- | --- | --- |");
    for (min, avg, max) in [
        (1 << 10, 4 << 10, 32 << 10),
        (2 << 10, 8 << 10, 64 << 10),
        (4 << 10, 16 << 10, 128 << 10),
        (8 << 10, 32 << 10, 256 << 10),
    ] {
        let chunker = Chunker::new(ChunkerConfig { min, avg, max }).unwrap();
        // Best of 5 (the machine is shared and noisy).
        let mut secs = f64::MAX;
        let mut known = HashSet::new();
        for _ in 0..5 {
            let start = Instant::now();
            known = chunker
                .split(&base)
                .iter()
                .map(|c| Fingerprint::of(c))
                .collect::<HashSet<Fingerprint>>();
            secs = secs.min(start.elapsed().as_secs_f64());
        }
        let chunks = chunker.split(&edited);
        let mut literal = 0usize;
        let mut refs = 0usize;
        for c in &chunks {
            if known.contains(&Fingerprint::of(c)) {
                refs += 1;
            } else {
                literal += c.len();
            }
        }
        println!(
            "| {} / {} / {} KiB | {} | {} | {} | {:.0} |",
            min >> 10,
            avg >> 10,
            max >> 10,
            edited.len() / chunks.len(),
            literal,
            literal + refs * 20 + (chunks.len() - refs) * 9,
            base.len() as f64 / secs / 1e6
        );
    }
}
