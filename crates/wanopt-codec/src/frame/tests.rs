//! Unit tests of the frame format.

use super::run::{STREAM_FRESH, STREAM_LZMA, STREAM_PPMD};
use super::*;
use crate::chunker::MAX_CHUNK_LEN;
use crate::compress::{Engine, Role};
use crate::fingerprint::{Fingerprint, FINGERPRINT_LEN};
use proptest::prelude::*;

fn round_trip(repr: DataRepr<'_>) {
    let mut buf = Vec::new();
    repr.emit(&mut buf);
    let frame = Frame::new_checked(&buf[..]).unwrap();
    assert_eq!(frame.total_len(), buf.len());
    assert_eq!(DataRepr::parse(&frame).unwrap(), Some(repr));
}

#[test]
fn data_frames_round_trip() {
    let fp = Fingerprint::of(b"x");
    round_trip(DataRepr::Preamble { version: VERSION });
    round_trip(DataRepr::Literal(Payload {
        codec: Codec::Raw,
        raw_len: 3,
        bytes: b"abc",
    }));
    round_trip(DataRepr::Reference {
        fingerprint: fp,
        raw_len: 8192,
    });
    round_trip(DataRepr::Repair {
        fingerprint: fp,
        payload: Payload {
            codec: Codec::Raw,
            raw_len: 1,
            bytes: b"x",
        },
    });
    round_trip(DataRepr::End);
    round_trip(DataRepr::StreamEnd);
    round_trip(DataRepr::Piece {
        cut: 0,
        payload: Some(Payload {
            codec: Codec::Raw,
            raw_len: 3,
            bytes: b"abc",
        }),
    });
    round_trip(DataRepr::Piece {
        cut: 9000,
        payload: None,
    });
    round_trip(DataRepr::PieceRef {
        fingerprint: fp,
        raw_len: 9000,
    });
    round_trip(DataRepr::PieceRest { cut: 9000 });
    for (body, err) in [
        (&[0u8, 0, 0][..], FrameError::Malformed(kind::PIECE_REST)),
        (
            &[0, 0, 0, 0, 0][..],
            FrameError::Malformed(kind::PIECE_REST),
        ),
        (&[0, 0, 0, 1][..], FrameError::ChunkLength(1)),
        (&[0, 0x10, 0, 1][..], FrameError::ChunkLength(0x0010_0001)),
    ] {
        let mut buf = Vec::new();
        emit_header(&mut buf, kind::PIECE_REST, body.len());
        buf.extend_from_slice(body);
        let frame = Frame::new_checked(&buf[..]).unwrap();
        assert_eq!(DataRepr::parse(&frame).map(|_| ()), Err(err));
    }
    // References (to whole chunks or after pieces) of the wrong size,
    // of no bytes, or longer than a chunk may be.
    for t in [kind::REFERENCE, kind::PIECE_REF] {
        let parse = |body: &[u8]| {
            let mut buf = Vec::new();
            emit_header(&mut buf, t, body.len());
            buf.extend_from_slice(body);
            let frame = Frame::new_checked(&buf[..]).unwrap();
            DataRepr::parse(&frame).map(|_| ())
        };
        let mut body = fp.as_bytes().to_vec();
        assert_eq!(parse(&body), Err(FrameError::Malformed(t)));
        body.extend_from_slice(&0u32.to_be_bytes());
        assert_eq!(parse(&body), Err(FrameError::ChunkLength(0)));
        body.truncate(FINGERPRINT_LEN);
        body.extend_from_slice(&(MAX_CHUNK_LEN as u32 + 1).to_be_bytes());
        assert_eq!(
            parse(&body),
            Err(FrameError::ChunkLength(MAX_CHUNK_LEN as u32 + 1))
        );
        body.push(0);
        assert_eq!(parse(&body), Err(FrameError::Malformed(t)));
    }
    // Pieces that cannot be: too short for the cut, a cut beyond the
    // largest chunk, neither bytes nor a cut, a bad payload.
    let piece = |body: &[u8]| {
        let mut buf = Vec::new();
        emit_header(&mut buf, kind::PIECE, body.len());
        buf.extend_from_slice(body);
        let frame = Frame::new_checked(&buf[..]).unwrap();
        DataRepr::parse(&frame).map(|_| ())
    };
    assert_eq!(piece(&[0, 0, 1]), Err(FrameError::Malformed(kind::PIECE)));
    let too_long = (MAX_CHUNK_LEN as u32 + 1).to_be_bytes();
    assert_eq!(
        piece(&too_long),
        Err(FrameError::ChunkLength(MAX_CHUNK_LEN as u32 + 1))
    );
    assert_eq!(piece(&[0; 4]), Err(FrameError::Malformed(kind::PIECE)));
    assert_eq!(
        piece(&[0, 0, 0, 0, 0, 0, 0, 0, 4, b'a']),
        Err(FrameError::Malformed(kind::PIECE))
    );
    round_trip(DataRepr::Named {
        fingerprint: fp,
        payload: Payload {
            codec: Codec::Raw,
            raw_len: 1,
            bytes: b"x",
        },
    });
    round_trip(DataRepr::Span {
        first: fp,
        count: 3,
        raw_len: 30_000,
        check: span_check(&[fp, fp, fp]),
    });
    let list = [(fp, 10_000u32), (Fingerprint::of(b"y"), 20_000)];
    let mut buf = Vec::new();
    emit_span_list(&fp, &list, &mut buf);
    let f = Frame::new_checked(&buf[..]).unwrap();
    let Ok(Some(DataRepr::SpanList { check, entries })) = DataRepr::parse(&f) else {
        panic!("span list does not parse");
    };
    assert_eq!(check, fp);
    assert_eq!(span_entries(entries).collect::<Vec<_>>(), list);
    round_trip(DataRepr::SpanList { check, entries });
    // The check depends on every fingerprint and their order.
    let (a, b) = (Fingerprint::of(b"a"), Fingerprint::of(b"b"));
    assert_ne!(span_check(&[a, b]), span_check(&[b, a]));
    assert_ne!(span_check(&[a, b]), span_check(&[a, b, b]));
    // A named literal too short for its fingerprint.
    let mut short = Vec::new();
    emit_header(&mut short, kind::NAMED, 10);
    short.extend_from_slice(&[0; 10]);
    let f = Frame::new_checked(&short[..]).unwrap();
    assert_eq!(
        DataRepr::parse(&f).unwrap_err(),
        FrameError::Malformed(kind::NAMED)
    );
}

