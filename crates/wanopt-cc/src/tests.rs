//! The controller against a simulated bottleneck on a virtual clock: a
//! sender paced and windowed as the vendored quinn-proto does it, a FIFO
//! bottleneck with a byte-limited queue, a propagation delay, random loss,
//! packet-threshold loss detection and a receiver that acks every packet
//! (optionally in bursts, as a busy receiver does).

use std::sync::atomic::Ordering;

use super::sim::{Path, Sim, PACKET};
use super::*;

/// Fills the path, keeps the queue short and loses (almost) nothing.
fn assert_fills_path(path: Path) {
    let mut sim = Sim::new(path);
    let out = sim.measure(Duration::from_secs(5), Duration::from_secs(20));
    let link = path.bytes_per_sec() as f64;
    let estimate = sim.bbr.bandwidth() as f64;
    eprintln!(
        "{path:?}: goodput {:.1}% of the link, queue loss {:.3}% (startup {:.3}%), \
         mean queue delay {:?}, estimate {:.1}%, min rtt {:?}, mode {:?}",
        100.0 * out.goodput / link,
        100.0 * out.queue_loss,
        100.0 * out.startup_queue_loss,
        out.mean_queue_delay,
        100.0 * estimate / link,
        sim.bbr.min_rtt(),
        sim.bbr.mode(),
    );
    assert!(
        out.goodput >= 0.95 * link,
        "goodput {:.0} of {link:.0} B/s",
        out.goodput
    );
    assert!(
        out.queue_loss < 0.001,
        "queue loss {:.3}%",
        100.0 * out.queue_loss
    );
    // STARTUP overshoots by design: it sends at 2.885 x the rate until it
    // sees the loss, an RTT after the one-BDP queue overflowed. At 250 ms
    // that is ~10% of the first 5 s (7 MB), once per tunnel.
    assert!(
        out.startup_queue_loss < 0.15,
        "startup queue loss {:.3}%",
        100.0 * out.startup_queue_loss
    );
    assert!(
        out.mean_queue_delay < path.rtt / 2 + Duration::from_millis(2),
        "mean queueing delay {:?} on a {:?} path",
        out.mean_queue_delay,
        path.rtt
    );
    assert!(
        (0.9 * link..=1.1 * link).contains(&estimate),
        "bandwidth estimate {estimate:.0} for a {link:.0} B/s link"
    );
    let min_rtt = sim.bbr.min_rtt().unwrap_or_default();
    let serialization = Duration::from_nanos(PACKET * 8 * 1_000_000_000 / path.rate_bps);
    // Late acks reach the sender in order (each at least as late as the one
    // before), so at a high packet rate nearly every sample carries close to
    // the whole jitter: the minimum taken when the 10 s window expires can
    // be up to all of it above the path's.
    assert!(
        min_rtt >= path.rtt
            && min_rtt <= path.rtt + serialization + path.ack_jitter + Duration::from_millis(1),
        "min rtt {min_rtt:?} for {:?}",
        path.rtt
    );
    assert_ne!(sim.bbr.mode(), Mode::Startup, "left STARTUP");
}

#[test]
fn fills_a_250_mbit_path_at_1_ms() {
    assert_fills_path(Path::new(250, 1));
}

#[test]
fn fills_a_250_mbit_path_at_50_ms() {
    assert_fills_path(Path::new(250, 50));
}

#[test]
fn fills_a_250_mbit_path_at_250_ms() {
    assert_fills_path(Path::new(250, 250));
}

#[test]
fn fills_a_10_mbit_path_at_100_ms() {
    assert_fills_path(Path::new(10, 100));
}

/// Acks released in 2 ms bursts (a busy receiver) must not inflate the
/// bandwidth estimate: quinn's own BBR took the burst's rate for the path's.
#[test]
fn bursty_acks_do_not_inflate_the_estimate() {
    let mut path = Path::new(250, 50);
    path.ack_burst = Duration::from_millis(2);
    assert_fills_path(path);
}

