//! TCP headers and options (RFC 9293 section 3.1, RFC 7323, RFC 2018).

use core::ops::Range;

use crate::wire::WireError;

const SOURCE_PORT: Range<usize> = 0..2;
const DESTINATION_PORT: Range<usize> = 2..4;
const SEQUENCE: Range<usize> = 4..8;
const ACKNOWLEDGMENT: Range<usize> = 8..12;
const DATA_OFFSET: usize = 12;
const FLAGS: usize = 13;
const WINDOW: Range<usize> = 14..16;
/// Offset of the checksum field.
pub const CHECKSUM: Range<usize> = 16..18;
/// Length of a TCP header without options.
pub const MIN_HEADER_LEN: usize = 20;

/// FIN flag.
pub const FLAG_FIN: u8 = 0x01;
/// SYN flag.
pub const FLAG_SYN: u8 = 0x02;
/// RST flag.
pub const FLAG_RST: u8 = 0x04;
/// ACK flag.
pub const FLAG_ACK: u8 = 0x10;
/// ECN-Echo flag (RFC 3168).
pub const FLAG_ECE: u8 = 0x40;
/// Congestion Window Reduced flag (RFC 3168).
pub const FLAG_CWR: u8 = 0x80;
/// The AE (formerly NS) bit, in the data-offset byte (RFC 9768 AccECN).
pub const DATA_OFFSET_AE: u8 = 0x01;

/// Option kinds.
pub mod kind {
    /// End of option list.
    pub const END: u8 = 0;
    /// No-operation (padding).
    pub const NOP: u8 = 1;
    /// Maximum segment size.
    pub const MSS: u8 = 2;
    /// Window scale.
    pub const WINDOW_SCALE: u8 = 3;
    /// SACK permitted.
    pub const SACK_PERMITTED: u8 = 4;
    /// SACK blocks.
    pub const SACK: u8 = 5;
    /// Timestamps.
    pub const TIMESTAMPS: u8 = 8;
}

/// A checked view of a TCP header (and whatever follows it).
#[derive(Debug, Clone, Copy)]
pub struct TcpSegment<T: AsRef<[u8]>> {
    buffer: T,
}

fn be16(bytes: &[u8]) -> u16 {
    u16::from_be_bytes([bytes[0], bytes[1]])
}

fn be32(bytes: &[u8]) -> u32 {
    u32::from_be_bytes([bytes[0], bytes[1], bytes[2], bytes[3]])
}

impl<T: AsRef<[u8]>> TcpSegment<T> {
    /// Wraps `buffer` after checking that the whole header, options
    /// included (per the data offset), is present.
    pub fn new_checked(buffer: T) -> Result<TcpSegment<T>, WireError> {
        let bytes = buffer.as_ref();
        let offset_byte = *bytes.get(DATA_OFFSET).ok_or(WireError::Truncated)?;
        let header_len = usize::from(offset_byte >> 4) * 4;
        if header_len < MIN_HEADER_LEN {
            return Err(WireError::Malformed);
        }
        if bytes.len() < header_len {
            return Err(WireError::Truncated);
        }
        Ok(TcpSegment { buffer })
    }

    /// Header length in bytes, options included.
    pub fn header_len(&self) -> usize {
        usize::from(self.buffer.as_ref()[DATA_OFFSET] >> 4) * 4
    }

    /// Source port.
    pub fn source_port(&self) -> u16 {
        be16(&self.buffer.as_ref()[SOURCE_PORT])
    }

    /// Destination port.
    pub fn destination_port(&self) -> u16 {
        be16(&self.buffer.as_ref()[DESTINATION_PORT])
    }

    /// Sequence number.
    pub fn sequence(&self) -> u32 {
        be32(&self.buffer.as_ref()[SEQUENCE])
    }

    /// Acknowledgment number.
    pub fn acknowledgment(&self) -> u32 {
        be32(&self.buffer.as_ref()[ACKNOWLEDGMENT])
    }

    /// The flags byte (CWR, ECE, URG, ACK, PSH, RST, SYN, FIN).
    pub fn flags(&self) -> u8 {
        self.buffer.as_ref()[FLAGS]
    }

    /// Whether the AE (formerly NS) bit is set.
    pub fn ae(&self) -> bool {
        self.buffer.as_ref()[DATA_OFFSET] & DATA_OFFSET_AE != 0
    }

    /// Advertised window (before scaling).
    pub fn window(&self) -> u16 {
        be16(&self.buffer.as_ref()[WINDOW])
    }

    /// Checksum field.
    pub fn checksum(&self) -> u16 {
        be16(&self.buffer.as_ref()[CHECKSUM])
    }

    /// The raw option bytes.
    pub fn options(&self) -> &[u8] {
        &self.buffer.as_ref()[MIN_HEADER_LEN..self.header_len()]
    }

    /// The whole header, options included.
    pub fn header(&self) -> &[u8] {
        &self.buffer.as_ref()[..self.header_len()]
    }

    /// The well-formed options, in order, up to the end-of-list option or the
    /// first malformed one (see [`TcpOptions`]).
    pub fn parse_options(&self) -> TcpOptions<'_> {
        TcpOptions::new(self.options())
    }

    /// Whether the checksum is correct for an IPv4 pseudo-header with these
    /// addresses (the segment must be the whole TCP segment).
    pub fn verify_checksum_v4(&self, source: [u8; 4], destination: [u8; 4]) -> bool {
        let segment = self.buffer.as_ref();
        crate::wire::checksum::finish(pseudo_header_sum_v4(source, destination, segment)) == 0
    }
}

