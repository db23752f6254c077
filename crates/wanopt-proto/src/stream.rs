//! The header that opens every tunnel stream, and the core's reply.
//!
//! Each intercepted TCP flow is one bidirectional QUIC stream. The edge writes
//! an [`OpenRepr`] first, then the client's bytes; the core answers with a
//! [`ReplyRepr`] first, then the server's bytes. Both are parsed through a
//! checked view ([`Open`], [`Reply`]) so that no byte from the network reaches
//! a panicking index or unchecked arithmetic.
//!
//! ```text
//! open (edge -> core), all integers big-endian:
//!  0      1      2             4                       12     13
//!  +------+------+-------------+-----------------------+------+---------+-----------+
//!  | ver  | kind |  length     |       flow id         | svc  | dest    | source    |
//!  | =1   | =1   | (whole hdr) |                       | bits | address | address   |
//!  +------+------+-------------+-----------------------+------+---------+-----------+
//!
//! address: type (1 = IPv4, 2 = IPv6, 3 = domain name), then
//!          4 bytes | 16 bytes | 1 length byte + 1..=255 name bytes, then port (2)
//!
//! reply (core -> edge): ver (=1), kind (=2), status, reserved (=0)
//! ```

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

/// Version of the stream header this crate reads and writes.
pub const VERSION: u8 = 1;
/// Length of the fixed part of the open header, up to the addresses.
pub const OPEN_FIXED_LEN: usize = 13;
/// Largest open header we accept; anything longer is malformed.
pub const OPEN_MAX_LEN: usize = OPEN_FIXED_LEN + 2 * (2 + 255 + 2);
/// Length of the reply header.
pub const REPLY_LEN: usize = 4;
/// How long a core sends filler on a [`Services::PROBE`] stream,
/// milliseconds.
pub const PROBE_SPAN_MS: u64 = 2000;

const KIND_OPEN: u8 = 1;
const KIND_REPLY: u8 = 2;

mod field {
    use std::ops::Range;
    pub const VERSION: usize = 0;
    pub const KIND: usize = 1;
    pub const LENGTH: Range<usize> = 2..4;
    pub const FLOW_ID: Range<usize> = 4..12;
    pub const SERVICES: usize = 12;
    pub const ADDRESSES: usize = 13;
    pub const STATUS: usize = 2;
}

const ADDR_V4: u8 = 1;
const ADDR_V6: u8 = 2;
const ADDR_DOMAIN: u8 = 3;

/// Why a header could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HeaderError {
    /// The buffer ended before the header did.
    #[error("stream header truncated: {have} of {need} bytes")]
    Truncated {
        /// Bytes available.
        have: usize,
        /// Bytes the header needs.
        need: usize,
    },
    /// The peer speaks a header version we do not know.
    #[error("unsupported stream header version {0}")]
    Version(u8),
    /// The header is not of the kind expected at this point of the stream.
    #[error("unexpected stream header kind {0}")]
    Kind(u8),
    /// The declared length is outside the allowed range.
    #[error("stream header length {0} out of range")]
    Length(usize),
    /// An address has an unknown type, an empty name or a name that is not text.
    #[error("malformed address in stream header")]
    Address,
    /// Bytes left over after the last field.
    #[error("{0} trailing bytes in stream header")]
    Trailing(usize),
    /// The reply status is not one we know.
    #[error("unknown reply status {0}")]
    Status(u8),
}

/// A destination as the edge names it: an address, or a name the core resolves.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Target {
    /// An IP address and port.
    Addr(SocketAddr),
    /// A host name (1 to 255 bytes of ASCII) and port, resolved by the core.
    Domain(String, u16),
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Target::Addr(addr) => addr.fmt(f),
            Target::Domain(name, port) => write!(f, "{name}:{port}"),
        }
    }
}

impl Target {
    fn wire_len(&self) -> usize {
        match self {
            Target::Addr(SocketAddr::V4(_)) => 1 + 4 + 2,
            Target::Addr(SocketAddr::V6(_)) => 1 + 16 + 2,
            Target::Domain(name, _) => 1 + 1 + name.len() + 2,
        }
    }

