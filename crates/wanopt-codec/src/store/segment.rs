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
//!
//! Appends are buffered: [`Segment::append`] adds the record to an
//! in-memory tail and [`Segment::flush`] writes the whole tail with one
//! write. Reads see buffered records at once. Only a flushed record is in
//! the file (and thus survives the process); a failed flush leaves the file
//! at its last record boundary and forgets the buffered records.

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
    /// Bytes of valid records, buffered ones included.
    pub len: u64,
    /// Fingerprints of the records, in order (for eviction), buffered ones
    /// last.
    pub fingerprints: Vec<Fingerprint>,
    path: PathBuf,
    file: File,
    /// Records appended but not yet written, starting at file offset
    /// `len - buffer.len()`.
    buffer: Vec<u8>,
    /// Number of records in `buffer` (the last entries of `fingerprints`).
    buffered_records: usize,
    /// Written since the last [`Segment::sync_handle`].
    unsynced: bool,
}

/// A [`Segment::flush`] that failed: the buffered records are gone.
#[derive(Debug)]
pub struct FlushError {
    /// The write error.
    pub source: io::Error,
    /// Fingerprints of the records that were buffered and are now dropped.
    pub dropped: Vec<Fingerprint>,
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
        let file = crate::private::create_file(&path, true)?;
        Ok(Segment {
            number,
            len: 0,
            fingerprints: Vec::new(),
            path,
            file,
            buffer: Vec::new(),
            buffered_records: 0,
            unsynced: true,
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
        crate::private::tighten_file(&file)?;
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
                buffer: Vec::new(),
                buffered_records: 0,
                unsynced: false,
            },
            records,
            dropped,
        ))
    }

    /// Append a record to the buffer; returns its offset. It reaches the
    /// file at the next [`Segment::flush`] (or when the segment is dropped).
    pub fn append(&mut self, fingerprint: &Fingerprint, data: &[u8]) -> io::Result<u32> {
        let offset =
            u32::try_from(self.len).map_err(|_| io::Error::other("segment offset beyond 4 GiB"))?;
        let len = u32::try_from(data.len()).map_err(|_| io::Error::other("record too long"))?;
        let start = self.buffer.len();
        self.buffer.extend_from_slice(&RECORD_MAGIC);
        self.buffer.extend_from_slice(&len.to_be_bytes());
        self.buffer.extend_from_slice(fingerprint.as_bytes());
        self.buffer
            .extend_from_slice(&crc(len, fingerprint, data).to_be_bytes());
        self.buffer.extend_from_slice(&[0; 4]);
        self.buffer.extend_from_slice(data);
        self.len += (self.buffer.len() - start) as u64;
        self.fingerprints.push(*fingerprint);
        self.buffered_records += 1;
        Ok(offset)
    }

    /// Bytes appended but not yet written.
    pub fn buffered_len(&self) -> usize {
        self.buffer.len()
    }

    /// Write the buffered records with one write. On failure the file is
    /// cut back to the last record written before (so no partial record is
    /// left behind if we can help it) and the buffered records are dropped.
    pub fn flush(&mut self) -> Result<(), FlushError> {
        if self.buffer.is_empty() {
            return Ok(());
        }
        let written = self.len - self.buffer.len() as u64;
        let result = self.file.write_all_at(&self.buffer, written);
        self.unsynced = true;
        self.buffer.clear();
        let buffered = std::mem::take(&mut self.buffered_records);
        match result {
            Ok(()) => Ok(()),
            Err(source) => {
                let _ = self.file.set_len(written);
                self.len = written;
                let kept = self.fingerprints.len() - buffered;
                let dropped = self.fingerprints.split_off(kept);
                Err(FlushError { source, dropped })
            }
        }
    }

    /// Free the buffer's memory (for a segment that is no longer appended
    /// to); does nothing while records are buffered.
    pub fn release_buffer(&mut self) {
        if self.buffer.is_empty() {
            self.buffer = Vec::new();
        }
    }

    /// The buffered bytes at file offset `offset`, if that is past the
    /// written part.
    fn buffered(&self, offset: u64) -> Option<&[u8]> {
        let written = self.len - self.buffer.len() as u64;
        let start = usize::try_from(offset.checked_sub(written)?).ok()?;
        self.buffer.get(start..)
    }

    /// Read the data of the record at `offset` (`len` bytes) into `out`.
    pub fn read(&self, offset: u32, len: u32, out: &mut Vec<u8>) -> io::Result<()> {
        let data_offset = u64::from(offset) + RECORD_HEADER_LEN as u64;
        if let Some(tail) = self.buffered(u64::from(offset)) {
            let data = tail
                .get(RECORD_HEADER_LEN..RECORD_HEADER_LEN + len as usize)
                .ok_or_else(|| io::Error::other("read past the end of the segment"))?;
            out.extend_from_slice(data);
            return Ok(());
        }
        let start = out.len();
        out.resize(start + len as usize, 0);
        let result = self.file.read_exact_at(&mut out[start..], data_offset);
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
        match self.buffered(u64::from(offset)) {
            Some(tail) => header.copy_from_slice(tail.get(..RECORD_HEADER_LEN)?),
            None => self
                .file
                .read_exact_at(&mut header, u64::from(offset))
                .ok()?,
        }
        if header[..4] != RECORD_MAGIC {
            return None;
        }
        let len = u32::from_be_bytes([header[4], header[5], header[6], header[7]]);
        let fingerprint = Fingerprint::from_slice(&header[8..8 + FINGERPRINT_LEN])?;
        Some((len, fingerprint))
    }

    /// A handle to flush to stable storage what [`Segment::flush`] wrote
    /// since the last call (`None`: nothing), so the caller can sync it
    /// without holding the store.
    pub fn sync_handle(&mut self) -> io::Result<Option<File>> {
        if !self.unsynced {
            return Ok(None);
        }
        let file = self.file.try_clone()?;
        self.unsynced = false;
        Ok(Some(file))
    }

    /// Delete the file (buffered records are discarded).
    pub fn remove(mut self) -> io::Result<()> {
        self.buffer.clear();
        let path = std::mem::take(&mut self.path);
        drop(self);
        std::fs::remove_file(path)
    }

    /// Path of the file.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for Segment {
    /// Write what is buffered, best effort (a failure leaves the file at a
    /// record boundary or a torn tail that the next open drops).
    fn drop(&mut self) {
        let _ = self.flush();
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
        let mut seg = Segment::create(dir.path(), 3).unwrap();
        let a = vec![1u8; 100];
        let b = vec![2u8; 200];
        let fa = Fingerprint::of(&a);
        let fb = Fingerprint::of(&b);
        assert_eq!(seg.append(&fa, &a).unwrap(), 0);
        assert_eq!(seg.append(&fb, &b).unwrap(), 132);
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
