//! Delivery rate estimation (draft-cheng-iccrg-delivery-rate-estimation-02,
//! the algorithm of Linux `net/ipv4/tcp_rate.c`).
//!
//! Each send is stamped with the connection's delivery state at that moment
//! (bytes delivered so far and when, and when the current flight began). When
//! a packet is acknowledged, the bytes delivered since it was sent, over the
//! longer of its send interval and its ack interval, is a sample of the
//! delivery rate that neither ack compression nor a burst of sends inflates.
//!
//! quinn's controller interface reports sends per datagram batch and acks per
//! packet with the packet's send time, so records are kept per send time.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

/// The connection's delivery state when a batch of packets was sent (§3.2).
#[derive(Clone, Copy, Debug)]
struct SendRecord {
    /// When the batch was sent.
    sent: Instant,
    /// Bytes delivered (acknowledged) before the batch was sent.
    delivered: u64,
    /// When `delivered` last grew, as of the send.
    delivered_time: Instant,
    /// Send time of the packet acknowledged last before the send (the start
    /// of the flight the batch belongs to).
    first_sent_time: Instant,
    /// Whether the application (not the network) limited sending then.
    app_limited: bool,
}

/// One delivery rate sample, produced per batch of acknowledgements.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct RateSample {
    /// Bytes delivered over `interval`.
    pub delivered: u64,
    /// The sample's interval: the longer of send and ack intervals.
    pub interval: Duration,
    /// Bytes delivered before the acknowledged packet was sent (for round
    /// counting).
    pub prior_delivered: u64,
    /// The sample was taken while the application limited sending: it may
    /// under-estimate the path's rate.
    pub app_limited: bool,
}

impl RateSample {
    /// Bytes per second.
    pub(crate) fn rate(&self) -> u64 {
        let nanos = self.interval.as_nanos().max(1);
        (u128::from(self.delivered) * 1_000_000_000 / nanos).min(u128::from(u64::MAX)) as u64
    }
}

/// The sample being assembled from one batch of acknowledgements.
#[derive(Clone, Copy, Debug)]
struct Pending {
    prior_delivered: u64,
    send_elapsed: Duration,
    ack_elapsed: Duration,
    app_limited: bool,
}

/// Send records older than this are dropped (their acks give no sample).
const MAX_RECORD_AGE: Duration = Duration::from_secs(4);
/// Bound on kept records, whatever the age (about 20 s of 250 Mbit/s sent in
/// batches of ten datagrams).
const MAX_RECORDS: usize = 1 << 19;

/// The delivery rate sampler of one connection.
#[derive(Clone, Debug)]
pub(crate) struct RateSampler {
    records: VecDeque<SendRecord>,
    /// Bytes delivered so far (C.delivered).
    delivered: u64,
    /// When `delivered` last grew (C.delivered_time).
    delivered_time: Option<Instant>,
    /// Send time of the most recently acknowledged packet (C.first_sent_time).
    first_sent_time: Option<Instant>,
    /// Non-zero while app-limited: the `delivered` count after which samples
    /// are no longer app-limited (C.app_limited, §3.4).
    app_limited_until: u64,
    /// Bytes in flight as last known (quinn's count after each ack batch,
    /// plus sends, minus losses since).
    in_flight: u64,
    pending: Option<Pending>,
}

impl RateSampler {
    pub(crate) fn new() -> Self {
        Self {
            records: VecDeque::new(),
            delivered: 0,
            delivered_time: None,
            first_sent_time: None,
            app_limited_until: 0,
            in_flight: 0,
            pending: None,
        }
    }

    /// Bytes delivered since the connection began.
    pub(crate) fn delivered(&self) -> u64 {
        self.delivered
    }

    /// Bytes in flight as last known.
    pub(crate) fn in_flight(&self) -> u64 {
        self.in_flight
    }

    /// A batch of `bytes` was sent at `now` (§3.2 "upon sending").
    pub(crate) fn on_sent(&mut self, now: Instant, bytes: u64) {
        if self.in_flight == 0 || self.delivered_time.is_none() {
            // A new flight starts: intervals must not span the idle time.
            self.first_sent_time = Some(now);
            self.delivered_time = Some(now);
        }
        self.in_flight = self.in_flight.saturating_add(bytes);
        let record = SendRecord {
            sent: now,
            delivered: self.delivered,
            delivered_time: self.delivered_time.unwrap_or(now),
            first_sent_time: self.first_sent_time.unwrap_or(now),
            app_limited: self.app_limited_until != 0,
        };
        match self.records.back_mut() {
            // Several calls at one instant belong to one batch: keep the first.
            Some(last) if last.sent == now => {}
            _ => self.records.push_back(record),
        }
        while self.records.len() > MAX_RECORDS
            || self
                .records
                .front()
                .is_some_and(|r| now.saturating_duration_since(r.sent) > MAX_RECORD_AGE)
        {
            self.records.pop_front();
        }
    }