fn run_frame(codec: u8, lengths: &[u32], payload: &[u8]) -> Vec<u8> {
    typed_run_frame(kind::RUN, codec, lengths, payload)
}

/// A `Run` (first byte: the codec) or `StreamRun` (the flags) frame.
fn typed_run_frame(t: u8, first: u8, lengths: &[u32], payload: &[u8]) -> Vec<u8> {
    let mut body = vec![first];
    body.extend_from_slice(&(lengths.len() as u16).to_be_bytes());
    for len in lengths {
        body.extend_from_slice(&len.to_be_bytes());
    }
    body.extend_from_slice(payload);
    let mut frame = Vec::new();
    emit_header(&mut frame, t, body.len());
    frame.extend_from_slice(&body);
    frame
}

/// `pieces` compressed as one zstd stream with a window of
/// `2^window_log` bytes, flushed after each piece, as the encoder
/// writes `StreamRun` payloads.
fn zstd_stream(pieces: &[&[u8]], window_log: u32) -> Vec<Vec<u8>> {
    use zstd::zstd_safe::{zstd_sys::ZSTD_EndDirective, CCtx, CParameter, InBuffer, OutBuffer};
    let mut cctx = CCtx::create();
    cctx.set_parameter(CParameter::WindowLog(window_log))
        .unwrap();
    pieces
        .iter()
        .map(|piece| {
            let mut out = Vec::with_capacity(zstd::zstd_safe::compress_bound(piece.len()) + 64);
            let mut input = InBuffer::around(piece);
            let mut output = OutBuffer::around(&mut out);
            let left = cctx
                .compress_stream2(&mut output, &mut input, ZSTD_EndDirective::ZSTD_e_flush)
                .unwrap();
            assert_eq!(left, 0);
            out
        })
        .collect()
}

