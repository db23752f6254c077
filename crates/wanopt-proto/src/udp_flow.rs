//! UDP flows through the tunnel: the payload of the QUIC DATAGRAM frames
//! (RFC 9221) that carry a UDP flow's datagrams, how a datagram larger than
//! one frame is cut into fragments and put together again, and the
//! receiver's count of what a flow lost and reordered.
//!
//! Every frame starts with a header (big-endian):
//!
//! ```text
//! flow   varint (RFC 9000 §16, 1-8 bytes): the flow's id (its tunnel stream's
//!        index, the stream id / 4)
//! seq    u32: the flow's datagram number in this direction, from 0 (wraps)
//! frag   u8: 0x00 a whole datagram; else (index << 4) | (count - 1), with
//!        2 <= count <= 16 and index < count
//! ...    the UDP payload, or this fragment's share of it
//! ```
//!
//! The header costs 6 bytes for a tunnel's first 64 flows. A UDP payload
//! larger than one frame is sent as up to [`MAX_FRAGMENTS`] fragments of the
//! same `seq` ([`split`]); the receiver's [`Reassembler`] holds incomplete
//! ones within fixed bounds and drops them after [`REASSEMBLY_TIMEOUT`]. A
//! datagram that needs more fragments is refused ([`TooLarge`]), as an IP
//! router refuses what it may not fragment.

mod reassembly;
mod seq;

pub use reassembly::{Reassembler, ReassemblyStats, REASSEMBLY_TIMEOUT};
pub use seq::{SeqCounter, SeqStats, SEQ_WINDOW};

use thiserror::Error;

/// Most fragments of one datagram.
pub const MAX_FRAGMENTS: usize = 16;
/// The largest flow id a varint can carry (2^62 - 1).
pub const MAX_FLOW: u64 = (1 << 62) - 1;
/// Header bytes after the flow id: `seq` and `frag`.
const FIXED_LEN: usize = 5;

/// Why bytes are not a UDP flow datagram.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum FlowDatagramError {
    /// Fewer bytes than the header.
    #[error("udp flow datagram of {0} bytes is shorter than its header")]
    Short(usize),
    /// A fragment field outside the grammar (a count of 1, an index past
    /// the count).
    #[error(
        "udp flow datagram with fragment field {0:#04x} (index must be below a count of 2 to 16)"
    )]
    Fragment(u8),
}

/// A datagram that cannot be sent in [`MAX_FRAGMENTS`] frames.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
#[error("udp datagram of {len} bytes needs more than {MAX_FRAGMENTS} frames of {frame} bytes")]
pub struct TooLarge {
    /// The payload's length.
    pub len: usize,
    /// The largest frame the tunnel could send.
    pub frame: usize,
}

/// Which piece of a datagram a frame carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fragment {
    /// The piece's place, from 0.
    pub index: u8,
    /// How many pieces the datagram was cut into (2 to [`MAX_FRAGMENTS`]).
    pub count: u8,
}

impl Fragment {
    fn from_byte(byte: u8) -> Result<Option<Fragment>, FlowDatagramError> {
        if byte == 0 {
            return Ok(None);
        }
        let (index, count) = (byte >> 4, (byte & 0x0F) + 1);
        if count < 2 || index >= count {
            return Err(FlowDatagramError::Fragment(byte));
        }
        Ok(Some(Fragment { index, count }))
    }

    fn to_byte(fragment: Option<Fragment>) -> u8 {
        fragment.map_or(0, |f| (f.index << 4) | (f.count - 1))
    }
}

/// A checked view of a UDP flow datagram in a buffer.
#[derive(Debug, Clone)]
pub struct FlowDatagram<T: AsRef<[u8]>> {
    buffer: T,
    repr: FlowDatagramRepr,
    header_len: usize,
}

impl<T: AsRef<[u8]>> FlowDatagram<T> {
    /// Wraps `buffer` after checking the header.
    pub fn new_checked(buffer: T) -> Result<Self, FlowDatagramError> {
        let bytes = buffer.as_ref();
        let (flow, varint_len) = read_varint(bytes).ok_or(FlowDatagramError::Short(bytes.len()))?;
        let fixed = bytes
            .get(varint_len..varint_len + FIXED_LEN)
            .ok_or(FlowDatagramError::Short(bytes.len()))?;
        let seq = u32::from_be_bytes([fixed[0], fixed[1], fixed[2], fixed[3]]);
        let fragment = Fragment::from_byte(fixed[4])?;
        Ok(FlowDatagram {
            buffer,
            repr: FlowDatagramRepr {
                flow,
                seq,
                fragment,
            },
            header_len: varint_len + FIXED_LEN,
        })
    }

