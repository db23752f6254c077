//! Feeds arbitrary bytes, in arbitrary pieces, to the TCP carrier's
//! deframer: it must never panic, every frame it yields is one the bytes
//! hold, and framing them again gives back the bytes it consumed.
#![no_main]

use libfuzzer_sys::fuzz_target;
use wanopt_proto::carrier::{encode, Deframer};

fuzz_target!(|data: &[u8]| {
    let Some((&step, bytes)) = data.split_first() else {
        return;
    };
    let step = usize::from(step).max(1);
    let mut deframer = Deframer::default();
    let mut again = Vec::new();
    for piece in bytes.chunks(step) {
        deframer.extend(piece);
        loop {
            match deframer.next_frame() {
                Ok(Some(frame)) => encode(&frame, &mut again).expect("a read frame encodes"),
                Ok(None) => break,
                Err(_) => return,
            }
        }
    }
    assert_eq!(&bytes[..again.len()], &again[..]);
    assert_eq!(again.len() + deframer.buffered(), bytes.len());
});
