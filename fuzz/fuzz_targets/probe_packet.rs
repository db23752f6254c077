//! Feeds arbitrary bytes to the `wanopt probe` datagram parser and to a
//! reflector: they must never panic; whatever parses must emit back to the
//! same header bytes; every answer of the reflector must parse.
#![no_main]

use libfuzzer_sys::fuzz_target;
use wanopt_proto::probe::{Packet, Reflector, HEADER_LEN};

fuzz_target!(|data: &[u8]| {
    if let Ok(p) = Packet::parse(data) {
        let emitted = p.emit(data.len());
        assert_eq!(&emitted[..HEADER_LEN], &data[..HEADER_LEN]);
        assert_eq!(Packet::parse(&emitted), Ok(p));
    }
    // The same bytes cut into datagrams of a few sizes, through one reflector.
    let mut reflector = Reflector::new();
    for size in [HEADER_LEN, 64, 200] {
        for datagram in data.chunks(size) {
            if let Ok(Some(answer)) = reflector.handle(datagram) {
                assert!(Packet::parse(&answer).is_ok());
            }
        }
    }
});
