//! The tunnel's QUIC packets carried on a TCP connection, for networks
//! that block or police UDP.
//!
//! The edge opens the connection with [`PREAMBLE`]; then each side sends
//! QUIC packets, each as a frame: its length (two bytes, big-endian,
//! never zero) and its bytes. QUIC itself (TLS 1.3 with pinned keys)
//! protects what the frames carry, exactly as on UDP.
//!
//! ```
//! use wanopt_proto::carrier::{encode, Deframer};
//!
//! let mut wire = Vec::new();
//! encode(b"first", &mut wire).unwrap();
//! encode(b"second", &mut wire).unwrap();
//! let mut deframer = Deframer::default();
//! deframer.extend(&wire[..4]);
//! assert_eq!(deframer.next_frame().unwrap(), None);
//! deframer.extend(&wire[4..]);
//! assert_eq!(deframer.next_frame().unwrap().as_deref(), Some(&b"first"[..]));
//! assert_eq!(deframer.next_frame().unwrap().as_deref(), Some(&b"second"[..]));
//! assert_eq!(deframer.next_frame().unwrap(), None);
//! ```

use bytes::{Buf, Bytes, BytesMut};

/// What the edge sends first on the connection: a core reading anything
/// else closes it.
pub const PREAMBLE: &[u8; 8] = b"wanopt/1";

/// Bytes of a frame's length.
pub const LENGTH_BYTES: usize = 2;

/// The largest packet a frame carries.
pub const MAX_FRAME: usize = u16::MAX as usize;

/// Why a frame cannot be written or read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum CarrierError {
    /// A packet of zero bytes (never sent: a zero length is an error).
    #[error("empty frame")]
    Empty,
    /// A packet longer than [`MAX_FRAME`].
    #[error("frame of {0} bytes (at most {MAX_FRAME})")]
    TooLong(usize),
}

/// Appends `packet` as one frame to `out`.
pub fn encode(packet: &[u8], out: &mut Vec<u8>) -> Result<(), CarrierError> {
    if packet.is_empty() {
        return Err(CarrierError::Empty);
    }
    let len = u16::try_from(packet.len()).map_err(|_| CarrierError::TooLong(packet.len()))?;
    out.extend_from_slice(&len.to_be_bytes());
    out.extend_from_slice(packet);
    Ok(())
}

/// Turns the bytes read from the connection, in whatever pieces they
/// arrive, back into packets.
#[derive(Debug, Default)]
pub struct Deframer {
    buffer: BytesMut,
}

impl Deframer {
    /// Adds bytes read from the connection.
    pub fn extend(&mut self, bytes: &[u8]) {
        self.buffer.extend_from_slice(bytes);
    }

    /// Bytes held that are not yet a whole frame (or not yet taken).
    pub fn buffered(&self) -> usize {
        self.buffer.len()
    }

    /// The next whole packet, `None` until one is there; an error for a
    /// zero length (the stream is not a carrier's: close it).
    pub fn next_frame(&mut self) -> Result<Option<Bytes>, CarrierError> {
        let Some(head) = self.buffer.get(..LENGTH_BYTES) else {
            return Ok(None);
        };
        let len = usize::from(u16::from_be_bytes([head[0], head[1]]));
        if len == 0 {
            return Err(CarrierError::Empty);
        }
        if self.buffer.len() < LENGTH_BYTES + len {
            return Ok(None);
        }
        self.buffer.advance(LENGTH_BYTES);
        Ok(Some(self.buffer.split_to(len).freeze()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn zero_and_oversized_packets_are_refused() {
        let mut out = Vec::new();
        assert_eq!(encode(b"", &mut out), Err(CarrierError::Empty));
        assert_eq!(
            encode(&vec![0; MAX_FRAME + 1], &mut out),
            Err(CarrierError::TooLong(MAX_FRAME + 1))
        );
        assert!(out.is_empty());
        encode(&vec![7; MAX_FRAME], &mut out).unwrap();
        assert_eq!(out.len(), MAX_FRAME + LENGTH_BYTES);
        let mut deframer = Deframer::default();
        deframer.extend(&[0, 0, 1]);
        assert_eq!(deframer.next_frame(), Err(CarrierError::Empty));
    }

    proptest! {
        /// Packets framed and read back in arbitrary pieces come out whole
        /// and in order, and nothing is left over.
        #[test]
        fn frames_survive_any_split(
            packets in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 1..3000), 0..20),
            cuts in proptest::collection::vec(1usize..5000, 0..20),
        ) {
            let mut wire = Vec::new();
            for p in &packets {
                encode(p, &mut wire).unwrap();
            }
            let mut deframer = Deframer::default();
            let mut got = Vec::new();
            let mut rest = &wire[..];
            for cut in cuts.iter().chain(std::iter::once(&usize::MAX)) {
                let (piece, after) = rest.split_at((*cut).min(rest.len()));
                deframer.extend(piece);
                while let Some(frame) = deframer.next_frame().unwrap() {
                    got.push(frame.to_vec());
                }
                rest = after;
            }
            prop_assert_eq!(got, packets);
            prop_assert_eq!(deframer.buffered(), 0);
        }
    }
}