/// A sender whose event loop stalls for up to 40 ms every 100 ms on average
/// (a busy two-core lab machine) must still fill the path: the pacer keeps
/// the tokens it could not use for an RTT and catches up.
#[test]
fn fills_the_path_despite_a_stalling_sender() {
    let mut path = Path::new(250, 250);
    path.stall_every_ms = 100;
    path.stall_max_ms = 40;
    let share = steady_goodput_share(path);
    assert!(share >= 0.95, "goodput {:.1}% of the link", 100.0 * share);
}

/// Goodput over seconds 5-20 of a run, as a share of the link's rate.
fn steady_goodput_share(path: Path) -> f64 {
    let mut sim = Sim::new(path);
    let out = sim.measure(Duration::from_secs(5), Duration::from_secs(20));
    let link = path.bytes_per_sec() as f64;
    eprintln!(
        "{path:?}: goodput {:.1}%, queue loss {:.3}%, estimate {:.1}%",
        100.0 * out.goodput / link,
        100.0 * out.queue_loss,
        100.0 * sim.bbr.bandwidth() as f64 / link
    );
    out.goodput / link
}

/// Acks that reach the controller up to 20 ms late must not inflate the
/// bandwidth estimate: the maximum of all samples would take the few whose
/// interval the lateness shortened (as it did in the lab, by 10-15%); a
/// round's median does not.
#[test]
fn late_acks_do_not_inflate_the_estimate() {
    let mut path = Path::new(250, 100);
    path.ack_jitter = Duration::from_millis(20);
    assert_fills_path(path);
}

/// Random loss is not congestion: 1% loss costs about 1% of goodput.
#[test]
fn keeps_its_rate_under_random_loss() {
    let mut path = Path::new(100, 50);
    path.loss_ppm = 10_000;
    let share = steady_goodput_share(path);
    assert!(
        share >= 0.93,
        "goodput {:.1}% of the link at 1% random loss",
        100.0 * share
    );
}

/// An application-limited phase must not lower the estimate, and after
/// an idle period the sender resumes at the path's rate at once: no slow
/// start per flow on a warm tunnel.
#[test]
fn resumes_at_full_rate_after_idle_and_app_limited_phases() {
    let path = Path::new(250, 100);
    let link = path.bytes_per_sec() as f64;
    let mut sim = Sim::new(path);
    sim.run(Duration::from_secs(5), None);
    // 20 Mbit/s of application data for 3 s, then nothing for 2 s.
    sim.run(Duration::from_secs(8), Some(20_000_000));
    let estimate = sim.bbr.bandwidth() as f64;
    assert!(
        estimate >= 0.9 * link,
        "estimate fell to {:.1}% of the link while app-limited",
        100.0 * estimate / link
    );
    sim.run(Duration::from_secs(10), Some(0));
    // Sends of the first 600 ms after the idle period, acked by 700 ms.
    let before = sim.delivered;
    sim.run(Duration::from_millis(10_700), None);
    let delivered = (sim.delivered - before) as f64;
    assert!(
        delivered >= 0.85 * link * 0.6,
        "{:.1}% of the link's rate in the first 6 RTTs after idle",
        100.0 * delivered / (link * 0.6)
    );
}

#[test]
fn the_sender_blocked_flag_follows_set_blocked_and_is_shared_with_clones() {
    let bbr = Bbr::new(&BbrConfig::default(), 1200, 1);
    let flag = bbr.sender_blocked();
    assert!(!flag.load(Ordering::Relaxed));
    // A snapshot of the controller (quinn's `Connection::congestion_state`
    // hands out one) reads the live controller's flag.
    let clone = bbr.clone();
    bbr.set_blocked(true);
    assert!(flag.load(Ordering::Relaxed));
    assert!(clone.sender_blocked().load(Ordering::Relaxed));
    bbr.set_blocked(false);
    assert!(!clone.sender_blocked().load(Ordering::Relaxed));
}

#[test]
fn the_repaired_counter_is_shared_with_clones() {
    let bbr = Bbr::new(&BbrConfig::default(), 1200, 1);
    let clone = bbr.clone();
    clone.repaired().fetch_add(3, Ordering::Relaxed);
    assert_eq!(bbr.repaired().load(Ordering::Relaxed), 3);
}

