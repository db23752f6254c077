//! Tests of the middlebox rules on real-looking TCP/IPv4 and UDP/IPv4
//! frames.

use std::sync::OnceLock;
use std::time::Instant;

use proptest::prelude::*;

use super::*;
use crate::wire::tcp::{FLAG_ACK, FLAG_CWR, FLAG_ECE, FLAG_SYN};
use crate::wire::TcpSegment;

const CLIENT: [u8; 4] = [10, 0, 0, 1];
const SERVER: [u8; 4] = [10, 0, 0, 2];

/// The start of the virtual clock: TCP rules ignore the time.
fn now() -> Instant {
    static START: OnceLock<Instant> = OnceLock::new();
    *START.get_or_init(Instant::now)
}

/// A TCP/IPv4 frame with the given options (padded to 4 bytes with END),
/// valid checksums, and `payload_len` bytes of payload.
fn tcp_frame(
    from: ([u8; 4], u16),
    to: ([u8; 4], u16),
    sequence: u32,
    acknowledgment: u32,
    flags: u8,
    options: &[u8],
    payload_len: usize,
) -> Vec<u8> {
    let options_len = options.len().div_ceil(4) * 4;
    let tcp_len = 20 + options_len + payload_len;
    let ip_len = 20 + tcp_len;
    let mut frame = vec![0u8; 14 + ip_len];
    frame[12..14].copy_from_slice(&[0x08, 0x00]);
    let total = (ip_len as u16).to_be_bytes();
    frame[14..34].copy_from_slice(&[
        0x45, 0x02, total[0], total[1], 0, 0, 0x40, 0, 64, 6, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    ]);
    frame[26..30].copy_from_slice(&from.0);
    frame[30..34].copy_from_slice(&to.0);
    Ipv4Packet::new_checked(&mut frame[14..])
        .unwrap()
        .fill_checksum();
    let tcp = &mut frame[34..];
    tcp[0..2].copy_from_slice(&from.1.to_be_bytes());
    tcp[2..4].copy_from_slice(&to.1.to_be_bytes());
    tcp[4..8].copy_from_slice(&sequence.to_be_bytes());
    tcp[8..12].copy_from_slice(&acknowledgment.to_be_bytes());
    tcp[12] = (((20 + options_len) / 4) as u8) << 4;
    tcp[13] = flags;
    tcp[14..16].copy_from_slice(&64240u16.to_be_bytes());
    tcp[20..20 + options.len()].copy_from_slice(options);
    for (i, byte) in tcp[20 + options_len..].iter_mut().enumerate() {
        *byte = i as u8;
    }
    TcpSegment::new_checked(&mut frame[34..])
        .unwrap()
        .fill_checksum_v4(from.0, to.0);
    frame
}

/// A Linux-like SYN: MSS 1460, SACK permitted, timestamps, NOP, wscale 7.
fn syn() -> Vec<u8> {
    let options = [
        2, 4, 0x05, 0xb4, 4, 2, 8, 10, 0, 0, 0, 1, 0, 0, 0, 0, 1, 3, 3, 7,
    ];
    tcp_frame(
        (CLIENT, 40000),
        (SERVER, 80),
        1000,
        0,
        FLAG_SYN | FLAG_ECE | FLAG_CWR,
        &options,
        0,
    )
}

fn tcp(frame: &[u8]) -> TcpSegment<&[u8]> {
    TcpSegment::new_checked(&frame[34..]).unwrap()
}

fn checksums_valid(frame: &[u8]) -> bool {
    let ip = Ipv4Packet::new_checked(&frame[14..]).unwrap();
    ip.verify_checksum() && tcp(frame).verify_checksum_v4(ip.source(), ip.destination())
}

fn one_rule(actions: Vec<Action>) -> Middlebox {
    Middlebox::new(
        vec![Rule {
            after_queue: false,
            matches: Match::Any,
            actions,
        }],
        7,
    )
}

#[test]
fn strip_sack_permitted_leaves_nops_and_a_valid_checksum() {
    let mut frame = syn();
    assert!(checksums_valid(&frame));
    let verdict = one_rule(vec![Action::StripSackPermitted]).process(now(), &mut frame);
    assert_eq!(verdict, Verdict::Rewritten);
    assert_eq!(&tcp(&frame).options()[4..6], &[1, 1]);
    assert_eq!(&tcp(&frame).options()[..4], &[2, 4, 0x05, 0xb4]);
    assert!(checksums_valid(&frame));
    let kinds: Vec<u8> = tcp(&frame).parse_options().map(|o| o.kind).collect();
    assert!(!kinds.contains(&tcp::kind::SACK_PERMITTED));
}

