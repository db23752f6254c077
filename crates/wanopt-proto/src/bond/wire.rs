//! The bond's two datagrams: every datagram a bonded peer sends wears a data
//! header (which path, its place in the peer's order and in the path's), and
//! each path's receiver answers on the same path with acks.
//!
//! ```text
//! data  0x29 | flags:4 path:4 | gseq u32 | pseq u32 | tx_us u32 | inner
//! ack   0x2A | path u8 | largest u32 | received u32 | ack_delay u16
//!            | sack u64
//! ```
//!
//! - `flags` (the high nibble): bit 0 (0x10) HOLD_EXEMPT, the inner datagram
//!   skips the receiver's reorder buffer (a real-time flow's: late is worse
//!   than out of order); bit 1 (0x20) REINJECTED, a copy sent again on
//!   another path after its first path stalled; bit 2 (0x40) ALONE, no
//!   other path had data in flight or queued when it was sent (so every
//!   datagram before it has arrived or is lost: the receiver need not wait
//!   for a gap before it); bit 3 is 0.
//! - `path`: the path's number, 1 to 15, as the path probes count them.
//! - `gseq`: the sender's order over all paths (per peer and direction):
//!   the receiver hands inner datagrams on in this order and drops a second
//!   copy of one.
//! - `pseq`: the path's own sequence number, which its acks and loss
//!   detection count.
//! - `tx_us`: the sender's clock in µs (wraps) when the datagram took its
//!   place in the order (or was queued again on another path). The
//!   receiver compares arrival minus `tx_us` between paths: the difference
//!   is how far one path's datagrams run behind another's, queues at the
//!   sender included, with no clock synchronisation.
//! - Ack `largest`: the highest pseq received on the path; `received`: how
//!   many data datagrams the path has delivered so far (wrapping);
//!   `ack_delay`: time from receiving `largest` to sending the ack, in units
//!   of 8 µs; `sack`: bit i set when pseq `largest - 1 - i` was received.
//!
//! All integers are big endian. The first bytes have QUIC's fixed bit (0x40)
//! clear, and 0x21-0x28 are the tail parity, FEC and path probe kinds: a
//! bond datagram is never taken for one of them. Neither datagram is
//! authenticated: the inner QUIC packet is, and a forged header can only
//! misplace or delay it, as a path that reorders or drops can.

use std::ops::Range;

use thiserror::Error;

use crate::path::wire::MAX_PATH;
use crate::path::PathId;

/// First byte of a bonded data datagram.
pub const DATA_KIND: u8 = 0x29;
/// First byte of a bond ack.
pub const ACK_KIND: u8 = 0x2A;
/// Bytes a data header adds in front of the inner datagram.
pub const DATA_HEADER_LEN: usize = 14;
/// Length of an ack.
pub const ACK_LEN: usize = 20;
/// Packet numbers below `largest` an ack's bitmap covers.
pub const SACK_SPAN: u32 = 64;
/// The unit of `ack_delay`, µs.
pub const ACK_DELAY_UNIT_US: u32 = 8;

/// Flag: the inner datagram skips the reorder buffer.
const HOLD_EXEMPT: u8 = 0x1;
/// Flag: a copy sent again after its first path stalled.
const REINJECTED: u8 = 0x2;
/// Flag: no other path had data in flight or queued when it was sent.
const ALONE: u8 = 0x4;
/// Flags that must be clear.
const RESERVED: u8 = 0x8;

mod field {
    use std::ops::Range;

    pub const KIND: usize = 0;
    pub const FLAGS_PATH: usize = 1;
    pub const GSEQ: Range<usize> = 2..6;
    pub const PSEQ: Range<usize> = 6..10;
    pub const TX_US: Range<usize> = 10..14;

    pub const ACK_PATH: usize = 1;
    pub const LARGEST: Range<usize> = 2..6;
    pub const RECEIVED: Range<usize> = 6..10;
    pub const ACK_DELAY: Range<usize> = 10..12;
    pub const SACK: Range<usize> = 12..20;
}

/// Why bytes are not a bond datagram.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum BondWireError {
    /// Fewer bytes than the header or ack.
    #[error("bond datagram of {len} bytes is shorter than {need}")]
    Short {
        /// The bytes there were.
        len: usize,
        /// The bytes the kind needs.
        need: usize,
    },
    /// The first byte is not the expected kind.
    #[error("not a bond datagram (first byte {0:#04x})")]
    Kind(u8),
    /// Reserved flag bits are set.
    #[error("bond datagram with reserved flags {0:#03x}")]
    Flags(u8),
    /// A path number outside 1..=15.
    #[error("bond datagram on path {0} (paths are numbered 1 to {MAX_PATH})")]
    Path(u8),
    /// Nothing after the data header.
    #[error("bond data datagram with nothing inside")]
    Empty,
}

