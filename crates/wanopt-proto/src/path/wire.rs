//! The path probe: a 36-byte datagram (40 with a rate) each node sends on
//! every path to its peer, authenticated with a key from the TLS exporter.
//!
//! ```text
//!  0 kind     0x25 (QUIC's fixed bit 0x40 is clear: never a QUIC packet)
//!  1 flags    bits 7-4 version (1); bit 0 BIND; bit 1 FROM_CLIENT; bit 2
//!             ANSWER (sent at once in answer to a probe: never answered
//!             itself); bit 3 RATE (the probe is 40 bytes, with `rate`)
//!  2 path     the path's number, 1..=15 (the client's numbering)
//!  3 mode     bits 6-0 the sending lane's mode: 0 failover, 1 plain,
//!             2 duplicate, 3 spread-fec, 4 bond; bit 7 REALTIME (the
//!             client's: real-time datagrams take this path, chosen by an
//!             SLA)
//!  4 token    u32, from the exporter: which connection
//!  8 seq      u32, per path and sender, strictly increasing
//! 12 sent_us  u32, the sender's clock in µs (wraps; only echoed back)
//! 16 echo_us  u32, sent_us of the newest probe received on this path (0: none)
//! 20 hold_us  u32, time from receiving that probe to sending this one
//! 24 received u32, probes received on this path so far
//! 28 tag      8 bytes: BLAKE3 keyed hash of bytes 0..28, truncated
//!
//! with RATE:
//! 28 rate     u32, the most the sender asks its peer to send on this path,
//!             kbit/s of IP packets (its `--path ...,down=`)
//! 32 tag      8 bytes: BLAKE3 keyed hash of bytes 0..32, truncated
//! ```
//!
//! All integers are big-endian. A probe may be padded past its length (to
//! test a path's MTU); the padding is neither read nor authenticated. A
//! node of a release before RATE or REALTIME drops probes that carry it.

use std::fmt;
use std::ops::Range;

use thiserror::Error;

/// First byte of a path probe.
pub const KIND: u8 = 0x25;
/// Length of a path probe without padding.
pub const PROBE_LEN: usize = 36;
/// Length of a path probe with a rate ([`ProbeRepr::rate_kbit`]).
pub const PROBE_RATE_LEN: usize = 40;
/// The format's version (the high nibble of `flags`).
pub const VERSION: u8 = 1;
/// Highest path number.
pub const MAX_PATH: u8 = 15;
/// Bytes of keying material [`PathKey::from_exporter`] takes.
pub const EXPORTER_LEN: usize = 36;
/// The TLS exporter label the keying material comes from (RFC 5705).
pub const EXPORTER_LABEL: &[u8] = b"EXPORTER-wanopt-path-1";

/// `flags` bit 0: the sender asks its peer to bind this path.
const BIND: u8 = 0x01;
/// `flags` bit 1: the sender is the connection's client.
const FROM_CLIENT: u8 = 0x02;
/// `flags` bit 2: the probe answers one just received.
const ANSWER: u8 = 0x04;
/// `flags` bit 3: the probe carries a rate.
const RATE: u8 = 0x08;
/// `mode` bit 7: real-time datagrams take this path.
const REALTIME: u8 = 0x80;

mod field {
    use std::ops::Range;

    pub const KIND: usize = 0;
    pub const FLAGS: usize = 1;
    pub const PATH: usize = 2;
    pub const MODE: usize = 3;
    pub const TOKEN: Range<usize> = 4..8;
    pub const SEQ: Range<usize> = 8..12;
    pub const SENT_US: Range<usize> = 12..16;
    pub const ECHO_US: Range<usize> = 16..20;
    pub const HOLD_US: Range<usize> = 20..24;
    pub const RECEIVED: Range<usize> = 24..28;
    pub const SIGNED: Range<usize> = 0..28;
    pub const TAG: Range<usize> = 28..36;
    pub const RATE: Range<usize> = 28..32;
    pub const RATE_SIGNED: Range<usize> = 0..32;
    pub const RATE_TAG: Range<usize> = 32..40;
}