#[test]
fn stream_runs_round_trip_and_continue_one_stream() {
    let a = b"quarterly revenue table, quarterly revenue figure. ".repeat(200);
    let b = b"quarterly revenue table, quarterly revenue figure! ".repeat(150);
    let packed = zstd_stream(&[&a, &b], STREAM_WINDOW_LOG);
    // The second piece leans on the first: far smaller than alone.
    assert!(packed[1].len() < zstd::bulk::compress(&b, 3).unwrap().len() / 2);
    let mut runs = Vec::new();
    for (i, (raw, bytes)) in [(&a, &packed[0]), (&b, &packed[1])].into_iter().enumerate() {
        let half = raw.len() as u32 / 2;
        let lengths = [half, raw.len() as u32 - half];
        runs.push(typed_run_frame(
            kind::STREAM_RUN,
            u8::from(i == 0),
            &lengths,
            bytes,
        ));
    }
    let parsed: Vec<_> = runs
        .iter()
        .map(|frame| {
            let frame = Frame::new_checked(&frame[..]).unwrap();
            let Ok(Some(DataRepr::StreamRun { fresh, run })) = DataRepr::parse(&frame) else {
                panic!("not a stream run");
            };
            assert_eq!(run.codec, Codec::Zstd);
            let mut again = Vec::new();
            DataRepr::StreamRun { fresh, run }.emit(&mut again);
            assert_eq!(again, frame_bytes(&frame));
            (fresh, run.bytes.to_vec(), run.lengths.to_vec())
        })
        .collect();
    assert!(parsed[0].0 && !parsed[1].0);
    let run_of = |i: usize| Run {
        codec: Codec::Zstd,
        lengths: &parsed[i].2,
        bytes: &parsed[i].1,
    };
    let mut stream = StreamDecoder::default();
    let mut out = vec![7];
    stream.decode_into(true, &run_of(0), &mut out).unwrap();
    stream.decode_into(false, &run_of(1), &mut out).unwrap();
    assert_eq!(out, [&[7][..], &a, &b].concat());
    // A stream whose window is above the cap is refused.
    let wide = zstd_stream(&[&a], STREAM_WINDOW_LOG + 1);
    let run = Run {
        codec: Codec::Zstd,
        lengths: &parsed[0].2,
        bytes: &wide[0],
    };
    let mut out = Vec::new();
    assert_eq!(
        StreamDecoder::default().decode_into(true, &run, &mut out),
        Err(FrameError::Decompress)
    );
    assert!(out.is_empty());
    // The second run alone, without the stream it continues, fails.
    let mut fresh = StreamDecoder::default();
    let mut out = vec![7];
    assert_eq!(
        fresh.decode_into(false, &run_of(1), &mut out),
        Err(FrameError::Decompress)
    );
    assert_eq!(
        fresh.decode_into(true, &run_of(1), &mut out),
        Err(FrameError::Decompress)
    );
    assert_eq!(out, vec![7]);
    // Lengths that sum to more or less than the stream holds.
    for delta in [1i64, -1] {
        let total = (a.len() as i64 + delta) as u32;
        let lengths: Vec<u8> = [total / 2, total - total / 2]
            .iter()
            .flat_map(|l| l.to_be_bytes())
            .collect();
        let run = Run {
            codec: Codec::Zstd,
            lengths: &lengths,
            bytes: &parsed[0].1,
        };
        let mut stream = StreamDecoder::default();
        let mut out = vec![7];
        assert_eq!(
            stream.decode_into(true, &run, &mut out),
            Err(FrameError::Decompress)
        );
        assert_eq!(out, vec![7]);
        // ... and the stream is gone after the error.
        assert_eq!(
            stream.decode_into(false, &run_of(1), &mut out),
            Err(FrameError::Decompress)
        );
    }
}

