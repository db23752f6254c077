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
//! | 0x60 | Hello     | magic `"WOPC"`, version u8, cache id (16), epoch u64, low u64, high u64 |

use thiserror::Error;

use crate::fingerprint::{Fingerprint, FINGERPRINT_LEN};
use crate::frame::{emit_header, kind, read_u64, Frame, FrameError, MAGIC, VERSION};

/// Most entries in one `Ack` frame.
pub const MAX_ACK_ENTRIES: usize = 1024;
const ACK_ENTRY_LEN: usize = FINGERPRINT_LEN + 8;

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
        }
    }
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
        let mut parsed = Vec::new();
        let mut rest = &buf[..];
        while !rest.is_empty() {
            let frame = Frame::new_checked(rest).unwrap();
            let len = frame.total_len();
            match ControlRepr::parse(&frame).unwrap() {
                Some(ControlRepr::Ack { entries, .. }) => parsed.extend(entries),
                other => panic!("unexpected {other:?}"),
            }
            rest = &rest[len..];
        }
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
