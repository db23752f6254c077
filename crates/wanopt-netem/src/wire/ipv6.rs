//! IPv6 fixed headers (RFC 8200).

use crate::wire::{Ecn, WireError};

/// Length of the IPv6 fixed header.
pub const HEADER_LEN: usize = 40;

/// A checked view of an IPv6 fixed header.
#[derive(Debug, Clone, Copy)]
pub struct Ipv6Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Ipv6Packet<T> {
    /// Wraps `buffer` after checking the version and the header length.
    pub fn new_checked(buffer: T) -> Result<Ipv6Packet<T>, WireError> {
        let bytes = buffer.as_ref();
        let first = *bytes.first().ok_or(WireError::Truncated)?;
        if first >> 4 != 6 {
            return Err(WireError::Malformed);
        }
        if bytes.len() < HEADER_LEN {
            return Err(WireError::Truncated);
        }
        Ok(Ipv6Packet { buffer })
    }

    /// The traffic class (spread over the first two bytes).
    pub fn traffic_class(&self) -> u8 {
        let bytes = self.buffer.as_ref();
        (bytes[0] << 4) | (bytes[1] >> 4)
    }

    /// The ECN codepoint (low two bits of the traffic class).
    pub fn ecn(&self) -> Ecn {
        Ecn::from_bits(self.traffic_class())
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Ipv6Packet<T> {
    /// Sets the ECN codepoint (IPv6 has no header checksum to fix).
    pub fn set_ecn(&mut self, ecn: Ecn) {
        let bytes = self.buffer.as_mut();
        bytes[1] = (bytes[1] & !0x30) | (ecn.bits() << 4);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ecn_lives_in_the_traffic_class() {
        let mut bytes = [0u8; 40];
        bytes[0] = 0x6b; // traffic class high nibble 0xb
        bytes[1] = 0x2f; // traffic class low nibble 0x2 (ECT(0)), flow label bits 0xf
        let mut packet = Ipv6Packet::new_checked(&mut bytes[..]).unwrap();
        assert_eq!(packet.traffic_class(), 0xb2);
        assert_eq!(packet.ecn(), Ecn::Ect0);
        packet.set_ecn(Ecn::Ce);
        assert_eq!(packet.traffic_class(), 0xb3);
        assert_eq!(bytes[1] & 0x0f, 0x0f);
        assert!(Ipv6Packet::new_checked(&bytes[..39]).is_err());
    }
}
