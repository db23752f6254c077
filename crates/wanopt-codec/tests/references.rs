//! Deduplication across transfers: references, spans, acknowledgements and
//! the store files behind them.

mod common;

use common::{random, small_config, text, Flow, Pair};
use wanopt_codec::frame::{emit_span_list, span_check, Codec, DataRepr, Payload, VERSION};
use wanopt_codec::{
    CacheId, Compression, ControlRepr, Decoder, DecoderConfig, Fingerprint, PeerCache,
};

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
fn a_file_sent_again_crosses_as_spans() {
    for zstd in [false, true] {
        let mut pair = Pair::new(small_config());
        if zstd {
            pair.encoder.compression = Compression::ZSTD;
        }
        let file = text(2 << 20, 31);
        pair.transfer(&file, &[128 << 10]);
        // Read in 64 KiB pieces, as a node reads its LAN side: the span
        // carries on from one piece to the next.
        let mut flow = Flow::with_config(&pair.edge, &pair.core, pair.encoder);
        for piece in file.chunks(64 << 10) {
            flow.send(piece);
            flow.pump();
        }
        flow.finish();
        assert_eq!(flow.delivered, file);
        let (enc, dec) = (flow.enc.stats(), flow.dec.stats());
        // ~250 chunks: one or two spans instead of 24 bytes per chunk.
        assert_eq!(enc.references, enc.chunks, "{enc:?}");
        assert!((1..=3).contains(&enc.spans), "{enc:?}");
        assert_eq!(dec.spans, enc.spans);
        assert_eq!(dec.span_misses, 0);
        assert!(enc.wan_bytes_out < 200, "{enc:?}");
        // Back the other way too (the core holds what it received).
        let (back, wan) = pair.transfer_back(&file, &[2 << 20]);
        assert_eq!(back, file);
        assert!(wan < 200, "{wan} bytes back");
    }
}

#[test]
fn a_span_the_decoder_cannot_follow_is_listed_and_resolved() {
    // The decoder holds `a` then `b`; the encoder means `a` then `c`.
    let dir = tempfile::tempdir().unwrap();
    let cache = PeerCache::open(dir.path(), small_config(), CacheId([1; 16])).unwrap();
    let mut dec = Decoder::new(cache, DecoderConfig::default());
    let (a, b, c) = (text(3000, 41), text(4000, 42), text(5000, 43));
    let (fa, fc) = (Fingerprint::of(&a), Fingerprint::of(&c));
    let literal = |bytes: &[u8], wire: &mut Vec<u8>| {
        DataRepr::Literal(Payload {
            codec: Codec::Raw,
            raw_len: bytes.len() as u32,
            bytes,
        })
        .emit(wire)
    };
    let mut wire = Vec::new();
    DataRepr::Preamble { version: VERSION }.emit(&mut wire);
    literal(&a, &mut wire);
    literal(&b, &mut wire);
    let check = span_check(&[fa, fc]);
    DataRepr::Span {
        first: fa,
        count: 2,
        raw_len: 8000,
        check,
    }
    .emit(&mut wire);
    let mut out = Vec::new();
    dec.push(&wire, &mut out).unwrap();
    assert_eq!(out, [&a[..], &b].concat());
    let asked: Vec<_> = std::iter::from_fn(|| dec.poll_control()).collect();
    assert!(asked.contains(&ControlRepr::NeedSpan { check }));
    // The list: `a` is read from the store and delivered, `c` asked for.
    let mut wire = Vec::new();
    emit_span_list(&check, &[(fa, 3000), (fc, 5000)], &mut wire);
    dec.push(&wire, &mut out).unwrap();
    assert_eq!(out, [&a[..], &b, &a].concat());
    let asked: Vec<_> = std::iter::from_fn(|| dec.poll_control()).collect();
    assert!(asked.contains(&ControlRepr::NeedChunk { fingerprint: fc }));
    let mut wire = Vec::new();
    DataRepr::Repair {
        fingerprint: fc,
        payload: Payload {
            codec: Codec::Raw,
            raw_len: 5000,
            bytes: &c,
        },
    }
    .emit(&mut wire);
    DataRepr::End.emit(&mut wire);
    dec.push(&wire, &mut out).unwrap();
    assert!(dec.is_finished());
    assert_eq!(out, [&a[..], &b, &a, &c].concat());
}

#[test]
fn a_span_list_that_does_not_match_its_check_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let cache = PeerCache::open(dir.path(), small_config(), CacheId([1; 16])).unwrap();
    let mut dec = Decoder::new(cache, DecoderConfig::default());
    let (fa, fb) = (Fingerprint::of(b"a"), Fingerprint::of(b"b"));
    let check = span_check(&[fa, fb]);
    let mut wire = Vec::new();
    DataRepr::Preamble { version: VERSION }.emit(&mut wire);
    DataRepr::Span {
        first: fa,
        count: 2,
        raw_len: 10,
        check,
    }
    .emit(&mut wire);
    let mut out = Vec::new();
    dec.push(&wire, &mut out).unwrap();
    let mut wire = Vec::new();
    emit_span_list(&check, &[(fb, 5), (fa, 5)], &mut wire);
    assert_eq!(
        dec.push(&wire, &mut out),
        Err(wanopt_codec::DecodeError::RepairMismatch)
    );
    assert!(out.is_empty());
}

