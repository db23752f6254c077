//! Compression of literals: LZ4, zstd, runs, the flow's compression stream
//! (zstd, LZMA2, PPMd), engine choice and release, named literals.

mod common;

use common::{
    binary_records, encoder_at, pooled_records, random, rng, small_config, text, Flow, Pair,
};
use rand::Rng;
use wanopt_codec::frame::{kind, Codec, DataRepr, Frame};
use wanopt_codec::{
    text_share, Compression, Decoder, DecoderConfig, EncoderConfig, PPMD_KEEP_SHARE,
    PPMD_TEXT_SHARE,
};

#[test]
fn zstd_literals_are_smaller_than_lz4_and_decode_the_same() {
    let file = text(1 << 20, 13);
    let mut sizes = Vec::new();
    for compression in [Compression::Lz4, Compression::ZSTD, Compression::Off] {
        let mut pair = Pair::new(small_config());
        pair.encoder.compression = compression;
        let (out, wan) = pair.transfer(&file, &[128 << 10]);
        assert_eq!(out, file, "{compression:?}");
        sizes.push(wan);
    }
    let [lz4, zstd, off] = sizes[..] else {
        unreachable!()
    };
    assert!(off > file.len() as u64, "uncompressed {off}");
    assert!(lz4 < off * 8 / 10, "lz4 {lz4} vs off {off}");
    assert!(zstd < lz4 * 9 / 10, "zstd {zstd} vs lz4 {lz4}");
}

#[test]
fn zstd_literals_compressed_together_are_smaller_and_each_chunk_is_cached() {
    let file = text(1 << 20, 15);
    let mut sizes = Vec::new();
    for run_len in [0, 128 << 10] {
        for compression in [Compression::Lz4, Compression::ZSTD] {
            let mut pair = Pair::new(small_config());
            pair.encoder.compression = compression;
            pair.encoder.run_len = run_len;
            let (out, wan) = pair.transfer(&file, &[128 << 10, 100_000, 7]);
            assert_eq!(out, file, "run_len {run_len} {compression:?}");
            sizes.push(wan);
            // Every chunk of a run was stored by the decoder on its own:
            // the same file again crosses as references.
            let (again, wan2) = pair.transfer(&file, &[128 << 10]);
            assert_eq!(again, file);
            assert!(
                (wan2 as f64) < file.len() as f64 * 0.02,
                "second pass {wan2} (run_len {run_len} {compression:?})"
            );
        }
    }
    let [lz4_alone, zstd_alone, lz4_runs, zstd_runs] = sizes[..] else {
        unreachable!()
    };
    // LZ4 stays chunk by chunk (EncoderConfig::run_len).
    assert_eq!(lz4_runs, lz4_alone);
    assert!(
        zstd_runs < zstd_alone * 95 / 100,
        "zstd {zstd_runs} vs {zstd_alone}"
    );
}

#[test]
fn runs_stay_within_the_frame_limit_whatever_the_setting() {
    let mut pair = Pair::new(small_config());
    pair.encoder.run_len = usize::MAX;
    pair.encoder.compression = Compression::ZSTD;
    let file = text(3 << 20, 16);
    let (out, _) = pair.transfer(&file, &[3 << 20]);
    assert_eq!(out, file);
}

#[test]
fn compression_can_change_mid_flow() {
    let pair = Pair::new(small_config());
    let file = text(600_000, 14);
    let mut flow = Flow::with_config(&pair.edge, &pair.core, EncoderConfig::default());
    for (i, piece) in file.chunks(50_000).enumerate() {
        // zstd at two levels and LZMA2: a change of level or engine
        // starts a new stream.
        flow.enc.set_compression(match i % 6 {
            0 => Compression::Lz4,
            1 => Compression::ZSTD,
            2 => Compression::Zstd { level: 9 },
            3 => Compression::Lzma { preset: 6 },
            4 => Compression::Max { preset: 6 },
            _ => Compression::Off,
        });
        flow.send(piece);
        flow.pump();
    }
    flow.finish();
    assert_eq!(flow.delivered, file);
}

/// The `StreamRun` frames in `wire`: (starts a new stream, chunks).
fn stream_runs(wire: &[u8]) -> Vec<(bool, usize)> {
    stream_run_codecs(wire)
        .into_iter()
        .map(|(fresh, count, _)| (fresh, count))
        .collect()
}

