use std::collections::HashMap;
use std::time::{Duration, Instant};

use proptest::prelude::*;

use super::*;

const MS: Duration = Duration::from_millis(1);

fn params() -> TailParams {
    TailParams {
        quiet: 10 * MS,
        end_quiet: 4 * MS,
        max_datagrams: 4,
        max_bytes: 4 * 1200,
        refill_bytes_per_sec: 10_000.0,
        rate_bytes_per_sec: None,
        window: 100 * MS,
    }
}

fn datagram(n: u32, len: usize) -> Vec<u8> {
    let mut d = vec![0xAB; len.max(4)];
    d[..4].copy_from_slice(&n.to_be_bytes());
    d
}

fn drain(dup: &mut TailDup<u8, ()>, now: Instant) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    while let Some(d) = dup.poll_transmit(now) {
        assert_eq!(d.key, 1);
        out.push(d.datagram);
    }
    out
}

#[test]
fn parameters_follow_the_path() {
    let srtt = 150 * MS;
    // 3G downlink, 2 Mbit/s: quiet is a quarter RTT (longer than four
    // datagrams at the rate), the tail 30 ms of the link.
    let down = TailParams::for_path(srtt, Some(250_000.0), 1472);
    assert_eq!(down.quiet, srtt / 4);
    // At a stream's end only the pacing gap counts: four datagrams.
    assert_eq!(down.end_quiet, Duration::from_micros(23_552));
    assert_eq!(down.max_bytes, 7_500);
    assert_eq!(down.refill_bytes_per_sec, 62_500.0);
    assert_eq!(down.rate_bytes_per_sec, Some(250_000.0));
    assert_eq!(down.window, srtt);
    // 384 kbit/s uplink: four datagrams take 123 ms, capped at half the
    // RTT; the tail is never under two datagrams.
    let up = TailParams::for_path(srtt, Some(48_000.0), 1472);
    assert_eq!(up.quiet, srtt / 2);
    assert_eq!(up.end_quiet, up.quiet);
    assert_eq!(up.max_bytes, 2 * 1472);
    assert_eq!(up.refill_bytes_per_sec, 12_000.0);
    // A 10 Mbit/s path: four datagrams at the rate are under a quarter RTT.
    let mid = TailParams::for_path(40 * MS, Some(1.25e6), 1472);
    assert_eq!(mid.quiet, 10 * MS);
    // No estimate: a quarter of the RTT, two datagrams, one tail a second.
    let unknown = TailParams::for_path(srtt, None, 1472);
    assert_eq!(unknown.quiet, srtt / 4);
    assert_eq!(unknown.end_quiet, unknown.quiet);
    assert_eq!(unknown.max_bytes, 2 * 1472);
    assert_eq!(unknown.refill_bytes_per_sec, (2 * 1472) as f64);
    assert_eq!(unknown.rate_bytes_per_sec, None);
    // A fast LAN-like path: at least MIN_QUIET, at most 16 datagrams, the
    // busy average over at least 50 ms.
    let fast = TailParams::for_path(MS, Some(125e6), 1472);
    assert_eq!(fast.quiet, MIN_QUIET);
    assert_eq!(fast.end_quiet, MIN_QUIET);
    assert_eq!(fast.max_bytes, MAX_TAIL_DATAGRAMS * 1472);
    assert_eq!(fast.window, 50 * MS);
    // Nonsense rates count as unknown.
    assert_eq!(
        TailParams::for_path(srtt, Some(f64::NAN), 1472),
        TailParams::for_path(srtt, None, 1472)
    );
    assert_eq!(
        TailParams::for_path(srtt, Some(0.0), 1472),
        TailParams::for_path(srtt, None, 1472)
    );
}

