//! The controller on bottlenecks whose capacity moves: synthetic cellular
//! traces (a walk with outages) through the simulated bottleneck, on a
//! virtual clock.

use std::time::Duration;

use wanopt_netem::trace::synthetic::CellularWalk;
use wanopt_netem::units::BitsPerSecond;
use wanopt_netem::DeliveryTrace;

use super::sim::{Path, Sim};
use super::MovingPolicy;

/// What a run on a traced path measured after its first 5 s.
#[derive(Debug)]
struct Figures {
    /// Goodput as a share of what the trace offered over the window.
    share: f64,
    /// Packets' wait at the bottleneck, ms: median and 95th percentile.
    wait_p50_ms: f64,
    wait_p95_ms: f64,
    /// Queue drops over packets sent.
    queue_loss: f64,
}

fn run(trace: DeliveryTrace, queue: u64, seconds: u64) -> Figures {
    run_with(trace, queue, seconds, MovingPolicy::Auto)
}

fn run_with(trace: DeliveryTrace, queue: u64, seconds: u64, moving: MovingPolicy) -> Figures {
    // What the trace offers over the measurement window, bytes per second.
    let offered = trace.opportunities_between(5_000_000_000, seconds * 1_000_000_000) as f64
        * f64::from(wanopt_netem::trace::OPPORTUNITY_BYTES)
        / (seconds - 5) as f64;
    let mut sim = Sim::with_moving(Path::traced(trace, 60, queue), moving);
    let out = sim.measure(Duration::from_secs(5), Duration::from_secs(seconds));
    let ms = |q: f64| out.queue_delays.quantile(q).unwrap_or(0) as f64 / 1e6;
    Figures {
        share: out.goodput / offered,
        wait_p50_ms: ms(0.5),
        wait_p95_ms: ms(0.95),
        queue_loss: out.queue_loss,
    }
}

/// The recorded traces of a directory (`WANOPT_TRACES`, e.g. Mahimahi's
/// `traces/`), deep and shallow buffers: the bound keeps three quarters of
/// the rate the trace offers and a p95 wait no longer than BBR v1's window
/// alone; the figures are printed (`cargo test --release -p wanopt-cc
/// recorded_traces -- --ignored --nocapture`).
#[test]
#[ignore = "needs recorded traces: WANOPT_TRACES=DIR (Mahimahi's traces/)"]
fn recorded_traces() {
    let dir = std::env::var("WANOPT_TRACES")
        .unwrap_or_else(|_| panic!("set WANOPT_TRACES to a directory of Mahimahi traces"));
    let mut found = 0;
    for name in [
        "TMobile-LTE-short",
        "Verizon-LTE-short",
        "ATT-LTE-driving-2016",
        "TMobile-LTE-driving",
        "ATT-LTE-driving",
        "TMobile-UMTS-driving",
    ] {
        let path = format!("{dir}/{name}.down");
        let Ok(text) = std::fs::read_to_string(&path) else {
            eprintln!("{name}: not found");
            continue;
        };
        found += 1;
        let trace = DeliveryTrace::parse(&text).unwrap_or_else(|e| panic!("{path}: {e}"));
        for queue in [500_000, 100_000] {
            let f = run(trace.clone(), queue, 65);
            let v1 = run_with(trace.clone(), queue, 65, MovingPolicy::Never);
            eprintln!(
                "{name:<22} queue {:>3} kB: {:5.1}% of the offered rate, wait p50 {:5.0} ms p95 {:5.0} ms, queue loss {:.2}% (without the bound: {:5.1}%, {:5.0} / {:5.0} ms, {:.2}%)",
                queue / 1000,
                100.0 * f.share,
                f.wait_p50_ms,
                f.wait_p95_ms,
                100.0 * f.queue_loss,
                100.0 * v1.share,
                v1.wait_p50_ms,
                v1.wait_p95_ms,
                100.0 * v1.queue_loss,
            );
            assert!(f.share >= 0.75, "{name}, {queue} B: {f:?}");
            assert!(
                f.wait_p95_ms <= v1.wait_p95_ms,
                "{name}, {queue} B: {f:?} against {v1:?}"
            );
        }
    }
    assert!(found > 0, "no trace found in {dir}");
}