/// The `StreamRun` frames in `wire`: (starts a new stream, chunks, engine).
fn stream_run_codecs(wire: &[u8]) -> Vec<(bool, usize, Codec)> {
    let mut runs = Vec::new();
    let mut rest = wire;
    while !rest.is_empty() {
        let frame = Frame::new_checked(rest).unwrap();
        if let Ok(Some(DataRepr::StreamRun { fresh, run })) = DataRepr::parse(&frame) {
            runs.push((fresh, run.count(), run.codec));
        }
        rest = &rest[frame.total_len()..];
    }
    runs
}

/// Encode `pieces` one push each at `compression`; the wire.
fn encode_pieces(compression: Compression, pieces: &[&[u8]]) -> Vec<u8> {
    let mut enc = encoder_at(&Pair::new(small_config()), compression);
    let mut wire = Vec::new();
    for piece in pieces {
        enc.push(piece, &mut wire);
    }
    enc.finish(&mut wire);
    wire
}

/// Sends `file` twice in 64 KiB pieces, checking both arrivals and that the
/// second crossed as references (every chunk of a run was stored on its
/// own); the first transfer's WAN bytes.
fn cold_then_warm(pair: &Pair, file: &[u8]) -> u64 {
    let (out, wan) = pair.transfer(file, &[64 << 10]);
    assert!(out == file, "first transfer");
    let (again, wan2) = pair.transfer(file, &[64 << 10]);
    assert!(again == file, "second transfer");
    assert!((wan2 as usize) < file.len() / 50, "second pass {wan2}");
    wan
}

#[test]
fn zstd_runs_continue_one_stream_and_cross_smaller() {
    // Read in 64 KiB pieces, as a node reads its LAN side: each piece's
    // run continues the stream of the runs before it. The file is made of
    // 40-byte records drawn from a pool of 4000 (160 KB): they recur at
    // any distance, as an office file's records and styles do, but no two
    // chunks are alike, not even in their first or last 64 bytes (nothing
    // for references or deltas).
    let file = pooled_records(17, 4000, 40);
    let [independent, streamed] = [false, true].map(|stream_runs| {
        let mut pair = Pair::new(small_config());
        pair.encoder.compression = Compression::Zstd { level: 9 };
        pair.encoder.stream_runs = stream_runs;
        cold_then_warm(&pair, &file)
    });
    assert!(
        streamed < independent * 80 / 100,
        "streamed {streamed} vs independent runs {independent}"
    );
    // One stream, started once, for the whole flow.
    let pieces: Vec<&[u8]> = file.chunks(64 << 10).collect();
    let runs = stream_runs(&encode_pieces(Compression::Zstd { level: 9 }, &pieces));
    assert!(runs.len() >= 10, "{runs:?}");
    assert_eq!(runs.iter().filter(|(fresh, _)| *fresh).count(), 1);
    assert!(runs[0].0);
}

#[test]
fn lzma_runs_continue_one_stream_and_cross_smaller_than_zstd() {
    // Structured records, as in a spreadsheet: fixed-size rows whose
    // fields recur. LZMA2's position-aware modelling beats zstd at its
    // slowest level used (18) on them.
    let file = pooled_records(31, 4000, 40);
    let [zstd, lzma] = [
        Compression::Zstd { level: 18 },
        Compression::Lzma { preset: 6 },
    ]
    .map(|compression| {
        let mut pair = Pair::new(small_config());
        pair.encoder.compression = compression;
        cold_then_warm(&pair, &file)
    });
    assert!(lzma < zstd * 95 / 100, "lzma {lzma} vs zstd {zstd}");
    // One LZMA2 stream, started once, for the whole flow.
    let pieces: Vec<&[u8]> = file.chunks(64 << 10).collect();
    let runs = stream_run_codecs(&encode_pieces(Compression::Lzma { preset: 6 }, &pieces));
    assert!(runs.len() >= 10, "{runs:?}");
    assert!(runs.iter().all(|run| run.2 == Codec::Lzma), "{runs:?}");
    assert_eq!(runs.iter().filter(|run| run.0).count(), 1);
    assert!(runs[0].0);
}

