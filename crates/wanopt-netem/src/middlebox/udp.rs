//! The UDP rules: `block-udp` and `police-udp RATE`, a token bucket per
//! rule (and so per direction: each direction has its own middlebox).
//!
//! The policer is the single-rate, two-colour kind of RFC 2697 section 3
//! with only its committed bucket: tokens accrue at the rate up to the
//! bucket's depth, a datagram that finds as many tokens as its IP bytes
//! takes them and passes, any other is dropped (a policer never queues).

use std::time::Instant;

use crate::middlebox::{Action, Protocol, Rule, Segment};
use crate::units::BitsPerSecond;

/// How long a default `police-udp` bucket lets the rate run unchecked.
pub const DEFAULT_BURST_TIME_MS: u64 = 50;
/// The smallest default `police-udp` bucket, in bytes: two full-size
/// datagrams, so a slow policer still passes a 1500-byte packet.
pub const MIN_DEFAULT_BURST_BYTES: u64 = 3000;

/// The default bucket depth of `police-udp rate`: what the rate sends in
/// [`DEFAULT_BURST_TIME_MS`], at least [`MIN_DEFAULT_BURST_BYTES`].
pub fn default_burst_bytes(rate: BitsPerSecond) -> u64 {
    (rate.0 / 8 / 1000 * DEFAULT_BURST_TIME_MS).max(MIN_DEFAULT_BURST_BYTES)
}

/// Nanobits (bits times 10^9) per byte: the bucket's unit, in which a rate
/// in bits per second times nanoseconds is exact.
const NANOBITS_PER_BYTE: u128 = 8 * 1_000_000_000;

/// A token bucket of one `police-udp` rule.
#[derive(Debug, Clone)]
pub(super) struct TokenBucket {
    rate: BitsPerSecond,
    /// Depth, nanobits.
    depth: u128,
    /// Tokens held, nanobits.
    tokens: u128,
    /// When the tokens were last topped up; none before the first datagram
    /// (the bucket starts full).
    last: Option<Instant>,
}

impl TokenBucket {
    pub(super) fn new(rate: BitsPerSecond, burst_bytes: u64) -> TokenBucket {
        let depth = u128::from(burst_bytes) * NANOBITS_PER_BYTE;
        TokenBucket {
            rate,
            depth,
            tokens: depth,
            last: None,
        }
    }

    /// Whether a datagram of `bytes` IP bytes arriving at `now` conforms
    /// (and then takes its tokens). A clock that goes back adds nothing.
    pub(super) fn conforms(&mut self, now: Instant, bytes: u64) -> bool {
        if let Some(last) = self.last {
            let elapsed = now.saturating_duration_since(last).as_nanos();
            let earned = elapsed.saturating_mul(u128::from(self.rate.0));
            self.tokens = self.tokens.saturating_add(earned).min(self.depth);
        }
        self.last = Some(self.last.map_or(now, |last| last.max(now)));
        let cost = u128::from(bytes) * NANOBITS_PER_BYTE;
        if self.tokens >= cost {
            self.tokens -= cost;
            true
        } else {
            false
        }
    }
}

/// The buckets of `rules`, by rule: one for each rule with a `police-udp`
/// action (its first), none for the others.
pub(super) fn buckets(rules: &[Rule]) -> Vec<Option<TokenBucket>> {
    rules
        .iter()
        .map(|rule| {
            rule.actions.iter().find_map(|action| match *action {
                Action::PoliceUdp { rate, burst_bytes } => {
                    Some(TokenBucket::new(rate, burst_bytes))
                }
                _ => None,
            })
        })
        .collect()
}

/// What the UDP rules did with a datagram.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum UdpVerdict {
    /// No UDP rule matched, or its bucket had the tokens.
    Pass,
    /// A `block-udp` rule matched.
    Blocked,
    /// A `police-udp` rule matched and its bucket was short.
    Policed,
}

/// Applies the first UDP rule of `rules` that accepts `fields` to a
/// datagram of `bytes` IP bytes arriving at `now`; `buckets` are those of
/// [`buckets`] for the same rules.
pub(super) fn judge(
    rules: &[Rule],
    buckets: &mut [Option<TokenBucket>],
    now: Instant,
    fields: &Segment,
    bytes: u64,
) -> UdpVerdict {
    let Some(index) = rules
        .iter()
        .position(|rule| rule.protocol() == Protocol::Udp && rule.matches.accepts(fields))
    else {
        return UdpVerdict::Pass;
    };
    if rules[index].actions.contains(&Action::BlockUdp) {
        return UdpVerdict::Blocked;
    }
    let conforms = buckets
        .get_mut(index)
        .and_then(Option::as_mut)
        .is_none_or(|bucket| bucket.conforms(now, bytes));
    if conforms {
        UdpVerdict::Pass
    } else {
        UdpVerdict::Policed
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn the_default_burst_is_fifty_milliseconds_of_the_rate_or_two_packets() {
        assert_eq!(default_burst_bytes(BitsPerSecond(2_000_000)), 12_500);
        assert_eq!(default_burst_bytes(BitsPerSecond(100_000)), 3000);
        assert_eq!(default_burst_bytes(BitsPerSecond(1_000_000_000)), 6_250_000);
    }

    /// A full bucket passes its depth at once, then the rate: a datagram
    /// every 8 ms at 1 Mbit/s for 1000-byte datagrams.
    #[test]
    fn the_bucket_passes_its_depth_then_the_rate() {
        let mut bucket = TokenBucket::new(BitsPerSecond(1_000_000), 3000);
        let t0 = Instant::now();
        let passed = (0..5).filter(|_| bucket.conforms(t0, 1000)).count();
        assert_eq!(passed, 3);
        assert!(!bucket.conforms(t0 + Duration::from_micros(7_999), 1000));
        assert!(bucket.conforms(t0 + Duration::from_millis(8), 1000));
        // A clock that goes back earns nothing.
        assert!(!bucket.conforms(t0, 1000));
        // A long idle time fills the bucket only to its depth.
        let later = t0 + Duration::from_secs(3600);
        assert_eq!((0..5).filter(|_| bucket.conforms(later, 1000)).count(), 3);
    }
}
