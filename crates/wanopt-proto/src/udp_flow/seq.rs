//! The receiver's count of a UDP flow's datagram numbers: how many
//! arrived, how many did not, and how many came out of order or twice.
//!
//! Numbers are 32 bits and wrap; they are extended to 64 as RTP extends
//! its sequence numbers (RFC 3550 appendix A.1): a number is taken as the
//! one nearest the highest seen. A number more than [`SEQ_WINDOW`] below
//! the highest cannot be told from a copy: it is taken as new and counted
//! `stale` too. QUIC never delivers a DATAGRAM frame twice, so a late
//! datagram (one FEC rebuilt behind a fast flow) is one the application
//! wants, not a copy.

/// How far below the highest number an arrival is still told apart as
/// late or repeated (64 datagrams: 6 ms of a 100 Mbit/s flow).
pub const SEQ_WINDOW: u64 = 64;

/// A flow's arrivals so far.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SeqStats {
    /// Distinct datagrams received.
    pub received: u64,
    /// Numbers from the first to the highest seen that have not arrived.
    pub lost: u64,
    /// Datagrams that arrived after a higher-numbered one.
    pub reordered: u64,
    /// Datagrams that arrived again.
    pub duplicates: u64,
    /// Datagrams too far below the highest to be told from copies, taken
    /// as new (and counted in `received` and `reordered` too).
    pub stale: u64,
}

/// Counts one direction of a flow's datagram numbers.
#[derive(Debug, Clone, Default)]
pub struct SeqCounter {
    /// The first and the highest extended numbers seen.
    span: Option<(i64, i64)>,
    /// Bit `i`: number `highest - i` arrived.
    window: u64,
    stats: SeqStats,
}

impl SeqCounter {
    /// A counter that has seen nothing.
    pub fn new() -> Self {
        Self::default()
    }

    /// Counts datagram `seq`; returns whether it is new (not a copy seen
    /// within the window).
    pub fn record(&mut self, seq: u32) -> bool {
        let Some((first, highest)) = self.span else {
            self.span = Some((i64::from(seq), i64::from(seq)));
            self.window = 1;
            self.stats.received = 1;
            return true;
        };
        let delta = i64::from(seq.wrapping_sub(highest as u32) as i32);
        let seq = highest + delta;
        if delta > 0 {
            self.window = if delta >= 64 { 0 } else { self.window << delta };
            self.window |= 1;
            self.span = Some((first, seq));
            self.stats.received += 1;
            return true;
        }
        let back = -delta;
        if back as u64 >= SEQ_WINDOW {
            self.stats.stale += 1;
        } else {
            let bit = 1u64 << back;
            if self.window & bit != 0 {
                self.stats.duplicates += 1;
                return false;
            }
            self.window |= bit;
        }
        self.span = Some((first.min(seq), highest));
        self.stats.received += 1;
        self.stats.reordered += 1;
        true
    }

    /// The counts so far.
    pub fn stats(&self) -> SeqStats {
        let expected = self
            .span
            .map_or(0, |(first, highest)| (highest - first + 1) as u64);
        SeqStats {
            lost: expected.saturating_sub(self.stats.received),
            ..self.stats
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use proptest::prelude::*;

    use super::*;

    #[test]
    fn counts_loss_reordering_and_copies() {
        let mut c = SeqCounter::new();
        for seq in [0, 1, 3, 2, 2, 6] {
            c.record(seq);
        }
        assert_eq!(
            c.stats(),
            SeqStats {
                received: 5,
                lost: 2,
                reordered: 1,
                duplicates: 1,
                stale: 0
            }
        );
        // 4 arrives late: no longer lost.
        assert!(c.record(4));
        assert_eq!(c.stats().lost, 1);
        // Far ahead, then far behind: late, but delivered and no longer
        // lost.
        c.record(200);
        let lost = c.stats().lost;
        assert!(c.record(5));
        assert_eq!((c.stats().stale, c.stats().lost), (1, lost - 1));
    }

    #[test]
    fn numbers_wrap() {
        let mut c = SeqCounter::new();
        for seq in [u32::MAX - 1, u32::MAX, 1, 0, 2] {
            assert!(c.record(seq));
        }
        let stats = c.stats();
        assert_eq!((stats.received, stats.lost, stats.reordered), (5, 0, 1));
    }

    proptest! {
        /// Against a naive model: a set of extended numbers, the same
        /// window rule.
        #[test]
        fn matches_a_set_of_numbers(
            base: u32,
            steps in proptest::collection::vec(-70i64..70, 1..300),
        ) {
            let mut c = SeqCounter::new();
            let mut seen = HashSet::new();
            let (mut received, mut dups, mut stale, mut reordered) = (0u64, 0u64, 0u64, 0u64);
            let mut cursor = 0i64;
            let (mut first, mut highest) = (i64::MAX, i64::MIN);
            for step in steps {
                cursor += step;
                let seq = base.wrapping_add(cursor as u32);
                let new = c.record(seq);
                let is_stale = highest != i64::MIN && cursor <= highest - SEQ_WINDOW as i64;
                if is_stale {
                    stale += 1;
                }
                if !is_stale && !seen.insert(cursor) {
                    dups += 1;
                    prop_assert!(!new);
                } else {
                    if highest != i64::MIN && cursor < highest {
                        reordered += 1;
                    }
                    received += 1;
                    first = first.min(cursor);
                    highest = highest.max(cursor);
                    prop_assert!(new);
                }
            }
            let stats = c.stats();
            prop_assert_eq!(stats.received, received);
            prop_assert_eq!(stats.duplicates, dups);
            prop_assert_eq!(stats.stale, stale);
            prop_assert_eq!(stats.reordered, reordered);
            prop_assert_eq!(stats.lost, ((highest - first + 1) as u64).saturating_sub(received));
        }
    }
}
