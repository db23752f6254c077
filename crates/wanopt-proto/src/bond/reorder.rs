//! The receiver's reorder buffer: datagrams that came over paths of
//! different delays leave it in the sender's order (`gseq`), so the QUIC
//! connection above sees one path that never reorders and its sender
//! never takes the slower path's packets for lost.
//!
//! A datagram waits while one before it is missing, until either
//! - every path that is up has delivered a later one: paths keep their own
//!   order, so the missing one was lost (on a single busy path, at once);
//! - or the first datagram after the gap has waited the hold time `H`
//!   (the paths' delay skew plus their jitter, set by the caller).
//!
//! A path that is up but has delivered nothing later keeps a gap open
//! until `H`: the buffer cannot tell a lost datagram from one still on its
//! way there. A datagram whose gap was given up still goes up (QUIC takes a
//! late packet), counted as late: late arrivals are the spurious losses the
//! buffer exists to prevent, the figure to watch. A second copy of a
//! datagram (reinjected, or a real-time datagram sent on two paths) is
//! dropped. Hold-exempt datagrams (real-time flows') go up at once and only
//! fill their place in the order. A datagram the sender sent while no
//! other path had data in flight (flag ALONE) proves every gap before it
//! lost, so a loss on the one busy path of a lightly loaded bond is not
//! held while the idle path says nothing. While copies sent again after a path
//! stalled arrive (older datagrams behind newer ones on the same path), a
//! path's order proves nothing lost: gaps then wait for the hold time after
//! the last copy.
//!
//! The buffer is bounded ([`MAX_HELD`] datagrams, [`MAX_HELD_BYTES`]):
//! past that it gives up its oldest gap. A `gseq` more than [`MAX_AHEAD`]
//! beyond the next expected one (a peer that restarted its count, or a
//! forged header) gives up every gap before it.

use std::collections::{BTreeMap, VecDeque};
use std::time::{Duration, Instant};

use crate::path::{PathId, PathSet};

/// Datagrams the buffer holds at most.
pub const MAX_HELD: usize = 4096;
/// Bytes the buffer holds at most.
pub const MAX_HELD_BYTES: usize = 4 << 20;
/// How far ahead of the next expected datagram one may be before every gap
/// before it is given up.
pub const MAX_AHEAD: u64 = 1 << 16;
/// Datagrams below the next expected one whose arrival is remembered, to
/// tell a second copy from a late first one.
const REMEMBERED: u64 = 4096;
/// The extended count of `gseq` 0.
const FIRST: u64 = 1 << 32;

/// How a datagram takes its place in the order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Order {
    /// Handed up in order (bulk data).
    Held,
    /// Handed up in order, and sent again after its first path stalled:
    /// while such copies arrive, the paths' own order says nothing of what
    /// is lost, and a gap is held until copies stop coming.
    Reinjected,
    /// Handed up at once (a real-time flow's).
    Exempt,
    /// Handed up in order, sent while no other path had data in flight:
    /// every gap before it is a loss.
    Alone,
}

impl Order {
    /// The order a data header asks for.
    pub fn of(repr: &super::wire::DataRepr) -> Order {
        match (repr.hold_exempt, repr.reinjected, repr.alone) {
            (true, _, _) => Order::Exempt,
            (false, true, _) => Order::Reinjected,
            (false, false, true) => Order::Alone,
            (false, false, false) => Order::Held,
        }
    }
}

/// What the buffer has done since it was made.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReorderStats {
    /// Datagrams handed on in order.
    pub in_order: u64,
    /// Datagrams handed on at once as hold-exempt.
    pub exempt: u64,
    /// Gaps given up because every up path had delivered past them.
    pub lost: u64,
    /// Gaps given up after the hold time.
    pub timed_out: u64,
    /// Gaps given up because the buffer was full or a datagram came from
    /// too far ahead.
    pub forced: u64,
    /// Datagrams that arrived after their gap was given up (handed on).
    pub late: u64,
    /// Second copies dropped.
    pub duplicates: u64,
    /// The most datagrams held at once.
    pub held_peak: usize,
}

