//! PPMd var. H with 7-Zip's range coder, continued from run to run: a
//! context model, 15-25% smaller than LZMA2 on text and worse on binary
//! records. Stream framing only.
//!
//! A run's bytes are the CRC-32 of its raw bytes (big-endian), then a
//! range-coded stream ended at the run's end; the next run starts a new
//! range-coded stream with the model kept. PPMd has no end of its own, so
//! the decoder checks the CRC: a model out of step or a wrong length fails
//! the run, never a wrong byte.

use std::io::{Read, Write};

use ppmd_rust::{Ppmd7Decoder, Ppmd7Encoder};

use super::engine::{Codec, CompressError, Engine};

const NAME: &str = "ppmd";

/// Model order of a `PPMd` stream (fixed by the format). Measured on the
/// Table 1 Word files' text runs (`cargo run -p wanopt-codec --release
/// --example stream_runs`): see BENCHMARKS.md.
pub const PPMD_ORDER: u32 = 8;
/// Model memory of a PPMd stream, each side (fixed by the format, so a
/// peer cannot make a decoder allocate more): the model starts afresh
/// when it is full.
pub const PPMD_MEMORY: u32 = 4 << 20;
/// Memory of a PPMd stream's decoder (and encoder): its model plus its
/// tables (rounded up).
pub const PPMD_BYTES: usize = PPMD_MEMORY as usize + (64 << 10);

/// The bytes of the PPMd run being decoded (the decoder reads through
/// it; each run's bytes replace the last one's).
#[derive(Debug, Default)]
struct RunInput {
    bytes: Vec<u8>,
    read: usize,
    /// The decoder asked for a byte past the run's.
    overrun: bool,
}

impl RunInput {
    fn set(&mut self, bytes: &[u8]) {
        self.bytes.clear();
        self.bytes.extend_from_slice(bytes);
        self.read = 0;
        self.overrun = false;
    }

    fn rest(&self) -> usize {
        self.bytes.len() - self.read
    }
}

impl Read for RunInput {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let rest = self.bytes.get(self.read..).unwrap_or_default();
        let n = rest.len().min(buf.len());
        buf[..n].copy_from_slice(&rest[..n]);
        self.read += n;
        self.overrun |= n < buf.len();
        Ok(n)
    }
}

/// A PPMd model's side of a stream.
enum Model {
    Compress(Box<Ppmd7Encoder<Vec<u8>>>),
    /// `None` until the stream's first run (the decoder reads the range
    /// coder's first bytes as it is made).
    Decompress(Option<Box<Ppmd7Decoder<RunInput>>>),
}

/// A PPMd stream, compressing or decompressing.
pub struct Ppmd {
    model: Model,
}

impl std::fmt::Debug for Ppmd {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let role = match self.model {
            Model::Compress(_) => "compress",
            Model::Decompress(_) => "decompress",
        };
        f.debug_struct("Ppmd")
            .field("role", &role)
            .finish_non_exhaustive()
    }
}

impl Ppmd {
    /// A compressing stream (a new model).
    pub fn compressor() -> Result<Self, CompressError> {
        Ok(Ppmd {
            model: Model::Compress(Self::encoder()?),
        })
    }

    /// A decompressing stream (its model is made with its first run).
    pub fn decompressor() -> Self {
        Ppmd {
            model: Model::Decompress(None),
        }
    }

    fn encoder() -> Result<Box<Ppmd7Encoder<Vec<u8>>>, CompressError> {
        Ppmd7Encoder::new(Vec::new(), PPMD_ORDER, PPMD_MEMORY)
            .map(Box::new)
            .map_err(|_| CompressError::Context(NAME))
    }
}

impl Engine for Ppmd {
    fn codec(&self) -> Codec {
        Codec::Ppmd
    }

    /// Feed all of `data` through the model and end its range-coded
    /// stream into `out` (cleared, then the run's bytes: the CRC-32 of
    /// `data`, then the range coder's); the model goes on.
    fn compress(&mut self, data: &[u8], out: &mut Vec<u8>) -> Result<usize, CompressError> {
        let Model::Compress(encoder) = &mut self.model else {
            return Err(CompressError::Unsupported(NAME));
        };
        out.clear();
        out.extend_from_slice(&crc32fast::hash(data).to_be_bytes());
        // The encoder writes straight into `out`'s buffer.
        std::mem::swap(encoder.get_mut(), out);
        let done = encoder.write_all(data).is_ok() && encoder.flush_and_restart().is_ok();
        std::mem::swap(encoder.get_mut(), out);
        match done {
            true => Ok(out.len()),
            false => Err(CompressError::Compress(NAME)),
        }
    }

    /// A run: the stream's model (a new one after a restart); the run
    /// must decode to exactly `raw_len` bytes from exactly its bytes, and
    /// match its CRC.
    fn decompress(
        &mut self,
        input: &[u8],
        raw_len: usize,
        out: &mut Vec<u8>,
    ) -> Result<(), CompressError> {
        let Model::Decompress(slot) = &mut self.model else {
            return Err(CompressError::Unsupported(NAME));
        };
        let corrupt = CompressError::Corrupt(NAME);
        let (crc, bytes) = input.split_first_chunk::<4>().ok_or(corrupt)?;
        let decoder = match slot {
            Some(decoder) => {
                decoder.get_mut().set(bytes);
                decoder.restart().map_err(|_| corrupt)?;
                decoder
            }
            None => {
                let mut run = RunInput::default();
                run.set(bytes);
                let decoder =
                    Ppmd7Decoder::new(run, PPMD_ORDER, PPMD_MEMORY).map_err(|_| corrupt)?;
                slot.insert(Box::new(decoder))
            }
        };
        let start = out.len();
        out.resize(start + raw_len, 0);
        let read = decoder.read_exact(&mut out[start..]);
        // All of the run read, nothing past it, the bytes the encoder
        // sent.
        let run = decoder.get_ref();
        match read.is_ok()
            && run.rest() == 0
            && !run.overrun
            && crc32fast::hash(&out[start..]) == u32::from_be_bytes(*crc)
        {
            true => Ok(()),
            false => {
                out.truncate(start);
                Err(corrupt)
            }
        }
    }

    /// A PPMd model cannot be reset: a new one is made (the decoder's with
    /// the next run).
    fn restart(&mut self) -> Result<(), CompressError> {
        match &mut self.model {
            Model::Compress(encoder) => *encoder = Self::encoder()?,
            Model::Decompress(slot) => *slot = None,
        }
        Ok(())
    }

    fn state_bytes(&self) -> usize {
        PPMD_BYTES
    }
}
