//! Messages on the tunnel's control streams.
//!
//! When a tunnel comes up, each node opens one unidirectional QUIC stream to
//! the other (its *control stream*) and writes a [`ControlRepr::Hello`] on
//! it: the services it accepts on flows from this peer and, when it accepts
//! data reduction, its byte cache's hello (opaque here; `wanopt-codec`
//! parses it). The stream stays open; a node sends another hello when its
//! cache changes identity (`wanopt cache clear`) and may ask the peer to
//! answer with its own.
//!
//! ```text
//! all integers big-endian:
//!  0      1      2             4         5        6
//!  +------+------+-------------+---------+--------+----------------------+
//!  | ver  | kind |  length     | svc     | flags  | cache hello          |
//!  | =1   | =1   | (whole msg) | bits    |        | (length - 6 bytes)   |
//!  +------+------+-------------+---------+--------+----------------------+
//! flags: bit 0 = reply wanted (answer with your own hello)
//! ```

use crate::stream::{HeaderError, Services, VERSION};

/// Length of the fixed part of a control message.
pub const CONTROL_FIXED_LEN: usize = 6;
/// Largest control message we accept.
pub const CONTROL_MAX_LEN: usize = 1024;

const KIND_HELLO: u8 = 1;
const FLAG_REPLY_WANTED: u8 = 1;

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

    /// The cache hello (possibly empty).
    pub fn cache_hello(&self) -> &[u8] {
        &self.buffer.as_ref()[field::PAYLOAD..self.length()]
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
        /// The sender's cache hello (`wanopt-codec` format), empty without
        /// data reduction.
        cache_hello: Vec<u8>,
    },
}

impl ControlRepr {
    /// Parses a checked view. Unknown flag bits are reserved and must be 0.
    pub fn parse<T: AsRef<[u8]>>(view: &Control<T>) -> Result<ControlRepr, HeaderError> {
        let flags = view.buffer.as_ref()[field::FLAGS];
        if flags & !FLAG_REPLY_WANTED != 0 {
            return Err(HeaderError::Kind(flags));
        }
        Ok(ControlRepr::Hello {
            services: view.services(),
            reply_wanted: view.reply_wanted(),
            cache_hello: view.cache_hello().to_vec(),
        })
    }

    /// Encodes the message; fails if the cache hello is too long.
    pub fn emit(&self) -> Result<Vec<u8>, HeaderError> {
        let ControlRepr::Hello {
            services,
            reply_wanted,
            cache_hello,
        } = self;
        let length = CONTROL_FIXED_LEN + cache_hello.len();
        if length > CONTROL_MAX_LEN {
            return Err(HeaderError::Length(length));
        }
        let mut out = Vec::with_capacity(length);
        out.push(VERSION);
        out.push(KIND_HELLO);
        out.extend_from_slice(&(length as u16).to_be_bytes());
        out.push(services.0);
        out.push(if *reply_wanted { FLAG_REPLY_WANTED } else { 0 });
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
            cache_hello: vec![7; 50],
        };
        let bytes = repr.emit().unwrap();
        assert_eq!(bytes.len(), 56);
        let view = Control::new_checked(&bytes[..]).unwrap();
        assert_eq!(view.length(), 56);
        assert_eq!(ControlRepr::parse(&view).unwrap(), repr);
    }

    #[test]
    fn bad_messages_are_rejected() {
        let good = ControlRepr::Hello {
            services: Services::default(),
            reply_wanted: false,
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
                                hello in proptest::collection::vec(any::<u8>(), 0..100)) {
            let repr = ControlRepr::Hello { services: Services(services), reply_wanted: reply, cache_hello: hello };
            let bytes = repr.emit().unwrap();
            let view = Control::new_checked(&bytes[..]).unwrap();
            prop_assert_eq!(ControlRepr::parse(&view).unwrap(), repr);
        }
    }
}
