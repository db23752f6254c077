//! Control messages: decoder -> the peer's encoder, and the tunnel `Hello`.
//!
//! Control frames use the frame header of [`crate::frame`] and travel on
//! the reverse direction of the same flow stream, interleaved at frame
//! boundaries with that direction's own data frames. A receiving
//! [`crate::Decoder`] recognises them by type and hands them out through
//! [`crate::Decoder::poll_peer_control`] for the local encoder.
//!
//! | type | name      | body |
//! | ---- | --------- | ---- |
//! | 0x41 | NeedChunk | fingerprint (16) |
//! | 0x42 | Ack       | low water u64, count u16, count x (fingerprint (16), position u64) |
//! | 0x43 | Done      | empty |
//! | 0x44 | NeedSpan  | check (16) |
//! | 0x45 | Sent      | low water varint, count varint, count x (fingerprint prefix (4), position delta zigzag varint) |
//! | 0x60 | Hello     | magic `"WOPC"`, version u8, cache id (16), epoch u64, low u64, high u64 |

//!
//! `Sent` (format 10) is the `Ack` an encoder that keeps what it sends
//! ([`crate::EncoderConfig::store_sent`]) writes on its own data stream,
//! right after the chunks it names: the peer's decoder has just decoded
//! them and knows their fingerprints, so each entry carries only the first
//! [`SENT_PREFIX_LEN`] bytes of one, and its store position as the
//! difference from the entry before (from 0 for the first), zigzag-coded
//! in a LEB128 varint. The decoder resolves the prefixes against the
//! chunks it decoded last ([`RecentChunks`]) and hands the local encoder
//! an `Ack`; an entry that matches none, or two different chunks, is
//! dropped (the encoder then does not reference that chunk: bytes, never
//! a wrong one). 6-7 bytes an entry instead of the `Ack`'s 24: on a cold
//! 1 MB Word file over the 2 Mbit/s lab link, 1.8 KB (7 ms) less ahead of
//! the last byte.

use std::collections::{HashMap, VecDeque};

use thiserror::Error;

use crate::fingerprint::{Fingerprint, FINGERPRINT_LEN};
use crate::frame::{emit_header, kind, read_u64, Frame, FrameError, MAGIC, VERSION};

/// Most entries in one `Ack` frame.
pub const MAX_ACK_ENTRIES: usize = 1024;
const ACK_ENTRY_LEN: usize = FINGERPRINT_LEN + 8;
/// Bytes of a fingerprint a `Sent` entry carries.
pub const SENT_PREFIX_LEN: usize = 4;
/// Chunks a decoder remembers to resolve `Sent` entries: four full frames'
/// worth, well beyond what an encoder sends between two of them.
pub const RECENT_CHUNKS: usize = 4 * MAX_ACK_ENTRIES;

/// A parsed control frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ControlRepr {
    /// The decoder could not resolve a reference; send the chunk as a
    /// `Repair` frame.
    NeedChunk {
        /// The missing chunk.
        fingerprint: Fingerprint,
    },
    /// The decoder durably appended these chunks to its store.
    Ack {
        /// Oldest store position the decoder still holds (FIFO eviction).
        low_water: u64,
        /// `(fingerprint, store position)` of each stored chunk.
        entries: Vec<(Fingerprint, u64)>,
    },
    /// The decoder reached `End` and delivered every byte; the encoder's
    /// side may now finish the stream.
    Done,
    /// The decoder could not resolve a `Span`; send its chunks one by one
    /// as a `SpanList` frame.
    NeedSpan {
        /// The span's check.
        check: Fingerprint,
    },
    /// The peer's encoder stored the chunks it just sent us (an `Ack` by
    /// fingerprint prefixes; the decoder resolves it, see
    /// [`RecentChunks::resolve`]).
    Sent {
        /// Oldest store position the encoder's side still holds.
        low_water: u64,
        /// `(fingerprint prefix, store position)` of each stored chunk.
        entries: Vec<([u8; SENT_PREFIX_LEN], u64)>,
    },
}