    /// Parses one address at the start of `bytes`; returns it and its length.
    fn parse(bytes: &[u8]) -> Result<(Target, usize), HeaderError> {
        let (&kind, rest) = bytes.split_first().ok_or(HeaderError::Address)?;
        let (ip_or_name, len): (Result<IpAddr, String>, usize) = match kind {
            ADDR_V4 => {
                let raw: [u8; 4] = rest
                    .get(..4)
                    .and_then(|s| s.try_into().ok())
                    .ok_or(HeaderError::Address)?;
                (Ok(IpAddr::V4(Ipv4Addr::from(raw))), 4)
            }
            ADDR_V6 => {
                let raw: [u8; 16] = rest
                    .get(..16)
                    .and_then(|s| s.try_into().ok())
                    .ok_or(HeaderError::Address)?;
                (Ok(IpAddr::V6(Ipv6Addr::from(raw))), 16)
            }
            ADDR_DOMAIN => {
                let (&n, rest) = rest.split_first().ok_or(HeaderError::Address)?;
                let n = usize::from(n);
                let name = rest.get(..n).ok_or(HeaderError::Address)?;
                if name.is_empty() || !name.iter().all(|b| b.is_ascii_graphic()) {
                    return Err(HeaderError::Address);
                }
                let name = String::from_utf8(name.to_vec()).map_err(|_| HeaderError::Address)?;
                (Err(name), 1 + n)
            }
            _ => return Err(HeaderError::Address),
        };
        let port_bytes: [u8; 2] = rest
            .get(len..len + 2)
            .and_then(|s| s.try_into().ok())
            .ok_or(HeaderError::Address)?;
        let port = u16::from_be_bytes(port_bytes);
        let target = match ip_or_name {
            Ok(ip) => Target::Addr(SocketAddr::new(ip, port)),
            Err(name) => Target::Domain(name, port),
        };
        Ok((target, 1 + len + 2))
    }

    fn emit(&self, out: &mut Vec<u8>) {
        match self {
            Target::Addr(SocketAddr::V4(a)) => {
                out.push(ADDR_V4);
                out.extend_from_slice(&a.ip().octets());
            }
            Target::Addr(SocketAddr::V6(a)) => {
                out.push(ADDR_V6);
                out.extend_from_slice(&a.ip().octets());
            }
            Target::Domain(name, _) => {
                out.push(ADDR_DOMAIN);
                // `OpenRepr::emit` checked the length; truncation cannot happen.
                out.push(u8::try_from(name.len()).unwrap_or(u8::MAX));
                out.extend_from_slice(name.as_bytes());
            }
        }
        let port = match self {
            Target::Addr(a) => a.port(),
            Target::Domain(_, port) => *port,
        };
        out.extend_from_slice(&port.to_be_bytes());
    }
}

/// Bit set of the services the edge asks the core to apply to a flow.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Services(pub u8);

impl Services {
    /// Data reduction (compression and byte cache) is applied to the stream.
    pub const REDUCE: Services = Services(1);
    /// The stream opens a UDP flow: the core binds a socket to the
    /// destination and the flow's datagrams ride QUIC DATAGRAM frames
    /// ([`crate::udp_flow`]); the stream carries the reply and, by its
    /// end, the flow's end. In a control hello: the node carries UDP flows.
    pub const UDP: Services = Services(2);
    /// A UDP flow is real-time (its traffic class says `realtime`, or the
    /// edge has no classes): both nodes send its datagrams marked, so
    /// that when their WAN paths duplicate each also goes on every other
    /// path, and FEC codes them in its call strand.
    pub const REALTIME: Services = Services(4);
    /// The flow goes ahead of the others (traffic class priority
    /// `high`): its stream's data is sent first.
    pub const URGENT: Services = Services(8);
    /// The flow goes behind the others (priority `low`).
    pub const BACKGROUND: Services = Services(16);
    /// Not a flow: the edge measures what the tunnel carries toward it
    /// (a tunnel over TCP, against one over UDP that loses). The core
    /// answers `Ok` and sends filler for [`PROBE_SPAN_MS`], then ends
    /// the stream; it connects to nothing.
    pub const PROBE: Services = Services(32);

    /// Whether every service of `other` is in `self`.
    pub fn contains(self, other: Services) -> bool {
        self.0 & other.0 == other.0
    }

    /// `self` with the services of `other` added.
    pub fn with(self, other: Services) -> Services {
        Services(self.0 | other.0)
    }

    /// `self` with the services of `other` removed.
    pub fn without(self, other: Services) -> Services {
        Services(self.0 & !other.0)
    }
}

