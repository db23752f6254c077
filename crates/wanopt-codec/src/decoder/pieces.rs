//! A chunk delivered ahead in pieces: its bytes are delivered as they
//! come and held until the chunk is complete, cut by a `Piece` or
//! completed by a `PieceRef`, a delta after pieces, or (after a
//! `PieceRest`) the next literal's or run's first chunk; the whole chunk
//! is then stored like a literal.

use crate::chunker::MAX_CHUNK_LEN;
use crate::frame::Payload;

use super::error::DecodeError;

/// The pieces of the chunk being assembled.
#[derive(Debug, Default)]
pub(super) struct Pieces {
    /// Bytes delivered as `Piece`s whose chunk is not cut yet.
    held: Vec<u8>,
    /// After a `PieceRest`: the length of the chunk the pieces begin,
    /// whose rest is the next literal's or run's first chunk.
    rest: Option<u32>,
}

impl Pieces {
    /// Whether no bytes are held.
    pub(super) fn is_empty(&self) -> bool {
        self.held.is_empty()
    }

    /// Whether a `PieceRest` said the next literal or run completes them.
    pub(super) fn awaits_rest(&self) -> bool {
        self.rest.is_some()
    }

    /// A chunk of `raw_len` bytes that completes the held pieces must be
    /// longer than them.
    pub(super) fn check_completes(&self, raw_len: u32) -> Result<(), DecodeError> {
        let held = self.held.len();
        if held == 0 || held >= raw_len as usize {
            return Err(DecodeError::PieceOrder);
        }
        Ok(())
    }

    /// A `PieceRest`: the next literal's or run's first chunk completes
    /// the pieces into a chunk of `len` bytes.
    pub(super) fn expect_rest(&mut self, len: u32) -> Result<(), DecodeError> {
        self.check_completes(len)?;
        self.rest = Some(len);
        Ok(())
    }

    /// After a `PieceRest`, the next literal's or run's first chunk
    /// (`first_len` bytes) must be what the pieces lack of the chunk's
    /// length.
    pub(super) fn check_rest(&self, first_len: usize) -> Result<(), DecodeError> {
        match self.rest {
            Some(len) if self.held.len() + first_len != len as usize => {
                Err(DecodeError::PieceOrder)
            }
            _ => Ok(()),
        }
    }

    /// Decode a piece after the held bytes (no chunk is longer than
    /// [`MAX_CHUNK_LEN`]); returns its bytes.
    pub(super) fn append(&mut self, payload: Payload<'_>) -> Result<&[u8], DecodeError> {
        let held = self.held.len();
        if held + payload.raw_len as usize > MAX_CHUNK_LEN {
            return Err(DecodeError::PieceOrder);
        }
        payload.decode_into(&mut self.held)?;
        Ok(&self.held[held..])
    }

    /// Cut the first `cut` held bytes off as a chunk (`None` for 0); the
    /// rest begins the next chunk.
    pub(super) fn cut(&mut self, cut: u32) -> Result<Option<Vec<u8>>, DecodeError> {
        let cut = cut as usize;
        if cut > self.held.len() {
            return Err(DecodeError::PieceOrder);
        }
        Ok((cut > 0).then(|| self.held.drain(..cut).collect()))
    }

    /// `chunk` is the chunk the held pieces begin (checked with
    /// [`Pieces::check_completes`]): they must be its first bytes. Lets
    /// them go and returns how many they were.
    pub(super) fn complete(&mut self, chunk: &[u8]) -> Result<usize, DecodeError> {
        let held = self.held.len();
        if chunk[..held] != self.held[..] {
            return Err(DecodeError::PieceOrder);
        }
        self.held.clear();
        Ok(held)
    }

    /// The held pieces, let go: what was delivered of a chunk that could
    /// not be had.
    pub(super) fn take(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.held)
    }

    /// After a `PieceRest`: the chunk the held pieces and `first` (checked
    /// with [`Pieces::check_rest`]) make, the pieces let go. `None`
    /// otherwise.
    pub(super) fn join_rest(&mut self, first: &[u8]) -> Option<Vec<u8>> {
        self.rest.take()?;
        let mut chunk = std::mem::take(&mut self.held);
        chunk.extend_from_slice(first);
        Some(chunk)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compress::Codec;

    fn raw(bytes: &[u8]) -> Payload<'_> {
        Payload {
            codec: Codec::Raw,
            raw_len: bytes.len() as u32,
            bytes,
        }
    }

    #[test]
    fn pieces_are_held_until_a_cut_and_the_rest_begins_the_next_chunk() {
        let mut pieces = Pieces::default();
        assert_eq!(pieces.append(raw(b"GET / ")).unwrap(), b"GET / ");
        assert_eq!(pieces.append(raw(b"HTTP")).unwrap(), b"HTTP");
        assert_eq!(pieces.cut(0), Ok(None));
        assert_eq!(pieces.cut(11), Err(DecodeError::PieceOrder));
        assert_eq!(pieces.cut(4), Ok(Some(b"GET ".to_vec())));
        assert!(!pieces.is_empty());
        assert_eq!(pieces.take(), b"/ HTTP");
        assert!(pieces.is_empty());
    }

    #[test]
    fn no_chunk_of_pieces_is_longer_than_a_chunk_can_be() {
        let mut pieces = Pieces::default();
        let big = vec![7; MAX_CHUNK_LEN];
        pieces.append(raw(&big)).unwrap();
        assert_eq!(pieces.append(raw(b"x")), Err(DecodeError::PieceOrder));
    }

    #[test]
    fn a_chunk_completes_the_pieces_only_when_longer_and_beginning_with_them() {
        let mut pieces = Pieces::default();
        assert_eq!(pieces.check_completes(10), Err(DecodeError::PieceOrder));
        pieces.append(raw(b"abcd")).unwrap();
        assert_eq!(pieces.check_completes(4), Err(DecodeError::PieceOrder));
        assert_eq!(pieces.check_completes(5), Ok(()));
        assert_eq!(pieces.complete(b"abXde"), Err(DecodeError::PieceOrder));
        assert_eq!(pieces.complete(b"abcde"), Ok(4));
        assert!(pieces.is_empty());
    }

    #[test]
    fn after_a_piece_rest_the_next_first_chunk_makes_the_length_said() {
        let mut pieces = Pieces::default();
        // Without pieces, or no longer than them: out of order.
        assert_eq!(pieces.expect_rest(3), Err(DecodeError::PieceOrder));
        assert_eq!(pieces.join_rest(b"abc"), None);
        pieces.append(raw(b"abc")).unwrap();
        assert_eq!(pieces.expect_rest(3), Err(DecodeError::PieceOrder));
        pieces.expect_rest(5).unwrap();
        assert!(pieces.awaits_rest());
        assert_eq!(pieces.check_rest(3), Err(DecodeError::PieceOrder));
        assert_eq!(pieces.check_rest(2), Ok(()));
        assert_eq!(pieces.join_rest(b"de"), Some(b"abcde".to_vec()));
        assert!(!pieces.awaits_rest() && pieces.is_empty());
        // No rest expected: any length goes.
        assert_eq!(pieces.check_rest(3), Ok(()));
    }
}
