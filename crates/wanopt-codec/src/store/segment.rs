//! Segment files: append-only logs of checksummed chunk records.
//!
//! ```text
//! record = header (32 bytes) + data (len bytes)
//! header = magic "WOR1" | len u32 | fingerprint (16) | crc32 u32 | zero u32
//! ```
//!
//! The CRC-32 (IEEE polynomial: crc32fast
//! runs at memory speed with PCLMULQDQ) covers `len`, the fingerprint and
//! the data. A scan stops at the first record that is short, has a bad
//! magic, an out-of-range length or a CRC mismatch: that is where a torn
//! append (crash mid-write) or damage begins, and the file is truncated
//! there.

use std::fs::{File, OpenOptions};
use std::io::{self, BufReader, Read};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use crate::chunker::MAX_CHUNK_LEN;
use crate::fingerprint::{Fingerprint, FINGERPRINT_LEN};

/// Length of a record header.
pub const RECORD_HEADER_LEN: usize = 32;
const RECORD_MAGIC: [u8; 4] = *b"WOR1";

/// One record found by [`Segment::open_and_repair`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ScannedRecord {
    /// Offset of the record header in the segment.
    pub offset: u32,
    /// Data length.
    pub len: u32,
    /// Fingerprint from the header.
    pub fingerprint: Fingerprint,
}

/// An open segment file.
#[derive(Debug)]
pub struct Segment {
    /// Sequence number (the high 32 bits of store positions).
    pub number: u32,
    /// Bytes of valid records.
    pub len: u64,
    /// Fingerprints of the records, in order (for eviction).
    pub fingerprints: Vec<Fingerprint>,
    path: PathBuf,
    file: File,
}

fn crc(len: u32, fingerprint: &Fingerprint, data: &[u8]) -> u32 {
    let mut hasher = crc32fast::Hasher::new();
    hasher.update(&len.to_be_bytes());
    hasher.update(fingerprint.as_bytes());
    hasher.update(data);
    hasher.finalize()
}

/// File name of segment `number`.
pub fn file_name(number: u32) -> String {
    format!("seg-{number:010}.wseg")
}

/// Segment number from a file name, if it is one.
pub fn parse_file_name(name: &str) -> Option<u32> {
    name.strip_prefix("seg-")?
        .strip_suffix(".wseg")?
        .parse()
        .ok()
}

impl Segment {
    /// Create an empty segment file (truncating any existing one).
    pub fn create(dir: &Path, number: u32) -> io::Result<Segment> {
        let path = dir.join(file_name(number));
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&path)?;
        Ok(Segment {
            number,
            len: 0,
            fingerprints: Vec::new(),
            path,
            file,
        })
    }

    /// Open an existing segment, scan its records and truncate it after the
    /// last valid one. Returns the segment, its records and the number of
    /// bytes dropped from the tail.
    pub fn open_and_repair(
        dir: &Path,
        number: u32,
    ) -> io::Result<(Segment, Vec<ScannedRecord>, u64)> {
        let path = dir.join(file_name(number));
        let file = OpenOptions::new().read(true).write(true).open(&path)?;
        let file_len = file.metadata()?.len();
        let records = scan(&file, file_len)?;
        let valid = records
            .last()
            .map(|r| u64::from(r.offset) + RECORD_HEADER_LEN as u64 + u64::from(r.len))
            .unwrap_or(0);
        let dropped = file_len - valid;
        if dropped > 0 {
            file.set_len(valid)?;
            file.sync_all()?;
        }
        let fingerprints = records.iter().map(|r| r.fingerprint).collect();
        Ok((
            Segment {
                number,
                len: valid,
                fingerprints,
                path,
                file,
            },
            records,
            dropped,
        ))
    }

    /// Append a record; returns its offset. `scratch` is reused to issue a
    /// single write.
    pub fn append(
        &mut self,
        fingerprint: &Fingerprint,
        data: &[u8],
        scratch: &mut Vec<u8>,
    ) -> io::Result<u32> {
        let offset =
            u32::try_from(self.len).map_err(|_| io::Error::other("segment offset beyond 4 GiB"))?;
        let len = u32::try_from(data.len()).map_err(|_| io::Error::other("record too long"))?;
        scratch.clear();
        scratch.extend_from_slice(&RECORD_MAGIC);
        scratch.extend_from_slice(&len.to_be_bytes());
        scratch.extend_from_slice(fingerprint.as_bytes());
        scratch.extend_from_slice(&crc(len, fingerprint, data).to_be_bytes());
        scratch.extend_from_slice(&[0; 4]);
        scratch.extend_from_slice(data);
        if let Err(e) = self.file.write_all_at(scratch, self.len) {
            // Leave no partial record behind if we can help it.
            let _ = self.file.set_len(self.len);
            return Err(e);
        }
        self.len += scratch.len() as u64;
        self.fingerprints.push(*fingerprint);
        Ok(offset)
    }

    /// Read the data of the record at `offset` (`len` bytes) into `out`.
    pub fn read(&self, offset: u32, len: u32, out: &mut Vec<u8>) -> io::Result<()> {
        let start = out.len();
        out.resize(start + len as usize, 0);
        let result = self.file.read_exact_at(
            &mut out[start..],
            u64::from(offset) + RECORD_HEADER_LEN as u64,
        );
        if result.is_err() {
            out.truncate(start);
        }
        result
    }

    /// Length and fingerprint from the header of the record at `offset`
    /// (`None` past the end or on a header that does not parse; the data
    /// is not verified here).
    pub fn read_header(&self, offset: u32) -> Option<(u32, Fingerprint)> {
        if u64::from(offset) + RECORD_HEADER_LEN as u64 > self.len {
            return None;
        }
        let mut header = [0u8; RECORD_HEADER_LEN];
        self.file
            .read_exact_at(&mut header, u64::from(offset))
            .ok()?;
        if header[..4] != RECORD_MAGIC {
            return None;
        }
        let len = u32::from_be_bytes([header[4], header[5], header[6], header[7]]);
        let fingerprint = Fingerprint::from_slice(&header[8..8 + FINGERPRINT_LEN])?;
        Some((len, fingerprint))
    }

    /// Flush to stable storage.
    pub fn sync(&self) -> io::Result<()> {
        self.file.sync_data()
    }

    /// Delete the file.
    pub fn remove(self) -> io::Result<()> {
        drop(self.file);
        std::fs::remove_file(&self.path)
    }

    /// Path of the file.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// Scan the valid records at the start of `file`.
