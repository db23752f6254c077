use std::time::{Duration, Instant};

use proptest::prelude::*;

use super::policy::code_for;
use super::*;

fn datagram(seed: u32, len: usize) -> Vec<u8> {
    let mut d: Vec<u8> = (0..len)
        .map(|i| (i as u32).wrapping_mul(2_654_435_761).wrapping_add(seed) as u8)
        .collect();
    d[0] = 0x40 | (seed as u8 & 0x3F);
    d
}

/// Sends `sources` through an encoder with `params`, returns the wire
/// datagrams (sources wrapped, then each block's repairs as they close).
fn send(params: Params, sources: &[Vec<u8>], now: Instant) -> Vec<Vec<u8>> {
    let mut enc = Encoder::new();
    let mut wire = Vec::new();
    enc.set_params(Some(params), Duration::from_millis(10), &mut wire);
    for s in sources {
        let mut out = Vec::new();
        enc.wrap(0, s, &mut out);
        wire.push(out);
        enc.on_sent(now, s, &mut wire);
    }
    enc.flush_due(now + Duration::from_secs(1), &mut wire);
    wire
}

/// Feeds `wire` minus the datagrams at `dropped` to a decoder; returns
/// what it handed on (sources as they came, then rebuilt ones) and it.
fn receive(wire: &[Vec<u8>], dropped: &[usize]) -> (Vec<Vec<u8>>, Decoder) {
    let mut dec = Decoder::new();
    let mut out = Vec::new();
    for (i, d) in wire.iter().enumerate() {
        if dropped.contains(&i) {
            continue;
        }
        match kind(d) {
            Some(Kind::Source) => out.push(dec.on_source(d).unwrap().to_vec()),
            Some(Kind::Repair) => {
                let _ = dec.on_repair(d, &mut out);
            }
            _ => panic!("unexpected datagram"),
        }
    }
    (out, dec)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, .. ProptestConfig::default() })]

    /// Any m losses among a block's k + m datagrams are rebuilt, byte for
    /// byte; any pattern at all delivers nothing that was not sent.
    #[test]
    fn a_block_rebuilds_any_m_losses_and_never_anything_wrong(
        k in 1u8..=24,
        m in 1u8..=6,
        lens in proptest::collection::vec(20usize..1400, 24),
        drop_bits in any::<u64>(),
    ) {
        let sources: Vec<Vec<u8>> = (0..usize::from(k))
            .map(|i| datagram(i as u32 + 7, lens[i]))
            .collect();
        let params = Params::new(k, m, 1).unwrap();
        let wire = send(params, &sources, Instant::now());
        prop_assert_eq!(wire.len(), usize::from(k) + usize::from(m));
        let dropped: Vec<usize> = (0..wire.len()).filter(|i| drop_bits >> i & 1 == 1).collect();
        let (got, dec) = receive(&wire, &dropped);
        for d in &got {
            prop_assert!(sources.contains(d), "delivered a datagram never sent");
        }
        let lost_sources = dropped.iter().filter(|&&i| i < usize::from(k)).count();
        if dropped.len() <= usize::from(m) {
            let mut got = got.clone();
            got.sort();
            got.dedup();
            let mut want = sources.clone();
            want.sort();
            want.dedup();
            prop_assert_eq!(got, want);
            prop_assert_eq!(dec.stats().recovered as usize, lost_sources);
        }
    }

    /// Parsers take any bytes without panicking.
    #[test]
    fn parsers_take_any_bytes(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
        let _ = parse_source(&bytes);
        let _ = parse_repair(&bytes);
        let _ = parse_report(&bytes);
        let mut dec = Decoder::new();
        let _ = dec.on_source(&bytes);
        let _ = dec.on_repair(&bytes, &mut Vec::new());
    }
}