fn be32(bytes: &[u8]) -> u32 {
    u32::from_be_bytes([bytes[0], bytes[1], bytes[2], bytes[3]])
}

fn path(number: u8) -> Result<PathId, BondWireError> {
    PathId::new(number).ok_or(BondWireError::Path(number))
}

/// A checked view of a bonded data datagram in a buffer.
#[derive(Debug, Clone)]
pub struct Data<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Data<T> {
    /// Wraps `buffer` after checking its kind and that it holds a header
    /// and at least one byte of inner datagram.
    pub fn new_checked(buffer: T) -> Result<Self, BondWireError> {
        let bytes = buffer.as_ref();
        let Some(&kind) = bytes.first() else {
            return Err(BondWireError::Short {
                len: 0,
                need: DATA_HEADER_LEN,
            });
        };
        if kind != DATA_KIND {
            return Err(BondWireError::Kind(kind));
        }
        if bytes.len() < DATA_HEADER_LEN {
            return Err(BondWireError::Short {
                len: bytes.len(),
                need: DATA_HEADER_LEN,
            });
        }
        if bytes.len() == DATA_HEADER_LEN {
            return Err(BondWireError::Empty);
        }
        Ok(Data { buffer })
    }

    fn word(&self, range: Range<usize>) -> u32 {
        be32(&self.buffer.as_ref()[range])
    }

    /// The sender's order over all paths.
    pub fn gseq(&self) -> u32 {
        self.word(field::GSEQ)
    }

    /// The inner datagram (a QUIC packet or one of the FEC layer's).
    pub fn inner(&self) -> &[u8] {
        &self.buffer.as_ref()[DATA_HEADER_LEN..]
    }

    /// The buffer back.
    pub fn into_inner(self) -> T {
        self.buffer
    }
}

/// A data header's fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DataRepr {
    /// The path it was sent on.
    pub path: PathId,
    /// The inner datagram skips the reorder buffer.
    pub hold_exempt: bool,
    /// A copy sent again on another path.
    pub reinjected: bool,
    /// No other path had data in flight or queued when it was sent.
    pub alone: bool,
    /// The sender's order over all paths.
    pub gseq: u32,
    /// The path's own sequence number.
    pub pseq: u32,
    /// The sender's clock when it took its place in the order, µs (wraps).
    pub tx_us: u32,
}

impl DataRepr {
    /// The header of `data`, after checking its flags and path.
    pub fn parse<T: AsRef<[u8]>>(data: &Data<T>) -> Result<Self, BondWireError> {
        let byte = data.buffer.as_ref()[field::FLAGS_PATH];
        let flags = byte >> 4;
        if flags & RESERVED != 0 {
            return Err(BondWireError::Flags(flags));
        }
        Ok(DataRepr {
            path: path(byte & 0x0F)?,
            hold_exempt: flags & HOLD_EXEMPT != 0,
            reinjected: flags & REINJECTED != 0,
            alone: flags & ALONE != 0,
            gseq: data.gseq(),
            pseq: data.word(field::PSEQ),
            tx_us: data.word(field::TX_US),
        })
    }

    /// The header's bytes.
    pub fn header(&self) -> [u8; DATA_HEADER_LEN] {
        let mut bytes = [0; DATA_HEADER_LEN];
        let flags = if self.hold_exempt { HOLD_EXEMPT } else { 0 }
            | if self.reinjected { REINJECTED } else { 0 }
            | if self.alone { ALONE } else { 0 };
        bytes[field::KIND] = DATA_KIND;
        bytes[field::FLAGS_PATH] = flags << 4 | self.path.get();
        bytes[field::GSEQ].copy_from_slice(&self.gseq.to_be_bytes());
        bytes[field::PSEQ].copy_from_slice(&self.pseq.to_be_bytes());
        bytes[field::TX_US].copy_from_slice(&self.tx_us.to_be_bytes());
        bytes
    }

    /// The header followed by `inner`.
    pub fn emit(&self, inner: &[u8]) -> Vec<u8> {
        let mut bytes = Vec::with_capacity(DATA_HEADER_LEN + inner.len());
        bytes.extend_from_slice(&self.header());
        bytes.extend_from_slice(inner);
        bytes
    }
}

/// A checked view of a bond ack in a buffer.
#[derive(Debug, Clone)]
pub struct Ack<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Ack<T> {
    /// Wraps `buffer` after checking its kind and length (bytes past
    /// [`ACK_LEN`] are ignored).
    pub fn new_checked(buffer: T) -> Result<Self, BondWireError> {
        let bytes = buffer.as_ref();
        match bytes.first() {
            Some(&ACK_KIND) if bytes.len() >= ACK_LEN => Ok(Ack { buffer }),
            Some(&ACK_KIND) | None => Err(BondWireError::Short {
                len: bytes.len(),
                need: ACK_LEN,
            }),
            Some(&kind) => Err(BondWireError::Kind(kind)),
        }
    }
}

