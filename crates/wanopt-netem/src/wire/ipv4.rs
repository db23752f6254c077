//! IPv4 headers (RFC 791).

use core::ops::Range;

use crate::wire::{checksum, Ecn, WireError};

const VERSION_IHL: usize = 0;
const TOS: usize = 1;
const TOTAL_LENGTH: Range<usize> = 2..4;
const FLAGS_FRAGMENT: Range<usize> = 6..8;
const PROTOCOL: usize = 9;
const CHECKSUM: Range<usize> = 10..12;
const SOURCE: Range<usize> = 12..16;
const DESTINATION: Range<usize> = 16..20;
/// Length of an IPv4 header without options.
pub const MIN_HEADER_LEN: usize = 20;

/// A checked view of an IPv4 header (and whatever follows it).
#[derive(Debug, Clone, Copy)]
pub struct Ipv4Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Ipv4Packet<T> {
    /// Wraps `buffer` after checking the version and that the whole header
    /// (including options, per IHL) is present.
    pub fn new_checked(buffer: T) -> Result<Ipv4Packet<T>, WireError> {
        let bytes = buffer.as_ref();
        let first = *bytes.first().ok_or(WireError::Truncated)?;
        if first >> 4 != 4 {
            return Err(WireError::Malformed);
        }
        let header_len = usize::from(first & 0x0f) * 4;
        if header_len < MIN_HEADER_LEN {
            return Err(WireError::Malformed);
        }
        if bytes.len() < header_len {
            return Err(WireError::Truncated);
        }
        Ok(Ipv4Packet { buffer })
    }

    /// Header length in bytes (IHL × 4), at least 20.
    pub fn header_len(&self) -> usize {
        usize::from(self.buffer.as_ref()[VERSION_IHL] & 0x0f) * 4
    }

    /// The ECN codepoint (low two bits of the TOS byte).
    pub fn ecn(&self) -> Ecn {
        Ecn::from_bits(self.buffer.as_ref()[TOS])
    }

    /// The DSCP (high six bits of the TOS byte).
    pub fn dscp(&self) -> u8 {
        self.buffer.as_ref()[TOS] >> 2
    }

    /// The total length field.
    pub fn total_len(&self) -> u16 {
        let bytes = &self.buffer.as_ref()[TOTAL_LENGTH];
        u16::from_be_bytes([bytes[0], bytes[1]])
    }

    /// The fragment offset in 8-byte units (non-zero for all fragments but
    /// the first).
    pub fn fragment_offset(&self) -> u16 {
        let bytes = &self.buffer.as_ref()[FLAGS_FRAGMENT];
        u16::from_be_bytes([bytes[0], bytes[1]]) & 0x1fff
    }

    /// The protocol number of the payload (6 = TCP, 17 = UDP).
    pub fn protocol(&self) -> u8 {
        self.buffer.as_ref()[PROTOCOL]
    }

    /// The header checksum field.
    pub fn checksum(&self) -> u16 {
        let bytes = &self.buffer.as_ref()[CHECKSUM];
        u16::from_be_bytes([bytes[0], bytes[1]])
    }

    /// Source address.
    pub fn source(&self) -> [u8; 4] {
        let mut address = [0; 4];
        address.copy_from_slice(&self.buffer.as_ref()[SOURCE]);
        address
    }

    /// Destination address.
    pub fn destination(&self) -> [u8; 4] {
        let mut address = [0; 4];
        address.copy_from_slice(&self.buffer.as_ref()[DESTINATION]);
        address
    }

    /// Whether the header checksum is correct.
    pub fn verify_checksum(&self) -> bool {
        checksum::checksum(&self.buffer.as_ref()[..self.header_len()]) == 0
    }