#[test]
fn the_window_is_at_least_four_datagrams_of_the_current_mtu() {
    let mut bbr = Bbr::new(&BbrConfig::default(), 1200, 1);
    assert_eq!(bbr.initial_window(), 14_720);
    assert_eq!(bbr.congestion_window(), 14_720);
    bbr.set_mtu(9000);
    assert_eq!(bbr.congestion_window(), 4 * 9000);
    let jumbo = Bbr::new(&BbrConfig::default(), 9000, 1);
    assert_eq!(jumbo.initial_window(), 4 * 9000);
}

/// A cap below the link's rate (20 of 100 Mbit/s, 50 ms): the pacing rate
/// never goes above it, from the first packet on and through STARTUP's
/// and PROBE_BW's gains, the window stays within the cap's bound, and the
/// goodput comes close to the cap without loss at the link's queue.
#[test]
fn a_rate_cap_bounds_the_pacing_rate_and_the_window_and_is_reached() {
    let path = Path::new(100, 50);
    let cap = 20_000_000 / 8;
    let mut sim = Sim::new(path);
    sim.bbr.set_rate_cap(Some(cap));
    assert_eq!(sim.bbr.pacing_rate_bytes(), Some(cap));
    let out = sim.measure(Duration::from_secs(5), Duration::from_secs(20));
    eprintln!(
        "cap {cap} B/s on a {} B/s link: goodput {:.1}% of the cap, peak pacing {}, \
         window {}, estimate {}, queue loss {:.3}%, mode {:?}",
        path.bytes_per_sec(),
        100.0 * out.goodput / cap as f64,
        sim.peak_pacing_rate,
        sim.bbr.congestion_window(),
        sim.bbr.bandwidth(),
        100.0 * out.queue_loss,
        sim.bbr.mode(),
    );
    assert!(
        sim.peak_pacing_rate <= cap,
        "pacing {} above the cap {cap}",
        sim.peak_pacing_rate
    );
    assert!(
        out.goodput >= 0.93 * cap as f64 && out.goodput <= cap as f64,
        "goodput {:.1}% of the cap",
        100.0 * out.goodput / cap as f64
    );
    // cap × (min RTT + max(40 ms, min RTT / 2)): 2.5 MB/s × 90 ms.
    assert!(
        sim.bbr.congestion_window() <= cap * 90 / 1000 + PACKET,
        "window {}",
        sim.bbr.congestion_window()
    );
    assert_eq!(out.queue_loss, 0.0);
    assert_ne!(sim.bbr.mode(), Mode::Startup, "left STARTUP");
}

/// A cap lifted mid-run: the controller finds the link's rate again.
#[test]
fn a_lifted_rate_cap_lets_the_rate_grow_to_the_link() {
    let path = Path::new(50, 50);
    let mut sim = Sim::new(path);
    sim.bbr.set_rate_cap(Some(10_000_000 / 8));
    sim.run(Duration::from_secs(5), None);
    assert!(sim.bbr.pacing_rate_bytes() <= Some(10_000_000 / 8));
    sim.bbr.set_rate_cap(None);
    let out = sim.measure(Duration::from_secs(15), Duration::from_secs(25));
    let link = path.bytes_per_sec() as f64;
    assert!(
        out.goodput >= 0.9 * link,
        "goodput {:.1}% of the link after the cap was lifted",
        100.0 * out.goodput / link
    );
}

/// Goodput of a fresh controller per 100 ms, as shares of the link's rate.
fn goodput_trace(path: Path, seconds: u64) -> Vec<f64> {
    let mut sim = Sim::new(path);
    let link = path.bytes_per_sec() as f64;
    (1..=seconds * 10)
        .map(|i| {
            let before = sim.delivered;
            sim.run(Duration::from_millis(100 * i), None);
            (sim.delivered - before) as f64 / 0.1 / link
        })
        .collect()
}

/// When the goodput over 500 ms first reaches `share` of the link, seconds
/// from the start (the end of that 500 ms).
fn time_to_share(trace: &[f64], share: f64) -> Option<f64> {
    trace
        .windows(5)
        .position(|w| w.iter().sum::<f64>() / 5.0 >= share)
        .map(|i| (i + 5) as f64 / 10.0)
}

