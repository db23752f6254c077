use super::*;

fn path(n: u8) -> PathId {
    PathId::new(n).unwrap()
}

fn both() -> PathSet {
    let mut set = PathSet::EMPTY;
    set.insert(path(1));
    set.insert(path(2));
    set
}

/// The data datagram `gseq` on `on` as `pseq`, sent at `tx_us`.
fn datagram(on: u8, gseq: u32, pseq: u32, tx_us: u32) -> Vec<u8> {
    DataRepr {
        path: path(on),
        hold_exempt: false,
        reinjected: false,
        alone: false,
        gseq,
        pseq,
        tx_us,
    }
    .emit(&gseq.to_be_bytes())
}

fn receive(r: &mut BondReceiver<Vec<u8>>, now: Instant, on: u8, bytes: &[u8]) {
    r.handle_data(now, path(on), bytes, <[u8]>::to_vec).unwrap();
}

fn released(r: &mut BondReceiver<Vec<u8>>) -> Vec<u32> {
    std::iter::from_fn(|| r.poll_release())
        .map(|b| u32::from_be_bytes(b[..4].try_into().unwrap()))
        .collect()
}

#[test]
fn a_path_is_acked_every_eight_datagrams_with_its_losses_in_the_bitmap() {
    let t0 = Instant::now();
    let mut r = BondReceiver::new(t0);
    r.set_up(t0, both());
    // pseq 10 to 18 without 12.
    for (gseq, pseq) in (0..9).map(|i| (i, 10 + i)).filter(|&(_, p)| p != 12) {
        receive(&mut r, t0, 1, &datagram(1, gseq, pseq, 0));
    }
    let later = t0 + Duration::from_micros(800);
    let ack = r.poll_ack(later).expect("eight datagrams");
    assert_eq!((ack.path, ack.largest, ack.received), (path(1), 18, 8));
    // 17..13 received, 12 not, 11 and 10 received.
    assert_eq!(ack.sack, 0b110_11111);
    assert_eq!(ack.acked().count(), 8);
    assert_eq!(ack.ack_delay_us(), 800);
    assert_eq!(r.poll_ack(later), None);
    assert_eq!(r.poll_timeout(), r.reorder.poll_timeout());
}

#[test]
fn a_lone_datagram_is_acked_within_the_ack_delay() {
    let t0 = Instant::now();
    let mut r = BondReceiver::new(t0);
    receive(&mut r, t0, 2, &datagram(2, 0, 0, 0));
    assert_eq!(r.poll_ack(t0), None);
    assert_eq!(r.poll_timeout(), Some(t0 + MAX_ACK_DELAY));
    let ack = r.poll_ack(t0 + MAX_ACK_DELAY).unwrap();
    assert_eq!((ack.path, ack.largest, ack.sack), (path(2), 0, 0));
    assert_eq!(r.poll_timeout(), None);
}

#[test]
fn the_bitmap_slides_and_forgets_past_its_span() {
    let t0 = Instant::now();
    let mut r = BondReceiver::new(t0);
    receive(&mut r, t0, 1, &datagram(1, 0, 100, 0));
    receive(&mut r, t0, 1, &datagram(1, 1, 164, 0));
    assert_eq!(r.poll_ack(t0 + MAX_ACK_DELAY).unwrap().sack, 1 << 63);
    receive(&mut r, t0, 1, &datagram(1, 2, 230, 0));
    assert_eq!(r.poll_ack(t0 + MAX_ACK_DELAY).unwrap().sack, 0);
    // A late one below the largest fills its bit.
    receive(&mut r, t0, 1, &datagram(1, 3, 228, 0));
    assert_eq!(r.poll_ack(t0 + MAX_ACK_DELAY).unwrap().sack, 0b10);
}

#[test]
fn the_hold_time_is_the_skew_plus_jitter() {
    let t0 = Instant::now();
    let mut r = BondReceiver::new(t0);
    r.set_up(t0, both());
    assert_eq!(r.hold(), MAX_HOLD);
    // Sent every ms alternately; path 2 takes 20 ms longer. The sender's
    // clock is 5 s ahead of the receiver's.
    let offset = 5_000_000u32;
    let mut out = Vec::new();
    let mut arrivals: Vec<(u64, u8, u32)> = (0..200u32)
        .map(|g| {
            let on = 1 + (g % 2) as u8;
            let delay = if on == 2 { 30_000 } else { 10_000 };
            (u64::from(g) * 1000 + delay, on, g)
        })
        .collect();
    arrivals.sort();
    for (at_us, on, g) in arrivals {
        let now = t0 + Duration::from_micros(at_us);
        r.handle_timeout(now);
        let tx = (u64::from(g) * 1000) as u32 + offset;
        receive(&mut r, now, on, &datagram(on, g, g / 2, tx));
        out.extend(released(&mut r));
    }
    assert_eq!(out, (0..200).collect::<Vec<_>>());
    let stats = r.reorder_stats();
    assert_eq!((stats.late, stats.timed_out, stats.lost), (0, 0, 0));
    assert_eq!(r.hold(), Duration::from_millis(22));
    let slow = r.path(path(2)).unwrap();
    assert_eq!(
        (slow.received, slow.behind),
        (100, Duration::from_millis(20))
    );
    assert_eq!(r.path(path(1)).unwrap().behind, Duration::ZERO);
    assert_eq!(r.path(path(3)), None);
}

#[test]
fn bytes_that_are_not_bond_data_are_refused() {
    let t0 = Instant::now();
    let mut r = BondReceiver::<Vec<u8>>::new(t0);
    let mut bad = datagram(1, 0, 0, 0);
    bad[1] = 0x40;
    for bytes in [&b""[..], &[0x29; 5][..], &bad[..], &[0x2A; 40][..]] {
        assert!(r.handle_data(t0, path(1), bytes, <[u8]>::to_vec).is_err());
    }
    assert_eq!(r.poll_release(), None);
    assert_eq!(r.poll_ack(t0 + MAX_ACK_DELAY), None);
}
