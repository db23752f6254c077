//! Feeds arbitrary bytes to the bond's parsers and its reorder buffer:
//! nothing may panic; a data header or an ack that parses re-emits to the
//! same bytes; the reorder buffer, fed records of datagrams (any path,
//! sequence numbers that mostly rise but jump, repeat and wrap, hold-exempt
//! or not, a path set that changes), hands each datagram up at most once,
//! never holds more than its bound, and once a time is handled its next
//! timeout lies after it.
#![no_main]

use std::collections::HashSet;
use std::time::{Duration, Instant};

use libfuzzer_sys::fuzz_target;
use wanopt_proto::bond::reorder::MAX_HELD;
use wanopt_proto::bond::{Ack, AckRepr, Data, DataRepr, ReorderBuffer, ACK_LEN};
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
        buffer.handle_data(now, path, gseq, record[1] & 0x40 != 0, payload);
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
});
