//! Raw LZMA2 continued from run to run, each run ended by a sync flush:
//! slower to compress than zstd (2-4 MB/s per core) and 7-20% smaller on
//! office documents. Stream framing only.

use liblzma::stream::{Action, Filters, LzmaOptions, Status, Stream};

use super::engine::{Codec, CompressError, Engine, Role, STREAM_WINDOW_LOG};

const NAME: &str = "lzma2";

/// Memory of an LZMA2 stream's compressor at presets 4-9 (binary-tree
/// match finder, 1 MiB dictionary), as `xz -vv` reports it (rounded up to
/// a MiB; the binding does not report a raw encoder's use).
pub const LZMA_ENCODER_BYTES: usize = 13 << 20;

/// Memory of an LZMA2 stream's decoder: its dictionary plus about 30 KiB
/// of state (liblzma does not report a raw decoder's use through the
/// binding; `xz -vv` rounds it up to 2 MiB).
pub const LZMA_DECODER_BYTES: usize = (1 << STREAM_WINDOW_LOG) + (32 << 10);

/// The LZMA2 settings of a `StreamRun` stream as the decoder needs them:
/// only the dictionary matters to it, and this format fixes it (the
/// encoder may pick any preset).
pub fn lzma_options(preset: u32) -> Option<Filters> {
    let mut options = LzmaOptions::new_preset(preset).ok()?;
    options.dict_size(1 << STREAM_WINDOW_LOG);
    let mut filters = Filters::new();
    filters.lzma2(&options);
    Some(filters)
}

/// A raw LZMA2 stream, compressing at a preset or decompressing.
pub struct Lzma2 {
    /// The preset when compressing.
    preset: Option<u32>,
    stream: Stream,
}

impl std::fmt::Debug for Lzma2 {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lzma2")
            .field("preset", &self.preset)
            .finish_non_exhaustive()
    }
}

impl Lzma2 {
    /// A stream engine for `role` (a compressor's level is its preset,
    /// 0-9).
    pub fn new(role: Role) -> Result<Self, CompressError> {
        let preset = match role {
            Role::Compress { level } => {
                Some(u32::try_from(level).map_err(|_| CompressError::Context(NAME))?)
            }
            Role::Decompress => None,
        };
        Ok(Lzma2 {
            preset,
            stream: Self::stream(preset)?,
        })
    }

    fn stream(preset: Option<u32>) -> Result<Stream, CompressError> {
        let context = || CompressError::Context(NAME);
        match preset {
            Some(preset) => Stream::new_raw_encoder(&lzma_options(preset).ok_or_else(context)?)
                .map_err(|_| context()),
            // The preset does not matter to a decoder; the dictionary is
            // the format's.
            None => Stream::new_raw_decoder(&lzma_options(6).ok_or_else(context)?)
                .map_err(|_| context()),
        }
    }
}

impl Engine for Lzma2 {
    fn codec(&self) -> Codec {
        Codec::Lzma
    }

    fn compress(&mut self, data: &[u8], out: &mut Vec<u8>) -> Result<usize, CompressError> {
        if self.preset.is_none() {
            return Err(CompressError::Unsupported(NAME));
        }
        out.clear();
        match flushed(&mut self.stream, data, out) {
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
        if self.preset.is_some() {
            return Err(CompressError::Unsupported(NAME));
        }
        let start = out.len();
        // One byte of room past the run: a stream that holds more than
        // the run's lengths say shows there.
        out.resize(start + raw_len + 1, 0);
        match stream_decode(&mut self.stream, input, &mut out[start..], raw_len) {
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

    /// A raw LZMA2 stream cannot be reset: a new one is made.
    fn restart(&mut self) -> Result<(), CompressError> {
        self.stream = Self::stream(self.preset)?;
        Ok(())
    }

    fn state_bytes(&self) -> usize {
        match self.preset {
            Some(_) => LZMA_ENCODER_BYTES,
            None => LZMA_DECODER_BYTES,
        }
    }
}

/// Feed all of `data` through an LZMA2 stream and sync-flush it into
/// `out` (appended): liblzma says the flush is complete with
/// `StreamEnd`, and the stream goes on after it.
fn flushed(stream: &mut Stream, data: &[u8], out: &mut Vec<u8>) -> bool {
    let start = stream.total_in();
    // LZMA2 stores an incompressible chunk with 3 bytes per 64 KiB.
    out.reserve(data.len() + data.len() / 1024 + 64);
    loop {
        let consumed = (stream.total_in() - start) as usize;
        let (read, written) = (stream.total_in(), out.len());
        match stream.process_vec(&data[consumed..], out, Action::SyncFlush) {
            Ok(Status::StreamEnd) => return stream.total_in() - start == data.len() as u64,
            Ok(_) => {}
            Err(_) => return false,
        }
        if out.len() == out.capacity() {
            out.reserve(64 << 10);
        } else if (stream.total_in(), out.len()) == (read, written) {
            // Room to write and still no progress.
            return false;
        }
    }
}

/// Continue an LZMA2 stream: decode `input` into `out` (room for `raw` + 1
/// bytes); returns (bytes read, bytes written), stopping once more than
/// `raw` came out or nothing moves. The end of the LZMA2 stream (its end
/// marker) is an error here: runs only ever flush.
fn stream_decode(
    stream: &mut Stream,
    input: &[u8],
    out: &mut [u8],
    raw: usize,
) -> Result<(usize, usize), CompressError> {
    let (in0, out0) = (stream.total_in(), stream.total_out());
    let moved = |stream: &Stream| {
        (
            (stream.total_in() - in0) as usize,
            (stream.total_out() - out0) as usize,
        )
    };
    loop {
        let (read, written) = moved(stream);
        let status = stream
            .process(&input[read..], &mut out[written..], Action::Run)
            .map_err(|_| CompressError::Corrupt(NAME))?;
        let now = moved(stream);
        if status == Status::StreamEnd {
            return Err(CompressError::Corrupt(NAME));
        }
        if now.1 > raw || now == (read, written) {
            return Ok(now);
        }
    }
}