fn walk(mean_mbit: u64, seed: u64) -> DeliveryTrace {
    CellularWalk::lab(BitsPerSecond(mean_mbit * 1_000_000), 120_000, seed).generate()
}

/// On synthetic cellular walks around 8 Mbit/s behind a 500 KB buffer, the
/// controller keeps nine tenths of the rate the trace offers, and the
/// packets' wait at the bottleneck well below what BBR v1's window alone
/// (the bound off) makes them wait.
#[test]
fn follows_a_moving_bottleneck_with_a_short_queue() {
    for seed in [46, 3] {
        let bounded = run(walk(8, seed), 500_000, 40);
        let unbounded = run_with(walk(8, seed), 500_000, 40, MovingPolicy::Never);
        eprintln!("seed {seed}: bounded {bounded:?}, unbounded {unbounded:?}");
        assert!(bounded.share >= 0.9, "seed {seed}: {bounded:?}");
        assert!(
            bounded.wait_p50_ms <= 0.8 * unbounded.wait_p50_ms
                && bounded.wait_p95_ms <= 0.8 * unbounded.wait_p95_ms,
            "seed {seed}: {bounded:?} against {unbounded:?}"
        );
    }
}

/// Behind a shallow buffer (100 KB) the rate is kept, and the queue drops
/// no more than BBR v1's window alone makes it drop.
#[test]
fn keeps_the_rate_of_a_moving_bottleneck_behind_a_shallow_buffer() {
    let bounded = run(walk(8, 46), 100_000, 40);
    let unbounded = run_with(walk(8, 46), 100_000, 40, MovingPolicy::Never);
    eprintln!("bounded {bounded:?}, unbounded {unbounded:?}");
    assert!(bounded.share >= 0.9, "{bounded:?}");
    assert!(
        bounded.queue_loss <= unbounded.queue_loss,
        "{bounded:?} against {unbounded:?}"
    );
}

/// The min RTT is re-measured, not taken from a standing queue: BBR v1's
/// window alone keeps a deep buffer full on a moving bottleneck, and
/// Linux's way (the sample at hand when the minimum expires, then a drain
/// to 4 packets) would leave it inflated with ProbeRTT at 3/4 of a BDP (in
/// the lab it climbed from 61 to 346 ms in 30 s).
#[test]
fn the_min_rtt_is_measured_not_taken_from_a_standing_queue() {
    let mut sim = Sim::with_moving(Path::traced(walk(8, 46), 60, 500_000), MovingPolicy::Never);
    sim.run(Duration::from_secs(45), None);
    let min_rtt = sim.bbr.min_rtt().unwrap_or_default();
    assert!(
        min_rtt < Duration::from_millis(70),
        "min RTT {min_rtt:?} on a 60 ms path"
    );
}

/// Fixed-rate paths, even with random loss and late acks, are never judged
/// to move: BBR's window there is what it was.
#[test]
fn a_fixed_rate_path_is_not_judged_moving() {
    for (rate, rtt, loss_ppm, jitter_ms) in
        [(250, 1, 0, 0), (100, 50, 50_000, 20), (10, 100, 10_000, 0)]
    {
        let mut path = Path::new(rate, rtt);
        path.loss_ppm = loss_ppm;
        path.ack_jitter = Duration::from_millis(jitter_ms);
        let mut sim = Sim::new(path);
        sim.run(Duration::from_secs(20), None);
        assert!(
            !sim.bbr.moving.active(),
            "{rate} Mbit/s, {rtt} ms, {loss_ppm} ppm: variability {:.2}",
            sim.bbr.moving.variability()
        );
    }
}