#[test]
fn window_scale_can_be_stripped_or_changed() {
    let mut frame = syn();
    one_rule(vec![Action::StripWindowScale]).process(now(), &mut frame);
    assert_eq!(&tcp(&frame).options()[17..20], &[1, 1, 1]);
    assert!(checksums_valid(&frame));
    let mut frame = syn();
    one_rule(vec![Action::SetWindowScale(2)]).process(now(), &mut frame);
    assert_eq!(&tcp(&frame).options()[17..20], &[3, 3, 2]);
    assert!(checksums_valid(&frame));
}

#[test]
fn mss_is_clamped_only_when_above_the_limit() {
    let mut frame = syn();
    assert_eq!(
        one_rule(vec![Action::ClampMss(1200)]).process(now(), &mut frame),
        Verdict::Rewritten
    );
    assert_eq!(&tcp(&frame).options()[..4], &[2, 4, 0x04, 0xb0]);
    assert!(checksums_valid(&frame));
    let before = frame.clone();
    assert_eq!(
        one_rule(vec![Action::ClampMss(1300)]).process(now(), &mut frame),
        Verdict::Pass
    );
    assert_eq!(frame, before);
}

#[test]
fn ecn_bleaching_clears_ip_and_tcp_bits() {
    let mut frame = syn();
    one_rule(vec![Action::BleachIpEcn, Action::BleachTcpEcn]).process(now(), &mut frame);
    let ip = Ipv4Packet::new_checked(&frame[14..]).unwrap();
    assert_eq!(ip.ecn(), Ecn::NotEct);
    assert_eq!(tcp(&frame).flags(), FLAG_SYN);
    assert!(checksums_valid(&frame));
}

/// `frame` with its IP ECN field set to `ecn` (the header checksum kept).
fn with_ecn(mut frame: Vec<u8>, ecn: Ecn) -> Vec<u8> {
    Ipv4Packet::new_checked(&mut frame[14..])
        .unwrap()
        .set_ecn(ecn);
    frame
}

fn ecn_of(frame: &[u8]) -> Ecn {
    Ipv4Packet::new_checked(&frame[14..]).unwrap().ecn()
}

/// A data segment from the server, ECN field ECT(0) as Linux sends them.
fn data() -> Vec<u8> {
    tcp_frame(
        (SERVER, 80),
        (CLIENT, 40000),
        5000,
        1001,
        FLAG_ACK,
        &[],
        100,
    )
}

#[test]
fn ecn_setup_syns_are_dropped_and_nothing_else() {
    let mut middlebox = one_rule(vec![Action::BlockEcnSetup, Action::ClampMss(1200)]);
    assert_eq!(middlebox.process(now(), &mut syn()), Verdict::Drop);
    // The retried SYN without ECE and CWR passes (and gets the rule's
    // other actions), as do an ECN-setup SYN-ACK and data with ECE.
    let mut retry = syn();
    retry[34 + 13] = FLAG_SYN;
    TcpSegment::new_checked(&mut retry[34..])
        .unwrap()
        .fill_checksum_v4(CLIENT, SERVER);
    assert_eq!(middlebox.process(now(), &mut retry), Verdict::Rewritten);
    assert_eq!(&tcp(&retry).options()[..4], &[2, 4, 0x04, 0xb0]);
    let mut syn_ack = tcp_frame(
        (SERVER, 80),
        (CLIENT, 40000),
        9000,
        1001,
        FLAG_SYN | FLAG_ACK | FLAG_ECE,
        &[],
        0,
    );
    assert_eq!(middlebox.process(now(), &mut syn_ack), Verdict::Pass);
    let mut echo = tcp_frame(
        (CLIENT, 40000),
        (SERVER, 80),
        1001,
        5100,
        FLAG_ACK | FLAG_ECE,
        &[],
        0,
    );
    assert_eq!(middlebox.process(now(), &mut echo), Verdict::Pass);
    assert_eq!(middlebox.counters().dropped, 1);
}

