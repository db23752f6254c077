//! The frame format shared by data and control messages.
//!
//! Every message on a codec stream is one frame:
//!
//! ```text
//!  0        1                 4
//! +--------+-----------------+----------------------+
//! |  type  | body length u24 | body (length bytes)  |
//! +--------+-----------------+----------------------+
//! ```
//!
//! Integers are big-endian. Data frames (encoder -> decoder):
//!
//! | type | name      | body |
//! | ---- | --------- | ---- |
//! | 0x01 | Preamble  | magic `"WOPC"`, version u8 (= 1) |
//! | 0x02 | Literal   | codec u8 (0 raw, 1 LZ4 block), raw length u32, payload |
//! | 0x03 | Reference | fingerprint (16), raw length u32 |
//! | 0x04 | Repair    | fingerprint (16), codec u8, raw length u32, payload |
//! | 0x05 | End       | empty |
//!
//! Control frames (decoder -> the peer's encoder, see [`crate::control`])
//! use types 0x41..=0x43, and the tunnel handshake [`crate::Hello`] 0x60.
//! Every length is bounded by [`MAX_FRAME_BODY`]; a raw length above
//! [`MAX_CHUNK_LEN`] or a payload that does not decompress to exactly the
//! raw length is an error, never a panic or an unbounded allocation.

use std::ops::Range;

use thiserror::Error;

use crate::chunker::MAX_CHUNK_LEN;
use crate::fingerprint::{Fingerprint, FINGERPRINT_LEN};

/// Length of the frame header.
pub const HEADER_LEN: usize = 4;
/// Largest frame body accepted (a repair frame of a maximal raw chunk).
pub const MAX_FRAME_BODY: usize = MAX_CHUNK_LEN + FINGERPRINT_LEN + 5;
/// Magic bytes at the start of the preamble body.
pub const MAGIC: [u8; 4] = *b"WOPC";
/// Version of the frame format written by this crate.
pub const VERSION: u8 = 1;

mod field {
    use std::ops::Range;
    pub const TYPE: usize = 0;
    pub const LENGTH: Range<usize> = 1..4;
}

/// Frame type codes.
pub mod kind {
    /// Stream preamble (magic and version).
    pub const PREAMBLE: u8 = 0x01;
    /// Literal chunk.
    pub const LITERAL: u8 = 0x02;
    /// Reference to a chunk by fingerprint.
    pub const REFERENCE: u8 = 0x03;
    /// Literal sent in answer to a `NeedChunk`.
    pub const REPAIR: u8 = 0x04;
    /// End of the encoded stream.
    pub const END: u8 = 0x05;
    /// Control: the decoder cannot resolve a reference.
    pub const NEED_CHUNK: u8 = 0x41;
    /// Control: the decoder stored chunks in its cache.
    pub const ACK: u8 = 0x42;
    /// Control: the decoder delivered everything up to `End`.
    pub const DONE: u8 = 0x43;
    /// Tunnel handshake.
    pub const HELLO: u8 = 0x60;
}

/// Malformed frame.
#[derive(Debug, Error, PartialEq, Eq, Clone)]
pub enum FrameError {
    /// The buffer ends before the header or the body does.
    #[error("truncated frame")]
    Truncated,
    /// The body length is above [`MAX_FRAME_BODY`].
    #[error("frame body of {0} bytes exceeds the limit")]
    TooLong(usize),
    /// The type code is unknown.
    #[error("unknown frame type {0:#04x}")]
    UnknownType(u8),
    /// The body does not have the layout its type requires.
    #[error("malformed body of frame type {0:#04x}")]
    Malformed(u8),
    /// The preamble magic is wrong.
    #[error("not a wanopt codec stream (bad magic)")]
    BadMagic,
    /// The preamble announces a version this crate does not speak.
    #[error("unsupported codec version {0}")]
    UnsupportedVersion(u8),
    /// A raw length is zero or above [`MAX_CHUNK_LEN`].
    #[error("chunk length {0} out of range")]
    ChunkLength(u32),
    /// The compression codec byte is unknown.
    #[error("unknown compression codec {0}")]
    UnknownCodec(u8),
    /// A compressed payload does not decompress to its raw length.
    #[error("corrupt compressed payload")]
    Decompress,
}

