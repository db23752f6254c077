//! Helpers of the encoder's unit tests: two caches that exchanged hellos,
//! deterministic data, and the frames an encoder wrote.

use crate::cache::{CacheConfig, PeerCache};
use crate::chunker::{Chunker, ChunkerConfig};
use crate::compress::Codec;
use crate::control::CacheId;
use crate::control::ControlRepr;
use crate::fingerprint::Fingerprint;
use crate::frame::{DataRepr, Frame};
use crate::store::segment::RECORD_HEADER_LEN;
use crate::store::StoreConfig;

/// A node's cache for its peer, and the peer's, after the handshake.
pub(super) struct Peers {
    _dir: tempfile::TempDir,
    /// The encoding side's cache.
    pub(super) local: PeerCache,
    /// The decoding side's cache.
    pub(super) remote: PeerCache,
}

pub(super) fn peers() -> Peers {
    let dir = tempfile::tempdir().unwrap();
    let config = CacheConfig {
        store: StoreConfig {
            capacity: 64 << 20,
            segment_size: 4 << 20,
        },
        max_peer_entries: 1 << 20,
    };
    let local = PeerCache::open(&dir.path().join("local"), config, CacheId([1; 16])).unwrap();
    let remote = PeerCache::open(&dir.path().join("remote"), config, CacheId([2; 16])).unwrap();
    remote.handle_hello(&local.hello());
    local.handle_hello(&remote.hello());
    Peers {
        _dir: dir,
        local,
        remote,
    }
}

/// `len` bytes that do not compress (xorshift, seeded).
pub(super) fn noise(len: usize, seed: u64) -> Vec<u8> {
    let mut state = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..len)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state >> 32) as u8
        })
        .collect()
}

/// `len` bytes of text that compresses well (and chunks like any data).
pub(super) fn text(len: usize, seed: u64) -> Vec<u8> {
    let words = [
        "the ", "budget ", "table ", "office ", "totals ", "each ", "row ", "\n",
    ];
    noise(len, seed)
        .iter()
        .flat_map(|b| words[usize::from(b % 8)].bytes())
        .take(len)
        .collect()
}

/// One data or control frame an encoder wrote, as far as the tests look.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Seen {
    /// A literal (named or not) and how its payload is encoded.
    Literal(Codec, Option<Fingerprint>),
    /// A reference.
    Reference(Fingerprint),
    /// A span of this many references and its check.
    Span(u16, Fingerprint),
    /// A `SpanList` with its check.
    SpanList(Fingerprint),
    /// Any other frame, by type.
    Other(u8),
}

/// The frames in `wire`, in order.
pub(super) fn frames(mut wire: &[u8]) -> Vec<Seen> {
    let mut seen = Vec::new();
    while !wire.is_empty() {
        let frame = Frame::new_checked(wire).unwrap();
        let len = frame.total_len();
        seen.push(match DataRepr::parse(&frame).unwrap() {
            Some(DataRepr::Literal(payload)) => Seen::Literal(payload.codec, None),
            Some(DataRepr::Named {
                fingerprint,
                payload,
            }) => Seen::Literal(payload.codec, Some(fingerprint)),
            Some(DataRepr::Reference { fingerprint, .. }) => Seen::Reference(fingerprint),
            Some(DataRepr::Span { count, check, .. }) => Seen::Span(count, check),
            Some(DataRepr::SpanList { check, .. }) => Seen::SpanList(check),
            Some(_) | None => Seen::Other(frame.frame_type()),
        });
        wire = &wire[len..];
    }
    seen
}

/// The literals in `frames`.
pub(super) fn literals(frames: &[Seen]) -> impl Iterator<Item = (Codec, Option<Fingerprint>)> + '_ {
    frames.iter().filter_map(|seen| match *seen {
        Seen::Literal(codec, name) => Some((codec, name)),
        _ => None,
    })
}

/// Whether `frames` hold a reference or a span.
pub(super) fn references(frames: &[Seen]) -> usize {
    frames
        .iter()
        .filter(|seen| matches!(seen, Seen::Reference(_) | Seen::Span(..)))
        .count()
}

/// The `Ack` of the peer's decoder for `data`'s chunks, named `names`,
/// stored one record after the other from position 0.
pub(super) fn ack_in_order(
    chunker: ChunkerConfig,
    data: &[u8],
    names: &[Fingerprint],
) -> ControlRepr {
    let chunker = Chunker::new(chunker).unwrap();
    let lengths: Vec<usize> = chunker.split(data).iter().map(|c| c.len()).collect();
    assert_eq!(lengths.len(), names.len());
    let mut position = 0u64;
    let entries = names
        .iter()
        .zip(&lengths)
        .map(|(&fingerprint, &len)| {
            let entry = (fingerprint, position);
            position += (RECORD_HEADER_LEN + len) as u64;
            entry
        })
        .collect();
    ControlRepr::Ack {
        low_water: 0,
        entries,
    }
}