#[test]
fn interleaving_turns_a_burst_into_one_loss_per_block() {
    let sources: Vec<Vec<u8>> = (0..32).map(|i| datagram(i, 1200)).collect();
    // Depth 4: each block takes every fourth source, one repair each.
    let params = Params::new(8, 1, 4).unwrap();
    let wire = send(params, &sources, Instant::now());
    assert_eq!(wire.len(), 32 + 4);
    // A burst of four consecutive sources...
    let (got, dec) = receive(&wire, &[10, 11, 12, 13]);
    assert_eq!(dec.stats().recovered, 4);
    assert_eq!(got.len(), 32);
    // ... which one block of 32 with 4 repairs would also rebuild, but a
    // block without interleaving and one repair per 8 would not.
    let plain = send(Params::new(8, 1, 1).unwrap(), &sources, Instant::now());
    let burst: Vec<usize> = (0..plain.len())
        .filter(|&i| kind(&plain[i]) == Some(Kind::Source))
        .skip(10)
        .take(4)
        .collect();
    let (_, dec) = receive(&plain, &burst);
    assert_eq!(dec.stats().recovered, 0);
}

#[test]
fn a_sparse_sender_gets_its_repairs_at_the_flush_deadline() {
    let t0 = Instant::now();
    let mut enc = Encoder::new();
    let mut repairs = Vec::new();
    let flush = Duration::from_millis(20);
    enc.set_params(Some(Params::new(64, 8, 1).unwrap()), flush, &mut repairs);
    enc.set_sparse_repairs(1, 1e6);
    assert_eq!(enc.poll_timeout(), None, "nothing to flush before a send");
    let one = datagram(1, 300);
    enc.on_sent(t0, &one, &mut repairs);
    assert!(repairs.is_empty());
    // A sparse block waits a quarter of the deadline.
    let sparse = flush / 4;
    assert_eq!(enc.poll_timeout(), Some(t0 + sparse));
    enc.flush_due(t0 + sparse - Duration::from_millis(1), &mut repairs);
    assert!(repairs.is_empty(), "not due yet");
    enc.flush_due(t0 + sparse, &mut repairs);
    // One source of a block of 64 with 8: one repair, short like it.
    assert_eq!(repairs.len(), 1);
    assert!(
        repairs[0].len() <= 300 + REPAIR_OVERHEAD,
        "{}",
        repairs[0].len()
    );
    assert_eq!(enc.poll_timeout(), None);
    // And the repair alone rebuilds the source, once the decoder knows
    // where the sequence is (it saw the next source).
    let mut next = Vec::new();
    enc.wrap(0, &datagram(2, 10), &mut next);
    let mut dec = Decoder::new();
    dec.on_source(&next).unwrap();
    let mut rebuilt = Vec::new();
    dec.on_repair(&repairs[0], &mut rebuilt).unwrap();
    assert_eq!(rebuilt, vec![one]);
    assert_eq!(dec.stats().recovered, 1);
}

#[test]
fn the_decoder_counts_losses_and_runs_in_sequence_order() {
    let sources: Vec<Vec<u8>> = (0..2000).map(|i| datagram(i, 100)).collect();
    let mut enc = Encoder::new();
    let mut sink = Vec::new();
    enc.set_params(
        Some(Params::new(128, 1, 1).unwrap()),
        Duration::from_secs(1),
        &mut sink,
    );
    let mut dec = Decoder::new();
    // Lost: 100, 200-202 (one run of three), 500, 501.
    let lost = [100, 200, 201, 202, 500, 501];
    let now = Instant::now();
    for (i, s) in sources.iter().enumerate() {
        let mut w = Vec::new();
        enc.wrap(0, s, &mut w);
        enc.on_sent(now, s, &mut sink);
        if !lost.contains(&i) {
            dec.on_source(&w).unwrap();
        }
    }
    let s = dec.stats();
    // Everything up to 2000 - 256 is counted.
    assert_eq!(s.lost, 6);
    assert_eq!(s.runs, 3);
    assert_eq!(s.received, 2000 - 1 - 256 - 6);
    let r = dec.report();
    assert_eq!((r.received, r.lost, r.runs), (1737, 6, 3));
    assert_eq!(parse_report(&r.to_bytes()).unwrap(), r);
}

