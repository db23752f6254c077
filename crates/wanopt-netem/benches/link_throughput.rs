//! The link model's own ceiling: how many 1500-byte frames per second one core
//! pushes through `handle_frame` + `poll_transmit`, on a virtual clock, for a
//! few configurations. Run with `cargo bench -p wanopt-netem`.
//!
//! Frames are recycled (what leaves is refilled and sent again), as a driver
//! with a buffer pool would, so the figure is the model's cost alone.

use std::hint::black_box;
use std::time::{Duration, Instant};

use wanopt_netem::{Link, LinkConfig};

const FRAMES: u64 = 2_000_000;
const FRAME_LEN: usize = 1514;

fn ipv4_frame() -> Vec<u8> {
    let mut frame = vec![0u8; FRAME_LEN];
    frame[12..14].copy_from_slice(&[0x08, 0x00]);
    frame[14] = 0x45;
    frame[15] = 0x02; // ECT(0), so RED marks rather than drops
    frame[16..18].copy_from_slice(&1500u16.to_be_bytes());
    frame[23] = 6;
    frame
}

fn run(name: &str, spec: &str, offered_bits_per_second: u64) {
    let config: LinkConfig = spec.parse().expect("valid spec");
    let mut link = Link::new(config, 1);
    let gap = Duration::from_nanos(1500 * 8 * 1_000_000_000 / offered_bits_per_second);
    let base = Instant::now();
    let mut pool: Vec<Vec<u8>> = (0..4096).map(|_| ipv4_frame()).collect();
    let mut now = base;
    let started = Instant::now();
    for _ in 0..FRAMES {
        now += gap;
        let frame = pool.pop().unwrap_or_else(ipv4_frame);
        link.handle_frame(now, frame);
        while let Some(frame) = link.poll_transmit(now) {
            pool.push(black_box(frame));
        }
    }
    let elapsed = started.elapsed();
    let per_second = FRAMES as f64 / elapsed.as_secs_f64();
    println!(
        "{name:<40} {:>10.0} frames/s  {:>6.2} Gbit/s of 1500-byte IP packets  ({:.0} ns/frame)",
        per_second,
        per_second * 1500.0 * 8.0 / 1e9,
        elapsed.as_nanos() as f64 / FRAMES as f64,
    );
    black_box(link.counters());
}

fn main() {
    let line_rate = 1_000_000_000;
    run("perfect link", "", line_rate);
    run("delay 50ms", "delay 50ms", line_rate);
    run(
        "1gbit rtt 100ms queue 2bdp",
        "rate 1gbit rtt 100ms queue 2bdp",
        line_rate,
    );
    run(
        "250mbit overload, red, loss, jitter",
        "rate 250mbit rtt 100ms queue 2bdp ecn red loss 0.1% jitter 1ms",
        line_rate,
    );
    run(
        "+ reorder 1% duplicate 0.1%",
        "rate 1gbit rtt 100ms queue 2bdp loss 0.1% jitter 1ms reorder 1% duplicate 0.1%",
        line_rate,
    );
}