fn scan(file: &File, file_len: u64) -> io::Result<Vec<ScannedRecord>> {
    let mut reader = BufReader::with_capacity(1 << 20, file);
    let mut records = Vec::new();
    let mut offset = 0u64;
    let mut header = [0u8; RECORD_HEADER_LEN];
    let mut data = Vec::new();
    loop {
        if file_len - offset < RECORD_HEADER_LEN as u64 {
            break;
        }
        reader.read_exact(&mut header)?;
        if header[..4] != RECORD_MAGIC {
            break;
        }
        let len = u32::from_be_bytes([header[4], header[5], header[6], header[7]]);
        if len == 0 || len as usize > MAX_CHUNK_LEN {
            break;
        }
        let end = offset + RECORD_HEADER_LEN as u64 + u64::from(len);
        if end > file_len || end > u64::from(u32::MAX) {
            break;
        }
        let Some(fingerprint) = Fingerprint::from_slice(&header[8..8 + FINGERPRINT_LEN]) else {
            break;
        };
        let stored_crc = u32::from_be_bytes([header[24], header[25], header[26], header[27]]);
        data.resize(len as usize, 0);
        reader.read_exact(&mut data)?;
        if crc(len, &fingerprint, &data) != stored_crc {
            break;
        }
        records.push(ScannedRecord {
            offset: offset as u32,
            len,
            fingerprint,
        });
        offset = end;
    }
    Ok(records)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn append_scan_and_torn_tail() {
        let dir = tempfile::tempdir().unwrap();
        let mut scratch = Vec::new();
        let mut seg = Segment::create(dir.path(), 3).unwrap();
        let a = vec![1u8; 100];
        let b = vec![2u8; 200];
        let fa = Fingerprint::of(&a);
        let fb = Fingerprint::of(&b);
        assert_eq!(seg.append(&fa, &a, &mut scratch).unwrap(), 0);
        assert_eq!(seg.append(&fb, &b, &mut scratch).unwrap(), 132);
        let mut out = Vec::new();
        seg.read(132, 200, &mut out).unwrap();
        assert_eq!(out, b);
        let full = seg.len;
        drop(seg);
        // Tear the second record.
        let path = dir.path().join(file_name(3));
        let f = OpenOptions::new().write(true).open(&path).unwrap();
        f.set_len(full - 10).unwrap();
        let (seg, records, dropped) = Segment::open_and_repair(dir.path(), 3).unwrap();
        assert_eq!(records.len(), 1);
        assert_eq!(records[0].fingerprint, fa);
        assert_eq!(dropped, 32 + 200 - 10);
        assert_eq!(seg.len, 132);
        assert_eq!(std::fs::metadata(&path).unwrap().len(), 132);
        assert_eq!(parse_file_name(&file_name(77)), Some(77));
        assert_eq!(parse_file_name("seg-x.wseg"), None);
    }
}
