//! The flow's chunker, and the bytes it holds (the chunk being cut) that
//! went out ahead as `Piece`s: each chunk it cuts comes with how many of
//! its first bytes were sent so.

use crate::chunker::{Chunker, ChunkerConfig, ChunkerConfigError, StreamChunker};

/// The flow's chunker and the held bytes sent as pieces.
#[derive(Debug)]
pub(super) struct Chunking {
    chunker: StreamChunker,
    /// How many of the chunker's held bytes went out as `Piece`s.
    pieces_sent: usize,
}

impl Chunking {
    /// A chunker for a new flow.
    pub(super) fn new(config: ChunkerConfig) -> Result<Self, ChunkerConfigError> {
        Ok(Chunking {
            chunker: StreamChunker::new(Chunker::new(config)?),
            pieces_sent: 0,
        })
    }

    /// Feed `input`: `on_chunk(chunk, sent)` for every chunk now decided,
    /// `sent` of its first bytes having gone out as pieces.
    pub(super) fn push(&mut self, input: &[u8], mut on_chunk: impl FnMut(&[u8], usize)) {
        let pieces_sent = &mut self.pieces_sent;
        self.chunker.push(input, |chunk| {
            on_chunk(chunk, take_sent(pieces_sent, chunk))
        });
    }

    /// Hand out every held byte as chunks, as [`Chunking::push`] does.
    pub(super) fn flush(&mut self, mut on_chunk: impl FnMut(&[u8], usize)) {
        let pieces_sent = &mut self.pieces_sent;
        self.chunker
            .flush(|chunk| on_chunk(chunk, take_sent(pieces_sent, chunk)));
    }

    /// The bytes held (the chunk being cut).
    pub(super) fn held(&self) -> &[u8] {
        self.chunker.pending()
    }

    /// How many of them went out as pieces.
    pub(super) fn pieces_sent(&self) -> usize {
        self.pieces_sent
    }

    /// How many did not.
    pub(super) fn unsent_len(&self) -> usize {
        self.chunker.pending_len() - self.pieces_sent
    }

    /// Those that did not.
    pub(super) fn unsent(&self) -> &[u8] {
        &self.chunker.pending()[self.pieces_sent..]
    }

    /// All the held bytes went out as pieces.
    pub(super) fn mark_sent(&mut self) {
        self.pieces_sent = self.chunker.pending_len();
    }
}

/// Of the pieces sent, those that `chunk` begins with.
fn take_sent(pieces_sent: &mut usize, chunk: &[u8]) -> usize {
    let sent = (*pieces_sent).min(chunk.len());
    *pieces_sent -= sent;
    sent
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::encoder::tests::noise;

    #[test]
    fn each_chunk_comes_with_the_bytes_of_it_sent_as_pieces() {
        let config = ChunkerConfig::default();
        let data = noise(4 * config.max, 1);
        let mut chunking = Chunking::new(config).unwrap();
        let mut chunks = Vec::new();
        chunking.push(&data[..100], |chunk, sent| chunks.push((chunk.len(), sent)));
        assert!(chunks.is_empty());
        assert_eq!(chunking.unsent(), &data[..100]);
        chunking.mark_sent();
        assert_eq!((chunking.pieces_sent(), chunking.unsent_len()), (100, 0));
        chunking.push(&data[100..300], |chunk, sent| {
            chunks.push((chunk.len(), sent))
        });
        assert_eq!(chunking.unsent(), &data[100..300]);
        assert_eq!(chunking.held(), &data[..300]);
        chunking.push(&data[300..], |chunk, sent| chunks.push((chunk.len(), sent)));
        chunking.flush(|chunk, sent| chunks.push((chunk.len(), sent)));
        // The first chunk began with the 100 bytes sent; no other did.
        assert!(chunks[0].0 >= 300);
        assert_eq!(chunks[0].1, 100);
        assert!(chunks[1..].iter().all(|&(_, sent)| sent == 0));
        assert_eq!(
            chunks.iter().map(|&(len, _)| len).sum::<usize>(),
            data.len()
        );
        assert_eq!(chunking.pieces_sent(), 0);
    }
}
