//! Pieces: held bytes sent before their chunk is cut, completed by a cut,
//! a reference, a delta or a run, and pieces that do not add up.

mod common;

use common::{binary_records, encoder_at, pooled_records, random, small_config, text, Flow, Pair};
use wanopt_codec::frame::{kind, Codec, DataRepr, Payload, VERSION};
use wanopt_codec::{CacheId, Compression, DecodeError, Decoder, DecoderConfig, PeerCache};

/// Sends `data` from the edge in reads of `read` bytes; after each read,
/// when `trickle`, the held bytes go out as pieces. Returns the flow
/// (finished) and, per read, whether everything pushed so far had been
/// delivered after that read.
fn trickled_flow(pair: &Pair, data: &[u8], read: usize, trickle: bool) -> (Flow, Vec<bool>) {
    let mut flow = Flow::with_config(&pair.edge, &pair.core, pair.encoder);
    let mut caught_up = Vec::new();
    let mut pushed = 0;
    for piece in data.chunks(read) {
        flow.send(piece);
        pushed += piece.len();
        if trickle {
            flow.enc.send_held(&mut flow.wire);
            assert_eq!(flow.enc.held_len(), 0);
        }
        flow.pump();
        caught_up.push(flow.delivered.len() == pushed);
    }
    flow.finish();
    (flow, caught_up)
}

#[test]
fn held_bytes_sent_as_pieces_arrive_at_once_and_chunks_stay_where_they_were() {
    for compression in [
        Compression::Lz4,
        Compression::ZSTD,
        Compression::Max { preset: 6 },
    ] {
        let mut file = text(300_000, 71);
        file.extend(random(100_000, 72));
        // A source trickling 200-byte writes: without pieces nearly every
        // write waits in the chunker for its chunk's end.
        let mut pair = Pair::new(small_config());
        pair.encoder.compression = compression;
        let (plain, caught_up) = trickled_flow(&pair, &file, 200, false);
        assert_eq!(plain.delivered, file);
        assert!(caught_up.iter().filter(|c| **c).count() < caught_up.len() / 10);
        let mut pair = Pair::new(small_config());
        pair.encoder.compression = compression;
        let (trickled, caught_up) = trickled_flow(&pair, &file, 200, true);
        assert_eq!(trickled.delivered, file);
        assert!(
            caught_up.iter().all(|c| *c),
            "every write delivered at once"
        );
        let (enc, dec) = (trickled.enc.stats(), trickled.dec.stats());
        assert_eq!(enc.chunks, plain.enc.stats().chunks, "the same chunks");
        // Everything went as pieces but, where a write completed a
        // chunk, its part up to the cut: a piece with LZ4, with zstd and
        // LZMA2 the first literal of a run (after a `PieceRest`).
        if compression == Compression::Lz4 {
            assert_eq!(enc.piece_bytes, file.len() as u64, "{enc:?}");
        } else {
            assert!(enc.piece_bytes < file.len() as u64, "{enc:?}");
            assert!(enc.piece_bytes + 200 * enc.chunks >= file.len() as u64);
        }
        assert_eq!(dec.pieces, enc.pieces);
        // Both ends stored the chunks the content cut: the same file from a
        // fast source crosses as references, either way.
        let (again, wan) = pair.transfer(&file, &[128 << 10]);
        assert_eq!(again, file);
        assert!(wan < 200, "{compression:?}: {wan} bytes the second time");
        let (back, wan) = pair.transfer_back(&file, &[128 << 10]);
        assert_eq!(back, file);
        assert!(wan < 200, "{compression:?}: {wan} bytes back");
    }
}

/// A request head sent at once as a piece, then a file behind it, as a
/// client writes them (head and body are separate writes).
fn head_then_file(pair: &Pair, head: &[u8], file: &[u8]) -> Flow {
    let mut flow = Flow::with_config(&pair.edge, &pair.core, pair.encoder);
    flow.send(head);
    flow.enc.send_held(&mut flow.wire);
    flow.pump();
    assert_eq!(flow.delivered, head, "the head is delivered at once");
    // Nothing more held (an idle flush now): nothing sent, no cut.
    flow.enc.send_held(&mut flow.wire);
    assert!(flow.wire.is_empty());
    assert_eq!(flow.enc.stats().chunks, 0);
    flow.send(file);
    flow.finish();
    let mut all = head.to_vec();
    all.extend_from_slice(file);
    assert_eq!(flow.delivered, all);
    flow
}

