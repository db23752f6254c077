use super::super::sim::{run, run_with, Link, DATAGRAM};
use super::super::wire::Data;
use super::*;

fn path(n: u8) -> PathId {
    PathId::new(n).unwrap()
}

/// A sender with path 1 at 80 ms and path 2 at 40 ms, both up.
fn sender(t0: Instant) -> BondSender {
    let mut sender = BondSender::new(t0, BbrConfig::default(), 1500, 1);
    for (n, rtt) in [(1, 80), (2, 40)] {
        sender.add_path(path(n));
        sender.set_up(t0, path(n), true);
        sender.set_probe_rtt(path(n), Duration::from_millis(rtt));
    }
    sender
}

/// What the sender sends in the 100 ms from `now` (no ack comes).
fn sent(sender: &mut BondSender, now: Instant) -> Vec<(PathId, DataRepr, Vec<u8>)> {
    let mut out = Vec::new();
    for ms in 0..100 {
        let at = now + Duration::from_millis(ms);
        out.extend(std::iter::from_fn(|| sender.poll_transmit(at)));
    }
    out.into_iter()
        .map(|(path, bytes)| {
            let view = Data::new_checked(&bytes[..]).unwrap();
            let repr = DataRepr::parse(&view).unwrap();
            (path, repr, view.inner().to_vec())
        })
        .collect()
}

#[test]
fn a_short_transfer_takes_the_faster_path_alone() {
    let t0 = Instant::now();
    let mut s = sender(t0);
    for i in 0..8u8 {
        assert_eq!(s.handle_datagram(t0, vec![i; 1200]), Ok(path(2)));
    }
    let out = sent(&mut s, t0);
    assert!(!out.is_empty());
    for (i, (on, repr, inner)) in out.iter().enumerate() {
        assert_eq!(
            (*on, repr.path, repr.gseq, repr.pseq),
            (path(2), path(2), i as u32, i as u32)
        );
        assert!(!repr.hold_exempt && !repr.reinjected);
        // Path 1 carries nothing: the receiver need not wait for it.
        assert!(repr.alone);
        assert_eq!(inner, &vec![i as u8; 1200]);
    }
}

#[test]
fn real_time_datagrams_go_on_each_named_path_with_one_place_in_the_order() {
    let t0 = Instant::now();
    let mut s = sender(t0);
    s.handle_datagram(t0, vec![0; 1200]).unwrap();
    let mut both = PathSet::EMPTY;
    both.insert(path(1));
    both.insert(path(2));
    assert_eq!(s.handle_realtime(t0, b"voice", both), 2);
    let out = sent(&mut s, t0);
    let voice: Vec<_> = out.iter().filter(|(_, r, _)| r.hold_exempt).collect();
    assert_eq!(voice.len(), 2);
    assert_eq!(voice[0].1.gseq, 1);
    assert_eq!(voice[1].1.gseq, 1);
    assert_ne!(voice[0].0, voice[1].0);
    // Ahead of the bulk datagram queued before it on the same path.
    let on_2: Vec<_> = out.iter().filter(|(p, _, _)| *p == path(2)).collect();
    assert!(on_2[0].1.hold_exempt, "{on_2:?}");
    // No path up: nothing goes, and it counts.
    s.set_up(t0, path(1), false);
    s.set_up(t0, path(2), false);
    let dropped = s.stats().dropped;
    assert_eq!(s.handle_realtime(t0, b"voice", both), 0);
    assert_eq!(s.handle_datagram(t0, vec![0; 100]), Err(Dropped::NoPath));
    assert_eq!(s.stats().dropped, dropped + 2);
}

