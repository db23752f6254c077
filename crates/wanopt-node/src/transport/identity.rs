//! Node identity, WireGuard-style: an Ed25519 private key in a file, peers
//! pinned by their public key.
//!
//! The key file holds a header line, `# wanopt private key (public key:
//! PUB)`, and the base64 of the 32-byte Ed25519 seed. The public key is
//! the base64 of the 32-byte Ed25519 public key: one such line alone has
//! the same form as a seed, so a file without the header (written before
//! it existed) is taken as a private key only when no other user can read
//! it ([`KeyError::NotPrivate`]). Inside TLS 1.3
//! each node presents a self-signed certificate made from its key; the peer
//! accepts it only if the certificate's public key is pinned, and TLS itself
//! proves possession of the private key (CertificateVerify). Names, dates and
//! issuers are not used: the key is the identity.

use std::collections::HashSet;
use std::fmt;
use std::io::Write;
use std::path::Path;
use std::sync::Arc;

use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine;
use ring::signature::{Ed25519KeyPair, KeyPair};
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{verify_tls13_signature, CryptoProvider};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer, ServerName, UnixTime};
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::{CertificateError, DigitallySignedStruct, DistinguishedName, SignatureScheme};

/// Errors reading, writing or using keys.
#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    /// The key file could not be read.
    #[error("cannot read key file {path}: {source}")]
    Read {
        /// The file.
        path: String,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The key file could not be written.
    #[error("cannot write key file {path}: {source}")]
    Write {
        /// The file.
        path: String,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The key file exists already; keys are never overwritten.
    #[error("key file {0} exists already; refusing to overwrite it (remove it first)")]
    Exists(String),
    /// The file does not hold a base64 32-byte key.
    #[error("key file {0} does not hold a wanopt private key (one base64 line of 32 bytes, as written by `wanopt keygen`)")]
    Malformed(String),
    /// The file's header names a public key that is not the seed's.
    #[error(
        "key file {path} is damaged: its header names public key {named}, its key is {actual}"
    )]
    Mismatch {
        /// The file.
        path: String,
        /// The public key the header names.
        named: String,
        /// The public key of the seed in the file.
        actual: String,
    },
    /// The file has no private-key header and other users can read it:
    /// most likely a public key (the same form), else an unprotected
    /// private key.
    #[error("key file {path} looks like a public key, not a private one: it lacks the `# wanopt private key` line and other users can read it (mode {mode:o}); give --key the file `wanopt keygen --out` wrote (if this is an older private key, `chmod 600` it)")]
    NotPrivate {
        /// The file.
        path: String,
        /// Its permission bits.
        mode: u32,
    },
    /// A public key given on the command line or in a config is malformed.
    #[error("peer key {0:?} is not a wanopt public key (one base64 string of 32 bytes, as printed by `wanopt keygen`)")]
    BadPublicKey(String),
    /// The TLS machinery refused our key or certificate.
    #[error("cannot build a certificate from the key: {0}")]
    Certificate(String),
}

/// An Ed25519 public key: what a node is known and pinned by.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct PublicKey(pub [u8; 32]);

impl PublicKey {
    /// Parses the base64 form printed by `wanopt keygen`.
    pub fn from_base64(text: &str) -> Result<PublicKey, KeyError> {
        let bytes = BASE64
            .decode(text.trim())
            .map_err(|_| KeyError::BadPublicKey(text.to_owned()))?;
        let raw: [u8; 32] = bytes
            .try_into()
            .map_err(|_| KeyError::BadPublicKey(text.to_owned()))?;
        Ok(PublicKey(raw))
    }
}

impl fmt::Display for PublicKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&BASE64.encode(self.0))
    }
}

impl fmt::Debug for PublicKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "PublicKey({self})")
    }
}

/// A node's private key.
pub struct PrivateKey {
    seed: [u8; 32],
}

/// The first line of a key file (the public key follows, in parentheses).
pub const KEY_FILE_HEADER: &str = "# wanopt private key";