/// An ack's fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AckRepr {
    /// The path whose data it acknowledges (and that it came back on).
    pub path: PathId,
    /// The highest pseq received on that path.
    pub largest: u32,
    /// Data datagrams received on that path so far (wrapping).
    pub received: u32,
    /// From receiving `largest` to sending the ack, in units of
    /// [`ACK_DELAY_UNIT_US`].
    pub ack_delay: u16,
    /// Bit i: pseq `largest - 1 - i` was received.
    pub sack: u64,
}

impl AckRepr {
    /// The fields of `ack`, after checking its path.
    pub fn parse<T: AsRef<[u8]>>(ack: &Ack<T>) -> Result<Self, BondWireError> {
        let bytes = ack.buffer.as_ref();
        let mut sack = [0; 8];
        sack.copy_from_slice(&bytes[field::SACK]);
        let delay = &bytes[field::ACK_DELAY];
        Ok(AckRepr {
            path: path(bytes[field::ACK_PATH])?,
            largest: be32(&bytes[field::LARGEST]),
            received: be32(&bytes[field::RECEIVED]),
            ack_delay: u16::from_be_bytes([delay[0], delay[1]]),
            sack: u64::from_be_bytes(sack),
        })
    }

    /// The ack's bytes.
    pub fn emit(&self) -> [u8; ACK_LEN] {
        let mut bytes = [0; ACK_LEN];
        bytes[field::KIND] = ACK_KIND;
        bytes[field::ACK_PATH] = self.path.get();
        bytes[field::LARGEST].copy_from_slice(&self.largest.to_be_bytes());
        bytes[field::RECEIVED].copy_from_slice(&self.received.to_be_bytes());
        bytes[field::ACK_DELAY].copy_from_slice(&self.ack_delay.to_be_bytes());
        bytes[field::SACK].copy_from_slice(&self.sack.to_be_bytes());
        bytes
    }

    /// The ack delay in µs.
    pub fn ack_delay_us(&self) -> u32 {
        u32::from(self.ack_delay) * ACK_DELAY_UNIT_US
    }

    /// Every pseq the ack reports received: `largest`, then the bitmap's
    /// from newest to oldest (wrapping below 0).
    pub fn acked(&self) -> impl Iterator<Item = u32> + '_ {
        std::iter::once(self.largest).chain(
            (0..SACK_SPAN)
                .filter(|&i| self.sack & (1 << i) != 0)
                .map(|i| self.largest.wrapping_sub(1 + i)),
        )
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn data() -> DataRepr {
        DataRepr {
            path: PathId::new(3).unwrap(),
            hold_exempt: true,
            reinjected: false,
            alone: false,
            gseq: 0x0102_0304,
            pseq: 0x1112_1314,
            tx_us: 0x2122_2324,
        }
    }

    fn ack() -> AckRepr {
        AckRepr {
            path: PathId::new(2).unwrap(),
            largest: 100,
            received: 0x0A0B_0C0D,
            ack_delay: 0x0102,
            sack: 0b1011,
        }
    }

    #[test]
    fn data_layout() {
        let bytes = data().emit(b"quic");
        assert_eq!(
            bytes,
            [
                0x29, 0x13, 1, 2, 3, 4, 0x11, 0x12, 0x13, 0x14, 0x21, 0x22, 0x23, 0x24, b'q', b'u',
                b'i', b'c'
            ]
        );
        let view = Data::new_checked(&bytes[..]).unwrap();
        assert_eq!(view.gseq(), 0x0102_0304);
        assert_eq!(view.inner(), b"quic");
        assert_eq!(DataRepr::parse(&view), Ok(data()));
        let reinjected = DataRepr {
            hold_exempt: false,
            reinjected: true,
            ..data()
        };
        assert_eq!(reinjected.header()[1], 0x23);
        let alone = DataRepr {
            hold_exempt: false,
            alone: true,
            ..data()
        };
        assert_eq!(alone.header()[1], 0x43);
    }

