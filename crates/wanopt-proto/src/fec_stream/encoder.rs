//! The sending side: sources are wrapped and remembered, blocks closed
//! when full or due, and each closed block's repairs made.

use std::time::{Duration, Instant};

use super::wire::{self, Params};

/// What an [`Encoder`] sent.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct EncoderStats {
    /// Sources wrapped.
    pub sources: u64,
    /// Their bytes on the wire (headers included).
    pub source_bytes: u64,
    /// Blocks closed.
    pub blocks: u64,
    /// Blocks closed before they were full (by the flush deadline or a
    /// change of code).
    pub flushed: u64,
    /// Repair datagrams made.
    pub repairs: u64,
    /// Their bytes.
    pub repair_bytes: u64,
}

/// One interleaved block being filled.
#[derive(Debug, Default)]
struct Lane {
    first: u32,
    /// When its first source was sent.
    started: Option<Instant>,
    sources: Vec<Vec<u8>>,
}

/// The sending side of continuous FEC for one destination.
#[derive(Debug, Default)]
pub struct Encoder {
    /// The strand its datagrams are of.
    strand: wire::Strand,
    next_seq: u32,
    params: Option<Params>,
    /// Sources are numbered while the code is off, so that the receiver
    /// measures the loss of every datagram (`auto`).
    measuring: bool,
    /// Repairs a block closed by the deadline with `c` sources gets at
    /// least (entry `c`), and the bytes per second and bucket (bytes,
    /// when last filled) those beyond its share may take.
    sparse_repairs: [u8; PARTIAL + 1],
    sparse_rate: f64,
    sparse_bucket: (f64, Option<Instant>),
    flush_after: Duration,
    lanes: Vec<Lane>,
    /// The lane the next source goes to.
    cursor: usize,
    spare: Vec<Vec<u8>>,
    /// Repairs owed to partial blocks, fractions carried to the next.
    credit: f64,
    stats: EncoderStats,
}

/// A partial block of at most this many sources gets repairs even when
/// its share of the code is less than one, as many as the policy asks
/// ([`Encoder::set_sparse_repairs`]): a sparse sender's datagrams (a
/// request, an acknowledgement) are each worth protecting, and cost
/// little.
pub const SPARSE: usize = 4;

/// A partial block of at most this many sources (closed by the deadline:
/// a sender that does not fill blocks, such as several interactive
/// connections at once) gets at least the repairs the policy asks for
/// its size ([`Encoder::set_partial_repairs`]).
pub const PARTIAL: usize = 31;

impl Encoder {
    /// An encoder of the bulk strand that is off.
    pub fn new() -> Encoder {
        Encoder::of(wire::Strand::Bulk)
    }

    /// An encoder of `strand` that is off.
    pub fn of(strand: wire::Strand) -> Encoder {
        Encoder {
            strand,
            flush_after: Duration::from_millis(10),
            ..Encoder::default()
        }
    }

    /// The code in use; `None` while off.
    pub fn params(&self) -> Option<Params> {
        self.params
    }

    /// Numbers the datagrams while the code is off, so the receiver
    /// counts what the path loses (its reports are the loss measure of
    /// every datagram, acknowledgements included, which the sender's
    /// QUIC does not see lost): 5 bytes a datagram.
    pub fn set_measuring(&mut self, measuring: bool) {
        self.measuring = measuring;
    }

    /// The repairs a sparse block (a few datagrams closed by the flush
    /// deadline) gets at least, though its share of the code is less
    /// ([`super::Policy::sparse_repairs`]; 0: its share only), and the
    /// bytes per second such repairs beyond the share may take at most
    /// (a bucket of a quarter second, at least one full datagram): a
    /// moderate stream of small blocks (a video call's) must not double
    /// its bytes on a slow path.
    pub fn set_sparse_repairs(&mut self, repairs: u8, bytes_per_second: f64) {
        let mut table = [0; PARTIAL + 1];
        table[1..=SPARSE].fill(repairs);
        self.set_partial_repairs(table, bytes_per_second);
    }