/// A checked view of an open header in a buffer.
#[derive(Debug, Clone)]
pub struct Open<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Open<T> {
    /// Wraps `buffer` after checking that it holds a whole fixed part and that
    /// the declared length fits in it.
    pub fn new_checked(buffer: T) -> Result<Self, HeaderError> {
        let bytes = buffer.as_ref();
        if bytes.len() < OPEN_FIXED_LEN {
            return Err(HeaderError::Truncated {
                have: bytes.len(),
                need: OPEN_FIXED_LEN,
            });
        }
        if bytes[field::VERSION] != VERSION {
            return Err(HeaderError::Version(bytes[field::VERSION]));
        }
        if bytes[field::KIND] != KIND_OPEN {
            return Err(HeaderError::Kind(bytes[field::KIND]));
        }
        let view = Open { buffer };
        let length = view.length();
        if !(OPEN_FIXED_LEN..=OPEN_MAX_LEN).contains(&length) {
            return Err(HeaderError::Length(length));
        }
        let have = view.buffer.as_ref().len();
        if have < length {
            return Err(HeaderError::Truncated { have, need: length });
        }
        Ok(view)
    }

    /// Total length of the header, as declared.
    pub fn length(&self) -> usize {
        let b = self.buffer.as_ref();
        usize::from(u16::from_be_bytes([
            b[field::LENGTH.start],
            b[field::LENGTH.end - 1],
        ]))
    }

    /// The flow identifier chosen by the edge.
    pub fn flow_id(&self) -> u64 {
        let mut raw = [0u8; 8];
        raw.copy_from_slice(&self.buffer.as_ref()[field::FLOW_ID]);
        u64::from_be_bytes(raw)
    }

    /// Services requested for the flow.
    pub fn services(&self) -> Services {
        Services(self.buffer.as_ref()[field::SERVICES])
    }

    /// The address bytes (destination then source) within the declared length.
    fn addresses(&self) -> &[u8] {
        &self.buffer.as_ref()[field::ADDRESSES..self.length()]
    }
}

/// Reads the declared length of an open header from its first four bytes, so a
/// reader knows how many more bytes to wait for.
pub fn open_header_len(prefix: &[u8; 4]) -> Result<usize, HeaderError> {
    if prefix[field::VERSION] != VERSION {
        return Err(HeaderError::Version(prefix[field::VERSION]));
    }
    if prefix[field::KIND] != KIND_OPEN {
        return Err(HeaderError::Kind(prefix[field::KIND]));
    }
    let length = usize::from(u16::from_be_bytes([prefix[2], prefix[3]]));
    if !(OPEN_FIXED_LEN..=OPEN_MAX_LEN).contains(&length) {
        return Err(HeaderError::Length(length));
    }
    Ok(length)
}

/// The parsed contents of an open header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpenRepr {
    /// Identifier of the flow on the edge, for logs and the flow table.
    pub flow_id: u64,
    /// Services requested.
    pub services: Services,
    /// Where the core must connect.
    pub destination: Target,
    /// The client that opened the flow (for logs and policy).
    pub source: SocketAddr,
}

impl OpenRepr {
    /// Parses a checked view into its representation.
    pub fn parse<T: AsRef<[u8]>>(view: &Open<T>) -> Result<OpenRepr, HeaderError> {
        let addresses = view.addresses();
        let (destination, used) = Target::parse(addresses)?;
        let rest = addresses.get(used..).ok_or(HeaderError::Address)?;
        let (source, used_source) = Target::parse(rest)?;
        let source = match source {
            Target::Addr(addr) => addr,
            Target::Domain(..) => return Err(HeaderError::Address),
        };
        let trailing = rest.len() - used_source;
        if trailing != 0 {
            return Err(HeaderError::Trailing(trailing));
        }
        Ok(OpenRepr {
            flow_id: view.flow_id(),
            services: view.services(),
            destination,
            source,
        })
    }

    /// Length of the emitted header.
    pub fn buffer_len(&self) -> usize {
        OPEN_FIXED_LEN + self.destination.wire_len() + Target::Addr(self.source).wire_len()
    }

