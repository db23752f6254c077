//! Deterministic tests of the link model on a virtual clock.

use std::time::Duration;

use crate::config::{LinkConfig, QueueDiscipline, QueueLimit, RedParams};
use crate::link::test_support::{arp_frame, frame_id, ipv4_frame, ipv6_frame, Harness};
use crate::link::Link;
use crate::units::{BitsPerSecond, Probability};
use crate::wire::{frame_ecn, Ecn, FrameKind, Ipv4Packet};

fn ms(millis: u64) -> Duration {
    Duration::from_millis(millis)
}

fn shaped(rate: u64, queue: QueueLimit) -> LinkConfig {
    LinkConfig {
        rate: Some(BitsPerSecond(rate)),
        queue,
        ..LinkConfig::default()
    }
}

#[test]
fn serialization_of_n_frames_takes_exactly_n_times_bits_over_rate() {
    // 1500 IP bytes = 12 000 bits at 7 Mbit/s: 1 714 285.71... ns each, so a
    // per-frame rounding would drift by 0.71 ns per frame.
    let rate = 7_000_000u64;
    let mut harness = Harness::new(Link::new(shaped(rate, QueueLimit::Packets(10_000)), 1));
    for id in 0..1000 {
        harness.arrive(Duration::ZERO, ipv4_frame(id, 1500, Ecn::NotEct));
    }
    harness.finish();
    assert_eq!(harness.departures.len(), 1000);
    for (k, departure) in harness.departures.iter().enumerate() {
        let bits = (k as u128 + 1) * 12_000;
        let expected = bits * 1_000_000_000 / u128::from(rate);
        assert_eq!(departure.at.as_nanos(), expected, "frame {k}");
        assert_eq!(frame_id(&departure.frame), k as u64);
    }
}

#[test]
fn rate_counts_ip_bytes_not_the_ethernet_header() {
    // 1000 IP bytes at 8 Mbit/s is exactly 1 ms, although the frame is 1014 bytes.
    let mut harness = Harness::new(Link::new(shaped(8_000_000, QueueLimit::Packets(100)), 1));
    harness.arrive(ms(5), ipv4_frame(0, 1000, Ecn::NotEct));
    harness.finish();
    assert_eq!(harness.departures[0].at, ms(6));
}

#[test]
fn a_per_packet_cost_adds_to_every_frame_whatever_its_size() {
    // A firewall that forwards 703 Mbit/s of bytes and spends 1.92 us on
    // each packet: 1500 bytes take 17 069 ns + 1920, 8500 bytes 96 728 + 1920.
    let config = LinkConfig {
        per_packet: Duration::from_nanos(1920),
        ..shaped(703_000_000, QueueLimit::Packets(100))
    };
    let mut harness = Harness::new(Link::new(config, 1));
    harness.arrive(Duration::ZERO, ipv4_frame(0, 1500, Ecn::NotEct));
    harness.arrive(Duration::ZERO, ipv4_frame(1, 1500, Ecn::NotEct));
    harness.arrive(Duration::ZERO, ipv4_frame(2, 8500, Ecn::NotEct));
    harness.finish();
    let times: Vec<u128> = harness.departures.iter().map(|d| d.at.as_nanos()).collect();
    let bits_ns = |bits: u128| bits * 1_000_000_000 / 703_000_000;
    assert_eq!(
        times,
        [
            bits_ns(12_000) + 1920,
            bits_ns(24_000) + 2 * 1920,
            bits_ns(92_000) + 3 * 1920
        ]
    );
}

#[test]
fn idle_link_restarts_serialization_at_the_arrival() {
    let mut harness = Harness::new(Link::new(shaped(8_000_000, QueueLimit::Packets(100)), 1));
    harness.arrive(ms(0), ipv4_frame(0, 1000, Ecn::NotEct));
    harness.arrive(ms(10), ipv4_frame(1, 1000, Ecn::NotEct));
    harness.arrive(ms(10), ipv4_frame(2, 1000, Ecn::NotEct));
    harness.finish();
    let times: Vec<Duration> = harness.departures.iter().map(|d| d.at).collect();
    assert_eq!(times, [ms(1), ms(11), ms(12)]);
}