#[test]
fn lzma_runs_with_incompressible_parts_start_anew_and_round_trip() {
    // Text, random bytes (those runs do not pay and go raw; the stream
    // starts anew after them), text again, in pieces of many sizes.
    let mut file = text(300 << 10, 32);
    file.extend(random(200 << 10, 33));
    file.extend(text(300 << 10, 34));
    let pieces: Vec<&[u8]> = file.chunks(50_000).collect();
    let runs = stream_run_codecs(&encode_pieces(Compression::Lzma { preset: 6 }, &pieces));
    assert!(runs.iter().filter(|run| run.0).count() >= 2, "{runs:?}");
    for piece in [1usize, 777, 64 << 10, 1 << 20] {
        let mut pair = Pair::new(small_config());
        pair.encoder.compression = Compression::Lzma { preset: 6 };
        let (out, wan) = pair.transfer(&file, &[piece]);
        assert!(out == file, "piece {piece}");
        assert!((wan as usize) < file.len() * 8 / 10, "piece {piece}: {wan}");
    }
}

#[test]
fn a_run_that_switches_engine_mid_stream_is_an_error() {
    // A zstd stream, then an LZMA2 run that claims to continue it: the
    // decoder refuses it (never a wrong byte).
    let file = pooled_records(35, 2000, 40);
    let (first, second) = file.split_at(file.len() / 2);
    let zstd = encode_pieces(Compression::ZSTD, &[first]);
    let lzma = encode_pieces(Compression::Lzma { preset: 6 }, &[second]);
    let mut wire = Vec::new();
    let mut rest = &zstd[..];
    while !rest.is_empty() {
        let frame = Frame::new_checked(rest).unwrap();
        if !matches!(DataRepr::parse(&frame), Ok(Some(DataRepr::End))) {
            wire.extend_from_slice(&rest[..frame.total_len()]);
        }
        rest = &rest[frame.total_len()..];
    }
    let cut = wire.len();
    let mut rest = &lzma[..];
    while !rest.is_empty() {
        let frame = Frame::new_checked(rest).unwrap();
        if let Ok(Some(DataRepr::StreamRun { run, .. })) = DataRepr::parse(&frame) {
            DataRepr::StreamRun { fresh: false, run }.emit(&mut wire);
        }
        rest = &rest[frame.total_len()..];
    }
    let pair = Pair::new(small_config());
    let mut dec = Decoder::new(pair.core.clone(), DecoderConfig::default());
    let mut out = Vec::new();
    dec.push(&wire[..cut], &mut out).unwrap();
    assert!(out == first);
    assert!(dec.push(&wire[cut..], &mut out).is_err());
    assert!(out == first, "nothing of the refused run delivered");
}

#[test]
fn no_delta_against_a_chunk_the_stream_still_holds() {
    // 200-byte records from a pool of 1000: chunks often start alike, so
    // without a stream they cross as deltas against earlier chunks of the
    // same flow. With one, those chunks are in the compressor's window
    // and go into the run instead, for fewer bytes.
    let file = pooled_records(21, 1000, 200);
    let mut results = Vec::new();
    for stream_runs in [false, true] {
        let mut pair = Pair::new(small_config());
        pair.encoder.compression = Compression::Zstd { level: 9 };
        pair.encoder.stream_runs = stream_runs;
        let mut flow = Flow::with_config(&pair.edge, &pair.core, pair.encoder);
        for piece in file.chunks(64 << 10) {
            flow.send(piece);
            flow.pump();
        }
        flow.finish();
        assert_eq!(flow.delivered, file);
        results.push(flow.enc.stats());
    }
    let [alone, streamed] = &results[..] else {
        unreachable!()
    };
    assert!(alone.deltas > 10, "{alone:?}");
    assert_eq!(streamed.deltas, 0, "{streamed:?}");
    assert!(
        streamed.wan_bytes_out < alone.wan_bytes_out * 9 / 10,
        "{streamed:?} vs {alone:?}"
    );
}