    /// The header's fields.
    pub fn repr(&self) -> FlowDatagramRepr {
        self.repr
    }

    /// The flow's id.
    pub fn flow(&self) -> u64 {
        self.repr.flow
    }

    /// The datagram's number.
    pub fn seq(&self) -> u32 {
        self.repr.seq
    }

    /// The piece this frame carries, `None` for a whole datagram.
    pub fn fragment(&self) -> Option<Fragment> {
        self.repr.fragment
    }

    /// The UDP payload, or this fragment's share of it.
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[self.header_len..]
    }
}

/// The header of a UDP flow datagram.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FlowDatagramRepr {
    /// The flow's id, at most [`MAX_FLOW`].
    pub flow: u64,
    /// The datagram's number in this direction.
    pub seq: u32,
    /// The piece this frame carries, `None` for a whole datagram.
    pub fragment: Option<Fragment>,
}

impl FlowDatagramRepr {
    /// The header's length on the wire.
    pub fn header_len(&self) -> usize {
        varint_len(self.flow) + FIXED_LEN
    }

    /// Appends the header to `out` (the payload follows it).
    ///
    /// # Panics
    /// If `flow` is above [`MAX_FLOW`] or the fragment is outside the
    /// grammar: both are the sender's own values, never the network's.
    pub fn emit(&self, out: &mut Vec<u8>) {
        assert!(self.flow <= MAX_FLOW, "flow id {} too large", self.flow);
        if let Some(f) = self.fragment {
            assert!(
                (2..=MAX_FRAGMENTS as u8).contains(&f.count) && f.index < f.count,
                "fragment {f:?}"
            );
        }
        write_varint(self.flow, out);
        out.extend_from_slice(&self.seq.to_be_bytes());
        out.push(Fragment::to_byte(self.fragment));
    }
}

/// Cuts `payload`, datagram `seq` of `flow`, into frames of at most `frame`
/// bytes and appends them to `out`: one whole datagram when it fits, else
/// up to [`MAX_FRAGMENTS`] fragments of equal size but the last. Returns
/// how many frames it appended.
pub fn split(
    flow: u64,
    seq: u32,
    payload: &[u8],
    frame: usize,
    out: &mut Vec<Vec<u8>>,
) -> Result<usize, TooLarge> {
    let whole = FlowDatagramRepr {
        flow,
        seq,
        fragment: None,
    };
    let header = whole.header_len();
    let too_large = TooLarge {
        len: payload.len(),
        frame,
    };
    if header + payload.len() <= frame {
        let mut datagram = Vec::with_capacity(header + payload.len());
        whole.emit(&mut datagram);
        datagram.extend_from_slice(payload);
        out.push(datagram);
        return Ok(1);
    }
    let piece = frame
        .checked_sub(header)
        .filter(|p| *p > 0)
        .ok_or(too_large)?;
    let count = payload.len().div_ceil(piece);
    if count > MAX_FRAGMENTS {
        return Err(too_large);
    }
    for (index, share) in payload.chunks(piece).enumerate() {
        let repr = FlowDatagramRepr {
            fragment: Some(Fragment {
                index: index as u8,
                count: count as u8,
            }),
            ..whole
        };
        let mut datagram = Vec::with_capacity(header + share.len());
        repr.emit(&mut datagram);
        datagram.extend_from_slice(share);
        out.push(datagram);
    }
    Ok(count)
}

/// The length of `value` as an RFC 9000 varint.
fn varint_len(value: u64) -> usize {
    match value {
        0..=0x3F => 1,
        0x40..=0x3FFF => 2,
        0x4000..=0x3FFF_FFFF => 4,
        _ => 8,
    }
}

/// Appends `value` (at most [`MAX_FLOW`]) as an RFC 9000 §16 varint.
fn write_varint(value: u64, out: &mut Vec<u8>) {
    match varint_len(value) {
        1 => out.push(value as u8),
        2 => out.extend_from_slice(&(value as u16 | 0x4000).to_be_bytes()),
        4 => out.extend_from_slice(&(value as u32 | 0x8000_0000).to_be_bytes()),
        _ => out.extend_from_slice(&(value | 0xC000_0000_0000_0000).to_be_bytes()),
    }
}