/// Why bytes are not a valid path probe.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum ProbeError {
    /// Fewer bytes than a probe.
    #[error("path probe of {0} bytes is shorter than {PROBE_LEN}")]
    Short(usize),
    /// The first byte is not [`KIND`].
    #[error("not a path probe (first byte {0:#04x})")]
    Kind(u8),
    /// A version this node does not speak.
    #[error("path probe of version {0} (this node speaks version {VERSION})")]
    Version(u8),
    /// The token names another connection.
    #[error("path probe for another connection (token {0:#010x})")]
    Token(u32),
    /// The tag does not match the key: forged, corrupted, or another key.
    #[error("path probe tag does not verify")]
    Tag,
    /// A path number outside 1..=15.
    #[error("path probe on path {0} (paths are numbered 1 to {MAX_PATH})")]
    Path(u8),
    /// A mode byte outside the five modes.
    #[error("path probe with unknown mode {0}")]
    Mode(u8),
}

/// A path's number, 1 to [`MAX_PATH`]: the position of its `--path` on the
/// client, learned from BIND probes on the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PathId(u8);

impl PathId {
    /// The path numbered `number`, if it is 1 to [`MAX_PATH`].
    pub fn new(number: u8) -> Option<PathId> {
        (1..=MAX_PATH).contains(&number).then_some(PathId(number))
    }

    /// The path's number.
    pub fn get(self) -> u8 {
        self.0
    }

    /// The path's place in a table of [`MAX_PATH`] entries (0-based).
    pub fn index(self) -> usize {
        usize::from(self.0 - 1)
    }

    /// Every path number, in order.
    pub fn all() -> impl Iterator<Item = PathId> {
        (1..=MAX_PATH).map(PathId)
    }
}

impl fmt::Display for PathId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// How a lane uses its paths.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PathMode {
    /// One path at a time, the first that works; FEC as configured.
    Failover,
    /// Failover without FEC.
    Plain,
    /// Every datagram on every path that is not down.
    Duplicate,
    /// Data on the failover path, FEC repairs on another.
    SpreadFec,
    /// Every datagram on the path where it arrives first, each path paced
    /// by its own controller; the receiver restores the order
    /// ([`crate::bond`]).
    Bond,
}

impl PathMode {
    /// The mode's byte in a probe.
    pub fn to_byte(self) -> u8 {
        match self {
            PathMode::Failover => 0,
            PathMode::Plain => 1,
            PathMode::Duplicate => 2,
            PathMode::SpreadFec => 3,
            PathMode::Bond => 4,
        }
    }

    /// The mode of a probe's byte.
    pub fn from_byte(byte: u8) -> Result<PathMode, ProbeError> {
        match byte {
            0 => Ok(PathMode::Failover),
            1 => Ok(PathMode::Plain),
            2 => Ok(PathMode::Duplicate),
            3 => Ok(PathMode::SpreadFec),
            4 => Ok(PathMode::Bond),
            other => Err(ProbeError::Mode(other)),
        }
    }

    /// The mode's name as flags and status spell it.
    pub fn name(self) -> &'static str {
        match self {
            PathMode::Failover => "failover",
            PathMode::Plain => "plain",
            PathMode::Duplicate => "duplicate",
            PathMode::SpreadFec => "spread-fec",
            PathMode::Bond => "bond",
        }
    }
}

impl fmt::Display for PathMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One connection's probe key and token, from its TLS exporter.
#[derive(Clone, PartialEq, Eq)]
pub struct PathKey {
    key: [u8; 32],
    token: u32,
}

impl PathKey {
    /// The key from [`EXPORTER_LEN`] bytes of keying material exported
    /// with [`EXPORTER_LABEL`] and an empty context: bytes 0..32 are the
    /// BLAKE3 key, 32..36 the token.
    pub fn from_exporter(material: &[u8; EXPORTER_LEN]) -> PathKey {
        let mut key = [0; 32];
        key.copy_from_slice(&material[..32]);
        let token = be32(&material[32..36]);
        PathKey { key, token }
    }

    /// The token probes of this connection carry.
    pub fn token(&self) -> u32 {
        self.token
    }

    fn tag(&self, signed: &[u8]) -> [u8; 8] {
        let hash = blake3::keyed_hash(&self.key, signed);
        let mut tag = [0; 8];
        tag.copy_from_slice(&hash.as_bytes()[..8]);
        tag
    }
}

