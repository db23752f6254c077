//! Frames out of the byte stream: the stream arrives in pieces cut
//! anywhere, so the start of a frame is kept until its rest arrives. A
//! frame's length is checked against the limit as soon as its header is
//! whole.

use std::borrow::Cow;

use crate::frame::{Frame, FrameError, HEADER_LEN, MAX_FRAME_BODY};

/// The start of a frame whose rest has not arrived yet.
#[derive(Debug, Default)]
pub(super) struct FrameBuffer {
    partial: Vec<u8>,
}

impl FrameBuffer {
    /// The next whole frame of the stream: the one kept from earlier
    /// pieces completed from `wire`, or the next in `wire`. `wire` is
    /// advanced past what was used; `None` once it is used up, its tail
    /// (the start of a frame) kept for the next piece.
    pub(super) fn next_frame<'w>(
        &mut self,
        wire: &mut &'w [u8],
    ) -> Result<Option<Cow<'w, [u8]>>, FrameError> {
        if !self.partial.is_empty() {
            // Complete the frame started by an earlier piece.
            if self.partial.len() < HEADER_LEN {
                let take = (HEADER_LEN - self.partial.len()).min(wire.len());
                self.partial.extend_from_slice(&wire[..take]);
                *wire = &wire[take..];
                if self.partial.len() < HEADER_LEN {
                    return Ok(None);
                }
            }
            let total = frame_total_len(&self.partial)?;
            let take = (total - self.partial.len()).min(wire.len());
            self.partial.extend_from_slice(&wire[..take]);
            *wire = &wire[take..];
            if self.partial.len() < total {
                return Ok(None);
            }
            return Ok(Some(Cow::Owned(std::mem::take(&mut self.partial))));
        }
        if wire.len() >= HEADER_LEN {
            let total = frame_total_len(wire)?;
            if wire.len() >= total {
                let (frame, rest) = wire.split_at(total);
                *wire = rest;
                return Ok(Some(Cow::Borrowed(frame)));
            }
        }
        self.partial.extend_from_slice(wire);
        *wire = &[];
        Ok(None)
    }

    /// Whether `wire`, after what is kept, completes at least one frame.
    /// A bad header counts as completing one: the push that reads it
    /// reports the error at once.
    pub(super) fn completes_frame(&self, wire: &[u8]) -> bool {
        let have = self.partial.len();
        if have + wire.len() < HEADER_LEN {
            return false;
        }
        let mut header = [0u8; HEADER_LEN];
        let from_partial = have.min(HEADER_LEN);
        header[..from_partial].copy_from_slice(&self.partial[..from_partial]);
        header[from_partial..].copy_from_slice(&wire[..HEADER_LEN - from_partial]);
        frame_total_len(&header).map_or(true, |total| have + wire.len() >= total)
    }
}

/// Total length of the frame whose header starts `bytes` (at least
/// `HEADER_LEN` long), checked against the limit.
fn frame_total_len(bytes: &[u8]) -> Result<usize, FrameError> {
    let frame = Frame::new_unchecked(bytes);
    let body = frame.body_len();
    if body > MAX_FRAME_BODY {
        return Err(FrameError::TooLong(body));
    }
    Ok(HEADER_LEN + body)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compress::Codec;
    use crate::frame::{emit_header, DataRepr, Payload, VERSION};

    /// A preamble and literals of 0, 1, 300 and 70,000 bytes, and where
    /// each frame ends.
    fn stream() -> (Vec<u8>, Vec<usize>) {
        let mut wire = Vec::new();
        let mut ends = Vec::new();
        DataRepr::Preamble { version: VERSION }.emit(&mut wire);
        ends.push(wire.len());
        for len in [0usize, 1, 300, 70_000] {
            let bytes: Vec<u8> = (0..len).map(|i| i as u8).collect();
            DataRepr::Literal(Payload {
                codec: Codec::Raw,
                raw_len: len as u32,
                bytes: &bytes,
            })
            .emit(&mut wire);
            ends.push(wire.len());
        }
        (wire, ends)
    }

    /// The frames of `wire` pushed in pieces of `step` bytes.
    fn frames_in_steps(wire: &[u8], step: usize) -> Vec<Vec<u8>> {
        let mut buffer = FrameBuffer::default();
        let mut frames = Vec::new();
        for mut piece in wire.chunks(step) {
            while let Some(frame) = buffer.next_frame(&mut piece).unwrap() {
                frames.push(frame.into_owned());
            }
            assert!(piece.is_empty());
        }
        assert!(buffer.partial.is_empty());
        frames
    }

    #[test]
    fn frames_come_out_whole_however_the_stream_is_cut() {
        let (wire, ends) = stream();
        let mut expected = Vec::new();
        let mut start = 0;
        for &end in &ends {
            expected.push(wire[start..end].to_vec());
            start = end;
        }
        for step in [1, 2, 3, HEADER_LEN, 5, 301, 4096, wire.len()] {
            assert_eq!(frames_in_steps(&wire, step), expected, "step {step}");
        }
    }

    #[test]
    fn a_frame_over_the_limit_is_an_error_once_its_header_is_whole() {
        let mut header = Vec::new();
        emit_header(&mut header, 0, 0);
        let too_long = MAX_FRAME_BODY + 1;
        header[1..].copy_from_slice(&(too_long as u32).to_be_bytes()[1..]);
        let mut buffer = FrameBuffer::default();
        let mut first = &header[..2];
        assert_eq!(buffer.next_frame(&mut first), Ok(None));
        let mut rest = &header[2..];
        assert_eq!(
            buffer.next_frame(&mut rest),
            Err(FrameError::TooLong(too_long))
        );
        // Whole in one piece: the same.
        let mut buffer = FrameBuffer::default();
        let mut whole = &header[..];
        assert_eq!(
            buffer.next_frame(&mut whole),
            Err(FrameError::TooLong(too_long))
        );
    }

    #[test]
    fn completes_frame_says_whether_a_piece_ends_a_frame() {
        let (wire, ends) = stream();
        let mut buffer = FrameBuffer::default();
        assert!(!buffer.completes_frame(&wire[..HEADER_LEN - 1]));
        assert!(!buffer.completes_frame(&wire[..ends[0] - 1]));
        assert!(buffer.completes_frame(&wire[..ends[0]]));
        // Keep the first two bytes: the rest of the frame completes it.
        let mut start = &wire[..2];
        assert_eq!(buffer.next_frame(&mut start), Ok(None));
        assert!(!buffer.completes_frame(&wire[2..ends[0] - 1]));
        assert!(buffer.completes_frame(&wire[2..ends[0]]));
        // A header over the limit: the push reports it at once.
        let mut header = Vec::new();
        emit_header(&mut header, 0, 0);
        header[1..].copy_from_slice(&((MAX_FRAME_BODY + 1) as u32).to_be_bytes()[1..]);
        assert!(FrameBuffer::default().completes_frame(&header));
    }
}
