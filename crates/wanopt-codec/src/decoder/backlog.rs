//! The backlog: behind a chunk that could not be had (a reference the
//! store could not resolve, a span it could not follow), the bytes of the
//! stream after it wait in order, bounded, until its repair or the span's
//! list arrives. Each chunk and span waited for is asked for once.

use std::collections::VecDeque;

use crate::fingerprint::Fingerprint;
use crate::store::index::FingerprintMap;

use super::error::DecodeError;

/// One entry of the backlog.
#[derive(Debug)]
enum Pending {
    /// Bytes to deliver.
    Data(Vec<u8>),
    /// A chunk to be repaired; `prefix` is what was delivered of it as
    /// pieces (empty for a reference), the rest is delivered.
    Missing {
        fingerprint: Fingerprint,
        len: u32,
        prefix: Vec<u8>,
    },
    /// A span whose list is to come.
    MissingSpan { check: Fingerprint, len: u32 },
    /// The end of the stream.
    End,
}

/// The stream's bytes held back behind unresolved chunks, in order.
#[derive(Debug)]
pub(super) struct Backlog {
    entries: VecDeque<Pending>,
    /// Bytes the entries stand for (an unresolved chunk or span at its
    /// full length).
    bytes: usize,
    /// Bound on `bytes`.
    limit: usize,
    /// The chunks asked for, each once however often it waits.
    chunks: FingerprintMap<()>,
    /// The spans (by check) whose lists were asked for.
    spans: FingerprintMap<()>,
}

impl Backlog {
    /// An empty backlog of at most `limit` bytes.
    pub(super) fn new(limit: usize) -> Self {
        Backlog {
            entries: VecDeque::new(),
            bytes: 0,
            limit,
            chunks: FingerprintMap::default(),
            spans: FingerprintMap::default(),
        }
    }

    /// Whether nothing is held: the stream's bytes go straight out.
    pub(super) fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Bytes held (for back-pressure).
    pub(super) fn bytes(&self) -> usize {
        self.bytes
    }

    /// Hold `data`, bytes of the stream behind an unresolved chunk.
    pub(super) fn hold(&mut self, data: Vec<u8>) -> Result<(), DecodeError> {
        self.push(Pending::Data(data))
    }

    /// Hold the place of the chunk `fingerprint`, `len` bytes, of which
    /// `prefix` was delivered already (as pieces). `true` when the chunk
    /// is to be asked for (it was not yet).
    pub(super) fn wait_for_chunk(
        &mut self,
        fingerprint: Fingerprint,
        len: u32,
        prefix: Vec<u8>,
    ) -> Result<bool, DecodeError> {
        self.push(Pending::Missing {
            fingerprint,
            len,
            prefix,
        })?;
        Ok(self.chunks.insert(fingerprint, ()).is_none())
    }

    /// Hold the place of the span `check`, `len` bytes. `true` when its
    /// list is to be asked for (it was not yet).
    pub(super) fn wait_for_span(
        &mut self,
        check: Fingerprint,
        len: u32,
    ) -> Result<bool, DecodeError> {
        self.push(Pending::MissingSpan { check, len })?;
        Ok(self.spans.insert(check, ()).is_none())
    }

    /// Hold the end of the stream behind the rest.
    pub(super) fn hold_end(&mut self) {
        self.entries.push_back(Pending::End);
    }

    fn push(&mut self, pending: Pending) -> Result<(), DecodeError> {
        let len = match &pending {
            Pending::Data(d) => d.len(),
            Pending::Missing { len, .. } | Pending::MissingSpan { len, .. } => *len as usize,
            Pending::End => 0,
        };
        if self.bytes + len > self.limit {
            return Err(DecodeError::BacklogFull);
        }
        self.bytes += len;
        self.entries.push_back(pending);
        Ok(())
    }

    /// The chunk `fingerprint` arrived (verified): every place it holds
    /// becomes the bytes of it not delivered yet. `false` when it was not
    /// waited for.
    pub(super) fn fill_chunk(
        &mut self,
        fingerprint: &Fingerprint,
        data: &[u8],
    ) -> Result<bool, DecodeError> {
        if self.chunks.remove(fingerprint).is_none() {
            return Ok(false);
        }
        for slot in self.entries.iter_mut() {
            if let Pending::Missing {
                fingerprint: fp,
                len,
                prefix,
            } = slot
            {
                if fp == fingerprint {
                    if *len as usize != data.len() {
                        return Err(DecodeError::LengthMismatch);
                    }
                    // Counted at its full length while it waited.
                    let Some(rest) = data.strip_prefix(&prefix[..]) else {
                        return Err(DecodeError::PieceOrder);
                    };
                    self.bytes -= prefix.len();
                    *slot = Pending::Data(rest.to_vec());
                }
            }
        }
        Ok(true)
    }

    /// Whether the list of span `check` is waited for; it no longer is
    /// (it arrived).
    pub(super) fn take_span(&mut self, check: &Fingerprint) -> bool {
        self.spans.remove(check).is_some()
    }