impl fmt::Debug for PathKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PathKey")
            .field("token", &format_args!("{:#010x}", self.token))
            .finish_non_exhaustive()
    }
}

fn be32(bytes: &[u8]) -> u32 {
    u32::from_be_bytes([bytes[0], bytes[1], bytes[2], bytes[3]])
}

/// Whether `a` and `b` are equal, in time that does not depend on where
/// they differ.
fn equal_in_constant_time(a: &[u8; 8], b: &[u8]) -> bool {
    let difference = a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y));
    std::hint::black_box(difference) == 0
}

/// A checked view of a path probe in a buffer.
#[derive(Debug, Clone)]
pub struct Probe<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Probe<T> {
    /// Wraps `buffer` after checking its length, kind and version.
    pub fn new_checked(buffer: T) -> Result<Self, ProbeError> {
        let bytes = buffer.as_ref();
        if bytes.len() < PROBE_LEN {
            return Err(ProbeError::Short(bytes.len()));
        }
        if bytes[field::KIND] != KIND {
            return Err(ProbeError::Kind(bytes[field::KIND]));
        }
        let version = bytes[field::FLAGS] >> 4;
        if version != VERSION {
            return Err(ProbeError::Version(version));
        }
        if bytes[field::FLAGS] & RATE != 0 && bytes.len() < PROBE_RATE_LEN {
            return Err(ProbeError::Short(bytes.len()));
        }
        Ok(Probe { buffer })
    }

    fn word(&self, range: Range<usize>) -> u32 {
        be32(&self.buffer.as_ref()[range])
    }

    /// The flags byte.
    pub fn flags(&self) -> u8 {
        self.buffer.as_ref()[field::FLAGS]
    }

    /// The path number byte (unchecked: see [`ProbeRepr::parse`]).
    pub fn path_number(&self) -> u8 {
        self.buffer.as_ref()[field::PATH]
    }

    /// The connection's token: which key to verify the probe with.
    pub fn token(&self) -> u32 {
        self.word(field::TOKEN)
    }

    /// The sender's sequence number.
    pub fn seq(&self) -> u32 {
        self.word(field::SEQ)
    }

    /// Whether it carries a rate (and is 40 bytes long).
    fn has_rate(&self) -> bool {
        self.flags() & RATE != 0
    }

    /// Checks the token and the tag against `key`.
    pub fn verify(&self, key: &PathKey) -> Result<(), ProbeError> {
        let bytes = self.buffer.as_ref();
        if self.token() != key.token {
            return Err(ProbeError::Token(self.token()));
        }
        let (signed, tag) = match self.has_rate() {
            true => (field::RATE_SIGNED, field::RATE_TAG),
            false => (field::SIGNED, field::TAG),
        };
        let expected = key.tag(&bytes[signed]);
        if !equal_in_constant_time(&expected, &bytes[tag]) {
            return Err(ProbeError::Tag);
        }
        Ok(())
    }
}

/// A path probe's fields (the token and tag come from the [`PathKey`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProbeRepr {
    /// The sender asks its peer to bind this path (the client's probes).
    pub bind: bool,
    /// The sender is the connection's client.
    pub from_client: bool,
    /// The sender sent it at once, in answer to a probe it received (a
    /// probe that answers is not answered).
    pub answer: bool,
    /// The path the probe was sent on.
    pub path: PathId,
    /// The sending lane's mode.
    pub mode: PathMode,
    /// The sender's sequence number on this path.
    pub seq: u32,
    /// The sender's clock in µs when it sent the probe.
    pub sent_us: u32,
    /// `sent_us` of the newest probe the sender received on this path,
    /// 0 for none.
    pub echo_us: u32,
    /// µs from receiving that probe to sending this one.
    pub hold_us: u32,
    /// Probes the sender has received on this path.
    pub received: u32,
    /// The most the sender asks its peer to send on this path, kbit/s of
    /// IP packets (the edge's declared `down=` rate); `None`: no limit.
    pub rate_kbit: Option<u32>,
    /// Real-time datagrams take this path (the client's SLA choice).
    pub realtime: bool,
}

