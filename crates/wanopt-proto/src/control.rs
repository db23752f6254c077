//! Messages on the tunnel's control streams.
//!
//! When a tunnel comes up, each node opens one unidirectional QUIC stream to
//! the other (its *control stream*) and writes a [`ControlRepr::Hello`] on
//! it: the services it accepts on flows from this peer, optionally the
//! address the sender can be reached at directly (a core replica behind a
//! shared address advertises its own, so that the edge's redials reach the
//! replica that holds its cache), and, when it accepts data reduction, its
//! byte cache's hello (opaque here; `wanopt-codec` parses it). The stream
//! stays open; a node sends another hello when its cache changes identity
//! (`wanopt cache clear`) and may ask the peer to answer with its own.
//!
//! ```text
//! all integers big-endian:
//!  0      1      2             4         5        6
//!  +------+------+-------------+---------+--------+-------------+--------------+
//!  | ver  | kind |  length     | svc     | flags  | [advertise] | cache hello  |
//!  | =1   | =1   | (whole msg) | bits    |        | (flag bit 1)| (the rest)   |
//!  +------+------+-------------+---------+--------+-------------+--------------+
//! flags: bit 0 = reply wanted (answer with your own hello)
//!        bit 1 = advertise present: family (4 or 6), the address (4 or 16
//!                bytes), the UDP port (2 bytes)
//! ```

use crate::stream::{HeaderError, Services, VERSION};

/// Length of the fixed part of a control message.
pub const CONTROL_FIXED_LEN: usize = 6;
/// Largest control message we accept.
pub const CONTROL_MAX_LEN: usize = 1024;

const KIND_HELLO: u8 = 1;
const FLAG_REPLY_WANTED: u8 = 1;
const FLAG_ADVERTISE: u8 = 2;

mod field {
    use std::ops::Range;
    pub const VERSION: usize = 0;
    pub const KIND: usize = 1;
    pub const LENGTH: Range<usize> = 2..4;
    pub const SERVICES: usize = 4;
    pub const FLAGS: usize = 5;
    pub const PAYLOAD: usize = 6;
}

/// The length of the control message that starts with `prefix`, checked.
pub fn control_len(prefix: &[u8; 4]) -> Result<usize, HeaderError> {
    if prefix[field::VERSION] != VERSION {
        return Err(HeaderError::Version(prefix[field::VERSION]));
    }
    if prefix[field::KIND] != KIND_HELLO {
        return Err(HeaderError::Kind(prefix[field::KIND]));
    }
    let length = usize::from(u16::from_be_bytes([prefix[2], prefix[3]]));
    if !(CONTROL_FIXED_LEN..=CONTROL_MAX_LEN).contains(&length) {
        return Err(HeaderError::Length(length));
    }
    Ok(length)
}

/// A checked view of a control message in a buffer.
#[derive(Debug, Clone)]
pub struct Control<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Control<T> {
    /// Checks version, kind and length against the buffer.
    pub fn new_checked(buffer: T) -> Result<Self, HeaderError> {
        let bytes = buffer.as_ref();
        let prefix: &[u8; 4] =
            bytes
                .get(..4)
                .and_then(|p| p.try_into().ok())
                .ok_or(HeaderError::Truncated {
                    have: bytes.len(),
                    need: 4,
                })?;
        let length = control_len(prefix)?;
        if bytes.len() < length {
            return Err(HeaderError::Truncated {
                have: bytes.len(),
                need: length,
            });
        }
        Ok(Control { buffer })
    }

    /// Length of the whole message.
    pub fn length(&self) -> usize {
        let b = self.buffer.as_ref();
        usize::from(u16::from_be_bytes([
            b[field::LENGTH][0],
            b[field::LENGTH][1],
        ]))
    }

    /// Services the sender accepts on flows from us.
    pub fn services(&self) -> Services {
        Services(self.buffer.as_ref()[field::SERVICES])
    }

    /// Whether the sender wants our hello in return.
    pub fn reply_wanted(&self) -> bool {
        self.buffer.as_ref()[field::FLAGS] & FLAG_REPLY_WANTED != 0
    }

    /// Where the advertised address starts and ends, when the flag is set:
    /// `Err` when the family is unknown or the message too short for it.
    fn advertise_span(&self) -> Result<Option<(u8, std::ops::Range<usize>)>, HeaderError> {
        let b = self.buffer.as_ref();
        if b[field::FLAGS] & FLAG_ADVERTISE == 0 {
            return Ok(None);
        }
        let end = self.length();
        let family = *b
            .get(field::PAYLOAD)
            .filter(|_| field::PAYLOAD < end)
            .ok_or(HeaderError::Address)?;
        let len = match family {
            4 => 4 + 2,
            6 => 16 + 2,
            _ => return Err(HeaderError::Address),
        };
        let start = field::PAYLOAD + 1;
        if start + len > end {
            return Err(HeaderError::Address);
        }
        Ok(Some((family, start..start + len)))
    }

