//! Runs: consecutive literal chunks compressed together (`Run`), or
//! continuing the flow's stream (`StreamRun`), and the run lengths.

use crate::chunker::MAX_CHUNK_LEN;
use crate::compress::{Codec, StreamDecoder};

use super::error::FrameError;
use super::header::{emit_header, MAX_RUN_CHUNKS, MAX_RUN_LEN};
use super::kind;
use super::payload::Payload;

/// Lengths carried as big-endian u32s (a `Run` frame's), as `usize`s.
pub fn run_lengths(lengths: &[u8]) -> impl Iterator<Item = usize> + '_ {
    lengths
        .chunks_exact(4)
        .map(|b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]) as usize)
}

/// `data` cut into consecutive pieces of the given lengths; ends early
/// rather than panic if the lengths add up to more than `data`.
pub fn split_run(data: &[u8], lengths: impl Iterator<Item = usize>) -> impl Iterator<Item = &[u8]> {
    lengths.scan(0usize, move |at, len| {
        let piece = data.get(*at..at.checked_add(len)?)?;
        *at += len;
        Some(piece)
    })
}

/// Consecutive literal chunks compressed together (a `Run` frame).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Run<'a> {
    /// How `bytes` is encoded (LZ4 or zstd; never raw).
    pub codec: Codec,
    /// The chunks' raw lengths, each a big-endian u32.
    pub lengths: &'a [u8],
    /// The chunks, concatenated and compressed.
    pub bytes: &'a [u8],
}

impl<'a> Run<'a> {
    /// The chunks' raw lengths, in order.
    pub fn lengths(&self) -> impl Iterator<Item = usize> + 'a {
        run_lengths(self.lengths)
    }

    /// How many chunks the run carries.
    pub fn count(&self) -> usize {
        self.lengths.len() / 4
    }

    /// Total raw length (what [`Run::decode_into`](crate::frame::Run::decode_into) appends).
    pub fn raw_len(&self) -> usize {
        self.lengths().sum()
    }

    /// Decode the concatenated chunks into `out` (appended); `out` grows by
    /// exactly [`Run::raw_len`](crate::frame::Run::raw_len) on success and is unchanged on error.
    pub fn decode_into(&self, out: &mut Vec<u8>) -> Result<(), FrameError> {
        Payload {
            codec: self.codec,
            raw_len: self.raw_len() as u32,
            bytes: self.bytes,
        }
        .decode_into(out)
    }

    pub(super) fn parse(body: &'a [u8]) -> Result<Run<'a>, FrameError> {
        let codec = Codec::from_byte(*body.first().ok_or(FrameError::Malformed(kind::RUN))?)?;
        Run::parse_rest(codec, &body[1..], kind::RUN)
    }

    /// The body after its first byte (a `Run`'s codec, a `StreamRun`'s
    /// flags).
    pub(super) fn parse_rest(codec: Codec, body: &'a [u8], t: u8) -> Result<Run<'a>, FrameError> {
        let malformed = FrameError::Malformed(t);
        let count = body
            .get(..2)
            .map(|b| usize::from(u16::from_be_bytes([b[0], b[1]])))
            .ok_or(malformed.clone())?;
        if codec == Codec::Raw || count == 0 || count > MAX_RUN_CHUNKS {
            return Err(malformed);
        }
        let lengths = body.get(2..2 + 4 * count).ok_or(malformed.clone())?;
        let bytes = &body[2 + 4 * count..];
        let run = Run {
            codec,
            lengths,
            bytes,
        };
        let mut total = 0usize;
        for len in run.lengths() {
            if len == 0 || len > MAX_CHUNK_LEN {
                return Err(FrameError::ChunkLength(len as u32));
            }
            total += len;
        }
        if total > MAX_RUN_LEN || bytes.is_empty() || bytes.len() > total {
            return Err(malformed);
        }
        Ok(run)
    }

    pub(super) fn body_len(&self) -> usize {
        3 + self.lengths.len() + self.bytes.len()
    }

    /// Append the frame of type `t` whose body starts with `first` (the
    /// codec or the flags).
    pub(super) fn emit(&self, t: u8, first: u8, out: &mut Vec<u8>) {
        emit_header(out, t, self.body_len());
        out.push(first);
        out.extend_from_slice(&(self.count() as u16).to_be_bytes());
        out.extend_from_slice(self.lengths);
        out.extend_from_slice(self.bytes);
    }
}

/// `StreamRun` flag: the run starts a new stream.
pub(super) const STREAM_FRESH: u8 = 1;
/// `StreamRun` flag: the stream is LZMA2, not zstd.
pub(super) const STREAM_LZMA: u8 = 2;
/// `StreamRun` flag: the stream is PPMd, not zstd.
pub(super) const STREAM_PPMD: u8 = 4;

impl StreamDecoder {
    /// Decode a stream run into `out` (appended): `out` grows by exactly
    /// the run's raw length on success and is unchanged on error. A run
    /// that does not start a stream needs one started before it, with the
    /// same engine; after an error the stream is dropped (the flow cannot
    /// go on anyway).
    pub fn decode_into(
        &mut self,
        fresh: bool,
        run: &Run<'_>,
        out: &mut Vec<u8>,
    ) -> Result<(), FrameError> {
        self.decode_run(fresh, run.codec, run.bytes, run.raw_len(), out)
            .map_err(|_| FrameError::Decompress)
    }
}
