//! LZ4 block format: a few hundred MB/s per core, for links the CPU does
//! not outrun. Block framing only.

use super::engine::{Codec, CompressError, Engine};

/// The LZ4 engine (no state).
#[derive(Debug, Clone, Copy, Default)]
pub struct Lz4;

const NAME: &str = "lz4";

impl Engine for Lz4 {
    fn codec(&self) -> Codec {
        Codec::Lz4
    }

    fn compress(&mut self, data: &[u8], out: &mut Vec<u8>) -> Result<usize, CompressError> {
        let max = lz4_flex::block::get_maximum_output_size(data.len());
        if out.len() < max {
            out.resize(max, 0);
        }
        lz4_flex::block::compress_into(data, out).map_err(|_| CompressError::Compress(NAME))
    }

    fn decompress(
        &mut self,
        input: &[u8],
        raw_len: usize,
        out: &mut Vec<u8>,
    ) -> Result<(), CompressError> {
        let start = out.len();
        out.resize(start + raw_len, 0);
        match lz4_flex::block::decompress_into(input, &mut out[start..]) {
            Ok(n) if n == raw_len => Ok(()),
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
