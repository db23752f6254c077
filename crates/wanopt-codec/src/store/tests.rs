//! The store against a naive model (HashMap + VecDeque of segments) under
//! random inserts (written or buffered), flushes, reads, restarts and
//! evictions; torn tails and damage; buffered records and crashes.

use std::collections::{HashMap, VecDeque};

use proptest::prelude::*;

use super::*;

const SEGMENT: u64 = 2 * (MAX_CHUNK_LEN + RECORD_HEADER_LEN) as u64;

fn config() -> StoreConfig {
    StoreConfig {
        capacity: 3 * SEGMENT,
        segment_size: SEGMENT,
    }
}

fn chunk(id: u8) -> Vec<u8> {
    let len = 1 + (usize::from(id) * 7919) % (300 << 10);
    (0..len).map(|i| (i as u8).wrapping_mul(31) ^ id).collect()
}

/// Reference model: which fingerprints a FIFO-by-segment store holds.
#[derive(Default)]
struct Model {
    segments: VecDeque<(u64, Vec<Fingerprint>)>,
    present: HashMap<Fingerprint, Vec<u8>>,
}

impl Model {
    fn insert(&mut self, data: &[u8]) {
        let fp = Fingerprint::of(data);
        if self.present.contains_key(&fp) {
            return;
        }
        let rec = (RECORD_HEADER_LEN + data.len()) as u64;
        if self
            .segments
            .back()
            .is_none_or(|(len, _)| len + rec > SEGMENT)
        {
            self.segments.push_back((0, Vec::new()));
        }
        let last = self.segments.back_mut().unwrap();
        last.0 += rec;
        last.1.push(fp);
        self.present.insert(fp, data.to_vec());
        while self.segments.iter().map(|s| s.0).sum::<u64>() > config().capacity
            && self.segments.len() > 1
        {
            let (_, fps) = self.segments.pop_front().unwrap();
            for fp in fps {
                self.present.remove(&fp);
            }
        }
    }
}

#[derive(Debug, Clone)]
enum Op {
    Insert(u8),
    InsertBuffered(u8),
    Flush,
    Get(u8),
    Reopen,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => any::<u8>().prop_map(Op::Insert),
        3 => any::<u8>().prop_map(Op::InsertBuffered),
        1 => Just(Op::Flush),
        3 => any::<u8>().prop_map(Op::Get),
        1 => Just(Op::Reopen),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(32))]
    #[test]
    fn store_matches_model(ops in proptest::collection::vec(op(), 1..120)) {
        let dir = tempfile::tempdir().unwrap();
        let id = CacheId([7; 16]);
        let mut store = ChunkStore::open(dir.path(), config(), id).unwrap();
        let mut model = Model::default();
        let mut last_position = 0u64;
        for op in ops {
            match op {
                Op::Insert(k) | Op::InsertBuffered(k) => {
                    let data = chunk(k);
                    let fp = Fingerprint::of(&data);
                    let known = model.present.contains_key(&fp);
                    let pos = if matches!(op, Op::Insert(_)) {
                        store.insert(fp, &data).unwrap()
                    } else {
                        store.insert_buffered(fp, &data).unwrap()
                    };
                    if !known {
                        prop_assert!(pos >= last_position, "positions grow");
                        last_position = pos;
                    }
                    model.insert(&data);
                }
                Op::Flush => store.flush().unwrap(),
                Op::Get(k) => {
                    let data = chunk(k);
                    let fp = Fingerprint::of(&data);
                    let mut out = vec![0xee];
                    let hit = store.get(&fp, &mut out).unwrap();
                    prop_assert_eq!(hit, model.present.contains_key(&fp));
                    if hit {
                        prop_assert_eq!(&out[1..], &data[..]);
                    } else {
                        prop_assert_eq!(out.len(), 1);
                    }
                }
                Op::Reopen => {
                    // Dropping the store writes what is buffered.
                    drop(store);
                    store = ChunkStore::open(dir.path(), config(), CacheId([9; 16])).unwrap();
                    prop_assert_eq!(store.cache_id(), id);
                    prop_assert_eq!(store.epoch(), 0);
                }
            }
            prop_assert_eq!(store.stats().chunks as usize, model.present.len());
            prop_assert!(store.stats().bytes <= config().capacity);
            prop_assert_eq!(store.stats().segments as usize, model.segments.len());
        }
    }
}

