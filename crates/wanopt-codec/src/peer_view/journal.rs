//! The peer view's journal: every change to the view since its last
//! snapshot, appended as it happens, so that a node that crashes (killed,
//! out of memory, a panic that aborts) keeps the peer's acknowledgements
//! that a clean stop would have saved, and its warm transfers stay warm.
//!
//! The journal is a series of files next to the snapshot,
//! `peer-view.journal.G` for generations G = 0, 1, 2 ..., each a magic
//! followed by records:
//!
//! ```text
//! length: u32 (of kind and body) | kind: u8 | body | CRC-32 of kind and body: u32
//! kind 1, Hello:  cache id (16) | epoch: u64 | low: u64 | high: u64
//! kind 2, Ack:    low water: u64 | (fingerprint (16) | position: u64) ...
//! kind 3, Forget: fingerprint (16)
//! ```
//!
//! (integers big-endian). A checkpoint starts a new generation while it
//! holds the cache lock, writes the snapshot, which names the first
//! generation it does not cover, and only then deletes the older ones.
//! Loading replays, oldest first, every generation the snapshot names or
//! later (all of them without a snapshot): a crash between the two steps
//! leaves the old snapshot and both generations, which replay to the same
//! view. A record cut short by a crash, or damaged, ends its file's replay.
//!
//! Records are written with one `write` each and not synced: a crashed
//! process loses none of them (they are in the kernel's page cache); a
//! power cut may lose the newest, which only makes the view forget what
//! the peer holds (the checkpoint syncs the snapshot). Forgetting costs
//! bytes, never correctness.

use std::fs::{self, File};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use crate::control::{CacheId, Hello};
use crate::fingerprint::{Fingerprint, FINGERPRINT_LEN};

const MAGIC: [u8; 4] = *b"WOJ1";
const KIND_HELLO: u8 = 1;
const KIND_ACK: u8 = 2;
const KIND_FORGET: u8 = 3;
/// A record longer than this is damage, not a record (an `Ack` frame
/// names far fewer chunks).
const MAX_RECORD: usize = 16 << 20;
const ENTRY_LEN: usize = FINGERPRINT_LEN + 8;

/// One change to the view.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Record {
    /// The peer's `Hello` was applied.
    Hello(Hello),
    /// The peer acknowledged storing chunks.
    Ack {
        low_water: u64,
        entries: Vec<(Fingerprint, u64)>,
    },
    /// The peer asked for a chunk: it no longer holds it.
    Forget(Fingerprint),
}

impl Record {
    /// The record as written to a journal file.
    fn emit(&self, out: &mut Vec<u8>) {
        let start = out.len();
        out.extend_from_slice(&[0; 4]);
        match self {
            Record::Hello(hello) => {
                out.push(KIND_HELLO);
                out.extend_from_slice(&hello.cache_id.0);
                for n in [hello.epoch, hello.low, hello.high] {
                    out.extend_from_slice(&n.to_be_bytes());
                }
            }
            Record::Ack { low_water, entries } => {
                out.push(KIND_ACK);
                out.extend_from_slice(&low_water.to_be_bytes());
                for (fp, pos) in entries {
                    out.extend_from_slice(fp.as_bytes());
                    out.extend_from_slice(&pos.to_be_bytes());
                }
            }
            Record::Forget(fp) => {
                out.push(KIND_FORGET);
                out.extend_from_slice(fp.as_bytes());
            }
        }
        let len = (out.len() - start - 4) as u32;
        out[start..start + 4].copy_from_slice(&len.to_be_bytes());
        let crc = crc32fast::hash(&out[start + 4..]);
        out.extend_from_slice(&crc.to_be_bytes());
    }