/// Checked view of one frame at the start of a buffer.
#[derive(Debug, Clone)]
pub struct Frame<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Frame<T> {
    /// Wrap without checks (use [`Frame::new_checked`] for network bytes).
    pub fn new_unchecked(buffer: T) -> Self {
        Frame { buffer }
    }

    /// Wrap and check that the header and the whole body are present and
    /// that the body length is within bounds.
    pub fn new_checked(buffer: T) -> Result<Self, FrameError> {
        let frame = Frame::new_unchecked(buffer);
        frame.check_len()?;
        Ok(frame)
    }

    /// Check lengths (see [`Frame::new_checked`]).
    pub fn check_len(&self) -> Result<(), FrameError> {
        let data = self.buffer.as_ref();
        if data.len() < HEADER_LEN {
            return Err(FrameError::Truncated);
        }
        let body = self.body_len();
        if body > MAX_FRAME_BODY {
            return Err(FrameError::TooLong(body));
        }
        if data.len() < HEADER_LEN + body {
            return Err(FrameError::Truncated);
        }
        Ok(())
    }

    /// Type code.
    pub fn frame_type(&self) -> u8 {
        self.buffer.as_ref()[field::TYPE]
    }

    /// Body length from the header.
    pub fn body_len(&self) -> usize {
        let b = &self.buffer.as_ref()[field::LENGTH];
        (usize::from(b[0]) << 16) | (usize::from(b[1]) << 8) | usize::from(b[2])
    }

    /// Header plus body length.
    pub fn total_len(&self) -> usize {
        HEADER_LEN + self.body_len()
    }

    /// The body.
    pub fn body(&self) -> &[u8] {
        &self.buffer.as_ref()[HEADER_LEN..self.total_len()]
    }
}

/// Write a frame header for a body of `body_len` bytes.
pub fn emit_header(out: &mut Vec<u8>, frame_type: u8, body_len: usize) {
    debug_assert!(body_len <= MAX_FRAME_BODY);
    let len = body_len as u32;
    out.push(frame_type);
    out.extend_from_slice(&len.to_be_bytes()[1..]);
}

/// Compression applied to a literal payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Codec {
    /// Stored as is.
    Raw,
    /// LZ4 block format.
    Lz4,
}

impl Codec {
    fn from_byte(b: u8) -> Result<Self, FrameError> {
        match b {
            0 => Ok(Codec::Raw),
            1 => Ok(Codec::Lz4),
            other => Err(FrameError::UnknownCodec(other)),
        }
    }

    fn to_byte(self) -> u8 {
        match self {
            Codec::Raw => 0,
            Codec::Lz4 => 1,
        }
    }
}

/// A (possibly compressed) chunk payload as carried by literal and repair
/// frames.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Payload<'a> {
    /// How `bytes` is encoded.
    pub codec: Codec,
    /// Length of the chunk once decoded.
    pub raw_len: u32,
    /// The encoded bytes.
    pub bytes: &'a [u8],
}

