//! Frames and a virtual-clock harness for the link tests.

use std::time::{Duration, Instant};

use crate::link::Link;
use crate::wire::{Ecn, Ipv4Packet};

/// Offset of the frame identifier: after the Ethernet and IPv4 headers.
const ID_OFFSET: usize = 14 + 20;

/// An Ethernet II frame carrying an IPv4 packet of `ip_len` bytes (at least
/// 28) with a valid header checksum, ECN codepoint `ecn` and `id` at the
/// start of the payload.
pub(crate) fn ipv4_frame(id: u64, ip_len: usize, ecn: Ecn) -> Vec<u8> {
    assert!(ip_len >= 28);
    let mut frame = vec![0u8; 14 + ip_len];
    frame[12..14].copy_from_slice(&[0x08, 0x00]);
    let total_len = u16::try_from(ip_len).unwrap().to_be_bytes();
    frame[14..34].copy_from_slice(&[
        0x45,
        ecn.bits(),
        total_len[0],
        total_len[1],
        0,
        0,
        0x40,
        0,
        64,
        17,
        0,
        0,
        10,
        0,
        0,
        1,
        10,
        0,
        0,
        2,
    ]);
    Ipv4Packet::new_checked(&mut frame[14..])
        .unwrap()
        .fill_checksum();
    frame[ID_OFFSET..ID_OFFSET + 8].copy_from_slice(&id.to_be_bytes());
    frame
}

/// An Ethernet II frame carrying an IPv6 packet of `ip_len` bytes (at least
/// 48) with ECN codepoint `ecn`.
pub(crate) fn ipv6_frame(id: u64, ip_len: usize, ecn: Ecn) -> Vec<u8> {
    assert!(ip_len >= 48);
    let mut frame = vec![0u8; 14 + ip_len];
    frame[12..14].copy_from_slice(&[0x86, 0xdd]);
    frame[14] = 0x60;
    frame[15] = ecn.bits() << 4;
    frame[14 + 40..14 + 48].copy_from_slice(&id.to_be_bytes());
    frame
}

/// A 42-byte ARP request.
pub(crate) fn arp_frame() -> Vec<u8> {
    let mut frame = vec![0u8; 42];
    frame[..6].copy_from_slice(&[0xff; 6]);
    frame[12..14].copy_from_slice(&[0x08, 0x06]);
    frame
}

/// The identifier [`ipv4_frame`] stored.
pub(crate) fn frame_id(frame: &[u8]) -> u64 {
    let bytes: [u8; 8] = frame[ID_OFFSET..ID_OFFSET + 8].try_into().unwrap();
    u64::from_be_bytes(bytes)
}

/// A frame that left the link: when (since the base instant) and what.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Departure {
    pub(crate) at: Duration,
    pub(crate) frame: Vec<u8>,
}

/// Drives a link on a virtual clock.
pub(crate) struct Harness {
    pub(crate) link: Link,
    pub(crate) base: Instant,
    pub(crate) departures: Vec<Departure>,
}

impl Harness {
    pub(crate) fn new(link: Link) -> Harness {
        Harness {
            link,
            base: Instant::now(),
            departures: Vec::new(),
        }
    }

    /// Delivers everything due up to `until`, polling at each exact departure
    /// time, then hands `frame` to the link at `until`.
    pub(crate) fn arrive(&mut self, at: Duration, frame: Vec<u8>) {
        self.run_until(at);
        self.link.handle_frame(self.base + at, frame);
    }

    /// Delivers everything due up to `until`.
    pub(crate) fn run_until(&mut self, until: Duration) {
        while let Some(due) = self.link.poll_timeout() {
            if due > self.base + until {
                break;
            }
            let mut delivered = false;
            while let Some(frame) = self.link.poll_transmit(due) {
                delivered = true;
                self.departures.push(Departure {
                    at: due - self.base,
                    frame,
                });
            }
            assert!(delivered, "poll_timeout promised a frame at {due:?}");
        }
    }

    /// Delivers everything still in flight.
    pub(crate) fn finish(&mut self) {
        self.run_until(Duration::from_secs(1_000_000));
    }

    /// Identifiers of the delivered IPv4 frames, in delivery order.
    pub(crate) fn ids(&self) -> Vec<u64> {
        self.departures.iter().map(|d| frame_id(&d.frame)).collect()
    }
}