impl ControlRepr {
    /// Parse a control frame; `Ok(None)` for a data frame type.
    pub fn parse(frame: &Frame<&[u8]>) -> Result<Option<ControlRepr>, FrameError> {
        let body = frame.body();
        let t = frame.frame_type();
        let repr = match t {
            kind::NEED_CHUNK => {
                if body.len() != FINGERPRINT_LEN {
                    return Err(FrameError::Malformed(t));
                }
                ControlRepr::NeedChunk {
                    fingerprint: Fingerprint::from_slice(body).ok_or(FrameError::Malformed(t))?,
                }
            }
            kind::ACK => {
                let low_water = read_u64(body, 0..8).ok_or(FrameError::Malformed(t))?;
                let count = body
                    .get(8..10)
                    .map(|b| usize::from(u16::from_be_bytes([b[0], b[1]])))
                    .ok_or(FrameError::Malformed(t))?;
                if count > MAX_ACK_ENTRIES || body.len() != 10 + count * ACK_ENTRY_LEN {
                    return Err(FrameError::Malformed(t));
                }
                let entries = body[10..]
                    .chunks_exact(ACK_ENTRY_LEN)
                    .map(|e| {
                        let fp = Fingerprint::from_slice(e).ok_or(FrameError::Malformed(t))?;
                        let pos = read_u64(e, FINGERPRINT_LEN..ACK_ENTRY_LEN)
                            .ok_or(FrameError::Malformed(t))?;
                        Ok((fp, pos))
                    })
                    .collect::<Result<Vec<_>, FrameError>>()?;
                ControlRepr::Ack { low_water, entries }
            }
            kind::DONE => {
                if !body.is_empty() {
                    return Err(FrameError::Malformed(t));
                }
                ControlRepr::Done
            }
            kind::NEED_SPAN => {
                if body.len() != FINGERPRINT_LEN {
                    return Err(FrameError::Malformed(t));
                }
                ControlRepr::NeedSpan {
                    check: Fingerprint::from_slice(body).ok_or(FrameError::Malformed(t))?,
                }
            }
            kind::SENT => {
                let mut at = 0;
                let low_water = read_varint(body, &mut at).ok_or(FrameError::Malformed(t))?;
                let count = read_varint(body, &mut at)
                    .and_then(|c| usize::try_from(c).ok())
                    .filter(|&c| c <= MAX_ACK_ENTRIES)
                    .ok_or(FrameError::Malformed(t))?;
                let mut entries = Vec::with_capacity(count);
                let mut position = 0u64;
                for _ in 0..count {
                    let prefix: [u8; SENT_PREFIX_LEN] = body
                        .get(at..at + SENT_PREFIX_LEN)
                        .and_then(|p| p.try_into().ok())
                        .ok_or(FrameError::Malformed(t))?;
                    at += SENT_PREFIX_LEN;
                    let delta = read_varint(body, &mut at).ok_or(FrameError::Malformed(t))?;
                    position = position.wrapping_add(unzigzag(delta));
                    entries.push((prefix, position));
                }
                if at != body.len() {
                    return Err(FrameError::Malformed(t));
                }
                ControlRepr::Sent { low_water, entries }
            }
            0x40..=0x7f => return Err(FrameError::UnknownType(t)),
            _ => return Ok(None),
        };
        Ok(Some(repr))
    }

    /// Append the frame to `out`. An `Ack` with more than
    /// [`MAX_ACK_ENTRIES`] entries is split into several frames.
    pub fn emit(&self, out: &mut Vec<u8>) {
        match self {
            ControlRepr::NeedChunk { fingerprint } => {
                emit_header(out, kind::NEED_CHUNK, FINGERPRINT_LEN);
                out.extend_from_slice(fingerprint.as_bytes());
            }
            ControlRepr::Ack { low_water, entries } => {
                for batch in entries.chunks(MAX_ACK_ENTRIES).chain(
                    // An empty ack still carries the low-water mark.
                    entries.is_empty().then_some(&entries[..0]),
                ) {
                    emit_header(out, kind::ACK, 10 + batch.len() * ACK_ENTRY_LEN);
                    out.extend_from_slice(&low_water.to_be_bytes());
                    out.extend_from_slice(&(batch.len() as u16).to_be_bytes());
                    for (fp, pos) in batch {
                        out.extend_from_slice(fp.as_bytes());
                        out.extend_from_slice(&pos.to_be_bytes());
                    }
                }
            }
            ControlRepr::Done => emit_header(out, kind::DONE, 0),
            ControlRepr::NeedSpan { check } => {
                emit_header(out, kind::NEED_SPAN, FINGERPRINT_LEN);
                out.extend_from_slice(check.as_bytes());
            }
            ControlRepr::Sent { low_water, entries } => {
                let mut body = Vec::new();
                for batch in entries
                    .chunks(MAX_ACK_ENTRIES)
                    .chain(entries.is_empty().then_some(&entries[..0]))
                {
                    body.clear();
                    write_varint(&mut body, *low_water);
                    write_varint(&mut body, batch.len() as u64);
                    let mut position = 0u64;
                    for (prefix, pos) in batch {
                        body.extend_from_slice(prefix);
                        write_varint(&mut body, zigzag(pos.wrapping_sub(position)));
                        position = *pos;
                    }
                    emit_header(out, kind::SENT, body.len());
                    out.extend_from_slice(&body);
                }
            }
        }
    }
}

