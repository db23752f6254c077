use std::collections::BTreeSet;

use proptest::prelude::*;

use super::*;

const H: Duration = Duration::from_millis(30);

fn path(n: u8) -> PathId {
    PathId::new(n).unwrap()
}

fn set(paths: &[u8]) -> PathSet {
    let mut set = PathSet::EMPTY;
    for &n in paths {
        set.insert(path(n));
    }
    set
}

/// A buffer of datagrams that are their own `gseq` (4 bytes, big endian).
fn buffer(now: Instant, up: &[u8]) -> ReorderBuffer<Vec<u8>> {
    let mut buffer = ReorderBuffer::new(H);
    buffer.set_up(now, set(up));
    buffer
}

fn send(buffer: &mut ReorderBuffer<Vec<u8>>, now: Instant, on: u8, gseq: u32) {
    buffer.handle_data(
        now,
        path(on),
        gseq,
        Order::Held,
        gseq.to_be_bytes().to_vec(),
    );
}

fn released(buffer: &mut ReorderBuffer<Vec<u8>>) -> Vec<u32> {
    std::iter::from_fn(|| buffer.poll_release())
        .map(|bytes| u32::from_be_bytes(bytes[..4].try_into().unwrap()))
        .collect()
}

#[test]
fn datagrams_in_order_go_straight_up() {
    let now = Instant::now();
    let mut b = buffer(now, &[1, 2]);
    for g in 0..5 {
        send(&mut b, now, 1, g);
    }
    assert_eq!(released(&mut b), [0, 1, 2, 3, 4]);
    assert_eq!(b.held(), 0);
    assert_eq!(b.poll_timeout(), None);
    assert_eq!(b.stats().in_order, 5);
}

#[test]
fn a_slower_path_s_datagrams_are_waited_for() {
    let t0 = Instant::now();
    let mut b = buffer(t0, &[1, 2]);
    // Path 1 carries the even ones and is 20 ms faster.
    for g in [0, 2, 4] {
        send(&mut b, t0, 1, g);
    }
    assert_eq!(released(&mut b), [0]);
    assert_eq!(b.poll_timeout(), Some(t0 + H));
    let later = t0 + Duration::from_millis(20);
    for g in [1, 3] {
        send(&mut b, later, 2, g);
    }
    assert_eq!(released(&mut b), [1, 2, 3, 4]);
    let stats = b.stats();
    assert_eq!((stats.lost, stats.timed_out, stats.late), (0, 0, 0));
    assert_eq!(stats.held_peak, 3);
}

#[test]
fn on_one_busy_path_a_gap_is_a_loss_at_once() {
    let now = Instant::now();
    let mut b = buffer(now, &[1]);
    for g in [0, 1, 3, 4] {
        send(&mut b, now, 1, g);
    }
    assert_eq!(released(&mut b), [0, 1, 3, 4]);
    assert_eq!(b.stats().lost, 1);
}

#[test]
fn a_gap_both_paths_passed_is_a_loss() {
    let now = Instant::now();
    let mut b = buffer(now, &[1, 2]);
    send(&mut b, now, 1, 0);
    send(&mut b, now, 1, 2);
    assert_eq!(released(&mut b), [0]);
    // Path 2 delivers 3: 1 was on neither path's way.
    send(&mut b, now, 2, 3);
    assert_eq!(released(&mut b), [2, 3]);
    assert_eq!(b.stats().lost, 1);
}

#[test]
fn a_path_that_delivered_nothing_holds_a_gap_until_the_hold_time() {
    let t0 = Instant::now();
    let mut b = buffer(t0, &[1, 2]);
    send(&mut b, t0, 1, 1);
    send(&mut b, t0 + Duration::from_millis(5), 1, 2);
    assert_eq!(released(&mut b), []);
    assert_eq!(b.poll_timeout(), Some(t0 + H));
    b.handle_timeout(t0 + H - Duration::from_millis(1));
    assert_eq!(released(&mut b), []);
    b.handle_timeout(t0 + H);
    assert_eq!(released(&mut b), [1, 2]);
    assert_eq!(b.stats().timed_out, 1);
    // Path 2 going down instead would have released them at once.
    let mut b = buffer(t0, &[1, 2]);
    send(&mut b, t0, 1, 1);
    b.set_up(t0, set(&[1]));
    assert_eq!(released(&mut b), [1]);
    assert_eq!(b.stats().lost, 1);
}