#[test]
fn set_ce_marks_only_ecn_capable_packets() {
    let mut middlebox = one_rule(vec![Action::SetCe]);
    for (before, after) in [
        (Ecn::Ect0, Ecn::Ce),
        (Ecn::Ect1, Ecn::Ce),
        (Ecn::Ce, Ecn::Ce),
        (Ecn::NotEct, Ecn::NotEct),
    ] {
        let mut frame = with_ecn(data(), before);
        let verdict = middlebox.process(now(), &mut frame);
        assert_eq!(ecn_of(&frame), after, "{before:?}");
        assert_eq!(verdict == Verdict::Rewritten, before != after);
        assert!(checksums_valid(&frame));
    }
}

#[test]
fn clear_ce_hides_marks_and_rewrite_ecn_overwrites_every_field() {
    let mut frame = with_ecn(data(), Ecn::Ce);
    assert_eq!(
        one_rule(vec![Action::ClearCe]).process(now(), &mut frame),
        Verdict::Rewritten
    );
    assert_eq!(ecn_of(&frame), Ecn::Ect0);
    assert!(checksums_valid(&frame));
    let mut frame = with_ecn(data(), Ecn::Ect1);
    assert_eq!(
        one_rule(vec![Action::ClearCe]).process(now(), &mut frame),
        Verdict::Pass
    );
    for to in [Ecn::NotEct, Ecn::Ect0, Ecn::Ect1, Ecn::Ce] {
        // The Not-ECT SYN is rewritten too: `rewrite-ecn ce` marks it.
        let mut frame = with_ecn(syn(), Ecn::NotEct);
        one_rule(vec![Action::RewriteEcn(to)]).process(now(), &mut frame);
        assert_eq!(ecn_of(&frame), to);
        assert!(checksums_valid(&frame));
    }
}

#[test]
fn sequence_randomization_is_undone_on_the_way_back() {
    // Two middleboxes with the same seed, one per direction, like the lab.
    let rules = vec![Rule {
        after_queue: false,
        matches: Match::Port(80),
        actions: vec![Action::RandomizeSequence { rewrite_sack: true }],
    }];
    let mut up = Middlebox::new(rules.clone(), 99);
    let mut down = Middlebox::new(rules, 99);
    let mut request = tcp_frame(
        (CLIENT, 40000),
        (SERVER, 80),
        5000,
        9000,
        FLAG_ACK,
        &[],
        100,
    );
    up.process(now(), &mut request);
    let seen_by_server = tcp(&request).sequence();
    assert_ne!(seen_by_server, 5000);
    assert!(checksums_valid(&request));
    let server_sequence = 70_000u32;
    // The server acknowledges what it saw and SACKs a later block.
    let left = seen_by_server.wrapping_add(200);
    let right = seen_by_server.wrapping_add(300);
    let mut sack = vec![1, 1, 5, 10];
    sack.extend_from_slice(&left.to_be_bytes());
    sack.extend_from_slice(&right.to_be_bytes());
    let mut reply = tcp_frame(
        (SERVER, 80),
        (CLIENT, 40000),
        server_sequence,
        seen_by_server.wrapping_add(100),
        FLAG_ACK,
        &sack,
        0,
    );
    down.process(now(), &mut reply);
    assert!(checksums_valid(&reply));
    assert_eq!(tcp(&reply).acknowledgment(), 5100);
    let view = tcp(&reply);
    assert_eq!(&view.options()[4..8], &5200u32.to_be_bytes());
    assert_eq!(&view.options()[8..12], &5300u32.to_be_bytes());
    assert_ne!(tcp(&reply).sequence(), server_sequence);
}

#[test]
fn sequence_randomization_without_sack_rewriting_breaks_sack() {
    let mut middlebox = one_rule(vec![Action::RandomizeSequence {
        rewrite_sack: false,
    }]);
    let mut sack = vec![1, 1, 5, 10];
    sack.extend_from_slice(&1200u32.to_be_bytes());
    sack.extend_from_slice(&1300u32.to_be_bytes());
    let mut reply = tcp_frame((SERVER, 80), (CLIENT, 40000), 1, 1100, FLAG_ACK, &sack, 0);
    middlebox.process(now(), &mut reply);
    assert_ne!(tcp(&reply).acknowledgment(), 1100);
    assert_eq!(&tcp(&reply).options()[4..8], &1200u32.to_be_bytes());
    assert!(checksums_valid(&reply));
}