    /// A packet of `bytes` sent at `sent` was acknowledged at `now` (§3.3
    /// "upon receiving an ACK", per packet).
    pub(crate) fn on_ack(&mut self, now: Instant, sent: Instant, bytes: u64) {
        self.delivered = self.delivered.saturating_add(bytes);
        self.delivered_time = Some(now);
        if self.app_limited_until != 0 && self.delivered > self.app_limited_until {
            self.app_limited_until = 0;
        }
        // The record of the batch the packet was sent in.
        let index = self.records.partition_point(|r| r.sent <= sent);
        let Some(record) = index
            .checked_sub(1)
            .and_then(|i| self.records.get(i))
            .copied()
        else {
            return;
        };
        if record.sent != sent {
            return;
        }
        let newer = self
            .pending
            .is_none_or(|p| record.delivered >= p.prior_delivered);
        if newer {
            self.pending = Some(Pending {
                prior_delivered: record.delivered,
                send_elapsed: sent.saturating_duration_since(record.first_sent_time),
                ack_elapsed: now.saturating_duration_since(record.delivered_time),
                app_limited: record.app_limited,
            });
            self.first_sent_time = Some(sent);
        }
    }

    /// `bytes` sent earlier were declared lost.
    pub(crate) fn on_lost(&mut self, bytes: u64) {
        self.in_flight = self.in_flight.saturating_sub(bytes);
    }

    /// The batch of acknowledgements ended with `in_flight` bytes still in
    /// flight; `app_limited` is whether the sender had nothing to send.
    /// Returns the batch's sample, if it made one (§3.3 "generate a rate
    /// sample"): samples over an interval shorter than `min_rtt` are
    /// discarded, as Linux does, because ack compression makes them
    /// over-estimates.
    pub(crate) fn on_end_acks(
        &mut self,
        in_flight: u64,
        app_limited: bool,
        min_rtt: Option<Duration>,
    ) -> Option<RateSample> {
        self.in_flight = in_flight;
        if app_limited {
            // §3.4: mark the bubble; samples stay app-limited until it is
            // delivered.
            self.app_limited_until = (self.delivered + in_flight).max(1);
        }
        let pending = self.pending.take()?;
        let interval = pending.send_elapsed.max(pending.ack_elapsed);
        if interval.is_zero() || min_rtt.is_some_and(|m| interval < m) {
            return None;
        }
        Some(RateSample {
            delivered: self.delivered - pending.prior_delivered,
            interval,
            prior_delivered: pending.prior_delivered,
            app_limited: pending.app_limited,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    /// A paced sender at 10 packets of 1000 bytes per 10 ms over a 100 ms
    /// path: the samples measure 1 MB/s whatever the ack pattern.
    #[test]
    fn samples_the_sending_rate_of_a_full_pipe() {
        let t0 = Instant::now();
        let mut sampler = RateSampler::new();
        let mut sends = Vec::new();
        let mut samples = Vec::new();
        // Send one 1000-byte packet every millisecond for 1 s; each is acked
        // 100 ms later, acks processed in batches of 5 (ack aggregation).
        for tick in 0..1100u64 {
            let now = t0 + ms(tick);
            if tick < 1000 {
                sampler.on_sent(now, 1000);
                sends.push(now);
            }
            if tick >= 100 && (tick - 100) % 5 == 4 {
                let first = tick - 100 - 4;
                for sent_tick in first..=tick - 100 {
                    if let Some(sent) = sends.get(sent_tick as usize) {
                        sampler.on_ack(now, *sent, 1000);
                    }
                }
                let in_flight = 1000 * (sends.len() as u64) - sampler.delivered();
                if let Some(s) = sampler.on_end_acks(in_flight, false, Some(ms(100))) {
                    samples.push(s);
                }
            }
        }
        assert!(samples.len() > 100, "{} samples", samples.len());
        // Samples of packets sent before the first ack (the first 104 ms)
        // span the start of the connection; the rest measure the pipe.
        for s in &samples[25..] {
            let rate = s.rate();
            assert!(
                (950_000..=1_060_000).contains(&rate),
                "sample {rate} B/s over {:?}",
                s.interval
            );
        }
    }

    #[test]
    fn marks_samples_after_an_idle_sender_app_limited() {
        let t0 = Instant::now();
        let mut sampler = RateSampler::new();
        sampler.on_sent(t0, 1000);
        sampler.on_ack(t0 + ms(100), t0, 1000);
        // Nothing more to send: app-limited.
        assert!(sampler
            .on_end_acks(0, true, None)
            .is_some_and(|s| !s.app_limited));
        let t1 = t0 + ms(500);
        sampler.on_sent(t1, 1000);
        sampler.on_ack(t1 + ms(100), t1, 1000);
        let sample = sampler.on_end_acks(0, false, None);
        assert!(sample.is_some_and(|s| s.app_limited), "{sample:?}");
        // The interval starts at the new flight, not before the idle time.
        assert!(sample.is_some_and(|s| s.interval == ms(100)), "{sample:?}");
    }

    #[test]
    fn an_ack_for_an_unknown_send_makes_no_sample() {
        let t0 = Instant::now();
        let mut sampler = RateSampler::new();
        sampler.on_sent(t0, 1000);
        sampler.on_ack(t0 + ms(100), t0 + ms(1), 1000);
        assert_eq!(sampler.on_end_acks(0, false, None), None);
        assert_eq!(sampler.delivered(), 1000, "delivered still counts");
    }
}