    #[test]
    fn ack_layout() {
        let bytes = ack().emit();
        assert_eq!(
            bytes,
            [0x2A, 2, 0, 0, 0, 100, 0x0A, 0x0B, 0x0C, 0x0D, 1, 2, 0, 0, 0, 0, 0, 0, 0, 0b1011]
        );
        let parsed = AckRepr::parse(&Ack::new_checked(&bytes[..]).unwrap()).unwrap();
        assert_eq!(parsed, ack());
        assert_eq!(parsed.ack_delay_us(), 0x0102 * 8);
        assert_eq!(parsed.acked().collect::<Vec<_>>(), [100, 99, 98, 96]);
        // Below zero the bitmap wraps, as the sequence numbers do.
        let low = AckRepr {
            largest: 1,
            sack: 0b111,
            ..ack()
        };
        assert_eq!(
            low.acked().collect::<Vec<_>>(),
            [1, 0, u32::MAX, u32::MAX - 1]
        );
    }

    #[test]
    fn kinds_are_none_of_the_other_datagrams() {
        for kind in [DATA_KIND, ACK_KIND] {
            assert_eq!(kind & 0x40, 0, "QUIC's fixed bit");
            assert!(!(0x21..=0x28).contains(&kind));
        }
    }

    #[test]
    fn bad_datagrams_are_errors() {
        let good = data().emit(b"x");
        assert_eq!(
            Data::new_checked(&good[..0]).unwrap_err(),
            BondWireError::Short { len: 0, need: 14 }
        );
        assert_eq!(
            Data::new_checked(&good[..13]).unwrap_err(),
            BondWireError::Short { len: 13, need: 14 }
        );
        assert_eq!(
            Data::new_checked(&good[..14]).unwrap_err(),
            BondWireError::Empty
        );
        assert_eq!(
            Data::new_checked(&ack().emit()[..]).unwrap_err(),
            BondWireError::Kind(ACK_KIND)
        );
        for (byte, error) in [
            (0x83, BondWireError::Flags(8)),
            (0xF3, BondWireError::Flags(0xF)),
            (0x10, BondWireError::Path(0)),
        ] {
            let mut bad = good.clone();
            bad[1] = byte;
            let view = Data::new_checked(&bad[..]).unwrap();
            assert_eq!(DataRepr::parse(&view), Err(error));
        }
        let ack_bytes = ack().emit();
        assert_eq!(
            Ack::new_checked(&ack_bytes[..19]).unwrap_err(),
            BondWireError::Short { len: 19, need: 20 }
        );
        assert_eq!(
            Ack::new_checked(&good[..]).unwrap_err(),
            BondWireError::Kind(DATA_KIND)
        );
        for number in [0, 16, 255] {
            let mut bad = ack_bytes;
            bad[1] = number;
            let view = Ack::new_checked(&bad[..]).unwrap();
            assert_eq!(AckRepr::parse(&view), Err(BondWireError::Path(number)));
        }
    }

    fn any_data() -> impl Strategy<Value = DataRepr> {
        (1..=MAX_PATH, any::<[bool; 3]>(), any::<[u32; 3]>()).prop_map(
            |(path, [hold_exempt, reinjected, alone], [gseq, pseq, tx_us])| DataRepr {
                path: PathId::new(path).unwrap(),
                hold_exempt,
                reinjected,
                alone,
                gseq,
                pseq,
                tx_us,
            },
        )
    }

    fn any_ack() -> impl Strategy<Value = AckRepr> {
        (1..=MAX_PATH, any::<[u32; 2]>(), any::<u16>(), any::<u64>()).prop_map(
            |(path, [largest, received], ack_delay, sack)| AckRepr {
                path: PathId::new(path).unwrap(),
                largest,
                received,
                ack_delay,
                sack,
            },
        )
    }

    proptest! {
        #[test]
        fn data_round_trips(repr in any_data(), inner in proptest::collection::vec(any::<u8>(), 1..64)) {
            let bytes = repr.emit(&inner);
            let view = Data::new_checked(&bytes[..]).unwrap();
            prop_assert_eq!(DataRepr::parse(&view), Ok(repr));
            prop_assert_eq!(view.inner(), &inner[..]);
        }

        #[test]
        fn acks_round_trip(repr in any_ack()) {
            let bytes = repr.emit();
            let parsed = AckRepr::parse(&Ack::new_checked(&bytes[..]).unwrap()).unwrap();
            prop_assert_eq!(parsed, repr);
            prop_assert_eq!(parsed.emit(), bytes);
            prop_assert_eq!(parsed.acked().count() as u32, 1 + repr.sack.count_ones());
        }

        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..40)) {
            if let Ok(view) = Data::new_checked(&bytes[..]) {
                if let Ok(repr) = DataRepr::parse(&view) {
                    prop_assert_eq!(repr.emit(view.inner()), bytes.clone());
                }
            }
            if let Ok(view) = Ack::new_checked(&bytes[..]) {
                if let Ok(repr) = AckRepr::parse(&view) {
                    prop_assert_eq!(&repr.emit()[..], &bytes[..ACK_LEN]);
                }
            }
        }
    }
}