#[test]
fn torn_tail_is_truncated_on_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = ChunkStore::open(dir.path(), config(), CacheId([1; 16])).unwrap();
    let a = chunk(1);
    let b = chunk(2);
    store.insert(Fingerprint::of(&a), &a).unwrap();
    store.insert(Fingerprint::of(&b), &b).unwrap();
    let path = store.segment_paths().pop().unwrap();
    let len = std::fs::metadata(&path).unwrap().len();
    drop(store);
    // Crash in the middle of appending b: only half of it reached the disk,
    // followed by garbage.
    let f = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
    f.set_len(len - (b.len() as u64) / 2).unwrap();
    drop(f);
    let mut store = ChunkStore::open(dir.path(), config(), CacheId([2; 16])).unwrap();
    assert_eq!(store.cache_id(), CacheId([1; 16]));
    assert_eq!(store.epoch(), 1, "losing records bumps the epoch");
    assert_eq!(store.stats().chunks, 1);
    let mut out = Vec::new();
    assert!(store.get(&Fingerprint::of(&a), &mut out).unwrap());
    assert!(!store.get(&Fingerprint::of(&b), &mut Vec::new()).unwrap());
    let expected = (RECORD_HEADER_LEN + a.len()) as u64;
    assert_eq!(std::fs::metadata(&path).unwrap().len(), expected);
    // Appends continue after the truncated tail and survive a reopen.
    store.insert(Fingerprint::of(&b), &b).unwrap();
    drop(store);
    let mut store = ChunkStore::open(dir.path(), config(), CacheId([2; 16])).unwrap();
    assert_eq!(store.epoch(), 1);
    assert!(store.get(&Fingerprint::of(&b), &mut Vec::new()).unwrap());
}

#[test]
fn damaged_record_is_a_miss_not_wrong_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = ChunkStore::open(dir.path(), config(), CacheId([1; 16])).unwrap();
    let a = chunk(3);
    let fp = Fingerprint::of(&a);
    store.insert(fp, &a).unwrap();
    let path = store.segment_paths().pop().unwrap();
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[RECORD_HEADER_LEN + 5] ^= 1;
    std::fs::write(&path, &bytes).unwrap();
    let mut out = Vec::new();
    assert!(!store.get(&fp, &mut out).unwrap());
    assert!(out.is_empty());
    assert_eq!(store.stats().corrupt, 1);
    // Reopen: the scan's CRC check drops the damaged record too.
    drop(store);
    let store = ChunkStore::open(dir.path(), config(), CacheId([1; 16])).unwrap();
    assert!(!store.contains(&fp));
    assert_eq!(store.epoch(), 1);
}

#[test]
fn holds_for_keeps_its_promise_over_that_many_appended_bytes() {
    for margin in [SEGMENT / 2, SEGMENT, 2 * SEGMENT] {
        let dir = tempfile::tempdir().unwrap();
        let mut store = ChunkStore::open(dir.path(), config(), CacheId([1; 16])).unwrap();
        // Past capacity, so segments are being evicted.
        let mut present = Vec::new();
        for id in 0..=255 {
            let c = chunk(id);
            store.insert(Fingerprint::of(&c), &c).unwrap();
            present.push(c);
        }
        assert!(store.stats().evicted_segments >= 2);
        present.retain(|c| store.contains(&Fingerprint::of(c)));
        let held: Vec<_> = present
            .iter()
            .filter(|c| store.holds_for(&Fingerprint::of(c), margin))
            .collect();
        assert!(!held.is_empty(), "margin {margin}");
        assert!(
            held.len() < present.len(),
            "margin {margin}: the oldest are not held"
        );
        assert!(!store.holds_for(&Fingerprint::of(b"never stored"), 1));
        // Append just under `margin` bytes of new records.
        let mut appended = 0;
        for k in 0u32.. {
            let data: Vec<u8> = (0..20_000u32)
                .map(|i| (i.wrapping_mul(2_654_435_761) ^ k.wrapping_mul(97)) as u8)
                .collect();
            let record = (RECORD_HEADER_LEN + data.len()) as u64;
            if appended + record > margin {
                break;
            }
            store.insert(Fingerprint::of(&data), &data).unwrap();
            appended += record;
        }
        for c in held {
            let mut out = Vec::new();
            assert!(
                store.get(&Fingerprint::of(c), &mut out).unwrap(),
                "margin {margin}"
            );
            assert_eq!(&out, c);
        }
    }
}

