//! Parsing a data frame's body into a [`DataRepr`]: one function per family
//! of frames, each checking its layout and bounds (bytes from the network
//! never reach a panic or an unbounded allocation).

use crate::chunker::MAX_CHUNK_LEN;
use crate::fingerprint::{Fingerprint, FINGERPRINT_LEN};

use super::data::DataRepr;
use super::error::FrameError;
use super::header::{read_u32, Frame, MAGIC, MAX_SPAN_CHUNKS, MAX_SPAN_LEN, VERSION};
use super::kind;
use super::payload::Payload;
use super::run::{Run, STREAM_FRESH, STREAM_LZMA, STREAM_PPMD};
use super::span::{span_entries, SPAN_ENTRY_LEN};
use crate::compress::Codec;

impl<'a> DataRepr<'a> {
    /// Parse a data frame; `Ok(None)` when the frame is a control frame
    /// (types 0x40..=0x7f) that the caller should hand to
    /// [`crate::ControlRepr::parse`].
    pub fn parse(frame: &'a Frame<&'a [u8]>) -> Result<Option<DataRepr<'a>>, FrameError> {
        let body = frame.body();
        let t = frame.frame_type();
        let repr = match t {
            kind::PREAMBLE => preamble(body, t)?,
            kind::LITERAL => DataRepr::Literal(Payload::parse(body, t)?),
            kind::PIECE => piece(body, t)?,
            kind::PIECE_REST => piece_rest(body, t)?,
            kind::REFERENCE | kind::PIECE_REF => reference(body, t)?,
            kind::REPAIR | kind::NAMED => named(body, t)?,
            kind::END => empty(body, t, DataRepr::End)?,
            kind::STREAM_END => empty(body, t, DataRepr::StreamEnd)?,
            kind::DELTA | kind::PIECE_DELTA => delta(body, t)?,
            kind::RUN => DataRepr::Run(Run::parse(body)?),
            kind::STREAM_RUN => stream_run(body, t)?,
            kind::SPAN => span(body, t)?,
            kind::SPAN_LIST => span_list(body, t)?,
            0x40..=0x7f => return Ok(None),
            other => return Err(FrameError::UnknownType(other)),
        };
        Ok(Some(repr))
    }
}

/// A raw length of one chunk: 1 to [`MAX_CHUNK_LEN`](crate::MAX_CHUNK_LEN).
fn chunk_len(raw_len: u32) -> Result<u32, FrameError> {
    if raw_len == 0 || raw_len as usize > MAX_CHUNK_LEN {
        return Err(FrameError::ChunkLength(raw_len));
    }
    Ok(raw_len)
}

/// The fingerprint at the start of `body`.
fn fingerprint(body: &[u8], t: u8) -> Result<Fingerprint, FrameError> {
    Fingerprint::from_slice(body).ok_or(FrameError::Malformed(t))
}

fn preamble(body: &[u8], t: u8) -> Result<DataRepr<'static>, FrameError> {
    if body.len() != 5 {
        return Err(FrameError::Malformed(t));
    }
    if body[..4] != MAGIC {
        return Err(FrameError::BadMagic);
    }
    if body[4] != VERSION {
        return Err(FrameError::UnsupportedVersion(body[4]));
    }
    Ok(DataRepr::Preamble { version: body[4] })
}

/// `End` and `StreamEnd`: an empty body.
fn empty(body: &[u8], t: u8, repr: DataRepr<'static>) -> Result<DataRepr<'static>, FrameError> {
    if !body.is_empty() {
        return Err(FrameError::Malformed(t));
    }
    Ok(repr)
}

fn piece(body: &[u8], t: u8) -> Result<DataRepr<'_>, FrameError> {
    let cut = read_u32(body, 0..4).ok_or(FrameError::Malformed(t))?;
    if cut as usize > MAX_CHUNK_LEN {
        return Err(FrameError::ChunkLength(cut));
    }
    let payload = match &body[4..] {
        [] if cut == 0 => return Err(FrameError::Malformed(t)),
        [] => None,
        rest => Some(Payload::parse(rest, t)?),
    };
    Ok(DataRepr::Piece { cut, payload })
}

fn piece_rest(body: &[u8], t: u8) -> Result<DataRepr<'static>, FrameError> {
    if body.len() != 4 {
        return Err(FrameError::Malformed(t));
    }
    let cut = read_u32(body, 0..4).ok_or(FrameError::Malformed(t))?;
    if cut < 2 || cut as usize > MAX_CHUNK_LEN {
        return Err(FrameError::ChunkLength(cut));
    }
    Ok(DataRepr::PieceRest { cut })
}

