//! Where each frame goes: control frames to the local encoder, data
//! frames checked against where they may come (a preamble first and once,
//! nothing of the stream after `End`, nothing but the rest of a chunk
//! begun as pieces) and handed to their handler.

use crate::control::ControlRepr;
use crate::frame::{DataRepr, Frame, FrameError, StreamDecoder};

use super::error::DecodeError;
use super::Decoder;

impl Decoder {
    pub(super) fn handle_frame(
        &mut self,
        bytes: &[u8],
        out: &mut Vec<u8>,
    ) -> Result<(), DecodeError> {
        let frame = Frame::new_checked(bytes)?;
        let Some(repr) = DataRepr::parse(&frame)? else {
            return self.handle_control(&frame);
        };
        if self.handle_out_of_stream(repr, out)? {
            return Ok(());
        }
        self.handle_data(repr, out)
    }

    /// A control frame from the peer's decoder (or the peer's encoder's
    /// `Sent`), queued for the local encoder.
    fn handle_control(&mut self, frame: &Frame<&[u8]>) -> Result<(), DecodeError> {
        let Some(control) = ControlRepr::parse(frame)? else {
            return Err(FrameError::UnknownType(frame.frame_type()).into());
        };
        self.from_peer.push(control, &mut self.stats)
    }

    /// Checks where a data frame may come, and handles those that are not
    /// bytes of the stream at their position (preamble, repairs, span
    /// lists, pieces): `true` when `repr` was handled here.
    fn handle_out_of_stream(
        &mut self,
        repr: DataRepr<'_>,
        out: &mut Vec<u8>,
    ) -> Result<bool, DecodeError> {
        match repr {
            DataRepr::Preamble { .. } => {
                if self.started {
                    return Err(DecodeError::DuplicatePreamble);
                }
                self.started = true;
            }
            _ if !self.started => return Err(DecodeError::MissingPreamble),
            DataRepr::Repair {
                fingerprint,
                payload,
            } => self.handle_repair(fingerprint, payload, out)?,
            DataRepr::SpanList { check, entries } => self.handle_span_list(check, entries, out)?,
            _ if self.end_seen => return Err(DecodeError::DataAfterEnd),
            // Only a literal or a run may carry the rest of the chunk.
            DataRepr::Literal(_)
            | DataRepr::Named { .. }
            | DataRepr::Run(_)
            | DataRepr::StreamRun { .. }
                if self.pieces.awaits_rest() =>
            {
                return Ok(false)
            }
            _ if self.pieces.awaits_rest() => return Err(DecodeError::PieceOrder),
            DataRepr::PieceRest { cut } => self.pieces.expect_rest(cut)?,
            DataRepr::Piece { cut, payload } => self.piece(cut, payload, out)?,
            DataRepr::PieceRef {
                fingerprint,
                raw_len,
            } => self.piece_ref(fingerprint, raw_len, out)?,
            DataRepr::Delta {
                target,
                base,
                raw_len,
                bytes,
                after_pieces: true,
            } => self.piece_delta(target, base, raw_len, bytes, out)?,
            // A `StreamEnd` carries no byte of the stream: the encoder
            // frees its compressor when the flow goes quiet, whether or
            // not a chunk is open as pieces (an interactive session that
            // pauses with a request's chunk open), and the chunk goes on
            // after it.
            DataRepr::StreamEnd => return Ok(false),
            // The encoder finishes a chunk's pieces before anything else
            // of the byte stream.
            _ if !self.pieces.is_empty() => return Err(DecodeError::PieceOrder),
            _ => return Ok(false),
        }
        Ok(true)
    }

    /// A data frame that carries bytes of the stream at its position.
    fn handle_data(&mut self, repr: DataRepr<'_>, out: &mut Vec<u8>) -> Result<(), DecodeError> {
        match repr {
            DataRepr::Literal(payload) => self.literal(None, payload, out)?,
            DataRepr::Named {
                fingerprint,
                payload,
            } => self.literal(Some(fingerprint), payload, out)?,
            DataRepr::Run(run) => self.run(None, run, out)?,
            DataRepr::StreamRun { fresh, run } => self.run(Some(fresh), run, out)?,
            DataRepr::Reference {
                fingerprint,
                raw_len,
            } => self.reference(fingerprint, raw_len, out)?,
            DataRepr::Span {
                first,
                count,
                raw_len,
                check,
            } => self.span(first, count, raw_len, check, out)?,
            DataRepr::Delta {
                target,
                base,
                raw_len,
                bytes,
                after_pieces: _,
            } => self.delta(target, base, raw_len, bytes, out)?,
            DataRepr::StreamEnd => {
                // The encoder freed its compressor: free the context, the
                // next run starts a new stream (a run that does not is an
                // error, as before any stream).
                self.stream = StreamDecoder::default();
            }
            DataRepr::End => {
                self.end_seen = true;
                // No run can follow: free the zstd window (1 MiB) now,
                // not when the flow's other direction ends too.
                self.stream = StreamDecoder::default();
                if self.backlog.is_empty() {
                    self.finish();
                } else {
                    self.backlog.hold_end();
                }
            }
            DataRepr::Preamble { .. }
            | DataRepr::Repair { .. }
            | DataRepr::SpanList { .. }
            | DataRepr::Piece { .. }
            | DataRepr::PieceRest { .. }
            | DataRepr::PieceRef { .. } => {}
        }
        Ok(())
    }

    /// Every byte up to `End` is delivered: tell the peer (once).
    pub(super) fn finish(&mut self) {
        if !self.finished {
            self.finished = true;
            self.to_peer.push(ControlRepr::Done);
        }
    }
}
