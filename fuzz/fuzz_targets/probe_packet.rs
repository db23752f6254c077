//! Feeds arbitrary bytes to the `wanopt probe` datagram parser and to a
//! reflector: they must never panic; whatever parses must emit back to the
//! same header bytes; every answer of the reflector must parse, and a
//! train is never answered with more bytes than it brought.
#![no_main]

use libfuzzer_sys::fuzz_target;
use wanopt_proto::probe::{Kind, Packet, Reflector, HEADER_LEN};

fuzz_target!(|data: &[u8]| {
    if let Ok(p) = Packet::parse(data) {
        let emitted = p.emit(data.len());
        assert_eq!(&emitted[..HEADER_LEN], &data[..HEADER_LEN]);
        assert_eq!(Packet::parse(&emitted), Ok(p));
    }
    // The same bytes cut into datagrams of a few sizes, through one reflector.
    let mut reflector = Reflector::new();
    let (mut train_bytes, mut back_bytes) = (0usize, 0usize);
    for size in [HEADER_LEN, 64, 200] {
        for (i, datagram) in data.chunks(size).enumerate() {
            if Packet::parse(datagram).is_ok_and(|p| p.kind == Kind::Train) {
                train_bytes += datagram.len();
            }
            for answer in reflector.handle(datagram, i as u64).unwrap_or_default() {
                let kind = Packet::parse(&answer).map(|p| p.kind);
                assert!(kind.is_ok());
                if kind == Ok(Kind::TrainBack) {
                    back_bytes += answer.len();
                }
            }
            assert!(back_bytes <= train_bytes);
        }
    }
});
