//! Deltas: edited files crossing as little more than the edit, and their
//! repair when the base is damaged.

mod common;

use common::{small_config, text, Flow, Pair};
use wanopt_codec::{Compression, PeerCache};

/// Send `data` from `from` to `to` on one flow; the flow afterwards.
fn send_flow(pair: &Pair, from: &PeerCache, to: &PeerCache, data: &[u8]) -> Flow {
    let mut flow = Flow::with_config(from, to, pair.encoder);
    for piece in data.chunks(128 << 10) {
        flow.send(piece);
        flow.pump();
    }
    flow.finish();
    assert_eq!(flow.delivered, data);
    flow
}

fn edit16(file: &[u8], at: usize) -> Vec<u8> {
    let mut edited = file.to_vec();
    edited[at..at + 16].copy_from_slice(b"sixteen changed!");
    edited
}

/// The flow carried an edited file as references plus delta(s): besides
/// the references (24 bytes each at most: spans of them are smaller), only
/// the preamble, the end, the delta(s) and an ack.
fn assert_sent_as_delta(flow: &Flow) {
    let stats = flow.enc.stats();
    assert!(stats.deltas >= 1, "{stats:?}");
    assert_eq!(flow.dec.stats().deltas, stats.deltas);
    assert!(
        stats.wan_bytes_out < 400 + stats.references * 24,
        "{stats:?}"
    );
}

#[test]
fn an_edit_crosses_as_little_more_than_the_edit() {
    for zstd in [false, true] {
        let mut pair = Pair::new(small_config());
        if zstd {
            pair.encoder.compression = Compression::ZSTD;
        }
        let file = text(1 << 20, 21);
        send_flow(&pair, &pair.edge, &pair.core, &file);
        let edited = edit16(&file, 500_000);
        let flow = send_flow(&pair, &pair.edge, &pair.core, &edited);
        assert_sent_as_delta(&flow);
    }
}

#[test]
fn an_edit_in_the_first_chunk_is_a_delta_too() {
    // No reference comes before the edited chunk: its base is found by its
    // unchanged first and last bytes.
    let pair = Pair::new(small_config());
    let file = text(200_000, 24);
    send_flow(&pair, &pair.edge, &pair.core, &file);
    let edited = edit16(&file, 100);
    let flow = send_flow(&pair, &pair.edge, &pair.core, &edited);
    assert_sent_as_delta(&flow);
}

#[test]
fn open_edit_save_sends_the_edit_as_a_delta_against_what_was_opened() {
    // Open: core -> edge. Save: the edited file edge -> core. The base of
    // the delta is a chunk the edge received (and the core kept as sent).
    let pair = Pair::new(small_config());
    let file = text(300_000, 22);
    send_flow(&pair, &pair.core, &pair.edge, &file);
    let edited = edit16(&file, 150_000);
    let flow = send_flow(&pair, &pair.edge, &pair.core, &edited);
    assert_sent_as_delta(&flow);
}

/// Open (core -> edge, behind an `OK` line) then save (edge -> core,
/// behind a `PUT` line sent at once as a piece): the save's first chunk,
/// the request line and the file's start, is a delta that completes the
/// piece.
fn open_then_save_behind_a_piece(pair: &Pair, file: &[u8], edited: &[u8]) -> Flow {
    let mut opened = b"OK 300000\n".to_vec();
    opened.extend_from_slice(file);
    send_flow(pair, &pair.core, &pair.edge, &opened);
    let mut flow = Flow::with_config(&pair.edge, &pair.core, pair.encoder);
    let head = b"PUT report.doc 2 300000\n";
    flow.send(head);
    flow.enc.send_held(&mut flow.wire);
    flow.pump();
    assert_eq!(flow.delivered, head);
    flow.send(edited);
    flow.finish();
    assert_eq!(flow.delivered, [&head[..], edited].concat());
    flow
}

#[test]
fn a_chunk_begun_as_pieces_completes_as_a_delta_against_what_was_opened() {
    let pair = Pair::new(small_config());
    let file = text(300_000, 25);
    let edited = edit16(&file, 150_000);
    let flow = open_then_save_behind_a_piece(&pair, &file, &edited);
    let stats = flow.enc.stats();
    assert_eq!(stats.pieces, 1, "{stats:?}");
    // The first chunk and the edited one: two deltas, the rest references.
    assert!(stats.deltas >= 2, "{stats:?}");
    assert_eq!(flow.dec.stats().deltas, stats.deltas);
    assert!(
        stats.wan_bytes_out < 500 + stats.references * 24,
        "{stats:?}"
    );
}

#[test]
fn a_piece_delta_whose_base_is_damaged_is_repaired_after_the_pieces() {
    let pair = Pair::new(small_config());
    let file = text(300_000, 26);
    let edited = edit16(&file, 150_000);
    // Open, then damage the core's records (the bases of the deltas).
    let mut opened = b"OK 300000\n".to_vec();
    opened.extend_from_slice(&file);
    send_flow(&pair, &pair.core, &pair.edge, &opened);
    for path in pair.core.segment_paths() {
        let mut bytes = std::fs::read(&path).unwrap();
        for b in bytes.iter_mut().skip(40).step_by(50) {
            *b ^= 0xff;
        }
        std::fs::write(&path, bytes).unwrap();
    }
    let flow = open_then_save_behind_a_piece(&pair, &file, &edited);
    assert!(flow.enc.stats().deltas >= 1);
    assert!(flow.need_chunks >= 1);
}

#[test]
fn a_delta_whose_base_is_damaged_is_repaired() {
    let pair = Pair::new(small_config());
    let file = text(400_000, 23);
    send_flow(&pair, &pair.edge, &pair.core, &file);
    // Damage every record the core holds (the bases of any delta).
    for path in pair.core.segment_paths() {
        let mut bytes = std::fs::read(&path).unwrap();
        for b in bytes.iter_mut().skip(40).step_by(50) {
            *b ^= 0xff;
        }
        std::fs::write(&path, bytes).unwrap();
    }
    let edited = edit16(&file, 200_000);
    let flow = send_flow(&pair, &pair.edge, &pair.core, &edited);
    assert!(flow.enc.stats().deltas >= 1);
    assert!(flow.need_chunks >= 1);
    assert!(flow.enc.stats().repairs_sent >= flow.need_chunks);
}

#[test]
fn small_edit_costs_little_more_than_changed_chunks() {
    let pair = Pair::new(small_config());
    let file = text(2 << 20, 3);
    pair.transfer(&file, &[128 << 10]);
    let mut edited = file.clone();
    for pos in [10_000usize, 700_000, 1_500_000] {
        edited[pos] ^= 0x55;
    }
    let (out, wan) = pair.transfer(&edited, &[128 << 10]);
    assert_eq!(out, edited);
    // Three edits touch at most ~2 chunks each (max 64 KiB, typically ~8 KiB),
    // compressed; plus ~20 bytes per reference for the rest.
    let refs = (file.len() / 8192) as u64 * 20;
    assert!(
        wan < refs + 6 * 16 * 1024,
        "edited transfer took {wan} bytes"
    );
}