#[test]
fn a_late_source_is_reordering_not_loss() {
    let mut enc = Encoder::new();
    let mut sink = Vec::new();
    enc.set_params(
        Some(Params::new(8, 1, 1).unwrap()),
        Duration::from_secs(1),
        &mut sink,
    );
    let mut wrapped = Vec::new();
    let now = Instant::now();
    for i in 0..600 {
        let d = datagram(i, 60);
        let mut w = Vec::new();
        enc.wrap(0, &d, &mut w);
        enc.on_sent(now, &d, &mut sink);
        wrapped.push(w);
    }
    let mut dec = Decoder::new();
    for (i, w) in wrapped.iter().enumerate() {
        if i != 5 {
            dec.on_source(w).unwrap();
        }
    }
    assert_eq!(dec.stats().lost, 1);
    dec.on_source(&wrapped[5]).unwrap();
    assert_eq!(dec.stats().lost, 0);
    assert_eq!(dec.stats().received, 600 - 1 - 256);
}

#[test]
fn inconsistent_or_foreign_repairs_are_refused() {
    let sources: Vec<Vec<u8>> = (0..4).map(|i| datagram(i, 500)).collect();
    let wire = send(Params::new(4, 2, 1).unwrap(), &sources, Instant::now());
    let mut dec = Decoder::new();
    for s in &wire[..3] {
        dec.on_source(s).unwrap();
    }
    // The same block announced with another shard length.
    let mut other = wire[4].clone();
    other.truncate(other.len() - 2);
    let mut out = Vec::new();
    assert!(
        dec.on_repair(&other, &mut out).is_err(),
        "shorter than a source"
    );
    assert!(
        dec.on_repair(&wire[5], &mut out).is_err(),
        "differs from the first"
    );
    assert!(out.is_empty());
    assert_eq!(dec.stats().refused, 2);
}

#[test]
fn modes_parse_and_print() {
    assert_eq!("auto".parse::<FecMode>(), Ok(FecMode::Auto));
    assert_eq!("off".parse::<FecMode>(), Ok(FecMode::Off));
    let fixed: FecMode = "10:3".parse().unwrap();
    assert_eq!(fixed, FecMode::Fixed(Params::new(10, 3, 1).unwrap()));
    assert_eq!(fixed.to_string(), "10:3");
    for bad in [
        "", "on", "0:1", "10:0", "200:3", "10:33", "10", "a:b", "10:3:2",
    ] {
        let err = bad.parse::<FecMode>().unwrap_err();
        assert!(err.contains("expected auto, off or K:M"), "{bad}: {err}");
    }
}

#[test]
fn auto_is_off_on_a_clean_path_on_within_a_few_hundred_packets_of_loss_and_off_after() {
    let mut p = Policy::new(FecMode::Auto, DEFAULT_BUDGET);
    let (mut sent, mut lost) = (0u64, 0u64);
    p.on_quic(sent, lost, false);
    // Clean: 100 samples of 850 packets (10 s at 100 Mbit/s).
    for _ in 0..100 {
        sent += 850;
        p.on_quic(sent, lost, false);
    }
    assert_eq!(p.params(), None);
    // 1% loss appears: on within two samples (0.2 s).
    for _ in 0..2 {
        sent += 850;
        lost += 8;
        p.on_quic(sent, lost, false);
    }
    let code = p.params().expect("on");
    // Now the receiver reports; loss 1% in runs of one.
    let mut r = Report::default();
    p.on_report(r, false);
    for _ in 0..20 {
        r.received += 842;
        r.lost += 8;
        r.runs += 8;
        p.on_report(r, false);
    }
    let code2 = p.params().unwrap();
    assert!((p.loss() - 0.0094).abs() < 0.002, "{}", p.loss());
    assert_eq!(code2.depth, 1);
    assert!(code2.ratio() <= 2.0 * 0.01 + 0.01, "{code2} for 1% loss");
    let _ = code;
    // Loss ends: off within a few seconds of clean reports.
    let mut samples = 0;
    while p.params().is_some() && samples < 100 {
        r.received += 850;
        p.on_report(r, false);
        samples += 1;
    }
    assert!(samples < 30, "still on after {samples} clean samples");
}

