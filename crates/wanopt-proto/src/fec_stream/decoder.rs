//! The receiving side: sources are unwrapped and kept for a while, lost
//! ones rebuilt from their block's repairs, and the path's loss counted
//! in sequence order.

use std::collections::VecDeque;

use super::wire::{self, Report, StreamFecError};

/// Sources a decoder keeps (the last this many sequence numbers): more
/// than the widest block ([`wire::MAX_K`] x [`wire::MAX_DEPTH`]).
pub const RING: usize = 2048;
/// A sequence number this far behind the highest one received is counted
/// as arrived or lost (later arrivals are reordering beyond what the
/// counts wait for).
const REORDER: u32 = 256;
/// Blocks waiting for repairs at most.
const BLOCKS: usize = 64;
/// Consecutive sources far behind the highest one after which the sender
/// is taken to have started again.
const RESTART_AFTER: u32 = 16;

/// What a [`Decoder`] did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DecoderStats {
    /// Sources that arrived.
    pub received: u64,
    /// Sources counted lost before repair.
    pub lost: u64,
    /// Sources rebuilt from repairs.
    pub recovered: u64,
    /// Runs of consecutive lost sources.
    pub runs: u64,
    /// Repair datagrams taken.
    pub repairs: u64,
    /// Blocks that lost more than their repairs could rebuild.
    pub unrecoverable: u64,
    /// Datagrams refused (malformed, inconsistent, or out of the window).
    pub refused: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
enum SlotState {
    #[default]
    Empty,
    Arrived,
    Recovered,
}

#[derive(Debug, Default)]
struct Slot {
    seq: u32,
    state: SlotState,
    data: Vec<u8>,
}

/// A block some repairs of which arrived.
#[derive(Debug)]
struct Block {
    first: u32,
    k: u8,
    stride: u8,
    m: u8,
    shard: usize,
    repairs: Vec<(usize, Vec<u8>)>,
    done: bool,
}

/// One received source: its QUIC datagram.
pub type Received<'a> = &'a [u8];

/// The receiving side of continuous FEC for one sender.
#[derive(Debug, Default)]
pub struct Decoder {
    ring: Vec<Slot>,
    highest: Option<u32>,
    /// The next sequence number to be counted.
    counted_to: u32,
    in_run: bool,
    stale: u32,
    blocks: VecDeque<Block>,
    stats: DecoderStats,
}

/// Signed distance from `b` to `a` in sequence space.
fn ahead(a: u32, b: u32) -> i64 {
    i64::from(a.wrapping_sub(b) as i32)
}

impl Decoder {
    /// A decoder that has seen nothing.
    pub fn new() -> Decoder {
        Decoder::default()
    }

    /// What it did.
    pub fn stats(&self) -> DecoderStats {
        self.stats
    }

    /// The counts for the sender (totals, wrapping).
    pub fn report(&self) -> Report {
        Report {
            received: self.stats.received as u32,
            lost: self.stats.lost as u32,
            recovered: self.stats.recovered as u32,
            runs: self.stats.runs as u32,
            repairs: self.stats.repairs as u32,
        }
    }

    fn slot(&self, seq: u32) -> Option<&Slot> {
        self.ring
            .get(seq as usize % RING)
            .filter(|s| s.seq == seq && s.state != SlotState::Empty)
    }

    fn store(&mut self, seq: u32, state: SlotState, data: &[u8]) -> bool {
        let i = seq as usize % RING;
        if self.ring.len() <= i {
            self.ring.resize_with(i + 1, Slot::default);
        }
        let slot = &mut self.ring[i];
        if slot.seq == seq && slot.state != SlotState::Empty {
            return false;
        }
        slot.seq = seq;
        slot.state = state;
        slot.data.clear();
        slot.data.extend_from_slice(data);
        true
    }

    /// Whether `seq` is inside the window the decoder keeps.
    fn in_window(&self, seq: u32) -> bool {
        self.highest
            .is_some_and(|h| (0..RING as i64).contains(&ahead(h, seq)))
    }