    /// The list of span `check` arrived (checked): every place the span
    /// holds becomes its `chunks`, those that `read` finds as their bytes,
    /// the others as places of chunks waited for. Returns the chunks to
    /// ask for, in order.
    pub(super) fn expand_span(
        &mut self,
        check: Fingerprint,
        chunks: &[(Fingerprint, u32)],
        mut read: impl FnMut(&Fingerprint, u32) -> Result<Option<Vec<u8>>, DecodeError>,
    ) -> Result<Vec<Fingerprint>, DecodeError> {
        let total: u64 = chunks.iter().map(|&(_, len)| u64::from(len)).sum();
        let mut entries = std::mem::take(&mut self.entries);
        let mut rebuilt = VecDeque::with_capacity(entries.len() + chunks.len());
        let mut ask = Vec::new();
        for pending in entries.drain(..) {
            let Pending::MissingSpan { check: c, len } = pending else {
                rebuilt.push_back(pending);
                continue;
            };
            if c != check {
                rebuilt.push_back(pending);
                continue;
            }
            if u64::from(len) != total {
                return Err(DecodeError::LengthMismatch);
            }
            for &(fingerprint, len) in chunks {
                match read(&fingerprint, len)? {
                    Some(data) => rebuilt.push_back(Pending::Data(data)),
                    None => {
                        rebuilt.push_back(Pending::Missing {
                            fingerprint,
                            len,
                            prefix: Vec::new(),
                        });
                        if self.chunks.insert(fingerprint, ()).is_none() {
                            ask.push(fingerprint);
                        }
                    }
                }
            }
        }
        self.entries = rebuilt;
        Ok(ask)
    }

    /// Deliver the entries up to the first unresolved one; `true` when
    /// that delivered the end of the stream.
    pub(super) fn drain(&mut self, out: &mut Vec<u8>) -> bool {
        let mut end = false;
        while let Some(front) = self.entries.front() {
            match front {
                Pending::Missing { .. } | Pending::MissingSpan { .. } => break,
                Pending::Data(d) => {
                    self.bytes -= d.len();
                    out.extend_from_slice(d);
                }
                Pending::End => end = true,
            }
            self.entries.pop_front();
        }
        end
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fingerprint(n: u8) -> Fingerprint {
        Fingerprint::of(&[n])
    }

    #[test]
    fn what_waits_behind_a_missing_chunk_is_delivered_once_it_arrives() {
        let mut backlog = Backlog::new(1 << 20);
        let chunk = b"the missing chunk".to_vec();
        // Its first 4 bytes went out as pieces.
        let asked = backlog
            .wait_for_chunk(fingerprint(1), chunk.len() as u32, chunk[..4].to_vec())
            .unwrap();
        assert!(asked);
        backlog.hold(b" and after".to_vec()).unwrap();
        backlog.hold_end();
        assert_eq!(backlog.bytes(), chunk.len() + 10);
        let mut out = Vec::new();
        assert!(!backlog.drain(&mut out));
        assert!(out.is_empty());

        // Another chunk's repair changes nothing.
        assert_eq!(backlog.fill_chunk(&fingerprint(2), b"other"), Ok(false));
        assert_eq!(backlog.fill_chunk(&fingerprint(1), &chunk), Ok(true));
        assert!(backlog.drain(&mut out));
        assert_eq!(out, b"missing chunk and after");
        assert_eq!(backlog.bytes(), 0);
        assert!(backlog.is_empty());
    }

    #[test]
    fn a_chunk_is_asked_for_once_and_a_repair_must_fit_its_places() {
        let mut backlog = Backlog::new(1 << 20);
        assert_eq!(
            backlog.wait_for_chunk(fingerprint(1), 5, Vec::new()),
            Ok(true)
        );
        assert_eq!(
            backlog.wait_for_chunk(fingerprint(1), 5, Vec::new()),
            Ok(false)
        );
        assert_eq!(
            backlog.fill_chunk(&fingerprint(1), b"four"),
            Err(DecodeError::LengthMismatch)
        );
        let mut backlog = Backlog::new(1 << 20);
        backlog
            .wait_for_chunk(fingerprint(1), 5, b"ab".to_vec())
            .unwrap();
        assert_eq!(
            backlog.fill_chunk(&fingerprint(1), b"xxxxx"),
            Err(DecodeError::PieceOrder)
        );
    }

    #[test]
    fn the_backlog_is_bounded() {
        let mut backlog = Backlog::new(100);
        backlog
            .wait_for_chunk(fingerprint(1), 60, Vec::new())
            .unwrap();
        backlog.hold(vec![0; 40]).unwrap();
        assert_eq!(backlog.hold(vec![0; 1]), Err(DecodeError::BacklogFull));
        assert_eq!(
            backlog.wait_for_span(fingerprint(2), 1),
            Err(DecodeError::BacklogFull)
        );
        assert_eq!(backlog.bytes(), 100);
    }

    #[test]
    fn a_span_list_becomes_its_chunks_read_or_waited_for() {
        let mut backlog = Backlog::new(1 << 20);
        let check = fingerprint(9);
        assert_eq!(backlog.wait_for_span(check, 6), Ok(true));
        backlog.hold(b"!".to_vec()).unwrap();
        assert_eq!(backlog.wait_for_span(check, 6), Ok(false));
        assert!(backlog.take_span(&check));
        assert!(!backlog.take_span(&check));

        let list = [(fingerprint(1), 3), (fingerprint(2), 3)];
        // The store holds the first chunk only.
        let ask = backlog
            .expand_span(check, &list, |fp, _| {
                Ok((*fp == fingerprint(1)).then(|| b"abc".to_vec()))
            })
            .unwrap();
        assert_eq!(ask, [fingerprint(2)]);
        let mut out = Vec::new();
        assert!(!backlog.drain(&mut out));
        assert_eq!(out, b"abc");
        assert_eq!(backlog.fill_chunk(&fingerprint(2), b"def"), Ok(true));
        backlog.drain(&mut out);
        assert_eq!(out, b"abcdef!abcdef");
        assert_eq!(backlog.bytes(), 0);

        // A list whose chunks do not add up to the span's length.
        let mut backlog = Backlog::new(1 << 20);
        backlog.wait_for_span(check, 7).unwrap();
        assert_eq!(
            backlog.expand_span(check, &list, |_, _| Ok(None)),
            Err(DecodeError::LengthMismatch)
        );
    }
}
