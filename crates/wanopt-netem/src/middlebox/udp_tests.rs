//! Tests of the UDP rules (`block-udp`, `police-udp RATE`) on UDP/IPv4
//! frames beside TCP ones, on a virtual clock.

use std::time::Duration;

use super::*;
use crate::middlebox::parse_rules;

/// A UDP/IPv4 frame of `ip_len` IP bytes (at least 28).
fn udp_frame(from: ([u8; 4], u16), to: ([u8; 4], u16), ip_len: usize) -> Vec<u8> {
    let mut frame = vec![0u8; 14 + ip_len];
    frame[12..14].copy_from_slice(&[0x08, 0x00]);
    let total = (ip_len as u16).to_be_bytes();
    frame[14..34].copy_from_slice(&[
        0x45, 0, total[0], total[1], 0, 0, 0x40, 0, 64, 17, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    ]);
    frame[26..30].copy_from_slice(&from.0);
    frame[30..34].copy_from_slice(&to.0);
    Ipv4Packet::new_checked(&mut frame[14..])
        .unwrap()
        .fill_checksum();
    let udp_len = ((ip_len - 20) as u16).to_be_bytes();
    frame[34..36].copy_from_slice(&from.1.to_be_bytes());
    frame[36..38].copy_from_slice(&to.1.to_be_bytes());
    frame[38..40].copy_from_slice(&udp_len);
    frame
}

fn middlebox(rules: &str) -> Middlebox {
    Middlebox::new(parse_rules(rules).unwrap(), 1)
}

#[test]
fn block_udp_drops_udp_and_leaves_tcp_alone() {
    let mut middlebox = middlebox("block-udp");
    let mut datagram = udp_frame((CLIENT, 40000), (SERVER, 443), 1200);
    assert_eq!(middlebox.process(now(), &mut datagram), Verdict::Drop);
    let mut segment = syn();
    let before = segment.clone();
    assert_eq!(middlebox.process(now(), &mut segment), Verdict::Pass);
    assert_eq!(segment, before);
    assert_eq!(
        *middlebox.counters(),
        MiddleboxCounters {
            inspected: 1,
            udp_inspected: 1,
            udp_blocked: 1,
            ..MiddleboxCounters::default()
        }
    );
}

#[test]
fn the_port_and_address_matchers_apply_to_udp_ports_and_addresses() {
    let mut middlebox = middlebox("port 443 block-udp; address 10.0.0.9 block-udp");
    let mut verdict = |frame: &mut Vec<u8>| middlebox.process(now(), frame);
    assert_eq!(
        verdict(&mut udp_frame((CLIENT, 40000), (SERVER, 443), 100)),
        Verdict::Drop
    );
    assert_eq!(
        verdict(&mut udp_frame((SERVER, 443), (CLIENT, 40000), 100)),
        Verdict::Drop
    );
    assert_eq!(
        verdict(&mut udp_frame((CLIENT, 40000), (SERVER, 53), 100)),
        Verdict::Pass
    );
    assert_eq!(
        verdict(&mut udp_frame(([10, 0, 0, 9], 5000), (SERVER, 53), 100)),
        Verdict::Drop
    );
    // TCP to the same port is not a UDP rule's business.
    let mut https = tcp_frame((CLIENT, 40000), (SERVER, 443), 1, 0, FLAG_SYN, &[], 0);
    assert_eq!(verdict(&mut https), Verdict::Pass);
    assert_eq!(middlebox.counters().udp_blocked, 3);
}

/// `port 22 drop` is a TCP rule, as it always was: UDP to port 22 passes,
/// and a UDP rule after it still sees that datagram (first match is per
/// protocol).
#[test]
fn tcp_rules_never_match_udp() {
    let mut middlebox = middlebox("port 22 drop; port 22 block-udp");
    let mut ssh = tcp_frame((CLIENT, 40000), (SERVER, 22), 1, 0, FLAG_SYN, &[], 0);
    assert_eq!(middlebox.process(now(), &mut ssh), Verdict::Drop);
    let mut datagram = udp_frame((CLIENT, 40000), (SERVER, 22), 100);
    assert_eq!(middlebox.process(now(), &mut datagram), Verdict::Drop);
    assert_eq!(middlebox.counters().dropped, 1);
    assert_eq!(middlebox.counters().udp_blocked, 1);
    let mut only_tcp = Middlebox::new(parse_rules("port 22 drop; mss 1200").unwrap(), 1);
    let mut datagram = udp_frame((CLIENT, 40000), (SERVER, 22), 100);
    assert_eq!(only_tcp.process(now(), &mut datagram), Verdict::Pass);
    assert_eq!(only_tcp.counters().udp_inspected, 1);
}

