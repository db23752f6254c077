//! A node-wide bound on the memory of flows' stream compressors.
//!
//! On a slow link `auto` compresses each sending flow with its own LZMA2 or
//! slow zstd stream: 7-13 MiB per flow while it sends (freed a second after
//! its socket goes quiet). Two hundred busy flows would hold 2.6 GB. Each
//! flow therefore reserves its compressor's memory
//! ([`Compression::stream_compressor_bytes`]) from the node's
//! [`CompressorBudget`] before it may start a stream; a flow that does not
//! fit steps down to zstd level 3 (3 MiB), and to LZ4 (no stream) when even
//! that does not fit. It steps back up when memory is returned: flows
//! reserve again each time they pick their codec. Reservations are made
//! with one atomic update, so concurrent flows never reserve more than the
//! bound between them.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use wanopt_codec::Compression;

/// Default [`CompressorBudget`] bound: 39 LZMA2 streams, or 170 at zstd 3.
pub const DEFAULT_COMPRESSOR_MEMORY: u64 = 512 << 20;

/// The memory the flows of a node may hold in stream compressors.
#[derive(Debug)]
pub struct CompressorBudget {
    limit: u64,
    reserved: AtomicU64,
    step_downs: AtomicU64,
}

impl CompressorBudget {
    /// A budget of `limit` bytes.
    pub fn new(limit: u64) -> Arc<CompressorBudget> {
        Arc::new(CompressorBudget {
            limit,
            reserved: AtomicU64::new(0),
            step_downs: AtomicU64::new(0),
        })
    }

    /// The bound, bytes.
    pub fn limit(&self) -> u64 {
        self.limit
    }

    /// Bytes reserved by flows now.
    pub fn reserved(&self) -> u64 {
        self.reserved.load(Ordering::Relaxed)
    }

    /// How many times a flow moved to a cheaper codec than it wanted
    /// because the budget was spent.
    pub fn step_downs(&self) -> u64 {
        self.step_downs.load(Ordering::Relaxed)
    }

    /// Replaces a reservation of `from` bytes by one of `to`: always done
    /// when `to <= from`, else only if the total stays within the bound.
    fn exchange(&self, from: u64, to: u64) -> bool {
        self.reserved
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |reserved| {
                let after = reserved.saturating_sub(from) + to;
                (to <= from || after <= self.limit).then_some(after)
            })
            .is_ok()
    }
}

/// One flow's share of a [`CompressorBudget`], returned when dropped.
#[derive(Debug)]
pub struct Reservation {
    budget: Arc<CompressorBudget>,
    bytes: u64,
    /// The codec last allowed.
    last: Option<Compression>,
}

impl Reservation {
    /// A flow's empty reservation.
    pub fn new(budget: Arc<CompressorBudget>) -> Reservation {
        Reservation {
            budget,
            bytes: 0,
            last: None,
        }
    }

    /// Bytes reserved.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// The codec the flow may use when it wants `wanted`: `wanted` if its
    /// stream compressor fits the budget (with what this flow reserved
    /// already counted as free), else zstd level 3 if that fits, else
    /// LZ4; the reservation becomes that codec's. A move to a cheaper
    /// codec than wanted is counted once, not at each choice that keeps it.
    pub fn choose(&mut self, wanted: Compression) -> Compression {
        let chosen = self.allowed(wanted);
        if chosen != wanted && self.last != Some(chosen) {
            self.budget.step_downs.fetch_add(1, Ordering::Relaxed);
        }
        self.last = Some(chosen);
        chosen
    }

    fn allowed(&mut self, wanted: Compression) -> Compression {
        let steps = [wanted, Compression::ZSTD, Compression::Lz4];
        for (i, &step) in steps.iter().enumerate() {
            if i > 0 && step.stream_compressor_bytes() >= wanted.stream_compressor_bytes() {
                // Only a cheaper codec is a step down.
                continue;
            }
            if self.reserve(step.stream_compressor_bytes() as u64) {
                return step;
            }
        }
        // LZ4 needs nothing, and giving back always succeeds.
        self.release();
        Compression::Lz4
    }

