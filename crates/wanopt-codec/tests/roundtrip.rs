//! Round-trip properties of encoder + decoder + caches: edited streams,
//! arbitrary bytes, and streams read with pieces.

mod common;

use common::{random, small_config, text, Flow, Pair};
use proptest::prelude::*;
use wanopt_codec::{CacheId, Compression, Decoder, DecoderConfig, PeerCache};

#[derive(Debug, Clone)]
enum Edit {
    Flip(usize),
    Insert(usize, Vec<u8>),
    Delete(usize, usize),
}

fn apply(mut data: Vec<u8>, edits: &[Edit]) -> Vec<u8> {
    for e in edits {
        if data.is_empty() {
            break;
        }
        match e {
            Edit::Flip(p) => {
                let i = p % data.len();
                data[i] ^= 0xa5;
            }
            Edit::Insert(p, bytes) => {
                let i = p % data.len();
                data.splice(i..i, bytes.iter().copied());
            }
            Edit::Delete(p, n) => {
                let i = p % data.len();
                let end = (i + n).min(data.len());
                data.drain(i..end);
            }
        }
    }
    data
}

fn edit_strategy() -> impl Strategy<Value = Edit> {
    prop_oneof![
        any::<usize>().prop_map(Edit::Flip),
        (
            any::<usize>(),
            proptest::collection::vec(any::<u8>(), 1..3000)
        )
            .prop_map(|(p, b)| Edit::Insert(p, b)),
        (any::<usize>(), 1usize..20_000).prop_map(|(p, n)| Edit::Delete(p, n)),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]
    /// Random streams, then edited versions, fed in random piece sizes,
    /// arrive byte-exact; the edited version costs less than the original.
    #[test]
    fn edited_streams_round_trip(
        len in 1usize..600_000,
        seed in any::<u64>(),
        compressible in any::<bool>(),
        codec in 0u8..4,
        edits in proptest::collection::vec(edit_strategy(), 0..8),
        pieces in proptest::collection::vec(1usize..200_000, 1..6),
    ) {
        let mut pair = Pair::new(small_config());
        pair.encoder.compression = match codec {
            0 => Compression::Lz4,
            1 => Compression::ZSTD,
            2 => Compression::Lzma { preset: 6 },
            _ => Compression::Max { preset: 6 },
        };
        let base = if compressible { text(len, seed) } else { random(len, seed) };
        let (out, _) = pair.transfer(&base, &pieces);
        prop_assert_eq!(&out, &base);
        let edited = apply(base.clone(), &edits);
        let (out2, _) = pair.transfer(&edited, &pieces);
        prop_assert_eq!(&out2, &edited);
        let (out3, wan3) = pair.transfer(&edited, &[1 << 20]);
        prop_assert_eq!(&out3, &edited);
        prop_assert!(wan3 as usize <= 64 + edited.len() / 100 + 30, "third pass {}", wan3);
    }

    /// Arbitrary bytes after a valid preamble never panic the decoder.
    #[test]
    fn decoder_survives_arbitrary_bytes(
        bytes in proptest::collection::vec(any::<u8>(), 0..4096),
        split in 0usize..4096,
    ) {
        let dir = tempfile::tempdir().unwrap();
        let cache = PeerCache::open(dir.path(), small_config(), CacheId([1; 16])).unwrap();
        let mut dec = Decoder::new(cache, DecoderConfig::default());
        let mut wire = vec![1, 0, 0, 5, b'W', b'O', b'P', b'C', wanopt_codec::frame::VERSION];
        wire.extend_from_slice(&bytes);
        let split = split.min(wire.len());
        let mut out = Vec::new();
        if dec.push(&wire[..split], &mut out).is_ok() {
            let _ = dec.push(&wire[split..], &mut out);
        }
        while dec.poll_control().is_some() {}
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]
    /// Reads of random sizes, after each of which the held bytes may go
    /// out as pieces: the stream arrives byte-exact, everything pieces
    /// carried is delivered at once, and the chunks are those of the same
    /// stream read without pieces (the second pass is references).
    #[test]
    fn streams_with_pieces_round_trip_and_keep_their_chunks(
        len in 1usize..300_000,
        seed in any::<u64>(),
        compressible in any::<bool>(),
        codec in 0u8..3,
        reads in proptest::collection::vec((1usize..20_000, any::<bool>()), 1..40),
    ) {
        let mut pair = Pair::new(small_config());
        pair.encoder.compression = match codec {
            0 => Compression::Lz4,
            1 => Compression::ZSTD,
            _ => Compression::Max { preset: 6 },
        };
        let data = if compressible { text(len, seed) } else { random(len, seed) };
        // Cold, then warm the same way: pieced chunks the core now holds
        // complete as references.
        for _ in 0..2 {
            let mut flow = Flow::with_config(&pair.edge, &pair.core, pair.encoder);
            let mut at = 0;
            let mut i = 0;
            while at < data.len() {
                let (n, held) = reads[i % reads.len()];
                i += 1;
                let end = (at + n).min(data.len());
                flow.send(&data[at..end]);
                at = end;
                if held {
                    flow.enc.send_held(&mut flow.wire);
                    flow.pump();
                    prop_assert_eq!(flow.delivered.len(), at);
                }
            }
            flow.finish();
            prop_assert_eq!(&flow.delivered, &data);
            prop_assert_eq!(flow.need_chunks, 0);
        }
        let (again, wan) = pair.transfer(&data, &[1 << 20]);
        prop_assert_eq!(&again, &data);
        prop_assert!(wan < 100 + data.len() as u64 / 1000, "second pass {}", wan);
    }
}
