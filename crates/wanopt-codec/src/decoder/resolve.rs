//! Bytes that come from the store: references, spans (followed from
//! their first chunk) and deltas (decoded against their base), every read
//! verified; and the chunk that completes pieces, by reference or delta.
//! What the store cannot give is asked for (`repair.rs`).

use crate::cache::PeerCache;
use crate::fingerprint::Fingerprint;
use crate::frame::{delta_decompress, span_check};
use crate::stats::DecoderStats;

use super::error::DecodeError;
use super::Decoder;

impl Decoder {
    /// A reference: the chunk from the store, or asked for.
    pub(super) fn reference(
        &mut self,
        fingerprint: Fingerprint,
        raw_len: u32,
        out: &mut Vec<u8>,
    ) -> Result<(), DecodeError> {
        if self.backlog.is_empty() {
            let start = out.len();
            if self.lookup(&fingerprint, raw_len, out)? {
                return Ok(());
            }
            debug_assert_eq!(out.len(), start);
            self.wait_for_chunk(fingerprint, raw_len, Vec::new())?;
        } else {
            let mut data = Vec::new();
            if self.lookup(&fingerprint, raw_len, &mut data)? {
                self.backlog.hold(data)?;
            } else {
                self.wait_for_chunk(fingerprint, raw_len, Vec::new())?;
            }
        }
        Ok(())
    }

    /// A span: its chunks from the store, or its list asked for.
    pub(super) fn span(
        &mut self,
        first: Fingerprint,
        count: u16,
        raw_len: u32,
        check: Fingerprint,
        out: &mut Vec<u8>,
    ) -> Result<(), DecodeError> {
        self.stats.spans += 1;
        if self.backlog.is_empty() {
            if !self.resolve_span(first, count, raw_len, check, out) {
                self.wait_for_span(check, raw_len)?;
            }
        } else {
            let mut data = Vec::new();
            if self.resolve_span(first, count, raw_len, check, &mut data) {
                self.backlog.hold(data)?;
            } else {
                self.wait_for_span(check, raw_len)?;
            }
        }
        Ok(())
    }

    /// A delta (not after pieces): the chunk decoded against its base, or
    /// asked for.
    pub(super) fn delta(
        &mut self,
        target: Fingerprint,
        base: Fingerprint,
        raw_len: u32,
        bytes: &[u8],
        out: &mut Vec<u8>,
    ) -> Result<(), DecodeError> {
        self.stats.deltas += 1;
        match self.resolve_delta(&target, &base, raw_len, bytes) {
            Some(data) => {
                self.store(&data);
                if self.backlog.is_empty() {
                    out.extend_from_slice(&data);
                } else {
                    self.backlog.hold(data)?;
                }
            }
            // Base missing or damaged: ask for the chunk itself.
            None => self.wait_for_chunk(target, raw_len, Vec::new())?,
        }
        Ok(())
    }

    /// The chunk the held pieces begin is `fingerprint`, from the store:
    /// deliver what follows the pieces. A chunk that does not begin with
    /// them is an error (the encoder only says so of a chunk it cut from
    /// those bytes); a missing one is asked for like a reference's.
    pub(super) fn piece_ref(
        &mut self,
        fingerprint: Fingerprint,
        raw_len: u32,
        out: &mut Vec<u8>,
    ) -> Result<(), DecodeError> {
        self.pieces.check_completes(raw_len)?;
        let mut data = Vec::with_capacity(raw_len as usize);
        let found = self.lookup(&fingerprint, raw_len, &mut data)?;
        self.complete_pieces(fingerprint, raw_len, found.then_some(data), out)
    }

    /// The chunk the held pieces begin is `target`, a delta against
    /// `base`: deliver what follows the pieces, or ask for the chunk.
    pub(super) fn piece_delta(
        &mut self,
        target: Fingerprint,
        base: Fingerprint,
        raw_len: u32,
        bytes: &[u8],
        out: &mut Vec<u8>,
    ) -> Result<(), DecodeError> {
        self.stats.deltas += 1;
        self.pieces.check_completes(raw_len)?;
        let data = self.resolve_delta(&target, &base, raw_len, bytes);
        if let Some(data) = &data {
            self.store(data);
        }
        self.complete_pieces(target, raw_len, data, out)
    }

    /// Deliver what `data`, the chunk `fingerprint` the held pieces begin,
    /// adds to them; ask for the chunk when it could not be had.
    fn complete_pieces(
        &mut self,
        fingerprint: Fingerprint,
        raw_len: u32,
        data: Option<Vec<u8>>,
        out: &mut Vec<u8>,
    ) -> Result<(), DecodeError> {
        let Some(mut data) = data else {
            let prefix = self.pieces.take();
            return self.wait_for_chunk(fingerprint, raw_len, prefix);
        };
        let held = self.pieces.complete(&data)?;
        if self.backlog.is_empty() {
            out.extend_from_slice(&data[held..]);
        } else {
            data.drain(..held);
            self.backlog.hold(data)?;
        }
        Ok(())
    }

