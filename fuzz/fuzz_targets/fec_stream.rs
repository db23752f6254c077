//! Feeds arbitrary bytes to the continuous FEC layer's parsers and to a
//! decoder that first received a few genuine blocks: they must never
//! panic; what parses must be in range; anything the decoder rebuilds
//! must be one of the datagrams the genuine sender sent (a forged or
//! mangled repair may rebuild nothing or garbage that QUIC's
//! authentication drops, but this decoder's sources are known, so a
//! rebuilt datagram that is none of them must claim a block the input
//! forged).
#![no_main]

use std::time::{Duration, Instant};

use libfuzzer_sys::fuzz_target;
use wanopt_proto::fec_stream::{
    classify, kind, parse_repair, parse_report, parse_source, Decoder, Encoder, Kind, Params,
    MAX_DEPTH, MAX_K, MAX_M,
};

fuzz_target!(|data: &[u8]| {
    if let Ok(r) = parse_repair(data) {
        assert!((1..=MAX_K).contains(&r.k));
        assert!((1..=MAX_M).contains(&r.m) && r.index < r.m);
        assert!((1..=MAX_DEPTH).contains(&r.stride));
        assert!(r.shard.len() >= 4 && r.shard.len() % 2 == 0);
    }
    if let Ok((_, payload)) = parse_source(data) {
        assert!(!payload.is_empty());
    }
    let _ = parse_report(data);
    if let Some((kind, strand)) = classify(data) {
        assert_eq!(data[0], strand.byte(kind));
    }

    // A genuine stream of 40 sources (8:2, depth 2), every fifth lost.
    let mut enc = Encoder::new();
    let mut wire = Vec::new();
    let now = Instant::now();
    let params = Params::new(8, 2, 2).unwrap();
    enc.set_params(Some(params), Duration::from_millis(5), &mut wire);
    let sources: Vec<Vec<u8>> = (0..40u8)
        .map(|i| vec![0x40 | (i & 0x3F); 20 + usize::from(i)])
        .collect();
    let mut dec = Decoder::new();
    let mut rebuilt = Vec::new();
    for (i, s) in sources.iter().enumerate() {
        let mut w = Vec::new();
        enc.wrap(0, s, &mut w);
        let mut repairs = Vec::new();
        enc.on_sent(now, s, &mut repairs);
        if i % 5 != 3 {
            assert_eq!(dec.on_source(&w).unwrap(), &s[..]);
        }
        for r in repairs {
            let _ = dec.on_repair(&r, &mut rebuilt);
        }
    }
    for d in rebuilt.drain(..) {
        assert!(
            sources.contains(&d),
            "a genuine repair rebuilt a wrong datagram"
        );
    }
    // Then the input, cut into datagrams a few ways and marked as each
    // kind of each strand in turn.
    for size in [9, 64, 300] {
        for (i, chunk) in data.chunks(size).enumerate() {
            let mut d = chunk.to_vec();
            // Both strands' bytes: the call strand (0x26-0x28) parses
            // the same.
            d[0] = [0x22, 0x23, 0x24, 0x26, 0x27, 0x28][i % 6];
            match kind(&d) {
                Some(Kind::Source) => {
                    if let Ok(p) = dec.on_source(&d) {
                        assert_eq!(p, &d[5..]);
                    }
                }
                Some(Kind::Repair) => {
                    let _ = dec.on_repair(&d, &mut rebuilt);
                }
                _ => {}
            }
        }
    }
    for d in &rebuilt {
        assert!(!d.is_empty() && d.len() <= 2 * 300);
    }
    let stats = dec.stats();
    assert!(stats.recovered <= stats.repairs * u64::from(MAX_K));
});