    /// Parses a record's kind and body; `None` when they are not one.
    fn parse(body: &[u8]) -> Option<Record> {
        let (&kind, rest) = body.split_first()?;
        let u64_at = |at: usize| -> Option<u64> {
            Some(u64::from_be_bytes(rest.get(at..at + 8)?.try_into().ok()?))
        };
        match kind {
            KIND_HELLO if rest.len() == 16 + 24 => Some(Record::Hello(Hello {
                cache_id: CacheId(rest.get(..16)?.try_into().ok()?),
                epoch: u64_at(16)?,
                low: u64_at(24)?,
                high: u64_at(32)?,
            })),
            KIND_ACK if rest.len() >= 8 && (rest.len() - 8).is_multiple_of(ENTRY_LEN) => {
                let entries = rest[8..]
                    .chunks_exact(ENTRY_LEN)
                    .map(|e| {
                        let fp = Fingerprint::from_slice(e)?;
                        let pos = u64::from_be_bytes(e[FINGERPRINT_LEN..].try_into().ok()?);
                        Some((fp, pos))
                    })
                    .collect::<Option<Vec<_>>>()?;
                Some(Record::Ack {
                    low_water: u64_at(0)?,
                    entries,
                })
            }
            KIND_FORGET if rest.len() == FINGERPRINT_LEN => {
                Some(Record::Forget(Fingerprint::from_slice(rest)?))
            }
            _ => None,
        }
    }
}

/// The records of one journal file's bytes, up to the first that is cut
/// short or damaged (and nothing when the magic is wrong), and how many
/// bytes were left over after them (0 for a whole file).
pub(crate) fn parse_file(bytes: &[u8]) -> (Vec<Record>, usize) {
    let mut records = Vec::new();
    let Some(mut rest) = bytes.strip_prefix(&MAGIC) else {
        return (records, bytes.len());
    };
    while let Some(len) = rest.get(..4) {
        let len = u32::from_be_bytes([len[0], len[1], len[2], len[3]]) as usize;
        if len > MAX_RECORD {
            break;
        }
        let (Some(body), Some(crc)) = (rest.get(4..4 + len), rest.get(4 + len..8 + len)) else {
            break;
        };
        if crc32fast::hash(body) != u32::from_be_bytes([crc[0], crc[1], crc[2], crc[3]]) {
            break;
        }
        let Some(record) = Record::parse(body) else {
            break;
        };
        records.push(record);
        rest = &rest[8 + len..];
    }
    (records, rest.len())
}

/// The journal file of generation `generation` for the snapshot at `snapshot`.
fn file_path(snapshot: &Path, generation: u64) -> PathBuf {
    let mut name = snapshot.file_name().unwrap_or_default().to_os_string();
    name.push(format!(".journal.{generation}"));
    snapshot.with_file_name(name)
}

/// The generations of the journal files beside `snapshot`, oldest first.
pub(crate) fn generations(snapshot: &Path) -> Vec<u64> {
    let prefix = format!(
        "{}.journal.",
        snapshot.file_name().unwrap_or_default().to_string_lossy()
    );
    let dir = match snapshot.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let mut found: Vec<u64> = fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            e.file_name()
                .to_str()?
                .strip_prefix(&prefix)?
                .parse::<u64>()
                .ok()
        })
        .collect();
    found.sort_unstable();
    found
}

/// Reads the records of generation `generation` (none when the file is
/// missing or unreadable) and the bytes left over after the last good one
/// ([`parse_file`]).
pub(crate) fn read(snapshot: &Path, generation: u64) -> (Vec<Record>, usize) {
    fs::read(file_path(snapshot, generation)).map_or_else(|_| (Vec::new(), 0), |b| parse_file(&b))
}

/// Deletes the journal files beside `snapshot` of generations before
/// `keep_from` (all of them with `u64::MAX`).
pub(crate) fn remove_before(snapshot: &Path, keep_from: u64) {
    for generation in generations(snapshot) {
        if generation < keep_from {
            let _ = fs::remove_file(file_path(snapshot, generation));
        }
    }
}