    /// Decode a delta against its base from the store; `None` when the
    /// base is not held (or damaged) or the result does not match `target`.
    fn resolve_delta(
        &mut self,
        target: &Fingerprint,
        base: &Fingerprint,
        raw_len: u32,
        bytes: &[u8],
    ) -> Option<Vec<u8>> {
        let mut base_data = Vec::new();
        let held = self
            .cache
            .lock()
            .store
            .get(base, &mut base_data)
            .unwrap_or(false);
        if !held {
            self.stats.cache_misses += 1;
            return None;
        }
        let mut data = vec![0u8; raw_len as usize];
        let decoded = delta_decompress(bytes, &base_data, &mut data);
        if decoded != Some(data.len()) || !target.matches(&data) {
            self.stats.bad_deltas += 1;
            return None;
        }
        self.stats.cache_hits += 1;
        Some(data)
    }

    /// Resolve a span from the store: follow it from `first`, read each
    /// chunk verified, and compare the check and the length. Appends to
    /// `out` and returns true, or leaves `out` as it was.
    fn resolve_span(
        &mut self,
        first: Fingerprint,
        count: u16,
        raw_len: u32,
        check: Fingerprint,
        out: &mut Vec<u8>,
    ) -> bool {
        let start = out.len();
        let mut chain = Vec::with_capacity(usize::from(count));
        chain.push(first);
        {
            let shared = self.cache.lock();
            while chain.len() < usize::from(count) {
                match chain.last().and_then(|last| shared.store.successor(last)) {
                    Some(next) => chain.push(next),
                    None => break,
                }
            }
        }
        // One chunk per lock: other flows of this peer are not held up
        // behind a long span.
        let resolved = chain.len() == usize::from(count)
            && span_check(&chain) == check
            && chain
                .iter()
                .all(|fp| self.cache.lock().store.get(fp, out).unwrap_or(false))
            && out.len() - start == raw_len as usize;
        if resolved {
            self.stats.cache_hits += u64::from(count);
        } else {
            out.truncate(start);
            self.stats.span_misses += 1;
        }
        resolved
    }

    /// Resolve a reference from the store (verified read).
    fn lookup(
        &mut self,
        fingerprint: &Fingerprint,
        raw_len: u32,
        out: &mut Vec<u8>,
    ) -> Result<bool, DecodeError> {
        read_chunk(&self.cache, &mut self.stats, fingerprint, raw_len, out)
    }
}

/// Read the chunk `fingerprint`, `raw_len` bytes long, from the store
/// (verified) into `out`; `false` (and `out` as it was) when it is not
/// held or damaged. Another length is an error.
pub(super) fn read_chunk(
    cache: &PeerCache,
    stats: &mut DecoderStats,
    fingerprint: &Fingerprint,
    raw_len: u32,
    out: &mut Vec<u8>,
) -> Result<bool, DecodeError> {
    let start = out.len();
    let hit = cache.lock().store.get(fingerprint, out).unwrap_or(false);
    if !hit {
        stats.cache_misses += 1;
        return Ok(false);
    }
    if out.len() - start != raw_len as usize {
        out.truncate(start);
        return Err(DecodeError::LengthMismatch);
    }
    stats.cache_hits += 1;
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cache::CacheConfig;
    use crate::control::CacheId;
    use crate::decoder::DecoderConfig;

    /// A decoder whose store holds `chunks`, one record after the other.
    fn decoder_holding(chunks: &[&[u8]]) -> (tempfile::TempDir, Decoder) {
        let dir = tempfile::tempdir().unwrap();
        let cache = PeerCache::open(dir.path(), CacheConfig::default(), CacheId([1; 16])).unwrap();
        for chunk in chunks {
            cache
                .lock()
                .store
                .insert(Fingerprint::of(chunk), chunk)
                .unwrap();
        }
        (dir, Decoder::new(cache, DecoderConfig::default()))
    }

    #[test]
    fn a_chunk_is_read_at_its_length_or_not_at_all() {
        let (_dir, mut decoder) = decoder_holding(&[b"held chunk"]);
        let held = Fingerprint::of(b"held chunk");
        let mut out = b"before ".to_vec();
        assert_eq!(decoder.lookup(&held, 10, &mut out), Ok(true));
        assert_eq!(out, b"before held chunk");
        let missing = Fingerprint::of(b"never stored");
        assert_eq!(decoder.lookup(&missing, 10, &mut out), Ok(false));
        assert_eq!(
            decoder.lookup(&held, 9, &mut out),
            Err(DecodeError::LengthMismatch)
        );
        assert_eq!(out, b"before held chunk");
        let stats = decoder.stats();
        // A read of the wrong length is neither a hit nor a miss.
        assert_eq!((stats.cache_hits, stats.cache_misses), (1, 1));
    }

    #[test]
    fn a_span_is_followed_from_its_first_chunk_and_checked() {
        let chunks: [&[u8]; 3] = [b"one ", b"two ", b"three"];
        let (_dir, mut decoder) = decoder_holding(&chunks);
        let names: Vec<_> = chunks.iter().map(|c| Fingerprint::of(c)).collect();
        let check = span_check(&names);
        let mut out = Vec::new();
        assert!(decoder.resolve_span(names[0], 3, 13, check, &mut out));
        assert_eq!(out, b"one two three");
        // Another check, length or count: nothing delivered.
        let mut out = Vec::new();
        assert!(!decoder.resolve_span(names[0], 3, 12, check, &mut out));
        assert!(!decoder.resolve_span(names[0], 2, 8, check, &mut out));
        assert!(!decoder.resolve_span(names[1], 3, 13, check, &mut out));
        assert!(out.is_empty());
        assert_eq!(decoder.stats().span_misses, 3);
    }
}
