//! UDP headers (RFC 768): only what the middlebox's UDP rules read.

use core::ops::Range;

use crate::wire::WireError;

const SOURCE_PORT: Range<usize> = 0..2;
const DESTINATION_PORT: Range<usize> = 2..4;
const LENGTH: Range<usize> = 4..6;
/// Length of a UDP header.
pub const HEADER_LEN: usize = 8;

/// A checked view of a UDP header (and whatever follows it).
#[derive(Debug, Clone, Copy)]
pub struct UdpDatagram<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> UdpDatagram<T> {
    /// Wraps `buffer` after checking that the whole 8-byte header is
    /// present. The length field is not checked against the buffer: a
    /// middlebox judges a datagram by its ports and its IP length.
    pub fn new_checked(buffer: T) -> Result<UdpDatagram<T>, WireError> {
        if buffer.as_ref().len() < HEADER_LEN {
            return Err(WireError::Truncated);
        }
        Ok(UdpDatagram { buffer })
    }

    /// Source port.
    pub fn source_port(&self) -> u16 {
        be16(&self.buffer.as_ref()[SOURCE_PORT])
    }

    /// Destination port.
    pub fn destination_port(&self) -> u16 {
        be16(&self.buffer.as_ref()[DESTINATION_PORT])
    }

    /// The length field (header and payload, as the sender wrote it).
    pub fn len_field(&self) -> u16 {
        be16(&self.buffer.as_ref()[LENGTH])
    }
}

fn be16(bytes: &[u8]) -> u16 {
    u16::from_be_bytes([bytes[0], bytes[1]])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ports_and_length_are_read_from_a_whole_header() {
        let bytes = [0x30, 0x39, 0x01, 0xbb, 0x00, 0x0c, 0xab, 0xcd, 1, 2, 3, 4];
        let datagram = UdpDatagram::new_checked(&bytes[..]).unwrap();
        assert_eq!(datagram.source_port(), 12345);
        assert_eq!(datagram.destination_port(), 443);
        assert_eq!(datagram.len_field(), 12);
        assert_eq!(
            UdpDatagram::new_checked(&bytes[..7]).err(),
            Some(WireError::Truncated)
        );
    }
}
