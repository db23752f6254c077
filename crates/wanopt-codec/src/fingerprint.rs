//! Strong chunk fingerprints: BLAKE3 truncated to 128 bits.
//!
//! 128 bits keep the in-memory index and every reference frame small (16
//! bytes instead of 32) while a collision stays out of reach: the birthday
//! bound for 2^40 stored chunks (8 PiB of 8 KiB chunks) is about 2^-48, and
//! finding any collision on purpose costs about 2^64 BLAKE3 evaluations. The
//! cache never trusts a fingerprint alone anyway: every read from the store
//! is re-hashed and compared before a byte is delivered.

use std::fmt;

/// Length of a [`Fingerprint`] in bytes.
pub const FINGERPRINT_LEN: usize = 16;

/// The first 128 bits of the BLAKE3 hash of a chunk.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Fingerprint(pub [u8; FINGERPRINT_LEN]);

impl Fingerprint {
    /// Fingerprint of `data`.
    pub fn of(data: &[u8]) -> Self {
        Fingerprint::from_hash(&blake3::hash(data))
    }

    /// The fingerprint a BLAKE3 hash stands for (its first 128 bits).
    pub fn from_hash(hash: &blake3::Hash) -> Self {
        let mut out = [0u8; FINGERPRINT_LEN];
        out.copy_from_slice(&hash.as_bytes()[..FINGERPRINT_LEN]);
        Fingerprint(out)
    }

    /// True when `data` hashes to this fingerprint.
    pub fn matches(&self, data: &[u8]) -> bool {
        Fingerprint::of(data) == *self
    }

    /// The raw bytes.
    pub fn as_bytes(&self) -> &[u8; FINGERPRINT_LEN] {
        &self.0
    }

    /// Read a fingerprint from the first 16 bytes of `bytes`, if long enough.
    pub fn from_slice(bytes: &[u8]) -> Option<Self> {
        let raw: [u8; FINGERPRINT_LEN] = bytes.get(..FINGERPRINT_LEN)?.try_into().ok()?;
        Some(Fingerprint(raw))
    }
}

impl fmt::Debug for Fingerprint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for byte in &self.0[..8] {
            write!(f, "{byte:02x}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fingerprint_is_blake3_prefix() {
        let fp = Fingerprint::of(b"hello");
        assert_eq!(&fp.0[..], &blake3::hash(b"hello").as_bytes()[..16]);
        assert!(fp.matches(b"hello"));
        assert!(!fp.matches(b"hellp"));
        assert_eq!(Fingerprint::from_slice(&fp.0), Some(fp));
        assert_eq!(Fingerprint::from_slice(&fp.0[..15]), None);
    }
}
