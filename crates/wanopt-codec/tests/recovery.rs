//! Recovery: damaged or evicted chunks repaired, restarts that stay warm,
//! torn tails, misnamed literals and garbage.

mod common;

use common::{damage, random, rng, small_config, text, Flow, Pair};
use rand::Rng;
use wanopt_codec::frame::{Codec, DataRepr, Payload, VERSION};
use wanopt_codec::{
    CacheConfig, CacheId, ControlRepr, Decoder, DecoderConfig, EncoderConfig, Fingerprint,
    PeerCache, PeerControlError, StoreConfig,
};

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
    // The file crossed as spans; the damaged ones were listed, then the
    // damaged chunks repaired.
    assert!(flow.dec.stats().span_misses > 0);
    assert!(flow.enc.stats().span_lists_sent > 0);
    assert!(pair.core.stats().store.corrupt > 0);
    // The repairs were stored again: the next pass is clean.
    let mut again = Flow::new(&pair.edge, &pair.core);
    again.send(&file);
    again.finish();
    assert_eq!(again.delivered, file);
    assert_eq!(again.need_chunks, 0);
}

#[test]
fn repairs_beyond_the_retained_bytes_are_read_from_the_local_store() {
    // A warm flow referencing more than it retains: the core's damaged
    // records are repaired from the edge's own store.
    let pair = Pair::new(small_config());
    let file = text(1 << 20, 5);
    pair.transfer(&file, &[128 << 10]);
    damage(&pair.core);
    let config = EncoderConfig {
        retain_bytes: 0,
        ..EncoderConfig::default()
    };
    let mut flow = Flow::with_config(&pair.edge, &pair.core, config);
    flow.send(&file);
    flow.finish();
    assert_eq!(flow.delivered, file);
    let stats = flow.enc.stats();
    assert!(flow.need_chunks > 0, "no corruption was hit");
    assert!(stats.repairs_sent > 0);
    assert_eq!(stats.repairs_from_store, stats.repairs_sent);

    // With room in the edge's store, referenced chunks are not even
    // copied (default retain_bytes, far more than the file): every repair
    // is read from the store.
    let big = CacheConfig {
        store: StoreConfig {
            capacity: 1 << 30,
            segment_size: 64 << 20,
        },
        ..small_config()
    };
    let pair = Pair::new(big);
    pair.transfer(&file, &[128 << 10]);
    damage(&pair.core);
    let mut flow = Flow::new(&pair.edge, &pair.core);
    flow.send(&file);
    flow.finish();
    assert_eq!(flow.delivered, file);
    let stats = flow.enc.stats();
    assert!(flow.need_chunks > 0 && stats.repairs_sent > 0);
    assert_eq!(stats.repairs_from_store, stats.repairs_sent);

    // Neither retained nor in the edge's store (wiped behind its back):
    // the flow is told it cannot go on, it never delivers a wrong byte.
    let pair = Pair::new(small_config());
    pair.transfer(&file, &[128 << 10]);
    damage(&pair.core);
    damage(&pair.edge);
    let mut flow = Flow::with_config(&pair.edge, &pair.core, config);
    flow.send(&file);
    flow.enc.finish(&mut flow.wire);
    let mut errors = 0;
    // Spans first (`NeedSpan`, answered with lists), then `NeedChunk`.
    for _ in 0..4 {
        flow.deliver_forward();
        for e in flow.deliver_back_errors() {
            assert!(matches!(e, PeerControlError::ChunkUnavailable(_)), "{e}");
            errors += 1;
        }
    }
    assert!(errors > 0);
    assert!(!flow.dec.is_finished());
    assert!(file.starts_with(&flow.delivered) && flow.delivered.len() < file.len());

    // The chunks the failed flow asked for are no longer referenced: each
    // later flow of the same file gets further (a node handles every
    // request that arrived together, then resets the flow) and one
    // delivers the whole file, byte-exact, without `cache clear`.
    let mut delivered = None;
    for _ in 0..64 {
        let mut flow = Flow::with_config(&pair.edge, &pair.core, config);
        flow.send(&file);
        flow.enc.finish(&mut flow.wire);
        let mut failed = false;
        for _ in 0..8 {
            flow.deliver_forward();
            failed = !flow.deliver_back_errors().is_empty();
            if failed {
                break;
            }
        }
        assert!(file.starts_with(&flow.delivered), "a wrong byte");
        if !failed && flow.dec.is_finished() {
            delivered = Some(flow.delivered.len());
            break;
        }
    }
    assert_eq!(delivered, Some(file.len()));
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
fn a_misnamed_literal_is_asked_for_again_and_never_delivered_wrong() {
    let dir = tempfile::tempdir().unwrap();
    let cache = PeerCache::open(dir.path(), small_config(), CacheId([1; 16])).unwrap();
    let mut dec = Decoder::new(cache, DecoderConfig::default());
    let real = text(5000, 22);
    let other = text(5000, 23);
    let name = Fingerprint::of(&real);
    let raw = |bytes| Payload {
        codec: Codec::Raw,
        raw_len: 5000,
        bytes,
    };
    // A peer (a buggy one) names `other` as if it were `real`, then refers
    // to `real`.
    let mut wire = Vec::new();
    DataRepr::Preamble { version: VERSION }.emit(&mut wire);
    DataRepr::Named {
        fingerprint: name,
        payload: raw(&other),
    }
    .emit(&mut wire);
    let reference = DataRepr::Reference {
        fingerprint: name,
        raw_len: 5000,
    };
    reference.emit(&mut wire);
    let mut out = Vec::new();
    dec.push(&wire, &mut out).unwrap();
    // The literal is the stream's content whatever its name; the reference
    // fails the verified read and waits for the chunk itself.
    assert_eq!(out, other);
    let mut asked = Vec::new();
    while let Some(c) = dec.poll_control() {
        asked.push(c);
    }
    assert!(asked.contains(&ControlRepr::NeedChunk { fingerprint: name }));
    let mut wire = Vec::new();
    DataRepr::Repair {
        fingerprint: name,
        payload: raw(&real),
    }
    .emit(&mut wire);
    // The repair is stored in place of the misnamed chunk: the next
    // reference resolves at once.
    reference.emit(&mut wire);
    DataRepr::End.emit(&mut wire);
    dec.push(&wire, &mut out).unwrap();
    assert!(dec.is_finished());
    assert_eq!(out, [&other[..], &real, &real].concat());
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