/// DER prefix of a PKCS#8 v1 Ed25519 private key (RFC 8410 section 7); the
/// 32-byte seed follows.
const PKCS8_ED25519_PREFIX: [u8; 16] = [
    0x30, 0x2e, 0x02, 0x01, 0x00, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x04, 0x22, 0x04, 0x20,
];

impl PrivateKey {
    /// Makes a new random key.
    pub fn generate() -> PrivateKey {
        use ring::rand::SecureRandom;
        let mut seed = [0u8; 32];
        ring::rand::SystemRandom::new()
            .fill(&mut seed)
            .expect("the system random source works");
        PrivateKey { seed }
    }

    /// Reads a key file written by [`PrivateKey::write_new`] (or, without
    /// the header, by an older version: then only when no other user can
    /// read it, since a public key has the same form).
    pub fn read(path: &Path) -> Result<PrivateKey, KeyError> {
        use std::os::unix::fs::PermissionsExt;
        let name = path.display().to_string();
        let read_error = |source| KeyError::Read {
            path: name.clone(),
            source,
        };
        let mut file = std::fs::File::open(path).map_err(read_error)?;
        let mode = file.metadata().map_err(read_error)?.permissions().mode() & 0o7777;
        let mut text = String::new();
        std::io::Read::read_to_string(&mut file, &mut text)
            .map_err(|_| KeyError::Malformed(name.clone()))?;
        let mut header = None;
        let mut body = Vec::new();
        for line in text.lines().map(str::trim).filter(|l| !l.is_empty()) {
            match line.strip_prefix(KEY_FILE_HEADER) {
                Some(rest) if header.is_none() => header = Some(rest),
                _ if line.starts_with('#') => {}
                _ => body.push(line),
            }
        }
        let [seed_text] = body[..] else {
            return Err(KeyError::Malformed(name));
        };
        let bytes = BASE64
            .decode(seed_text)
            .map_err(|_| KeyError::Malformed(name.clone()))?;
        let seed: [u8; 32] = bytes
            .try_into()
            .map_err(|_| KeyError::Malformed(name.clone()))?;
        let key = PrivateKey { seed };
        match header {
            Some(rest) => {
                let named = rest
                    .split_once("public key:")
                    .map(|(_, tail)| tail.trim().trim_end_matches(')').trim());
                if let Some(named) = named.filter(|n| !n.is_empty()) {
                    let actual = key.public_key().to_string();
                    if named != actual {
                        return Err(KeyError::Mismatch {
                            path: name,
                            named: named.to_owned(),
                            actual,
                        });
                    }
                }
            }
            None if mode & 0o044 != 0 => return Err(KeyError::NotPrivate { path: name, mode }),
            None => {}
        }
        Ok(key)
    }

    /// Whether the file's 32 bytes are those of `key`: a public key given
    /// where the private key belongs.
    pub fn is_bytes_of(&self, key: &PublicKey) -> bool {
        self.seed == key.0
    }

    /// Writes the key to a new file with mode 0600; never overwrites.
    pub fn write_new(&self, path: &Path) -> Result<(), KeyError> {
        use std::os::unix::fs::OpenOptionsExt;
        let name = path.display().to_string();
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(path)
            .map_err(|source| {
                if source.kind() == std::io::ErrorKind::AlreadyExists {
                    KeyError::Exists(name.clone())
                } else {
                    KeyError::Write {
                        path: name.clone(),
                        source,
                    }
                }
            })?;
        writeln!(
            file,
            "{KEY_FILE_HEADER} (public key: {})\n{}",
            self.public_key(),
            BASE64.encode(self.seed)
        )
        .and_then(|()| file.sync_all())
        .map_err(|source| KeyError::Write { path: name, source })
    }

    fn pkcs8(&self) -> Vec<u8> {
        let mut der = PKCS8_ED25519_PREFIX.to_vec();
        der.extend_from_slice(&self.seed);
        der
    }

