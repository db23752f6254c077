//! Fuzz the PPMd stream decoder: arbitrary bytes as a PPMd `StreamRun`
//! (its raw length from the input's first two bytes), on a fresh model and
//! on one that has decoded a valid run, fail or give exactly the run's
//! length, never a panic; a valid run with a byte changed is refused or
//! gives its own bytes (a change in the range coder's slack), never
//! others (the run's CRC).
//!
//! `scripts/fuzz ppmd_run`

#![no_main]

use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use wanopt_codec::frame::{Codec, DataRepr, Frame, Run, StreamDecoder};
use wanopt_codec::{
    CacheConfig, CacheId, Compression, Encoder, EncoderConfig, PeerCache, StoreConfig,
};

// Large blocks are reused across inputs (fuzz/common/reuse.rs says why).
#[path = "../common/reuse.rs"]
mod reuse;

#[global_allocator]
static ALLOCATOR: reuse::Reuse = reuse::Reuse;

/// A `StreamRun` frame's (fresh, lengths, bytes).
type OwnedRun = (bool, Vec<u8>, Vec<u8>);

/// The first two `StreamRun` frames of one flow whose text goes through
/// PPMd (about 1.5 KB of text each: a model that has seen text; larger runs
/// only cost decoding time on every input), and the second run's bytes.
struct Valid {
    runs: Vec<OwnedRun>,
    second: Vec<u8>,
}

fn valid() -> &'static Valid {
    static VALID: OnceLock<Valid> = OnceLock::new();
    VALID.get_or_init(|| {
        let dir = std::env::temp_dir().join(format!("wanopt-fuzz-ppmd-{}", std::process::id()));
        let config = CacheConfig {
            store: StoreConfig {
                capacity: 64 << 20,
                segment_size: 8 << 20,
            },
            max_peer_entries: 1 << 16,
        };
        let edge = PeerCache::open(&dir.join("edge"), config, CacheId([1; 16])).unwrap();
        let core = PeerCache::open(&dir.join("core"), config, CacheId([2; 16])).unwrap();
        core.handle_hello(&edge.hello());
        edge.handle_hello(&core.hello());
        let config = EncoderConfig {
            compression: Compression::Max { preset: 5 },
            ..EncoderConfig::default()
        };
        let mut enc = Encoder::new(edge, config).unwrap();
        let mut wire = Vec::new();
        let text = b"The quarterly report on network latency, by office and by month. ";
        for i in 0..2u32 {
            let mut piece = Vec::new();
            for j in 0..25u32 {
                piece.extend_from_slice(&text[(i * 7 + j) as usize % 20..]);
                piece.extend_from_slice(format!("{} ", i * j).as_bytes());
            }
            // One run per piece.
            enc.push(&piece, &mut wire);
            enc.flush(&mut wire);
        }
        enc.finish(&mut wire);
        let mut runs = Vec::new();
        let mut rest = &wire[..];
        while let Ok(frame) = Frame::new_checked(rest) {
            if let Ok(Some(DataRepr::StreamRun { fresh, run })) = DataRepr::parse(&frame) {
                assert_eq!(run.codec, Codec::Ppmd);
                runs.push((fresh, run.lengths.to_vec(), run.bytes.to_vec()));
            }
            rest = &rest[frame.total_len()..];
        }
        assert!(runs.len() >= 2 && runs[0].0);
        let mut stream = StreamDecoder::default();
        let mut second = Vec::new();
        for (i, (fresh, lengths, bytes)) in runs[..2].iter().enumerate() {
            let run = Run {
                codec: Codec::Ppmd,
                lengths,
                bytes,
            };
            second.clear();
            stream
                .decode_into(*fresh, &run, &mut second)
                .unwrap_or_else(|e| panic!("valid run {i} decodes: {e}"));
        }
        Valid { runs, second }
    })
}

fuzz_target!(|data: &[u8]| {
    let raw = data
        .get(..2)
        .map_or(1, |b| usize::from(u16::from_be_bytes([b[0], b[1]])).max(1));
    let lengths = (raw as u32).to_be_bytes();
    let hostile = Run {
        codec: Codec::Ppmd,
        lengths: &lengths,
        bytes: data.get(2..).unwrap_or_default(),
    };
    // A fresh model.
    let mut out = Vec::new();
    if StreamDecoder::default()
        .decode_into(true, &hostile, &mut out)
        .is_ok()
    {
        assert_eq!(out.len(), raw);
    }
    // After the first valid run, then the hostile run in its place.
    let Valid {
        runs,
        second: expected,
    } = valid();
    let mut stream = StreamDecoder::default();
    let (fresh, first_lengths, first_bytes) = &runs[0];
    let first = Run {
        codec: Codec::Ppmd,
        lengths: first_lengths,
        bytes: first_bytes,
    };
    let mut out = Vec::new();
    stream
        .decode_into(*fresh, &first, &mut out)
        .expect("a valid run decodes");
    let mut out = Vec::new();
    if stream.decode_into(false, &hostile, &mut out).is_ok() {
        assert_eq!(out.len(), raw);
    }
    // The second valid run with one byte changed where the input says:
    // refused (its CRC) and nothing delivered, or its own bytes.
    let (_, second_lengths, second_bytes) = &runs[1];
    if let Some((&at, &flip)) = data.first().zip(data.get(1)) {
        if flip != 0 {
            let mut damaged = second_bytes.clone();
            let i = usize::from(at) * damaged.len() / 256;
            damaged[i] ^= flip;
            let mut stream = StreamDecoder::default();
            let mut out = Vec::new();
            stream
                .decode_into(*fresh, &first, &mut out)
                .expect("a valid run decodes");
            let run = Run {
                codec: Codec::Ppmd,
                lengths: second_lengths,
                bytes: &damaged,
            };
            let mut out = Vec::new();
            match stream.decode_into(false, &run, &mut out) {
                Ok(()) => assert!(out == *expected, "a changed run gave other bytes"),
                Err(_) => assert!(out.is_empty()),
            }
        }
    }
});
