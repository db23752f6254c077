//! Feeds arbitrary bytes to the control-stream message parser: it must never
//! panic, and whatever parses must emit back to the same bytes.
#![no_main]

use libfuzzer_sys::fuzz_target;
use wanopt_proto::{control_len, Control, ControlRepr};

fuzz_target!(|data: &[u8]| {
    if let Some(prefix) = data.get(..4).and_then(|p| <&[u8; 4]>::try_from(p).ok()) {
        let _ = control_len(prefix);
    }
    if let Ok(view) = Control::new_checked(data) {
        if let Ok(repr) = ControlRepr::parse(&view) {
            let emitted = repr.emit().expect("a parsed message emits");
            assert_eq!(&emitted[..], &data[..view.length()]);
            let ControlRepr::Hello { cache_hello, .. } = &repr;
            // The node hands the payload to the codec's parser.
            let _ = wanopt_codec::Hello::parse(cache_hello);
        }
    }
});