    /// The secret behind this node's QUIC stateless-reset tokens, derived
    /// from its key: a node restarted with the same key computes the same
    /// token for a connection ID it issued before it stopped, so a peer
    /// still sending on the old connection is told at once that it is gone
    /// (and reconnects) instead of waiting out the idle timeout.
    pub fn reset_key(&self) -> ring::hmac::Key {
        let label = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, b"wanopt stateless reset v1");
        let secret = ring::hmac::sign(&label, &self.seed);
        ring::hmac::Key::new(ring::hmac::HMAC_SHA256, secret.as_ref())
    }

    /// The public key that peers pin.
    pub fn public_key(&self) -> PublicKey {
        let pair = Ed25519KeyPair::from_seed_unchecked(&self.seed)
            .expect("any 32-byte seed is a valid Ed25519 key");
        let mut raw = [0u8; 32];
        raw.copy_from_slice(pair.public_key().as_ref());
        PublicKey(raw)
    }

    /// A self-signed certificate for this key, and the key in rustls' form.
    pub fn certificate(
        &self,
    ) -> Result<(CertificateDer<'static>, PrivateKeyDer<'static>), KeyError> {
        let der = PrivatePkcs8KeyDer::from(self.pkcs8());
        let pair = rcgen::KeyPair::from_pkcs8_der_and_sign_algo(&der, &rcgen::PKCS_ED25519)
            .map_err(|e| KeyError::Certificate(e.to_string()))?;
        let params = rcgen::CertificateParams::new(vec!["wanopt".to_owned()])
            .map_err(|e| KeyError::Certificate(e.to_string()))?;
        let cert = params
            .self_signed(&pair)
            .map_err(|e| KeyError::Certificate(e.to_string()))?;
        Ok((cert.der().clone(), PrivateKeyDer::Pkcs8(der)))
    }
}

/// The Ed25519 key inside a certificate, if it has one.
pub fn certificate_key(cert: &CertificateDer<'_>) -> Option<PublicKey> {
    const ED25519_OID: &str = "1.3.101.112";
    let (_, parsed) = x509_parser::parse_x509_certificate(cert.as_ref()).ok()?;
    let spki = parsed.public_key();
    if spki.algorithm.algorithm.to_id_string() != ED25519_OID {
        return None;
    }
    let raw: [u8; 32] = spki.subject_public_key.data.as_ref().try_into().ok()?;
    Some(PublicKey(raw))
}

/// The set of peer keys a node accepts, checked inside the TLS handshake on
/// both sides.
#[derive(Debug)]
pub struct PinnedKeys {
    keys: HashSet<PublicKey>,
    provider: Arc<CryptoProvider>,
}

impl PinnedKeys {
    /// Pins `keys`, verifying signatures with `provider`.
    pub fn new(keys: impl IntoIterator<Item = PublicKey>, provider: Arc<CryptoProvider>) -> Self {
        PinnedKeys {
            keys: keys.into_iter().collect(),
            provider,
        }
    }

    fn check(&self, cert: &CertificateDer<'_>, peer: Side) -> Result<(), rustls::Error> {
        match certificate_key(cert) {
            Some(key) if self.keys.contains(&key) => Ok(()),
            Some(key) => Err(rustls::Error::InvalidCertificate(CertificateError::Other(
                rustls::OtherError(Arc::new(NotPinned { key, peer })),
            ))),
            None => Err(rustls::Error::InvalidCertificate(
                CertificateError::BadEncoding,
            )),
        }
    }

    fn verify13(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls13_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }
}

/// Which end of a tunnel presented a certificate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    /// The dialling end (an edge).
    Edge,
    /// The accepting end (a core).
    Core,
}

/// The handshake error raised for a peer whose key is not pinned. Its
/// text says in words which side did not pin which key; it travels to
/// the peer in the handshake's close reason too (so it names no pinned
/// key: a stranger learns nothing of them).
pub struct NotPinned {
    /// The key the peer presented.
    pub key: PublicKey,
    /// The side that presented it.
    pub peer: Side,
}

