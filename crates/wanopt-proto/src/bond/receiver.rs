//! The receiving side of a bond: each path's acks, the paths' delay skew
//! and jitter, and the reorder buffer they size.
//!
//! Each path's receiver acknowledges on that path every [`ACK_EVERY`] data
//! datagrams, or [`MAX_ACK_DELAY`] after the first one it has not
//! acknowledged, so the sender's controller for that path sees that path's
//! round trip and nothing else.
//!
//! The skew comes from the data headers' send times: arrival minus `tx_us`
//! is a path's one-way delay plus the clocks' offset, the same offset for
//! every path, so the difference of two paths' least values over the last
//! [`DELAY_WINDOW`] is their difference in delay with no clock
//! synchronisation. The hold time of the reorder buffer covers the most
//! one path has lately been behind another (the skew and the queues), four
//! times the worst path jitter (RFC 3550's interarrival jitter, §6.4.1)
//! and [`HOLD_MARGIN`], within [`MIN_HOLD`] and [`MAX_HOLD`].

use std::time::{Duration, Instant};

use super::reorder::{Order, ReorderBuffer, ReorderStats};
use super::wire::{AckRepr, BondWireError, Data, DataRepr, ACK_DELAY_UNIT_US, SACK_SPAN};
use crate::path::{PathId, PathSet};

/// Data datagrams a path's receiver takes before it acknowledges them.
pub const ACK_EVERY: u32 = 8;
/// The longest a path's receiver waits before it acknowledges a datagram.
pub const MAX_ACK_DELAY: Duration = Duration::from_millis(2);
/// The window of a path's least relative delay.
pub const DELAY_WINDOW: Duration = Duration::from_secs(10);
/// The shortest hold time of the reorder buffer.
pub const MIN_HOLD: Duration = Duration::from_millis(5);
/// The window of a path's greatest relative delay.
pub const QUEUE_WINDOW: Duration = Duration::from_secs(1);
/// The longest hold time of the reorder buffer.
pub const MAX_HOLD: Duration = Duration::from_millis(200);
/// Added to skew and jitter in the hold time.
pub const HOLD_MARGIN: Duration = Duration::from_millis(2);

/// One path's receiving state.
#[derive(Debug, Clone)]
struct PathReceiver {
    /// The highest pseq received and when.
    largest: u32,
    largest_at: Instant,
    /// Bit i: pseq `largest - 1 - i` received.
    sack: u64,
    received: u32,
    /// Data datagrams since the last ack, and when the first of them came.
    unacked: u32,
    first_unacked: Option<Instant>,
    /// The least arrival minus `tx_us` (µs, signed: clocks differ) of the
    /// current and the previous [`DELAY_WINDOW`].
    least: [Option<i64>; 2],
    window_start: Instant,
    /// The greatest of the same over the current and previous
    /// [`QUEUE_WINDOW`].
    greatest: [Option<i64>; 2],
    queue_window_start: Instant,
    /// RFC 3550 jitter, µs, and the previous datagram's relative delay.
    jitter_us: f64,
    previous: Option<i64>,
    last_arrival: Instant,
}

impl PathReceiver {
    /// A path whose first datagram, `pseq`, arrives at `now` (recorded
    /// next).
    fn new(now: Instant, pseq: u32) -> Self {
        PathReceiver {
            largest: pseq,
            largest_at: now,
            sack: 0,
            received: 0,
            unacked: 0,
            first_unacked: None,
            least: [None; 2],
            window_start: now,
            greatest: [None; 2],
            queue_window_start: now,
            jitter_us: 0.0,
            previous: None,
            last_arrival: now,
        }
    }