#[test]
fn no_delta_against_a_merely_similar_chunk_when_the_stream_costs_less() {
    // A first flow leaves records of a pool in both stores; a second flow
    // sends other records of the same pool. Its chunks often start like
    // the first flow's (a delta base the peer holds that its own stream
    // never saw), but once its stream has seen the pool it costs less
    // than such a delta: those chunks go into the stream's runs.
    let pool_file = |order: u64| {
        let mut r = rng(21);
        let pool: Vec<Vec<u8>> = (0..1000)
            .map(|_| (0..200).map(|_| b'a' + r.random_range(0..26u8)).collect())
            .collect();
        let mut r = rng(order);
        let mut file = Vec::new();
        while file.len() < 1 << 20 {
            file.extend_from_slice(&pool[r.random_range(0..pool.len())]);
        }
        file
    };
    let mut pair = Pair::new(small_config());
    pair.encoder.compression = Compression::Zstd { level: 9 };
    pair.encoder.stream_runs = true;
    let (out, _) = pair.transfer(&pool_file(1), &[64 << 10]);
    assert!(out == pool_file(1));
    let second = pool_file(2);
    let mut flow = Flow::with_config(&pair.edge, &pair.core, pair.encoder);
    let mut deltas_after_first_quarter = 0;
    for (i, piece) in second.chunks(64 << 10).enumerate() {
        flow.send(piece);
        flow.pump();
        if i == 3 {
            deltas_after_first_quarter = flow.enc.stats().deltas;
        }
    }
    flow.finish();
    assert!(flow.delivered == second);
    let stats = flow.enc.stats();
    assert!(deltas_after_first_quarter > 0, "{stats:?}");
    assert_eq!(
        stats.deltas, deltas_after_first_quarter,
        "deltas once the stream had seen the pool: {stats:?}"
    );
    // (With deltas all the way, about half the file crosses.)
    assert!(stats.wan_bytes_out < second.len() as u64 / 3, "{stats:?}");
}

#[test]
fn a_stream_run_after_one_that_did_not_pay_starts_anew() {
    // Text, then random bytes (the run does not pay: sent raw, and the
    // compressor's history no longer matches the decoder's), then text.
    let mut file = text(300 << 10, 18);
    file.extend(random(200 << 10, 19));
    file.extend(text(300 << 10, 20));
    let pieces: Vec<&[u8]> = file.chunks(64 << 10).collect();
    let runs = stream_runs(&encode_pieces(Compression::ZSTD, &pieces));
    let fresh = runs.iter().filter(|(fresh, _)| *fresh).count();
    assert!(fresh >= 2, "{runs:?}");
    let mut pair = Pair::new(small_config());
    pair.encoder.compression = Compression::ZSTD;
    let (out, wan) = pair.transfer(&file, &[64 << 10]);
    assert_eq!(out, file);
    assert!((wan as usize) < file.len() * 8 / 10, "{wan}");
}

#[test]
fn a_released_compressor_is_freed_and_the_next_run_starts_a_new_stream() {
    // A node frees an idle flow's compressor; the flow then goes on, and
    // the peer's decoder frees its context when told.
    for compression in [
        Compression::Zstd { level: 9 },
        Compression::Lzma { preset: 6 },
        // Letters: PPMd.
        Compression::Max { preset: 6 },
    ] {
        release_and_resume(compression);
    }
}