    /// Takes a source datagram: returns the QUIC datagram it carries (to
    /// be handed on at once) and keeps a copy.
    pub fn on_source<'a>(&mut self, datagram: &'a [u8]) -> Result<&'a [u8], StreamFecError> {
        let (seq, payload) = match wire::parse_source(datagram) {
            Ok(s) => s,
            Err(e) => {
                self.stats.refused += 1;
                return Err(e);
            }
        };
        match self.highest {
            None => self.restart(seq),
            Some(h) => {
                let d = ahead(seq, h);
                if d > RING as i64 {
                    // A jump: what lies between is not counted.
                    self.highest = Some(seq);
                    self.counted_to = seq;
                    self.in_run = false;
                } else if d > 0 {
                    self.highest = Some(seq);
                    self.count_up_to(seq);
                } else if d <= -(RING as i64) {
                    self.stale += 1;
                    if self.stale >= RESTART_AFTER {
                        self.restart(seq);
                    } else {
                        return Ok(payload);
                    }
                }
            }
        }
        self.stale = 0;
        if self.store(seq, SlotState::Arrived, payload) {
            // A source counted lost that arrives after all is reordering.
            if ahead(self.counted_to, seq) > 0 {
                self.stats.received += 1;
                self.stats.lost = self.stats.lost.saturating_sub(1);
            }
        }
        Ok(payload)
    }

    fn restart(&mut self, seq: u32) {
        self.highest = Some(seq);
        self.counted_to = seq;
        self.in_run = false;
        self.stale = 0;
        self.blocks.clear();
    }

    /// Counts the sources that fell `REORDER` behind `highest`.
    fn count_up_to(&mut self, highest: u32) {
        let until = highest.wrapping_sub(REORDER);
        while ahead(until, self.counted_to) > 0 {
            let seq = self.counted_to;
            let arrived = self
                .slot(seq)
                .is_some_and(|s| s.state == SlotState::Arrived);
            if arrived {
                self.stats.received += 1;
                self.in_run = false;
            } else {
                self.stats.lost += 1;
                if !self.in_run {
                    self.stats.runs += 1;
                    self.in_run = true;
                }
            }
            self.counted_to = seq.wrapping_add(1);
        }
    }

    /// Takes a repair datagram; the sources it allowed to rebuild (their
    /// QUIC datagrams) are appended to `rebuilt`.
    pub fn on_repair(
        &mut self,
        datagram: &[u8],
        rebuilt: &mut Vec<Vec<u8>>,
    ) -> Result<(), StreamFecError> {
        let repair = match wire::parse_repair(datagram) {
            Ok(r) => r,
            Err(e) => {
                self.stats.refused += 1;
                return Err(e);
            }
        };
        self.stats.repairs += 1;
        let last = repair.source_seq(repair.k - 1);
        if self.highest.is_none() {
            // Every source of the block was lost: the repair places the
            // sequence.
            self.restart(last);
        }
        let near = self
            .highest
            .is_some_and(|h| ahead(last, h) <= RING as i64 / 2);
        if !self.in_window(repair.first) || !near {
            self.stats.refused += 1;
            return Err(StreamFecError::Invalid("block (outside the window)"));
        }
        let position = self
            .blocks
            .iter()
            .position(|b| b.first == repair.first && b.stride == repair.stride && b.k == repair.k);
        let index = match position {
            Some(i) => {
                let b = &self.blocks[i];
                if b.m != repair.m || b.shard != repair.shard.len() {
                    self.stats.refused += 1;
                    return Err(StreamFecError::Invalid(
                        "block (differs from its first repair)",
                    ));
                }
                i
            }
            None => {
                if self.blocks.len() >= BLOCKS {
                    if let Some(old) = self.blocks.pop_front() {
                        if !old.done && self.missing(&old) > 0 {
                            self.stats.unrecoverable += 1;
                        }
                    }
                }
                self.blocks.push_back(Block {
                    first: repair.first,
                    k: repair.k,
                    stride: repair.stride,
                    m: repair.m,
                    shard: repair.shard.len(),
                    repairs: Vec::new(),
                    done: false,
                });
                self.blocks.len() - 1
            }
        };
        let block = &mut self.blocks[index];
        if block.done
            || block
                .repairs
                .iter()
                .any(|(i, _)| *i == usize::from(repair.index))
        {
            return Ok(());
        }
        block
            .repairs
            .push((usize::from(repair.index), repair.shard.to_vec()));
        let block = &self.blocks[index];
        let missing = self.missing(block);
        if missing == 0 {
            self.blocks[index].done = true;
            return Ok(());
        }
        if missing > block.repairs.len() {
            if block.repairs.len() == usize::from(block.m) {
                self.blocks[index].done = true;
                self.stats.unrecoverable += 1;
            }
            return Ok(());
        }
        let result = self.rebuild(index, rebuilt);
        self.blocks[index].done = true;
        result
    }

    /// Sources of `block` not here.
    fn missing(&self, block: &Block) -> usize {
        (0..block.k)
            .filter(|&i| {
                let seq = block
                    .first
                    .wrapping_add(u32::from(i) * u32::from(block.stride));
                self.slot(seq).is_none()
            })
            .count()
    }

    fn rebuild(&mut self, index: usize, rebuilt: &mut Vec<Vec<u8>>) -> Result<(), StreamFecError> {
        let block = &self.blocks[index];
        let shard = block.shard;
        let seqs: Vec<u32> = (0..block.k)
            .map(|i| {
                block
                    .first
                    .wrapping_add(u32::from(i) * u32::from(block.stride))
            })
            .collect();
        let mut originals = Vec::new();
        for (i, seq) in seqs.iter().enumerate() {
            if let Some(slot) = self.slot(*seq) {
                if slot.data.len() + 2 > shard {
                    self.stats.refused += 1;
                    return Err(StreamFecError::Invalid(
                        "shard length (shorter than a source)",
                    ));
                }
                let mut s = Vec::with_capacity(shard);
                wire::symbol(&slot.data, shard, &mut s);
                originals.push((i, s));
            }
        }
        let restored = reed_solomon_simd::decode(
            usize::from(block.k),
            usize::from(block.m),
            originals.iter().map(|(i, s)| (*i, s.as_slice())),
            block.repairs.iter().map(|(i, s)| (*i, s.as_slice())),
        );
        let Ok(restored) = restored else {
            self.stats.unrecoverable += 1;
            return Err(StreamFecError::Invalid("block (cannot be decoded)"));
        };
        let mut restored: Vec<(usize, Vec<u8>)> = restored.into_iter().collect();
        restored.sort_by_key(|(i, _)| *i);
        for (i, symbol) in restored {
            let Some(&seq) = seqs.get(i) else {
                continue;
            };
            let len = usize::from(u16::from_be_bytes([symbol[0], symbol[1]]));
            if len == 0 || len + 2 > symbol.len() {
                self.stats.refused += 1;
                continue;
            }
            let data = &symbol[2..2 + len];
            if self.in_window(seq) {
                self.store(seq, SlotState::Recovered, data);
            }
            self.stats.recovered += 1;
            rebuilt.push(data.to_vec());
        }
        Ok(())
    }
}