/// Random loss is not congestion: on a 100 Mbit/s, 100 ms path, a fresh
/// controller reaches 90% of what the loss leaves of the link within 2 s
/// (2.5 s at 10%), as kernel BBR does, and then delivers at least 95% of
/// it (85% at 10%). Before the loss judge (`loss.rs`) and the sending rate
/// that makes up for random loss, 3% loss took 15 s to reach 90% of the
/// link, and 5% loss held the goodput at 80-85%.
#[test]
fn reaches_and_holds_the_rate_under_random_loss() {
    for (loss_pct, ramp_limit, hold) in [
        (1.0, 2.0, 0.95),
        (3.0, 2.0, 0.95),
        (5.0, 2.0, 0.95),
        (10.0, 2.5, 0.85),
    ] {
        let mut path = Path::new(100, 100);
        path.loss_ppm = (loss_pct * 10_000.0) as u64;
        let trace = goodput_trace(path, 20);
        let ceiling = 1.0 - loss_pct / 100.0;
        let ramp = time_to_share(&trace, 0.9 * ceiling);
        let held = trace[20..].iter().sum::<f64>() / trace[20..].len() as f64;
        eprintln!(
            "{loss_pct}% loss: 90% of {:.0}% after {ramp:?} s, then {:.1}% of the link",
            100.0 * ceiling,
            100.0 * held
        );
        assert!(
            ramp.is_some_and(|t| t <= ramp_limit),
            "{loss_pct}% loss: 90% of the rate after {ramp:?} s (limit {ramp_limit} s)"
        );
        assert!(
            held >= hold * ceiling,
            "{loss_pct}% loss: goodput {:.1}% of the link from 2 s on, below {:.1}%",
            100.0 * held,
            100.0 * hold * ceiling
        );
    }
}

/// The same from twenty random draws each at 5% and 10% loss, on a 50 Mbit/s,
/// 100 ms path whose acks come up to 10 ms late: every start reaches 90%
/// of what the loss leaves within 3 s. (Leaving STARTUP on loss that was
/// only above a usual rate learned from the first few dozen packets failed
/// 8 of the 20 starts at 10%.)
#[test]
fn starts_reliably_under_random_loss_and_late_acks() {
    for loss_pct in [5.0, 10.0] {
        let mut ramps = Vec::new();
        for draw in 1..=20u64 {
            let mut path = Path::new(50, 100);
            path.loss_ppm = (loss_pct * 10_000.0) as u64;
            path.ack_jitter = Duration::from_millis(10);
            let mut sim = Sim::new(path);
            sim.rng ^= draw * 0x1234_5678_9abc;
            let link = path.bytes_per_sec() as f64;
            let trace: Vec<f64> = (1..=60u64)
                .map(|i| {
                    let before = sim.delivered;
                    sim.run(Duration::from_millis(100 * i), None);
                    (sim.delivered - before) as f64 / 0.1 / link
                })
                .collect();
            ramps.push(time_to_share(&trace, 0.9 * (1.0 - loss_pct / 100.0)));
        }
        eprintln!("{loss_pct}% loss: 90% of the rate after {ramps:?} s");
        assert!(
            ramps.iter().all(|r| r.is_some_and(|t| t <= 3.0)),
            "{loss_pct}% loss: 90% of the rate after {ramps:?} s"
        );
    }
}

/// Congestion still shrinks the model: when the bottleneck halves under a
/// path with 2% random loss, the controller follows within a few seconds
/// and the queue does not keep overflowing.
#[test]
fn follows_a_bottleneck_that_halves_under_random_loss() {
    let mut path = Path::new(100, 50);
    path.loss_ppm = 20_000;
    let mut sim = Sim::new(path);
    sim.run(Duration::from_secs(10), None);
    sim.path.rate_bps /= 2;
    sim.path.queue /= 2;
    let out = sim.measure(Duration::from_secs(14), Duration::from_secs(24));
    let link = sim.path.bytes_per_sec() as f64;
    eprintln!(
        "after the halving: goodput {:.1}% of the new link, queue loss {:.3}%, queue delay {:?}, estimate {:.1}%",
        100.0 * out.goodput / link,
        100.0 * out.queue_loss,
        out.mean_queue_delay,
        100.0 * sim.bbr.bandwidth() as f64 / link
    );
    assert!(
        out.goodput >= 0.9 * 0.98 * link,
        "goodput {:.1}%",
        100.0 * out.goodput / link
    );
    assert!(
        out.queue_loss < 0.01,
        "queue loss {:.2}%",
        100.0 * out.queue_loss
    );
    assert!(
        out.mean_queue_delay < path.rtt / 2,
        "mean queueing delay {:?}",
        out.mean_queue_delay
    );
    let estimate = sim.bbr.bandwidth() as f64;
    assert!(
        (0.85 * link..=1.1 * link).contains(&estimate),
        "estimate {:.1}% of the new link",
        100.0 * estimate / link
    );
}