#[test]
fn loss_at_a_growing_queue_raises_nothing() {
    let mut p = Policy::new(FecMode::Auto, DEFAULT_BUDGET);
    let (mut sent, mut lost) = (0u64, 0u64);
    p.on_quic(0, 0, false);
    for _ in 0..50 {
        sent += 850;
        lost += 40;
        p.on_quic(sent, lost, true);
    }
    assert_eq!(p.params(), None, "congestion is the controller's to answer");
}

#[test]
fn bursts_deepen_the_interleaving_and_the_budget_caps_the_ratio() {
    let mut p = Policy::new(FecMode::Auto, 0.05);
    p.on_quic(0, 0, false);
    p.on_quic(850, 40, false);
    let mut r = Report::default();
    p.on_report(r, false);
    for _ in 0..60 {
        r.received += 810;
        r.lost += 40;
        r.runs += 10; // runs of four
        p.on_report(r, false);
    }
    let code = p.params().unwrap();
    assert_eq!(code.depth, 4);
    assert!(code.ratio() <= 0.05 + 1e-9, "{code}");
    // The ratio for each loss stays under 2 x loss + 1%.
    for loss in [0.002, 0.005, 0.01, 0.03, 0.05, 0.1] {
        let c = code_for(loss, 1.0, 1.0, false).unwrap();
        assert!(c.ratio() < 2.0 * loss + 0.01, "{c} for {loss}");
        assert!(c.ratio() > loss, "{c} for {loss}: not even the loss");
        // Lean: none at all where a block of 128 would get under half a
        // repair.
        if let Some(lean) = code_for(loss, 1.0, 1.0, true) {
            assert!(lean.ratio() <= c.ratio(), "{lean}");
            assert!(lean.ratio() < 0.7 * loss + 0.006, "{lean} for {loss}");
        } else {
            assert!(loss < 0.003);
        }
    }
    assert_eq!(code_for(0.01, 1.0, 0.001, false), None, "under one repair");
    // Bulk traffic gets the lean code at once, its end the full one.
    p.set_lean(true);
    let lean = p.params().unwrap();
    p.set_lean(false);
    assert!(p.params().unwrap().m >= lean.m, "{lean}");
    assert_eq!(Policy::new(FecMode::Off, 1.0).params(), None);
}

#[test]
fn partial_blocks_keep_the_code_ratio_and_sparse_ones_get_a_repair() {
    let t0 = Instant::now();
    let flush = Duration::from_millis(5);
    let mut enc = Encoder::new();
    let mut repairs = Vec::new();
    enc.set_params(Some(Params::new(128, 4, 1).unwrap()), flush, &mut repairs);
    enc.set_sparse_repairs(1, 1e6);
    // A bulk sender whose blocks the deadline closes at 16 sources: each
    // owes half a repair.
    for block in 0..64u32 {
        let at = t0 + flush * block;
        for i in 0..16 {
            enc.on_sent(at, &datagram(i, 1200), &mut repairs);
        }
        enc.flush_due(at + flush, &mut repairs);
    }
    assert_eq!(repairs.len(), 32, "4 per 128 sources");
    // A sparse sender: one datagram per block, each protected.
    repairs.clear();
    for n in 0..10u32 {
        let at = t0 + Duration::from_secs(1) + flush * 2 * n;
        enc.on_sent(at, &datagram(n, 100), &mut repairs);
        enc.flush_due(at + flush, &mut repairs);
    }
    assert_eq!(repairs.len(), 10);
}

#[test]
fn a_sparse_senders_last_datagram_is_rebuilt_though_nothing_follows_it() {
    let t0 = Instant::now();
    let flush = Duration::from_millis(20);
    let mut enc = Encoder::new();
    let mut repairs = Vec::new();
    enc.set_params(Some(Params::new(128, 8, 1).unwrap()), flush, &mut repairs);
    enc.set_sparse_repairs(1, 1e6);
    let mut dec = Decoder::new();
    let mut rebuilt = Vec::new();
    // Requests one at a time; the third is lost, only its repair arrives.
    for n in 0..5u32 {
        let at = t0 + Duration::from_millis(100) * n;
        let request = datagram(n, 1100);
        let mut wrapped = Vec::new();
        enc.wrap(0, &request, &mut wrapped);
        enc.on_sent(at, &request, &mut repairs);
        if n != 2 {
            dec.on_source(&wrapped).unwrap();
        }
        enc.flush_due(at + flush, &mut repairs);
        for r in repairs.drain(..) {
            dec.on_repair(&r, &mut rebuilt).unwrap();
        }
        if n == 2 {
            assert_eq!(rebuilt, vec![request], "rebuilt before anything follows");
        }
    }
    assert_eq!(dec.stats().recovered, 1);
}