#[test]
fn prepare_sync_hands_out_only_segments_written_since_the_last_one() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = ChunkStore::open(dir.path(), config(), CacheId([1; 16])).unwrap();
    let a = chunk(1);
    store.insert_buffered(Fingerprint::of(&a), &a).unwrap();
    // Written by the call (it was buffered), and handed out to be synced.
    assert_eq!(store.prepare_sync().unwrap().len(), 1);
    assert_eq!(file_bytes(&store), store.stats().bytes);
    assert!(store.prepare_sync().unwrap().is_empty());
    // Enough to start more segments: each one written is handed out once.
    for id in 2..40 {
        let c = chunk(id);
        store.insert(Fingerprint::of(&c), &c).unwrap();
    }
    let written = store.segment_paths().len();
    assert!(written >= 2);
    let files = store.prepare_sync().unwrap();
    assert!(!files.is_empty() && files.len() <= written);
    for file in files {
        file.sync_data().unwrap();
    }
    assert!(store.prepare_sync().unwrap().is_empty());
    // What was synced is there after a reopen.
    drop(store);
    let mut store = ChunkStore::open(dir.path(), config(), CacheId([1; 16])).unwrap();
    let mut out = Vec::new();
    assert!(store.get(&Fingerprint::of(&chunk(39)), &mut out).unwrap());
    assert_eq!(out, chunk(39));
}

#[test]
fn missing_meta_starts_a_new_cache() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = ChunkStore::open(dir.path(), config(), CacheId([1; 16])).unwrap();
    let a = chunk(4);
    store.insert(Fingerprint::of(&a), &a).unwrap();
    drop(store);
    std::fs::remove_file(dir.path().join("meta")).unwrap();
    let store = ChunkStore::open(dir.path(), config(), CacheId([5; 16])).unwrap();
    assert_eq!(store.cache_id(), CacheId([5; 16]));
    assert_eq!(store.stats().chunks, 0);
}

/// Bytes of the store's segment files on disk.
fn file_bytes(store: &ChunkStore) -> u64 {
    store
        .segment_paths()
        .iter()
        .map(|p| std::fs::metadata(p).unwrap().len())
        .sum()
}

#[test]
fn buffered_records_are_readable_before_flush_and_written_by_it() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = ChunkStore::open(dir.path(), config(), CacheId([1; 16])).unwrap();
    let a = chunk(5);
    let b = chunk(6);
    let (fa, fb) = (Fingerprint::of(&a), Fingerprint::of(&b));
    store.insert(fa, &a).unwrap();
    let written = file_bytes(&store);
    store.insert_buffered(fb, &b).unwrap();
    assert_eq!(file_bytes(&store), written, "buffered, not written");
    // Read back from the buffer: data, and the header that successor reads.
    let mut out = vec![0xee];
    assert!(store.get(&fb, &mut out).unwrap());
    assert_eq!(&out[1..], &b[..]);
    assert_eq!(store.successor(&fa), Some(fb));
    assert_eq!(
        store.insert_buffered(fb, &b).unwrap(),
        store.position(&fb).unwrap()
    );
    store.flush().unwrap();
    assert_eq!(file_bytes(&store), store.stats().bytes);
    // The same reads, now from the file.
    let mut out = Vec::new();
    assert!(store.get(&fb, &mut out).unwrap());
    assert_eq!(out, b);
    assert_eq!(store.successor(&fa), Some(fb));
    // A plain insert writes buffered records ahead of its own.
    let c = chunk(7);
    let d = chunk(8);
    store.insert_buffered(Fingerprint::of(&c), &c).unwrap();
    store.insert(Fingerprint::of(&d), &d).unwrap();
    assert_eq!(file_bytes(&store), store.stats().bytes);
    drop(store);
    let mut store = ChunkStore::open(dir.path(), config(), CacheId([2; 16])).unwrap();
    assert_eq!(store.epoch(), 0);
    for data in [&a, &b, &c, &d] {
        assert!(store.get(&Fingerprint::of(data), &mut Vec::new()).unwrap());
    }
}