#[test]
fn a_path_that_goes_down_hands_what_it_carried_to_the_other() {
    let t0 = Instant::now();
    let mut s = sender(t0);
    s.set_up(t0, path(2), false);
    for i in 0..6u8 {
        assert_eq!(s.handle_datagram(t0, vec![i; 1200]), Ok(path(1)));
    }
    let first: Vec<_> = std::iter::from_fn(|| s.poll_transmit(t0)).collect();
    assert!(
        (1..6).contains(&first.len()),
        "the pacer's burst: {first:?}"
    );
    let later = t0 + Duration::from_millis(5);
    s.set_up(later, path(2), true);
    s.set_up(later, path(1), false);
    assert!(!s.usable(path(1)) && s.usable(path(2)));
    let again = sent(&mut s, later);
    // Every datagram, in its order, once, on path 2, marked.
    let gseqs: Vec<u32> = again.iter().map(|(_, r, _)| r.gseq).collect();
    assert_eq!(gseqs, (0..6).collect::<Vec<_>>());
    for (on, repr, inner) in &again {
        assert_eq!(*on, path(2));
        assert!(repr.reinjected);
        assert_eq!(inner, &vec![repr.gseq as u8; 1200]);
    }
    assert_eq!(s.stats().reinjected, 6);
    assert_eq!(s.path_stats(path(1)).unwrap().stalls, 1);
    // Up again a second after the stall, it carries data again.
    s.set_up(later + REJOIN_HOLD / 2, path(1), true);
    assert!(!s.usable(path(1)));
    s.set_up(later + REJOIN_HOLD, path(1), true);
    assert!(s.usable(path(1)));
}

/// The lab's two links: 30 Mbit/s at 80 ms and 20 Mbit/s at 40 ms.
fn lab_links() -> [Link; 2] {
    [Link::new(30, 80), Link::new(20, 40)]
}

/// What the links' sum carries of the source's datagrams (each also pays
/// the bond's header, UDP and IP).
fn sum_bps() -> f64 {
    50e6 * DATAGRAM as f64 / (DATAGRAM + DATA_HEADER_LEN + IP_UDP_HEADERS) as f64
}

#[test]
fn two_clean_links_add_up_to_their_sum() {
    let out = run(lab_links(), 20, 7);
    assert!(out.goodput_bps >= 0.95 * sum_bps(), "{out:?}");
    // QUIC above loses only what the links dropped, sees nothing late,
    // and is never refused in the second half.
    let dropped: u64 = out.paths.iter().map(|p| p.lost).sum();
    assert!(out.quic_lost <= dropped + out.late, "{out:?}");
    assert!(out.late * 1000 <= out.delivered, "{out:?}");
    assert_eq!(out.twice, 0);
    assert!(out.longest_gap < Duration::from_millis(100), "{out:?}");
}

#[test]
fn one_percent_loss_on_one_link_costs_the_sum_little() {
    let [mut lossy, clean] = lab_links();
    lossy.loss_ppm = 10_000;
    let out = run([lossy, clean], 20, 11);
    assert!(out.goodput_bps >= 0.9 * sum_bps(), "{out:?}");
    assert!(out.random_losses > 200, "{out:?}");
    assert!(out.late * 1000 <= out.delivered, "{out:?}");
}

#[test]
fn a_cut_link_loses_nothing_and_the_sum_returns_after_it() {
    let [mut cut, other] = lab_links();
    cut.cut = Some((Duration::from_secs(6), Duration::from_secs(11)));
    let out = run([cut, other], 20, 13);
    let dropped: u64 = out.paths.iter().map(|p| p.lost).sum();
    // What was on the cut link went again on the other: QUIC lost only
    // what queues dropped, and waited at most the stall.
    assert!(out.sender.reinjected > 100, "{out:?}");
    assert!(out.quic_lost <= dropped + out.late, "{out:?}");
    assert!(out.late * 1000 <= out.delivered, "{out:?}");
    assert!(out.longest_gap < Duration::from_millis(300), "{out:?}");
    // The other link carries on alone, and within 5 s of the return both
    // are full again.
    let secs = Duration::from_secs;
    let alone = out.goodput_between(secs(7), secs(11));
    assert!(alone >= 0.9 * sum_bps() * 20.0 / 50.0, "{alone} {out:?}");
    let back = out.goodput_between(secs(16), secs(20));
    assert!(back >= 0.9 * sum_bps(), "{back} {out:?}");
}

#[test]
fn a_declared_rate_is_never_exceeded() {
    // Link 1 carries 30 Mbit/s; it is declared at 20.
    let cap = 20_000_000 / 8;
    let out = run_with(lab_links(), 12, 17, |_, sender| {
        sender.set_rate_cap(path(1), Some(cap));
    });
    assert!(out.peak_bps[0] <= 1.02 * 20e6, "{out:?}");
    assert!(out.link_bps[0] >= 0.9 * 20e6, "{out:?}");
    assert!(out.goodput_bps >= 0.9 * sum_bps() * 40.0 / 50.0, "{out:?}");
}