fn pseudo_header_sum_v4(source: [u8; 4], destination: [u8; 4], segment: &[u8]) -> u64 {
    let mut sum = crate::wire::checksum::accumulate(0, &source);
    sum = crate::wire::checksum::accumulate(sum, &destination);
    sum += 6 + segment.len() as u64;
    crate::wire::checksum::accumulate(sum, segment)
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> TcpSegment<T> {
    /// Sets the sequence number (the checksum is not touched).
    pub fn set_sequence(&mut self, value: u32) {
        self.buffer.as_mut()[SEQUENCE].copy_from_slice(&value.to_be_bytes());
    }

    /// Sets the acknowledgment number (the checksum is not touched).
    pub fn set_acknowledgment(&mut self, value: u32) {
        self.buffer.as_mut()[ACKNOWLEDGMENT].copy_from_slice(&value.to_be_bytes());
    }

    /// Sets the flags byte (the checksum is not touched).
    pub fn set_flags(&mut self, flags: u8) {
        self.buffer.as_mut()[FLAGS] = flags;
    }

    /// Sets or clears the AE bit (the checksum is not touched).
    pub fn set_ae(&mut self, on: bool) {
        let byte = &mut self.buffer.as_mut()[DATA_OFFSET];
        *byte = if on {
            *byte | DATA_OFFSET_AE
        } else {
            *byte & !DATA_OFFSET_AE
        };
    }

    /// Sets the checksum field.
    pub fn set_checksum(&mut self, value: u16) {
        self.buffer.as_mut()[CHECKSUM].copy_from_slice(&value.to_be_bytes());
    }

    /// The raw option bytes, mutable.
    pub fn options_mut(&mut self) -> &mut [u8] {
        let header_len = self.header_len();
        &mut self.buffer.as_mut()[MIN_HEADER_LEN..header_len]
    }

    /// Recomputes the checksum over the IPv4 pseudo-header and the segment.
    pub fn fill_checksum_v4(&mut self, source: [u8; 4], destination: [u8; 4]) {
        self.set_checksum(0);
        let sum = pseudo_header_sum_v4(source, destination, self.buffer.as_ref());
        self.set_checksum(crate::wire::checksum::finish(sum));
    }
}

/// One TCP option, located in the option bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TcpOption {
    /// The option kind.
    pub kind: u8,
    /// Offset of the kind byte within the option bytes.
    pub offset: usize,
    /// Total length of the option (1 for NOP, otherwise the length byte).
    pub len: usize,
}

/// Iterator over the options of a TCP header. It stops at the end-of-list
/// option, at the end of the bytes, and at the first option whose length
/// byte is missing, below 2, or runs past the header: a middlebox must not
/// rewrite what it cannot parse.
#[derive(Debug, Clone)]
pub struct TcpOptions<'a> {
    bytes: &'a [u8],
    offset: usize,
}

impl<'a> TcpOptions<'a> {
    /// Options in `bytes` (the option area of a TCP header).
    pub fn new(bytes: &'a [u8]) -> TcpOptions<'a> {
        TcpOptions { bytes, offset: 0 }
    }
}

impl Iterator for TcpOptions<'_> {
    type Item = TcpOption;

    fn next(&mut self) -> Option<TcpOption> {
        let kind = *self.bytes.get(self.offset)?;
        let option = match kind {
            kind::END => None,
            kind::NOP => Some(TcpOption {
                kind,
                offset: self.offset,
                len: 1,
            }),
            _ => {
                let len = usize::from(*self.bytes.get(self.offset + 1)?);
                let fits = self
                    .offset
                    .checked_add(len)
                    .is_some_and(|end| end <= self.bytes.len());
                (len >= 2 && fits).then_some(TcpOption {
                    kind,
                    offset: self.offset,
                    len,
                })
            }
        };
        match option {
            Some(option) => {
                self.offset += option.len;
                Some(option)
            }
            None => {
                self.offset = self.bytes.len();
                None
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_iterate_and_stop_at_malformed_ones() {
        // MSS 1460, NOP, window scale 7, SACK permitted, then a bad option.
        let options = [2, 4, 0x05, 0xb4, 1, 3, 3, 7, 4, 2, 8, 1, 0];
        let kinds: Vec<(u8, usize, usize)> = TcpOptions::new(&options)
            .map(|o| (o.kind, o.offset, o.len))
            .collect();
        assert_eq!(kinds, [(2, 0, 4), (1, 4, 1), (3, 5, 3), (4, 8, 2)]);
        assert_eq!(TcpOptions::new(&[2]).count(), 0);
        assert_eq!(TcpOptions::new(&[5, 0, 1, 1]).count(), 0);
        assert_eq!(TcpOptions::new(&[1, 0, 1]).count(), 1);
    }

    #[test]
    fn headers_shorter_than_their_data_offset_are_rejected() {
        let mut header = [0u8; 24];
        header[DATA_OFFSET] = 6 << 4;
        assert!(TcpSegment::new_checked(&header[..]).is_ok());
        assert_eq!(
            TcpSegment::new_checked(&header[..23]).unwrap_err(),
            WireError::Truncated
        );
        header[DATA_OFFSET] = 4 << 4;
        assert_eq!(
            TcpSegment::new_checked(&header[..]).unwrap_err(),
            WireError::Malformed
        );
        assert!(TcpSegment::new_checked(&header[..12]).is_err());
    }
}