/// Append `value` as a LEB128 varint (7 bits a byte, low first).
fn write_varint(out: &mut Vec<u8>, mut value: u64) {
    while value >= 0x80 {
        out.push((value as u8) | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

/// Read a LEB128 varint at `*at` (advancing it); `None` when the bytes end
/// first or it overflows 64 bits or is not in its shortest form.
fn read_varint(body: &[u8], at: &mut usize) -> Option<u64> {
    let mut value = 0u64;
    for i in 0..10 {
        let byte = *body.get(*at + i)?;
        let bits = u64::from(byte & 0x7f);
        if i == 9 && byte > 1 {
            return None;
        }
        value |= bits << (7 * i);
        if byte & 0x80 == 0 {
            if i > 0 && byte == 0 {
                return None;
            }
            *at += i + 1;
            return Some(value);
        }
    }
    None
}

/// A signed difference (as two's complement) to a small unsigned number.
fn zigzag(delta: u64) -> u64 {
    let d = delta as i64;
    ((d << 1) ^ (d >> 63)) as u64
}

fn unzigzag(z: u64) -> u64 {
    ((z >> 1) as i64 ^ -((z & 1) as i64)) as u64
}

/// The chunks a decoder decoded last, by fingerprint prefix, to resolve
/// the peer's `Sent` frames: at most [`RECENT_CHUNKS`], oldest dropped
/// first.
#[derive(Debug, Default)]
pub struct RecentChunks {
    order: VecDeque<Fingerprint>,
    by_prefix: HashMap<[u8; SENT_PREFIX_LEN], Slot>,
}

#[derive(Debug)]
struct Slot {
    fingerprint: Fingerprint,
    /// Entries of `order` with this prefix.
    count: usize,
    /// Two different fingerprints with this prefix are in `order`.
    ambiguous: bool,
}

fn prefix_of(fingerprint: &Fingerprint) -> [u8; SENT_PREFIX_LEN] {
    let mut prefix = [0; SENT_PREFIX_LEN];
    prefix.copy_from_slice(&fingerprint.as_bytes()[..SENT_PREFIX_LEN]);
    prefix
}

impl RecentChunks {
    /// Remember a decoded chunk.
    pub fn push(&mut self, fingerprint: Fingerprint) {
        if self.order.len() >= RECENT_CHUNKS {
            if let Some(old) = self.order.pop_front() {
                let prefix = prefix_of(&old);
                if let Some(slot) = self.by_prefix.get_mut(&prefix) {
                    slot.count -= 1;
                    if slot.count == 0 {
                        self.by_prefix.remove(&prefix);
                    }
                }
            }
        }
        self.order.push_back(fingerprint);
        let slot = self
            .by_prefix
            .entry(prefix_of(&fingerprint))
            .or_insert(Slot {
                fingerprint,
                count: 0,
                ambiguous: false,
            });
        slot.count += 1;
        slot.ambiguous |= slot.fingerprint != fingerprint;
    }

    /// The `Ack` entries a `Sent` frame's stand for, and how many of them
    /// matched no remembered chunk or more than one (dropped).
    pub fn resolve(
        &self,
        entries: &[([u8; SENT_PREFIX_LEN], u64)],
    ) -> (Vec<(Fingerprint, u64)>, usize) {
        let resolved: Vec<_> = entries
            .iter()
            .filter_map(|(prefix, pos)| {
                let slot = self.by_prefix.get(prefix)?;
                (!slot.ambiguous).then_some((slot.fingerprint, *pos))
            })
            .collect();
        let dropped = entries.len() - resolved.len();
        (resolved, dropped)
    }
}

/// The `Sent` entries of `entries` (what an encoder stored), for
/// [`ControlRepr::Sent`].
pub fn sent_entries(entries: &[(Fingerprint, u64)]) -> Vec<([u8; SENT_PREFIX_LEN], u64)> {
    entries
        .iter()
        .map(|(fp, pos)| (prefix_of(fp), *pos))
        .collect()
}

/// Identity of a byte cache: random, chosen when its store is created.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct CacheId(pub [u8; 16]);

/// The tunnel handshake: what a node's cache for this peer holds.
///
/// Each node sends its `Hello` (from [`crate::PeerCache::hello`]) when the
/// tunnel comes up, before any flow, and hands the peer's `Hello` to
/// [`crate::PeerCache::handle_hello`]. Positions are store positions of the
/// sender's cache: it holds every acknowledged chunk at a position in
/// `low..high`, and will keep holding them while `(cache_id, epoch)` does
/// not change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Hello {
    /// Identity of the sender's cache (new after a wipe or replacement).
    pub cache_id: CacheId,
    /// Bumped whenever the cache lost records other than by FIFO eviction
    /// (torn tail, corruption found on open).
    pub epoch: u64,
    /// Oldest position still held.
    pub low: u64,
    /// Position the next record will get.
    pub high: u64,
}

/// Malformed `Hello`.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum HelloError {
    /// Framing is wrong.
    #[error(transparent)]
    Frame(#[from] FrameError),
    /// The frame is not a `Hello`.
    #[error("expected a hello frame, got type {0:#04x}")]
    WrongType(u8),
}

const HELLO_BODY_LEN: usize = 5 + 16 + 24;

impl Hello {
    /// Parse a `Hello` frame at the start of `bytes`; returns it and the
    /// number of bytes it used.
    pub fn parse(bytes: &[u8]) -> Result<(Hello, usize), HelloError> {
        let frame = Frame::new_checked(bytes)?;
        if frame.frame_type() != kind::HELLO {
            return Err(HelloError::WrongType(frame.frame_type()));
        }
        let body = frame.body();
        if body.len() != HELLO_BODY_LEN {
            return Err(FrameError::Malformed(kind::HELLO).into());
        }
        if body[..4] != MAGIC {
            return Err(FrameError::BadMagic.into());
        }
        if body[4] != VERSION {
            return Err(FrameError::UnsupportedVersion(body[4]).into());
        }
        let malformed = || FrameError::Malformed(kind::HELLO);
        let cache_id = CacheId(body[5..21].try_into().map_err(|_| malformed())?);
        let epoch = read_u64(body, 21..29).ok_or_else(malformed)?;
        let low = read_u64(body, 29..37).ok_or_else(malformed)?;
        let high = read_u64(body, 37..45).ok_or_else(malformed)?;
        if low > high {
            return Err(malformed().into());
        }
        Ok((
            Hello {
                cache_id,
                epoch,
                low,
                high,
            },
            frame.total_len(),
        ))
    }

    /// Append the frame to `out`.
    pub fn emit(&self, out: &mut Vec<u8>) {
        emit_header(out, kind::HELLO, HELLO_BODY_LEN);
        out.extend_from_slice(&MAGIC);
        out.push(VERSION);
        out.extend_from_slice(&self.cache_id.0);
        out.extend_from_slice(&self.epoch.to_be_bytes());
        out.extend_from_slice(&self.low.to_be_bytes());
        out.extend_from_slice(&self.high.to_be_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every control frame in `buf`, in order.
    fn parse_all(buf: &[u8]) -> Vec<ControlRepr> {
        let mut parsed = Vec::new();
        let mut rest = buf;
        while !rest.is_empty() {
            let frame = Frame::new_checked(rest).unwrap();
            let len = frame.total_len();
            parsed.push(
                ControlRepr::parse(&frame)
                    .unwrap()
                    .expect("a control frame"),
            );
            rest = &rest[len..];
        }
        parsed
    }

    fn round_trip(repr: ControlRepr) {
        let mut buf = Vec::new();
        repr.emit(&mut buf);
        let frame = Frame::new_checked(&buf[..]).unwrap();
        assert_eq!(frame.total_len(), buf.len());
        assert_eq!(ControlRepr::parse(&frame).unwrap(), Some(repr));
    }

    #[test]
    fn control_frames_round_trip() {
        let fp = Fingerprint::of(b"chunk");
        round_trip(ControlRepr::NeedChunk { fingerprint: fp });
        round_trip(ControlRepr::NeedSpan { check: fp });
        round_trip(ControlRepr::Done);
        round_trip(ControlRepr::Ack {
            low_water: 7,
            entries: vec![(fp, 42), (Fingerprint::of(b"b"), 1 << 40)],
        });
        round_trip(ControlRepr::Ack {
            low_water: 0,
            entries: vec![],
        });
    }

    #[test]
    fn sent_frames_round_trip_small() {
        let entries = vec![
            ([1, 2, 3, 4], 5 << 32),
            ([9, 9, 9, 9], (5 << 32) + 4133),
            // Backwards (a chunk stored earlier) and far.
            ([0, 0, 0, 0], 17),
            ([7, 7, 7, 7], u64::MAX),
            ([7, 7, 7, 8], 0),
        ];
        round_trip(ControlRepr::Sent {
            low_water: u64::MAX,
            entries: entries.clone(),
        });
        round_trip(ControlRepr::Sent {
            low_water: 0,
            entries: vec![],
        });
        // Consecutive records of about 4 KiB cost 4 + 2 bytes each.
        let consecutive: Vec<_> = (0..100u64)
            .map(|i| ((i as u32).to_be_bytes(), (3 << 32) + i * 4200))
            .collect();
        let mut buf = Vec::new();
        ControlRepr::Sent {
            low_water: 3 << 32,
            entries: consecutive,
        }
        .emit(&mut buf);
        assert!(buf.len() <= 4 + 5 + 1 + 9 + 100 * 6, "{}", buf.len());
    }

    #[test]
    fn malformed_sent_frames_are_errors() {
        let frame = |body: &[u8]| {
            let mut buf = Vec::new();
            emit_header(&mut buf, kind::SENT, body.len());
            buf.extend_from_slice(body);
            buf
        };
        let bad = [
            &[][..],             // no low water
            &[0],                // no count
            &[0, 1, 1, 2, 3, 4], // entry without its position
            &[0, 1, 1, 2, 3],    // short prefix
            &[0, 0, 0],          // a byte after the entries
            &[0x80, 0x00, 0],    // low water not in shortest form
            &[0x80, 0x80, 0x80], // varint cut off
            &[0, 0x81, 0x08],    // count 1025 > MAX_ACK_ENTRIES
            &[
                0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02, 0,
            ], // > 64 bits
        ];
        for body in bad {
            let buf = frame(body);
            let parsed = ControlRepr::parse(&Frame::new_checked(&buf[..]).unwrap());
            assert_eq!(parsed, Err(FrameError::Malformed(kind::SENT)), "{body:?}");
        }
    }

    proptest::proptest! {
        /// Any body of a `Sent` frame parses or is `Malformed`, and what
        /// parses emits back to the same bytes (one shortest form).
        #[test]
        fn sent_bodies_parse_or_fail_cleanly(body in proptest::collection::vec(
            proptest::prop_oneof![proptest::num::u8::ANY, 0x80u8..=0xff, 0u8..=2], 0..80,
        )) {
            let mut buf = Vec::new();
            emit_header(&mut buf, kind::SENT, body.len());
            buf.extend_from_slice(&body);
            match ControlRepr::parse(&Frame::new_checked(&buf[..]).unwrap()) {
                Ok(Some(repr)) => {
                    let mut again = Vec::new();
                    repr.emit(&mut again);
                    proptest::prop_assert_eq!(again, buf);
                }
                Ok(None) => proptest::prop_assert!(false, "a Sent frame is a control frame"),
                Err(e) => proptest::prop_assert_eq!(e, FrameError::Malformed(kind::SENT)),
            }
        }

        /// Random entries round-trip.
        #[test]
        fn sent_entries_round_trip(
            low_water: u64,
            entries in proptest::collection::vec((proptest::array::uniform4(0u8..), 0u64..), 0..40),
        ) {
            let repr = ControlRepr::Sent { low_water, entries };
            let mut buf = Vec::new();
            repr.emit(&mut buf);
            let parsed = ControlRepr::parse(&Frame::new_checked(&buf[..]).unwrap()).unwrap();
            proptest::prop_assert_eq!(parsed, Some(repr));
        }
    }

    #[test]
    fn big_sent_is_split() {
        let stored: Vec<_> = (0..2500u64)
            .map(|i| (Fingerprint::of(&i.to_be_bytes()), 1000 + i * 97))
            .collect();
        let entries = sent_entries(&stored);
        let mut buf = Vec::new();
        ControlRepr::Sent {
            low_water: 1,
            entries: entries.clone(),
        }
        .emit(&mut buf);
        let parsed: Vec<_> = parse_all(&buf)
            .into_iter()
            .flat_map(|repr| match repr {
                ControlRepr::Sent { entries, .. } => entries,
                other => panic!("unexpected {other:?}"),
            })
            .collect();
        assert_eq!(parsed, entries);
    }

    #[test]
    fn recent_chunks_resolve_prefixes_and_drop_the_ambiguous() {
        let fp = |i: u32| Fingerprint::of(&i.to_le_bytes());
        let mut recent = RecentChunks::default();
        for i in 0..10 {
            recent.push(fp(i));
        }
        recent.push(fp(3)); // the same chunk again: still one
        let stored = [(fp(2), 20), (fp(3), 30), (fp(77), 770)];
        let (resolved, dropped) = recent.resolve(&sent_entries(&stored));
        assert_eq!(resolved, vec![(fp(2), 20), (fp(3), 30)]);
        assert_eq!(dropped, 1);
        // Another chunk with fp(5)'s prefix: fp(5) no longer resolves.
        let mut twin = *fp(5).as_bytes();
        twin[15] ^= 1;
        recent.push(Fingerprint(twin));
        let (resolved, dropped) = recent.resolve(&sent_entries(&[(fp(5), 50)]));
        assert!(resolved.is_empty());
        assert_eq!(dropped, 1);
        // The oldest are forgotten after RECENT_CHUNKS more.
        for i in 1000..1000 + RECENT_CHUNKS as u32 {
            recent.push(fp(i));
        }
        let (resolved, _) = recent.resolve(&sent_entries(&[(fp(2), 20), (fp(1500), 15)]));
        assert_eq!(resolved, vec![(fp(1500), 15)]);
        assert!(recent.by_prefix.len() <= RECENT_CHUNKS);
    }

    #[test]
    fn big_ack_is_split() {
        let entries: Vec<_> = (0..2500u64)
            .map(|i| (Fingerprint::of(&i.to_be_bytes()), i))
            .collect();
        let mut buf = Vec::new();
        ControlRepr::Ack {
            low_water: 1,
            entries: entries.clone(),
        }
        .emit(&mut buf);
        let parsed: Vec<_> = parse_all(&buf)
            .into_iter()
            .flat_map(|repr| match repr {
                ControlRepr::Ack { entries, .. } => entries,
                other => panic!("unexpected {other:?}"),
            })
            .collect();
        assert_eq!(parsed, entries);
    }

    #[test]
    fn hello_round_trip_and_checks() {
        let hello = Hello {
            cache_id: CacheId([3; 16]),
            epoch: 2,
            low: 10,
            high: 99,
        };
        let mut buf = Vec::new();
        hello.emit(&mut buf);
        assert_eq!(Hello::parse(&buf).unwrap(), (hello, buf.len()));
        let mut bad = buf.clone();
        bad[4] = b'X';
        assert_eq!(Hello::parse(&bad), Err(FrameError::BadMagic.into()));
        let inverted = Hello { low: 100, ..hello };
        let mut buf = Vec::new();
        inverted.emit(&mut buf);
        assert!(Hello::parse(&buf).is_err());
    }
}
