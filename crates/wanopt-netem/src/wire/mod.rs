//! Checked views over raw frames, in the style of smoltcp's `wire` module.
//!
//! Every view is built with `new_checked`, which verifies that the buffer is
//! long enough for every field its accessors read, so bytes from the network
//! never reach a panicking index or unchecked arithmetic.

pub mod checksum;
pub mod ethernet;
pub mod ipv4;
pub mod ipv6;
pub mod tcp;
pub mod udp;

use serde::{Deserialize, Serialize};
use thiserror::Error;

pub use ethernet::{EtherType, EthernetFrame};
pub use ipv4::Ipv4Packet;
pub use ipv6::Ipv6Packet;
pub use tcp::{TcpOption, TcpSegment};
pub use udp::UdpDatagram;

/// Why a buffer is not a valid header of the expected kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum WireError {
    /// The buffer ends before the header does.
    #[error("truncated header")]
    Truncated,
    /// A field holds a value the format does not allow (version, length).
    #[error("malformed header")]
    Malformed,
}

/// The two ECN bits of an IP header (RFC 3168 section 5).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Ecn {
    /// `00`: the sender does not support ECN.
    NotEct,
    /// `01`: ECN-capable transport, codepoint 1 (also L4S).
    Ect1,
    /// `10`: ECN-capable transport, codepoint 0.
    Ect0,
    /// `11`: congestion experienced.
    Ce,
}

impl Ecn {
    /// The codepoint from the two low bits of `bits`.
    pub fn from_bits(bits: u8) -> Ecn {
        match bits & 0b11 {
            0b00 => Ecn::NotEct,
            0b01 => Ecn::Ect1,
            0b10 => Ecn::Ect0,
            _ => Ecn::Ce,
        }
    }

    /// The two-bit codepoint.
    pub fn bits(self) -> u8 {
        match self {
            Ecn::NotEct => 0b00,
            Ecn::Ect1 => 0b01,
            Ecn::Ect0 => 0b10,
            Ecn::Ce => 0b11,
        }
    }

    /// Whether the transport declared ECN capability (ECT(0), ECT(1) or
    /// already CE), so a congested router may mark instead of dropping.
    pub fn is_capable(self) -> bool {
        self != Ecn::NotEct
    }
}

/// What an Ethernet frame carries, as far as the link model cares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FrameKind {
    /// ARP, LLDP, a runt or anything else that is not IP.
    NonIp,
    /// IPv4 whose header starts at `offset` (after any VLAN tags).
    Ipv4 {
        /// Offset of the IP header in the frame.
        offset: usize,
    },
    /// IPv6 whose header starts at `offset` (after any VLAN tags).
    Ipv6 {
        /// Offset of the IP header in the frame.
        offset: usize,
    },
}

impl FrameKind {
    /// Classifies a frame by its EtherType (skipping up to two VLAN tags).
    pub fn of(frame: &[u8]) -> FrameKind {
        let Ok(ethernet) = EthernetFrame::new_checked(frame) else {
            return FrameKind::NonIp;
        };
        match ethernet.payload_ethertype() {
            Some((EtherType::Ipv4, offset)) => FrameKind::Ipv4 { offset },
            Some((EtherType::Ipv6, offset)) => FrameKind::Ipv6 { offset },
            _ => FrameKind::NonIp,
        }
    }

    /// Offset of the IP header, or `None` for non-IP frames.
    pub fn ip_offset(self) -> Option<usize> {
        match self {
            FrameKind::NonIp => None,
            FrameKind::Ipv4 { offset } | FrameKind::Ipv6 { offset } => Some(offset),
        }
    }
}

/// The ECN codepoint of an IP frame, `None` if the frame is not IP or its IP
/// header is truncated or malformed.
pub fn frame_ecn(frame: &[u8], kind: FrameKind) -> Option<Ecn> {
    match kind {
        FrameKind::NonIp => None,
        FrameKind::Ipv4 { offset } => {
            Some(Ipv4Packet::new_checked(frame.get(offset..)?).ok()?.ecn())
        }
        FrameKind::Ipv6 { offset } => {
            Some(Ipv6Packet::new_checked(frame.get(offset..)?).ok()?.ecn())
        }
    }
}

/// Sets the ECN codepoint of an IP frame in place (fixing the IPv4 header
/// checksum incrementally); returns `false`, changing nothing, if the frame is
/// not IP or its header is truncated or malformed.
pub fn set_frame_ecn(frame: &mut [u8], kind: FrameKind, ecn: Ecn) -> bool {
    let ip_offset = match kind.ip_offset() {
        Some(offset) => offset,
        None => return false,
    };
    let Some(ip) = frame.get_mut(ip_offset..) else {
        return false;
    };
    match kind {
        FrameKind::Ipv4 { .. } => match Ipv4Packet::new_checked(ip) {
            Ok(mut packet) => {
                packet.set_ecn(ecn);
                true
            }
            Err(_) => false,
        },
        FrameKind::Ipv6 { .. } => match Ipv6Packet::new_checked(ip) {
            Ok(mut packet) => {
                packet.set_ecn(ecn);
                true
            }
            Err(_) => false,
        },
        FrameKind::NonIp => false,
    }
}