#[test]
fn a_burst_that_starts_on_a_busy_path_is_not_repeated() {
    let t0 = Instant::now();
    let mut dup = TailDup::new();
    let mut p = params();
    p.rate_bytes_per_sec = Some(1_000_000.0); // 1 MB/s
    dup.set_path(t0, 1u8, Some(p));
    // A bulk transfer at the full rate: 1000-byte datagrams every ms, with
    // one 20 ms pause (a window-limited stall) in the middle.
    let mut now = t0;
    let mut n = 0;
    for _ in 0..300 {
        dup.on_send(now, 1, &(), &datagram(n, 1000));
        n += 1;
        now += MS;
    }
    // The first burst started on an idle path: its end goes out once.
    now += 19 * MS;
    assert_eq!(drain(&mut dup, now).len(), 4);
    for _ in 0..300 {
        dup.on_send(now, 1, &(), &datagram(n, 1000));
        n += 1;
        now += MS;
    }
    // The second began right after the first: busy, not repeated.
    now += 19 * MS;
    assert!(drain(&mut dup, now).is_empty());
    assert_eq!(dup.stats(1).unwrap().busy, 4);
    // After a second of silence a small request is repeated again.
    now += 1000 * MS;
    dup.on_send(now, 1, &(), &datagram(n, 300));
    assert_eq!(drain(&mut dup, now + 10 * MS), vec![datagram(n, 300)]);
}

#[test]
fn the_end_of_a_bulk_transfer_gets_parity_while_a_stream_end_is_expected() {
    let t0 = Instant::now();
    let mut dup = TailDup::new();
    let mut p = params();
    p.rate_bytes_per_sec = Some(1_000_000.0);
    dup.set_path(t0, 1u8, Some(p));
    let mut now = t0;
    let mut n = 0;
    // Bulk at the full rate, a pause, then more bulk: the second burst
    // began on a busy path.
    let bulk = |dup: &mut TailDup<u8, ()>, now: &mut Instant, n: &mut u32| {
        for _ in 0..300 {
            dup.on_send(*now, 1, &(), &datagram(*n, 1000));
            *n += 1;
            *now += MS;
        }
    };
    bulk(&mut dup, &mut now, &mut n);
    now += 19 * MS;
    assert_eq!(drain(&mut dup, now).len(), 4);
    // A flow wrote its last bytes; the rest of the transfer drains and
    // ends with a short packet (the stream's final frame).
    dup.expect_ends(1, true);
    bulk(&mut dup, &mut now, &mut n);
    let last = datagram(9999, 148);
    dup.on_send(now, 1, &(), &last);
    // The end's own quiet (4 ms here, against 10 for other bursts).
    assert_eq!(dup.poll_timeout(), Some(now + 4 * MS));
    assert!(drain(&mut dup, now + 3 * MS).is_empty(), "before the quiet");
    let parity = drain(&mut dup, now + 4 * MS);
    assert_eq!(parity.len(), 4, "the tail's parity, busy or not");
    assert!(parity.iter().all(|p| fec::is_parity(p)));
    let s = dup.stats(1).unwrap();
    assert_eq!((s.bursts, s.stream_ends, s.busy), (2, 1, 0));
    assert_eq!((s.parity_groups, s.datagrams), (1, 4 + 4));
    // It covers the last 32 datagrams: a receiver that lost the last one
    // and one 20 before it gets both back.
    let sources: Vec<Vec<u8>> = (n - 31..n)
        .map(|i| datagram(i, 1000))
        .chain([last.clone()])
        .collect();
    let mut rx = fec::Receiver::new();
    for (i, d) in sources.iter().enumerate() {
        if i != 11 && i != 31 {
            rx.on_datagram(d);
        }
    }
    let mut rebuilt: Vec<Vec<u8>> = parity
        .iter()
        .flat_map(|p| rx.on_parity(p).unwrap())
        .collect();
    rebuilt.sort();
    let mut lost = vec![sources[11].clone(), last.clone()];
    lost.sort();
    assert_eq!(rebuilt, lost);
    // Once the end is no longer expected, busy bursts are left alone again.
    dup.expect_ends(1, false);
    now += 20 * MS;
    bulk(&mut dup, &mut now, &mut n);
    bulk(&mut dup, &mut now, &mut n);
    assert!(drain(&mut dup, now + 10 * MS).is_empty());
    assert_eq!(dup.stats(1).unwrap().busy, 4);
    // The flag survives a path switched off and on.
    dup.expect_ends(1, true);
    dup.set_path(now, 1, None);
    dup.set_path(now, 1, Some(p));
    now += 20 * MS;
    bulk(&mut dup, &mut now, &mut n);
    bulk(&mut dup, &mut now, &mut n);
    let parity = drain(&mut dup, now + 10 * MS);
    assert!(parity.len() == 4 && parity.iter().all(|p| fec::is_parity(p)));
    assert_eq!(dup.stats(1).unwrap().stream_ends, 2);
    // A short end (two datagrams) is copied: as cheap, and covers both.
    now += 20 * MS;
    dup.on_send(now, 1, &(), &datagram(n, 1000));
    dup.on_send(now, 1, &(), &last);
    assert_eq!(
        drain(&mut dup, now + 10 * MS),
        vec![datagram(n, 1000), last.clone()]
    );
}