#[test]
fn ppmd_stream_runs_continue_and_refuse_what_does_not_fit() {
    let a = b"Quarterly revenue by region, in thousands. ".repeat(1500);
    let b = b"The budget table below totals each office. ".repeat(1000);
    let mut encoder = crate::compress::Ppmd::compressor().unwrap();
    let mut runs = Vec::new();
    for data in [&a, &b] {
        let mut out = Vec::new();
        assert!(encoder.compress(data, &mut out).is_ok());
        assert!(out.len() < data.len() / 10, "{}", out.len());
        runs.push(out);
    }
    fn run<'a>(lengths: &'a [u8], bytes: &'a [u8]) -> Run<'a> {
        Run {
            codec: Codec::Ppmd,
            lengths,
            bytes,
        }
    }
    let lengths = |n: usize| (n as u32).to_be_bytes();
    let (la, lb) = (&lengths(a.len())[..], &lengths(b.len())[..]);
    let (ra, rb) = (&runs[0][..], &runs[1][..]);
    // Round trip through emit and parse, the flag says PPMd.
    let mut wire = Vec::new();
    DataRepr::StreamRun {
        fresh: false,
        run: run(lb, rb),
    }
    .emit(&mut wire);
    assert_eq!(wire[HEADER_LEN], STREAM_PPMD);
    let frame = Frame::new_checked(&wire[..]).unwrap();
    assert_eq!(
        DataRepr::parse(&frame).unwrap(),
        Some(DataRepr::StreamRun {
            fresh: false,
            run: run(lb, rb)
        })
    );
    // PPMd and LZMA2 at once is malformed.
    wire[HEADER_LEN] = STREAM_PPMD | STREAM_LZMA;
    let frame = Frame::new_checked(&wire[..]).unwrap();
    assert!(DataRepr::parse(&frame).is_err());
    // The two runs continue one model.
    let mut stream = StreamDecoder::default();
    let mut out = vec![7];
    stream.decode_into(true, &run(la, ra), &mut out).unwrap();
    assert_eq!(stream.context_bytes(), PPMD_BYTES);
    stream.decode_into(false, &run(lb, rb), &mut out).unwrap();
    assert!(out == [&[7][..], &a, &b].concat());
    // The second run without the first (its model), fresh or not,
    // fails: nothing delivered.
    for fresh in [false, true] {
        let mut out = vec![7];
        let result = StreamDecoder::default().decode_into(fresh, &run(lb, rb), &mut out);
        assert_eq!(result, Err(FrameError::Decompress), "fresh {fresh}");
        assert_eq!(out, [7], "nothing delivered on error");
    }
    // Lengths that sum to more or less than the run holds, a byte
    // more or less in the run, a damaged byte, a wrong CRC: an error,
    // nothing delivered.
    let longer = [ra, &[0][..]].concat();
    let mut damaged = ra.to_vec();
    damaged[ra.len() / 2] ^= 0x10;
    let mut wrong_crc = ra.to_vec();
    wrong_crc[0] ^= 1;
    for (lengths, bytes) in [
        (lengths(a.len() + 1), ra),
        (lengths(a.len() - 1), ra),
        (lengths(a.len()), &longer[..]),
        (lengths(a.len()), &ra[..ra.len() - 1]),
        (lengths(a.len()), &damaged[..]),
        (lengths(a.len()), &wrong_crc[..]),
        (lengths(a.len()), &ra[..4]),
        (lengths(a.len()), &ra[..3]),
    ] {
        let mut stream = StreamDecoder::default();
        let mut out = vec![7];
        assert_eq!(
            stream.decode_into(true, &run(&lengths, bytes), &mut out),
            Err(FrameError::Decompress),
            "{} raw bytes in {} bytes",
            u32::from_be_bytes(lengths),
            bytes.len()
        );
        assert_eq!(out, [7]);
        assert_eq!(stream.context_bytes(), 0, "the stream is dropped");
    }
}

