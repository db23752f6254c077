//! Deterministic test data shared by the tests, the bench and the
//! examples (included with `#[path]` where `tests/common` is not a module).

#![allow(dead_code)]

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

pub fn rng(seed: u64) -> ChaCha8Rng {
    ChaCha8Rng::seed_from_u64(seed)
}

/// Deterministic text-like data (words from a small vocabulary, lines).
pub fn text(len: usize, seed: u64) -> Vec<u8> {
    const WORDS: &[&str] = &[
        "the",
        "quick",
        "brown",
        "fox",
        "jumps",
        "over",
        "lazy",
        "dog",
        "wanopt",
        "cache",
        "chunk",
        "stream",
        "report",
        "quarterly",
        "revenue",
        "budget",
        "table",
        "figure",
        "network",
        "latency",
        "server",
        "client",
        "office",
        "document",
        "value",
        "total",
    ];
    let mut r = rng(seed);
    let mut out = Vec::with_capacity(len + 16);
    while out.len() < len {
        let w = WORDS[r.random_range(0..WORDS.len())];
        out.extend_from_slice(w.as_bytes());
        if r.random_range(0..12) == 0 {
            out.extend_from_slice(format!(" {} ", r.random::<u32>()).as_bytes());
        }
        out.push(if r.random_range(0..10) == 0 {
            b'\n'
        } else {
            b' '
        });
    }
    out.truncate(len);
    out
}

/// Random (incompressible) bytes.
pub fn random(len: usize, seed: u64) -> Vec<u8> {
    let mut r = rng(seed);
    let mut out = vec![0u8; len];
    r.fill(&mut out[..]);
    out
}