#[test]
fn buffered_records_are_written_at_a_segment_change_and_past_the_flush_size() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = ChunkStore::open(dir.path(), config(), CacheId([1; 16])).unwrap();
    let mut inserted = Vec::new();
    // Chunks of 64 KiB and more until a second segment starts.
    for id in (0..=255u8).filter(|&id| chunk(id).len() >= 64 << 10) {
        let data = chunk(id);
        store
            .insert_buffered(Fingerprint::of(&data), &data)
            .unwrap();
        inserted.push(data);
        if store.stats().segments == 2 {
            break;
        }
    }
    assert_eq!(store.stats().segments, 2);
    let paths = store.segment_paths();
    let full = std::fs::metadata(&paths[0]).unwrap().len();
    let newest = std::fs::metadata(&paths[1]).unwrap().len();
    assert_eq!(
        full + newest + store.segments[1].buffered_len() as u64,
        store.stats().bytes
    );
    assert_eq!(full, store.segments[0].len, "the full segment is written");
    assert!(store.segments[1].buffered_len() < FLUSH_LEN + MAX_CHUNK_LEN);
    let mut out = Vec::new();
    for data in &inserted {
        out.clear();
        assert!(store.get(&Fingerprint::of(data), &mut out).unwrap());
        assert_eq!(&out, data);
    }
}

#[test]
fn a_crash_loses_only_unflushed_records_and_tears_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = ChunkStore::open(dir.path(), config(), CacheId([1; 16])).unwrap();
    let a = chunk(9);
    let b = chunk(10);
    store.insert_buffered(Fingerprint::of(&a), &a).unwrap();
    store.flush().unwrap();
    store.insert_buffered(Fingerprint::of(&b), &b).unwrap();
    // A crash: the buffer never reaches the file.
    std::mem::forget(store);
    let mut store = ChunkStore::open(dir.path(), config(), CacheId([2; 16])).unwrap();
    assert_eq!(store.epoch(), 0, "nothing torn, nothing dropped");
    assert_eq!(store.stats().truncated_bytes, 0);
    assert!(store.get(&Fingerprint::of(&a), &mut Vec::new()).unwrap());
    assert!(!store.contains(&Fingerprint::of(&b)));
    // The next record takes the place b had.
    let position = store.insert(Fingerprint::of(&b), &b).unwrap();
    assert_eq!(position, (RECORD_HEADER_LEN + a.len()) as u64);
}

/// A full disk (the segment file is `/dev/full`): the buffered record's
/// write fails, it is dropped from the index, and the store counts the
/// failure and keeps the system's words for it.
#[test]
fn failed_writes_are_counted_and_named() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = ChunkStore::open(dir.path(), config(), CacheId([1; 16])).unwrap();
    // Segments are created at the first insert.
    assert!(store.segment_paths().is_empty());
    std::os::unix::fs::symlink("/dev/full", dir.path().join(segment::file_name(0))).unwrap();
    assert_eq!(
        (store.stats().write_errors, store.last_write_error()),
        (0, None)
    );
    let data = chunk(9);
    let fp = Fingerprint::of(&data);
    store.insert_buffered(fp, &data).unwrap();
    assert!(store.flush().is_err());
    assert_eq!(store.stats().write_errors, 1);
    assert!(
        store
            .last_write_error()
            .is_some_and(|e| e.contains("No space left")),
        "{:?}",
        store.last_write_error()
    );
    let mut out = Vec::new();
    assert!(
        !store.get(&fp, &mut out).unwrap(),
        "a chunk that was never written"
    );
}
