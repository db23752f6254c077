//! Cold WAN bytes of files with zstd, runs compressed on their own against
//! runs that continue one stream per flow (`StreamRun`), at the levels
//! `--compression auto` may use; each file pushed in 64 KiB reads into a
//! fresh pair of caches, decoded and checked. Encode speed is one core's,
//! for the whole encoder (chunking, hashing, store), and noisy; the last
//! columns are the memory of the flow's stream compressor while it sends
//! and of the receiving side's decompression context before the end.
//! A second table sets the slow settings `auto` picks below 3 Mbit/s,
//! LZMA2 stream runs, beside zstd's slowest levels (all as stream runs).
//!
//! `wanopt lab waas-files --out /tmp/waas-files` then
//! `cargo run -p wanopt-codec --release --example stream_runs -- /tmp/waas-files/*.doc`
//! (`-- --slow FILE...`: the second table only).

use std::time::Instant;

use wanopt_codec::{Compression, Decoder, DecoderConfig, Encoder, EncoderConfig};

mod support;

const READ: usize = 64 << 10;

/// (WAN bytes, encode seconds, bytes held by the stream compressor and by
/// the decompression context before the end) of one cold transfer of
/// `data`.
fn cold(data: &[u8], compression: Compression, stream_runs: bool) -> (usize, f64, usize, usize) {
    let pair = support::cache_pair();
    let config = EncoderConfig {
        compression,
        stream_runs,
        ..EncoderConfig::default()
    };
    let mut enc = Encoder::new(pair.edge.clone(), config).expect("encoder");
    let mut wire = Vec::new();
    let start = Instant::now();
    for piece in data.chunks(READ) {
        enc.push(piece, &mut wire);
    }
    let held = enc.compressor_bytes();
    enc.finish(&mut wire);
    let seconds = start.elapsed().as_secs_f64();
    let mut dec = Decoder::new(pair.core.clone(), DecoderConfig::default());
    let mut out = Vec::new();
    // The End frame (4 bytes, last) frees the decoder's context.
    let (body, end) = wire.split_at(wire.len() - 4);
    assert_eq!(end, [wanopt_codec::frame::kind::END, 0, 0, 0]);
    dec.push(body, &mut out).expect("decodes");
    let decompressor = dec.decompressor_bytes();
    dec.push(end, &mut out).expect("decodes");
    assert!(out == data, "round trip");
    (wire.len(), seconds, held, decompressor)
}

fn main() {
    let mut paths: Vec<String> = std::env::args().skip(1).collect();
    // `--slow`: only the second table.
    let slow_only = paths.first().is_some_and(|a| a == "--slow");
    if slow_only {
        paths.remove(0);
    }
    if paths.is_empty() {
        eprintln!("usage: stream_runs [--slow] FILE...");
        std::process::exit(2);
    }
    println!("| file | level | independent runs | stream runs | stream / independent | encode MB/s (independent, stream) | compressor MiB | decompressor MiB |");
    println!("|---|---:|---:|---:|---:|---|---:|---:|");
    let mut files = Vec::new();
    for path in &paths {
        let data = match std::fs::read(path) {
            Ok(data) => data,
            Err(e) => {
                eprintln!("{path}: {e}");
                std::process::exit(1);
            }
        };
        let name = std::path::Path::new(path)
            .file_name()
            .map_or(path.clone(), |n| n.to_string_lossy().into_owned());
        files.push((name.clone(), data.clone()));
        let levels: &[i32] = if slow_only { &[] } else { &[3, 9, 14, 16, 18] };
        for &level in levels {
            let zstd = Compression::Zstd { level };
            let (alone, t1, _, _) = cold(&data, zstd, false);
            let (streamed, t2, held, decompressor) = cold(&data, zstd, true);
            let mb = |t: f64| data.len() as f64 / t / 1e6;
            println!(
                "| {name} | {level} | {alone} | {streamed} | {:.3} | {:.1}, {:.1} | {:.1} | {:.2} |",
                streamed as f64 / alone as f64,
                mb(t1),
                mb(t2),
                held as f64 / f64::from(1 << 20),
                decompressor as f64 / f64::from(1 << 20)
            );
        }
    }
    println!();
    println!("| file | compression | WAN bytes | / zstd 18 | encode MB/s | compressor MiB | decompressor MiB |");
    println!("|---|---|---:|---:|---:|---:|---:|");
    for (name, data) in &files {
        let (base, _, _, _) = cold(data, Compression::Zstd { level: 18 }, true);
        for compression in [
            Compression::Zstd { level: 16 },
            Compression::Zstd { level: 18 },
            Compression::Lzma { preset: 5 },
            Compression::Lzma { preset: 6 },
            Compression::Max { preset: 5 },
            Compression::Max { preset: 6 },
        ] {
            let (wan, t, held, decompressor) = cold(data, compression, true);
            let setting = match compression {
                Compression::Zstd { level } => format!("zstd {level}"),
                Compression::Lzma { preset } => format!("lzma {preset}"),
                Compression::Max { preset } => format!("max {preset}"),
                other => format!("{other:?}"),
            };
            println!(
                "| {name} | {setting} | {wan} | {:.3} | {:.1} | {:.1} | {:.2} |",
                wan as f64 / base as f64,
                data.len() as f64 / t / 1e6,
                held as f64 / f64::from(1 << 20),
                decompressor as f64 / f64::from(1 << 20)
            );
        }
    }
}