#[test]
fn lzma_stream_runs_continue_and_refuse_wrong_lengths() {
    let a = b"row 0001;cell;12.50;".repeat(3000);
    let b = b"row 0002;cell;13.75;".repeat(2000);
    let mut encoder = crate::compress::Lzma2::new(Role::Compress { level: 6 }).unwrap();
    let mut runs = Vec::new();
    for data in [&a, &b] {
        let mut out = Vec::new();
        assert!(encoder.compress(data, &mut out).is_ok());
        assert!(out.len() < data.len() / 10, "{}", out.len());
        runs.push(out);
    }
    fn run<'a>(lengths: &'a [u8], bytes: &'a [u8]) -> Run<'a> {
        Run {
            codec: Codec::Lzma,
            lengths,
            bytes,
        }
    }
    let lengths = |n: usize| (n as u32).to_be_bytes();
    let (la, lb) = (&lengths(a.len())[..], &lengths(b.len())[..]);
    let (ra, rb) = (&runs[0][..], &runs[1][..]);
    // Round trip through emit and parse, the flag says LZMA2.
    let mut wire = Vec::new();
    DataRepr::StreamRun {
        fresh: true,
        run: run(la, ra),
    }
    .emit(&mut wire);
    assert_eq!(wire[HEADER_LEN], STREAM_FRESH | STREAM_LZMA);
    let frame = Frame::new_checked(&wire[..]).unwrap();
    assert_eq!(
        DataRepr::parse(&frame).unwrap(),
        Some(DataRepr::StreamRun {
            fresh: true,
            run: run(la, ra)
        })
    );
    let mut stream = StreamDecoder::default();
    let mut out = vec![7];
    stream.decode_into(true, &run(la, ra), &mut out).unwrap();
    assert_eq!(stream.context_bytes(), LZMA_DECODER_BYTES);
    stream.decode_into(false, &run(lb, rb), &mut out).unwrap();
    assert!(out == [&[7][..], &a, &b].concat());
    // The second run without the first, fresh or not, fails.
    let mut out = vec![7];
    for fresh in [false, true] {
        assert_eq!(
            StreamDecoder::default().decode_into(fresh, &run(lb, rb), &mut out),
            Err(FrameError::Decompress)
        );
    }
    // Lengths that sum to more or less than the run holds.
    for wrong in [a.len() + 1, a.len() - 1] {
        let mut stream = StreamDecoder::default();
        assert_eq!(
            stream.decode_into(true, &run(&lengths(wrong), ra), &mut out),
            Err(FrameError::Decompress)
        );
        assert_eq!(stream.context_bytes(), 0, "dropped after an error");
    }
    assert_eq!(out, vec![7]);
    // An LZMA2 run cannot continue a zstd stream.
    let zstd = zstd_stream(&[&a], STREAM_WINDOW_LOG);
    let mut stream = StreamDecoder::default();
    let zrun = Run {
        codec: Codec::Zstd,
        lengths: la,
        bytes: &zstd[0],
    };
    stream.decode_into(true, &zrun, &mut out).unwrap();
    assert_eq!(
        stream.decode_into(false, &run(lb, rb), &mut out),
        Err(FrameError::Decompress)
    );
    assert!(out == [&[7][..], &a].concat());
}

fn frame_bytes<T: AsRef<[u8]>>(frame: &Frame<T>) -> Vec<u8> {
    frame.buffer.as_ref()[..frame.total_len()].to_vec()
}

#[test]
fn rejects_bad_stream_run_frames() {
    let parse = |frame: Vec<u8>| {
        let frame = Frame::new_checked(&frame[..]).map(|f| DataRepr::parse(&f).map(|_| ()));
        frame.and_then(|r| r)
    };
    let malformed = Err(FrameError::Malformed(kind::STREAM_RUN));
    let frame = |flags: u8, lengths: &[u32], payload: &[u8]| {
        typed_run_frame(kind::STREAM_RUN, flags, lengths, payload)
    };
    assert_eq!(parse(frame(1, &[10, 10], &[1; 5])), Ok(()));
    assert_eq!(parse(frame(0, &[10, 10], &[1; 5])), Ok(()));
    // Bit 1: LZMA2.
    assert_eq!(parse(frame(3, &[10, 10], &[1; 5])), Ok(()));
    assert_eq!(parse(frame(2, &[10, 10], &[1; 5])), Ok(()));
    // Bit 2: PPMd; not with bit 1.
    assert_eq!(parse(frame(5, &[10, 10], &[1; 5])), Ok(()));
    assert_eq!(parse(frame(4, &[10, 10], &[1; 5])), Ok(()));
    assert_eq!(parse(frame(6, &[10, 10], &[1; 5])), malformed);
    assert_eq!(parse(frame(7, &[10, 10], &[1; 5])), malformed);
    // Unknown flags, no chunks, empty payload, payload longer than raw.
    assert_eq!(parse(frame(8, &[10, 10], &[1; 5])), malformed);
    assert_eq!(parse(frame(0x83, &[10, 10], &[1; 5])), malformed);
    assert_eq!(parse(frame(1, &[], &[1; 5])), malformed);
    assert_eq!(parse(frame(1, &[10, 10], &[])), malformed);
    assert_eq!(parse(frame(1, &[4, 4], &[1; 9])), malformed);
    let mut empty = Vec::new();
    emit_header(&mut empty, kind::STREAM_RUN, 0);
    assert_eq!(parse(empty), malformed);
    let big = MAX_CHUNK_LEN as u32;
    assert_eq!(
        parse(frame(1, &[big + 1], &[1; 2])),
        Err(FrameError::ChunkLength(big + 1))
    );
    // A stream end carries nothing.
    let mut end = Vec::new();
    emit_header(&mut end, kind::STREAM_END, 1);
    end.push(0);
    assert_eq!(parse(end), Err(FrameError::Malformed(kind::STREAM_END)));
}