impl fmt::Display for NotPinned {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (peer, this) = match self.peer {
            Side::Edge => ("edge", "core"),
            Side::Core => ("core", "edge"),
        };
        write!(
            f,
            "the {peer}'s key {} is not among the {this}'s --peer-key (give the {this} the {peer}'s `wanopt pubkey` as --peer-key, or the {peer} the --key whose public key the {this} pins)",
            self.key
        )
    }
}

/// rustls quotes a verifier's error with `{:?}`: the same words.
impl fmt::Debug for NotPinned {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl std::error::Error for NotPinned {}

/// A handshake error as a person reads it: rustls wraps a verifier's
/// error as `Other(OtherError(...))`, which is dropped here.
pub fn readable_handshake_error(error: impl fmt::Display) -> String {
    let text = error.to_string();
    match text.split_once("Other(OtherError(") {
        Some((head, tail)) => {
            let inner = tail.strip_suffix("))").unwrap_or(tail);
            format!("{head}{inner}")
        }
        None => text,
    }
}

impl ServerCertVerifier for PinnedKeys {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        self.check(end_entity, Side::Core)
            .map(|()| ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        _message: &[u8],
        _cert: &CertificateDer<'_>,
        _dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        Err(rustls::Error::PeerIncompatible(
            rustls::PeerIncompatible::Tls12NotOffered,
        ))
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.verify13(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        vec![SignatureScheme::ED25519]
    }
}

impl ClientCertVerifier for PinnedKeys {
    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        &[]
    }

    fn verify_client_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _now: UnixTime,
    ) -> Result<ClientCertVerified, rustls::Error> {
        self.check(end_entity, Side::Edge)
            .map(|()| ClientCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        _message: &[u8],
        _cert: &CertificateDer<'_>,
        _dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        Err(rustls::Error::PeerIncompatible(
            rustls::PeerIncompatible::Tls12NotOffered,
        ))
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.verify13(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        vec![SignatureScheme::ED25519]
    }
}

/// The authenticated public key of a tunnel's peer.
pub fn peer_key(connection: &quinn::Connection) -> Option<PublicKey> {
    connection
        .peer_identity()
        .and_then(|id| {
            id.downcast::<Vec<rustls::pki_types::CertificateDer<'static>>>()
                .ok()
        })
        .and_then(|certs| certs.first().and_then(certificate_key))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The same key gives the same reset tokens (after a restart); another
    /// key gives others.
    #[test]
    fn reset_keys_follow_the_private_key() {
        let a = PrivateKey::generate();
        let again = PrivateKey { seed: a.seed };
        let b = PrivateKey::generate();
        let tag = |k: &PrivateKey| ring::hmac::sign(&k.reset_key(), b"cid!").as_ref().to_vec();
        assert_eq!(tag(&a), tag(&again));
        assert_ne!(tag(&a), tag(&b));
        // Not the seed itself, nor an HMAC keyed by it alone.
        let plain = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, &a.seed);
        assert_ne!(tag(&a), ring::hmac::sign(&plain, b"cid!").as_ref().to_vec());
    }

    #[test]
    fn key_files_round_trip_with_mode_0600_and_are_never_overwritten() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("node.key");
        let key = PrivateKey::generate();
        key.write_new(&path).unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        let again = PrivateKey::read(&path).unwrap();
        assert_eq!(again.public_key(), key.public_key());
        assert!(matches!(
            PrivateKey::generate().write_new(&path),
            Err(KeyError::Exists(_))
        ));
        assert_eq!(
            PrivateKey::read(&path).unwrap().public_key(),
            key.public_key()
        );
    }