#[test]
fn at_low_loss_a_sparse_sender_rides_on_the_carried_fractions() {
    let t0 = Instant::now();
    let flush = Duration::from_millis(20);
    let mut enc = Encoder::new();
    let mut repairs = Vec::new();
    // 128:2, the code for about 0.5% loss: the policy asks for no
    // sparse repairs there.
    let mut p = Policy::new(FecMode::Auto, DEFAULT_BUDGET);
    p.on_report(Report::default(), false);
    p.on_report(
        Report {
            received: 4_000,
            lost: 20,
            runs: 20,
            ..Report::default()
        },
        false,
    );
    assert_eq!(p.params(), Some(Params::new(128, 2, 1).unwrap()));
    assert_eq!(p.sparse_repairs(), 0);
    enc.set_params(p.params(), flush, &mut repairs);
    enc.set_sparse_repairs(p.sparse_repairs(), 1e6);
    for n in 0..128u32 {
        let at = t0 + flush * 2 * n;
        enc.on_sent(at, &datagram(n, 100), &mut repairs);
        enc.flush_due(at + flush, &mut repairs);
    }
    assert_eq!(repairs.len(), 2, "the code's share, not one per datagram");
}

#[test]
fn while_off_auto_numbers_the_datagrams_and_the_reports_switch_it_on() {
    // The direction of a download that carries only acknowledgements:
    // QUIC never declares one lost, so only the receiver's counts of the
    // numbered datagrams show the path's loss.
    let t0 = Instant::now();
    let mut enc = Encoder::new();
    enc.set_measuring(true);
    assert!(enc.wraps() && enc.params().is_none());
    let mut dec = Decoder::new();
    let mut repairs = Vec::new();
    let mut p = Policy::new(FecMode::Auto, DEFAULT_BUDGET);
    p.on_quic(0, 0, false);
    p.on_report(dec.report(), false);
    for n in 0..3_000u32 {
        let ack = datagram(n, 60);
        let mut wrapped = Vec::new();
        enc.wrap(0, &ack, &mut wrapped);
        enc.on_sent(t0, &ack, &mut repairs);
        // 1% lost on the way.
        if n % 100 != 7 {
            assert_eq!(dec.on_source(&wrapped).unwrap(), &ack[..]);
        }
        if n % 200 == 199 {
            p.on_quic(u64::from(n), 0, false);
            p.on_report(dec.report(), false);
        }
    }
    assert!(repairs.is_empty(), "no code, no repairs");
    assert_eq!(enc.stats().sources, 3_000);
    assert!(dec.stats().lost >= 15, "{:?}", dec.stats());
    p.params().expect("the reports switched it on");
    assert_eq!(p.sparse_repairs(), 1, "a request gets its repair");
    // QUIC's totals (no losses) no longer count once reports arrive.
    let loss = p.loss();
    p.on_quic(1_000_000, 0, false);
    assert_eq!(p.loss(), loss);
    // Off: nothing is numbered.
    let mut off = Encoder::new();
    off.set_measuring(false);
    assert!(!off.wraps());
}