#[test]
fn a_chunk_begun_as_pieces_completes_as_a_reference_when_the_peer_holds_it() {
    for compression in [
        Compression::Lz4,
        Compression::ZSTD,
        Compression::Max { preset: 6 },
    ] {
        let mut pair = Pair::new(small_config());
        pair.encoder.compression = compression;
        let head = b"PUT report.doc 7 400000\n";
        let mut file = text(300_000, 91);
        file.extend(random(100_000, 92));
        let cold = head_then_file(&pair, head, &file);
        let cold_wan = cold.enc.stats().wan_bytes_out;
        assert!(cold_wan > 100_000, "{cold_wan}");
        // Again: the first chunk (the head and the file's start) is one
        // the core holds; without the reference it would cross in full.
        let warm = head_then_file(&pair, head, &file);
        let (enc, dec) = (warm.enc.stats(), warm.dec.stats());
        assert_eq!(enc.pieces, 1, "{enc:?}");
        assert_eq!(dec.cache_misses, 0);
        assert!(
            enc.wan_bytes_out < 400,
            "{compression:?}: {} bytes warm",
            enc.wan_bytes_out
        );
        // Sent without a piece, the same chunks are references too.
        let (again, wan) = pair.transfer(&[&head[..], &file].concat(), &[128 << 10]);
        assert_eq!(again, [&head[..], &file].concat());
        assert!(wan < 400, "{wan}");
    }
}

#[test]
fn a_request_sent_before_as_a_whole_chunk_goes_as_a_reference() {
    let pair = Pair::new(small_config());
    let request = b"GET /budget.xls HTTP/1.1\r\nHost: files\r\n\r\n";
    let exchange = |idle_flush: bool| {
        let mut flow = Flow::with_config(&pair.edge, &pair.core, pair.encoder);
        flow.send(request);
        flow.enc.send_held(&mut flow.wire);
        flow.pump();
        assert_eq!(flow.delivered, request);
        if idle_flush {
            flow.enc.flush(&mut flow.wire);
        }
        flow.finish();
        assert_eq!(flow.delivered, request);
        flow
    };
    let first = exchange(true);
    assert_eq!(first.enc.stats().pieces, 1);
    // The idle flush cut the request as a chunk of its own: the same
    // request again is that chunk, by reference, not another piece.
    let again = exchange(true);
    let stats = again.enc.stats();
    assert_eq!((stats.pieces, stats.references), (0, 1), "{stats:?}");
    assert!(stats.wan_bytes_out < first.enc.stats().wan_bytes_out);
    // Bytes that are not a whole chunk the peer holds go as a piece.
    let mut flow = Flow::with_config(&pair.edge, &pair.core, pair.encoder);
    flow.send(&request[..20]);
    flow.enc.send_held(&mut flow.wire);
    flow.finish();
    assert_eq!(flow.delivered, &request[..20]);
    assert_eq!(flow.enc.stats().pieces, 1);
}

#[test]
fn a_header_sent_at_once_costs_the_body_behind_it_nothing() {
    // A response's header line goes at once; the rest of the body's first
    // chunk goes into the stream's first run (after a `PieceRest`), not
    // compressed alone (that cost 1M.doc 1.2%: 21.7 KB through zstd
    // instead of PPMd).
    for compression in [Compression::ZSTD, Compression::Max { preset: 5 }] {
        let mut file = text(400_000, 27);
        file.extend(binary_records(28));
        let head = format!("OK {}\n", file.len());
        let mut wan = Vec::new();
        for pieced in [false, true] {
            let mut pair = Pair::new(small_config());
            pair.encoder.compression = compression;
            let mut flow = Flow::with_config(&pair.core, &pair.edge, pair.encoder);
            flow.send(head.as_bytes());
            if pieced {
                flow.enc.send_held(&mut flow.wire);
                flow.pump();
                assert_eq!(flow.delivered, head.as_bytes());
            }
            for read in file.chunks(64 << 10) {
                flow.send(read);
                flow.pump();
            }
            flow.finish();
            assert_eq!(flow.delivered, [head.as_bytes(), &file].concat());
            assert_eq!(flow.enc.stats().pieces, u64::from(pieced));
            wan.push(flow.enc.stats().wan_bytes_out);
            // The chunk the header began is stored whole at both ends: the
            // same response again crosses as references.
            let (again, bytes) = pair.transfer_back(&[head.as_bytes(), &file].concat(), &[1 << 20]);
            assert_eq!(again, [head.as_bytes(), &file].concat());
            assert!(bytes < 300, "{compression:?}: {bytes} bytes again");
        }
        assert!(wan[1] <= wan[0] + 64, "{compression:?}: {wan:?}");
    }
}