    /// Serializes the header. Fails only for a domain name that cannot be sent
    /// (empty, longer than 255 bytes, or not printable ASCII).
    pub fn emit(&self) -> Result<Vec<u8>, HeaderError> {
        if let Target::Domain(name, _) = &self.destination {
            if name.is_empty() || name.len() > 255 || !name.bytes().all(|b| b.is_ascii_graphic()) {
                return Err(HeaderError::Address);
            }
        }
        let length = self.buffer_len();
        let mut out = Vec::with_capacity(length);
        out.push(VERSION);
        out.push(KIND_OPEN);
        // buffer_len() <= OPEN_MAX_LEN < u16::MAX.
        out.extend_from_slice(&u16::try_from(length).unwrap_or(u16::MAX).to_be_bytes());
        out.extend_from_slice(&self.flow_id.to_be_bytes());
        out.push(self.services.0);
        self.destination.emit(&mut out);
        Target::Addr(self.source).emit(&mut out);
        debug_assert_eq!(out.len(), length);
        Ok(out)
    }
}

/// The outcome the core reports for a flow before any server byte.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    /// Connected to the destination; server bytes follow.
    Connected = 0,
    /// The core's allowlist does not permit the destination.
    Denied = 1,
    /// The destination refused the connection (RST).
    Refused = 2,
    /// The destination could not be reached (no route, host unreachable).
    Unreachable = 3,
    /// The connection attempt timed out.
    TimedOut = 4,
    /// The destination name did not resolve.
    NameNotFound = 5,
    /// The core is shutting down or failed otherwise.
    Unavailable = 6,
}

impl Status {
    fn from_wire(raw: u8) -> Result<Status, HeaderError> {
        Ok(match raw {
            0 => Status::Connected,
            1 => Status::Denied,
            2 => Status::Refused,
            3 => Status::Unreachable,
            4 => Status::TimedOut,
            5 => Status::NameNotFound,
            6 => Status::Unavailable,
            other => return Err(HeaderError::Status(other)),
        })
    }
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Status::Connected => "connected",
            Status::Denied => "denied by the core's allowlist",
            Status::Refused => "connection refused by the destination",
            Status::Unreachable => "destination unreachable",
            Status::TimedOut => "connection to the destination timed out",
            Status::NameNotFound => "destination name did not resolve",
            Status::Unavailable => "core unavailable",
        })
    }
}

/// A checked view of a reply header.
#[derive(Debug, Clone)]
pub struct Reply<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Reply<T> {
    /// Wraps `buffer` after checking version, kind and length.
    pub fn new_checked(buffer: T) -> Result<Self, HeaderError> {
        let b = buffer.as_ref();
        if b.len() < REPLY_LEN {
            return Err(HeaderError::Truncated {
                have: b.len(),
                need: REPLY_LEN,
            });
        }
        if b[field::VERSION] != VERSION {
            return Err(HeaderError::Version(b[field::VERSION]));
        }
        if b[field::KIND] != KIND_REPLY {
            return Err(HeaderError::Kind(b[field::KIND]));
        }
        Ok(Reply { buffer })
    }

    /// The status byte, decoded.
    pub fn status(&self) -> Result<Status, HeaderError> {
        Status::from_wire(self.buffer.as_ref()[field::STATUS])
    }
}

/// The parsed contents of a reply header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReplyRepr {
    /// What happened to the connection attempt.
    pub status: Status,
}

impl ReplyRepr {
    /// Parses a checked view.
    pub fn parse<T: AsRef<[u8]>>(view: &Reply<T>) -> Result<ReplyRepr, HeaderError> {
        Ok(ReplyRepr {
            status: view.status()?,
        })
    }