#[test]
fn random_loss_that_fec_repairs_keeps_the_rate_and_is_learned_as_random() {
    let mut path = Path::new(50, 100);
    path.loss_ppm = 30_000;
    path.repair = true;
    let mut sim = Sim::new(path);
    let outcome = sim.measure(Duration::from_secs(10), Duration::from_secs(30));
    let rate = sim.path.bytes_per_sec() as f64;
    assert!(outcome.goodput > 0.9 * rate, "{outcome:?}");
    let learned = sim.bbr.random_loss();
    assert!((0.015..0.05).contains(&learned), "learned {learned}");
    assert!(outcome.queue_loss < 0.01, "{outcome:?}");
}

#[test]
fn loss_at_an_overflowing_queue_is_congestion_though_fec_repairs_it() {
    // A queue of 20 packets on a 50 ms, 50 Mbit/s path (a tenth of its
    // BDP), every drop rebuilt by the receiver: QUIC sees no loss at all,
    // the controller must still see the queue's.
    let mut path = Path::new(50, 50);
    path.queue = 20 * PACKET;
    path.repair_queue = true;
    let mut sim = Sim::new(path);
    sim.run(Duration::from_secs(20), None);
    assert!(sim.queue_drops > 0);
    assert!(sim.bbr.congested_rounds() > 0, "no congested round");
}

/// A 100 Mbit/s, 50 ms path whose delay grows with the load by up to 20 ms
/// though nothing queues (jitter that keeps packets in order, as the lab's
/// emulator and many radio links have it), with random loss: the load's
/// delay is not a queue, and a fresh controller reaches 90% of what the
/// loss leaves within 3 s and then holds 90% of it, in each of ten draws.
/// (Measured against the least delay ever seen, the load's delay was a
/// queue: STARTUP ended at 10-40% of the link and every lossy round cut the
/// window, 4 to 7 of 10 draws at 3-5% stalled below half the link.)
#[test]
fn delay_that_comes_with_load_is_not_a_queue() {
    for loss_pct in [1.0, 3.0, 5.0] {
        let mut ramps = Vec::new();
        let mut helds = Vec::new();
        for draw in 1..=10u64 {
            let mut path = Path::new(100, 50);
            path.loss_ppm = (loss_pct * 10_000.0) as u64;
            path.ack_jitter = Duration::from_millis(20);
            let mut sim = Sim::new(path);
            sim.rng ^= draw * 0x1234_5678_9abc;
            let link = path.bytes_per_sec() as f64;
            let trace: Vec<f64> = (1..=100u64)
                .map(|i| {
                    let before = sim.delivered;
                    sim.run(Duration::from_millis(100 * i), None);
                    (sim.delivered - before) as f64 / 0.1 / link
                })
                .collect();
            let ceiling = 1.0 - loss_pct / 100.0;
            ramps.push(time_to_share(&trace, 0.9 * ceiling));
            helds.push(trace[20..].iter().sum::<f64>() / trace[20..].len() as f64 / ceiling);
        }
        eprintln!("{loss_pct}% loss: 90% after {ramps:?} s, then {helds:.3?} of the ceiling");
        assert!(
            ramps.iter().all(|r| r.is_some_and(|t| t <= 3.0)),
            "{loss_pct}% loss: 90% of the rate after {ramps:?} s"
        );
        assert!(
            helds.iter().all(|h| *h >= 0.9),
            "{loss_pct}% loss: goodput from 2 s on {helds:.3?} of what the loss leaves"
        );
    }
}
