//! Reassembly of a stream read out of order.
//!
//! quinn's in-order receive buffer gives up (closing the whole connection with
//! "too many gaps in stream buffer") once a stream has more than 1024
//! non-contiguous ranges buffered. With windows sized for 1 Gbit/s at 300 ms,
//! one overshoot of the congestion controller into a drop-tail queue loses
//! every other packet for a while and leaves thousands of gaps. So the node
//! reads each stream unordered (quinn hands over every chunk as it arrives and
//! its own buffer stays small) and puts the bytes back in order here. The
//! buffer holds only data past a gap, which the sender retransmits within a
//! few round trips; quinn discards duplicates before they reach us, and this
//! type trims any overlap anyway, so every byte is delivered once, in order.

use std::collections::BTreeMap;

use bytes::{Buf, Bytes};

/// Puts out-of-order chunks of a byte stream back in order.
#[derive(Debug, Default)]
pub struct Reassembler {
    next: u64,
    pending: BTreeMap<u64, Bytes>,
    buffered: usize,
}

impl Reassembler {
    /// A reassembler whose next expected offset is `start`.
    pub fn new(start: u64) -> Reassembler {
        Reassembler {
            next: start,
            ..Reassembler::default()
        }
    }

    /// Offset of the next byte to deliver.
    pub fn next_offset(&self) -> u64 {
        self.next
    }

    /// Bytes held past a gap.
    pub fn buffered(&self) -> usize {
        self.buffered
    }

    /// Accepts the chunk at `offset`, then calls `deliver` with every
    /// contiguous piece now ready, in order.
    pub fn insert(&mut self, offset: u64, bytes: Bytes, mut deliver: impl FnMut(Bytes)) {
        self.store(offset, bytes);
        while let Some(entry) = self.pending.first_entry() {
            if *entry.key() > self.next {
                break;
            }
            let (offset, mut bytes) = entry.remove_entry();
            self.buffered -= bytes.len();
            let end = offset + bytes.len() as u64;
            if end <= self.next {
                continue;
            }
            bytes.advance((self.next - offset) as usize);
            self.next = end;
            deliver(bytes);
        }
    }

    fn store(&mut self, offset: u64, mut bytes: Bytes) {
        let end = offset + bytes.len() as u64;
        if end <= self.next || bytes.is_empty() {
            return;
        }
        let offset = if offset < self.next {
            bytes.advance((self.next - offset) as usize);
            self.next
        } else {
            offset
        };
        // Two chunks at one offset: keep the longer.
        match self.pending.get(&offset) {
            Some(old) if old.len() >= bytes.len() => {}
            old => {
                self.buffered -= old.map_or(0, Bytes::len);
                self.buffered += bytes.len();
                self.pending.insert(offset, bytes);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn in_order_chunks_pass_straight_through() {
        let mut r = Reassembler::new(4);
        let mut out = Vec::new();
        r.insert(4, Bytes::from_static(b"abc"), |b| out.extend_from_slice(&b));
        r.insert(7, Bytes::from_static(b"de"), |b| out.extend_from_slice(&b));
        assert_eq!(out, b"abcde");
        assert_eq!((r.next_offset(), r.buffered()), (9, 0));
    }

    #[test]
    fn a_gap_holds_later_data_until_it_is_filled() {
        let mut r = Reassembler::new(0);
        let mut out = Vec::new();
        r.insert(3, Bytes::from_static(b"def"), |b| out.extend_from_slice(&b));
        r.insert(9, Bytes::from_static(b"jk"), |b| out.extend_from_slice(&b));
        assert!(out.is_empty());
        assert_eq!(r.buffered(), 5);
        r.insert(0, Bytes::from_static(b"abc"), |b| out.extend_from_slice(&b));
        assert_eq!(out, b"abcdef");
        r.insert(5, Bytes::from_static(b"fghi"), |b| {
            out.extend_from_slice(&b)
        });
        assert_eq!(out, b"abcdefghijk");
        assert_eq!(r.buffered(), 0);
    }

    proptest! {
        /// Any split of a stream into overlapping, duplicated chunks, in any
        /// order, comes out as the stream, each byte once.
        #[test]
        fn any_arrival_order_yields_the_stream(
            data in proptest::collection::vec(any::<u8>(), 1..4000),
            cuts in proptest::collection::vec((0usize..4000, 1usize..600), 1..80),
            seed in any::<u64>(),
        ) {
            let data = Bytes::from(data);
            let mut chunks: Vec<(usize, Bytes)> = cuts
                .iter()
                .map(|&(start, len)| {
                    let start = start % data.len();
                    let end = (start + len).min(data.len());
                    (start, data.slice(start..end))
                })
                .collect();
            // Make sure every byte is covered at least once.
            for start in (0..data.len()).step_by(500) {
                let end = (start + 500).min(data.len());
                chunks.push((start, data.slice(start..end)));
            }
            // Deterministic shuffle.
            let mut state = seed | 1;
            for i in (1..chunks.len()).rev() {
                state ^= state << 13; state ^= state >> 7; state ^= state << 17;
                chunks.swap(i, (state % (i as u64 + 1)) as usize);
            }
            let mut r = Reassembler::new(0);
            let mut out = Vec::new();
            for (offset, bytes) in chunks {
                r.insert(offset as u64, bytes, |b| out.extend_from_slice(&b));
            }
            prop_assert_eq!(&out[..], &data[..]);
            prop_assert_eq!(r.buffered(), 0);
        }
    }
}