/// `Reference` and `PieceRef`.
fn reference(body: &[u8], t: u8) -> Result<DataRepr<'static>, FrameError> {
    if body.len() != FINGERPRINT_LEN + 4 {
        return Err(FrameError::Malformed(t));
    }
    let fingerprint = fingerprint(body, t)?;
    let raw_len = read_u32(body, FINGERPRINT_LEN..FINGERPRINT_LEN + 4)
        .ok_or(FrameError::Malformed(t))
        .and_then(chunk_len)?;
    Ok(match t {
        kind::REFERENCE => DataRepr::Reference {
            fingerprint,
            raw_len,
        },
        _ => DataRepr::PieceRef {
            fingerprint,
            raw_len,
        },
    })
}

/// `Repair` and `Named`: a fingerprint, then a payload.
fn named(body: &[u8], t: u8) -> Result<DataRepr<'_>, FrameError> {
    let fingerprint = fingerprint(body, t)?;
    let payload = Payload::parse(&body[FINGERPRINT_LEN..], t)?;
    Ok(match t {
        kind::REPAIR => DataRepr::Repair {
            fingerprint,
            payload,
        },
        _ => DataRepr::Named {
            fingerprint,
            payload,
        },
    })
}

/// `Delta` and `PieceDelta`.
fn delta(body: &[u8], t: u8) -> Result<DataRepr<'_>, FrameError> {
    const FIXED: usize = 2 * FINGERPRINT_LEN + 4;
    let target = fingerprint(body, t)?;
    let base = body
        .get(FINGERPRINT_LEN..)
        .and_then(Fingerprint::from_slice)
        .ok_or(FrameError::Malformed(t))?;
    let raw_len = read_u32(body, 2 * FINGERPRINT_LEN..FIXED)
        .ok_or(FrameError::Malformed(t))
        .and_then(chunk_len)?;
    let bytes = &body[FIXED..];
    if bytes.is_empty() || bytes.len() >= raw_len as usize {
        return Err(FrameError::Malformed(t));
    }
    Ok(DataRepr::Delta {
        target,
        base,
        raw_len,
        bytes,
        after_pieces: t == kind::PIECE_DELTA,
    })
}

fn stream_run(body: &[u8], t: u8) -> Result<DataRepr<'_>, FrameError> {
    let flags = *body.first().ok_or(FrameError::Malformed(t))?;
    let codec = match flags & !STREAM_FRESH {
        0 => Codec::Zstd,
        STREAM_LZMA => Codec::Lzma,
        STREAM_PPMD => Codec::Ppmd,
        _ => return Err(FrameError::Malformed(t)),
    };
    Ok(DataRepr::StreamRun {
        fresh: flags & STREAM_FRESH != 0,
        run: Run::parse_rest(codec, &body[1..], t)?,
    })
}

fn span(body: &[u8], t: u8) -> Result<DataRepr<'static>, FrameError> {
    const LEN: usize = 2 * FINGERPRINT_LEN + 6;
    if body.len() != LEN {
        return Err(FrameError::Malformed(t));
    }
    let first = fingerprint(body, t)?;
    let count = u16::from_be_bytes([body[16], body[17]]);
    let raw_len = read_u32(body, 18..22).ok_or(FrameError::Malformed(t))?;
    let check = fingerprint(&body[22..], t)?;
    if !(2..=MAX_SPAN_CHUNKS).contains(&usize::from(count))
        || raw_len < u32::from(count)
        || raw_len as usize > MAX_SPAN_LEN
    {
        return Err(FrameError::Malformed(t));
    }
    Ok(DataRepr::Span {
        first,
        count,
        raw_len,
        check,
    })
}

fn span_list(body: &[u8], t: u8) -> Result<DataRepr<'_>, FrameError> {
    let check = fingerprint(body, t)?;
    let count = body
        .get(FINGERPRINT_LEN..FINGERPRINT_LEN + 2)
        .map(|b| usize::from(u16::from_be_bytes([b[0], b[1]])))
        .ok_or(FrameError::Malformed(t))?;
    let entries = &body[FINGERPRINT_LEN + 2..];
    if !(1..=MAX_SPAN_CHUNKS).contains(&count) || entries.len() != count * SPAN_ENTRY_LEN {
        return Err(FrameError::Malformed(t));
    }
    if let Some((_, len)) =
        span_entries(entries).find(|&(_, len)| len == 0 || len as usize > MAX_CHUNK_LEN)
    {
        return Err(FrameError::ChunkLength(len));
    }
    Ok(DataRepr::SpanList { check, entries })
}
