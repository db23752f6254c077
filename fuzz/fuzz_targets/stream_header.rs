//! Feeds arbitrary bytes to the stream header parsers: they must never panic,
//! and whatever parses must emit back to the same bytes.
#![no_main]

use libfuzzer_sys::fuzz_target;
use wanopt_proto::{open_header_len, Open, OpenRepr, Reply, ReplyRepr};

fuzz_target!(|data: &[u8]| {
    if let Some(prefix) = data.get(..4).and_then(|p| <&[u8; 4]>::try_from(p).ok()) {
        let _ = open_header_len(prefix);
    }
    if let Ok(view) = Open::new_checked(data) {
        if let Ok(repr) = OpenRepr::parse(&view) {
            let emitted = repr.emit().expect("a parsed header emits");
            assert_eq!(&emitted[..], &data[..view.length()]);
        }
    }
    if let Ok(view) = Reply::new_checked(data) {
        if let Ok(repr) = ReplyRepr::parse(&view) {
            assert_eq!(&repr.emit()[..3], &data[..3]);
        }
    }
});
