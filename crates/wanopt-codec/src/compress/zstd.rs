//! zstd: one frame per payload ([`ZstdBlock`]), a stream continued from
//! run to run ([`ZstdStream`]), and deltas against a base chunk
//! ([`delta_compress`], [`delta_decompress`]).

use std::cell::RefCell;

use zstd::zstd_safe::{self, CCtx, CParameter, DCtx, DParameter, InBuffer, OutBuffer};

use super::engine::{Codec, CompressError, Engine, Role, STREAM_WINDOW_LOG};

const NAME: &str = "zstd";

/// Log2 of the zstd match tables of a stream at level 9 and up (zstd's own
/// are 21-24 for large inputs: 50-90 MB per context; 20 keeps one near
/// 10 MB and nearly all of the gain on office documents).
const STREAM_TABLE_LOG: u32 = 20;

/// zstd, one frame per payload: a compressor kept at its level (made at
/// the first call); decompression needs no state of its own (one context
/// per thread).
pub struct ZstdBlock {
    level: i32,
    compressor: Option<zstd::bulk::Compressor<'static>>,
}

impl std::fmt::Debug for ZstdBlock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ZstdBlock")
            .field("level", &self.level)
            .finish_non_exhaustive()
    }
}

impl ZstdBlock {
    /// A block engine compressing at `level` (no context until the first
    /// payload).
    pub fn new(level: i32) -> Self {
        ZstdBlock {
            level,
            compressor: None,
        }
    }

    /// The level it compresses at.
    pub fn level(&self) -> i32 {
        self.level
    }

    fn compressor(&mut self) -> Result<&mut zstd::bulk::Compressor<'static>, CompressError> {
        if self.compressor.is_none() {
            let context = || CompressError::Context(NAME);
            let mut compressor = zstd::bulk::Compressor::new(self.level).map_err(|_| context())?;
            // The decoder knows the length from the frame; skip the
            // checksum (the chunk's fingerprint is checked where it
            // matters) and the content size.
            compressor
                .set_parameter(CParameter::ChecksumFlag(false))
                .map_err(|_| context())?;
            compressor
                .set_parameter(CParameter::ContentSizeFlag(false))
                .map_err(|_| context())?;
            self.compressor = Some(compressor);
        }
        self.compressor.as_mut().ok_or(CompressError::Context(NAME))
    }
}

impl Engine for ZstdBlock {
    fn codec(&self) -> Codec {
        Codec::Zstd
    }

    fn compress(&mut self, data: &[u8], out: &mut Vec<u8>) -> Result<usize, CompressError> {
        let compressor = self.compressor()?;
        let max = zstd_safe::compress_bound(data.len());
        if out.len() < max {
            out.resize(max, 0);
        }
        compressor
            .compress_to_buffer(data, &mut out[..])
            .map_err(|_| CompressError::Compress(NAME))
    }

    fn decompress(
        &mut self,
        input: &[u8],
        raw_len: usize,
        out: &mut Vec<u8>,
    ) -> Result<(), CompressError> {
        let start = out.len();
        out.resize(start + raw_len, 0);
        match decompress_block(input, &mut out[start..]) {
            Some(n) if n == raw_len => Ok(()),
            _ => {
                out.truncate(start);
                Err(CompressError::Corrupt(NAME))
            }
        }
    }

    fn restart(&mut self) -> Result<(), CompressError> {
        Ok(())
    }

    fn state_bytes(&self) -> usize {
        0
    }
}

/// Decompress one zstd payload into `out` (exactly its capacity: zstd
/// decodes straight into it, so a hostile frame can neither allocate a
/// window nor write past the chunk). One decompression context per thread.
fn decompress_block(src: &[u8], out: &mut [u8]) -> Option<usize> {
    thread_local! {
        static CONTEXT: RefCell<Option<zstd::bulk::Decompressor<'static>>> = const { RefCell::new(None) };
    }
    CONTEXT.with(|cell| {
        let mut slot = cell.borrow_mut();
        if slot.is_none() {
            *slot = zstd::bulk::Decompressor::new().ok();
        }
        slot.as_mut()?.decompress_to_buffer(src, out).ok()
    })
}

/// A zstd stream's context, compressing or decompressing.
enum StreamContext {
    Compress(CCtx<'static>),
    Decompress(DCtx<'static>),
}

/// zstd continued from run to run: each run is flushed, the window is
/// [`STREAM_WINDOW_LOG`] (the encoder's setting, the decoder's cap).
pub struct ZstdStream {
    context: StreamContext,
}

impl std::fmt::Debug for ZstdStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let role = match self.context {
            StreamContext::Compress(_) => "compress",
            StreamContext::Decompress(_) => "decompress",
        };
        f.debug_struct("ZstdStream")
            .field("role", &role)
            .finish_non_exhaustive()
    }
}

impl ZstdStream {
    /// A stream engine for `role`.
    pub fn new(role: Role) -> Result<Self, CompressError> {
        let context = match role {
            Role::Compress { level } => StreamContext::Compress(
                Self::compressor(level).ok_or(CompressError::Context(NAME))?,
            ),
            Role::Decompress => {
                let mut context = DCtx::try_create().ok_or(CompressError::Context(NAME))?;
                Self::reset_decompressor(&mut context)?;
                StreamContext::Decompress(context)
            }
        };
        Ok(ZstdStream { context })
    }