    /// The address the sender advertises, if any.
    pub fn advertise(&self) -> Result<Option<std::net::SocketAddr>, HeaderError> {
        use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
        let Some((family, span)) = self.advertise_span()? else {
            return Ok(None);
        };
        let bytes = &self.buffer.as_ref()[span];
        let (addr, port) = bytes.split_at(bytes.len() - 2);
        let ip = match family {
            4 => IpAddr::V4(Ipv4Addr::from(
                <[u8; 4]>::try_from(addr).map_err(|_| HeaderError::Address)?,
            )),
            _ => IpAddr::V6(Ipv6Addr::from(
                <[u8; 16]>::try_from(addr).map_err(|_| HeaderError::Address)?,
            )),
        };
        Ok(Some(SocketAddr::new(
            ip,
            u16::from_be_bytes([port[0], port[1]]),
        )))
    }

    /// The cache hello (possibly empty); `Err` when the advertised address
    /// is malformed (the hello starts after it).
    pub fn cache_hello(&self) -> Result<&[u8], HeaderError> {
        let start = match self.advertise_span()? {
            Some((_, span)) => span.end,
            None => field::PAYLOAD,
        };
        Ok(&self.buffer.as_ref()[start..self.length()])
    }
}

/// A parsed control message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ControlRepr {
    /// What the sender accepts, and its cache's state.
    Hello {
        /// Services the sender accepts on flows from the receiver.
        services: Services,
        /// The receiver should answer with its own hello.
        reply_wanted: bool,
        /// An address the sender is reached at directly (a replica's own,
        /// behind a cluster's shared address).
        advertise: Option<std::net::SocketAddr>,
        /// The sender's cache hello (`wanopt-codec` format), empty without
        /// data reduction.
        cache_hello: Vec<u8>,
    },
}

impl ControlRepr {
    /// Parses a checked view. Unknown flag bits are reserved and must be 0.
    pub fn parse<T: AsRef<[u8]>>(view: &Control<T>) -> Result<ControlRepr, HeaderError> {
        let flags = view.buffer.as_ref()[field::FLAGS];
        if flags & !(FLAG_REPLY_WANTED | FLAG_ADVERTISE) != 0 {
            return Err(HeaderError::Kind(flags));
        }
        Ok(ControlRepr::Hello {
            services: view.services(),
            reply_wanted: view.reply_wanted(),
            advertise: view.advertise()?,
            cache_hello: view.cache_hello()?.to_vec(),
        })
    }