    /// Serializes the reply.
    pub fn emit(&self) -> [u8; REPLY_LEN] {
        [VERSION, KIND_REPLY, self.status as u8, 0]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn sample() -> OpenRepr {
        OpenRepr {
            flow_id: 0x0102_0304_0506_0708,
            services: Services::REDUCE,
            destination: Target::Addr("192.0.2.7:443".parse().unwrap()),
            source: "[2001:db8::1]:50000".parse().unwrap(),
        }
    }

    #[test]
    fn open_round_trips_and_has_the_documented_layout() {
        let repr = sample();
        let bytes = repr.emit().unwrap();
        assert_eq!(bytes.len(), repr.buffer_len());
        assert_eq!(&bytes[..4], &[1, 1, 0, bytes.len() as u8]);
        assert_eq!(&bytes[4..12], &[1, 2, 3, 4, 5, 6, 7, 8]);
        assert_eq!(bytes[12], 1);
        assert_eq!(&bytes[13..20], &[1, 192, 0, 2, 7, 1, 187]);
        let prefix: [u8; 4] = bytes[..4].try_into().unwrap();
        assert_eq!(open_header_len(&prefix).unwrap(), bytes.len());
        let parsed = OpenRepr::parse(&Open::new_checked(&bytes[..]).unwrap()).unwrap();
        assert_eq!(parsed, repr);
    }

    #[test]
    fn domain_targets_round_trip_and_bad_names_are_refused() {
        let mut repr = sample();
        repr.destination = Target::Domain("server.example".into(), 8080);
        let bytes = repr.emit().unwrap();
        assert_eq!(
            OpenRepr::parse(&Open::new_checked(&bytes[..]).unwrap()).unwrap(),
            repr
        );
        repr.destination = Target::Domain(String::new(), 1);
        assert_eq!(repr.emit(), Err(HeaderError::Address));
        repr.destination = Target::Domain("a".repeat(256), 1);
        assert_eq!(repr.emit(), Err(HeaderError::Address));
        repr.destination = Target::Domain("has space".into(), 1);
        assert_eq!(repr.emit(), Err(HeaderError::Address));
    }

    #[test]
    fn malformed_open_headers_are_rejected_with_their_cause() {
        let good = sample().emit().unwrap();
        assert!(matches!(
            Open::new_checked(&good[..5]),
            Err(HeaderError::Truncated { .. })
        ));
        let mut bad = good.clone();
        bad[0] = 9;
        assert_eq!(
            Open::new_checked(&bad[..]).unwrap_err(),
            HeaderError::Version(9)
        );
        let mut bad = good.clone();
        bad[1] = KIND_REPLY;
        assert_eq!(
            Open::new_checked(&bad[..]).unwrap_err(),
            HeaderError::Kind(2)
        );
        let mut bad = good.clone();
        bad[3] = 5;
        assert_eq!(
            Open::new_checked(&bad[..]).unwrap_err(),
            HeaderError::Length(5)
        );
        let mut bad = good.clone();
        bad[13] = 7; // unknown address type
        let view = Open::new_checked(&bad[..]).unwrap();
        assert_eq!(OpenRepr::parse(&view).unwrap_err(), HeaderError::Address);
        let mut bad = good.clone();
        bad.push(0);
        bad[3] += 1; // one trailing byte inside the declared length
        let view = Open::new_checked(&bad[..]).unwrap();
        assert_eq!(
            OpenRepr::parse(&view).unwrap_err(),
            HeaderError::Trailing(1)
        );
    }

    #[test]
    fn replies_round_trip_and_unknown_status_is_an_error() {
        for status in [
            Status::Connected,
            Status::Denied,
            Status::Refused,
            Status::Unreachable,
            Status::TimedOut,
            Status::NameNotFound,
            Status::Unavailable,
        ] {
            let bytes = ReplyRepr { status }.emit();
            let view = Reply::new_checked(&bytes[..]).unwrap();
            assert_eq!(ReplyRepr::parse(&view).unwrap().status, status);
        }
        let view = Reply::new_checked(&[1u8, 2, 200, 0][..]).unwrap();
        assert_eq!(
            ReplyRepr::parse(&view).unwrap_err(),
            HeaderError::Status(200)
        );
        assert!(Reply::new_checked(&[1u8, 1, 0, 0][..]).is_err());
    }

    proptest! {
        #[test]
        fn parsing_arbitrary_bytes_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..600)) {
            if let Ok(view) = Open::new_checked(&bytes[..]) {
                let _ = OpenRepr::parse(&view);
            }
            if let Ok(view) = Reply::new_checked(&bytes[..]) {
                let _ = ReplyRepr::parse(&view);
            }
        }

        #[test]
        fn every_emitted_header_parses_back(flow_id: u64, services: u8, v6: bool, port: u16, sport: u16, a: [u8; 16]) {
            let ip: IpAddr = if v6 { Ipv6Addr::from(a).into() } else { Ipv4Addr::new(a[0], a[1], a[2], a[3]).into() };
            let repr = OpenRepr {
                flow_id,
                services: Services(services),
                destination: Target::Addr(SocketAddr::new(ip, port)),
                source: SocketAddr::new(ip, sport),
            };
            let bytes = repr.emit().unwrap();
            let view = Open::new_checked(&bytes[..]).unwrap();
            prop_assert_eq!(OpenRepr::parse(&view).unwrap(), repr);
        }
    }
}