#[test]
fn delivered_rate_under_ten_seconds_of_overload_is_within_a_tenth_of_a_percent() {
    // Offer 200 Mbit/s (1500 IP bytes every 60 us) to a 100 Mbit/s link.
    let rate = 100_000_000u64;
    let mut harness = Harness::new(Link::new(shaped(rate, QueueLimit::Packets(100)), 1));
    let gap = Duration::from_micros(60);
    let mut at = Duration::ZERO;
    let mut id = 0;
    while at < Duration::from_secs(10) {
        harness.arrive(at, ipv4_frame(id, 1500, Ecn::NotEct));
        at += gap;
        id += 1;
    }
    harness.run_until(Duration::from_secs(10));
    let ip_bits: u64 = harness
        .departures
        .iter()
        .map(|d| (d.frame.len() as u64 - 14) * 8)
        .sum();
    let delivered_rate = ip_bits as f64 / 10.0;
    let error = (delivered_rate - rate as f64).abs() / rate as f64;
    assert!(error < 0.001, "delivered {delivered_rate} bit/s");
    assert!(harness.link.counters().dropped_queue > 80_000);
}

#[test]
fn one_way_delay_is_exact_and_never_early() {
    let config = LinkConfig {
        delay: Duration::from_micros(37_500),
        ..LinkConfig::default()
    };
    let mut link = Link::new(config, 1);
    let mut harness = Harness::new(Link::new(LinkConfig::default(), 1));
    let base = harness.base;
    link.handle_frame(base + ms(3), ipv4_frame(7, 100, Ecn::NotEct));
    let due = base + Duration::from_micros(40_500);
    assert_eq!(link.poll_timeout(), Some(due));
    assert_eq!(link.poll_transmit(due - Duration::from_nanos(1)), None);
    let frame = link.poll_transmit(due).unwrap();
    assert_eq!(frame_id(&frame), 7);
    assert_eq!(link.poll_transmit(due), None);
    assert_eq!(link.poll_timeout(), None);

    // A perfect link delivers at the arrival instant.
    harness.arrive(ms(2), ipv4_frame(1, 100, Ecn::NotEct));
    harness.finish();
    assert_eq!(harness.departures[0].at, ms(2));
}

#[test]
fn shaper_then_delay_line() {
    let config = LinkConfig {
        delay: ms(50),
        ..shaped(8_000_000, QueueLimit::Packets(100))
    };
    let mut harness = Harness::new(Link::new(config, 1));
    harness.arrive(ms(0), ipv4_frame(0, 1000, Ecn::NotEct));
    harness.arrive(ms(0), ipv4_frame(1, 1000, Ecn::NotEct));
    harness.finish();
    let times: Vec<Duration> = harness.departures.iter().map(|d| d.at).collect();
    assert_eq!(times, [ms(51), ms(52)]);
}

#[test]
fn queue_drops_exactly_when_the_packet_limit_would_be_exceeded() {
    let config = LinkConfig {
        delay: ms(100),
        ..shaped(8_000_000, QueueLimit::Packets(10))
    };
    let mut harness = Harness::new(Link::new(config, 1));
    for id in 0..15 {
        harness.arrive(ms(0), ipv4_frame(id, 1000, Ecn::NotEct));
    }
    let counters = harness.link.counters().clone();
    assert_eq!(counters.queue_frames, 10);
    assert_eq!(counters.dropped_queue, 5);
    // After 1 ms the first frame is serialized (it is now in the delay line,
    // which the limit does not count), so exactly one more fits.
    harness.arrive(ms(1), ipv4_frame(100, 1000, Ecn::NotEct));
    harness.arrive(ms(1), ipv4_frame(101, 1000, Ecn::NotEct));
    assert_eq!(harness.link.counters().dropped_queue, 6);
    assert_eq!(harness.link.counters().queue_frames, 10);
    harness.finish();
    assert_eq!(
        harness.ids(),
        [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 100],
        "the first ten and the one that fit later"
    );
}