#[test]
fn sparse_blocks_get_more_repairs_as_the_loss_grows_within_their_bucket() {
    let measured = |loss: f64, sent: u32| {
        let mut p = Policy::new(FecMode::Auto, DEFAULT_BUDGET);
        p.on_report(Report::default(), false);
        let lost = (loss * f64::from(sent)) as u32;
        p.on_report(
            Report {
                received: sent - lost,
                lost,
                runs: lost,
                ..Report::default()
            },
            false,
        );
        p.sparse_repairs()
    };
    let at = |loss: f64| measured(loss, 8_000);
    // 15 losses in 300 datagrams: too little to go on.
    assert_eq!(measured(0.05, 300), 0);
    assert_eq!(
        [at(0.005), at(0.01), at(0.03), at(0.05), at(0.10)],
        [0, 1, 2, 3, 4]
    );

    // At 5% a lone request and two of its three repairs are lost: it is
    // rebuilt from the third.
    let t0 = Instant::now();
    let flush = Duration::from_millis(20);
    let mut enc = Encoder::new();
    let mut repairs = Vec::new();
    enc.set_params(Some(Params::new(128, 11, 1).unwrap()), flush, &mut repairs);
    enc.set_sparse_repairs(3, 100_000.0);
    let request = datagram(9, 1_100);
    enc.on_sent(t0, &request, &mut repairs);
    enc.flush_due(t0 + flush, &mut repairs);
    assert_eq!(repairs.len(), 3);
    let mut dec = Decoder::new();
    let mut rebuilt = Vec::new();
    dec.on_repair(&repairs[2], &mut rebuilt).unwrap();
    assert_eq!(rebuilt, vec![request]);

    // A stream of small blocks at 400 a second: the repairs beyond their
    // share take what the bucket allows (4,000 B/s: a datagram's depth,
    // then about 3 repairs of 1.1 KB a second), not 3 each.
    let mut enc = Encoder::new();
    repairs.clear();
    enc.set_params(Some(Params::new(128, 11, 1).unwrap()), flush, &mut repairs);
    enc.set_sparse_repairs(3, 4_000.0);
    let tick = Duration::from_micros(2_500);
    for n in 0..400u32 {
        let at = t0 + tick * n;
        enc.on_sent(at, &datagram(n, 1_100), &mut repairs);
        enc.flush_due(at + tick, &mut repairs);
    }
    // Their share: 400 x 11 / 128 = 34; the bucket: 1 + 3.
    assert!((34..=40).contains(&repairs.len()), "{}", repairs.len());
}

#[test]
fn partial_blocks_of_interactive_senders_get_repairs_by_their_size() {
    let policy = |loss: f64| {
        let mut p = Policy::new(FecMode::Auto, DEFAULT_BUDGET);
        p.on_report(Report::default(), false);
        let lost = (loss * 8_000.0) as u32;
        p.on_report(
            Report {
                received: 8_000 - lost,
                lost,
                runs: lost,
                ..Report::default()
            },
            false,
        );
        p
    };
    let one = policy(0.01).partial_repairs();
    assert_eq!((one[1], one[4], one[10], one[11], one[31]), (1, 1, 1, 2, 2));
    let five = policy(0.05).partial_repairs();
    assert_eq!(
        (five[1], five[4], five[10], five[11], five[31]),
        (3, 3, 3, 4, 6)
    );
    assert!(policy(0.10).partial_repairs()[PARTIAL] <= 8);
    assert_eq!(policy(0.005).partial_repairs(), [0; PARTIAL + 1]);

    // Eight requests in one block closed by the deadline at 5% loss: three
    // repairs (their share of 128:11 is none), and any three of the eleven
    // datagrams lost are rebuilt.
    let t0 = Instant::now();
    let flush = Duration::from_millis(20);
    let mut enc = Encoder::new();
    let mut repairs = Vec::new();
    enc.set_params(Some(Params::new(128, 11, 1).unwrap()), flush, &mut repairs);
    enc.set_partial_repairs(five, 1e6);
    let requests: Vec<Vec<u8>> = (0..8).map(|n| datagram(n, 1_100)).collect();
    let mut wired = Vec::new();
    for r in &requests {
        let mut w = Vec::new();
        enc.wrap(0, r, &mut w);
        enc.on_sent(t0, r, &mut repairs);
        wired.push(w);
    }
    enc.flush_due(t0 + flush, &mut repairs);
    assert_eq!(repairs.len(), 3, "five[8] is 3");
    let mut dec = Decoder::new();
    let mut rebuilt = Vec::new();
    // Requests 1, 4 and 6 lost; all three repairs arrive.
    for (i, w) in wired.iter().enumerate() {
        if ![1, 4, 6].contains(&i) {
            dec.on_source(w).unwrap();
        }
    }
    for r in &repairs {
        dec.on_repair(r, &mut rebuilt).unwrap();
    }
    rebuilt.sort();
    let mut lost = vec![
        requests[1].clone(),
        requests[4].clone(),
        requests[6].clone(),
    ];
    lost.sort();
    assert_eq!(rebuilt, lost);
}