#[test]
fn a_datagram_sent_alone_gives_up_the_gaps_before_it_at_once() {
    let t0 = Instant::now();
    // Path 2 is up but carries nothing: without the flag the gap before
    // 2 would wait the hold time.
    let mut b = buffer(t0, &[1, 2]);
    send(&mut b, t0, 1, 0);
    b.handle_data(t0, path(1), 2, Order::Alone, 2u32.to_be_bytes().to_vec());
    assert_eq!(released(&mut b), [0, 2]);
    assert_eq!(b.stats().lost, 1);
    assert_eq!(b.poll_timeout(), None);
}

#[test]
fn a_late_datagram_still_goes_up_and_a_second_copy_does_not() {
    let t0 = Instant::now();
    let mut b = buffer(t0, &[1, 2]);
    send(&mut b, t0, 1, 1);
    b.handle_timeout(t0 + H);
    assert_eq!(released(&mut b), [1]);
    send(&mut b, t0 + H, 2, 0);
    assert_eq!(released(&mut b), [0]);
    assert_eq!(b.stats().late, 1);
    for g in [0, 1] {
        send(&mut b, t0 + H, 2, g);
    }
    send(&mut b, t0 + H, 1, 3);
    send(&mut b, t0 + H, 2, 3);
    assert_eq!(released(&mut b), []);
    assert_eq!(b.stats().duplicates, 3);
}

#[test]
fn hold_exempt_datagrams_go_up_at_once_and_keep_their_place() {
    let t0 = Instant::now();
    let mut b = buffer(t0, &[1, 2]);
    send(&mut b, t0, 1, 0);
    b.handle_data(t0, path(1), 2, Order::Exempt, 2u32.to_be_bytes().to_vec());
    send(&mut b, t0, 1, 3);
    assert_eq!(released(&mut b), [0, 2]);
    send(&mut b, t0, 2, 1);
    assert_eq!(released(&mut b), [1, 3]);
    let stats = b.stats();
    assert_eq!((stats.exempt, stats.in_order), (1, 3));
    // Its second copy is dropped.
    b.handle_data(t0, path(2), 2, Order::Exempt, vec![0; 4]);
    assert_eq!(released(&mut b), []);
    assert_eq!(b.stats().duplicates, 1);
}

#[test]
fn the_order_survives_the_sequence_number_wrapping() {
    let t0 = Instant::now();
    let mut b = buffer(t0, &[1, 2]);
    let start = u32::MAX - 2;
    // Jump to just below the wrap (each jump less than half the space:
    // gives up the gaps before it).
    for g in [0x7000_0000, 0xE000_0000, start] {
        send(&mut b, t0, 1, g);
    }
    assert_eq!(released(&mut b), [0x7000_0000, 0xE000_0000, start]);
    // From before the first: late, not the first.
    let mut fresh = buffer(t0, &[1, 2]);
    send(&mut fresh, t0, 1, u32::MAX);
    send(&mut fresh, t0, 1, 1);
    send(&mut fresh, t0, 2, 0);
    assert_eq!(released(&mut fresh), [u32::MAX, 0, 1]);
    assert_eq!(fresh.stats().late, 1);
    let order = [start.wrapping_add(2), 1, start.wrapping_add(1), 0];
    send(&mut b, t0, 1, order[0]);
    send(&mut b, t0, 1, order[1]);
    send(&mut b, t0, 2, order[2]);
    send(&mut b, t0, 2, order[3]);
    assert_eq!(released(&mut b), [u32::MAX - 1, u32::MAX, 0, 1]);
}