#[test]
fn a_file_sent_one_way_comes_back_as_references() {
    // Downloaded, then uploaded (edit-save): the cache works both ways.
    let pair = Pair::new(small_config());
    let file = text(1 << 20, 11);
    let (out, _) = pair.transfer(&file, &[128 << 10]);
    assert_eq!(out, file);
    let (back, wan) = pair.transfer_back(&file, &[100_000]);
    assert_eq!(back, file);
    let ratio = wan as f64 / file.len() as f64;
    assert!(ratio < 0.02, "reverse transfer ratio {ratio}");
    // Without keeping sent literals, the reverse direction starts cold.
    let mut cold = Pair::new(small_config());
    cold.encoder.store_sent = false;
    cold.transfer(&file, &[128 << 10]);
    let (back, wan) = cold.transfer_back(&file, &[100_000]);
    assert_eq!(back, file);
    assert!(wan > file.len() as u64 / 10, "cold reverse transfer {wan}");
}

#[test]
fn a_peer_that_lost_its_sent_literals_gets_them_repaired() {
    // The edge sends a file (keeping its literals), then loses its store
    // without a restart the core could see; the core's references to
    // those chunks are repaired, never delivered wrong.
    let pair = Pair::new(small_config());
    let file = text(300_000, 12);
    pair.transfer(&file, &[64 << 10]);
    for path in pair.edge.segment_paths() {
        let mut bytes = std::fs::read(&path).unwrap();
        for b in bytes.iter_mut().skip(100).step_by(997) {
            *b ^= 0xff;
        }
        std::fs::write(&path, bytes).unwrap();
    }
    let (back, _) = pair.transfer_back(&file, &[64 << 10]);
    assert_eq!(back, file);
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

/// Checks that each acked store position lies inside its segment file
/// (`files` from [`segment_files`]); returns how many there were.
fn check_in_files(positions: impl Iterator<Item = u64>, files: &[(u64, u64)]) -> u64 {
    let mut count = 0;
    for position in positions {
        let (number, offset) = (position >> 32, position & 0xffff_ffff);
        let len = files.iter().find(|(n, _)| *n == number).unwrap().1;
        assert!(offset < len, "acked position {position:#x} not in the file");
        count += 1;
    }
    count
}

/// Segment number and length of each of a cache's segment files.
fn segment_files(cache: &PeerCache) -> Vec<(u64, u64)> {
    cache
        .segment_paths()
        .iter()
        .map(|path| {
            let name = path.file_name().unwrap().to_str().unwrap();
            let number = name[4..14].parse::<u64>().unwrap();
            (number, std::fs::metadata(path).unwrap().len())
        })
        .collect()
}

#[test]
fn sent_literals_are_in_the_store_file_before_their_ack() {
    // The encoder stores its literals with one write per push; every
    // position the Ack announces must already be in a segment file.
    let pair = Pair::new(small_config());
    let file = text(3 << 20, 21);
    let mut flow = Flow::new(&pair.edge, &pair.core);
    let mut acked = 0;
    for piece in file.chunks(1 << 20) {
        flow.send(piece);
        let files = segment_files(&pair.edge);
        let on_disk: u64 = files.iter().map(|(_, len)| len).sum();
        assert_eq!(on_disk, pair.edge.stats().store.bytes, "all written");
        flow.dec
            .push(&std::mem::take(&mut flow.wire), &mut flow.delivered)
            .unwrap();
        while let Some(message) = flow.dec.poll_peer_control() {
            let ControlRepr::Ack { entries, .. } = message else {
                continue;
            };
            acked += check_in_files(entries.iter().map(|(_, p)| *p), &files);
        }
    }
    let stats = flow.enc.stats();
    assert!(acked > 100);
    assert_eq!(
        acked,
        stats.literals_raw + stats.literals_compressed + stats.deltas
    );
}

#[test]
fn received_literals_are_in_the_store_file_before_their_ack() {
    // The decoder stores the literals it receives buffered and writes them
    // when it builds the Ack: every position an Ack announces must already
    // be in a segment file when the Ack leaves.
    let pair = Pair::new(small_config());
    let file = text(3 << 20, 22);
    let mut flow = Flow::new(&pair.edge, &pair.core);
    let mut acked = 0;
    for piece in file.chunks(256 << 10) {
        flow.send(piece);
        flow.dec
            .push(&std::mem::take(&mut flow.wire), &mut flow.delivered)
            .unwrap();
        while let Some(message) = flow.dec.poll_control() {
            let ControlRepr::Ack { entries, .. } = message else {
                continue;
            };
            let files = segment_files(&pair.core);
            acked += check_in_files(entries.iter().map(|(_, p)| *p), &files);
        }
    }
    // The encoder still holds the tail it has not cut into a chunk.
    assert!(file.starts_with(&flow.delivered) && flow.delivered.len() > file.len() / 2);
    let stats = flow.enc.stats();
    assert!(acked > 100);
    assert_eq!(
        acked,
        stats.literals_raw + stats.literals_compressed + stats.deltas
    );
    // Everything acked is written: the files hold every stored byte.
    let on_disk: u64 = segment_files(&pair.core).iter().map(|(_, len)| len).sum();
    assert_eq!(on_disk, pair.core.stats().store.bytes);
}
