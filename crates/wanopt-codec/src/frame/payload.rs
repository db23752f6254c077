//! The payload of a chunk (`Literal`, `Named`, `Repair`, `Piece`): its
//! codec byte, raw length and bytes.

use crate::chunker::MAX_CHUNK_LEN;
use crate::compress::{decompress_block, Codec};

use super::error::FrameError;
use super::header::read_u32;

impl Codec {
    /// The codec of a `Literal` or `Run` codec byte.
    pub(super) fn from_byte(b: u8) -> Result<Self, FrameError> {
        match b {
            0 => Ok(Codec::Raw),
            1 => Ok(Codec::Lz4),
            2 => Ok(Codec::Zstd),
            other => Err(FrameError::UnknownCodec(other)),
        }
    }

    /// The codec byte of a `Literal` or `Run` frame.
    pub(super) fn to_byte(self) -> u8 {
        match self {
            Codec::Raw => 0,
            Codec::Lz4 => 1,
            Codec::Zstd => 2,
            // Never written in a codec byte (`StreamRun` flags carry them).
            Codec::Lzma => 3,
            Codec::Ppmd => 4,
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
        // Only a stream run carries LZMA2 or PPMd (its own decoder).
        decompress_block(self.codec, self.bytes, self.raw_len as usize, out)
            .map_err(|_| FrameError::Decompress)
    }

    pub(super) fn parse(body: &[u8], frame_type: u8) -> Result<Payload<'_>, FrameError> {
        let codec = Codec::from_byte(*body.first().ok_or(FrameError::Malformed(frame_type))?)?;
        let raw_len = read_u32(body, 1..5).ok_or(FrameError::Malformed(frame_type))?;
        if raw_len == 0 || raw_len as usize > MAX_CHUNK_LEN {
            return Err(FrameError::ChunkLength(raw_len));
        }
        let bytes = &body[5..];
        match codec {
            Codec::Raw if bytes.len() != raw_len as usize => Err(FrameError::Malformed(frame_type)),
            Codec::Lz4 | Codec::Zstd | Codec::Lzma | Codec::Ppmd
                if bytes.len() > raw_len as usize || bytes.is_empty() =>
            {
                Err(FrameError::Malformed(frame_type))
            }
            _ => Ok(Payload {
                codec,
                raw_len,
                bytes,
            }),
        }
    }

    pub(super) fn emit_body(&self, out: &mut Vec<u8>) {
        out.push(self.codec.to_byte());
        out.extend_from_slice(&self.raw_len.to_be_bytes());
        out.extend_from_slice(self.bytes);
    }

    pub(super) fn body_len(&self) -> usize {
        5 + self.bytes.len()
    }
}