impl ProbeRepr {
    /// The fields of `probe`, after checking its token and tag against
    /// `key` and its fields against the format.
    pub fn parse<T: AsRef<[u8]>>(probe: &Probe<T>, key: &PathKey) -> Result<Self, ProbeError> {
        probe.verify(key)?;
        let flags = probe.flags();
        let number = probe.path_number();
        let path = PathId::new(number).ok_or(ProbeError::Path(number))?;
        let mode_byte = probe.buffer.as_ref()[field::MODE];
        let mode = PathMode::from_byte(mode_byte & !REALTIME)?;
        Ok(ProbeRepr {
            bind: flags & BIND != 0,
            from_client: flags & FROM_CLIENT != 0,
            answer: flags & ANSWER != 0,
            path,
            mode,
            seq: probe.seq(),
            sent_us: probe.word(field::SENT_US),
            echo_us: probe.word(field::ECHO_US),
            hold_us: probe.word(field::HOLD_US),
            received: probe.word(field::RECEIVED),
            rate_kbit: probe.has_rate().then(|| probe.word(field::RATE)),
            realtime: mode_byte & REALTIME != 0,
        })
    }

    /// The probe's bytes, with `key`'s token and tag.
    pub fn emit(&self, key: &PathKey) -> ProbeBytes {
        let mut bytes = [0; PROBE_RATE_LEN];
        bytes[field::KIND] = KIND;
        bytes[field::FLAGS] = (VERSION << 4)
            | if self.bind { BIND } else { 0 }
            | if self.from_client { FROM_CLIENT } else { 0 }
            | if self.answer { ANSWER } else { 0 }
            | if self.rate_kbit.is_some() { RATE } else { 0 };
        bytes[field::PATH] = self.path.get();
        bytes[field::MODE] = self.mode.to_byte() | if self.realtime { REALTIME } else { 0 };
        for (range, value) in [
            (field::TOKEN, key.token),
            (field::SEQ, self.seq),
            (field::SENT_US, self.sent_us),
            (field::ECHO_US, self.echo_us),
            (field::HOLD_US, self.hold_us),
            (field::RECEIVED, self.received),
        ] {
            bytes[range].copy_from_slice(&value.to_be_bytes());
        }
        let (signed, tag_at, len) = match self.rate_kbit {
            Some(rate) => {
                bytes[field::RATE].copy_from_slice(&rate.to_be_bytes());
                (field::RATE_SIGNED, field::RATE_TAG, PROBE_RATE_LEN)
            }
            None => (field::SIGNED, field::TAG, PROBE_LEN),
        };
        let tag = key.tag(&bytes[signed]);
        bytes[tag_at].copy_from_slice(&tag);
        ProbeBytes { bytes, len }
    }
}

/// An emitted probe: [`PROBE_LEN`] bytes, or [`PROBE_RATE_LEN`] with a rate.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct ProbeBytes {
    bytes: [u8; PROBE_RATE_LEN],
    len: usize,
}

impl std::ops::Deref for ProbeBytes {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.bytes[..self.len]
    }
}

impl std::ops::DerefMut for ProbeBytes {
    fn deref_mut(&mut self) -> &mut [u8] {
        &mut self.bytes[..self.len]
    }
}

impl fmt::Debug for ProbeBytes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&**self, f)
    }
}