/// A datagram in the buffer (`None`: a hold-exempt one already handed on,
/// keeping its place in the order).
#[derive(Debug)]
struct Held<T> {
    payload: Option<T>,
    arrived: Instant,
}

/// What the buffer knows of a path.
#[derive(Debug, Clone, Copy)]
struct PathProgress {
    /// The highest `gseq` it delivered (extended to 64 bits).
    highest: u64,
}

/// The reorder buffer of one peer's bonded datagrams.
#[derive(Debug)]
pub struct ReorderBuffer<T> {
    /// The next `gseq` to hand on, extended to 64 bits so that it never
    /// wraps; `gseq` 0 is [`FIRST`], leaving room for a datagram from before
    /// the first.
    next: u64,
    held: BTreeMap<u64, Held<T>>,
    held_bytes: usize,
    /// Arrival bits of the [`REMEMBERED`] datagrams below `next`.
    remembered: [u64; (REMEMBERED / 64) as usize],
    paths: [Option<PathProgress>; 15],
    up: PathSet,
    hold: Duration,
    /// The last reinjected copy's arrival.
    reinjected_at: Option<Instant>,
    ready: VecDeque<T>,
    stats: ReorderStats,
}

impl<T: AsRef<[u8]>> ReorderBuffer<T> {
    /// An empty buffer expecting `gseq` 0 first, holding gaps for `hold`.
    pub fn new(hold: Duration) -> Self {
        ReorderBuffer {
            next: FIRST,
            held: BTreeMap::new(),
            held_bytes: 0,
            remembered: [0; (REMEMBERED / 64) as usize],
            paths: [None; 15],
            up: PathSet::EMPTY,
            hold,
            reinjected_at: None,
            ready: VecDeque::new(),
            stats: ReorderStats::default(),
        }
    }

    /// Sets how long a gap is held.
    pub fn set_hold(&mut self, hold: Duration) {
        self.hold = hold;
    }

    /// The hold time.
    pub fn hold(&self) -> Duration {
        self.hold
    }

    /// Sets the paths that are up: each may still be carrying the missing
    /// datagram until it delivers a later one.
    pub fn set_up(&mut self, now: Instant, up: PathSet) {
        self.up = up;
        self.give_up_lost(now);
    }

    /// What the buffer has done so far.
    pub fn stats(&self) -> ReorderStats {
        self.stats
    }

    /// Datagrams held now.
    pub fn held(&self) -> usize {
        self.held.len()
    }

    /// A datagram that arrived on `path` with the sender's order `gseq`.
    pub fn handle_data(&mut self, now: Instant, path: PathId, gseq: u32, order: Order, payload: T) {
        let g = self.extend(gseq);
        match order {
            Order::Held | Order::Alone => {
                let progress = self.paths[path.index()].get_or_insert(PathProgress { highest: g });
                progress.highest = progress.highest.max(g);
            }
            Order::Reinjected => self.reinjected_at = Some(now),
            // Sent ahead of bulk data queued before it: it says nothing of
            // the path's order.
            Order::Exempt => {}
        }
        if g < self.next {
            if self.next - g <= REMEMBERED && self.was_remembered(g) {
                self.stats.duplicates += 1;
            } else {
                self.stats.late += 1;
                self.remember(g, true);
                self.ready.push_back(payload);
            }
            return;
        }
        if self.held.contains_key(&g) {
            self.stats.duplicates += 1;
            return;
        }
        if g - self.next >= MAX_AHEAD {
            self.give_up_to(g, Reason::Forced);
        } else if order == Order::Alone {
            self.give_up_to(g, Reason::Lost);
        }
        let payload = if order == Order::Exempt {
            self.stats.exempt += 1;
            self.ready.push_back(payload);
            None
        } else {
            self.held_bytes += payload.as_ref().len();
            Some(payload)
        };
        self.held.insert(
            g,
            Held {
                payload,
                arrived: now,
            },
        );
        self.stats.held_peak = self.stats.held_peak.max(self.held.len());
        self.release_in_order();
        self.give_up_lost(now);
        while self.held.len() > MAX_HELD || self.held_bytes > MAX_HELD_BYTES {
            let Some(&first) = self.held.keys().next() else {
                break;
            };
            self.give_up_to(first, Reason::Forced);
        }
    }