/// The open journal file that records are appended to.
#[derive(Debug)]
pub(crate) struct Journal {
    snapshot: PathBuf,
    generation: u64,
    /// `None` once a write failed: nothing more is appended to this
    /// generation (its replay would stop at the damage anyway); the next
    /// one starts afresh.
    file: Option<File>,
    /// Whether anything was appended (or failed to be) since this
    /// generation started: a view whose journal is clean has not changed.
    dirty: bool,
    scratch: Vec<u8>,
    /// Appends that failed since the view was loaded.
    pub(crate) write_errors: u64,
    /// The last of them.
    pub(crate) last_error: Option<String>,
}

impl Journal {
    /// Starts generation `generation` beside `snapshot` (an existing file
    /// of that generation is replaced).
    pub(crate) fn create(snapshot: &Path, generation: u64) -> Journal {
        let mut journal = Journal {
            snapshot: snapshot.to_path_buf(),
            generation,
            file: None,
            dirty: false,
            scratch: Vec::new(),
            write_errors: 0,
            last_error: None,
        };
        journal.start(generation);
        journal
    }

    /// The generation records go to now.
    pub(crate) fn generation(&self) -> u64 {
        self.generation
    }

    /// Whether anything was appended since this generation started.
    pub(crate) fn is_dirty(&self) -> bool {
        self.dirty
    }

    /// Continues in generation `generation`: later records go to a new file.
    pub(crate) fn start(&mut self, generation: u64) {
        self.generation = generation;
        self.dirty = false;
        let path = file_path(&self.snapshot, generation);
        let opened = crate::private::create_file(&path, true)
            .and_then(|mut f| f.write_all(&MAGIC).map(|()| f));
        self.file = match opened {
            Ok(f) => Some(f),
            Err(e) => {
                // A full disk must not leave an empty file each time.
                let _ = fs::remove_file(&path);
                self.failed(&e);
                None
            }
        };
    }

    /// Appends `record` (one write).
    pub(crate) fn append(&mut self, record: &Record) {
        self.dirty = true;
        let Some(file) = self.file.as_mut() else {
            return;
        };
        self.scratch.clear();
        record.emit(&mut self.scratch);
        if let Err(e) = file.write_all(&self.scratch) {
            self.file = None;
            self.failed(&e);
        }
    }

