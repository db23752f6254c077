//! Feeds arbitrary frames through the middlebox rules (TCP rewrites, UDP
//! blocking and policing) and a congested link with RED/ECN marking, loss,
//! duplication, jitter and reordering: nothing may panic, every frame in
//! must be accounted for, and no frame may leave before it arrived.
//!
//! Input: one knob byte, then records of `gap (1 byte, x10 us)`,
//! `length (2 bytes, big-endian, mod 2048)` and that many frame bytes.
#![no_main]

use std::time::{Duration, Instant};

use libfuzzer_sys::fuzz_target;
use wanopt_netem::middlebox::{Action, Match, Middlebox, Rule, Verdict};
use wanopt_netem::wire::{frame_ecn, Ecn, FrameKind};
use wanopt_netem::{
    BitsPerSecond, Link, LinkConfig, Probability, QueueDiscipline, QueueLimit, RedParams,
};

fn rules(knobs: u8) -> Vec<Rule> {
    vec![
        Rule {
            matches: Match::Port(u16::from(knobs)),
            actions: vec![Action::Drop],
            after_queue: false,
        },
        Rule {
            matches: Match::Port(u16::from(knobs).wrapping_add(1)),
            actions: vec![Action::BlockEcnSetup, Action::SetCe, Action::ClearCe],
            after_queue: false,
        },
        Rule {
            matches: Match::Port(u16::from(knobs).wrapping_add(2)),
            actions: vec![Action::BlockUdp],
            after_queue: false,
        },
        Rule {
            matches: Match::Address([10, 0, 0, knobs].into()),
            actions: vec![Action::PoliceUdp {
                rate: BitsPerSecond(8_000 + u64::from(knobs) * 40_000),
                burst_bytes: 1500 + u64::from(knobs) * 10,
            }],
            after_queue: false,
        },
        Rule {
            matches: Match::Any,
            after_queue: false,
            actions: vec![
                Action::StripSackPermitted,
                Action::SetWindowScale(knobs & 0x0f),
                Action::ClampMss(536),
                Action::RandomizeSequence {
                    rewrite_sack: knobs & 1 == 0,
                },
                Action::StripWindowScale,
                Action::BleachTcpEcn,
                Action::BleachIpEcn,
                Action::RewriteEcn(Ecn::from_bits(knobs >> 6)),
            ],
        },
    ]
}

fn config(knobs: u8) -> LinkConfig {
    let percent = |p: f64| Probability::from_percent(p).unwrap_or(Probability::ZERO);
    LinkConfig {
        rate: Some(BitsPerSecond(100_000 + u64::from(knobs) * 100_000)),
        queue: if knobs & 1 == 0 {
            QueueLimit::Packets(8)
        } else {
            QueueLimit::Bytes(6000)
        },
        delay: Duration::from_micros(u64::from(knobs >> 4) * 100),
        jitter: Duration::from_micros(u64::from(knobs & 0x0f) * 50),
        loss: percent(f64::from(knobs % 7)),
        duplicate: percent(f64::from(knobs % 5)),
        reorder: percent(f64::from(knobs % 11)),
        discipline: QueueDiscipline::Red(RedParams::default()),
        ..LinkConfig::default()
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&knobs, mut rest)) = data.split_first() else {
        return;
    };
    // The whole input is also one frame for the middlebox's parsers.
    let mut whole = rest.to_vec();
    let _ = Middlebox::new(rules(knobs), 1).process(Instant::now(), &mut whole);
    let _ = frame_ecn(&whole, FrameKind::of(&whole));

    let mut middlebox = Middlebox::new(rules(knobs), u64::from(knobs));
    let mut link = Link::new(config(knobs), u64::from(knobs));
    let start = Instant::now();
    let mut now = start;
    let mut handed = 0u64;
    while let [gap, high, low, tail @ ..] = rest {
        let len = usize::from(u16::from_be_bytes([*high, *low]) % 2048).min(tail.len());
        let (bytes, remaining) = tail.split_at(len);
        rest = remaining;
        now += Duration::from_micros(u64::from(*gap) * 10);
        let mut frame = bytes.to_vec();
        if middlebox.process(now, &mut frame) == Verdict::Drop {
            continue;
        }
        assert_eq!(frame.len(), len, "rewrites never change a frame's length");
        link.handle_frame(now, frame);
        handed += 1;
        while let Some(frame) = link.poll_transmit(now) {
            assert!(frame.len() < 2048);
        }
    }
    while let Some(due) = link.poll_timeout() {
        assert!(due >= start);
        let mut delivered = false;
        while link.poll_transmit(due).is_some() {
            delivered = true;
        }
        assert!(delivered, "poll_timeout promised a frame");
    }
    let counters = link.counters();
    assert_eq!(counters.frames_in, handed);
    assert_eq!(counters.frames_in_flight, 0);
    assert_eq!(counters.queue_frames, 0);
    assert_eq!(
        counters.frames_in + counters.duplicated,
        counters.frames_out + counters.dropped()
    );
});