#[test]
fn a_piece_reference_the_decoder_cannot_resolve_is_repaired_after_the_pieces() {
    let pair = Pair::new(small_config());
    let head = b"GET /budget.xls\r\n\r\n";
    let file = text(200_000, 93);
    head_then_file(&pair, head, &file);
    // The core's copy of the first chunk (its first record) is damaged.
    for path in pair.core.segment_paths() {
        let mut bytes = std::fs::read(&path).unwrap();
        if bytes.len() > 200 {
            bytes[200] ^= 0x5a;
        }
        std::fs::write(&path, bytes).unwrap();
    }
    let warm = head_then_file(&pair, head, &file);
    assert!(warm.need_chunks > 0, "the damaged chunk was not asked for");
    assert!(warm.dec.stats().cache_misses > 0);
    assert!(warm.dec.stats().repairs_received > 0);
}

#[test]
fn pieces_that_do_not_add_up_are_errors() {
    let dir = tempfile::tempdir().unwrap();
    let cache = PeerCache::open(dir.path(), small_config(), CacheId([1; 16])).unwrap();
    let piece = |cut: u32, bytes: &[u8], wire: &mut Vec<u8>| {
        DataRepr::Piece {
            cut,
            payload: (!bytes.is_empty()).then_some(Payload {
                codec: Codec::Raw,
                raw_len: bytes.len() as u32,
                bytes,
            }),
        }
        .emit(wire)
    };
    let decode = |wire: &[u8]| {
        let mut dec = Decoder::new(cache.clone(), DecoderConfig::default());
        let mut all = Vec::new();
        DataRepr::Preamble { version: VERSION }.emit(&mut all);
        all.extend_from_slice(wire);
        let mut out = Vec::new();
        dec.push(&all, &mut out).map(|()| out)
    };
    let (a, b) = (text(3000, 81), text(2000, 82));
    // Good: two pieces, a cut inside the second, the rest cut with none.
    let mut wire = Vec::new();
    piece(0, &a, &mut wire);
    piece(4000, &b, &mut wire);
    piece(1000, &[], &mut wire);
    DataRepr::End.emit(&mut wire);
    assert_eq!(decode(&wire).unwrap(), [&a[..], &b].concat());
    // A cut beyond what is held.
    let mut wire = Vec::new();
    piece(0, &a, &mut wire);
    piece(5001, &b, &mut wire);
    assert_eq!(decode(&wire), Err(DecodeError::PieceOrder));
    // Another frame (or the end) while a chunk's pieces are unfinished.
    for other in [
        DataRepr::End,
        DataRepr::Literal(Payload {
            codec: Codec::Raw,
            raw_len: 3,
            bytes: b"abc",
        }),
    ] {
        let mut wire = Vec::new();
        piece(0, &a, &mut wire);
        other.emit(&mut wire);
        assert_eq!(decode(&wire), Err(DecodeError::PieceOrder));
    }
    // A StreamEnd carries no byte of the stream: it may come between a
    // chunk's pieces (a flow that went quiet with a chunk open)...
    let mut wire = Vec::new();
    piece(0, &a, &mut wire);
    DataRepr::StreamEnd.emit(&mut wire);
    piece(4000, &b, &mut wire);
    piece(1000, &[], &mut wire);
    DataRepr::End.emit(&mut wire);
    assert_eq!(decode(&wire).unwrap(), [&a[..], &b].concat());
    // ...but not between a PieceRest and the rest it announces.
    let mut wire = Vec::new();
    piece(0, &a, &mut wire);
    DataRepr::PieceRest { cut: 4000 }.emit(&mut wire);
    DataRepr::StreamEnd.emit(&mut wire);
    assert_eq!(decode(&wire), Err(DecodeError::PieceOrder));
    // More held than a chunk may be.
    let big = vec![7u8; 600_000];
    let mut wire = Vec::new();
    piece(0, &big, &mut wire);
    piece(0, &big, &mut wire);
    assert_eq!(decode(&wire), Err(DecodeError::PieceOrder));
    // A PieceRef without pieces, no longer than them, or to a chunk that
    // does not begin with them.
    let stored = text(5000, 83);
    let fingerprint = wanopt_codec::Fingerprint::of(&stored);
    {
        let mut wire = Vec::new();
        DataRepr::Preamble { version: VERSION }.emit(&mut wire);
        DataRepr::Literal(Payload {
            codec: Codec::Raw,
            raw_len: stored.len() as u32,
            bytes: &stored,
        })
        .emit(&mut wire);
        let mut dec = Decoder::new(cache.clone(), DecoderConfig::default());
        dec.push(&wire, &mut Vec::new()).unwrap();
    }
    let piece_ref = |raw_len: u32, wire: &mut Vec<u8>| {
        DataRepr::PieceRef {
            fingerprint,
            raw_len,
        }
        .emit(wire)
    };
    let mut wire = Vec::new();
    piece(0, &stored[..1000], &mut wire);
    piece_ref(5000, &mut wire);
    DataRepr::End.emit(&mut wire);
    assert_eq!(decode(&wire).unwrap(), stored, "a good one");
    // What comes before a bad completion: no pieces, as many as the
    // chunk, or bytes the chunk does not begin with.
    for held in [&[][..], &stored[..], &a[..1000]] {
        let mut wire = Vec::new();
        if !held.is_empty() {
            piece(0, held, &mut wire);
        }
        piece_ref(5000, &mut wire);
        assert_eq!(decode(&wire), Err(DecodeError::PieceOrder));
    }
    // A PieceDelta without pieces, or no longer than them.
    for held in [0, 5000] {
        let mut wire = Vec::new();
        if held > 0 {
            piece(0, &stored[..held], &mut wire);
        }
        DataRepr::Delta {
            target: fingerprint,
            base: fingerprint,
            raw_len: 5000,
            bytes: b"delta",
            after_pieces: true,
        }
        .emit(&mut wire);
        assert_eq!(decode(&wire), Err(DecodeError::PieceOrder));
    }
    // A PieceRest: its rest in the next literal; without pieces, no
    // longer than them, a rest of another length, or another frame next.
    let rest = |cut: u32, wire: &mut Vec<u8>| DataRepr::PieceRest { cut }.emit(wire);
    let literal = |bytes: &[u8], wire: &mut Vec<u8>| {
        DataRepr::Literal(Payload {
            codec: Codec::Raw,
            raw_len: bytes.len() as u32,
            bytes,
        })
        .emit(wire)
    };
    let mut wire = Vec::new();
    piece(0, &a[..1000], &mut wire);
    rest(3000, &mut wire);
    literal(&a[1000..], &mut wire);
    DataRepr::End.emit(&mut wire);
    assert_eq!(decode(&wire).unwrap(), a, "a good one");
    for (held, next) in [
        (&[][..], None),
        (&a[..], None),
        (&a[..1000], Some(&a[1000..2999])),
    ] {
        let mut wire = Vec::new();
        if !held.is_empty() {
            piece(0, held, &mut wire);
        }
        rest(3000, &mut wire);
        if let Some(next) = next {
            literal(next, &mut wire);
        }
        assert_eq!(decode(&wire), Err(DecodeError::PieceOrder));
    }
    for other in [
        DataRepr::End,
        DataRepr::PieceRest { cut: 3000 },
        DataRepr::Reference {
            fingerprint,
            raw_len: 5000,
        },
    ] {
        let mut wire = Vec::new();
        piece(0, &a[..1000], &mut wire);
        rest(3000, &mut wire);
        other.emit(&mut wire);
        assert_eq!(decode(&wire), Err(DecodeError::PieceOrder));
    }
    // An empty piece that cuts nothing is malformed.
    let mut wire = Vec::new();
    wanopt_codec::frame::emit_header(&mut wire, kind::PIECE, 4);
    wire.extend_from_slice(&[0; 4]);
    assert!(matches!(decode(&wire), Err(DecodeError::Frame(_))));
}