#[test]
fn first_matching_rule_wins() {
    let mut middlebox = Middlebox::new(
        vec![
            Rule {
                after_queue: false,
                matches: Match::Port(80),
                actions: vec![Action::StripSackPermitted],
            },
            Rule {
                after_queue: false,
                matches: Match::Any,
                actions: vec![Action::ClampMss(1200)],
            },
        ],
        1,
    );
    let mut frame = syn();
    middlebox.process(now(), &mut frame);
    assert_eq!(&tcp(&frame).options()[..6], &[2, 4, 0x05, 0xb4, 1, 1]);
    let mut other = tcp_frame(
        (CLIENT, 1),
        (SERVER, 2),
        0,
        0,
        FLAG_SYN,
        &[2, 4, 5, 0xb4, 4, 2],
        0,
    );
    middlebox.process(now(), &mut other);
    assert_eq!(&tcp(&other).options()[..6], &[2, 4, 0x04, 0xb0, 4, 2]);
    assert_eq!(middlebox.counters().rewritten, 2);
}

#[test]
fn drop_rules_drop_and_other_traffic_passes() {
    let mut middlebox = Middlebox::new(
        vec![Rule {
            after_queue: false,
            matches: Match::Address(Ipv4Addr::from(SERVER)),
            actions: vec![Action::Drop],
        }],
        1,
    );
    assert_eq!(middlebox.process(now(), &mut syn()), Verdict::Drop);
    let mut udp = syn();
    udp[14 + 9] = 17;
    assert_eq!(middlebox.process(now(), &mut udp), Verdict::Pass);
    assert_eq!(middlebox.process(now(), &mut syn()[..40]), Verdict::Pass);
    assert_eq!(middlebox.process(now(), &mut []), Verdict::Pass);
    assert_eq!(middlebox.counters().dropped, 1);
}

fn udp_action_strategy() -> impl Strategy<Value = Action> {
    prop_oneof![
        Just(Action::BlockUdp),
        (1u64..1 << 40, 0u64..1 << 24).prop_map(|(rate, burst_bytes)| Action::PoliceUdp {
            rate: BitsPerSecond(rate),
            burst_bytes,
        }),
    ]
}

fn action_strategy() -> impl Strategy<Value = Action> {
    prop_oneof![
        Just(Action::StripSackPermitted),
        Just(Action::StripWindowScale),
        any::<u8>().prop_map(Action::SetWindowScale),
        any::<u16>().prop_map(Action::ClampMss),
        any::<bool>().prop_map(|rewrite_sack| Action::RandomizeSequence { rewrite_sack }),
        Just(Action::BleachIpEcn),
        Just(Action::BleachTcpEcn),
        Just(Action::BlockEcnSetup),
        Just(Action::SetCe),
        Just(Action::ClearCe),
        (0u8..4).prop_map(|bits| Action::RewriteEcn(Ecn::from_bits(bits))),
    ]
}

proptest! {
    #[test]
    fn rewrites_keep_checksums_valid_and_lengths_unchanged(
        actions in prop::collection::vec(action_strategy(), 0..6),
        options in prop::collection::vec(any::<u8>(), 0..40),
        flags in any::<u8>(),
        payload_len in 0usize..64,
        sequence in any::<u32>(),
        acknowledgment in any::<u32>(),
        seed in any::<u64>(),
    ) {
        let mut frame = tcp_frame((CLIENT, 40000), (SERVER, 80), sequence, acknowledgment, flags, &options, payload_len);
        let length = frame.len();
        let mut middlebox = Middlebox::new(vec![Rule { matches: Match::Any, actions, after_queue: false }], seed);
        middlebox.process(now(), &mut frame);
        prop_assert_eq!(frame.len(), length);
        prop_assert!(checksums_valid(&frame));
    }

    #[test]
    fn arbitrary_bytes_never_panic(
        mut bytes in prop::collection::vec(any::<u8>(), 0..200),
        actions in prop::collection::vec(action_strategy(), 0..6),
        udp_actions in prop::collection::vec(udp_action_strategy(), 0..3),
        udp in any::<bool>(),
    ) {
        if bytes.len() > 14 {
            bytes[12] = 0x08;
            bytes[13] = 0x00;
            bytes[14] = 0x40 | (bytes[14] & 0x0f);
        }
        if bytes.len() > 23 {
            bytes[23] = if udp { 17 } else { 6 };
        }
        let rules = vec![
            Rule { matches: Match::Port(53), actions: udp_actions, after_queue: false },
            Rule { matches: Match::Any, actions, after_queue: false },
        ];
        let mut middlebox = Middlebox::new(rules, 3);
        let _ = middlebox.process(now(), &mut bytes);
    }
}

#[path = "udp_tests.rs"]
mod udp_tests;
