//! The persistent chunk store: append-only segments plus an in-memory index.
//!
//! A store is a directory:
//!
//! - `meta`: magic, [`CacheId`], epoch, CRC-32 (replaced atomically);
//! - `seg-NNNNNNNNNN.wseg`: segment files of checksummed records (see
//!   [`segment`]), appended to the newest, deleted oldest-first (FIFO) once
//!   the total passes the capacity.
//!
//! On open every segment is scanned, a torn or damaged tail is truncated,
//! and the index is rebuilt. If anything had to be dropped the epoch is
//! bumped, so a peer that assumed we hold those records forgets its
//! assumptions at the next [`crate::Hello`]. Every read is verified against
//! the fingerprint: a record damaged on disk is reported as a miss and
//! dropped from the index, never returned.
//!
//! [`ChunkStore::insert`] writes the record before it returns.
//! [`ChunkStore::insert_buffered`] keeps it in memory (readable at once)
//! until [`ChunkStore::flush`], so that a caller storing many chunks issues
//! one write for all of them; it must flush before it tells the peer about
//! them.

pub mod index;
pub mod segment;

use std::collections::VecDeque;
use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use thiserror::Error;

use crate::chunker::MAX_CHUNK_LEN;
use crate::control::CacheId;
use crate::fingerprint::Fingerprint;
use crate::stats::StoreStats;
use index::{Index, Location};
use segment::{Segment, RECORD_HEADER_LEN};

const META_MAGIC: [u8; 4] = *b"WOM1";
const META_LEN: usize = 4 + 16 + 8 + 4;
/// Buffered appends are written once they pass this many bytes.
const FLUSH_LEN: usize = 1 << 20;

/// Store sizing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct StoreConfig {
    /// Bound on the bytes of all segments; the oldest segments are deleted
    /// beyond it (the newest segment is never deleted).
    pub capacity: u64,
    /// A new segment is started once the current one would pass this size.
    pub segment_size: u64,
}

impl Default for StoreConfig {
    fn default() -> Self {
        StoreConfig {
            capacity: 4 << 30,
            segment_size: 64 << 20,
        }
    }
}