#[test]
fn a_piece_that_completes_no_frame_decodes_nothing() {
    // A node decodes slow runs off its runtime's worker only for pieces
    // that complete a frame: the others must not decode anything.
    let file = pooled_records(31, 4000, 40);
    let pair = Pair::new(small_config());
    let mut enc = encoder_at(&pair, Compression::Max { preset: 6 });
    let mut wire = Vec::new();
    for piece in file.chunks(64 << 10) {
        enc.push(piece, &mut wire);
    }
    enc.finish(&mut wire);
    let mut dec = Decoder::new(pair.core.clone(), DecoderConfig::default());
    let mut out = Vec::new();
    let (mut completing, mut pieces) = (0, 0);
    for piece in wire.chunks(1000) {
        let completes = dec.push_completes_frame(piece);
        let before = out.len();
        dec.push(piece, &mut out).unwrap();
        if !completes {
            assert_eq!(
                out.len(),
                before,
                "piece {pieces} decoded without completing a frame"
            );
        }
        completing += usize::from(completes);
        pieces += 1;
    }
    assert!(out == file, "round trip");
    assert!(
        completing > 0 && completing < pieces,
        "{completing} of {pieces} pieces completed a frame"
    );
    assert!(!dec.push_completes_frame(&[]), "nothing completes nothing");
}