    /// Gives up gaps whose hold time has passed.
    pub fn handle_timeout(&mut self, now: Instant) {
        while let Some(&first) = self.held.keys().next() {
            if self.poll_timeout().is_none_or(|due| now < due) {
                break;
            }
            self.give_up_to(first, Reason::TimedOut);
        }
    }

    /// When the oldest gap's hold time ends, if a gap is open: the hold
    /// time after the first datagram past it arrived, or after the last
    /// reinjected copy, whichever is later.
    pub fn poll_timeout(&self) -> Option<Instant> {
        let held = self.held.values().next()?;
        let from = self
            .reinjected_at
            .map_or(held.arrived, |at| at.max(held.arrived));
        Some(from + self.hold)
    }

    /// The next datagram to hand on to QUIC.
    #[must_use]
    pub fn poll_release(&mut self) -> Option<T> {
        self.ready.pop_front()
    }

    /// `gseq` as the 64-bit count nearest the next expected one.
    fn extend(&self, gseq: u32) -> u64 {
        let delta = i64::from(gseq.wrapping_sub(self.next as u32) as i32);
        self.next.saturating_add_signed(delta)
    }

    /// Hands on the held datagrams from `next` up to the first gap.
    fn release_in_order(&mut self) {
        while let Some(held) = self.held.remove(&self.next) {
            if let Some(payload) = held.payload {
                self.held_bytes -= payload.as_ref().len();
                self.stats.in_order += 1;
                self.ready.push_back(payload);
            }
            self.remember(self.next, true);
            self.next += 1;
        }
    }

    /// Gives up every gap before `to`, then hands on what follows in order.
    fn give_up_to(&mut self, to: u64, reason: Reason) {
        while self.next < to {
            if let Some(held) = self.held.remove(&self.next) {
                if let Some(payload) = held.payload {
                    self.held_bytes -= payload.as_ref().len();
                    self.stats.in_order += 1;
                    self.ready.push_back(payload);
                }
                self.remember(self.next, true);
                self.next += 1;
                continue;
            }
            // A gap: skip to the next held datagram, or to `to`.
            let end = self.held.keys().next().copied().unwrap_or(to).min(to);
            let gaps = end - self.next;
            match reason {
                Reason::Lost => self.stats.lost += gaps,
                Reason::TimedOut => self.stats.timed_out += gaps,
                Reason::Forced => self.stats.forced += gaps,
            }
            if gaps >= REMEMBERED {
                self.remembered = [0; (REMEMBERED / 64) as usize];
                self.next = end;
            } else {
                while self.next < end {
                    self.remember(self.next, false);
                    self.next += 1;
                }
            }
        }
        self.release_in_order();
    }

    /// Gives up the gaps every up path has delivered past (the buffer
    /// checks at each arrival and change of paths).
    fn give_up_lost(&mut self, now: Instant) {
        if self.held.is_empty() || self.up.is_empty() {
            return;
        }
        if self.reinjected_at.is_some_and(|at| now < at + self.hold) {
            // Copies of older datagrams are on their way behind newer ones.
            return;
        }
        let mut past = u64::MAX;
        for path in self.up.iter() {
            match self.paths[path.index()] {
                Some(progress) => past = past.min(progress.highest),
                None => return,
            }
        }
        // Every up path delivered `past` or later: everything before it is
        // lost (or the last datagram of a path, which its next delivery
        // proves).
        if past > self.next {
            self.give_up_to(past, Reason::Lost);
        }
    }

    fn remember(&mut self, g: u64, arrived: bool) {
        let (word, bit) = ((g % REMEMBERED / 64) as usize, g % 64);
        if arrived {
            self.remembered[word] |= 1 << bit;
        } else {
            self.remembered[word] &= !(1 << bit);
        }
    }

    fn was_remembered(&self, g: u64) -> bool {
        let (word, bit) = ((g % REMEMBERED / 64) as usize, g % 64);
        self.remembered[word] & (1 << bit) != 0
    }
}

#[derive(Debug, Clone, Copy)]
enum Reason {
    Lost,
    TimedOut,
    Forced,
}

#[cfg(test)]
mod tests;
