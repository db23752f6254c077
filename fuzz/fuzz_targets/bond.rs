//! Feeds arbitrary bytes to the bond's parsers and its reorder buffer:
//! nothing may panic; a data header or an ack that parses re-emits to the
//! same bytes; the reorder buffer, fed records of datagrams (any path,
//! sequence numbers that mostly rise but jump, repeat and wrap, hold-exempt
//! or not, a path set that changes), hands each datagram up at most once,
//! never holds more than its bound, and once a time is handled its next
//! timeout lies after it; and a sender, fed datagrams, paths that go down
//! and up and acks of anything, never panics and sends only what it took.
#![no_main]

use std::collections::HashSet;
use std::time::{Duration, Instant};

use libfuzzer_sys::fuzz_target;
use wanopt_cc::BbrConfig;
use wanopt_proto::bond::reorder::{Order, MAX_HELD};
use wanopt_proto::bond::{Ack, AckRepr, BondSender, Data, DataRepr, ReorderBuffer, ACK_LEN};
use wanopt_proto::path::{PathId, PathSet};

/// Bytes per record of the reorder buffer's part.
const RECORD: usize = 6;

fuzz_target!(|data: &[u8]| {
    if let Ok(view) = Data::new_checked(data) {
        if let Ok(repr) = DataRepr::parse(&view) {
            assert_eq!(repr.emit(view.inner()), data);
        }
    }
    if let Ok(view) = Ack::new_checked(data) {
        if let Ok(repr) = AckRepr::parse(&view) {
            assert_eq!(repr.emit()[..], data[..ACK_LEN]);
            assert!(repr.acked().count() <= 65);
        }
    }

    let t0 = Instant::now();
    let mut now = t0;
    let mut buffer: ReorderBuffer<Vec<u8>> = ReorderBuffer::new(Duration::from_millis(u64::from(
        data.first().copied().unwrap_or(30),
    )));
    let mut gseq = 0u32;
    let mut seen: HashSet<u64> = HashSet::new();
    for (id, record) in data.chunks_exact(RECORD).enumerate() {
        now += Duration::from_micros(u64::from(record[0]) * 100);
        buffer.handle_timeout(now);
        let path = PathId::new(record[1] % 15 + 1).unwrap();
        if record[1] & 0x80 != 0 {
            let mut up = PathSet::EMPTY;
            for n in 1..=4u8 {
                if record[2] & (1 << n) != 0 {
                    up.insert(PathId::new(n).unwrap());
                }
            }
            buffer.set_up(now, up);
        }
        // Mostly rising, sometimes back, sometimes far ahead.
        gseq = match record[3] {
            0xFF => gseq.wrapping_add(u32::from_be_bytes([record[4], record[5], 0, 0])),
            delta => gseq.wrapping_add_signed(i32::from(delta as i8)),
        };
        let payload = (id as u64).to_be_bytes().to_vec();
        let order = match (record[1] & 0x40 != 0, record[2] & 0x03) {
            (true, _) => Order::Exempt,
            (false, 1) => Order::Reinjected,
            (false, 2) => Order::Alone,
            (false, _) => Order::Held,
        };
        buffer.handle_data(now, path, gseq, order, payload);
        assert!(buffer.held() <= MAX_HELD);
        while let Some(out) = buffer.poll_release() {
            let id = u64::from_be_bytes(out[..8].try_into().unwrap());
            assert!(seen.insert(id), "datagram {id} went up twice");
        }
        buffer.handle_timeout(now);
        if let Some(next) = buffer.poll_timeout() {
            assert!(next > now, "next timeout {next:?} not after {now:?}");
        }
    }
    let stats = buffer.stats();
    assert!(stats.held_peak <= MAX_HELD + 1);

    sender_under_any_acks(data);
});

/// The bytes as a sender's life on two paths: datagrams to send, time
/// passing, paths going down and up, and acks of anything (forged ones
/// included). Nothing may panic (its byte counts underflow in debug
/// builds), what it sends parses, and a datagram's `gseq` is one it was
/// given.
fn sender_under_any_acks(data: &[u8]) {
    let t0 = Instant::now();
    let mut now = t0;
    let mut sender = BondSender::new(t0, BbrConfig::default(), 1500, 7);
    let paths = [PathId::new(1).unwrap(), PathId::new(2).unwrap()];
    for (path, rtt) in paths.iter().zip([80, 40]) {
        sender.add_path(*path);
        sender.set_up(t0, *path, true);
        sender.set_probe_rtt(*path, Duration::from_millis(rtt));
    }
    let mut taken = 0u32;
    let mut newest_pseq = [0u32; 2];
    for record in data.chunks_exact(RECORD) {
        now += Duration::from_micros(u64::from(record[0]) * 50);
        let path = paths[usize::from(record[1] & 1)];
        match record[1] >> 5 {
            0..=3 => {
                let len = 1 + usize::from(u16::from_be_bytes([record[2], record[3]]) % 1400);
                if sender.handle_datagram(now, vec![record[4]; len]).is_ok() {
                    taken += 1;
                }
            }
            4 => sender.set_up(now, path, record[2] & 1 != 0),
            5 => {
                let mut both = PathSet::EMPTY;
                both.insert(path);
                if sender.handle_realtime(now, &record[2..], both) > 0 {
                    taken += 1;
                }
            }
            _ => {
                let index = path.index();
                let ack = AckRepr {
                    path,
                    largest: newest_pseq[index].wrapping_add_signed(i32::from(record[2] as i8)),
                    received: u32::from(record[3]),
                    ack_delay: u16::from(record[4]),
                    sack: u64::from(record[5]).wrapping_mul(0x0101_0101_0101_0101),
                };
                sender.handle_ack(now, &ack);
            }
        }
        sender.handle_timeout(now);
        while let Some((on, bytes)) = sender.poll_transmit(now) {
            let view = Data::new_checked(&bytes[..]).expect("a bond datagram");
            let repr = DataRepr::parse(&view).expect("its header");
            assert_eq!(repr.path, on);
            assert!(repr.gseq < taken, "gseq {} of {taken} taken", repr.gseq);
            newest_pseq[on.index()] = repr.pseq;
        }
        if let Some(next) = sender.poll_timeout(now) {
            assert!(next >= now, "a timer in the past: {next:?} < {now:?}");
        }
    }
}
