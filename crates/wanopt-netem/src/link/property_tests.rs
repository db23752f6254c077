//! Property tests: invariants that hold for any configuration and any
//! arrival sequence.

use std::collections::HashMap;
use std::time::Duration;

use proptest::prelude::*;

use crate::config::{LinkConfig, QueueDiscipline, QueueLimit, RedParams};
use crate::link::test_support::{arp_frame, frame_id, ipv4_frame, Harness};
use crate::link::Link;
use crate::units::{BitsPerSecond, Probability};
use crate::wire::{Ecn, FrameKind};

fn config_strategy() -> impl Strategy<Value = LinkConfig> {
    (
        prop::option::of(100_000u64..100_000_000),
        0u64..50_000,
        0u64..5_000,
        0.0f64..0.3,
        0.0f64..0.3,
        0.0f64..0.3,
        prop_oneof![
            (1u64..50).prop_map(QueueLimit::Packets),
            (0u64..100_000).prop_map(QueueLimit::Bytes),
            (0.0f64..3.0).prop_map(QueueLimit::Bdp),
        ],
        any::<bool>(),
    )
        .prop_map(
            |(rate, delay_us, jitter_us, loss, duplicate, reorder, queue, red)| LinkConfig {
                rate: rate.map(BitsPerSecond),
                delay: Duration::from_micros(delay_us),
                jitter: Duration::from_micros(jitter_us),
                loss: Probability::new(loss).unwrap(),
                duplicate: Probability::new(duplicate).unwrap(),
                reorder: Probability::new(reorder).unwrap(),
                queue,
                discipline: if red {
                    QueueDiscipline::Red(RedParams::default())
                } else {
                    QueueDiscipline::DropTail
                },
                ..LinkConfig::default()
            },
        )
}

/// (gap before this arrival in us, IP length, ECN bits, is ARP).
fn arrivals_strategy() -> impl Strategy<Value = Vec<(u64, usize, u8, bool)>> {
    prop::collection::vec(
        (
            0u64..2_000,
            28usize..1500,
            0u8..4,
            prop::bool::weighted(0.05),
        ),
        0..300,
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn link_invariants_hold(config in config_strategy(), arrivals in arrivals_strategy(), seed in any::<u64>()) {
        let delay = config.delay;
        let reorders = !config.reorder.is_zero();
        let mut harness = Harness::new(Link::new(config, seed));
        let mut arrival_of = HashMap::new();
        let mut at = Duration::ZERO;
        for (id, (gap_us, ip_len, ecn, arp)) in arrivals.iter().enumerate() {
            at += Duration::from_micros(*gap_us);
            let frame = if *arp {
                arp_frame()
            } else {
                arrival_of.insert(id as u64, at);
                ipv4_frame(id as u64, *ip_len, Ecn::from_bits(*ecn))
            };
            harness.arrive(at, frame);
            let c = harness.link.counters();
            prop_assert_eq!(c.frames_in + c.duplicated, c.frames_out + c.dropped() + c.frames_in_flight);
            prop_assert!(c.frames_out <= c.frames_in + c.duplicated);
            prop_assert!(c.queue_bytes <= c.max_queue_bytes);
        }
        harness.finish();
        let c = harness.link.counters().clone();
        prop_assert_eq!(c.frames_in, arrivals.len() as u64);
        prop_assert_eq!(c.frames_in_flight, 0);
        prop_assert_eq!(c.queue_frames, 0);
        prop_assert_eq!(c.queue_bytes, 0);
        prop_assert_eq!(c.frames_out, harness.departures.len() as u64);
        prop_assert_eq!(c.frames_in + c.duplicated, c.frames_out + c.dropped());
        let mut previous = Duration::ZERO;
        let mut highest_id = None;
        for departure in &harness.departures {
            prop_assert!(departure.at >= previous, "departures out of time order");
            previous = departure.at;
            if FrameKind::of(&departure.frame) == FrameKind::NonIp {
                continue;
            }
            let id = frame_id(&departure.frame);
            let arrival = arrival_of[&id];
            prop_assert!(departure.at >= arrival + delay, "frame {} left before arrival + delay", id);
            if !reorders {
                prop_assert!(highest_id.is_none_or(|h| id >= h), "reordered without reorder");
                highest_id = Some(id);
            }
        }
    }
}

proptest! {
    #[test]
    fn back_to_back_departures_match_the_cumulative_formula(
        rate in 1_000u64..10_000_000_000,
        sizes in prop::collection::vec(28usize..9000, 1..200),
    ) {
        let config = LinkConfig {
            rate: Some(BitsPerSecond(rate)),
            queue: QueueLimit::Packets(1_000),
            ..LinkConfig::default()
        };
        let mut harness = Harness::new(Link::new(config, 1));
        for (id, size) in sizes.iter().enumerate() {
            harness.arrive(Duration::ZERO, ipv4_frame(id as u64, *size, Ecn::NotEct));
        }
        harness.finish();
        let mut bits = 0u128;
        for (departure, size) in harness.departures.iter().zip(&sizes) {
            bits += *size as u128 * 8;
            prop_assert_eq!(departure.at.as_nanos(), bits * 1_000_000_000 / u128::from(rate));
        }
    }
}
