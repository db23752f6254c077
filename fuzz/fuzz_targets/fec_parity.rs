//! Feeds arbitrary bytes to the parity datagram parser and to a receiver
//! holding a few datagrams: they must never panic; whatever parses must
//! have consistent counts; anything rebuilt must carry the checksum its
//! group announced (the receiver checks it, this asserts it).
#![no_main]

use libfuzzer_sys::fuzz_target;
use wanopt_proto::fec::{datagram_id, Parity, Receiver, MARKER};

fuzz_target!(|data: &[u8]| {
    if let Ok(p) = Parity::parse(data) {
        assert!(p.index < p.parity_count);
        assert!(!p.sources.is_empty());
        assert_eq!(p.shard.len() % 2, 0);
    }
    // The same bytes as datagrams and as parity (marked) through one
    // receiver, cut a few ways.
    let mut rx = Receiver::new();
    for size in [64, 300, 1000] {
        for (i, chunk) in data.chunks(size).enumerate() {
            if i % 3 == 2 {
                let mut marked = chunk.to_vec();
                marked[0] = MARKER;
                let ids: Vec<u32> = Parity::parse(&marked)
                    .map(|p| p.sources.iter().map(|s| s.0).collect())
                    .unwrap_or_default();
                if let Ok(rebuilt) = rx.on_parity(&marked) {
                    for d in rebuilt {
                        assert!(ids.contains(&datagram_id(&d)));
                    }
                }
            } else {
                rx.on_datagram(chunk);
            }
        }
    }
});