#[test]
fn queue_drops_exactly_when_the_byte_limit_would_be_exceeded() {
    let mut harness = Harness::new(Link::new(shaped(8_000_000, QueueLimit::Bytes(3000)), 1));
    for id in 0..3 {
        harness.arrive(ms(0), ipv4_frame(id, 1000, Ecn::NotEct));
    }
    assert_eq!(harness.link.counters().queue_bytes, 3000);
    assert_eq!(harness.link.counters().dropped_queue, 0);
    harness.arrive(ms(0), ipv4_frame(3, 28, Ecn::NotEct));
    assert_eq!(harness.link.counters().dropped_queue, 1);
    assert_eq!(harness.link.counters().max_queue_bytes, 3000);
    // At 1 ms the first frame has left the shaper: 1000 bytes fit, 1001 do not.
    harness.arrive(ms(1), ipv4_frame(4, 1001, Ecn::NotEct));
    assert_eq!(harness.link.counters().dropped_queue, 2);
    harness.arrive(ms(1), ipv4_frame(5, 1000, Ecn::NotEct));
    assert_eq!(harness.link.counters().dropped_queue, 2);
    assert_eq!(harness.link.counters().queue_bytes, 3000);
}

#[test]
fn bdp_queue_limit_is_resolved_at_construction() {
    let config = LinkConfig {
        rate: Some(BitsPerSecond(250_000_000)),
        queue: QueueLimit::Bdp(2.0),
        ..LinkConfig::from_rtt(ms(100))
    };
    let link = Link::new(config, 1);
    assert_eq!(
        link.queue_limit(),
        Some(crate::ResolvedQueueLimit::Bytes(6_250_000))
    );
    assert_eq!(Link::new(LinkConfig::default(), 1).queue_limit(), None);
}

fn red_link() -> Harness {
    let config = LinkConfig {
        discipline: QueueDiscipline::Red(RedParams::default()),
        ..shaped(1_000_000, QueueLimit::Packets(100))
    };
    Harness::new(Link::new(config, 1))
}

#[test]
fn red_marks_ect_frames_and_drops_non_ect_frames_above_the_threshold() {
    let mut harness = red_link();
    // Below the minimum threshold (25 packets) nothing is touched.
    for id in 0..25 {
        harness.arrive(ms(0), ipv4_frame(id, 1000, Ecn::NotEct));
    }
    assert_eq!(harness.link.counters().dropped_red, 0);
    // Fill to the maximum threshold (75 packets) with ECT frames.
    for id in 25..75 {
        harness.arrive(ms(0), ipv4_frame(id, 1000, Ecn::Ect0));
    }
    let marked_on_the_ramp = harness.link.counters().ce_marked;
    assert!(marked_on_the_ramp > 0 && marked_on_the_ramp < 50);
    // At or above max_th: every ECT frame is marked, every non-ECT one dropped.
    harness.arrive(ms(0), ipv4_frame(1000, 1000, Ecn::Ect0));
    harness.arrive(ms(0), ipv4_frame(1001, 1000, Ecn::NotEct));
    harness.arrive(ms(0), ipv6_frame(1002, 1000, Ecn::Ect1));
    harness.arrive(ms(0), ipv4_frame(1003, 1000, Ecn::Ce));
    let counters = harness.link.counters().clone();
    assert_eq!(counters.ce_marked, marked_on_the_ramp + 3);
    assert_eq!(counters.dropped_red, 1);
    assert_eq!(counters.dropped_queue, 0);
    harness.finish();
    let marked = harness
        .departures
        .iter()
        .find(|d| {
            FrameKind::of(&d.frame) != FrameKind::Ipv6 { offset: 14 } && frame_id(&d.frame) == 1000
        })
        .unwrap();
    let packet = Ipv4Packet::new_checked(&marked.frame[14..]).unwrap();
    assert_eq!(packet.ecn(), Ecn::Ce);
    assert!(packet.verify_checksum());
    let ipv6 = harness
        .departures
        .iter()
        .find(|d| FrameKind::of(&d.frame) == FrameKind::Ipv6 { offset: 14 })
        .unwrap();
    assert_eq!(
        frame_ecn(&ipv6.frame, FrameKind::Ipv6 { offset: 14 }),
        Some(Ecn::Ce)
    );
    assert!(harness
        .departures
        .iter()
        .all(|d| frame_id(&d.frame) != 1001));
}

#[test]
fn red_queue_still_drops_everything_above_the_hard_limit() {
    let mut harness = red_link();
    for id in 0..120 {
        harness.arrive(ms(0), ipv4_frame(id, 1000, Ecn::Ect0));
    }
    let counters = harness.link.counters();
    assert_eq!(counters.queue_frames, 100);
    assert_eq!(counters.dropped_queue, 20);
    assert_eq!(counters.dropped_red, 0);
}

