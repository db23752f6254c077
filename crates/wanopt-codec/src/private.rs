//! Files of the byte cache, private to the node's user whatever the umask.
//!
//! The cache holds the plaintext of reduced traffic: every directory it
//! creates is mode 0700 and every file 0600, set explicitly after creation
//! (a umask only removes bits, and some leave group or others able to read).

use std::fs::{self, DirBuilder, File, OpenOptions, Permissions};
use std::io;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::Path;

/// Mode of every directory of the cache.
pub const DIR_MODE: u32 = 0o700;
/// Mode of every file of the cache.
pub const FILE_MODE: u32 = 0o600;

/// Opens `path` for reading and writing, creating it (mode 0600) when
/// missing and emptying it when `truncate`.
pub fn create_file(path: &Path, truncate: bool) -> io::Result<File> {
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(truncate)
        .mode(FILE_MODE)
        .open(path)?;
    tighten_file(&file)?;
    Ok(file)
}

/// Sets an open file of the cache to mode 0600 unless it is already.
pub fn tighten_file(file: &File) -> io::Result<()> {
    if file.metadata()?.permissions().mode() & 0o7777 != FILE_MODE {
        file.set_permissions(Permissions::from_mode(FILE_MODE))?;
    }
    Ok(())
}

/// Creates `dir` and its missing parents with mode 0700, and sets `dir`
/// itself to 0700 (an existing one too: it is the cache's own).
pub fn create_dir_all(dir: &Path) -> io::Result<()> {
    DirBuilder::new()
        .recursive(true)
        .mode(DIR_MODE)
        .create(dir)?;
    if fs::metadata(dir)?.permissions().mode() & 0o7777 != DIR_MODE {
        fs::set_permissions(dir, Permissions::from_mode(DIR_MODE))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_and_directories_are_owner_only_under_a_loose_umask() {
        let dir = tempfile::tempdir().unwrap();
        fs::set_permissions(dir.path(), Permissions::from_mode(0o755)).unwrap();
        let sub = dir.path().join("a/b");
        create_dir_all(&sub).unwrap();
        let mode = |p: &Path| fs::metadata(p).unwrap().permissions().mode() & 0o7777;
        assert_eq!(mode(&sub), 0o700);
        assert_eq!(mode(&dir.path().join("a")), 0o700);
        let path = sub.join("f");
        fs::write(&path, b"x").unwrap();
        fs::set_permissions(&path, Permissions::from_mode(0o644)).unwrap();
        create_file(&path, false).unwrap();
        assert_eq!(mode(&path), 0o600);
        assert_eq!(fs::read(&path).unwrap(), b"x");
    }
}