#[test]
fn a_path_carrying_datagrams_gets_short_blocks_the_full_code_and_a_budget_of_its_own() {
    let mut p = Policy::new(FecMode::Auto, DEFAULT_BUDGET);
    p.on_report(Report::default(), false);
    p.on_report(
        Report {
            received: 7_600,
            lost: 400,
            runs: 400,
            ..Report::default()
        },
        false,
    );
    // A bulk download on the path: the lean code, 20 ms blocks (half the
    // round trip), 1% of the path for sparse blocks' repairs.
    p.set_lean(true);
    let srtt = Duration::from_millis(40);
    let lean = p.params().unwrap();
    assert_eq!((lean.k, lean.m), (128, 4));
    assert_eq!(p.flush_after(srtt), Duration::from_millis(20));
    assert_eq!(p.repair_rate(2.5e6, 2.4e6), 25_000.0);
    // UDP flows' datagrams on it too: nothing resends what FEC misses.
    p.set_datagrams(true);
    let full = p.params().unwrap();
    assert_eq!((full.k, full.m), (128, 11), "never lean");
    assert_eq!(p.flush_after(srtt), DATAGRAM_FLUSH);
    assert_eq!(p.repair_rate(2.5e6, 2.4e6), 1.2e6, "half of what is sent");
    assert_eq!(
        p.repair_rate(2.5e6, 3e5),
        625_000.0,
        "a quarter of the path"
    );
    // A video frame's block of 7 and a lone voice datagram get 3 repairs
    // each: a datagram stays lost after repair under 0.1% of the time.
    let table = p.partial_repairs();
    assert_eq!((table[1], table[7]), (3, 3));
    // And the bucket pays for them at 30 frames and 50 voice datagrams a
    // second (the 2 Mbit/s video and voice of the lab's `realtime`).
    let t0 = Instant::now();
    let mut enc = Encoder::new();
    let mut repairs = Vec::new();
    enc.set_params(p.params(), p.flush_after(srtt), &mut repairs);
    enc.set_partial_repairs(table, p.repair_rate(0.0, 280_000.0));
    let mut per_frame = Vec::new();
    for frame in 0..30u32 {
        let at = t0 + Duration::from_micros(33_333) * frame;
        for n in 0..7 {
            enc.on_sent(at, &datagram(frame * 7 + n, 1_200), &mut repairs);
        }
        let before = repairs.len();
        enc.flush_due(at + DATAGRAM_FLUSH, &mut repairs);
        per_frame.push(repairs.len() - before);
        enc.on_sent(
            at + Duration::from_millis(10),
            &datagram(frame, 200),
            &mut repairs,
        );
        enc.flush_due(at + Duration::from_millis(14), &mut repairs);
    }
    assert!(per_frame.iter().all(|&m| m == 3), "{per_frame:?}");
    assert_eq!(enc.stats().repairs, 30 * 3 + 30 * 3);
    // Once the datagrams are gone the bulk code comes back.
    p.set_datagrams(false);
    assert_eq!(p.params(), Some(lean));
}