    /// The payload after the header, cut to the total length when that is
    /// consistent with the buffer (Ethernet padding is excluded).
    pub fn payload(&self) -> &[u8] {
        let bytes = self.buffer.as_ref();
        let end = usize::from(self.total_len()).clamp(self.header_len(), bytes.len());
        &bytes[self.header_len()..end]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Ipv4Packet<T> {
    /// Sets the ECN codepoint and updates the header checksum incrementally
    /// (RFC 1624), as a router does; a checksum that was wrong stays wrong.
    pub fn set_ecn(&mut self, ecn: Ecn) {
        let bytes = self.buffer.as_mut();
        let old_word = u16::from_be_bytes([bytes[VERSION_IHL], bytes[TOS]]);
        bytes[TOS] = (bytes[TOS] & !0b11) | ecn.bits();
        let new_word = u16::from_be_bytes([bytes[VERSION_IHL], bytes[TOS]]);
        let old_checksum = u16::from_be_bytes([bytes[CHECKSUM.start], bytes[CHECKSUM.start + 1]]);
        let new_checksum = checksum::update(old_checksum, old_word, new_word);
        bytes[CHECKSUM].copy_from_slice(&new_checksum.to_be_bytes());
    }

    /// Recomputes and stores the header checksum.
    pub fn fill_checksum(&mut self) {
        let header_len = self.header_len();
        let bytes = self.buffer.as_mut();
        bytes[CHECKSUM].copy_from_slice(&[0, 0]);
        let value = checksum::checksum(&bytes[..header_len]);
        bytes[CHECKSUM].copy_from_slice(&value.to_be_bytes());
    }

    /// The header and the payload (cut like [`Ipv4Packet::payload`]), both
    /// mutable at once.
    pub fn split_mut(&mut self) -> (&mut [u8], &mut [u8]) {
        let header_len = self.header_len();
        let total_len = usize::from(self.total_len());
        let bytes = self.buffer.as_mut();
        let end = total_len.clamp(header_len, bytes.len());
        let (header, rest) = bytes[..end].split_at_mut(header_len);
        (header, rest)
    }

    /// The payload after the header, mutable, cut like [`Ipv4Packet::payload`].
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let header_len = self.header_len();
        let total_len = usize::from(self.total_len());
        let bytes = self.buffer.as_mut();
        let end = total_len.clamp(header_len, bytes.len());
        &mut bytes[header_len..end]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(tos: u8) -> Vec<u8> {
        let mut bytes = vec![
            0x45, tos, 0x05, 0xdc, 0x1c, 0x46, 0x40, 0x00, 0x40, 0x06, 0, 0, 10, 0, 0, 1, 10, 0, 0,
            2,
        ];
        bytes.resize(1500, 0);
        let mut packet = Ipv4Packet::new_checked(&mut bytes[..]).unwrap();
        packet.fill_checksum();
        bytes
    }

    #[test]
    fn marking_ce_keeps_the_checksum_valid() {
        for tos in [0x02, 0x01, 0xb8 | 0x02, 0xff] {
            let mut bytes = header(tos);
            let mut packet = Ipv4Packet::new_checked(&mut bytes[..]).unwrap();
            packet.set_ecn(Ecn::Ce);
            assert_eq!(packet.ecn(), Ecn::Ce);
            assert_eq!(packet.dscp(), tos >> 2);
            assert!(packet.verify_checksum(), "tos {tos:#x}");
        }
    }

    #[test]
    fn truncated_or_malformed_headers_are_rejected() {
        let bytes = header(0);
        assert_eq!(
            Ipv4Packet::new_checked(&bytes[..19]).unwrap_err(),
            WireError::Truncated
        );
        assert_eq!(
            Ipv4Packet::new_checked(&[][..]).unwrap_err(),
            WireError::Truncated
        );
        let mut bad = bytes.clone();
        bad[0] = 0x44;
        assert_eq!(
            Ipv4Packet::new_checked(&bad[..]).unwrap_err(),
            WireError::Malformed
        );
        bad[0] = 0x65;
        assert_eq!(
            Ipv4Packet::new_checked(&bad[..]).unwrap_err(),
            WireError::Malformed
        );
        bad[0] = 0x4f;
        assert_eq!(
            Ipv4Packet::new_checked(&bad[..40]).unwrap_err(),
            WireError::Truncated
        );
    }
}
