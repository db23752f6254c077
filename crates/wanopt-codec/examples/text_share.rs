//! Where PPMd beats LZMA2: each file cut in 128 KiB blocks (the size of a
//! stream run), each block compressed on its own by LZMA2 (the stream
//! format's settings, preset 5) and by PPMd (the format's order and
//! memory), against its [`text_share`]. Prints one line per block, sorted
//! by share, then per share band how many blocks PPMd made smaller: the
//! evidence for [`PPMD_TEXT_SHARE`].
//!
//! `wanopt lab waas-files --out /tmp/wf` then
//! `cargo run -p wanopt-codec --release --example text_share -- /tmp/wf/*.doc /tmp/wf/*.xls /tmp/wf/*.ppt`

use std::io::Write;

use wanopt_codec::frame::{lzma_options, PPMD_MEMORY, PPMD_ORDER};
use wanopt_codec::{text_share, PPMD_TEXT_SHARE};

const BLOCK: usize = 128 << 10;

fn lzma(block: &[u8]) -> usize {
    let filters = lzma_options(5).expect("LZMA2 preset 5");
    let mut stream = liblzma::stream::Stream::new_raw_encoder(&filters).expect("encoder");
    let mut out = Vec::with_capacity(block.len() + block.len() / 64 + 64);
    loop {
        let done = stream.total_in() as usize;
        match stream.process_vec(&block[done..], &mut out, liblzma::stream::Action::Finish) {
            Ok(liblzma::stream::Status::StreamEnd) => return out.len(),
            Ok(_) => out.reserve(64 << 10),
            Err(e) => panic!("lzma: {e}"),
        }
    }
}

fn ppmd(block: &[u8]) -> usize {
    let mut encoder =
        ppmd_rust::Ppmd7Encoder::new(Vec::new(), PPMD_ORDER, PPMD_MEMORY).expect("PPMd");
    encoder.write_all(block).expect("PPMd encodes");
    encoder.finish(false).expect("PPMd ends").len()
}

fn main() {
    let paths: Vec<String> = std::env::args().skip(1).collect();
    if paths.is_empty() {
        eprintln!("usage: text_share FILE...");
        std::process::exit(2);
    }
    let mut blocks = Vec::new();
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
        for (i, block) in data.chunks(BLOCK).enumerate() {
            blocks.push((
                text_share(block),
                name.clone(),
                i,
                block.len(),
                lzma(block),
                ppmd(block),
            ));
        }
    }
    blocks.sort_by(|a, b| a.0.total_cmp(&b.0));
    println!("| text share | file | block | bytes | LZMA2 | PPMd | PPMd / LZMA2 |");
    println!("|---:|---|---:|---:|---:|---:|---:|");
    for (share, name, i, len, l, p) in &blocks {
        println!(
            "| {share:.2} | {name} | {i} | {len} | {l} | {p} | {:.3} |",
            *p as f64 / *l as f64
        );
    }
    println!();
    println!("| text share | blocks | PPMd smaller | PPMd / LZMA2, all bytes |");
    println!("|---|---:|---:|---:|");
    let bands = [0.0, 0.3, 0.4, PPMD_TEXT_SHARE, 0.6, 0.8, 1.01];
    for band in bands.windows(2) {
        let inside: Vec<_> = blocks
            .iter()
            .filter(|b| b.0 >= band[0] && b.0 < band[1])
            .collect();
        let smaller = inside.iter().filter(|b| b.5 < b.4).count();
        let (l, p) = inside.iter().fold((0, 0), |(l, p), b| (l + b.4, p + b.5));
        println!(
            "| {:.2}-{:.2} | {} | {} | {:.3} |",
            band[0],
            band[1].min(1.0),
            inside.len(),
            smaller,
            p as f64 / l.max(1) as f64
        );
    }
}
