//! The control token: a random secret that a node writes at start to a file
//! only its user can read, and that a request which changes anything must
//! carry (`Authorization: Bearer <token>`). Whoever can read the file may
//! change the node; anyone who can reach the control address may only read.

use std::fmt;
use std::io::Write as _;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// Bytes of randomness in a token (written as twice as many hex digits).
const TOKEN_BYTES: usize = 32;

/// Errors of creating or reading a control token file.
#[derive(Debug, thiserror::Error)]
pub enum TokenError {
    /// The token's directory could not be created or is unsafe to use.
    #[error("control token directory {path}: {why}")]
    Directory {
        /// The directory.
        path: PathBuf,
        /// What is wrong with it.
        why: String,
    },
    /// The token file could not be written.
    #[error("cannot write the control token file {path}: {source}")]
    Write {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The token file could not be read.
    #[error("cannot read the control token file {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// Another running node holds the token file.
    #[error("the control token file {path} belongs to another running node: give this one its own (--control-token FILE)")]
    InUse {
        /// The file.
        path: PathBuf,
    },
    /// The file does not hold a token.
    #[error("{path} does not hold a wanopt control token (64 hex digits)")]
    Malformed {
        /// The file.
        path: PathBuf,
    },
    /// The system's random source failed.
    #[error("no randomness for the control token")]
    Random,
}

/// A control token: 64 lowercase hex digits.
#[derive(Clone, PartialEq, Eq)]
pub struct ControlToken(String);

impl ControlToken {
    /// A fresh token from the system's random source.
    pub fn generate() -> Result<ControlToken, TokenError> {
        use ring::rand::SecureRandom;
        let mut bytes = [0u8; TOKEN_BYTES];
        ring::rand::SystemRandom::new()
            .fill(&mut bytes)
            .map_err(|_| TokenError::Random)?;
        Ok(ControlToken(
            bytes.iter().map(|b| format!("{b:02x}")).collect(),
        ))
    }

    /// Parses a token's text (surrounding whitespace ignored).
    pub fn parse(text: &str) -> Option<ControlToken> {
        let text = text.trim();
        (text.len() == 2 * TOKEN_BYTES
            && text
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)))
        .then(|| ControlToken(text.to_owned()))
    }

    /// Reads the token in `path`.
    pub fn read(path: &Path) -> Result<ControlToken, TokenError> {
        let mut text = String::new();
        // A token file is one short line: never read more than that.
        std::io::Read::read_to_string(
            &mut std::io::Read::take(
                std::fs::File::open(path).map_err(|source| TokenError::Read {
                    path: path.to_owned(),
                    source,
                })?,
                256,
            ),
            &mut text,
        )
        .map_err(|source| TokenError::Read {
            path: path.to_owned(),
            source,
        })?;
        ControlToken::parse(&text).ok_or_else(|| TokenError::Malformed {
            path: path.to_owned(),
        })
    }

    /// The token's text, as sent after `Bearer `.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Whether `candidate` is this token, in time that does not depend on
    /// where they differ.
    pub fn matches(&self, candidate: &[u8]) -> bool {
        let ours = self.0.as_bytes();
        if candidate.len() != ours.len() {
            return false;
        }
        ours.iter()
            .zip(candidate)
            .fold(0u8, |diff, (a, b)| diff | (a ^ b))
            == 0
    }
}

impl fmt::Debug for ControlToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ControlToken(..)")
    }
}

/// Where a node listening for control on `port` writes its token unless
/// told otherwise, and where the CLI looks for it:
/// `/run/wanopt/control-PORT.token` for root, else
/// `$XDG_RUNTIME_DIR/wanopt/control-PORT.token`, else
/// `/tmp/wanopt-UID/control-PORT.token`. The port tells nodes of one user
/// apart (the CLI knows it from `--control`); in a named network namespace
/// (`ip netns`), whose control ports other namespaces may use too (the
/// lab's), the name also holds the namespace's: `control-PORT-NETNS.token`.
pub fn default_path(port: u16) -> PathBuf {
    let name = match network_namespace_name() {
        Some(netns) => format!("control-{port}-{netns}.token"),
        None => format!("control-{port}.token"),
    };
    default_dir().join(name)
}

/// The name under `/run/netns` of this process's network namespace, if it
/// has one (and the name is safe in a file name).
fn network_namespace_name() -> Option<String> {
    let own = std::fs::metadata("/proc/self/ns/net").ok()?;
    std::fs::read_dir("/run/netns")
        .ok()?
        .flatten()
        .find(|entry| {
            std::fs::metadata(entry.path())
                .is_ok_and(|m| m.ino() == own.ino() && m.dev() == own.dev())
        })?
        .file_name()
        .into_string()
        .ok()
        .filter(|name| {
            name.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b))
        })
}

fn default_dir() -> PathBuf {
    let uid = nix::unistd::geteuid();
    if uid.is_root() {
        return PathBuf::from("/run/wanopt");
    }
    match std::env::var_os("XDG_RUNTIME_DIR").map(PathBuf::from) {
        Some(dir) if dir.is_absolute() => dir.join("wanopt"),
        _ => PathBuf::from(format!("/tmp/wanopt-{uid}")),
    }
}