    #[test]
    fn malformed_keys_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("bad.key");
        std::fs::write(&path, "not base64!\n").unwrap();
        assert!(matches!(
            PrivateKey::read(&path),
            Err(KeyError::Malformed(_))
        ));
        std::fs::write(&path, "AAAA\n").unwrap();
        assert!(matches!(
            PrivateKey::read(&path),
            Err(KeyError::Malformed(_))
        ));
        assert!(PublicKey::from_base64("AAAA").is_err());
        let pk = PrivateKey::generate().public_key();
        assert_eq!(PublicKey::from_base64(&pk.to_string()).unwrap(), pk);
    }

    #[test]
    fn a_public_key_file_is_refused_and_an_older_private_one_read() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let key = PrivateKey::generate();
        let set_mode =
            |p: &Path, m| std::fs::set_permissions(p, std::fs::Permissions::from_mode(m)).unwrap();
        // What `wanopt keygen --out k > k.pub` leaves in k.pub.
        let public = dir.path().join("k.pub");
        std::fs::write(&public, format!("{}\n", key.public_key())).unwrap();
        set_mode(&public, 0o644);
        let err = PrivateKey::read(&public).unwrap_err();
        assert!(
            matches!(err, KeyError::NotPrivate { mode: 0o644, .. }),
            "{err}"
        );
        assert!(err.to_string().contains("looks like a public key"), "{err}");
        // A private key of an older version (no header), kept 0600.
        let older = dir.path().join("old.key");
        std::fs::write(&older, format!("{}\n", BASE64.encode(key.seed))).unwrap();
        set_mode(&older, 0o600);
        assert_eq!(
            PrivateKey::read(&older).unwrap().public_key(),
            key.public_key()
        );
        // A key written now carries the header and reads whatever its mode.
        let new = dir.path().join("new.key");
        key.write_new(&new).unwrap();
        let text = std::fs::read_to_string(&new).unwrap();
        assert!(text.starts_with(KEY_FILE_HEADER), "{text}");
        assert!(text.contains(&key.public_key().to_string()), "{text}");
        set_mode(&new, 0o644);
        assert_eq!(
            PrivateKey::read(&new).unwrap().public_key(),
            key.public_key()
        );
        // A header that names another key: damaged.
        let other = PrivateKey::generate().public_key().to_string();
        let damaged = dir.path().join("damaged.key");
        std::fs::write(
            &damaged,
            text.replace(&key.public_key().to_string(), &other),
        )
        .unwrap();
        assert!(matches!(
            PrivateKey::read(&damaged),
            Err(KeyError::Mismatch { .. })
        ));
        // Two key lines, or none: malformed.
        std::fs::write(&damaged, format!("{text}{text}")).unwrap();
        assert!(matches!(
            PrivateKey::read(&damaged),
            Err(KeyError::Malformed(_))
        ));
        assert!(key.is_bytes_of(&PublicKey(key.seed)));
        assert!(!key.is_bytes_of(&key.public_key()));
    }

    #[test]
    fn the_certificate_carries_the_public_key() {
        let key = PrivateKey::generate();
        let (cert, _) = key.certificate().unwrap();
        assert_eq!(certificate_key(&cert), Some(key.public_key()));
    }

    #[test]
    fn only_pinned_keys_pass() {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let pinned = PrivateKey::generate();
        let stranger = PrivateKey::generate();
        let keys = PinnedKeys::new([pinned.public_key()], provider);
        assert!(keys
            .check(&pinned.certificate().unwrap().0, Side::Edge)
            .is_ok());
        assert!(keys
            .check(&stranger.certificate().unwrap().0, Side::Edge)
            .is_err());
        assert!(keys
            .check(&CertificateDer::from(vec![1, 2, 3]), Side::Edge)
            .is_err());
    }

    #[test]
    fn a_key_mismatch_says_which_side_pins_what() {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let stranger = PrivateKey::generate();
        let keys = PinnedKeys::new([PrivateKey::generate().public_key()], provider);
        let cert = stranger.certificate().unwrap().0;
        let on_core = keys.check(&cert, Side::Edge).unwrap_err();
        let text = readable_handshake_error(on_core);
        assert_eq!(
            text,
            format!(
                "invalid peer certificate: the edge's key {} is not among the core's --peer-key (give the core the edge's `wanopt pubkey` as --peer-key, or the edge the --key whose public key the core pins)",
                stranger.public_key()
            )
        );
        let on_edge = keys.check(&cert, Side::Core).unwrap_err().to_string();
        assert!(
            on_edge.contains("the core's key")
                && on_edge.contains("not among the edge's --peer-key"),
            "{on_edge}"
        );
    }
}