    fn record(&mut self, now: Instant, pseq: u32, relative_us: i64) {
        let ahead = pseq.wrapping_sub(self.largest) as i32;
        if ahead > 0 {
            let shift = ahead as u32;
            // The old largest becomes bit `shift - 1`.
            self.sack = if shift > SACK_SPAN {
                0
            } else {
                (self.sack << 1 | 1).checked_shl(shift - 1).unwrap_or(0)
            };
            self.largest = pseq;
            self.largest_at = now;
        } else if ahead < 0 && (-ahead as u32) <= SACK_SPAN {
            self.sack |= 1 << (-ahead - 1);
        }
        self.received = self.received.wrapping_add(1);
        self.unacked += 1;
        self.first_unacked.get_or_insert(now);
        if now.duration_since(self.window_start) >= DELAY_WINDOW {
            self.least = [None, self.least[0]];
            self.window_start = now;
        }
        let least = &mut self.least[0];
        *least = Some(least.map_or(relative_us, |l| l.min(relative_us)));
        if now.duration_since(self.queue_window_start) >= QUEUE_WINDOW {
            self.greatest = [None, self.greatest[0]];
            self.queue_window_start = now;
        }
        let greatest = &mut self.greatest[0];
        *greatest = Some(greatest.map_or(relative_us, |g| g.max(relative_us)));
        if let Some(previous) = self.previous {
            let d = (relative_us - previous).unsigned_abs() as f64;
            self.jitter_us += (d - self.jitter_us) / 16.0;
        }
        self.previous = Some(relative_us);
        self.last_arrival = now;
    }

    fn least(&self) -> Option<i64> {
        self.least.iter().flatten().min().copied()
    }

    fn greatest(&self) -> Option<i64> {
        self.greatest.iter().flatten().max().copied()
    }

    fn ack_due(&self) -> Option<Instant> {
        self.first_unacked.map(|first| first + MAX_ACK_DELAY)
    }

    fn ack(&mut self, now: Instant, path: PathId) -> AckRepr {
        self.unacked = 0;
        self.first_unacked = None;
        let delay_us = now.duration_since(self.largest_at).as_micros();
        AckRepr {
            path,
            largest: self.largest,
            received: self.received,
            ack_delay: (delay_us / u128::from(ACK_DELAY_UNIT_US)).min(u128::from(u16::MAX)) as u16,
            sack: self.sack,
        }
    }
}

/// A path's figures as the receiver measures them.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ReceivedPath {
    /// Data datagrams received on it.
    pub received: u32,
    /// Its delay beyond the fastest path's, from the least delays.
    pub behind: Duration,
    /// Its interarrival jitter.
    pub jitter: Duration,
}

/// The receiving side of one peer's bond.
#[derive(Debug)]
pub struct BondReceiver<T> {
    epoch: Instant,
    paths: [Option<PathReceiver>; 15],
    up: PathSet,
    reorder: ReorderBuffer<T>,
}

impl<T: AsRef<[u8]>> BondReceiver<T> {
    /// A receiver whose clock starts at `now`.
    pub fn new(now: Instant) -> Self {
        BondReceiver {
            epoch: now,
            paths: std::array::from_fn(|_| None),
            up: PathSet::EMPTY,
            reorder: ReorderBuffer::new(MAX_HOLD),
        }
    }

    /// A bonded data datagram that arrived on `path`; `inner` makes the
    /// datagram to hand up from its bytes past the header (the caller's
    /// buffer type). Data that says it came on another path than it did
    /// is counted where it arrived.
    pub fn handle_data(
        &mut self,
        now: Instant,
        path: PathId,
        datagram: &[u8],
        inner: impl FnOnce(&[u8]) -> T,
    ) -> Result<DataRepr, BondWireError> {
        let view = Data::new_checked(datagram)?;
        let repr = DataRepr::parse(&view)?;
        let arrival_us = now.duration_since(self.epoch).as_micros() as u32;
        let relative_us = i64::from(arrival_us.wrapping_sub(repr.tx_us) as i32);
        self.paths[path.index()]
            .get_or_insert_with(|| PathReceiver::new(now, repr.pseq))
            .record(now, repr.pseq, relative_us);
        self.reorder.set_hold(self.hold());
        self.reorder
            .handle_data(now, path, repr.gseq, Order::of(&repr), inner(view.inner()));
        Ok(repr)
    }