fn release_and_resume(compression: Compression) {
    let file = pooled_records(23, 4000, 40);
    let (first, second) = file.split_at(file.len() / 2);
    let pair = Pair::new(small_config());
    let mut enc = encoder_at(&pair, compression);
    let mut dec = Decoder::new(pair.core.clone(), DecoderConfig::default());
    let mut out = Vec::new();
    assert_eq!(enc.compressor_bytes(), 0);
    assert!(!dec.decodes_slowly());
    let mut wire = Vec::new();
    for piece in first.chunks(64 << 10) {
        enc.push(piece, &mut wire);
    }
    enc.flush(&mut wire);
    // Level 9: match tables of 2^20 entries.
    let held = enc.compressor_bytes();
    assert!(held > 4 << 20, "{held} bytes");
    dec.push(&wire, &mut out).unwrap();
    assert!(out == first, "first half");
    // The 1 MiB window and the context around it.
    let window = dec.decompressor_bytes();
    assert!(window > 1 << 20, "{window} bytes");
    // PPMd and LZMA2 decode at tens of MB/s: a node decodes them off its
    // runtime's worker; zstd decodes at GB/s.
    let slow = !matches!(compression, Compression::Zstd { .. });
    assert_eq!(dec.decodes_slowly(), slow, "{compression:?}");
    let sent = enc.stats().wan_bytes_out;
    let mut end = Vec::new();
    enc.release_compressor(&mut end);
    assert_eq!(enc.compressor_bytes(), 0);
    assert_eq!(end, [kind::STREAM_END, 0, 0, 0], "one StreamEnd frame");
    assert_eq!(enc.stats().wan_bytes_out, sent + 4);
    dec.push(&end, &mut out).unwrap();
    assert_eq!(dec.decompressor_bytes(), 0, "the decoder frees its context");
    assert!(!dec.decodes_slowly(), "no stream, nothing slow");
    // A second release (no stream) writes nothing.
    enc.release_compressor(&mut end);
    assert_eq!(end.len(), 4);
    wire.extend_from_slice(&end);
    let resumed = wire.len();
    for piece in second.chunks(64 << 10) {
        enc.push(piece, &mut wire);
    }
    assert!(enc.compressor_bytes() > 4 << 20);
    enc.finish(&mut wire);
    assert_eq!(enc.compressor_bytes(), 0, "finish frees it too");
    let runs = stream_runs(&wire);
    let fresh: Vec<usize> = (0..runs.len()).filter(|&i| runs[i].0).collect();
    assert_eq!(fresh.len(), 2, "{runs:?}");
    assert_eq!(fresh[0], 0);
    dec.push(&wire[resumed..], &mut out).unwrap();
    assert!(dec.is_finished());
    assert!(out == file, "round trip");
    assert_eq!(dec.decompressor_bytes(), 0, "End frees it");
    // From the start, through a fresh decoder, the same bytes.
    let mut again = Decoder::new(Pair::new(small_config()).core, DecoderConfig::default());
    let mut out = Vec::new();
    again.push(&wire, &mut out).unwrap();
    assert!(out == file, "round trip from the start");
}

#[test]
fn the_stream_compressor_estimate_covers_every_level() {
    // A node budgets flows' compressors by this estimate: it must not be
    // below what a sending flow holds, nor far above it.
    let file = pooled_records(29, 4000, 40);
    let mut settings: Vec<Compression> =
        (1..=19).map(|level| Compression::Zstd { level }).collect();
    settings.extend((4..=9).map(|preset| Compression::Lzma { preset }));
    for compression in settings {
        let pair = Pair::new(small_config());
        let mut enc = encoder_at(&pair, compression);
        let mut wire = Vec::new();
        let mut most = 0;
        for piece in file.chunks(128 << 10) {
            enc.push(piece, &mut wire);
            most = most.max(enc.compressor_bytes());
        }
        let estimate = compression.stream_compressor_bytes();
        assert!(most > 0, "{compression:?} keeps a stream");
        assert!(
            most <= estimate && estimate <= most * 3,
            "{compression:?}: holds {most} bytes, estimated {estimate}"
        );
    }
    assert_eq!(Compression::Lz4.stream_compressor_bytes(), 0);
    assert_eq!(Compression::Off.stream_compressor_bytes(), 0);
    // `Max` holds one engine at a time: PPMd for text, LZMA2 for the
    // rest; the estimate covers the larger.
    for (file, codec) in [
        (file.clone(), Codec::Ppmd),
        (binary_records(30), Codec::Lzma),
    ] {
        let compression = Compression::Max { preset: 6 };
        let pair = Pair::new(small_config());
        let mut enc = encoder_at(&pair, compression);
        let mut wire = Vec::new();
        let mut most = 0;
        for piece in file.chunks(128 << 10) {
            enc.push(piece, &mut wire);
            most = most.max(enc.compressor_bytes());
        }
        assert!(stream_run_codecs(&wire).iter().all(|run| run.2 == codec));
        let estimate = compression.stream_compressor_bytes();
        assert!(
            most > 0 && most <= estimate,
            "{codec:?}: {most} of {estimate}"
        );
    }
    assert_eq!(
        Compression::Max { preset: 6 }.stream_compressor_bytes(),
        Compression::Lzma { preset: 6 }.stream_compressor_bytes()
    );
}

/// `text` as UTF-16LE, as Word and PowerPoint store text.
fn utf16(text: &[u8]) -> Vec<u8> {
    text.iter().flat_map(|&b| [b, 0]).collect()
}

