//! Feeds arbitrary bytes to the UDP flow datagram parser, to a reassembler
//! and to a sequence counter: they must never panic; a parsed header must
//! emit back to a header of the same fields; the reassembler must stay
//! within its bounds and never give back more than 16 fragments' worth;
//! every number counted must be counted once.
#![no_main]

use std::time::{Duration, Instant};

use libfuzzer_sys::fuzz_target;
use wanopt_proto::udp_flow::{
    FlowDatagram, Reassembler, SeqCounter, MAX_FRAGMENTS, REASSEMBLY_TIMEOUT,
};

/// The reassembler's bounds (`udp_flow/reassembly.rs`).
const MAX_HELD_BYTES: usize = 4 << 20;
const MAX_GROUPS: usize = 4096;

fuzz_target!(|data: &[u8]| {
    if let Ok(view) = FlowDatagram::new_checked(data) {
        let mut header = Vec::new();
        view.repr().emit(&mut header);
        let parsed = FlowDatagram::new_checked(&header[..]).unwrap();
        assert_eq!(parsed.repr(), view.repr());
        assert!(parsed.payload().is_empty());
        assert!(view.payload().len() + header.len() <= data.len());
    }
    // The bytes cut into frames of a few sizes, at a clock that moves by
    // a byte of the input each frame, through one reassembler.
    let t0 = Instant::now();
    let mut now = t0;
    let mut reassembler = Reassembler::new();
    let mut largest = 0;
    for size in [7, 40, 300] {
        for frame in data.chunks(size) {
            now += Duration::from_millis(u64::from(frame[0] & 0x3F));
            let Ok(view) = FlowDatagram::new_checked(frame) else {
                continue;
            };
            largest = largest.max(view.payload().len());
            if let Some(whole) = reassembler.handle(now, &view) {
                assert!(whole.len() <= MAX_FRAGMENTS * largest);
            }
            assert!(reassembler.held_bytes() <= MAX_HELD_BYTES);
            assert!(reassembler.incomplete() <= MAX_GROUPS);
        }
    }
    reassembler.expire(now + REASSEMBLY_TIMEOUT);
    assert_eq!((reassembler.held_bytes(), reassembler.incomplete()), (0, 0));
    // The bytes as datagram numbers.
    let mut counter = SeqCounter::new();
    let numbers: Vec<u32> = data
        .chunks_exact(4)
        .map(|c| u32::from_be_bytes([c[0], c[1], c[2], c[3]]))
        .collect();
    for n in &numbers {
        counter.record(*n);
    }
    let stats = counter.stats();
    // Every number is received (stale ones too: QUIC never repeats a
    // datagram, so a late one is delivered) or a copy within the window.
    assert_eq!(stats.received + stats.duplicates, numbers.len() as u64);
    assert!(stats.stale <= stats.received);
    assert!(stats.reordered < stats.received.max(1));
});