/// Whether `datagram` has a probe's kind and one of its lengths (it may
/// still be forged: [`ProbeRepr::parse`] verifies it).
pub fn looks_like_probe(datagram: &[u8]) -> bool {
    datagram.first() == Some(&KIND)
        && match datagram.len() {
            PROBE_LEN => true,
            PROBE_RATE_LEN => datagram[field::FLAGS] & RATE != 0,
            _ => false,
        }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn key(seed: u8) -> PathKey {
        let mut material = [0; EXPORTER_LEN];
        for (i, byte) in material.iter_mut().enumerate() {
            *byte = seed.wrapping_mul(31).wrapping_add(i as u8);
        }
        PathKey::from_exporter(&material)
    }

    fn repr() -> ProbeRepr {
        ProbeRepr {
            bind: true,
            from_client: true,
            answer: false,
            path: PathId::new(2).unwrap(),
            mode: PathMode::Duplicate,
            seq: 0x0102_0304,
            sent_us: 0x1112_1314,
            echo_us: 0x2122_2324,
            hold_us: 0x3132_3334,
            received: 0x4142_4344,
            rate_kbit: None,
            realtime: false,
        }
    }

    #[test]
    fn layout() {
        let key = key(1);
        let bytes = repr().emit(&key);
        assert_eq!(bytes[..4], [0x25, 0x13, 2, 2]);
        assert_eq!(bytes[4..8], key.token().to_be_bytes());
        assert_eq!(bytes[8..12], [1, 2, 3, 4]);
        assert_eq!(bytes[12..16], [0x11, 0x12, 0x13, 0x14]);
        assert_eq!(bytes[16..20], [0x21, 0x22, 0x23, 0x24]);
        assert_eq!(bytes[20..24], [0x31, 0x32, 0x33, 0x34]);
        assert_eq!(bytes[24..28], [0x41, 0x42, 0x43, 0x44]);
        let hash = blake3::keyed_hash(&key.key, &bytes[..28]);
        assert_eq!(bytes[28..], hash.as_bytes()[..8]);
        // The kind is never a QUIC packet: the fixed bit is clear.
        assert_eq!(KIND & 0x40, 0);
        let probe = Probe::new_checked(&bytes[..]).unwrap();
        assert_eq!((probe.token(), probe.seq()), (key.token(), 0x0102_0304));
        assert_eq!(ProbeRepr::parse(&probe, &key), Ok(repr()));
    }

    #[test]
    fn exporter_material_splits_into_key_and_token() {
        let mut material = [7; EXPORTER_LEN];
        material[32..].copy_from_slice(&[0xDE, 0xAD, 0xBE, 0xEF]);
        let key = PathKey::from_exporter(&material);
        assert_eq!(key.token(), 0xDEAD_BEEF);
        assert_eq!(key.key, [7; 32]);
        // The key never shows in logs.
        assert_eq!(format!("{key:?}"), "PathKey { token: 0xdeadbeef, .. }");
    }

    #[test]
    fn bad_probes_are_errors() {
        let other = key(2);
        let key = key(1);
        let good = repr().emit(&key);
        assert_eq!(
            Probe::new_checked(&good[..35]).unwrap_err(),
            ProbeError::Short(35)
        );
        let mut bad = good;
        bad[0] = 0x21;
        assert_eq!(
            Probe::new_checked(&bad[..]).unwrap_err(),
            ProbeError::Kind(0x21)
        );
        bad = good;
        bad[1] = 0x23;
        assert_eq!(
            Probe::new_checked(&bad[..]).unwrap_err(),
            ProbeError::Version(2)
        );
        let probe = Probe::new_checked(&good[..]).unwrap();
        assert_eq!(
            ProbeRepr::parse(&probe, &other),
            Err(ProbeError::Token(key.token()))
        );
        // Fields outside the format, sealed with the right key.
        for (offset, value, error) in [
            (2, 0, ProbeError::Path(0)),
            (2, 16, ProbeError::Path(16)),
            (3, 5, ProbeError::Mode(5)),
        ] {
            let mut bytes = good;
            bytes[offset] = value;
            let tag = key.tag(&bytes[..28]);
            bytes[28..].copy_from_slice(&tag);
            let probe = Probe::new_checked(&bytes[..]).unwrap();
            assert_eq!(ProbeRepr::parse(&probe, &key), Err(error));
        }
        // Padding is allowed and not authenticated.
        let mut padded = good.to_vec();
        padded.resize(1200, 0xEE);
        let probe = Probe::new_checked(&padded[..]).unwrap();
        assert_eq!(ProbeRepr::parse(&probe, &key), Ok(repr()));
        // The RATE flag on a 36-byte probe is too short for its rate.
        let mut flagged = good;
        flagged[1] |= RATE;
        assert_eq!(
            Probe::new_checked(&flagged[..]).unwrap_err(),
            ProbeError::Short(36)
        );
        assert!(looks_like_probe(&flagged));
        assert!(!looks_like_probe(&padded));
        assert!(looks_like_probe(&good));
    }

    #[test]
    fn a_rate_makes_the_probe_40_bytes_and_is_sealed_with_it() {
        let key = key(4);
        let repr = ProbeRepr {
            rate_kbit: Some(19_400),
            realtime: true,
            ..repr()
        };
        let bytes = repr.emit(&key);
        assert_eq!(bytes.len(), PROBE_RATE_LEN);
        assert_eq!(bytes[1], 0x1B);
        assert_eq!(bytes[28..32], 19_400u32.to_be_bytes());
        let hash = blake3::keyed_hash(&key.key, &bytes[..32]);
        assert_eq!(bytes[32..], hash.as_bytes()[..8]);
        assert!(looks_like_probe(&bytes));
        let probe = Probe::new_checked(&bytes[..]).unwrap();
        assert_eq!(ProbeRepr::parse(&probe, &key), Ok(repr));
        // A changed rate does not verify; cut to 36 bytes, it is short.
        let mut changed = bytes;
        changed[31] ^= 1;
        let probe = Probe::new_checked(&changed[..]).unwrap();
        assert_eq!(ProbeRepr::parse(&probe, &key), Err(ProbeError::Tag));
        assert_eq!(
            Probe::new_checked(&bytes[..36]).unwrap_err(),
            ProbeError::Short(36)
        );
    }

    #[test]
    fn the_tag_rejects_every_single_bit_flip() {
        let key = key(3);
        for good in [
            repr().emit(&key),
            ProbeRepr {
                rate_kbit: Some(7),
                realtime: false,
                ..repr()
            }
            .emit(&key),
        ] {
            for bit in 0..good.len() * 8 {
                let mut bytes = good;
                bytes[bit / 8] ^= 1 << (bit % 8);
                let parsed =
                    Probe::new_checked(&bytes[..]).and_then(|p| ProbeRepr::parse(&p, &key));
                assert!(parsed.is_err(), "bit {bit} flipped still parses");
                // Whatever else is wrong, nothing past the view's checks
                // verifies.
                if let Ok(probe) = Probe::new_checked(&bytes[..]) {
                    assert!(probe.verify(&key).is_err(), "bit {bit}");
                }
            }
        }
    }

    #[test]
    fn modes_and_path_numbers() {
        for mode in [
            PathMode::Failover,
            PathMode::Plain,
            PathMode::Duplicate,
            PathMode::SpreadFec,
            PathMode::Bond,
        ] {
            assert_eq!(PathMode::from_byte(mode.to_byte()), Ok(mode));
        }
        assert_eq!(PathMode::SpreadFec.to_string(), "spread-fec");
        assert_eq!(PathId::new(0), None);
        assert_eq!(PathId::new(16), None);
        assert_eq!(PathId::all().count(), 15);
        assert_eq!(PathId::new(15).unwrap().index(), 14);
    }

    fn any_repr() -> impl Strategy<Value = ProbeRepr> {
        (
            any::<[bool; 4]>(),
            1..=MAX_PATH,
            0u8..5,
            any::<[u32; 5]>(),
            any::<Option<u32>>(),
        )
            .prop_map(
                |([bind, from_client, answer, realtime], path, mode, words, rate_kbit)| ProbeRepr {
                    bind,
                    from_client,
                    answer,
                    path: PathId::new(path).unwrap(),
                    mode: PathMode::from_byte(mode).unwrap(),
                    seq: words[0],
                    sent_us: words[1],
                    echo_us: words[2],
                    hold_us: words[3],
                    received: words[4],
                    rate_kbit,
                    realtime,
                },
            )
    }

    proptest! {
        #[test]
        fn probes_round_trip(repr in any_repr(), seed: u8) {
            let key = key(seed);
            let bytes = repr.emit(&key);
            let probe = Probe::new_checked(&bytes[..]).unwrap();
            let parsed = ProbeRepr::parse(&probe, &key).unwrap();
            prop_assert_eq!(parsed, repr);
            prop_assert_eq!(parsed.emit(&key), bytes);
        }

        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
            if let Ok(probe) = Probe::new_checked(&bytes[..]) {
                prop_assert!(ProbeRepr::parse(&probe, &key(0)).is_err());
            }
        }
    }
}
