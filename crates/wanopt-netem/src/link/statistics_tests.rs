//! Statistical tests of the random stages against their formulas.

use std::time::Duration;

use crate::config::{GilbertElliott, LinkConfig, QueueDiscipline, QueueLimit, RedParams};
use crate::link::test_support::{ipv4_frame, Departure, Harness};
use crate::link::Link;
use crate::units::{BitsPerSecond, Probability};
use crate::wire::Ecn;

/// Asserts that `count` successes out of `trials` are within four standard
/// deviations of a binomial with probability `p`.
fn assert_binomial(count: u64, trials: u64, p: f64) {
    let mean = trials as f64 * p;
    let sigma = (trials as f64 * p * (1.0 - p)).sqrt();
    assert!(
        (count as f64 - mean).abs() <= 4.0 * sigma,
        "{count} of {trials}, expected {mean} ± {}",
        4.0 * sigma
    );
}

/// Sends `n` frames 100 us apart and delivers everything.
fn run(config: LinkConfig, seed: u64, n: u64) -> Harness {
    let mut harness = Harness::new(Link::new(config, seed));
    for id in 0..n {
        harness.arrive(
            Duration::from_micros(100 * id),
            ipv4_frame(id, 200, Ecn::Ect0),
        );
    }
    harness.finish();
    harness
}

#[test]
fn bernoulli_loss_rate_is_within_a_binomial_four_sigma_bound() {
    let config = LinkConfig {
        loss: Probability::from_percent(1.0).unwrap(),
        ..LinkConfig::default()
    };
    let harness = run(config, 7, 100_000);
    let lost = harness.link.counters().dropped_loss;
    assert_binomial(lost, 100_000, 0.01);
    assert_eq!(harness.departures.len() as u64, 100_000 - lost);
}

#[test]
fn gilbert_elliott_bursts_have_mean_length_one_over_r() {
    let model = GilbertElliott {
        good_to_bad: Probability::from_percent(1.0).unwrap(),
        bad_to_good: Probability::from_percent(30.0).unwrap(),
        loss_in_bad: Probability::ONE,
        loss_in_good: Probability::ZERO,
    };
    let config = LinkConfig {
        loss_burst: Some(model),
        ..LinkConfig::default()
    };
    let n = 300_000;
    let harness = run(config, 11, n);
    let mut delivered = vec![false; n as usize];
    for id in harness.ids() {
        delivered[id as usize] = true;
    }
    let mut bursts = Vec::new();
    let mut run_length = 0u64;
    for &ok in &delivered {
        if ok {
            if run_length > 0 {
                bursts.push(run_length);
            }
            run_length = 0;
        } else {
            run_length += 1;
        }
    }
    let mean_burst = bursts.iter().sum::<u64>() as f64 / bursts.len() as f64;
    // Geometric with r = 0.3: mean 3.33, sd 2.79; ~2900 bursts give a
    // standard error of 0.05.
    assert!(
        (mean_burst - 1.0 / 0.3).abs() < 0.25,
        "mean burst {mean_burst}"
    );
    let loss_rate = harness.link.counters().dropped_loss as f64 / n as f64;
    assert!(
        (loss_rate - model.mean_loss()).abs() < 0.004,
        "loss {loss_rate}"
    );
}

#[test]
fn duplicates_appear_at_the_configured_rate_right_behind_the_original() {
    let config = LinkConfig {
        duplicate: Probability::from_percent(5.0).unwrap(),
        ..LinkConfig::default()
    };
    let harness = run(config, 3, 50_000);
    let duplicated = harness.link.counters().duplicated;
    assert_binomial(duplicated, 50_000, 0.05);
    let ids = harness.ids();
    assert_eq!(ids.len() as u64, 50_000 + duplicated);
    let adjacent_pairs = ids.windows(2).filter(|pair| pair[0] == pair[1]).count() as u64;
    assert_eq!(adjacent_pairs, duplicated);
}

fn jittery(reorder: f64) -> LinkConfig {
    LinkConfig {
        delay: Duration::from_millis(10),
        jitter: Duration::from_millis(5),
        reorder: Probability::new(reorder).unwrap(),
        reorder_gap: Duration::from_millis(1),
        ..LinkConfig::default()
    }
}

fn overtaken(ids: &[u64]) -> u64 {
    // Frames delivered after a frame with a larger id.
    let mut highest = None;
    let mut count = 0;
    for &id in ids {
        match highest {
            Some(h) if id < h => count += 1,
            _ => highest = Some(id),
        }
    }
    count
}

#[test]
fn jitter_preserves_order_and_stays_within_its_bounds() {
    let harness = run(jittery(0.0), 5, 20_000);
    let ids = harness.ids();
    assert_eq!(ids, (0..20_000).collect::<Vec<u64>>());
    for Departure { at, frame } in &harness.departures {
        let arrival = Duration::from_micros(100 * crate::link::test_support::frame_id(frame));
        assert!(*at >= arrival + Duration::from_millis(10));
        assert!(*at <= arrival + Duration::from_millis(15));
    }
    // The jitter samples are spread: departures are not all at the maximum.
    let spread = harness
        .departures
        .iter()
        .filter(|d| {
            let arrival =
                Duration::from_micros(100 * crate::link::test_support::frame_id(&d.frame));
            d.at - arrival < Duration::from_millis(14)
        })
        .count();
    assert!(spread > 0);
}