    /// Sets the paths that are up (from the probes): each may still carry
    /// a datagram the reorder buffer waits for.
    pub fn set_up(&mut self, now: Instant, up: PathSet) {
        self.up = up;
        self.reorder.set_up(now, up);
    }

    /// Gives up gaps whose hold time passed.
    pub fn handle_timeout(&mut self, now: Instant) {
        self.reorder.handle_timeout(now);
    }

    /// The next datagram to hand to QUIC.
    #[must_use]
    pub fn poll_release(&mut self) -> Option<T> {
        self.reorder.poll_release()
    }

    /// The next ack to send, on its path, if one is due at `now`.
    #[must_use]
    pub fn poll_ack(&mut self, now: Instant) -> Option<AckRepr> {
        for (index, slot) in self.paths.iter_mut().enumerate() {
            let Some(path) = slot else { continue };
            let due = path.unacked >= ACK_EVERY || path.ack_due().is_some_and(|due| due <= now);
            if due && path.unacked > 0 {
                let id = PathId::new(index as u8 + 1).expect("15 slots");
                return Some(path.ack(now, id));
            }
        }
        None
    }

    /// The next time [`Self::handle_timeout`] or [`Self::poll_ack`] has
    /// work.
    pub fn poll_timeout(&self) -> Option<Instant> {
        let acks = self
            .paths
            .iter()
            .flatten()
            .filter_map(PathReceiver::ack_due);
        acks.chain(self.reorder.poll_timeout()).min()
    }

    /// How long the reorder buffer holds a gap now: the most a datagram
    /// on one path that is up has been behind one on another lately (the
    /// greatest relative delay of the last [`QUEUE_WINDOW`] or two, less
    /// the least over [`DELAY_WINDOW`]: the skew and the queues), plus four
    /// times their worst jitter and a margin, within [`MIN_HOLD`] and
    /// [`MAX_HOLD`]. Before two paths have delivered, [`MAX_HOLD`].
    ///
    /// A long hold costs little while every path carries data: a gap
    /// every path has passed is given up at once. It is what a path that
    /// went quiet costs.
    pub fn hold(&self) -> Duration {
        let delivered: Vec<&PathReceiver> = self
            .up
            .iter()
            .filter_map(|p| self.paths[p.index()].as_ref())
            .collect();
        let least = delivered.iter().filter_map(|p| p.least()).min();
        let greatest = delivered.iter().filter_map(|p| p.greatest()).max();
        let (Some(least), Some(greatest), true) = (least, greatest, delivered.len() >= 2) else {
            return MAX_HOLD;
        };
        let jitter_us = delivered.iter().map(|p| p.jitter_us).fold(0.0, f64::max);
        let skew_us = (greatest - least).unsigned_abs();
        let hold = Duration::from_micros(skew_us + (4.0 * jitter_us) as u64);
        (hold + HOLD_MARGIN).clamp(MIN_HOLD, MAX_HOLD)
    }

    /// A path's figures, once it has delivered.
    pub fn path(&self, path: PathId) -> Option<ReceivedPath> {
        let fastest = self
            .paths
            .iter()
            .flatten()
            .filter_map(|p| p.least())
            .min()?;
        let p = self.paths[path.index()].as_ref()?;
        Some(ReceivedPath {
            received: p.received,
            behind: Duration::from_micros((p.least()? - fastest).unsigned_abs()),
            jitter: Duration::from_micros(p.jitter_us as u64),
        })
    }

    /// What the reorder buffer has done.
    pub fn reorder_stats(&self) -> ReorderStats {
        self.reorder.stats()
    }
}

#[cfg(test)]
mod tests;