/// A token file written at start, locked (`flock`) while the node runs so
/// that a second node given the same path refuses it rather than replace
/// it; removed when dropped (if it still holds this token).
#[derive(Debug)]
pub struct TokenFile {
    path: PathBuf,
    token: ControlToken,
    /// The open, locked file.
    _lock: nix::fcntl::Flock<std::fs::File>,
}

/// Whether another process holds `path` locked (a running node's token
/// file); a file left by a node that died is not.
fn held_by_another(path: &Path) -> bool {
    let Ok(file) = std::fs::File::open(path) else {
        return false;
    };
    match nix::fcntl::Flock::lock(file, nix::fcntl::FlockArg::LockExclusiveNonblock) {
        Ok(_unlocked_on_drop) => false,
        Err((_, errno)) => errno == nix::errno::Errno::EWOULDBLOCK,
    }
}

impl TokenFile {
    /// Writes a fresh token to `path` (mode 0600, whatever the umask),
    /// replacing a file a node that died left there (never one a running
    /// node holds: [`TokenError::InUse`]), or to [`default_path`] for `port` when
    /// `path` is `None`: a default directory is created 0700 and must
    /// belong to this user and be closed to others.
    pub fn create(path: Option<&Path>, port: u16) -> Result<TokenFile, TokenError> {
        let path = match path {
            Some(path) => path.to_owned(),
            None => {
                let path = default_path(port);
                if let Some(dir) = path.parent() {
                    private_dir(dir)?;
                }
                path
            }
        };
        let token = ControlToken::generate()?;
        let write_err = |source| TokenError::Write {
            path: path.clone(),
            source,
        };
        if held_by_another(&path) {
            return Err(TokenError::InUse { path });
        }
        // A file (or a link someone planted) is removed, not written
        // through: the new file is created here, exclusively.
        match std::fs::remove_file(&path) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(write_err(e)),
        }
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&path)
            .map_err(write_err)?;
        writeln!(file, "{}", token.as_str()).map_err(write_err)?;
        let lock = nix::fcntl::Flock::lock(file, nix::fcntl::FlockArg::LockExclusiveNonblock)
            .map_err(|(_, errno)| write_err(std::io::Error::from(errno)))?;
        Ok(TokenFile {
            path,
            token,
            _lock: lock,
        })
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The token.
    pub fn token(&self) -> &ControlToken {
        &self.token
    }
}

impl Drop for TokenFile {
    fn drop(&mut self) {
        // A node started since on the same path wrote its own token: leave it.
        if ControlToken::read(&self.path).is_ok_and(|t| t == self.token) {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

/// Creates `dir` (mode 0700) if it is missing, and checks that it is a
/// directory of this user that others cannot write to.
fn private_dir(dir: &Path) -> Result<(), TokenError> {
    let err = |why: String| TokenError::Directory {
        path: dir.to_owned(),
        why,
    };
    match std::fs::DirBuilder::new().mode(0o700).create(dir) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(err(e.to_string())),
    }
    let meta = std::fs::symlink_metadata(dir).map_err(|e| err(e.to_string()))?;
    if !meta.is_dir() {
        return Err(err("not a directory".into()));
    }
    let uid = nix::unistd::geteuid().as_raw();
    if meta.uid() != uid {
        return Err(err(format!(
            "belongs to uid {}, not to this user (uid {uid}); give --control-token FILE",
            meta.uid()
        )));
    }
    let mode = meta.permissions().mode() & 0o777;
    if mode & 0o022 != 0 {
        return Err(err(format!(
            "has mode {mode:o}: others may write to it (chmod 700 it, or give --control-token FILE)"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_is_64_hex_digits_and_parses_back() {
        let token = ControlToken::generate().unwrap();
        assert_eq!(token.as_str().len(), 64);
        assert_eq!(
            ControlToken::parse(&format!("{}\n", token.as_str())),
            Some(token.clone())
        );
        assert_ne!(ControlToken::generate().unwrap(), token);
        assert!(ControlToken::parse("abc").is_none());
        assert!(ControlToken::parse(&"G".repeat(64)).is_none());
        assert!(ControlToken::parse(&"A".repeat(64)).is_none());
    }

    #[test]
    fn only_the_same_token_matches() {
        let token = ControlToken::parse(&"a".repeat(64)).unwrap();
        assert!(token.matches("a".repeat(64).as_bytes()));
        assert!(!token.matches(format!("{}b", "a".repeat(63)).as_bytes()));
        assert!(!token.matches("a".repeat(63).as_bytes()));
        assert!(!token.matches(b""));
    }

    #[test]
    fn the_file_is_private_replaces_a_planted_link_and_goes_away() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("target");
        std::fs::write(&target, "keep").unwrap();
        let path = dir.path().join("control.token");
        std::os::unix::fs::symlink(&target, &path).unwrap();
        let file = TokenFile::create(Some(&path), 7447).unwrap();
        let meta = std::fs::symlink_metadata(&path).unwrap();
        assert!(meta.is_file());
        assert_eq!(meta.permissions().mode() & 0o777, 0o600);
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "keep");
        assert_eq!(&ControlToken::read(&path).unwrap(), file.token());
        drop(file);
        assert!(!path.exists());
    }

    #[test]
    fn a_directory_others_may_write_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
        assert!(matches!(
            private_dir(dir.path()),
            Err(TokenError::Directory { .. })
        ));
        let fresh = dir.path().join("fresh");
        private_dir(&fresh).unwrap();
        let mode = std::fs::metadata(&fresh).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o700);
    }
}