#[test]
fn a_short_burst_is_repeated_whole_once_the_path_is_quiet() {
    let t0 = Instant::now();
    let mut dup = TailDup::new();
    dup.set_path(t0, 1u8, Some(params()));
    let sent: Vec<_> = (0..3).map(|n| datagram(n, 1000)).collect();
    assert!(
        dup.on_send(t0, 1, &(), &sent[0]),
        "the first send arms the timer"
    );
    assert!(!dup.on_send(t0 + MS, 1, &(), &sent[1]));
    assert!(!dup.on_send(t0 + 2 * MS, 1, &(), &sent[2]));
    assert_eq!(dup.poll_timeout(), Some(t0 + 12 * MS));
    assert!(
        dup.poll_transmit(t0 + 11 * MS).is_none(),
        "not before the quiet time"
    );
    assert_eq!(drain(&mut dup, t0 + 12 * MS), sent);
    assert_eq!(dup.poll_timeout(), None);
    assert!(
        dup.poll_transmit(t0 + 100 * MS).is_none(),
        "a tail goes out once"
    );
    let stats = dup.stats(1).unwrap();
    assert_eq!((stats.bursts, stats.datagrams, stats.bytes), (1, 3, 3000));
}

#[test]
fn a_long_burst_has_only_its_end_repeated() {
    let t0 = Instant::now();
    let mut dup = TailDup::new();
    dup.set_path(t0, 1u8, Some(params()));
    let sent: Vec<_> = (0..40).map(|n| datagram(n, 1200)).collect();
    for (i, d) in sent.iter().enumerate() {
        dup.on_send(t0 + MS * i as u32, 1, &(), d);
        assert!(
            dup.poll_transmit(t0 + MS * i as u32).is_none(),
            "nothing mid-burst"
        );
    }
    assert_eq!(drain(&mut dup, t0 + 60 * MS), sent[36..].to_vec());
}

#[test]
fn the_byte_bound_cuts_the_tail_too() {
    let t0 = Instant::now();
    let mut dup = TailDup::new();
    let mut p = params();
    p.max_bytes = 2500;
    dup.set_path(t0, 1u8, Some(p));
    let sent: Vec<_> = (0..4).map(|n| datagram(n, 1200)).collect();
    for d in &sent {
        dup.on_send(t0, 1, &(), d);
    }
    assert_eq!(drain(&mut dup, t0 + 10 * MS), sent[2..].to_vec());
}

#[test]
fn the_token_bucket_bounds_what_back_to_back_bursts_cost() {
    let t0 = Instant::now();
    let mut dup = TailDup::new();
    dup.set_path(t0, 1u8, Some(params()));
    let mut now = t0;
    let mut repeated = 0usize;
    for n in 0..100u32 {
        for k in 0..4 {
            dup.on_send(now, 1, &(), &datagram(n * 4 + k, 1200));
        }
        now += 10 * MS;
        repeated += drain(&mut dup, now).iter().map(Vec::len).sum::<usize>();
        now += MS;
    }
    let elapsed = (now - t0).as_secs_f64();
    let bound = 4.0 * 1200.0 + 10_000.0 * elapsed;
    assert!(repeated as f64 <= bound, "{repeated} > {bound}");
    // ... and the bucket is what cut: 100 bursts of 4.8 kB were offered.
    assert!(repeated > 0 && repeated < 100 * 4800);
    assert!(dup.stats(1).unwrap().over_budget > 0);
}