#[test]
fn text_share_counts_ascii_and_utf16_text() {
    assert_eq!(text_share(b""), 0.0);
    assert_eq!(text_share(b"plain text,\r\n\ttabbed"), 1.0);
    assert_eq!(text_share(&utf16(b"Quarterly report")), 1.0);
    assert_eq!(text_share(&[0u8; 100]), 0.0, "zeros alone are not text");
    assert!(text_share(&random(1 << 16, 1)) < 0.45);
    assert!(text_share(&binary_records(2)) < 0.4);
    let mut half = text(1000, 3);
    half.extend(random(1000, 4).iter().map(|b| b | 0x80));
    assert_eq!(text_share(&half), 0.5);
}

#[test]
fn max_sends_text_through_ppmd_and_records_through_lzma_and_crosses_smallest() {
    // Text, UTF-16 text, binary records, text again, in 64 KiB pieces as a
    // node reads them: the text runs go through PPMd, the records through
    // LZMA2 (each change of engine starts a new stream), everything
    // round-trips, and the whole crosses smaller than with LZMA2 alone.
    let mut file = text(300 << 10, 40);
    file.extend(utf16(&text(200 << 10, 41)));
    file.extend(&binary_records(42)[..400 << 10]);
    file.extend(text(200 << 10, 43));
    let pieces: Vec<&[u8]> = file.chunks(64 << 10).collect();
    let runs = stream_run_codecs(&encode_pieces(Compression::Max { preset: 6 }, &pieces));
    let codecs: Vec<Codec> = runs.iter().map(|run| run.2).collect();
    let first_lzma = codecs
        .iter()
        .position(|c| *c == Codec::Lzma)
        .expect("an LZMA2 run");
    let last_lzma = codecs
        .iter()
        .rposition(|c| *c == Codec::Lzma)
        .expect("an LZMA2 run");
    assert!(first_lzma >= 6, "text first: {codecs:?}");
    assert!(
        codecs[..first_lzma].iter().all(|c| *c == Codec::Ppmd),
        "{codecs:?}"
    );
    assert!(
        codecs[first_lzma..=last_lzma]
            .iter()
            .all(|c| *c == Codec::Lzma),
        "{codecs:?}"
    );
    assert!(
        codecs[last_lzma + 1..].iter().all(|c| *c == Codec::Ppmd),
        "{codecs:?}"
    );
    assert!(codecs.len() > last_lzma + 2, "text last: {codecs:?}");
    // Fresh exactly where the engine changes.
    for (i, run) in runs.iter().enumerate() {
        let changed = i == 0 || runs[i - 1].2 != run.2;
        assert_eq!(run.0, changed, "run {i}: {runs:?}");
    }
    let [lzma, max] = [
        Compression::Lzma { preset: 6 },
        Compression::Max { preset: 6 },
    ]
    .map(|compression| {
        let mut pair = Pair::new(small_config());
        pair.encoder.compression = compression;
        cold_then_warm(&pair, &file)
    });
    assert!(max < lzma * 90 / 100, "max {max} vs lzma {lzma}");
    // Any piece sizes.
    for piece in [1usize, 777, 1 << 20] {
        let mut pair = Pair::new(small_config());
        pair.encoder.compression = Compression::Max { preset: 5 };
        let (out, _) = pair.transfer(&file, &[piece]);
        assert!(out == file, "piece {piece}");
    }
}

#[test]
fn max_changes_engine_with_hysteresis() {
    // Runs between the two shares (text with some binary): after text
    // runs the stream stays PPMd (changing would lose the model); a flow
    // that starts with them uses LZMA2, and text after them takes it to
    // PPMd.
    let mut file = text(256 << 10, 44);
    // 1100 bytes of text, 1400 of binary, over and over: the same share
    // in every run wherever the runs end.
    let words = text(100 << 10, 45);
    let binary: Vec<u8> = random(128 << 10, 46).iter().map(|b| b | 0x80).collect();
    let mut mixed = Vec::new();
    for (w, b) in words.chunks(1100).zip(binary.chunks(1400)) {
        mixed.extend_from_slice(w);
        mixed.extend_from_slice(b);
    }
    let share = text_share(&mixed);
    assert!(
        (PPMD_KEEP_SHARE..PPMD_TEXT_SHARE).contains(&share),
        "{share}"
    );
    file.extend(&mixed);
    let pieces: Vec<&[u8]> = file.chunks(64 << 10).collect();
    let runs = stream_run_codecs(&encode_pieces(Compression::Max { preset: 6 }, &pieces));
    assert!(runs.len() >= 5, "{runs:?}");
    assert!(runs.iter().all(|run| run.2 == Codec::Ppmd), "{runs:?}");
    assert_eq!(runs.iter().filter(|run| run.0).count(), 1, "{runs:?}");
    // The other way round.
    let mut file = mixed.clone();
    file.extend(text(256 << 10, 47));
    let pieces: Vec<&[u8]> = file.chunks(64 << 10).collect();
    let runs = stream_run_codecs(&encode_pieces(Compression::Max { preset: 6 }, &pieces));
    let codecs: Vec<Codec> = runs.iter().map(|run| run.2).collect();
    let first_ppmd = codecs
        .iter()
        .position(|c| *c == Codec::Ppmd)
        .expect("a PPMd run");
    assert!(first_ppmd >= 2, "{codecs:?}");
    assert!(
        codecs[..first_ppmd].iter().all(|c| *c == Codec::Lzma),
        "{codecs:?}"
    );
    assert!(
        codecs[first_ppmd..].iter().all(|c| *c == Codec::Ppmd),
        "{codecs:?}"
    );
    let fresh: Vec<usize> = (0..runs.len()).filter(|&i| runs[i].0).collect();
    assert_eq!(fresh, [0, first_ppmd], "{runs:?}");
}