    /// Makes the reservation `need` bytes if the budget allows. Keeping
    /// the same amount (every read of a flow that keeps its codec) does not
    /// touch the node-wide counter.
    fn reserve(&mut self, need: u64) -> bool {
        if need != self.bytes && !self.budget.exchange(self.bytes, need) {
            return false;
        }
        self.bytes = need;
        true
    }

    /// Returns the reservation (the flow freed its compressor).
    pub fn release(&mut self) {
        self.reserve(0);
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        self.release();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LZMA: Compression = Compression::Lzma { preset: 5 };

    #[test]
    fn flows_step_down_when_the_budget_is_spent_and_back_up_when_it_is_returned() {
        let lzma = LZMA.stream_compressor_bytes() as u64;
        let zstd3 = Compression::ZSTD.stream_compressor_bytes() as u64;
        // Room for two LZMA2 streams and one zstd 3 stream.
        let budget = CompressorBudget::new(2 * lzma + zstd3);
        let mut flows: Vec<Reservation> =
            (0..5).map(|_| Reservation::new(budget.clone())).collect();
        let chosen: Vec<Compression> = flows.iter_mut().map(|f| f.choose(LZMA)).collect();
        assert_eq!(
            chosen,
            [
                LZMA,
                LZMA,
                Compression::ZSTD,
                Compression::Lz4,
                Compression::Lz4
            ]
        );
        assert_eq!(budget.reserved(), 2 * lzma + zstd3);
        assert_eq!(budget.step_downs(), 3);
        // Choosing again with what it holds counted as free: the same.
        assert_eq!(flows[0].choose(LZMA), LZMA);
        assert_eq!(flows[2].choose(LZMA), Compression::ZSTD);
        assert_eq!(budget.reserved(), 2 * lzma + zstd3);
        assert_eq!(budget.step_downs(), 3, "a kept step down counts once");
        // A flow goes quiet and frees its compressor; another moves up.
        flows[1].release();
        assert_eq!(flows[1].bytes(), 0);
        assert_eq!(flows[3].choose(LZMA), LZMA);
        // The flow at zstd 3 gives its 3 MiB back when it moves up; here
        // it cannot, and keeps them.
        assert_eq!(flows[2].choose(LZMA), Compression::ZSTD);
        assert_eq!(flows[2].bytes(), zstd3);
        // Flows that end return everything.
        flows.clear();
        assert_eq!(budget.reserved(), 0);
    }

    #[test]
    fn cheap_codecs_are_never_refused() {
        let budget = CompressorBudget::new(0);
        let mut flow = Reservation::new(budget.clone());
        assert_eq!(flow.choose(Compression::Lz4), Compression::Lz4);
        assert_eq!(flow.choose(Compression::Off), Compression::Off);
        assert_eq!(flow.choose(LZMA), Compression::Lz4);
        assert_eq!(flow.choose(Compression::ZSTD), Compression::Lz4);
        assert_eq!(budget.reserved(), 0);
        // A budget of zero keeps every flow off stream compressors: one
        // move from what it had (off) to LZ4.
        assert_eq!(budget.step_downs(), 1);
    }

    #[test]
    fn concurrent_flows_never_reserve_more_than_the_bound() {
        let lzma = LZMA.stream_compressor_bytes() as u64;
        let budget = CompressorBudget::new(7 * lzma);
        std::thread::scope(|s| {
            for _ in 0..8 {
                let budget = budget.clone();
                s.spawn(move || {
                    let mut flows: Vec<Reservation> =
                        (0..4).map(|_| Reservation::new(budget.clone())).collect();
                    for round in 0..500 {
                        for (i, flow) in flows.iter_mut().enumerate() {
                            if (round + i) % 3 == 0 {
                                flow.release();
                            } else {
                                flow.choose(LZMA);
                            }
                            assert!(budget.reserved() <= budget.limit());
                        }
                    }
                });
            }
        });
        assert_eq!(budget.reserved(), 0);
    }
}