#[test]
fn paths_are_independent_and_can_be_switched_off() {
    let t0 = Instant::now();
    let mut dup: TailDup<u8, u16> = TailDup::new();
    dup.set_path(t0, 1, Some(params()));
    dup.set_path(t0, 2, Some(params()));
    assert!(dup.is_active());
    dup.on_send(t0, 1, &7, &datagram(1, 100));
    dup.on_send(t0, 2, &9, &datagram(2, 100));
    dup.on_send(t0, 3, &9, &datagram(3, 100)); // unknown path: ignored
    dup.set_path(t0, 2, None);
    assert!(
        !dup.on_send(t0, 2, &9, &datagram(4, 100)),
        "an off path holds nothing"
    );
    let out: Vec<_> = std::iter::from_fn(|| dup.poll_transmit(t0 + 20 * MS)).collect();
    assert_eq!(out.len(), 1);
    assert_eq!((out[0].key, out[0].meta), (1, 7));
    assert_eq!(out[0].datagram, datagram(1, 100));
    dup.set_path(t0, 1, None);
    assert!(!dup.is_active());
    assert_eq!(dup.params(1), None);
    dup.set_path(t0, 1, Some(params()));
    assert_eq!(dup.params(1), Some(params()));
    assert_eq!(dup.stats(1).unwrap().datagrams, 1, "counters survive");
    dup.remove(1);
    assert_eq!(dup.stats(1), None);
}

#[test]
fn unheld_datagrams_end_the_tail_but_count_as_sent() {
    let t0 = Instant::now();
    let mut dup = TailDup::new();
    dup.set_path(t0, 1u8, Some(params()));
    // A batch: the front is not kept, the back is.
    dup.on_send(t0, 1, &(), &datagram(1, 1000));
    dup.on_send_unheld(t0, 1, 1000);
    dup.on_send(t0, 1, &(), &datagram(3, 1000));
    dup.on_send(t0, 1, &(), &datagram(4, 1000));
    assert_eq!(
        drain(&mut dup, t0 + 10 * MS),
        vec![datagram(3, 1000), datagram(4, 1000)]
    );
    // A burst that ends with an unheld datagram has no tail to repeat, and
    // it still counts as a burst: quiet is measured from it.
    dup.on_send(t0 + 100 * MS, 1, &(), &datagram(5, 1000));
    dup.on_send_unheld(t0 + 105 * MS, 1, 1000);
    assert_eq!(dup.poll_timeout(), None);
    dup.on_send(t0 + 109 * MS, 1, &(), &datagram(7, 1000));
    assert!(
        dup.poll_transmit(t0 + 115 * MS).is_none(),
        "quiet counts from the last send"
    );
    assert_eq!(drain(&mut dup, t0 + 119 * MS), vec![datagram(7, 1000)]);
}

#[test]
fn acknowledgement_sized_datagrams_are_not_held_and_do_not_push_data_out() {
    let t0 = Instant::now();
    let mut dup = TailDup::new();
    dup.set_path(t0, 1u8, Some(params()));
    // A request, then a run of ACK-only packets in the same burst.
    dup.on_send(t0, 1, &(), &datagram(1, 400));
    for n in 2..20 {
        assert!(!dup.on_send(t0 + MS, 1, &(), &datagram(n, 40)));
    }
    // Quiet counts from the last ACK; only the request is repeated.
    assert!(dup.poll_transmit(t0 + 10 * MS).is_none());
    assert_eq!(drain(&mut dup, t0 + 11 * MS), vec![datagram(1, 400)]);
    // A burst of ACKs alone leaves nothing to repeat.
    dup.on_send(t0 + 100 * MS, 1, &(), &datagram(30, 40));
    assert_eq!(dup.poll_timeout(), None);
    // A request that is one reference (54 bytes on the wire) is held.
    dup.on_send(t0 + 200 * MS, 1, &(), &datagram(31, 54));
    assert_eq!(drain(&mut dup, t0 + 250 * MS), vec![datagram(31, 54)]);
}