#[test]
fn run_frames_round_trip_and_split_at_their_lengths() {
    let chunks: [&[u8]; 3] = [&[b'a'; 3000], &[b'b'; 5000], &[b'a'; 1000]];
    let raw = chunks.concat();
    let packed = lz4_flex::block::compress(&raw);
    let lengths: Vec<u8> = chunks
        .iter()
        .flat_map(|c| (c.len() as u32).to_be_bytes())
        .collect();
    let run = Run {
        codec: Codec::Lz4,
        lengths: &lengths,
        bytes: &packed,
    };
    round_trip(DataRepr::Run(run));
    assert_eq!(run.lengths().collect::<Vec<_>>(), vec![3000, 5000, 1000]);
    assert_eq!(run.raw_len(), 9000);
    let mut out = vec![7];
    run.decode_into(&mut out).unwrap();
    assert_eq!(&out[1..], &raw[..]);
    // A run whose lengths sum to more (or less) than the payload holds.
    for lengths in [[3000u32, 5000, 1001], [3000, 5000, 999]] {
        let frame = run_frame(1, &lengths, &packed);
        let frame = Frame::new_checked(&frame[..]).unwrap();
        let Ok(Some(DataRepr::Run(bad))) = DataRepr::parse(&frame) else {
            panic!("{lengths:?} should parse");
        };
        let mut out = vec![7];
        assert_eq!(bad.decode_into(&mut out), Err(FrameError::Decompress));
        assert_eq!(out, vec![7]);
    }
}

#[test]
fn rejects_bad_run_frames() {
    let parse = |frame: Vec<u8>| {
        let frame = Frame::new_checked(&frame[..]).map(|f| DataRepr::parse(&f).map(|_| ()));
        frame.and_then(|r| r)
    };
    let malformed = Err(FrameError::Malformed(kind::RUN));
    // Raw codec, no chunks, lengths cut short, empty payload.
    assert_eq!(parse(run_frame(0, &[10, 10], &[1; 5])), malformed);
    assert_eq!(parse(run_frame(1, &[], &[1; 5])), malformed);
    assert_eq!(parse(run_frame(1, &[10, 10], &[])), malformed);
    let mut short = run_frame(1, &[10, 10], &[]);
    short[6] = 3; // count 3, two lengths
    short[3] = 3 + 8;
    assert_eq!(parse(short), malformed);
    // Payload longer than the raw bytes, a zero length, too much in all.
    assert_eq!(parse(run_frame(1, &[4, 4], &[1; 9])), malformed);
    assert_eq!(
        parse(run_frame(1, &[4, 0], &[1; 2])),
        Err(FrameError::ChunkLength(0))
    );
    let big = MAX_CHUNK_LEN as u32;
    assert_eq!(parse(run_frame(2, &[big, 1], &[1; 2])), malformed);
    assert_eq!(
        parse(run_frame(2, &[big + 1], &[1; 2])),
        Err(FrameError::ChunkLength(big + 1))
    );
    assert_eq!(
        parse(run_frame(9, &[4], &[1])),
        Err(FrameError::UnknownCodec(9))
    );
}