#[test]
fn non_ip_frames_are_never_lost_queued_or_shaped() {
    let config = LinkConfig {
        loss: Probability::ONE,
        delay: ms(10),
        discipline: QueueDiscipline::Red(RedParams::default()),
        ..shaped(1_000, QueueLimit::Packets(1))
    };
    let mut harness = Harness::new(Link::new(config, 1));
    for k in 0..5 {
        harness.arrive(ms(k), arp_frame());
    }
    harness.arrive(ms(5), vec![0u8; 3]); // a runt
    harness.finish();
    let times: Vec<Duration> = harness.departures.iter().map(|d| d.at).collect();
    assert_eq!(times, [ms(10), ms(11), ms(12), ms(13), ms(14), ms(15)]);
    let counters = harness.link.counters();
    assert_eq!(counters.non_ip, 6);
    assert_eq!(counters.dropped(), 0);
    assert_eq!(counters.max_queue_bytes, 0);
}

#[test]
fn counters_balance_and_empty_out() {
    let config = LinkConfig {
        delay: ms(20),
        loss: Probability::from_percent(10.0).unwrap(),
        duplicate: Probability::from_percent(10.0).unwrap(),
        ..shaped(10_000_000, QueueLimit::Packets(20))
    };
    let mut harness = Harness::new(Link::new(config, 9));
    for id in 0..2000 {
        harness.arrive(
            Duration::from_micros(id * 300),
            ipv4_frame(id, 1500, Ecn::NotEct),
        );
        let c = harness.link.counters();
        assert_eq!(
            c.frames_in + c.duplicated,
            c.frames_out + c.dropped() + c.frames_in_flight
        );
    }
    harness.finish();
    let c = harness.link.counters();
    assert_eq!(c.frames_in_flight, 0);
    assert_eq!(c.frames_out, harness.departures.len() as u64);
    assert_eq!(c.frames_in + c.duplicated, c.frames_out + c.dropped());
    assert_eq!(
        c.bytes_out,
        harness
            .departures
            .iter()
            .map(|d| d.frame.len() as u64)
            .sum::<u64>()
    );
    assert_eq!(c.bytes_in, 2000 * 1514);
    assert!(c.dropped_queue > 0 && c.dropped_loss > 0 && c.duplicated > 0);
}

#[test]
fn no_output_before_any_input() {
    let mut link = Link::new(LinkConfig::default(), 1);
    assert_eq!(link.poll_timeout(), None);
    assert_eq!(link.poll_transmit(std::time::Instant::now()), None);
}

#[test]
fn vlan_tagged_ip_frames_are_shaped_on_their_ip_bytes() {
    // 1000 IP bytes behind a 14-byte header and an 802.1Q tag: 1 ms at 8 Mbit/s.
    let mut frame = ipv4_frame(0, 1000, Ecn::NotEct);
    frame.splice(12..12, [0x81, 0x00, 0x00, 0x05]);
    assert_eq!(FrameKind::of(&frame), FrameKind::Ipv4 { offset: 18 });
    let mut harness = Harness::new(Link::new(shaped(8_000_000, QueueLimit::Bytes(1000)), 1));
    harness.arrive(ms(0), frame);
    harness.finish();
    assert_eq!(harness.departures[0].at, ms(1));
    assert_eq!(harness.link.counters().max_queue_bytes, 1000);
}

#[test]
fn the_peak_counts_what_arrived_in_the_burstiest_100_ms_lost_or_not() {
    // 1000-byte IP packets every 1 ms (8 Mbit/s) with 1% loss, then a
    // burst of 20 more within the 100 ms that ends at the 150th.
    let config = LinkConfig {
        loss: Probability::from_percent(1.0).unwrap(),
        ..shaped(50_000_000, QueueLimit::Packets(1000))
    };
    let mut harness = Harness::new(Link::new(config, 3));
    for id in 0..300 {
        harness.arrive(ms(id), ipv4_frame(id, 1000, Ecn::NotEct));
        if id == 150 {
            for extra in 0..20 {
                harness.arrive(ms(id), ipv4_frame(1000 + extra, 1000, Ecn::NotEct));
            }
        }
    }
    harness.arrive(ms(301), arp_frame());
    harness.finish();
    let counters = harness.link.counters();
    assert!(counters.dropped_loss > 0);
    // 100 packets of the steady stream (51..=150) and the 20 of the burst;
    // Ethernet headers and the ARP frame are not counted.
    assert_eq!(counters.peak_ip_bytes_100ms, 120 * 1000);
}