#[test]
fn a_late_poll_drops_the_old_tail_rather_than_mix_bursts() {
    let t0 = Instant::now();
    let mut dup = TailDup::new();
    dup.set_path(t0, 1u8, Some(params()));
    dup.on_send(t0, 1, &(), &datagram(1, 500));
    // The caller slept through the deadline and the next burst began.
    dup.on_send(t0 + 50 * MS, 1, &(), &datagram(2, 500));
    assert_eq!(drain(&mut dup, t0 + 60 * MS), vec![datagram(2, 500)]);
    assert_eq!(dup.stats(1).unwrap().late, 1);
}

#[test]
fn loss_monitor_needs_a_sample_then_follows_the_rate() {
    let mut m = LossMonitor::new();
    assert!(
        !m.update(100, 1),
        "one loss in 100 packets is too little to judge"
    );
    assert!(!m.update(400, 2), "nor two in 400");
    assert!(m.update(450, 3), "three losses decide before 500 packets");
    let mut m = LossMonitor::new();
    assert!(m.update(400, 40), "10% loss in 400 packets");
    assert!(m.update(600, 50), "about 8% loss");
    // 100,000 clean packets later the estimate has decayed below OFF.
    let mut sent = 600;
    for _ in 0..100 {
        sent += 1000;
        m.update(sent, 50);
    }
    assert!(!m.is_lossy(), "rate {}", m.loss_rate());
    // Three losses in 5000 packets (0.06%) do not switch on early ...
    let mut m = LossMonitor::new();
    assert!(!m.update(5000, 3));
    // ... and once on early, a short clean stretch does not switch off.
    let mut m = LossMonitor::new();
    assert!(m.update(300, 3));
    assert!(m.update(490, 3), "3 in 490 is still above ON");
    // Hysteresis: 0.07% stays off ...
    let mut m = LossMonitor::new();
    assert!(!m.update(100_000, 70));
    // ... and a new connection (totals back to zero) starts over.
    assert!(!m.update(10, 0));
    assert_eq!(m.loss_rate(), 0.0);
    assert!(m.update(2000, 10), "0.5% on the new connection");
    assert!((m.loss_rate() - 0.005).abs() < 1e-4);
    // Between OFF and ON the decision holds.
    let mut sent = 2000;
    let mut lost = 10;
    for i in 0..200 {
        sent += 1000;
        lost += u64::from(i % 4 != 0); // 0.075%
        m.update(sent, lost);
    }
    assert!(m.loss_rate() >= LossMonitor::OFF && m.loss_rate() < LossMonitor::ON);
    assert!(m.is_lossy());
}

#[derive(Debug, Clone)]
enum Op {
    Send { gap_us: u32, len: usize },
    Unheld { gap_us: u32, len: usize },
    Poll { gap_us: u32 },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0u32..30_000, 1usize..1500).prop_map(|(gap_us, len)| Op::Send { gap_us, len }),
        1 => (0u32..30_000, 1usize..1500).prop_map(|(gap_us, len)| Op::Unheld { gap_us, len }),
        4 => (0u32..40_000).prop_map(|gap_us| Op::Poll { gap_us }),
    ]
}

