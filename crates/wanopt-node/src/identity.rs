//! Node identity, WireGuard-style: an Ed25519 private key in a file, peers
//! pinned by their public key.
//!
//! The key file holds one line: the base64 of the 32-byte Ed25519 seed. The
//! public key is the base64 of the 32-byte Ed25519 public key. Inside TLS 1.3
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

    /// Reads a key file written by [`PrivateKey::write_new`].
    pub fn read(path: &Path) -> Result<PrivateKey, KeyError> {
        let name = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|source| KeyError::Read {
            path: name.clone(),
            source,
        })?;
        let bytes = BASE64
            .decode(text.trim())
            .map_err(|_| KeyError::Malformed(name.clone()))?;
        let seed: [u8; 32] = bytes.try_into().map_err(|_| KeyError::Malformed(name))?;
        Ok(PrivateKey { seed })
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
        writeln!(file, "{}", BASE64.encode(self.seed))
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

    fn check(&self, cert: &CertificateDer<'_>) -> Result<(), rustls::Error> {
        match certificate_key(cert) {
            Some(key) if self.keys.contains(&key) => Ok(()),
            Some(key) => Err(rustls::Error::InvalidCertificate(CertificateError::Other(
                rustls::OtherError(Arc::new(NotPinned(key))),
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

/// The handshake error raised for a peer whose key is not pinned.
#[derive(Debug)]
pub struct NotPinned(pub PublicKey);

impl fmt::Display for NotPinned {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "peer key {} is not pinned", self.0)
    }
}

impl std::error::Error for NotPinned {}

impl ServerCertVerifier for PinnedKeys {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        self.check(end_entity)
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
        self.check(end_entity)
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
        assert!(keys.check(&pinned.certificate().unwrap().0).is_ok());
        assert!(keys.check(&stranger.certificate().unwrap().0).is_err());
        assert!(keys.check(&CertificateDer::from(vec![1, 2, 3])).is_err());
    }
}
