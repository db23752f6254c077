//! Ethernet II frames with optional 802.1Q / 802.1ad VLAN tags.

use crate::wire::WireError;

/// Length of the Ethernet II header without VLAN tags.
pub const HEADER_LEN: usize = 14;
const ETHERTYPE: core::ops::Range<usize> = 12..14;
const VLAN_TAG_LEN: usize = 4;

/// EtherTypes the emulator distinguishes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EtherType {
    /// 0x0800.
    Ipv4,
    /// 0x86dd.
    Ipv6,
    /// 0x0806.
    Arp,
    /// 0x8100 (802.1Q) or 0x88a8 (802.1ad).
    Vlan,
    /// Anything else.
    Other(u16),
}

impl From<u16> for EtherType {
    fn from(value: u16) -> EtherType {
        match value {
            0x0800 => EtherType::Ipv4,
            0x86dd => EtherType::Ipv6,
            0x0806 => EtherType::Arp,
            0x8100 | 0x88a8 => EtherType::Vlan,
            other => EtherType::Other(other),
        }
    }
}

/// A checked view of an Ethernet II frame.
#[derive(Debug, Clone, Copy)]
pub struct EthernetFrame<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> EthernetFrame<T> {
    /// Wraps `buffer` after checking that it holds a whole Ethernet header.
    pub fn new_checked(buffer: T) -> Result<EthernetFrame<T>, WireError> {
        if buffer.as_ref().len() < HEADER_LEN {
            return Err(WireError::Truncated);
        }
        Ok(EthernetFrame { buffer })
    }

    /// The outer EtherType (a VLAN TPID if the frame is tagged).
    pub fn ethertype(&self) -> EtherType {
        let bytes = &self.buffer.as_ref()[ETHERTYPE];
        EtherType::from(u16::from_be_bytes([bytes[0], bytes[1]]))
    }

    /// The EtherType of the payload after up to two VLAN tags, and the offset
    /// where that payload starts; `None` if a tag is truncated or there are
    /// more than two.
    pub fn payload_ethertype(&self) -> Option<(EtherType, usize)> {
        let frame = self.buffer.as_ref();
        let mut offset = HEADER_LEN;
        let mut ethertype = self.ethertype();
        for _ in 0..2 {
            if ethertype != EtherType::Vlan {
                return Some((ethertype, offset));
            }
            let inner = frame.get(offset + 2..offset + 4)?;
            ethertype = EtherType::from(u16::from_be_bytes([inner[0], inner[1]]));
            offset += VLAN_TAG_LEN;
        }
        (ethertype != EtherType::Vlan).then_some((ethertype, offset))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vlan_tags_are_skipped() {
        let mut frame = [0u8; 22];
        frame[12..14].copy_from_slice(&[0x81, 0x00]);
        frame[16..18].copy_from_slice(&[0x86, 0xdd]);
        let view = EthernetFrame::new_checked(&frame[..]).unwrap();
        assert_eq!(view.payload_ethertype(), Some((EtherType::Ipv6, 18)));
        assert!(EthernetFrame::new_checked(&frame[..13]).is_err());
        frame[16..18].copy_from_slice(&[0x81, 0x00]);
        frame[20..22].copy_from_slice(&[0x81, 0x00]);
        let view = EthernetFrame::new_checked(&frame[..]).unwrap();
        assert_eq!(view.payload_ethertype(), None);
        assert_eq!(
            EthernetFrame::new_checked(&frame[..15])
                .unwrap()
                .payload_ethertype(),
            None
        );
    }
}