proptest! {
    /// Whatever the sends and polls: a copy is byte-identical to a datagram
    /// of the current tail, goes out only after the quiet time, at most
    /// once, and the copies never exceed the bucket.
    #[test]
    fn copies_are_tails_sent_once_within_budget(ops in proptest::collection::vec(op(), 1..300)) {
        let t0 = Instant::now();
        let p = params();
        let mut dup = TailDup::new();
        dup.set_path(t0, 1u8, Some(p));
        let mut now = t0;
        // Every datagram sent; `None` for the unheld ones.
        let mut sent: Vec<(Instant, Option<Vec<u8>>)> = Vec::new();
        let held = |d: &Option<Vec<u8>>| d.as_ref().is_some_and(|d| d.len() >= MIN_HELD_DATAGRAM);
        let mut copies: HashMap<Vec<u8>, u32> = HashMap::new();
        let mut copied_bytes = 0usize;
        for op in ops {
            match op {
                Op::Send { gap_us, len } => {
                    now += Duration::from_micros(gap_us.into());
                    let d = datagram(sent.len() as u32, len);
                    dup.on_send(now, 1, &(), &d);
                    sent.push((now, Some(d)));
                }
                Op::Unheld { gap_us, len } => {
                    now += Duration::from_micros(gap_us.into());
                    dup.on_send_unheld(now, 1, len);
                    sent.push((now, None));
                }
                Op::Poll { gap_us } => {
                    now += Duration::from_micros(gap_us.into());
                    if let Some(t) = dup.poll_timeout() {
                        prop_assert!(t > sent.last().unwrap().0);
                    }
                    while let Some(c) = dup.poll_transmit(now) {
                        let (last_at, _) = sent.last().unwrap();
                        prop_assert!(now >= *last_at + p.quiet, "copy before the burst ended");
                        let pos = sent.iter().position(|(_, d)| d.as_ref() == Some(&c.datagram));
                        prop_assert!(pos.is_some(), "a copy of something never sent");
                        let pos = pos.unwrap();
                        prop_assert!(held(&sent[pos].1), "a datagram too small to hold");
                        let later = sent[pos..].iter().filter(|(_, d)| held(d)).count();
                        prop_assert!(later <= p.max_datagrams, "not from the tail");
                        prop_assert!(sent[pos..].iter().all(|(_, d)| d.is_some()), "older than an unheld send");
                        let n = copies.entry(c.datagram.clone()).or_default();
                        *n += 1;
                        prop_assert_eq!(*n, 1, "copied twice");
                        copied_bytes += c.datagram.len();
                        dup.recycle(c.datagram);
                    }
                }
            }
        }
        let bound = p.max_bytes as f64 + p.refill_bytes_per_sec * (now - t0).as_secs_f64();
        prop_assert!(copied_bytes as f64 <= bound + 1e-6);
        let s = dup.stats(1).unwrap();
        prop_assert_eq!(s.bytes as usize, copied_bytes);
        prop_assert_eq!(s.datagrams as usize, copies.len());
    }
}

#[derive(Debug, Clone)]
enum EndOp {
    Send { gap_us: u32, len: usize },
    Poll { gap_us: u32 },
    Ends(bool),
}

fn end_op() -> impl Strategy<Value = EndOp> {
    prop_oneof![
        6 => (0u32..8_000, 40usize..1500).prop_map(|(gap_us, len)| EndOp::Send { gap_us, len }),
        3 => (0u32..30_000).prop_map(|gap_us| EndOp::Poll { gap_us }),
        1 => any::<bool>().prop_map(EndOp::Ends),
    ]
}

