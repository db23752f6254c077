//! The frame header, the checked view over one frame ([`Frame`]), and the
//! format's version and limits.

use std::ops::Range;

use crate::chunker::MAX_CHUNK_LEN;

use super::error::FrameError;

/// Length of the frame header.
pub const HEADER_LEN: usize = 4;
/// Most chunks in one `Run` frame.
pub const MAX_RUN_CHUNKS: usize = 1024;
/// Most raw bytes in one `Run` frame.
pub const MAX_RUN_LEN: usize = MAX_CHUNK_LEN;
/// Largest frame body accepted (a repair frame of a maximal raw chunk, a
/// delta frame, whose payload is shorter than its chunk, or a run frame,
/// whose payload is shorter than its raw bytes).
pub const MAX_FRAME_BODY: usize = MAX_CHUNK_LEN + 3 + 4 * MAX_RUN_CHUNKS;
/// Most chunks in one `Span` (and `SpanList`) frame.
pub const MAX_SPAN_CHUNKS: usize = 256;
/// Most raw bytes one `Span` stands for.
pub const MAX_SPAN_LEN: usize = 4 << 20;

/// Magic bytes at the start of the preamble body.
pub const MAGIC: [u8; 4] = *b"WOPC";
/// Version of the frame format written by this crate (2: zstd literals,
/// delta frames; 3: run frames; 4: named literals; 5: spans; 6: stream
/// runs; 7: stream end; 8: LZMA2 stream runs; 9: PPMd stream runs; 10:
/// `Sent` acks; 11: pieces; 12: pieces completed by reference or delta).
pub const VERSION: u8 = 12;

mod field {
    use std::ops::Range;
    pub const TYPE: usize = 0;
    pub const LENGTH: Range<usize> = 1..4;
}

/// Checked view of one frame at the start of a buffer.
#[derive(Debug, Clone)]
pub struct Frame<T: AsRef<[u8]>> {
    pub(super) buffer: T,
}

impl<T: AsRef<[u8]>> Frame<T> {
    /// Wrap without checks (use [`Frame::new_checked`](crate::frame::Frame::new_checked) for network bytes).
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

    /// Check lengths (see [`Frame::new_checked`](crate::frame::Frame::new_checked)).
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

/// Read a big-endian u32 at `range` of `body`.
pub(crate) fn read_u32(body: &[u8], range: Range<usize>) -> Option<u32> {
    Some(u32::from_be_bytes(body.get(range)?.try_into().ok()?))
}

/// Read a big-endian u64 at `range` of `body`.
pub(crate) fn read_u64(body: &[u8], range: Range<usize>) -> Option<u64> {
    Some(u64::from_be_bytes(body.get(range)?.try_into().ok()?))
}
