//! A receive-window budget shared by connections (wanopt addition).

use std::sync::atomic::{AtomicU64, Ordering};

use crate::VarInt;

/// Stream receive-window autotuning: streams start with a small window
/// that grows as the application reads, and the connection's window
/// follows the open streams' windows, so a stream the application does
/// not read holds only its own window and never the connection's.
///
/// The windows counted this way are taken from a [`ReceiveBudget`], which
/// may be shared by every connection of an endpoint (a node-wide bound on
/// the bytes peers may have sent and the application not yet read). A
/// stream opened while the budget is spent is not counted: it shares the
/// connection's base window (`receive_window`) and does not grow.
#[derive(Debug, Clone)]
pub struct WindowAutotune {
    pub(crate) initial: VarInt,
    pub(crate) budget: std::sync::Arc<ReceiveBudget>,
}

impl WindowAutotune {
    /// Streams start at `initial` bytes (the `initial_max_stream_data`
    /// transport parameters) and grow up to the transport's
    /// `stream_receive_window`, within `budget`.
    pub fn new(initial: VarInt, budget: std::sync::Arc<ReceiveBudget>) -> Self {
        Self { initial, budget }
    }
}

/// Bytes of stream receive window that may be granted at once, shared by
/// the connections whose transport configuration holds it.
#[derive(Debug)]
pub struct ReceiveBudget {
    limit: u64,
    granted: AtomicU64,
}

impl ReceiveBudget {
    /// A budget of `limit` bytes.
    pub fn new(limit: u64) -> Self {
        Self {
            limit,
            granted: AtomicU64::new(0),
        }
    }

    /// The budget's size.
    pub fn limit(&self) -> u64 {
        self.limit
    }

    /// Bytes of window currently granted from the budget.
    pub fn granted(&self) -> u64 {
        self.granted.load(Ordering::Relaxed)
    }

    /// Takes `want` bytes if all of them are free.
    pub(crate) fn take_exact(&self, want: u64) -> bool {
        self.granted
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |g| {
                let next = g.checked_add(want)?;
                (next <= self.limit).then_some(next)
            })
            .is_ok()
    }

    /// Takes up to `want` bytes; returns how many.
    pub(crate) fn take_up_to(&self, want: u64) -> u64 {
        let mut taken = 0;
        let _ = self
            .granted
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |g| {
                taken = want.min(self.limit.saturating_sub(g));
                (taken > 0).then_some(g + taken)
            });
        taken
    }

    /// Gives `n` bytes back.
    pub(crate) fn release(&self, n: u64) {
        let _ = self
            .granted
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |g| {
                Some(g.saturating_sub(n))
            });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn budget_takes_and_releases_within_its_limit() {
        let b = ReceiveBudget::new(10);
        assert!(b.take_exact(6));
        assert!(!b.take_exact(5));
        assert_eq!(b.take_up_to(9), 4);
        assert_eq!(b.take_up_to(1), 0);
        assert_eq!(b.granted(), 10);
        b.release(7);
        assert_eq!(b.granted(), 3);
        b.release(100);
        assert_eq!(b.granted(), 0);
    }
}