impl Payload<'_> {
    /// Decode into `out` (appended). `out` grows by exactly `raw_len` on
    /// success and is left unchanged on error.
    pub fn decode_into(&self, out: &mut Vec<u8>) -> Result<(), FrameError> {
        match self.codec {
            Codec::Raw => out.extend_from_slice(self.bytes),
            Codec::Lz4 => {
                let start = out.len();
                let raw = self.raw_len as usize;
                out.resize(start + raw, 0);
                match lz4_flex::block::decompress_into(self.bytes, &mut out[start..]) {
                    Ok(n) if n == raw => {}
                    _ => {
                        out.truncate(start);
                        return Err(FrameError::Decompress);
                    }
                }
            }
        }
        Ok(())
    }

    fn parse(body: &[u8], frame_type: u8) -> Result<Payload<'_>, FrameError> {
        let codec = Codec::from_byte(*body.first().ok_or(FrameError::Malformed(frame_type))?)?;
        let raw_len = read_u32(body, 1..5).ok_or(FrameError::Malformed(frame_type))?;
        if raw_len == 0 || raw_len as usize > MAX_CHUNK_LEN {
            return Err(FrameError::ChunkLength(raw_len));
        }
        let bytes = &body[5..];
        match codec {
            Codec::Raw if bytes.len() != raw_len as usize => Err(FrameError::Malformed(frame_type)),
            Codec::Lz4 if bytes.len() > raw_len as usize || bytes.is_empty() => {
                Err(FrameError::Malformed(frame_type))
            }
            _ => Ok(Payload {
                codec,
                raw_len,
                bytes,
            }),
        }
    }

    fn emit_body(&self, out: &mut Vec<u8>) {
        out.push(self.codec.to_byte());
        out.extend_from_slice(&self.raw_len.to_be_bytes());
        out.extend_from_slice(self.bytes);
    }

    fn body_len(&self) -> usize {
        5 + self.bytes.len()
    }
}

/// A parsed data frame (encoder -> decoder).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DataRepr<'a> {
    /// Stream preamble carrying the format version.
    Preamble {
        /// Format version.
        version: u8,
    },
    /// A chunk carried in full.
    Literal(Payload<'a>),
    /// A chunk the decoder holds in its cache.
    Reference {
        /// Fingerprint of the chunk.
        fingerprint: Fingerprint,
        /// Its length.
        raw_len: u32,
    },
    /// A chunk sent in answer to a `NeedChunk`; not part of the byte stream
    /// at this position, it resolves earlier references.
    Repair {
        /// Fingerprint of the chunk.
        fingerprint: Fingerprint,
        /// The chunk.
        payload: Payload<'a>,
    },
    /// End of the encoded stream.
    End,
}

fn read_u32(body: &[u8], range: Range<usize>) -> Option<u32> {
    Some(u32::from_be_bytes(body.get(range)?.try_into().ok()?))
}

/// Read a big-endian u64 at `range` of `body`.
pub(crate) fn read_u64(body: &[u8], range: Range<usize>) -> Option<u64> {
    Some(u64::from_be_bytes(body.get(range)?.try_into().ok()?))
}