#[test]
fn a_compressor_released_while_a_chunk_is_open_as_pieces_keeps_the_flow() {
    // An interactive session on a slow link: a file crosses in the flow's
    // compression stream, then a short request goes at once as a piece (its
    // chunk stays open), and the flow goes quiet long enough for the node
    // to free the compressor. The StreamEnd then sits between the chunk's
    // pieces and the rest of it: it says nothing of the byte stream, and
    // the flow must go on (it was reset with "pieces of a chunk out of
    // order", as SMB sessions that paused for a second were).
    for compression in [
        Compression::Zstd { level: 9 },
        Compression::Lzma { preset: 6 },
        Compression::Max { preset: 6 },
    ] {
        let pair = Pair::new(small_config());
        let mut enc = encoder_at(&pair, compression);
        let mut dec = Decoder::new(pair.core.clone(), DecoderConfig::default());
        let file = pooled_records(41, 4000, 40);
        let request = text(300, 42);
        let reply_body = pooled_records(43, 4000, 40);
        let mut sent = Vec::new();
        let mut out = Vec::new();
        let mut wire = Vec::new();
        for piece in file.chunks(64 << 10) {
            enc.push(piece, &mut wire);
        }
        enc.flush(&mut wire);
        sent.extend_from_slice(&file);
        enc.push(&request, &mut wire);
        enc.send_held(&mut wire);
        sent.extend_from_slice(&request);
        dec.push(&wire, &mut out).unwrap();
        assert!(out == sent, "the request arrives at once ({compression:?})");
        wire.clear();
        // Quiet: the node frees the compressor, the chunk still open.
        enc.release_compressor(&mut wire);
        assert_eq!(wire, [kind::STREAM_END, 0, 0, 0], "{compression:?}");
        dec.push(&wire, &mut out)
            .unwrap_or_else(|e| panic!("StreamEnd between pieces ({compression:?}): {e}"));
        assert_eq!(dec.decompressor_bytes(), 0, "the decoder frees its context");
        wire.clear();
        // The session goes on: more of the request's chunk, then a file.
        for piece in reply_body.chunks(64 << 10) {
            enc.push(piece, &mut wire);
        }
        enc.finish(&mut wire);
        sent.extend_from_slice(&reply_body);
        dec.push(&wire, &mut out).unwrap();
        assert!(dec.is_finished(), "{compression:?}");
        assert!(out == sent, "round trip ({compression:?})");
    }
}
