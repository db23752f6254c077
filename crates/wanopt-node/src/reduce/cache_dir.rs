//! The byte cache on disk: private to the node's user, and recognisable.
//!
//! The caches hold the plaintext of reduced traffic, so everything wanopt
//! creates under `--cache-dir` is owner-only (directories 0700, files
//! 0600, whatever the umask; [`wanopt_codec::private`]). Caches written by
//! older versions are tightened when opened, with a log line. The cache
//! directory itself is tightened too when it holds nothing but wanopt's
//! caches; a shared one (`--cache-dir /var/cache`) is left as it is, with a
//! warning when others can list it or replace it.
//!
//! Each peer cache directory carries a marker file, [`MARKER`]: `wanopt
//! cache clear` removes only directories that carry it, or, for caches
//! written before the marker existed, whose every entry is a file of
//! wanopt's own layout ([`is_legacy_layout`]). It never follows a symbolic
//! link.

use std::fs::{self, Permissions};
use std::io;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;

use tracing::{info, warn};

use wanopt_codec::private::{DIR_MODE, FILE_MODE};

use crate::transport::identity::PublicKey;

/// The file that marks a directory as one of wanopt's peer caches.
pub const MARKER: &str = "wanopt-peer-cache";

/// What [`MARKER`] holds (its first line is checked).
const MARKER_FIRST_LINE: &str = "wanopt peer byte cache";

/// Whether `name` is that of a peer cache directory (the peer's public key
/// in lowercase hex).
pub fn is_peer_dir_name(name: &str) -> bool {
    name.len() == 64
        && name
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// Whether `name` is a file a peer cache directory holds: the lock, the
/// store's meta and segments, the peer view and its journals, and their
/// temporary files.
fn is_cache_file_name(name: &str) -> bool {
    let numbered = |rest: Option<&str>| {
        rest.is_some_and(|r| !r.is_empty() && r.bytes().all(|b| b.is_ascii_digit()))
    };
    matches!(
        name,
        "lock" | "meta" | "meta.tmp" | "peer-view" | "peer-view.tmp" | MARKER
    ) || name
        .strip_prefix("seg-")
        .and_then(|r| r.strip_suffix(".wseg"))
        .is_some_and(|n| numbered(Some(n)))
        || numbered(name.strip_prefix("peer-view.journal."))
}

/// Creates the cache directory (mode 0700, parents too) or, when it
/// exists, tightens it to 0700 if it holds only wanopt's caches; warns
/// when others can list it or replace it.
pub fn prepare_root(dir: &Path) -> io::Result<()> {
    match fs::symlink_metadata(dir) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            wanopt_codec::private::create_dir_all(dir)?;
        }
        Err(e) => return Err(e),
        Ok(meta) => {
            // A link to a directory is the operator's choice: use its target.
            let meta = if meta.file_type().is_symlink() {
                fs::metadata(dir)?
            } else {
                meta
            };
            if !meta.is_dir() {
                return Err(io::Error::other("not a directory"));
            }
            let mode = meta.permissions().mode() & 0o7777;
            if mode & 0o077 != 0 {
                if meta.uid() == nix::unistd::geteuid().as_raw() && holds_only_caches(dir)? {
                    fs::set_permissions(dir, Permissions::from_mode(DIR_MODE))?;
                    info!(
                        "cache directory {}: mode {mode:o} tightened to {DIR_MODE:o} (the byte cache holds traffic in the clear)",
                        dir.display()
                    );
                } else {
                    warn!(
                        "cache directory {} (mode {mode:o}) is open to other users and holds more than wanopt's caches: the caches in it are private (0700) but others see which peers they are for; give wanopt a directory of its own",
                        dir.display()
                    );
                }
            }
        }
    }
    warn_if_replaceable(dir);
    Ok(())
}

/// Whether every entry of `dir` is a peer cache directory (or a probe file
/// of [`crate::reduce::Caches::new`]).
fn holds_only_caches(dir: &Path) -> io::Result<bool> {
    for entry in fs::read_dir(dir)? {
        let entry = entry?;
        let name = entry.file_name();
        let name = name.to_string_lossy();
        let ok =
            (entry.file_type()?.is_dir() && is_peer_dir_name(&name)) || name.starts_with(".probe-");
        if !ok {
            return Ok(false);
        }
    }
    Ok(true)
}

