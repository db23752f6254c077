//! End-to-end properties of encoder + decoder + caches.

mod common;

use common::{random, rng, small_config, text, Flow, Pair};
use proptest::prelude::*;
use rand::Rng;
use wanopt_codec::{CacheId, Decoder, DecoderConfig, PeerCache};

#[test]
fn second_transfer_is_under_two_percent() {
    let pair = Pair::new(small_config());
    let mut file = text(1 << 20, 1);
    file.extend(random(1 << 20, 2));
    let (first, wan1) = pair.transfer(&file, &[128 << 10]);
    assert_eq!(first, file);
    let (second, wan2) = pair.transfer(&file, &[100_000, 7, 300_000]);
    assert_eq!(second, file);
    let ratio = wan2 as f64 / file.len() as f64;
    assert!(ratio < 0.02, "second transfer ratio {ratio}");
    // The text half compressed on the first pass.
    assert!(wan1 < file.len() as u64 * 8 / 10, "first pass {wan1}");
}

#[test]
fn small_edit_costs_little_more_than_changed_chunks() {
    let pair = Pair::new(small_config());
    let file = text(2 << 20, 3);
    pair.transfer(&file, &[128 << 10]);
    let mut edited = file.clone();
    for pos in [10_000usize, 700_000, 1_500_000] {
        edited[pos] ^= 0x55;
    }
    let (out, wan) = pair.transfer(&edited, &[128 << 10]);
    assert_eq!(out, edited);
    // Three edits touch at most ~2 chunks each (max 64 KiB, typically ~8 KiB),
    // compressed; plus ~20 bytes per reference for the rest.
    let refs = (file.len() / 8192) as u64 * 20;
    assert!(
        wan < refs + 6 * 16 * 1024,
        "edited transfer took {wan} bytes"
    );
}

#[test]
fn cross_flow_reference_only_after_ack() {
    let pair = Pair::new(small_config());
    let file = random(512 << 10, 4);
    // Flow A encodes the file but nothing is delivered yet.
    let mut a = Flow::new(&pair.edge, &pair.core);
    a.send(&file);
    a.enc.finish(&mut a.wire);
    // Flow B sends the same file: it must not reference A's chunks.
    let mut b = Flow::new(&pair.edge, &pair.core);
    b.send(&file);
    b.enc.finish(&mut b.wire);
    assert_eq!(b.enc.stats().references, 0);
    // B is decoded first (no order between streams), then A.
    b.pump();
    a.pump();
    assert_eq!(b.delivered, file);
    assert_eq!(a.delivered, file);
    assert!(a.dec.is_finished() && b.dec.is_finished());
    // After the acks, a third flow references everything.
    let (out, wan) = pair.transfer(&file, &[64 << 10]);
    assert_eq!(out, file);
    assert!(wan < file.len() as u64 / 50);
}

#[test]
fn damaged_cache_recovers_via_need_chunk() {
    let pair = Pair::new(small_config());
    let file = text(1 << 20, 5);
    pair.transfer(&file, &[128 << 10]);
    // Flip bits all over the core's segment files.
    let mut r = rng(6);
    for path in pair.core.segment_paths() {
        let mut bytes = std::fs::read(&path).unwrap();
        for _ in 0..40 {
            let i = r.random_range(0..bytes.len());
            bytes[i] ^= 1 << r.random_range(0..8);
        }
        std::fs::write(&path, bytes).unwrap();
    }
    let mut flow = Flow::new(&pair.edge, &pair.core);
    flow.send(&file);
    flow.finish();
    assert_eq!(flow.delivered, file);
    assert!(flow.need_chunks > 0, "no corruption was hit");
    assert!(pair.core.stats().store.corrupt > 0);
    // The repairs were stored again: the next pass is clean.
    let mut again = Flow::new(&pair.edge, &pair.core);
    again.send(&file);
    again.finish();
    assert_eq!(again.delivered, file);
    assert_eq!(again.need_chunks, 0);
}

#[test]
fn restarted_core_stays_warm() {
    let mut pair = Pair::new(small_config());
    let file = text(1 << 20, 7);
    pair.transfer(&file, &[128 << 10]);
    pair.restart_core(CacheId([9; 16]));
    let (out, wan) = pair.transfer(&file, &[128 << 10]);
    assert_eq!(out, file);
    assert!(
        wan < file.len() as u64 / 50,
        "warm after core restart: {wan}"
    );
}

#[test]
fn restarted_edge_stays_warm() {
    let mut pair = Pair::new(small_config());
    let file = text(1 << 20, 8);
    pair.transfer(&file, &[128 << 10]);
    pair.restart_edge(CacheId([8; 16]));
    let (out, wan) = pair.transfer(&file, &[128 << 10]);
    assert_eq!(out, file);
    assert!(
        wan < file.len() as u64 / 50,
        "warm after edge restart: {wan}"
    );
}

#[test]
fn wiped_core_gets_no_unresolvable_reference() {
    let mut pair = Pair::new(small_config());
    let file = random(1 << 20, 9);
    pair.transfer(&file, &[128 << 10]);
    // The core's cache directory is wiped.
    for entry in std::fs::read_dir(pair.core_dir.path()).unwrap() {
        std::fs::remove_file(entry.unwrap().path()).unwrap();
    }
    pair.restart_core(CacheId([10; 16]));
    let mut flow = Flow::new(&pair.edge, &pair.core);
    flow.send(&file);
    flow.finish();
    assert_eq!(flow.delivered, file);
    assert_eq!(flow.enc.stats().references, 0);
    assert_eq!(flow.need_chunks, 0);
}

#[test]
fn torn_tail_on_core_is_dropped_and_stays_correct() {
    let mut pair = Pair::new(small_config());
    let file = random(600 << 10, 11);
    pair.transfer(&file, &[128 << 10]);
    pair.core.checkpoint().unwrap();
    let last = pair.core.segment_paths().pop().unwrap();
    let len = std::fs::metadata(&last).unwrap().len();
    let f = std::fs::OpenOptions::new().write(true).open(&last).unwrap();
    f.set_len(len - 1000).unwrap();
    let old_epoch = pair.core.hello().epoch;
    pair.restart_core(CacheId([12; 16]));
    assert_eq!(pair.core.hello().epoch, old_epoch + 1);
    assert!(pair.core.stats().store.truncated_bytes > 0);
    let mut flow = Flow::new(&pair.edge, &pair.core);
    flow.send(&file);
    flow.finish();
    assert_eq!(flow.delivered, file);
    assert_eq!(flow.need_chunks, 0, "epoch change must stop references");
}

#[test]
fn decoder_rejects_garbage_without_preamble() {
    let dir = tempfile::tempdir().unwrap();
    let cache = PeerCache::open(dir.path(), small_config(), CacheId([1; 16])).unwrap();
    let mut dec = Decoder::new(cache, DecoderConfig::default());
    let mut out = Vec::new();
    assert!(dec.push(&[2, 0, 0, 5, 0, 0, 0, 0, 1], &mut out).is_err());
    assert!(out.is_empty());
}

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
        edits in proptest::collection::vec(edit_strategy(), 0..8),
        pieces in proptest::collection::vec(1usize..200_000, 1..6),
    ) {
        let pair = Pair::new(small_config());
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
        let mut wire = vec![1, 0, 0, 5, b'W', b'O', b'P', b'C', 1];
        wire.extend_from_slice(&bytes);
        let split = split.min(wire.len());
        let mut out = Vec::new();
        if dec.push(&wire[..split], &mut out).is_ok() {
            let _ = dec.push(&wire[split..], &mut out);
        }
        while dec.poll_control().is_some() {}
    }
}