/// Error opening a store.
#[derive(Debug, Error)]
pub enum OpenError {
    /// The directory or a file could not be read or written.
    #[error("cache store i/o: {0}")]
    Io(#[from] io::Error),
    /// The configuration is unusable.
    #[error("invalid store configuration: {0}")]
    Config(&'static str),
}

/// Error writing to a store.
#[derive(Debug, Error)]
pub enum InsertError {
    /// The chunk is empty or longer than the format allows.
    #[error("chunk of {0} bytes cannot be stored")]
    Length(usize),
    /// The disk write failed.
    #[error("cache store write: {0}")]
    Io(#[from] io::Error),
}

/// A persistent, bounded, verified chunk store.
#[derive(Debug)]
pub struct ChunkStore {
    dir: PathBuf,
    config: StoreConfig,
    cache_id: CacheId,
    epoch: u64,
    segments: VecDeque<Segment>,
    index: Index,
    total_bytes: u64,
    stats: StoreStats,
    sketches: std::collections::HashMap<u64, Fingerprint>,
    last_write_error: Option<String>,
}

/// Bytes at each end of a chunk that [`ChunkStore::similar`] compares.
const SKETCH_LEN: usize = 64;
/// Bound on remembered sketches (two per chunk inserted since the store
/// opened; cleared when full: a lost sketch costs a delta, never a byte).
const MAX_SKETCHES: usize = 1 << 18;

/// Hashes of a chunk's first and last [`SKETCH_LEN`] bytes (`None` for
/// chunks too short to have distinct ends).
fn sketches(data: &[u8]) -> Option<[u64; 2]> {
    if data.len() < 4 * SKETCH_LEN {
        return None;
    }
    let hash = |bytes: &[u8], seed: u64| {
        bytes.chunks_exact(8).fold(seed, |h, w| {
            let w = u64::from_le_bytes(w.try_into().unwrap_or([0; 8]));
            (h ^ w).wrapping_mul(0x9e37_79b9_7f4a_7c15).rotate_left(29)
        })
    };
    Some([
        hash(&data[..SKETCH_LEN], 1),
        hash(&data[data.len() - SKETCH_LEN..], 2),
    ])
}

impl ChunkStore {
    /// Open the store in `dir`, creating it (with identity `new_id`, which
    /// the caller draws from a random source) if it does not exist or has
    /// no valid `meta` file.
    pub fn open(dir: &Path, config: StoreConfig, new_id: CacheId) -> Result<Self, OpenError> {
        if config.segment_size < 2 * (MAX_CHUNK_LEN + RECORD_HEADER_LEN) as u64
            || config.segment_size > u64::from(u32::MAX)
        {
            return Err(OpenError::Config(
                "segment size must be between 2 MiB and 4 GiB",
            ));
        }
        if config.capacity < config.segment_size {
            return Err(OpenError::Config("capacity must be at least one segment"));
        }
        crate::private::create_dir_all(dir)?;
        let mut numbers = Vec::new();
        for entry in fs::read_dir(dir)? {
            let entry = entry?;
            if let Some(n) = entry
                .file_name()
                .to_str()
                .and_then(segment::parse_file_name)
            {
                numbers.push(n);
            }
        }
        numbers.sort_unstable();
        let mut stats = StoreStats::default();
        let (cache_id, mut epoch, fresh) = match read_meta(dir) {
            Some((id, epoch)) => (id, epoch, false),
            None => (new_id, 0, true),
        };
        let mut store = ChunkStore {
            dir: dir.to_path_buf(),
            config,
            cache_id,
            epoch,
            segments: VecDeque::new(),
            index: Index::default(),
            total_bytes: 0,
            stats,
            sketches: std::collections::HashMap::new(),
            last_write_error: None,
        };
        if fresh {
            // Unknown contents: start clean under the new identity.
            for n in numbers {
                fs::remove_file(dir.join(segment::file_name(n)))?;
            }
            write_meta(dir, cache_id, epoch)?;
            return Ok(store);
        }
        let mut lost = false;
        for n in numbers {
            let (seg, records, dropped) = Segment::open_and_repair(dir, n)?;
            if dropped > 0 {
                lost = true;
                stats.truncated_bytes += dropped;
            }
            for r in records {
                store.index.insert(
                    r.fingerprint,
                    Location {
                        segment: n,
                        offset: r.offset,
                        len: r.len,
                    },
                );
            }
            store.total_bytes += seg.len;
            store.segments.push_back(seg);
        }
        if lost {
            epoch += 1;
            write_meta(dir, cache_id, epoch)?;
        }
        store.epoch = epoch;
        store.stats = stats;
        store.evict()?;
        Ok(store)
    }

    /// Identity of this store.
    pub fn cache_id(&self) -> CacheId {
        self.cache_id
    }

    /// Epoch (see [`crate::Hello::epoch`]).
    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    /// Oldest position still held.
    pub fn low(&self) -> u64 {
        self.segments
            .front()
            .map(|s| u64::from(s.number) << 32)
            .unwrap_or(0)
    }

    /// Position the next record would get in the current segment.
    pub fn high(&self) -> u64 {
        self.segments
            .back()
            .map(|s| (u64::from(s.number) << 32) | s.len)
            .unwrap_or(0)
    }

    /// Store position of `fingerprint`, if indexed.
    pub fn position(&self, fingerprint: &Fingerprint) -> Option<u64> {
        self.index.get(fingerprint).map(|l| l.position())
    }

    /// Append `data` (whose fingerprint is `fingerprint`, which the caller
    /// has verified) unless it is already indexed; returns its position.
    /// The record is written to its segment file when this returns.
    pub fn insert(&mut self, fingerprint: Fingerprint, data: &[u8]) -> Result<u64, InsertError> {
        let position = self.insert_buffered(fingerprint, data)?;
        self.flush()?;
        Ok(position)
    }

    /// Like [`ChunkStore::insert`], but the record may stay in memory until
    /// [`ChunkStore::flush`] (or until the buffer passes 1 MiB, or the
    /// store is dropped). It is indexed and readable at once, but only in
    /// the file once flushed: do not announce its position to the peer
    /// before `flush` returns `Ok`.
    pub fn insert_buffered(
        &mut self,
        fingerprint: Fingerprint,
        data: &[u8],
    ) -> Result<u64, InsertError> {
        let result = self.insert_unnoted(fingerprint, data);
        if let Err(InsertError::Io(e)) = &result {
            self.note_write_error(e);
        }
        result
    }

    /// Counts a failed write and keeps its text ([`ChunkStore::last_write_error`]).
    fn note_write_error(&mut self, e: &io::Error) {
        self.stats.write_errors += 1;
        self.last_write_error = Some(e.to_string());
    }

    /// The last failed append or flush, if any since the store opened.
    pub fn last_write_error(&self) -> Option<&str> {
        self.last_write_error.as_deref()
    }

    fn insert_unnoted(
        &mut self,
        fingerprint: Fingerprint,
        data: &[u8],
    ) -> Result<u64, InsertError> {
        if data.is_empty() || data.len() > MAX_CHUNK_LEN {
            return Err(InsertError::Length(data.len()));
        }
        if let Some(location) = self.index.get(&fingerprint) {
            return Ok(location.position());
        }
        let record_len = (RECORD_HEADER_LEN + data.len()) as u64;
        let needs_new = match self.segments.back() {
            None => true,
            Some(s) => s.len + record_len > self.config.segment_size,
        };
        if needs_new {
            // A full segment's records reach its file before the next
            // segment starts (only the newest segment buffers).
            self.flush_unnoted()?;
            if let Some(full) = self.segments.back_mut() {
                full.release_buffer();
            }
            let number = self
                .segments
                .back()
                .map(|s| s.number.wrapping_add(1))
                .unwrap_or(0);
            let seg = Segment::create(&self.dir, number)?;
            self.segments.push_back(seg);
        }
        let Some(seg) = self.segments.back_mut() else {
            return Err(InsertError::Io(io::Error::other("no segment")));
        };
        let offset = seg.append(&fingerprint, data)?;
        let buffered_len = seg.buffered_len();
        let location = Location {
            segment: seg.number,
            offset,
            len: data.len() as u32,
        };
        self.total_bytes += record_len;
        self.index.insert(fingerprint, location);
        if let Some(keys) = sketches(data) {
            if self.sketches.len() + 2 > MAX_SKETCHES {
                self.sketches.clear();
            }
            for key in keys {
                self.sketches.insert(key, fingerprint);
            }
        }
        self.stats.inserts += 1;
        self.stats.inserted_bytes += data.len() as u64;
        self.evict()?;
        if buffered_len >= FLUSH_LEN {
            self.flush()?;
        }
        Ok(location.position())
    }

    /// Write the records appended by [`ChunkStore::insert_buffered`] (one
    /// write). On failure they are dropped from the index (as if never
    /// inserted) and the file keeps what was written before.
    pub fn flush(&mut self) -> io::Result<()> {
        let result = self.flush_unnoted();
        if let Err(e) = &result {
            self.note_write_error(e);
        }
        result
    }

    fn flush_unnoted(&mut self) -> io::Result<()> {
        let mut result = Ok(());
        for seg in self.segments.iter_mut() {
            let len = seg.len;
            if let Err(e) = seg.flush() {
                self.total_bytes -= len - seg.len;
                for fp in &e.dropped {
                    self.index.remove_in_segment(fp, seg.number);
                }
                result = Err(e.source);
            }
        }
        result
    }

    /// [`ChunkStore::flush`], then keep in `announce` only the entries
    /// still indexed at their position: what the peer may be told we hold
    /// (a failed write, here or in an earlier flush, drops its records
    /// from the index). Returns the flush's error, if any.
    pub fn flush_announced(&mut self, announce: &mut Vec<(Fingerprint, u64)>) -> io::Result<()> {
        let result = self.flush();
        announce.retain(|(fp, position)| self.position(fp) == Some(*position));
        result
    }

    /// Append the chunk `fingerprint` to `out` if the store holds it and it
    /// verifies. A damaged record is dropped from the index and reported as
    /// a miss (`Ok(false)`).
    pub fn get(&mut self, fingerprint: &Fingerprint, out: &mut Vec<u8>) -> io::Result<bool> {
        let Some(location) = self.index.get(fingerprint) else {
            self.stats.misses += 1;
            return Ok(false);
        };
        let Some(seg) = self.segments.iter().find(|s| s.number == location.segment) else {
            self.index.remove(fingerprint);
            self.stats.misses += 1;
            return Ok(false);
        };
        let start = out.len();
        let read = seg.read(location.offset, location.len, out);
        if read.is_err() || !fingerprint.matches(&out[start..]) {
            out.truncate(start);
            self.index.remove(fingerprint);
            self.stats.corrupt += 1;
            self.stats.misses += 1;
            return Ok(false);
        }
        self.stats.hits += 1;
        Ok(true)
    }

    /// The chunk stored right after `fingerprint`'s record, if it is still
    /// indexed there: in a stream sent or received before, what came next.
    /// The encoder uses it as the base of a delta when that stream comes
    /// back edited. Not verified (read it with [`ChunkStore::get`]).
    pub fn successor(&self, fingerprint: &Fingerprint) -> Option<Fingerprint> {
        let location = self.index.get(fingerprint)?;
        let seg = self
            .segments
            .iter()
            .find(|s| s.number == location.segment)?;
        let next = u64::from(location.offset) + RECORD_HEADER_LEN as u64 + u64::from(location.len);
        let next = u32::try_from(next).ok()?;
        let (len, successor) = seg.read_header(next)?;
        let indexed = self.index.get(&successor)?;
        (indexed.segment == location.segment && indexed.offset == next && indexed.len == len)
            .then_some(successor)
    }

    /// A stored chunk that begins or ends with the same bytes as `data`
    /// (64 at each end): in content-defined chunks, the likely old version
    /// of a chunk edited in between. Still indexed, not verified.
    pub fn similar(&self, data: &[u8]) -> Option<Fingerprint> {
        sketches(data)?
            .iter()
            .filter_map(|key| self.sketches.get(key))
            .find(|fp| self.index.get(fp).is_some())
            .copied()
    }

    /// True when `fingerprint` is indexed (not verified).
    pub fn contains(&self, fingerprint: &Fingerprint) -> bool {
        self.index.get(fingerprint).is_some()
    }

    /// True when `fingerprint` is indexed in a segment that at least
    /// `margin` more bytes of appends cannot evict (the free capacity
    /// plus the segments older than it): it can be read back a while
    /// later, barring damage or [`ChunkStore::clear`].
    pub fn holds_for(&self, fingerprint: &Fingerprint, margin: u64) -> bool {
        let Some(location) = self.index.get(fingerprint) else {
            return false;
        };
        // Segment numbers are consecutive, oldest first.
        let (Some(first), Some(last)) = (self.segments.front(), self.segments.back()) else {
            return false;
        };
        if !(first.number..=last.number).contains(&location.segment) {
            return false;
        }
        let mut room = self.config.capacity.saturating_sub(self.total_bytes);
        for segment in &self.segments {
            if room >= margin {
                return true;
            }
            if segment.number == location.segment {
                return false;
            }
            room += segment.len;
        }
        room >= margin
    }

    /// Write buffered records ([`ChunkStore::flush`]) and flush every
    /// segment written since the last sync to stable storage.
    pub fn sync(&mut self) -> io::Result<()> {
        for file in self.prepare_sync()? {
            file.sync_data()?;
        }
        Ok(())
    }

    /// Write buffered records and return handles to the segment files
    /// written since the last call, for the caller to flush to stable
    /// storage (`sync_data`) without holding the store: an fsync can take
    /// long on a busy disk, and every flow of the peer waits for the store.
    pub fn prepare_sync(&mut self) -> io::Result<Vec<std::fs::File>> {
        self.flush()?;
        let mut files = Vec::new();
        for s in &mut self.segments {
            files.extend(s.sync_handle()?);
        }
        Ok(files)
    }

    /// Delete everything and start over as a new cache `new_id`.
    pub fn clear(&mut self, new_id: CacheId) -> io::Result<()> {
        while let Some(seg) = self.segments.pop_front() {
            seg.remove()?;
        }
        self.index.clear();
        self.sketches.clear();
        self.total_bytes = 0;
        self.cache_id = new_id;
        self.epoch = 0;
        write_meta(&self.dir, new_id, 0)
    }

    /// Counters and sizes.
    pub fn stats(&self) -> StoreStats {
        StoreStats {
            chunks: self.index.len() as u64,
            bytes: self.total_bytes,
            segments: self.segments.len() as u64,
            ..self.stats
        }
    }

    /// Directory of the store.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Paths of the segment files, oldest first (for tools and tests).
    pub fn segment_paths(&self) -> Vec<PathBuf> {
        self.segments
            .iter()
            .map(|s| s.path().to_path_buf())
            .collect()
    }

    fn evict(&mut self) -> io::Result<()> {
        while self.total_bytes > self.config.capacity && self.segments.len() > 1 {
            let Some(seg) = self.segments.pop_front() else {
                break;
            };
            for fp in &seg.fingerprints {
                self.index.remove_in_segment(fp, seg.number);
            }
            self.total_bytes -= seg.len;
            self.stats.evicted_segments += 1;
            seg.remove()?;
        }
        Ok(())
    }
}

fn read_meta(dir: &Path) -> Option<(CacheId, u64)> {
    let bytes = fs::read(dir.join("meta")).ok()?;
    if bytes.len() != META_LEN || bytes[..4] != META_MAGIC {
        return None;
    }
    let crc = u32::from_be_bytes(bytes[28..32].try_into().ok()?);
    if crc32fast::hash(&bytes[..28]) != crc {
        return None;
    }
    let id = CacheId(bytes[4..20].try_into().ok()?);
    let epoch = u64::from_be_bytes(bytes[20..28].try_into().ok()?);
    Some((id, epoch))
}

fn write_meta(dir: &Path, id: CacheId, epoch: u64) -> io::Result<()> {
    let mut bytes = Vec::with_capacity(META_LEN);
    bytes.extend_from_slice(&META_MAGIC);
    bytes.extend_from_slice(&id.0);
    bytes.extend_from_slice(&epoch.to_be_bytes());
    let crc = crc32fast::hash(&bytes);
    bytes.extend_from_slice(&crc.to_be_bytes());
    let tmp = dir.join("meta.tmp");
    let mut file = crate::private::create_file(&tmp, true)?;
    file.write_all(&bytes)?;
    file.sync_all()?;
    fs::rename(&tmp, dir.join("meta"))?;
    Ok(())
}

#[cfg(test)]
mod tests;