    fn compressor(level: i32) -> Option<CCtx<'static>> {
        let mut context = CCtx::try_create()?;
        context
            .set_parameter(CParameter::CompressionLevel(level))
            .ok()?;
        context
            .set_parameter(CParameter::ChecksumFlag(false))
            .ok()?;
        context
            .set_parameter(CParameter::WindowLog(STREAM_WINDOW_LOG))
            .ok()?;
        if level >= 9 {
            context
                .set_parameter(CParameter::ChainLog(STREAM_TABLE_LOG))
                .ok()?;
            context
                .set_parameter(CParameter::HashLog(STREAM_TABLE_LOG))
                .ok()?;
        }
        Some(context)
    }

    fn reset_decompressor(context: &mut DCtx<'static>) -> Result<(), CompressError> {
        context
            .reset(zstd_safe::ResetDirective::SessionOnly)
            .map_err(|_| CompressError::Context(NAME))?;
        context
            .set_parameter(DParameter::WindowLogMax(STREAM_WINDOW_LOG))
            .map_err(|_| CompressError::Context(NAME))?;
        Ok(())
    }
}

impl Engine for ZstdStream {
    fn codec(&self) -> Codec {
        Codec::Zstd
    }

    fn compress(&mut self, data: &[u8], out: &mut Vec<u8>) -> Result<usize, CompressError> {
        let StreamContext::Compress(context) = &mut self.context else {
            return Err(CompressError::Unsupported(NAME));
        };
        out.clear();
        match flushed(context, data, out) {
            true => Ok(out.len()),
            false => Err(CompressError::Compress(NAME)),
        }
    }

    fn decompress(
        &mut self,
        input: &[u8],
        raw_len: usize,
        out: &mut Vec<u8>,
    ) -> Result<(), CompressError> {
        let StreamContext::Decompress(context) = &mut self.context else {
            return Err(CompressError::Unsupported(NAME));
        };
        let start = out.len();
        // One byte of room past the run: a stream that holds more than
        // the run's lengths say shows there.
        out.resize(start + raw_len + 1, 0);
        match stream_decode(context, input, &mut out[start..], raw_len) {
            Ok((read, written)) if read == input.len() && written == raw_len => {
                out.truncate(start + raw_len);
                Ok(())
            }
            _ => {
                out.truncate(start);
                Err(CompressError::Corrupt(NAME))
            }
        }
    }

    fn restart(&mut self) -> Result<(), CompressError> {
        match &mut self.context {
            StreamContext::Compress(context) => context
                .reset(zstd_safe::ResetDirective::SessionOnly)
                .map(|_| ())
                .map_err(|_| CompressError::Context(NAME)),
            // A zstd context is reset and reused.
            StreamContext::Decompress(context) => Self::reset_decompressor(context),
        }
    }

    fn state_bytes(&self) -> usize {
        match &self.context {
            StreamContext::Compress(context) => context.sizeof(),
            StreamContext::Decompress(context) => context.sizeof(),
        }
    }
}

/// Feed all of `data` through a zstd stream and flush it into `out`
/// (appended); whether that worked.
fn flushed(context: &mut CCtx<'static>, data: &[u8], out: &mut Vec<u8>) -> bool {
    use zstd::zstd_safe::zstd_sys::ZSTD_EndDirective;
    out.reserve(zstd_safe::compress_bound(data.len()) + 64);
    let mut input = InBuffer::around(data);
    let mut output = OutBuffer::around(out);
    let done = loop {
        let before = output.pos();
        match context.compress_stream2(&mut output, &mut input, ZSTD_EndDirective::ZSTD_e_flush) {
            Ok(0) => break true,
            // More to flush but no room made: give up on this run.
            Ok(_) if output.pos() == before => break false,
            Ok(_) => {}
            Err(_) => break false,
        }
    };
    done && input.pos() == data.len()
}

/// Continue a zstd stream: decode `input` into `out` (room for `raw` + 1
/// bytes); returns (bytes read, bytes written), stopping once more than
/// `raw` came out or nothing moves.
fn stream_decode(
    context: &mut DCtx<'static>,
    input: &[u8],
    out: &mut [u8],
    raw: usize,
) -> Result<(usize, usize), CompressError> {
    let mut input = InBuffer::around(input);
    let mut output = OutBuffer::around(out);
    loop {
        let (read, written) = (input.pos(), output.pos());
        context
            .decompress_stream(&mut output, &mut input)
            .map_err(|_| CompressError::Corrupt(NAME))?;
        let progress = input.pos() != read || output.pos() != written;
        if output.pos() > raw || !progress {
            break;
        }
    }
    Ok((input.pos(), output.pos()))
}

/// Compress `chunk` with zstd at `level` using `base` as its prefix into
/// `out` (cleared first); `None` when zstd fails or the result is not
/// shorter than `limit`.
pub fn delta_compress(chunk: &[u8], base: &[u8], level: i32, out: &mut Vec<u8>) -> Option<usize> {
    let mut cctx = CCtx::create();
    cctx.set_parameter(CParameter::CompressionLevel(level))
        .ok()?;
    cctx.set_parameter(CParameter::ChecksumFlag(false)).ok()?;
    cctx.set_parameter(CParameter::ContentSizeFlag(false))
        .ok()?;
    cctx.ref_prefix(base).ok()?;
    out.clear();
    out.reserve(zstd_safe::compress_bound(chunk.len()));
    cctx.compress2(out, chunk).ok()
}

/// Decode a delta payload against `base` into `out` (exactly its
/// capacity); the number of bytes written, or `None` on any error.
pub fn delta_decompress(src: &[u8], base: &[u8], out: &mut [u8]) -> Option<usize> {
    let mut dctx = DCtx::create();
    dctx.ref_prefix(base).ok()?;
    dctx.decompress(out, src).ok()
}
