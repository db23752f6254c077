//! The link with a capacity that follows a trace, on a virtual clock.

use std::time::Duration;

use crate::config::{LinkConfig, QueueLimit};
use crate::link::test_support::{ipv4_frame, Harness};
use crate::link::Link;
use crate::trace::DeliveryTrace;
use crate::units::BitsPerSecond;
use crate::wire::Ecn;

fn ms(millis: u64) -> Duration {
    Duration::from_millis(millis)
}

fn traced(text: &str, queue: QueueLimit, delay: Duration) -> Link {
    let config = LinkConfig {
        trace: Some(DeliveryTrace::parse(text).unwrap_or_else(|e| panic!("{e}"))),
        // A rate beside a trace is not used.
        rate: Some(BitsPerSecond(1_000)),
        queue,
        delay,
        ..LinkConfig::default()
    };
    Link::new(config, 1)
}

fn times(harness: &Harness) -> Vec<Duration> {
    harness.departures.iter().map(|d| d.at).collect()
}

#[test]
fn full_packets_leave_one_per_opportunity_after_the_delay() {
    let mut harness = Harness::new(traced("1", QueueLimit::Packets(100), ms(30)));
    for id in 0..5 {
        harness.arrive(Duration::ZERO, ipv4_frame(id, 1500, Ecn::NotEct));
    }
    harness.finish();
    assert_eq!(times(&harness), [ms(31), ms(32), ms(33), ms(34), ms(35)]);
    assert_eq!(harness.ids(), [0, 1, 2, 3, 4]);
}

#[test]
fn small_packets_share_an_opportunity_and_large_ones_span_two() {
    let mut harness = Harness::new(traced("1", QueueLimit::Packets(100), Duration::ZERO));
    for id in 0..3 {
        harness.arrive(Duration::ZERO, ipv4_frame(id, 500, Ecn::NotEct));
    }
    // 1000 bytes: 1500 - 3 x 500 = 0 left at 1 ms, so it takes 2 ms.
    harness.arrive(Duration::ZERO, ipv4_frame(3, 1000, Ecn::NotEct));
    harness.finish();
    assert_eq!(times(&harness), [ms(1), ms(1), ms(1), ms(2)]);
}

#[test]
fn an_outage_holds_the_queue_and_unused_opportunities_are_lost() {
    // Opportunities every ms for 100 ms, none until 400 ms, period 400 ms.
    let text: String = (1..=100)
        .map(|t| format!("{t}\n"))
        .chain(["400\n".to_string()])
        .collect();
    let mut harness = Harness::new(traced(&text, QueueLimit::Packets(100), Duration::ZERO));
    // The link's clock starts with its first frame.
    harness.arrive(Duration::ZERO, ipv4_frame(0, 1500, Ecn::NotEct));
    harness.arrive(ms(150), ipv4_frame(1, 1500, Ecn::NotEct));
    harness.arrive(ms(150), ipv4_frame(2, 1500, Ecn::NotEct));
    // The opportunities of 101-399 ms came while the queue was empty.
    harness.arrive(ms(420), ipv4_frame(3, 1500, Ecn::NotEct));
    harness.finish();
    assert_eq!(times(&harness), [ms(1), ms(400), ms(401), ms(421)]);
}

#[test]
fn the_queue_limit_holds_while_the_trace_is_slow() {
    let mut harness = Harness::new(traced("10", QueueLimit::Bytes(4_500), Duration::ZERO));
    for id in 0..5 {
        harness.arrive(Duration::ZERO, ipv4_frame(id, 1500, Ecn::NotEct));
    }
    harness.finish();
    assert_eq!(harness.ids(), [0, 1, 2]);
    assert_eq!(harness.link.counters().dropped_queue, 2);
    assert_eq!(times(&harness), [ms(10), ms(20), ms(30)]);
}

#[test]
fn a_saturated_link_delivers_the_traces_mean_rate() {
    // 3 opportunities in 4 ms, then 1 in 6 ms: 4 x 1500 bytes per 10 ms.
    let mut harness = Harness::new(traced("1\n2\n2\n10", QueueLimit::Packets(1_000), ms(5)));
    assert_eq!(
        harness.link.config().capacity(),
        Some(BitsPerSecond(4_800_000))
    );
    let mut id = 0;
    for tick in 0..2_000u64 {
        // 10 packets offered every 10 ms: always more than the trace carries.
        if tick % 10 == 0 {
            for _ in 0..10 {
                harness.arrive(ms(tick), ipv4_frame(id, 1500, Ecn::NotEct));
                id += 1;
            }
        }
    }
    harness.run_until(ms(2_000));
    // 200 periods of 4 opportunities, less the last one's delay (5 ms).
    let delivered = harness.departures.len();
    assert!((796..=800).contains(&delivered), "{delivered}");
}

#[test]
fn the_queue_is_counted_by_the_time_it_was_held() {
    let mut harness = Harness::new(traced("1", QueueLimit::Packets(100), Duration::ZERO));
    for id in 0..10 {
        harness.arrive(Duration::ZERO, ipv4_frame(id, 1500, Ecn::NotEct));
    }
    harness.run_until(ms(20));
    harness.arrive(ms(20), ipv4_frame(10, 1500, Ecn::NotEct));
    let counters = harness.link.counters();
    let held = &counters.queue_bytes_time;
    // 15 000 bytes for 1 ms, 13 500 for the next, ... 1500, then 10 ms empty.
    assert_eq!(held.total(), 20_000_000);
    assert_eq!(held.quantile(0.4), Some(0));
    let top = held.quantile(1.0).unwrap_or(0);
    assert!((14_336..=15_000).contains(&top), "{top}");
    // The k-th packet waited k ms.
    let waits = &counters.queue_delay_ns;
    assert_eq!(waits.total(), 11);
    let longest = waits.quantile(1.0).unwrap_or(0);
    assert!((9_437_184..=10_000_000).contains(&longest), "{longest}");
}