    fn failed(&mut self, error: &io::Error) {
        self.write_errors += 1;
        self.last_error = Some(format!(
            "{}: {error}",
            file_path(&self.snapshot, self.generation).display()
        ));
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn records() -> Vec<Record> {
        vec![
            Record::Hello(Hello {
                cache_id: CacheId([7; 16]),
                epoch: 3,
                low: 10,
                high: 1 << 40,
            }),
            Record::Ack {
                low_water: 12,
                entries: vec![(Fingerprint([1; 16]), 20), (Fingerprint([2; 16]), 21)],
            },
            Record::Ack {
                low_water: 12,
                entries: vec![],
            },
            Record::Forget(Fingerprint([1; 16])),
        ]
    }

    fn file_of(records: &[Record]) -> Vec<u8> {
        let mut bytes = MAGIC.to_vec();
        for r in records {
            r.emit(&mut bytes);
        }
        bytes
    }

    #[test]
    fn records_round_trip_and_a_cut_or_damaged_tail_ends_the_replay() {
        let all = records();
        let bytes = file_of(&all);
        assert_eq!(parse_file(&bytes), (all.clone(), 0));
        // Every cut inside the last record keeps the ones before it.
        let last_start = file_of(&all[..3]).len();
        for cut in last_start..bytes.len() {
            let left = cut - last_start;
            assert_eq!(
                parse_file(&bytes[..cut]),
                (all[..3].to_vec(), left),
                "cut at {cut}"
            );
        }
        // A flipped byte in the second record ends the replay before it.
        let mut damaged = bytes.clone();
        let second = file_of(&all[..1]).len();
        damaged[second + 6] ^= 0x40;
        assert_eq!(
            parse_file(&damaged),
            (all[..1].to_vec(), bytes.len() - second)
        );
        // Not a journal: nothing, and all of it left over.
        assert_eq!(parse_file(b"WOV1whatever"), (vec![], 12));
        assert_eq!(parse_file(&[]), (vec![], 0));
    }

    #[test]
    fn generations_are_found_in_order_and_removed_below_a_mark() {
        let dir = tempfile::tempdir().unwrap();
        let snapshot = dir.path().join("peer-view");
        for g in [10, 2, 9] {
            Journal::create(&snapshot, g);
        }
        fs::write(dir.path().join("peer-view.journal.x"), b"").unwrap();
        fs::write(dir.path().join("other.journal.1"), b"").unwrap();
        assert_eq!(generations(&snapshot), vec![2, 9, 10]);
        remove_before(&snapshot, 10);
        assert_eq!(generations(&snapshot), vec![10]);
        remove_before(&snapshot, u64::MAX);
        assert!(generations(&snapshot).is_empty());
    }

    #[test]
    fn a_failed_write_is_counted_and_stops_the_generation() {
        let dir = tempfile::tempdir().unwrap();
        // A directory in the way: the file cannot be created.
        let snapshot = dir.path().join("peer-view");
        fs::create_dir(file_path(&snapshot, 0)).unwrap();
        let mut journal = Journal::create(&snapshot, 0);
        assert_eq!(journal.write_errors, 1);
        journal.append(&records()[0]);
        assert_eq!(journal.write_errors, 1, "nothing more is tried");
        assert!(journal.last_error.as_deref().unwrap().contains("journal.0"));
        // The next generation starts afresh.
        journal.start(1);
        journal.append(&records()[1]);
        assert_eq!(read(&snapshot, 1), (records()[1..2].to_vec(), 0));
    }

    #[test]
    fn appends_on_dev_full_are_counted() {
        let Ok(full) = fs::OpenOptions::new().write(true).open("/dev/full") else {
            return;
        };
        let dir = tempfile::tempdir().unwrap();
        let mut journal = Journal::create(&dir.path().join("peer-view"), 0);
        journal.file = Some(full);
        journal.append(&records()[1]);
        assert_eq!(journal.write_errors, 1);
        assert!(journal.file.is_none());
    }

    fn record() -> impl Strategy<Value = Record> {
        let fp = any::<[u8; 16]>().prop_map(Fingerprint);
        prop_oneof![
            (any::<[u8; 16]>(), any::<u64>(), any::<u64>(), any::<u64>()).prop_map(
                |(id, epoch, low, high)| Record::Hello(Hello {
                    cache_id: CacheId(id),
                    epoch,
                    low,
                    high,
                })
            ),
            (
                any::<u64>(),
                proptest::collection::vec((fp.clone(), any::<u64>()), 0..5)
            )
                .prop_map(|(low_water, entries)| Record::Ack { low_water, entries }),
            fp.prop_map(Record::Forget),
        ]
    }

    proptest! {
        /// Records round-trip; a file cut anywhere, with or without a
        /// flipped byte, parses without a panic to a prefix of them.
        #[test]
        fn a_cut_or_damaged_file_replays_a_prefix(
            all in proptest::collection::vec(record(), 0..8),
            cut in any::<proptest::sample::Index>(),
            flip in proptest::option::of((any::<proptest::sample::Index>(), 1u8..=255)),
        ) {
            let mut bytes = file_of(&all);
            prop_assert_eq!(parse_file(&bytes), (all.clone(), 0));
            bytes.truncate(cut.index(bytes.len() + 1));
            if let (Some((at, mask)), false) = (flip, bytes.is_empty()) {
                let at = at.index(bytes.len());
                bytes[at] ^= mask;
            }
            let (parsed, left) = parse_file(&bytes);
            prop_assert!(parsed.len() <= all.len());
            prop_assert_eq!(&parsed[..], &all[..parsed.len()]);
            // What was read and what was left over make up the file.
            let read = if parsed.is_empty() && left == bytes.len() { 0 } else { file_of(&parsed).len() };
            prop_assert_eq!(read + left, bytes.len());
        }
    }
}