#[test]
fn reorder_holds_back_frames_at_the_configured_rate() {
    let harness = run(jittery(0.02), 5, 50_000);
    let reordered = harness.link.counters().reordered;
    assert_binomial(reordered, 50_000, 0.02);
    // Frames arrive every 100 us and are held back 1 ms, so nearly every
    // held-back frame is overtaken; only when the frame behind drew a much
    // larger jitter sample does it stay behind.
    let ids = harness.ids();
    let overtaken = overtaken(&ids);
    assert!(
        overtaken <= reordered && overtaken * 10 >= reordered * 9,
        "{overtaken} of {reordered}"
    );
    let mut sorted = ids.clone();
    sorted.sort_unstable();
    assert_eq!(sorted, (0..50_000).collect::<Vec<u64>>());
}

#[test]
fn reorder_works_without_jitter() {
    let config = LinkConfig {
        delay: Duration::from_millis(10),
        reorder: Probability::from_percent(1.0).unwrap(),
        ..LinkConfig::default()
    };
    let harness = run(config, 8, 20_000);
    // Without jitter every held-back frame is overtaken by the frames that
    // arrive during the 1 ms gap, except possibly at the very end of the run.
    let reordered = harness.link.counters().reordered;
    assert_binomial(reordered, 20_000, 0.01);
    let overtaken = overtaken(&harness.ids());
    assert!(
        overtaken <= reordered && overtaken + 2 >= reordered,
        "{overtaken} of {reordered}"
    );
}

fn everything() -> LinkConfig {
    LinkConfig {
        rate: Some(BitsPerSecond(12_000_000)),
        queue: QueueLimit::Packets(40),
        delay: Duration::from_millis(20),
        jitter: Duration::from_millis(2),
        loss: Probability::from_percent(1.0).unwrap(),
        loss_burst: Some(GilbertElliott {
            good_to_bad: Probability::from_percent(0.5).unwrap(),
            bad_to_good: Probability::from_percent(40.0).unwrap(),
            loss_in_bad: Probability::ONE,
            loss_in_good: Probability::ZERO,
        }),
        reorder: Probability::from_percent(2.0).unwrap(),
        duplicate: Probability::from_percent(1.0).unwrap(),
        discipline: QueueDiscipline::Red(RedParams::default()),
        ..LinkConfig::default()
    }
}

#[test]
fn same_seed_gives_identical_output_and_another_seed_does_not() {
    // 200 IP bytes every 100 us is 16 Mbit/s into 12 Mbit/s: RED is busy too.
    let first = run(everything(), 42, 20_000);
    let second = run(everything(), 42, 20_000);
    let other = run(everything(), 43, 20_000);
    assert_eq!(first.departures, second.departures);
    assert_eq!(first.link.counters(), second.link.counters());
    assert_ne!(first.departures, other.departures);
    let counters = first.link.counters();
    assert!(counters.ce_marked > 0 && counters.dropped_loss > 0 && counters.reordered > 0);
}

#[test]
fn outcome_does_not_depend_on_when_the_caller_polls() {
    // The same arrivals, polled only once at the end: same departures.
    let eager = run(everything(), 42, 5_000);
    let mut link = Link::new(everything(), 42);
    let base = eager.base;
    for id in 0..5_000u64 {
        link.handle_frame(
            base + Duration::from_micros(100 * id),
            ipv4_frame(id, 200, Ecn::Ect0),
        );
    }
    let mut lazy = Vec::new();
    while let Some(due) = link.poll_timeout() {
        while let Some(frame) = link.poll_transmit(due) {
            lazy.push(Departure {
                at: due - base,
                frame,
            });
        }
    }
    assert_eq!(eager.departures, lazy);
}

#[test]
fn gilbert_elliott_partial_losses_match_the_stationary_formula() {
    // 50% loss in the bad state and 1% in the good state (netem's 1-h, 1-k).
    let model = GilbertElliott {
        good_to_bad: Probability::from_percent(5.0).unwrap(),
        bad_to_good: Probability::from_percent(20.0).unwrap(),
        loss_in_bad: Probability::from_percent(50.0).unwrap(),
        loss_in_good: Probability::from_percent(1.0).unwrap(),
    };
    let config = LinkConfig {
        loss_burst: Some(model),
        ..LinkConfig::default()
    };
    let n = 200_000;
    let harness = run(config, 21, n);
    let loss_rate = harness.link.counters().dropped_loss as f64 / n as f64;
    // mean_loss = 0.2 × 0.5 + 0.8 × 0.01 = 0.108.
    assert!((model.mean_loss() - 0.108).abs() < 1e-12);
    assert!((loss_rate - 0.108).abs() < 0.006, "loss {loss_rate}");
}