#[test]
fn rejects_bad_span_frames() {
    let span = |count: u16, raw_len: u32| {
        let mut buf = Vec::new();
        DataRepr::Span {
            first: Fingerprint::of(b"a"),
            count,
            raw_len,
            check: Fingerprint::of(b"c"),
        }
        .emit(&mut buf);
        buf
    };
    let parse = |buf: &[u8]| {
        let f = Frame::new_checked(buf).unwrap();
        DataRepr::parse(&f).map(|_| ())
    };
    let malformed = Err(FrameError::Malformed(kind::SPAN));
    assert_eq!(parse(&span(2, 2)), Ok(()));
    assert_eq!(parse(&span(1, 100)), malformed);
    assert_eq!(parse(&span(257, 100_000)), malformed);
    assert_eq!(parse(&span(3, 2)), malformed);
    assert_eq!(parse(&span(2, (MAX_SPAN_LEN + 1) as u32)), malformed);
    let mut long = span(2, 100);
    long.push(0);
    long[3] += 1;
    assert_eq!(parse(&long), malformed);
    let list = |entries: &[(Fingerprint, u32)]| {
        let mut buf = Vec::new();
        emit_span_list(&Fingerprint::of(b"c"), entries, &mut buf);
        buf
    };
    let fp = Fingerprint::of(b"x");
    assert_eq!(parse(&list(&[(fp, 5)])), Ok(()));
    assert_eq!(
        parse(&list(&[])),
        Err(FrameError::Malformed(kind::SPAN_LIST))
    );
    assert_eq!(
        parse(&list(&[(fp, 5), (fp, 0)])),
        Err(FrameError::ChunkLength(0))
    );
    let mut cut = list(&[(fp, 5), (fp, 6)]);
    cut.truncate(cut.len() - 1);
    cut[3] -= 1;
    assert_eq!(parse(&cut), Err(FrameError::Malformed(kind::SPAN_LIST)));
}

#[test]
fn rejects_bad_frames() {
    assert_eq!(
        Frame::new_checked(&[2u8, 0, 0][..]).unwrap_err(),
        FrameError::Truncated
    );
    assert!(matches!(
        Frame::new_checked(&[2u8, 0xff, 0xff, 0xff][..]).unwrap_err(),
        FrameError::TooLong(_)
    ));
    let bad_magic = [1u8, 0, 0, 5, b'X', b'O', b'P', b'C', 1];
    let f = Frame::new_checked(&bad_magic[..]).unwrap();
    assert_eq!(DataRepr::parse(&f).unwrap_err(), FrameError::BadMagic);
    let zero_len = [
        3u8, 0, 0, 20, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    ];
    let f = Frame::new_checked(&zero_len[..]).unwrap();
    assert_eq!(DataRepr::parse(&f).unwrap_err(), FrameError::ChunkLength(0));
    // LZ4 payload claiming more raw bytes than it decodes to.
    let payload = Payload {
        codec: Codec::Lz4,
        raw_len: 100,
        bytes: &[0x10, b'a'],
    };
    let mut out = vec![9];
    assert_eq!(payload.decode_into(&mut out), Err(FrameError::Decompress));
    assert_eq!(out, vec![9]);
}

#[test]
fn delta_frames_round_trip_and_need_their_base() {
    // Not repetitive: every byte of the edited chunk can only come
    // from the same place in the base.
    let mut x = 0x2545_f491_u32;
    let base: Vec<u8> = (0..8000)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            x as u8
        })
        .collect();
    let mut edited = base.clone();
    edited[4000..4016].copy_from_slice(b"sixteen changed!");
    let mut packed = Vec::new();
    let n = delta_compress(&edited, &base, 3, &mut packed).unwrap();
    assert!(n < 100, "delta of a 16-byte edit is {n} bytes");
    for after_pieces in [false, true] {
        round_trip(DataRepr::Delta {
            target: Fingerprint::of(&edited),
            base: Fingerprint::of(&base),
            raw_len: edited.len() as u32,
            bytes: &packed[..n],
            after_pieces,
        });
    }
    let mut out = vec![0u8; edited.len()];
    assert_eq!(
        delta_decompress(&packed[..n], &base, &mut out),
        Some(edited.len())
    );
    assert_eq!(out, edited);
    // Against the wrong base the result differs (the decoder's
    // fingerprint check catches it) or fails.
    let mut wrong_base = base.clone();
    wrong_base[10] ^= 1;
    wrong_base[7000] ^= 1;
    let mut out2 = vec![0u8; edited.len()];
    let decoded = delta_decompress(&packed[..n], &wrong_base, &mut out2);
    assert!(decoded.is_none() || out2 != edited);
    // A payload not shorter than the chunk is malformed.
    let mut buf = Vec::new();
    DataRepr::Delta {
        target: Fingerprint::of(b"a"),
        base: Fingerprint::of(b"b"),
        raw_len: 3,
        bytes: b"xyz",
        after_pieces: false,
    }
    .emit(&mut buf);
    let f = Frame::new_checked(&buf[..]).unwrap();
    assert_eq!(
        DataRepr::parse(&f).unwrap_err(),
        FrameError::Malformed(kind::DELTA)
    );
}