#[test]
fn a_run_that_continues_a_stream_after_its_end_is_an_error() {
    // After StreamEnd the decoder has no context: a run that claims to
    // continue the old stream cannot be decoded and fails the flow (never
    // a wrong byte).
    let file = pooled_records(24, 2000, 40);
    let (first, second) = file.split_at(file.len() / 2);
    let pair = Pair::new(small_config());
    let mut enc = encoder_at(&pair, Compression::Zstd { level: 3 });
    let mut wire = Vec::new();
    enc.push(first, &mut wire);
    enc.flush(&mut wire);
    let cut = wire.len();
    enc.push(second, &mut wire);
    enc.flush(&mut wire);
    assert!(
        stream_runs(&wire[cut..]).iter().any(|run| !run.0),
        "the second half continues the stream"
    );
    let mut dec = Decoder::new(pair.core.clone(), DecoderConfig::default());
    let mut out = Vec::new();
    dec.push(&wire[..cut], &mut out).unwrap();
    let delivered = out.len();
    let mut end = Vec::new();
    DataRepr::StreamEnd.emit(&mut end);
    dec.push(&end, &mut out).unwrap();
    assert!(dec.push(&wire[cut..], &mut out).is_err());
    assert!(out.len() <= file.len() && out[..] == file[..out.len()]);
    assert!(out.len() >= delivered);
}

/// The frames `encoder` writes for `data` (after the preamble), by type.
fn frame_types(config: EncoderConfig, data: &[u8]) -> Vec<u8> {
    let pair = Pair::new(small_config());
    let mut enc = wanopt_codec::Encoder::new(pair.edge.clone(), config).unwrap();
    let mut wire = Vec::new();
    enc.push(data, &mut wire);
    enc.finish(&mut wire);
    let mut types = Vec::new();
    let mut rest = &wire[..];
    while !rest.is_empty() {
        let frame = Frame::new_checked(rest).unwrap();
        types.push(frame.frame_type());
        rest = &rest[frame.total_len()..];
    }
    types
}

#[test]
fn literals_are_named_with_lz4_or_none_and_not_with_zstd() {
    let file = text(256 << 10, 21);
    let at = |compression| EncoderConfig {
        compression,
        ..EncoderConfig::default()
    };
    for compression in [Compression::Lz4, Compression::Off] {
        let types = frame_types(at(compression), &file);
        assert!(types.iter().filter(|&&t| t == kind::NAMED).count() > 10);
        assert!(!types.contains(&kind::LITERAL) && !types.contains(&kind::RUN));
    }
    let types = frame_types(at(Compression::ZSTD), &file);
    assert!(types.contains(&kind::STREAM_RUN));
    assert!(!types.contains(&kind::NAMED));
    // Named literals decode like any other, both ways, and are cached.
    let mut pair = Pair::new(small_config());
    pair.encoder = at(Compression::Lz4);
    let (out, _) = pair.transfer(&file, &[100_000]);
    assert_eq!(out, file);
    let (back, wan) = pair.transfer_back(&file, &[100_000]);
    assert_eq!(back, file);
    assert!((wan as usize) < file.len() / 50, "{wan} WAN bytes back");
}