proptest! {
    /// Sends, polls and stream ends in any order: everything that goes out
    /// is a copy of a datagram sent, or parity that parses and lists
    /// datagrams sent; nothing goes out before a quiet; the total stays
    /// within the bucket; and any parity group of which two shards went
    /// out rebuilds any one of its sources from the others.
    #[test]
    fn stream_ends_give_parity_over_what_was_sent(ops in proptest::collection::vec(end_op(), 1..400)) {
        let t0 = Instant::now();
        let mut p = params();
        p.max_bytes = 40_000;
        p.refill_bytes_per_sec = 200_000.0;
        let mut dup = TailDup::new();
        dup.set_path(t0, 1u8, Some(p));
        let mut now = t0;
        let mut last_send = None;
        let mut sent: HashMap<u32, Vec<u8>> = HashMap::new();
        let mut groups: HashMap<u32, Vec<Vec<u8>>> = HashMap::new();
        let mut out_bytes = 0usize;
        let mut n = 0u32;
        for op in ops {
            match op {
                EndOp::Send { gap_us, len } => {
                    now += Duration::from_micros(gap_us.into());
                    let d = datagram(n, len);
                    n += 1;
                    dup.on_send(now, 1, &(), &d);
                    sent.insert(fec::datagram_id(&d), d);
                    last_send = Some(now);
                }
                EndOp::Ends(on) => dup.expect_ends(1, on),
                EndOp::Poll { gap_us } => {
                    now += Duration::from_micros(gap_us.into());
                    while let Some(c) = dup.poll_transmit(now) {
                        let last = last_send.expect("nothing goes out before a send");
                        prop_assert!(now >= last + p.end_quiet, "out before the quiet");
                        out_bytes += c.datagram.len();
                        if fec::is_parity(&c.datagram) {
                            let parsed = fec::Parity::parse(&c.datagram).unwrap();
                            for (id, len) in &parsed.sources {
                                let source = sent.get(id);
                                prop_assert!(source.is_some_and(|s| s.len() == usize::from(*len)), "parity over something never sent");
                            }
                            groups.entry(parsed.group).or_default().push(c.datagram.clone());
                        } else {
                            prop_assert!(sent.get(&fec::datagram_id(&c.datagram)) == Some(&c.datagram), "a copy of something never sent");
                        }
                        dup.recycle(c.datagram);
                    }
                }
            }
        }
        let bound = p.max_bytes as f64 + p.refill_bytes_per_sec * (now - t0).as_secs_f64();
        prop_assert!(out_bytes as f64 <= bound + 1e-6);
        for shards in groups.values().filter(|s| s.len() >= 2) {
            let sources = fec::Parity::parse(&shards[0]).unwrap().sources;
            let mut rx = fec::Receiver::new();
            for (id, _) in &sources[1..] {
                rx.on_datagram(&sent[id]);
            }
            let rebuilt: Vec<Vec<u8>> = shards.iter().flat_map(|s| rx.on_parity(s).unwrap()).collect();
            prop_assert_eq!(rebuilt, vec![sent[&sources[0].0].clone()]);
        }
    }
}

#[test]
fn a_sender_waiting_for_its_window_is_at_no_end() {
    // A stream's end is expected (its last bytes are written) but most of
    // it is still to go: the sender stalls on its congestion window (the
    // acknowledgements come late through a queue). That quiet gets
    // neither parity nor copies; the real end, with nothing left to send,
    // gets its parity.
    let t0 = Instant::now();
    let mut dup = TailDup::new();
    let mut p = params();
    p.rate_bytes_per_sec = Some(1_000_000.0);
    dup.set_path(t0, 1u8, Some(p));
    dup.expect_ends(1, true);
    let mut now = t0;
    let mut n = 0u32;
    let mut burst = |dup: &mut TailDup<u8, ()>, now: &mut Instant, count: usize| {
        for _ in 0..count {
            dup.on_send(*now, 1, &(), &datagram(n, 1000));
            n += 1;
            *now += MS;
        }
    };
    burst(&mut dup, &mut now, 60);
    dup.sender_blocked(1, true);
    now += 30 * MS;
    assert!(drain(&mut dup, now).is_empty(), "a stall is no end");
    assert_eq!(dup.poll_timeout(), None, "its tail is dropped");
    let s = dup.stats(1).unwrap();
    assert_eq!((s.stalled, s.parity_groups, s.datagrams), (32, 0, 0));
    // The window opens: the rest goes, and then nothing waits.
    dup.sender_blocked(1, false);
    burst(&mut dup, &mut now, 20);
    now += 30 * MS;
    let parity = drain(&mut dup, now);
    assert_eq!(parity.len(), 4);
    assert!(parity.iter().all(|p| fec::is_parity(p)));
    // The flag holds whatever the sender said last: blocked again in a
    // later stall, its quiet is dropped again.
    burst(&mut dup, &mut now, 5);
    dup.sender_blocked(1, true);
    now += 30 * MS;
    assert!(drain(&mut dup, now).is_empty());
    assert_eq!(dup.stats(1).unwrap().stalled, 32 + 5);
}