    /// The same for partial blocks of every size up to [`PARTIAL`]:
    /// entry `c` is what a block closed with `c` sources gets at least
    /// ([`super::Policy::partial_repairs`]).
    pub fn set_partial_repairs(&mut self, table: [u8; PARTIAL + 1], bytes_per_second: f64) {
        self.sparse_repairs = table.map(|m| m.min(wire::MAX_M));
        self.sparse_rate = if bytes_per_second.is_finite() {
            bytes_per_second.max(0.0)
        } else {
            0.0
        };
    }

    fn sparse_depth(&self) -> f64 {
        (self.sparse_rate / 4.0).max(1_500.0)
    }

    /// Fills the sparse repairs' bucket up to `now`.
    fn refill(&mut self, now: Instant) {
        let (tokens, at) = self.sparse_bucket;
        let elapsed = at.map_or(f64::INFINITY, |t| {
            now.saturating_duration_since(t).as_secs_f64()
        });
        let tokens = if elapsed.is_finite() {
            tokens + elapsed * self.sparse_rate
        } else {
            f64::INFINITY
        };
        self.sparse_bucket = (tokens.min(self.sparse_depth()), Some(now));
    }

    /// Whether datagrams go out wrapped as sources (a code, or measuring);
    /// otherwise they go out as they are.
    pub fn wraps(&self) -> bool {
        self.params.is_some() || self.measuring
    }

    /// What it sent.
    pub fn stats(&self) -> EncoderStats {
        self.stats
    }

    /// Changes the code (`None`: off) and the flush deadline. Blocks being
    /// filled under another code are closed first: their repairs are
    /// appended to `repairs`.
    pub fn set_params(
        &mut self,
        params: Option<Params>,
        flush_after: Duration,
        repairs: &mut Vec<Vec<u8>>,
    ) {
        self.flush_after = flush_after;
        if params == self.params {
            return;
        }
        if let Some(old) = self.params {
            for lane in 0..self.lanes.len() {
                if self.lanes[lane].started.is_some() {
                    self.stats.flushed += 1;
                }
                self.close(lane, old, repairs);
            }
        }
        self.params = params;
        self.cursor = 0;
        let depth = params.map_or(0, |p| usize::from(p.depth));
        self.lanes.resize_with(depth, Lane::default);
    }

    /// Writes the `nth` next datagram (0 for the next one to be sent) as
    /// a source into `out`: its header, then its bytes. Call only while
    /// [`Encoder::wraps`].
    pub fn wrap(&self, nth: usize, datagram: &[u8], out: &mut Vec<u8>) {
        wire::write_source(
            self.strand,
            self.next_seq.wrapping_add(nth as u32),
            datagram,
            out,
        );
    }

    /// The next datagram went out wrapped ([`Encoder::wrap`] with
    /// `nth = 0`): it joins its block; a block it fills is closed and its
    /// repairs appended to `repairs`.
    pub fn on_sent(&mut self, now: Instant, datagram: &[u8], repairs: &mut Vec<Vec<u8>>) {
        if !self.wraps() {
            return;
        }
        self.refill(now);
        let seq = self.next_seq;
        self.next_seq = seq.wrapping_add(1);
        self.stats.sources += 1;
        self.stats.source_bytes += (datagram.len() + wire::SOURCE_HEADER) as u64;
        let Some(params) = self.params else {
            return;
        };
        let lane_index = self.cursor;
        self.cursor = (self.cursor + 1) % self.lanes.len().max(1);
        let mut copy = self.spare.pop().unwrap_or_default();
        copy.clear();
        copy.extend_from_slice(datagram);
        let lane = &mut self.lanes[lane_index];
        if lane.sources.is_empty() {
            lane.first = seq;
            lane.started = Some(now);
        }
        lane.sources.push(copy);
        if lane.sources.len() >= usize::from(params.k) {
            self.close(lane_index, params, repairs);
        }
    }