    /// Encodes the message; fails if the cache hello is too long.
    pub fn emit(&self) -> Result<Vec<u8>, HeaderError> {
        let ControlRepr::Hello {
            services,
            reply_wanted,
            advertise,
            cache_hello,
        } = self;
        let mut address = Vec::new();
        if let Some(addr) = advertise {
            match addr.ip() {
                std::net::IpAddr::V4(ip) => {
                    address.push(4);
                    address.extend_from_slice(&ip.octets());
                }
                std::net::IpAddr::V6(ip) => {
                    address.push(6);
                    address.extend_from_slice(&ip.octets());
                }
            }
            address.extend_from_slice(&addr.port().to_be_bytes());
        }
        let length = CONTROL_FIXED_LEN + address.len() + cache_hello.len();
        if length > CONTROL_MAX_LEN {
            return Err(HeaderError::Length(length));
        }
        let mut flags = 0;
        if *reply_wanted {
            flags |= FLAG_REPLY_WANTED;
        }
        if advertise.is_some() {
            flags |= FLAG_ADVERTISE;
        }
        let mut out = Vec::with_capacity(length);
        out.push(VERSION);
        out.push(KIND_HELLO);
        out.extend_from_slice(&(length as u16).to_be_bytes());
        out.push(services.0);
        out.push(flags);
        out.extend_from_slice(&address);
        out.extend_from_slice(cache_hello);
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn hello_round_trips() {
        let repr = ControlRepr::Hello {
            services: Services::REDUCE,
            reply_wanted: true,
            advertise: None,
            cache_hello: vec![7; 50],
        };
        let bytes = repr.emit().unwrap();
        assert_eq!(bytes.len(), 56);
        let view = Control::new_checked(&bytes[..]).unwrap();
        assert_eq!(view.length(), 56);
        assert_eq!(ControlRepr::parse(&view).unwrap(), repr);
    }

    #[test]
    fn an_advertised_address_round_trips_before_the_cache_hello() {
        for addr in ["198.18.5.11:4433", "[2001:db8::5]:443"] {
            let repr = ControlRepr::Hello {
                services: Services::REDUCE,
                reply_wanted: false,
                advertise: Some(addr.parse().unwrap()),
                cache_hello: vec![9; 20],
            };
            let bytes = repr.emit().unwrap();
            let v6 = addr.starts_with('[');
            assert_eq!(bytes.len(), 6 + 1 + if v6 { 18 } else { 6 } + 20);
            assert_eq!(bytes[5], FLAG_ADVERTISE);
            let view = Control::new_checked(&bytes[..]).unwrap();
            assert_eq!(view.cache_hello().unwrap(), &[9; 20][..]);
            assert_eq!(ControlRepr::parse(&view).unwrap(), repr);
        }
        // The flag with an unknown family, or too few bytes for the
        // address, is refused.
        let mut bad = ControlRepr::Hello {
            services: Services::default(),
            reply_wanted: false,
            advertise: Some("10.0.0.1:1".parse().unwrap()),
            cache_hello: vec![],
        }
        .emit()
        .unwrap();
        bad[6] = 5;
        let view = Control::new_checked(&bad[..]).unwrap();
        assert_eq!(ControlRepr::parse(&view).unwrap_err(), HeaderError::Address);
        let mut short = vec![VERSION, KIND_HELLO, 0, 9, 0, FLAG_ADVERTISE, 4, 10, 0];
        let view = Control::new_checked(&short[..]).unwrap();
        assert_eq!(ControlRepr::parse(&view).unwrap_err(), HeaderError::Address);
        short[3] = 6;
        let view = Control::new_checked(&short[..6]).unwrap();
        assert_eq!(ControlRepr::parse(&view).unwrap_err(), HeaderError::Address);
    }

    #[test]
    fn bad_messages_are_rejected() {
        let good = ControlRepr::Hello {
            services: Services::default(),
            reply_wanted: false,
            advertise: None,
            cache_hello: vec![],
        }
        .emit()
        .unwrap();
        let mut v = good.clone();
        v[0] = 9;
        assert_eq!(
            Control::new_checked(&v[..]).unwrap_err(),
            HeaderError::Version(9)
        );
        let mut v = good.clone();
        v[1] = 2;
        assert_eq!(
            Control::new_checked(&v[..]).unwrap_err(),
            HeaderError::Kind(2)
        );
        let mut v = good.clone();
        v[3] = 5;
        assert_eq!(
            Control::new_checked(&v[..]).unwrap_err(),
            HeaderError::Length(5)
        );
        let mut v = good.clone();
        v[3] = 7;
        assert!(matches!(
            Control::new_checked(&v[..]).unwrap_err(),
            HeaderError::Truncated { have: 6, need: 7 }
        ));
        let mut v = good.clone();
        v[5] = 0x80;
        let view = Control::new_checked(&v[..]).unwrap();
        assert!(ControlRepr::parse(&view).is_err());
        assert!(Control::new_checked(&good[..3]).is_err());
        let long = ControlRepr::Hello {
            services: Services::default(),
            reply_wanted: false,
            advertise: None,
            cache_hello: vec![0; CONTROL_MAX_LEN],
        };
        assert!(long.emit().is_err());
    }

    proptest! {
        #[test]
        fn any_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..80)) {
            if let Ok(view) = Control::new_checked(&bytes[..]) {
                if let Ok(repr) = ControlRepr::parse(&view) {
                    let emitted = repr.emit().unwrap();
                    prop_assert_eq!(&emitted[..], &bytes[..view.length()]);
                }
            }
        }

        #[test]
        fn emitted_hellos_parse(services in any::<u8>(), reply in any::<bool>(),
                                advertise in proptest::option::of((any::<std::net::IpAddr>(), any::<u16>())
                                    .prop_map(|(ip, port)| std::net::SocketAddr::new(ip, port))),
                                hello in proptest::collection::vec(any::<u8>(), 0..100)) {
            let repr = ControlRepr::Hello { services: Services(services), reply_wanted: reply, advertise, cache_hello: hello };
            let bytes = repr.emit().unwrap();
            let view = Control::new_checked(&bytes[..]).unwrap();
            prop_assert_eq!(ControlRepr::parse(&view).unwrap(), repr);
        }
    }
}
