//! WAN bytes per LAN byte on the benchmark's data, cold and warm.
//!
//! `cargo run -p wanopt-codec --release --example ratio`

use rand::{Rng, RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;
use wanopt_codec::{Decoder, DecoderConfig, Encoder, EncoderConfig};

mod support;

fn main() {
    let mut r = ChaCha8Rng::seed_from_u64(1);
    let words = [
        "the", "quick", "brown", "fox", "report", "revenue", "table", "value",
    ];
    let mut text = Vec::new();
    while text.len() < 8 << 20 {
        text.extend_from_slice(words[r.random_range(0..words.len())].as_bytes());
        if r.random_range(0..12) == 0 {
            text.extend_from_slice(format!(" {} ", r.next_u32()).as_bytes());
        }
        text.push(b' ');
    }
    let mut random = vec![0u8; 8 << 20];
    r.fill_bytes(&mut random);
    for (name, data) in [("text", &text), ("random", &random)] {
        let pair = support::cache_pair();
        let mut sizes = Vec::new();
        for _ in 0..2 {
            let mut enc = Encoder::new(pair.edge.clone(), EncoderConfig::default()).unwrap();
            let mut wire = Vec::new();
            enc.push(data, &mut wire);
            enc.finish(&mut wire);
            let mut dec = Decoder::new(pair.core.clone(), DecoderConfig::default());
            let mut out = Vec::new();
            dec.push(&wire, &mut out).unwrap();
            assert_eq!(&out, data);
            while let Some(m) = dec.poll_control() {
                enc.handle_peer(&m, &mut Vec::new()).unwrap();
            }
            sizes.push(wire.len() as f64 / data.len() as f64);
        }
        println!("{name}: cold {:.4}, warm {:.4}", sizes[0], sizes[1]);
    }
}