    /// When `lane`'s block is due to be closed: `flush_after` after its
    /// first source, a quarter of that while it holds no more than a
    /// sparse sender's few datagrams (a lost request is rebuilt long
    /// before QUIC would resend it; a bulk sender's blocks fill up).
    fn due(&self, lane: &Lane) -> Option<Instant> {
        let wait = if lane.sources.len() <= SPARSE {
            self.flush_after / 4
        } else {
            self.flush_after
        };
        lane.started.map(|t| t + wait)
    }

    /// When the oldest block being filled is due to be closed.
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.lanes.iter().filter_map(|l| self.due(l)).min()
    }

    /// Closes the blocks that are due at `now`, appending their repairs.
    pub fn flush_due(&mut self, now: Instant, repairs: &mut Vec<Vec<u8>>) {
        let Some(params) = self.params else {
            return;
        };
        self.refill(now);
        for lane in 0..self.lanes.len() {
            if self.due(&self.lanes[lane]).is_some_and(|t| t <= now) {
                self.stats.flushed += 1;
                self.close(lane, params, repairs);
            }
        }
    }

    /// Closes `lane`'s block: `m` repairs for a full block, its share for
    /// a partial one (at least the sparse repairs for a sparse one, as
    /// the bucket allows).
    fn close(&mut self, lane: usize, params: Params, repairs: &mut Vec<Vec<u8>>) {
        let count = self.lanes[lane].sources.len();
        self.lanes[lane].started = None;
        if count == 0 {
            return;
        }
        let max_len = self.lanes[lane]
            .sources
            .iter()
            .map(Vec::len)
            .max()
            .unwrap_or(0);
        let shard = wire::shard_len(max_len);
        let m = if count >= usize::from(params.k) {
            usize::from(params.m)
        } else {
            // A partial block's share of the code, fractions carried over
            // so the ratio holds over many (a bulk sender's blocks closed
            // by the deadline).
            let owed = count as f64 * f64::from(params.m) / f64::from(params.k) + self.credit;
            let m = (owed.floor() as usize).min(usize::from(params.m));
            self.credit = (owed - m as f64).min(1.0);
            let repair_len = (wire::REPAIR_HEADER + shard) as f64;
            let affordable = (self.sparse_bucket.0 / repair_len).floor() as usize;
            let wanted = self.sparse_repairs.get(count).copied().unwrap_or(0);
            let sparse = usize::from(wanted).min(m + affordable);
            if m < sparse {
                self.credit = 0.0;
                self.sparse_bucket.0 -= (sparse - m) as f64 * repair_len;
                sparse
            } else {
                m
            }
        };
        let lane = &mut self.lanes[lane];
        if m == 0 {
            self.spare.append(&mut lane.sources);
            return;
        }
        let mut symbols = Vec::with_capacity(count);
        for source in &lane.sources {
            let mut s = Vec::with_capacity(shard);
            wire::symbol(source, shard, &mut s);
            symbols.push(s);
        }
        let first = lane.first;
        let stride = params.depth;
        self.spare.append(&mut lane.sources);
        self.spare.truncate(2 * usize::from(wire::MAX_K));
        let Ok(shards) = reed_solomon_simd::encode(count, m, &symbols) else {
            // Not reached: the counts and the shard length are in range.
            return;
        };
        self.stats.blocks += 1;
        for (index, shard) in shards.into_iter().enumerate() {
            let mut d = Vec::with_capacity(wire::REPAIR_HEADER + shard.len());
            wire::write_repair_header(
                self.strand,
                first,
                count as u8,
                stride,
                m as u8,
                index as u8,
                &mut d,
            );
            d.extend_from_slice(&shard);
            self.stats.repairs += 1;
            self.stats.repair_bytes += d.len() as u64;
            repairs.push(d);
        }
    }
}
