//! Where a cold transfer's WAN bytes go: encodes FILE into a fresh pair of
//! caches (64 KiB reads, as a flow pushes them) and prints one line per
//! frame (offset in the input, type, frame bytes, raw bytes, engine), then
//! totals per frame type and engine.
//!
//! `cargo run -p wanopt-codec --release --example frame_map -- [--read BYTES] [--prefix BYTES] [--compression max|lzma|zstd] FILE`
//! (`--read`: the pieces pushed, 65536 by default; `--prefix`: that many
//! bytes of an HTTP header before the file).

use std::collections::BTreeMap;

use wanopt_codec::frame::kind;
use wanopt_codec::{Compression, Decoder, DecoderConfig, Encoder, EncoderConfig};

mod support;

fn main() {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let mut compression = Compression::Max { preset: 6 };
    let mut read = 64 << 10;
    let mut prefix = 0usize;
    loop {
        match args.first().map(String::as_str) {
            Some("--read") if args.len() >= 2 => {
                read = args[1].parse().unwrap_or(read).max(1);
                args.drain(..2);
            }
            Some("--prefix") if args.len() >= 2 => {
                prefix = args[1].parse().unwrap_or(0);
                args.drain(..2);
            }
            _ => break,
        }
    }
    if args.first().is_some_and(|a| a == "--compression") && args.len() >= 2 {
        compression = match args[1].as_str() {
            "max" => Compression::Max { preset: 6 },
            "lzma" => Compression::Lzma { preset: 6 },
            "zstd" => Compression::Zstd { level: 18 },
            other => {
                eprintln!("frame_map: unknown compression {other:?}");
                std::process::exit(2);
            }
        };
        args.drain(..2);
    }
    let [path] = args.as_slice() else {
        eprintln!(
            "usage: frame_map [--read BYTES] [--prefix BYTES] [--compression max|lzma|zstd] FILE"
        );
        std::process::exit(2);
    };
    let file = std::fs::read(path).unwrap_or_else(|e| {
        eprintln!("{path}: {e}");
        std::process::exit(1);
    });
    // `--prefix N`: N bytes of header before the file (an HTTP response's).
    let mut data: Vec<u8> = b"HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\n"
        .iter()
        .copied()
        .cycle()
        .take(prefix)
        .collect();
    data.extend_from_slice(&file);
    let pair = support::cache_pair();
    let config = EncoderConfig {
        compression,
        stream_runs: true,
        ..EncoderConfig::default()
    };
    let mut enc = Encoder::new(pair.edge.clone(), config).expect("encoder");
    let mut wire = Vec::new();
    for piece in data.chunks(read) {
        enc.push(piece, &mut wire);
    }
    enc.finish(&mut wire);
    let mut dec = Decoder::new(pair.core.clone(), DecoderConfig::default());
    let mut out = Vec::new();
    dec.push(&wire, &mut out).expect("decodes");
    assert!(out == data, "round trip");

    let mut totals: BTreeMap<String, (usize, usize, usize)> = BTreeMap::new();
    let mut pos = 0;
    let mut raw_at = 0usize;
    println!("| at | frame | bytes | raw | chunks |");
    println!("|---:|---|---:|---:|---:|");
    while pos + 4 <= wire.len() {
        let t = wire[pos];
        let len = usize::from(wire[pos + 1]) << 16
            | usize::from(wire[pos + 2]) << 8
            | usize::from(wire[pos + 3]);
        let body = &wire[pos + 4..pos + 4 + len];
        let (name, raw, chunks) = match t {
            kind::STREAM_RUN | kind::RUN => {
                let flags = body[0];
                let count = usize::from(u16::from_be_bytes([body[1], body[2]]));
                let raw: usize = (0..count)
                    .map(|i| {
                        let at = 3 + 4 * i;
                        u32::from_be_bytes(body[at..at + 4].try_into().unwrap()) as usize
                    })
                    .sum();
                let engine = if t == kind::RUN {
                    format!("run codec {flags}")
                } else if flags & 4 != 0 {
                    "stream ppmd".into()
                } else if flags & 2 != 0 {
                    "stream lzma".into()
                } else {
                    "stream zstd".into()
                };
                let engine = if flags & 1 != 0 && t == kind::STREAM_RUN {
                    format!("{engine} (new)")
                } else {
                    engine
                };
                (engine, raw, count)
            }
            kind::LITERAL | kind::NAMED => {
                let off = if t == kind::NAMED { 16 } else { 0 };
                let codec = body[off];
                let raw = u32::from_be_bytes(body[off + 1..off + 5].try_into().unwrap()) as usize;
                (format!("literal codec {codec}"), raw, 1)
            }
            kind::DELTA => {
                let raw = u32::from_be_bytes(body[32..36].try_into().unwrap()) as usize;
                ("delta".into(), raw, 1)
            }
            kind::ACK => ("ack".into(), 0, 0),
            kind::SENT => ("sent".into(), 0, 0),
            kind::PREAMBLE => ("preamble".into(), 0, 0),
            kind::END => ("end".into(), 0, 0),
            other => (format!("type {other:#04x}"), 0, 0),
        };
        println!("| {raw_at} | {name} | {} | {raw} | {chunks} |", len + 4);
        let e = totals.entry(name.replace(" (new)", "")).or_default();
        e.0 += len + 4;
        e.1 += raw;
        e.2 += 1;
        raw_at += raw;
        pos += 4 + len;
    }
    println!();
    println!("| frames | count | bytes | raw |");
    println!("|---|---:|---:|---:|");
    for (name, (bytes, raw, n)) in &totals {
        println!("| {name} | {n} | {bytes} | {raw} |");
    }
    println!("| all | | {} | {} |", wire.len(), data.len());
}