/// Reads an RFC 9000 §16 varint from the start of `bytes`: its value and
/// length, `None` when `bytes` ends inside it.
fn read_varint(bytes: &[u8]) -> Option<(u64, usize)> {
    let first = *bytes.first()?;
    let len = 1usize << (first >> 6);
    let raw = bytes.get(..len)?;
    let mut value = u64::from(first & 0x3F);
    for byte in &raw[1..] {
        value = (value << 8) | u64::from(*byte);
    }
    Some((value, len))
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn header_layout() {
        let mut out = Vec::new();
        FlowDatagramRepr {
            flow: 5,
            seq: 0x0102_0304,
            fragment: Some(Fragment { index: 2, count: 3 }),
        }
        .emit(&mut out);
        assert_eq!(out, [0x05, 0x01, 0x02, 0x03, 0x04, 0x22]);
        out.clear();
        FlowDatagramRepr {
            flow: 300,
            seq: 7,
            fragment: None,
        }
        .emit(&mut out);
        assert_eq!(out, [0x41, 0x2C, 0, 0, 0, 7, 0]);
        out.extend_from_slice(b"abc");
        let view = FlowDatagram::new_checked(&out[..]).unwrap();
        assert_eq!((view.flow(), view.seq(), view.fragment()), (300, 7, None));
        assert_eq!(view.payload(), b"abc");
    }

    #[test]
    fn bad_headers_are_errors() {
        assert_eq!(
            FlowDatagram::new_checked(&[][..]).unwrap_err(),
            FlowDatagramError::Short(0)
        );
        // A 4-byte varint cut short, then a header without its frag byte.
        assert!(FlowDatagram::new_checked(&[0x80, 1][..]).is_err());
        assert!(FlowDatagram::new_checked(&[1, 0, 0, 0, 0][..]).is_err());
        // A count of 1, and an index at the count.
        assert_eq!(
            FlowDatagram::new_checked(&[1, 0, 0, 0, 0, 0x10][..]).unwrap_err(),
            FlowDatagramError::Fragment(0x10)
        );
        assert!(FlowDatagram::new_checked(&[1, 0, 0, 0, 0, 0x32][..]).is_err());
        assert!(FlowDatagram::new_checked(&[1, 0, 0, 0, 0, 0xFF][..]).is_ok());
        // An empty payload is a datagram (UDP allows it).
        let view = FlowDatagram::new_checked(&[1, 0, 0, 0, 9, 0][..]).unwrap();
        assert!(view.payload().is_empty());
    }

    #[test]
    fn split_fits_the_frame_or_refuses() {
        let mut out = Vec::new();
        assert_eq!(split(1, 0, &[7; 100], 106, &mut out), Ok(1));
        assert_eq!(out[0].len(), 106);
        out.clear();
        // 101 bytes in 106-byte frames: two pieces of 100 and 1.
        assert_eq!(split(1, 0, &[7; 101], 106, &mut out), Ok(2));
        assert_eq!(
            out.iter().map(Vec::len).collect::<Vec<_>>(),
            [106, 7],
            "{out:?}"
        );
        out.clear();
        assert_eq!(split(1, 0, &[7; 1600], 106, &mut out), Ok(16));
        assert_eq!(
            split(1, 0, &[7; 1601], 106, &mut out),
            Err(TooLarge {
                len: 1601,
                frame: 106
            })
        );
        assert!(split(1, 0, &[7; 10], 6, &mut out).is_err());
    }

    proptest! {
        #[test]
        fn varints_round_trip(value in 0..=MAX_FLOW) {
            let mut out = Vec::new();
            write_varint(value, &mut out);
            prop_assert_eq!(out.len(), varint_len(value));
            prop_assert_eq!(read_varint(&out), Some((value, out.len())));
        }

        #[test]
        fn headers_round_trip(
            flow in 0..=MAX_FLOW,
            seq: u32,
            fragment in proptest::option::of((2u8..=16).prop_flat_map(|c| (0..c, Just(c)))),
            payload in proptest::collection::vec(any::<u8>(), 0..64),
        ) {
            let repr = FlowDatagramRepr {
                flow,
                seq,
                fragment: fragment.map(|(index, count)| Fragment { index, count }),
            };
            let mut out = Vec::new();
            repr.emit(&mut out);
            prop_assert_eq!(out.len(), repr.header_len());
            out.extend_from_slice(&payload);
            let view = FlowDatagram::new_checked(&out[..]).unwrap();
            prop_assert_eq!(view.repr(), repr);
            prop_assert_eq!(view.payload(), &payload[..]);
        }
    }
}