#[test]
fn the_call_strand_has_its_own_bytes_and_decodes_the_same() {
    let now = Instant::now();
    let params = Params::new(2, 1, 1).unwrap();
    let mut enc = Encoder::of(Strand::Calls);
    let mut wire = Vec::new();
    enc.set_params(Some(params), Duration::from_millis(4), &mut wire);
    let sources = [datagram(1, 200), datagram(2, 180)];
    for s in &sources {
        let mut out = Vec::new();
        enc.wrap(0, s, &mut out);
        wire.push(out);
        enc.on_sent(now, s, &mut wire);
    }
    let firsts: Vec<u8> = wire.iter().map(|d| d[0]).collect();
    assert_eq!(firsts, [0x26, 0x26, 0x27]);
    assert_eq!(
        wire.iter().map(|d| classify(d)).collect::<Vec<_>>(),
        [
            Some((Kind::Source, Strand::Calls)),
            Some((Kind::Source, Strand::Calls)),
            Some((Kind::Repair, Strand::Calls)),
        ]
    );
    // The second source lost: the repair rebuilds it.
    let (out, dec) = receive(&wire, &[1]);
    assert_eq!(out, [sources[0].clone(), sources[1].clone()]);
    let report = dec.report().to_bytes_of(Strand::Calls);
    assert_eq!(classify(&report), Some((Kind::Report, Strand::Calls)));
    assert_eq!(parse_report(&report).unwrap().recovered, 1);
    // Neither strand's bytes are QUIC's (fixed bit clear) nor a probe's.
    for strand in [Strand::Bulk, Strand::Calls] {
        for kind in [Kind::Source, Kind::Repair, Kind::Report] {
            let byte = strand.byte(kind);
            assert_eq!(byte & 0x40, 0);
            assert_ne!(byte, crate::path::wire::KIND);
            assert_ne!(byte, crate::fec::MARKER);
        }
    }
}

#[test]
fn a_second_strand_starts_from_the_first_ones_measure_until_it_has_its_own() {
    // The bulk strand measured 5% over 20,000 datagrams.
    let mut bulk = Policy::new(FecMode::Auto, DEFAULT_BUDGET);
    bulk.on_report(Report::default(), false);
    bulk.on_report(
        Report {
            received: 19_000,
            lost: 1_000,
            runs: 1_000,
            ..Report::default()
        },
        false,
    );
    let mut calls = Policy::new(FecMode::Auto, DEFAULT_BUDGET);
    calls.set_datagrams(true);
    // On its own, 60 call datagrams with 3 lost are too few to act on.
    calls.on_report(Report::default(), false);
    calls.on_report(
        Report {
            received: 57,
            lost: 3,
            runs: 3,
            ..Report::default()
        },
        false,
    );
    assert_eq!(calls.partial_repairs()[1], 0, "{:?}", calls.state());
    // Seeded: the full code for 5% at once (3 repairs for a lone source).
    calls.seed_from(&bulk);
    assert!(calls.params().is_some());
    assert_eq!(calls.partial_repairs()[1], 3, "{:?}", calls.state());
    // A strand with evidence of its own keeps it.
    let mut own = Policy::new(FecMode::Auto, DEFAULT_BUDGET);
    own.on_report(Report::default(), false);
    own.on_report(
        Report {
            received: 1_980,
            lost: 20,
            runs: 20,
            ..Report::default()
        },
        false,
    );
    let before = own.state();
    own.seed_from(&bulk);
    assert_eq!(own.state(), before);
}

#[test]
fn datagrams_get_a_repair_per_block_from_a_tenth_of_a_percent() {
    // Two duplicated paths at 5% each: 0.25% together, over 8,000
    // datagrams (20 lost).
    let report = Report {
        received: 7_980,
        lost: 20,
        runs: 20,
        ..Report::default()
    };
    let mut calls = Policy::new(FecMode::Auto, DEFAULT_BUDGET);
    calls.set_datagrams(true);
    calls.on_report(Report::default(), false);
    calls.on_report(report, false);
    assert_eq!(calls.partial_repairs()[1], 1, "{:?}", calls.state());
    assert_eq!(calls.partial_repairs()[7], 1, "{:?}", calls.state());
    // The same loss for a sparse sender of the bulk strand: no repairs
    // beyond the code's share.
    let mut bulk = Policy::new(FecMode::Auto, DEFAULT_BUDGET);
    bulk.on_report(Report::default(), false);
    bulk.on_report(report, false);
    assert_eq!(bulk.partial_repairs()[1], 0, "{:?}", bulk.state());
}