impl<'a> DataRepr<'a> {
    /// Parse a data frame; `Ok(None)` when the frame is a control frame
    /// (types 0x40..=0x7f) that the caller should hand to
    /// [`crate::ControlRepr::parse`].
    pub fn parse(frame: &'a Frame<&'a [u8]>) -> Result<Option<DataRepr<'a>>, FrameError> {
        let body = frame.body();
        let t = frame.frame_type();
        let repr = match t {
            kind::PREAMBLE => {
                if body.len() != 5 {
                    return Err(FrameError::Malformed(t));
                }
                if body[..4] != MAGIC {
                    return Err(FrameError::BadMagic);
                }
                if body[4] != VERSION {
                    return Err(FrameError::UnsupportedVersion(body[4]));
                }
                DataRepr::Preamble { version: body[4] }
            }
            kind::LITERAL => DataRepr::Literal(Payload::parse(body, t)?),
            kind::REFERENCE => {
                if body.len() != FINGERPRINT_LEN + 4 {
                    return Err(FrameError::Malformed(t));
                }
                let fingerprint = Fingerprint::from_slice(body).ok_or(FrameError::Malformed(t))?;
                let raw_len = read_u32(body, FINGERPRINT_LEN..FINGERPRINT_LEN + 4)
                    .ok_or(FrameError::Malformed(t))?;
                if raw_len == 0 || raw_len as usize > MAX_CHUNK_LEN {
                    return Err(FrameError::ChunkLength(raw_len));
                }
                DataRepr::Reference {
                    fingerprint,
                    raw_len,
                }
            }
            kind::REPAIR => {
                let fingerprint = Fingerprint::from_slice(body).ok_or(FrameError::Malformed(t))?;
                let payload = Payload::parse(&body[FINGERPRINT_LEN..], t)?;
                DataRepr::Repair {
                    fingerprint,
                    payload,
                }
            }
            kind::END => {
                if !body.is_empty() {
                    return Err(FrameError::Malformed(t));
                }
                DataRepr::End
            }
            0x40..=0x7f => return Ok(None),
            other => return Err(FrameError::UnknownType(other)),
        };
        Ok(Some(repr))
    }

    /// Append the frame to `out`.
    pub fn emit(&self, out: &mut Vec<u8>) {
        match self {
            DataRepr::Preamble { version } => {
                emit_header(out, kind::PREAMBLE, 5);
                out.extend_from_slice(&MAGIC);
                out.push(*version);
            }
            DataRepr::Literal(payload) => {
                emit_header(out, kind::LITERAL, payload.body_len());
                payload.emit_body(out);
            }
            DataRepr::Reference {
                fingerprint,
                raw_len,
            } => {
                emit_header(out, kind::REFERENCE, FINGERPRINT_LEN + 4);
                out.extend_from_slice(fingerprint.as_bytes());
                out.extend_from_slice(&raw_len.to_be_bytes());
            }
            DataRepr::Repair {
                fingerprint,
                payload,
            } => {
                emit_header(out, kind::REPAIR, FINGERPRINT_LEN + payload.body_len());
                out.extend_from_slice(fingerprint.as_bytes());
                payload.emit_body(out);
            }
            DataRepr::End => emit_header(out, kind::END, 0),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn round_trip(repr: DataRepr<'_>) {
        let mut buf = Vec::new();
        repr.emit(&mut buf);
        let frame = Frame::new_checked(&buf[..]).unwrap();
        assert_eq!(frame.total_len(), buf.len());
        assert_eq!(DataRepr::parse(&frame).unwrap(), Some(repr));
    }

    #[test]
    fn data_frames_round_trip() {
        let fp = Fingerprint::of(b"x");
        round_trip(DataRepr::Preamble { version: VERSION });
        round_trip(DataRepr::Literal(Payload {
            codec: Codec::Raw,
            raw_len: 3,
            bytes: b"abc",
        }));
        round_trip(DataRepr::Reference {
            fingerprint: fp,
            raw_len: 8192,
        });
        round_trip(DataRepr::Repair {
            fingerprint: fp,
            payload: Payload {
                codec: Codec::Raw,
                raw_len: 1,
                bytes: b"x",
            },
        });
        round_trip(DataRepr::End);
    }

    #[test]
    fn rejects_bad_frames() {
        assert_eq!(
            Frame::new_checked(&[2u8, 0, 0][..]).unwrap_err(),
            FrameError::Truncated
        );
        assert!(matches!(
            Frame::new_checked(&[2u8, 0xff, 0xff, 0xff][..]).unwrap_err(),
            FrameError::TooLong(_)
        ));
        let bad_magic = [1u8, 0, 0, 5, b'X', b'O', b'P', b'C', 1];
        let f = Frame::new_checked(&bad_magic[..]).unwrap();
        assert_eq!(DataRepr::parse(&f).unwrap_err(), FrameError::BadMagic);
        let zero_len = [
            3u8, 0, 0, 20, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
        ];
        let f = Frame::new_checked(&zero_len[..]).unwrap();
        assert_eq!(DataRepr::parse(&f).unwrap_err(), FrameError::ChunkLength(0));
        // LZ4 payload claiming more raw bytes than it decodes to.
        let payload = Payload {
            codec: Codec::Lz4,
            raw_len: 100,
            bytes: &[0x10, b'a'],
        };
        let mut out = vec![9];
        assert_eq!(payload.decode_into(&mut out), Err(FrameError::Decompress));
        assert_eq!(out, vec![9]);
    }

    proptest! {
        #[test]
        fn parse_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
            if let Ok(frame) = Frame::new_checked(&bytes[..]) {
                if let Ok(Some(DataRepr::Literal(p) | DataRepr::Repair { payload: p, .. })) = DataRepr::parse(&frame) {
                    let mut out = Vec::new();
                    let _ = p.decode_into(&mut out);
                }
            }
        }
    }
}
