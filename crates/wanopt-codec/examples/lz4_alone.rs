//! LZ4 alone, chunk by chunk as the encoder uses it (10 KiB pieces, about
//! the mean chunk), on the criterion bench's text and on any files given:
//! the ceiling of `encode/fresh_text` on this machine, since the encoder
//! does this plus chunking, fingerprints and its store. Best of 5 passes,
//! one core. With `--write DIR`, the bench's text is also written to
//! `DIR/bench-text`, for other tools.
//!
//! `cargo run -p wanopt-codec --release --example lz4_alone -- [--write DIR] [FILE...]`

use std::time::Instant;

#[path = "../tests/common/data.rs"]
mod data;

/// The criterion bench's `text` (benches/codec.rs), 8 MiB.
fn bench_text() -> Vec<u8> {
    data::text(8 << 20, 1)
}

fn measure(name: &str, data: &[u8]) {
    const PIECE: usize = 10 << 10;
    let mut out = vec![0u8; lz4_flex::block::get_maximum_output_size(PIECE)];
    let mut best = f64::MAX;
    let mut packed = 0;
    for _ in 0..5 {
        let start = Instant::now();
        packed = 0;
        for piece in data.chunks(PIECE) {
            packed += lz4_flex::block::compress_into(piece, &mut out).unwrap_or(piece.len());
        }
        best = best.min(start.elapsed().as_secs_f64());
    }
    println!(
        "{name}: {} bytes, LZ4 (lz4_flex) compress {:.0} MiB/s, ratio {:.3}",
        data.len(),
        data.len() as f64 / best / (1 << 20) as f64,
        packed as f64 / data.len() as f64
    );
}

fn main() {
    let mut args = std::env::args().skip(1).peekable();
    let text = bench_text();
    if args.peek().map(String::as_str) == Some("--write") {
        args.next();
        let Some(dir) = args.next() else {
            eprintln!("--write needs a directory");
            std::process::exit(2);
        };
        if let Err(e) = std::fs::write(std::path::Path::new(&dir).join("bench-text"), &text) {
            eprintln!("{dir}/bench-text: {e}");
            std::process::exit(1);
        }
    }
    measure("bench text", &text);
    for path in args {
        match std::fs::read(&path) {
            Ok(data) => measure(&path, &data),
            Err(e) => {
                eprintln!("{path}: {e}");
                std::process::exit(1);
            }
        }
    }
}