/// Warns when a directory on the way to `dir` (or `dir`) may be written by
/// other users without the sticky bit: they could replace the cache.
fn warn_if_replaceable(dir: &Path) {
    let Ok(dir) = fs::canonicalize(dir) else {
        return;
    };
    for ancestor in dir.ancestors() {
        let Ok(meta) = fs::metadata(ancestor) else {
            continue;
        };
        let mode = meta.permissions().mode();
        if mode & 0o022 != 0 && mode & 0o1000 == 0 {
            warn!(
                "{} (on the way to the cache directory) is writable by other users (mode {:o}): they could replace the byte cache; tighten it or move --cache-dir",
                ancestor.display(),
                mode & 0o7777
            );
            return;
        }
    }
}

/// Makes an opened peer cache directory private and marks it as wanopt's:
/// the directory 0700, every file in it 0600 (a line in the log when a
/// cache of an older version had looser modes), and the [`MARKER`] file.
/// `dir` must not be a symbolic link.
pub fn prepare_peer_dir(dir: &Path, peer: PublicKey) -> io::Result<()> {
    let meta = fs::symlink_metadata(dir)?;
    if !meta.is_dir() {
        return Err(io::Error::other(
            "not a directory (a symbolic link is not followed)",
        ));
    }
    let mut tightened = 0u64;
    if meta.permissions().mode() & 0o7777 != DIR_MODE {
        fs::set_permissions(dir, Permissions::from_mode(DIR_MODE))?;
        tightened += 1;
    }
    for entry in fs::read_dir(dir)? {
        let entry = entry?;
        // Never follow a link: `file_type` and `symlink_metadata` do not.
        if !entry.file_type()?.is_file() {
            continue;
        }
        let path = entry.path();
        let mode = fs::symlink_metadata(&path)?.permissions().mode() & 0o7777;
        if mode != FILE_MODE {
            fs::set_permissions(&path, Permissions::from_mode(FILE_MODE))?;
            tightened += 1;
        }
    }
    if tightened > 0 {
        info!(
            "byte cache in {}: {tightened} files and directories tightened to owner-only access ({DIR_MODE:o}/{FILE_MODE:o}): the cache holds traffic in the clear",
            dir.display()
        );
    }
    let marker = dir.join(MARKER);
    if fs::symlink_metadata(&marker).is_err() {
        use std::io::Write;
        let mut file = wanopt_codec::private::create_file(&marker, true)?;
        writeln!(
            file,
            "{MARKER_FIRST_LINE}\npeer {peer}\n`wanopt cache clear` removes directories that carry this file."
        )?;
    }
    Ok(())
}

/// Why `wanopt cache clear` leaves an entry of the cache directory alone;
/// `None` when it is a peer cache it may remove.
pub fn not_a_peer_cache(path: &Path) -> Option<&'static str> {
    let Ok(meta) = fs::symlink_metadata(path) else {
        return Some("it cannot be read");
    };
    if meta.file_type().is_symlink() {
        return Some("it is a symbolic link");
    }
    if !meta.is_dir() {
        return Some("it is not a directory");
    }
    let name = path.file_name().unwrap_or_default().to_string_lossy();
    if !is_peer_dir_name(&name) {
        return Some("its name is not a peer key");
    }
    if meta.uid() != nix::unistd::geteuid().as_raw() {
        return Some("another user owns it");
    }
    if has_marker(path) || is_legacy_layout(path) {
        None
    } else {
        Some("it carries no wanopt marker and holds files wanopt does not write")
    }
}

fn has_marker(dir: &Path) -> bool {
    let marker = dir.join(MARKER);
    let regular = fs::symlink_metadata(&marker).is_ok_and(|m| m.is_file());
    regular
        && fs::read_to_string(&marker)
            .is_ok_and(|text| text.lines().next() == Some(MARKER_FIRST_LINE))
}