#[test]
fn a_datagram_far_ahead_gives_up_every_gap_before_it() {
    let t0 = Instant::now();
    let mut b = buffer(t0, &[1, 2]);
    send(&mut b, t0, 1, 1);
    send(&mut b, t0, 1, 5);
    send(&mut b, t0, 1, 1_000_000);
    assert_eq!(released(&mut b), [1, 5, 1_000_000]);
    assert_eq!(b.stats().forced, 1_000_000 - 2);
    assert_eq!(b.held(), 0);
}

#[test]
fn a_full_buffer_gives_up_its_oldest_gap() {
    let t0 = Instant::now();
    let mut b = buffer(t0, &[1, 2]);
    for g in 1..=MAX_HELD as u32 {
        send(&mut b, t0, 1, g);
    }
    assert_eq!(b.held(), MAX_HELD);
    send(&mut b, t0, 1, MAX_HELD as u32 + 1);
    assert_eq!(b.held(), 0);
    assert_eq!(released(&mut b).len(), MAX_HELD + 1);
    assert_eq!(b.stats().forced, 1);
    // Bytes count too.
    let mut b = buffer(t0, &[1, 2]);
    for g in 1..=4 {
        b.handle_data(t0, path(1), g, Order::Held, vec![0; MAX_HELD_BYTES / 3]);
    }
    assert!(b.held() < 4);
    assert_eq!(b.stats().forced, 1);
}

/// One datagram of a model run: which path, when it arrives, how many
/// copies.
#[derive(Debug, Clone)]
struct Arrival {
    gseq: u32,
    path: u8,
    delay_ms: u64,
    copies: u8,
}

fn arrivals() -> impl Strategy<Value = Vec<Arrival>> {
    proptest::collection::vec((1u8..=2, 0u8..=2), 1..300).prop_map(|cells| {
        cells
            .into_iter()
            .enumerate()
            .map(|(i, (path, copies))| Arrival {
                gseq: i as u32,
                path,
                // Path 2 is 20 ms slower; each datagram is sent 1 ms
                // after the previous one.
                delay_ms: i as u64 + if path == 2 { 20 } else { 0 },
                copies,
            })
            .collect()
    })
}

proptest! {
    /// Against the obvious model: every datagram that arrives goes up
    /// exactly once; with a hold time longer than the skew and no loss
    /// they go up in order; whatever the losses, what goes up out of
    /// order was counted late.
    #[test]
    fn every_datagram_goes_up_once_and_in_order_unless_counted_late(run in arrivals()) {
        let t0 = Instant::now();
        let mut b = buffer(t0, &[1, 2]);
        let mut schedule: Vec<_> = run
            .iter()
            .flat_map(|a| std::iter::repeat_n(a.clone(), usize::from(a.copies)))
            .collect();
        schedule.sort_by_key(|a| (a.delay_ms, a.path));
        let mut out = Vec::new();
        for a in &schedule {
            let now = t0 + Duration::from_millis(a.delay_ms);
            b.handle_timeout(now);
            send(&mut b, now, a.path, a.gseq);
            out.extend(released(&mut b));
        }
        b.set_up(t0, PathSet::EMPTY);
        b.handle_timeout(t0 + Duration::from_secs(10));
        out.extend(released(&mut b));
        let arrived: BTreeSet<u32> = run.iter().filter(|a| a.copies > 0).map(|a| a.gseq).collect();
        let unique: BTreeSet<u32> = out.iter().copied().collect();
        prop_assert_eq!(unique.len(), out.len(), "something went up twice: {:?}", out);
        prop_assert_eq!(&unique, &arrived);
        let stats = b.stats();
        let descents = out.windows(2).filter(|w| w[1] < w[0]).count() as u64;
        prop_assert!(descents <= stats.late, "{:?} {:?}", out, stats);
        if run.iter().all(|a| a.copies > 0) {
            prop_assert_eq!(stats.late, 0, "{:?}", stats);
            prop_assert_eq!(&out, &arrived.iter().copied().collect::<Vec<_>>());
        }
    }
}
