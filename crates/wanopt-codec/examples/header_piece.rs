//! What a response's header line sent at once as a piece costs the body
//! behind it: cold WAN bytes of `OK <length>\n` and a file (64 KiB reads,
//! a fresh pair of caches each, decoded and checked), with the header
//! held for the body's first chunk as before, and sent at once with
//! `Encoder::send_held` as the node does for a short read that ends a
//! quiet. `--compression max` preset 5 is what `auto` uses at 2 Mbit/s.
//!
//! `wanopt lab waas-files --out /tmp/waas-files` then
//! `cargo run -p wanopt-codec --release --example header_piece -- /tmp/waas-files/*.doc`

use wanopt_codec::{Compression, Decoder, DecoderConfig, Encoder, EncoderConfig};

mod support;

const READ: usize = 64 << 10;

/// WAN bytes of one cold transfer of `head` then `data`, the head sent at
/// once when `piece`.
fn cold(head: &[u8], data: &[u8], piece: bool) -> usize {
    let pair = support::cache_pair();
    let config = EncoderConfig {
        compression: Compression::Max { preset: 5 },
        ..EncoderConfig::default()
    };
    let mut enc = Encoder::new(pair.edge.clone(), config).expect("encoder");
    let mut wire = Vec::new();
    enc.push(head, &mut wire);
    if piece {
        enc.send_held(&mut wire);
    }
    for read in data.chunks(READ) {
        enc.push(read, &mut wire);
    }
    enc.finish(&mut wire);
    let mut dec = Decoder::new(pair.core.clone(), DecoderConfig::default());
    let mut out = Vec::new();
    dec.push(&wire, &mut out).expect("decodes");
    assert!(
        out[..head.len()] == *head && out[head.len()..] == *data,
        "round trip"
    );
    wire.len()
}

fn main() {
    let paths: Vec<String> = std::env::args().skip(1).collect();
    if paths.is_empty() {
        eprintln!("usage: header_piece FILE...");
        std::process::exit(2);
    }
    println!("| file | held (bytes) | sent at once | difference |");
    println!("|---|---:|---:|---:|");
    for path in paths {
        let data = match std::fs::read(&path) {
            Ok(data) => data,
            Err(e) => {
                eprintln!("{path}: {e}");
                std::process::exit(1);
            }
        };
        let head = format!("OK {}\n", data.len());
        let (held, piece) = (
            cold(head.as_bytes(), &data, false),
            cold(head.as_bytes(), &data, true),
        );
        let name = std::path::Path::new(&path)
            .file_name()
            .map_or(path.clone(), |n| n.to_string_lossy().into_owned());
        println!(
            "| {name} | {held} | {piece} | {:+.2}% |",
            (piece as f64 / held as f64 - 1.0) * 100.0
        );
    }
}