#[test]
fn zstd_payloads_decode_only_to_their_exact_length() {
    let raw: Vec<u8> = b"all work and no play ".repeat(200);
    let packed = zstd::bulk::compress(&raw, 3).unwrap();
    let good = Payload {
        codec: Codec::Zstd,
        raw_len: raw.len() as u32,
        bytes: &packed,
    };
    round_trip(DataRepr::Literal(good));
    let mut out = vec![7];
    good.decode_into(&mut out).unwrap();
    assert_eq!(&out[1..], &raw[..]);
    // Claiming one byte more or less than the frame holds is an error
    // that leaves `out` as it was.
    for raw_len in [raw.len() as u32 - 1, raw.len() as u32 + 1] {
        let mut out = vec![7];
        let wrong = Payload { raw_len, ..good };
        assert_eq!(wrong.decode_into(&mut out), Err(FrameError::Decompress));
        assert_eq!(out, vec![7]);
    }
    // Garbage is an error too.
    let garbage = Payload {
        codec: Codec::Zstd,
        raw_len: 100,
        bytes: &[0x28, 0xb5, 0x2f, 0xfd, 0xff, 0xff],
    };
    assert_eq!(
        garbage.decode_into(&mut Vec::new()),
        Err(FrameError::Decompress)
    );
    // The codec byte 3 is unknown.
    let mut body = vec![3u8, 0, 0, 0, 1, b'x'];
    let mut frame = Vec::new();
    emit_header(&mut frame, kind::LITERAL, body.len());
    frame.append(&mut body);
    let f = Frame::new_checked(&frame[..]).unwrap();
    assert_eq!(
        DataRepr::parse(&f).unwrap_err(),
        FrameError::UnknownCodec(3)
    );
}

proptest! {
    #[test]
    fn run_frames_from_the_network_decode_exactly_or_fail(
        codec in 0u8..4,
        lengths in proptest::collection::vec(0u32..70_000, 0..6),
        payload in proptest::collection::vec(any::<u8>(), 0..300),
        valid in any::<bool>(),
    ) {
        // Either a real compressed run with lengths that may not match,
        // or arbitrary bytes as the payload.
        let raw: Vec<u8> = (0..lengths.iter().sum::<u32>().min(200_000)).map(|i| (i % 7) as u8).collect();
        let payload = if valid { lz4_flex::block::compress(&raw) } else { payload };
        let frame = run_frame(codec, &lengths, &payload);
        let frame = Frame::new_checked(&frame[..]).unwrap();
        if let Ok(Some(DataRepr::Run(run))) = DataRepr::parse(&frame) {
            let mut out = vec![1, 2, 3];
            match run.decode_into(&mut out) {
                Ok(()) => prop_assert_eq!(out.len(), 3 + run.raw_len()),
                Err(_) => prop_assert_eq!(out, vec![1, 2, 3]),
            }
        }
    }

    #[test]
    fn parse_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
        if let Ok(frame) = Frame::new_checked(&bytes[..]) {
            match DataRepr::parse(&frame) {
                Ok(Some(
                    DataRepr::Literal(p)
                    | DataRepr::Repair { payload: p, .. }
                    | DataRepr::Named { payload: p, .. },
                )) => {
                    let mut out = Vec::new();
                    let _ = p.decode_into(&mut out);
                }
                Ok(Some(DataRepr::Run(run))) => {
                    let mut out = Vec::new();
                    if run.decode_into(&mut out).is_ok() {
                        prop_assert_eq!(out.len(), run.raw_len());
                    }
                }
                Ok(Some(DataRepr::StreamRun { fresh, run })) => {
                    let mut out = Vec::new();
                    let mut stream = StreamDecoder::default();
                    if stream.decode_into(fresh, &run, &mut out).is_ok() {
                        prop_assert_eq!(out.len(), run.raw_len());
                    }
                }
                _ => {}
            }
        }
    }
}