/// What `police-udp` passes of `offered` bits per second of UDP datagrams
/// of `ip_len` bytes over `seconds` on the virtual clock: (bits per second
/// passed, datagrams policed).
fn police(rules: &str, offered: u64, ip_len: usize, seconds: u64) -> (f64, u64) {
    let mut middlebox = middlebox(rules);
    let gap = Duration::from_nanos(ip_len as u64 * 8 * 1_000_000_000 / offered);
    let count = Duration::from_secs(seconds).as_nanos() / gap.as_nanos();
    let mut passed_bytes = 0u64;
    for i in 0..count {
        let mut frame = udp_frame((CLIENT, 40000), (SERVER, 4433), ip_len);
        let at = now() + gap * i as u32;
        if middlebox.process(at, &mut frame) == Verdict::Pass {
            passed_bytes += ip_len as u64;
        }
    }
    let rate = passed_bytes as f64 * 8.0 / seconds as f64;
    (rate, middlebox.counters().udp_policed)
}

/// 10 s of 50 Mbit/s of UDP through `police-udp 2mbit` come out at 2
/// Mbit/s: the rate plus one 12.5 kB bucket over 10 s (0.5%).
#[test]
fn police_udp_passes_its_rate_of_a_flood() {
    let (rate, policed) = police("police-udp 2mbit", 50_000_000, 1250, 10);
    let error = (rate - 2e6) / 2e6;
    assert!(error.abs() < 0.02, "passed {rate} bit/s ({error:+.4})");
    assert!(
        error >= 0.0,
        "a policer never passes less than its rate: {rate}"
    );
    // 50 000 datagrams offered, about 2 000 passed.
    assert!((47_900..48_100).contains(&policed), "{policed}");
    // An explicit, deeper burst lets more through at the start only.
    let (deep, _) = police("police-udp 2mbit burst 250kb", 50_000_000, 1250, 10);
    let expected = 2e6 + 250_000.0 * 8.0 / 10.0;
    assert!((deep - expected).abs() / expected < 0.01, "{deep}");
}

/// Traffic below the rate is never policed, and TCP beside a flood of UDP
/// is not policed at all.
#[test]
fn police_udp_passes_what_fits_and_never_touches_tcp() {
    let (rate, policed) = police("police-udp 2mbit", 1_500_000, 1000, 5);
    assert_eq!(policed, 0);
    assert!((rate - 1.5e6).abs() < 1e4, "{rate}");
    let mut middlebox = middlebox("police-udp 1mbit");
    for i in 0..1000u32 {
        let at = now() + Duration::from_micros(100) * i;
        let mut segment = tcp_frame((CLIENT, 40000), (SERVER, 80), i, 0, FLAG_ACK, &[], 1400);
        assert_eq!(middlebox.process(at, &mut segment), Verdict::Pass);
    }
    assert_eq!(middlebox.counters().inspected, 1000);
    assert_eq!(middlebox.counters().udp_policed, 0);
}

/// New rules take over at once, the counters go on, and a policer starts
/// with a full bucket.
#[test]
fn rules_can_be_replaced_and_the_counters_go_on() {
    let mut middlebox = middlebox("block-udp");
    let mut datagram = udp_frame((CLIENT, 40000), (SERVER, 443), 1500);
    assert_eq!(middlebox.process(now(), &mut datagram), Verdict::Drop);
    middlebox.set_rules(parse_rules("police-udp 100kbit").unwrap());
    // 3000 bytes of bucket: two datagrams pass, the third does not.
    let verdicts: Vec<Verdict> = (0..3)
        .map(|_| middlebox.process(now(), &mut datagram))
        .collect();
    assert_eq!(verdicts, [Verdict::Pass, Verdict::Pass, Verdict::Drop]);
    middlebox.set_rules(Vec::new());
    assert_eq!(middlebox.process(now(), &mut datagram), Verdict::Pass);
    let counters = middlebox.counters();
    assert_eq!(
        (
            counters.udp_inspected,
            counters.udp_blocked,
            counters.udp_policed
        ),
        (4, 1, 1)
    );
}

/// A datagram too short for its UDP header and a non-first fragment pass
/// uninspected.
#[test]
fn truncated_datagrams_and_later_fragments_pass() {
    let mut middlebox = middlebox("block-udp");
    let mut short = udp_frame((CLIENT, 1), (SERVER, 2), 28);
    short.truncate(14 + 24);
    assert_eq!(middlebox.process(now(), &mut short), Verdict::Pass);
    let mut fragment = udp_frame((CLIENT, 1), (SERVER, 2), 100);
    fragment[14 + 7] = 0x10; // offset 16 x 8 bytes
    assert_eq!(middlebox.process(now(), &mut fragment), Verdict::Pass);
    assert_eq!(middlebox.counters().udp_inspected, 0);
}

/// Counters and rules written before the UDP rules still read.
#[test]
fn old_counters_and_rules_still_read() {
    let counters: MiddleboxCounters =
        serde_json::from_str(r#"{"inspected": 5, "rewritten": 2, "dropped": 1}"#).unwrap();
    assert_eq!((counters.inspected, counters.udp_policed), (5, 0));
    let rule: Rule = serde_json::from_str(r#"{"matches": "AnyTcp", "actions": ["Drop"]}"#).unwrap();
    assert_eq!(rule.matches, Match::Any);
    assert_eq!(rule.protocol(), Protocol::Tcp);
}