/// Whether `dir` looks exactly like a peer cache written before the marker
/// existed: a `lock` file and nothing but regular files of wanopt's names.
pub fn is_legacy_layout(dir: &Path) -> bool {
    let Ok(entries) = fs::read_dir(dir) else {
        return false;
    };
    let mut lock = false;
    for entry in entries {
        let Ok(entry) = entry else {
            return false;
        };
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if !entry.file_type().is_ok_and(|t| t.is_file()) || !is_cache_file_name(&name) {
            return false;
        }
        lock |= name == "lock";
    }
    lock
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mode(path: &Path) -> u32 {
        fs::symlink_metadata(path).unwrap().permissions().mode() & 0o7777
    }

    #[test]
    fn names_of_the_layout_are_recognised_strictly() {
        assert!(is_peer_dir_name(&"ab".repeat(32)));
        assert!(!is_peer_dir_name(&"AB".repeat(32)));
        assert!(!is_peer_dir_name("apt"));
        for name in [
            "lock",
            "meta",
            "seg-0000000003.wseg",
            "peer-view",
            "peer-view.journal.12",
        ] {
            assert!(is_cache_file_name(name), "{name}");
        }
        for name in ["seg-.wseg", "peer-view.journal.", "passwd", "lock.bak"] {
            assert!(!is_cache_file_name(name), "{name}");
        }
    }

    #[test]
    fn an_old_cache_is_tightened_and_marked_at_open() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("ab".repeat(32));
        fs::create_dir(&dir).unwrap();
        fs::set_permissions(&dir, Permissions::from_mode(0o755)).unwrap();
        for name in ["lock", "seg-0000000001.wseg"] {
            fs::write(dir.join(name), b"x").unwrap();
            fs::set_permissions(dir.join(name), Permissions::from_mode(0o644)).unwrap();
        }
        assert!(is_legacy_layout(&dir));
        prepare_peer_dir(&dir, PublicKey([0xab; 32])).unwrap();
        assert_eq!(mode(&dir), 0o700);
        assert_eq!(mode(&dir.join("lock")), 0o600);
        assert_eq!(mode(&dir.join("seg-0000000001.wseg")), 0o600);
        assert_eq!(mode(&dir.join(MARKER)), 0o600);
        assert!(has_marker(&dir));
        assert_eq!(not_a_peer_cache(&dir), None);
    }

    #[test]
    fn clear_recognises_only_wanopt_caches_and_never_a_link() {
        let root = tempfile::tempdir().unwrap();
        let foreign = root.path().join("apt");
        fs::create_dir(&foreign).unwrap();
        assert!(not_a_peer_cache(&foreign).is_some());
        // A peer-key name is not enough: its files must be wanopt's.
        let named = root.path().join("cd".repeat(32));
        fs::create_dir(&named).unwrap();
        fs::write(named.join("lock"), b"").unwrap();
        fs::write(named.join("notes.txt"), b"mine").unwrap();
        assert!(not_a_peer_cache(&named).is_some());
        // A link with a peer-key name to a wanopt-looking directory.
        let target = tempfile::tempdir().unwrap();
        fs::write(target.path().join("lock"), b"").unwrap();
        let link = root.path().join("ef".repeat(32));
        std::os::unix::fs::symlink(target.path(), &link).unwrap();
        assert_eq!(not_a_peer_cache(&link), Some("it is a symbolic link"));
        // A marker that is a link does not count either.
        let linked_marker = root.path().join("12".repeat(32));
        fs::create_dir(&linked_marker).unwrap();
        fs::write(linked_marker.join("data"), b"").unwrap();
        let real = target.path().join("m");
        fs::write(&real, format!("{MARKER_FIRST_LINE}\n")).unwrap();
        std::os::unix::fs::symlink(&real, linked_marker.join(MARKER)).unwrap();
        assert!(not_a_peer_cache(&linked_marker).is_some());
    }

    #[test]
    fn the_root_is_tightened_only_when_it_holds_nothing_else() {
        let parent = tempfile::tempdir().unwrap();
        let own = parent.path().join("own");
        fs::create_dir(&own).unwrap();
        fs::create_dir(own.join("ab".repeat(32))).unwrap();
        fs::set_permissions(&own, Permissions::from_mode(0o755)).unwrap();
        prepare_root(&own).unwrap();
        assert_eq!(mode(&own), 0o700);
        let shared = parent.path().join("shared");
        fs::create_dir(&shared).unwrap();
        fs::create_dir(shared.join("apt")).unwrap();
        fs::set_permissions(&shared, Permissions::from_mode(0o755)).unwrap();
        prepare_root(&shared).unwrap();
        assert_eq!(mode(&shared), 0o755);
        let new = parent.path().join("new/cache");
        prepare_root(&new).unwrap();
        assert_eq!(mode(&new), 0o700);
    }
}
