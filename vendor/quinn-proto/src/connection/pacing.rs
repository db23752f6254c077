//! Pacing of packet transmissions.

use crate::{Duration, Instant};

use tracing::warn;

/// A simple token-bucket pacer
///
/// The pacer's capacity is derived on a fraction of the congestion window
/// which can be sent in regular intervals
/// Once the bucket is empty, further transmission is blocked.
/// The bucket refills at a rate slightly faster
/// than one congestion window per RTT, as recommended in
/// <https://tools.ietf.org/html/draft-ietf-quic-recovery-34#section-7.7>
pub(super) struct Pacer {
    capacity: u64,
    last_window: u64,
    last_mtu: u16,
    tokens: u64,
    prev: Instant,
    /// Rate pacing (wanopt patch): the sender went idle (nothing in flight,
    /// nothing to send) since it last waited on the pacer.
    idle: bool,
    /// Rate pacing (wanopt patch): the sender went idle since it last
    /// sent; its next packet starts from one full burst, whatever was
    /// banked before.
    rebank: bool,
}

impl Pacer {
    /// Obtains a new [`Pacer`].
    pub(super) fn new(smoothed_rtt: Duration, window: u64, mtu: u16, now: Instant) -> Self {
        let capacity = optimal_capacity(smoothed_rtt, window, mtu);
        Self {
            capacity,
            last_window: window,
            last_mtu: mtu,
            tokens: capacity,
            prev: now,
            idle: false,
            rebank: false,
        }
    }

    /// Record that a packet has been transmitted.
    pub(super) fn on_transmit(&mut self, packet_length: u16) {
        self.tokens = self.tokens.saturating_sub(packet_length.into())
    }

    /// Return how long we need to wait before sending `bytes_to_send`
    ///
    /// If we can send a packet right away, this returns `None`. Otherwise, returns `Some(d)`,
    /// where `d` is the time before this function should be called again.
    ///
    /// The 5/4 ratio used here comes from the suggestion that N = 1.25 in the draft IETF RFC for
    /// QUIC.
    pub(super) fn delay(
        &mut self,
        smoothed_rtt: Duration,
        bytes_to_send: u64,
        mtu: u16,
        window: u64,
        now: Instant,
    ) -> Option<Instant> {
        debug_assert_ne!(
            window, 0,
            "zero-sized congestion control window is nonsense"
        );

        if window != self.last_window || mtu != self.last_mtu {
            self.capacity = optimal_capacity(smoothed_rtt, window, mtu);

            // Clamp the tokens
            self.tokens = self.capacity.min(self.tokens);
            self.last_window = window;
            self.last_mtu = mtu;
        }

        // if we can already send a packet, there is no need for delay
        if self.tokens >= bytes_to_send {
            return None;
        }

        // we disable pacing for extremely large windows
        if window > u64::from(u32::MAX) {
            return None;
        }

        let window = window as u32;

        let time_elapsed = now.checked_duration_since(self.prev).unwrap_or_else(|| {
            warn!("received a timestamp early than a previous recorded time, ignoring");
            Default::default()
        });

        if smoothed_rtt.as_nanos() == 0 {
            return None;
        }

        let elapsed_rtts = time_elapsed.as_secs_f64() / smoothed_rtt.as_secs_f64();
        let new_tokens = window as f64 * 1.25 * elapsed_rtts;
        self.tokens = self
            .tokens
            .saturating_add(new_tokens as _)
            .min(self.capacity);

        self.prev = now;

        // if we can already send a packet, there is no need for delay
        if self.tokens >= bytes_to_send {
            return None;
        }

        let unscaled_delay = smoothed_rtt
            .checked_mul((bytes_to_send.max(self.capacity) - self.tokens) as _)
            .unwrap_or(Duration::MAX)
            / window;

        // divisions come before multiplications to prevent overflow
        // this is the time at which the pacing window becomes empty
        Some(self.prev + (unscaled_delay / 5) * 4)
    }

    /// The congestion window, not the pacer, holds the sender back at
    /// `now`: of the time it stays held, no more than one burst
    /// (`RATE_BURST_NANOS`) earns tokens (wanopt patch). Banked time is for
    /// a sender that fell behind its rate (a late timer, a busy CPU, acks
    /// that came late and together); a long window-limited spell (BBR's
    /// ProbeRTT, a window bounded to a moving bottleneck's queue) is not,
    /// and a round trip's worth of tokens banked through it went out as one
    /// burst when the window opened.
    pub(super) fn window_blocked(&mut self, now: Instant) {
        if let Some(start) = now.checked_sub(Duration::from_nanos(RATE_BURST_NANOS as u64)) {
            self.prev = self.prev.max(start);
        }
    }

    /// The sender went idle: nothing in flight and nothing to send. Rate
    /// pacing banks no more than one burst until it paces again (wanopt
    /// patch).
    pub(super) fn stop_banking(&mut self) {
        self.idle = true;
        self.rebank = true;
    }

    /// Pacing at a rate set by the congestion controller, in bytes per second
    /// (wanopt patch).
    ///
    /// Tokens accrue at `rate` and the sender is woken when 2 ms worth are
    /// available. Unused tokens are kept for up to one smoothed RTT (at least
    /// `RATE_BURST_NANOS`, and no more than that after the sender went idle):
    /// a sender that fell behind (a late timer, data that reached it late
    /// because the CPU was busy) catches up with a burst instead of losing
    /// the time, so that it holds the controller's rate on average. The burst
    /// is bounded by the congestion window as always. (On the two-core lab
    /// machine the tunnel's sender missed 10-50% of a round's sending time
    /// now and then. Banking only late timer wake-ups, or a quarter RTT, left
    /// 100 ms paths at 213-223 Mbit/s of 250; banking one RTT reached
    /// 230-235.)
    pub(super) fn delay_at_rate(
        &mut self,
        rate: u64,
        smoothed_rtt: Duration,
        bytes_to_send: u64,
        mtu: u16,
        now: Instant,
    ) -> Option<Instant> {
        let horizon = if self.idle {
            RATE_BURST_NANOS
        } else {
            smoothed_rtt.as_nanos().max(RATE_BURST_NANOS)
        };
        let capacity = ((rate as u128 * horizon) / 1_000_000_000).min(u64::MAX as u128) as u64;
        // Banked tokens are spent before the next refill, which caps them.
        self.capacity = capacity.max(MIN_BURST_SIZE * mtu as u64);
        if self.rebank {
            // What was banked before the sender went idle (a round trip's
            // worth while its window held it back) is not a burst to send
            // into a path that has drained since: one burst, from now.
            self.rebank = false;
            self.tokens = self.capacity;
            self.prev = now;
        }
        // Window pacing recomputes its capacity on its next call.
        self.last_window = 0;
        self.last_mtu = mtu;

        if self.tokens >= bytes_to_send {
            return None;
        }
        let elapsed = now.checked_duration_since(self.prev).unwrap_or_default();
        let new_tokens = (rate as u128 * elapsed.as_nanos()) / 1_000_000_000;
        self.tokens = self
            .tokens
            .saturating_add(new_tokens.min(u64::MAX as u128) as u64)
            .min(self.capacity);
        self.prev = now;
        if self.tokens >= bytes_to_send {
            return None;
        }
        self.idle = false;
        let wake = ((rate as u128 * RATE_WAKE_NANOS) / 1_000_000_000) as u64;
        let want = bytes_to_send.max(wake.min(self.capacity));
        let missing = want.saturating_sub(self.tokens) as u128;
        let nanos = (missing * 1_000_000_000).div_ceil(rate.max(1) as u128);
        Some(self.prev + Duration::from_nanos(nanos.min(u64::MAX as u128) as u64))
    }
}

/// Calculates a pacer capacity for a certain window and RTT
///
/// The goal is to emit a burst (of size `capacity`) in timer intervals
/// which compromise between
/// - ideally distributing datagrams over time
/// - constantly waking up the connection to produce additional datagrams
///
/// Too short burst intervals means we will never meet them since the timer
/// accuracy in user-space is not high enough. If we miss the interval by more
/// than 25%, we will lose that part of the congestion window since no additional
/// tokens for the extra-elapsed time can be stored.
///
/// Too long burst intervals make pacing less effective.
fn optimal_capacity(smoothed_rtt: Duration, window: u64, mtu: u16) -> u64 {
    let rtt = smoothed_rtt.as_nanos().max(1);

    let capacity = ((window as u128 * BURST_INTERVAL_NANOS) / rtt) as u64;

    // Small bursts are less efficient (no GSO), could increase latency and don't effectively
    // use the channel's buffer capacity. Large bursts might block the connection on sending.
    capacity.clamp(MIN_BURST_SIZE * mtu as u64, MAX_BURST_SIZE * mtu as u64)
}

/// The burst interval
///
/// The capacity will we refilled in 4/5 of that time.
/// 2ms is chosen here since framework timers might have 1ms precision.
/// If kernel-level pacing is supported later a higher time here might be
/// more applicable.
const BURST_INTERVAL_NANOS: u128 = 2_000_000; // 2ms

/// The shortest catch-up horizon of rate pacing (wanopt patch).
const RATE_BURST_NANOS: u128 = 16_000_000; // 16ms

/// Rate pacing wakes the sender when this much sending time is available
/// (wanopt patch): as the window pacer's 2 ms burst interval.
const RATE_WAKE_NANOS: u128 = 2_000_000; // 2ms

/// Allows some usage of GSO, and doesn't slow down the handshake.
const MIN_BURST_SIZE: u64 = 10;

/// Creating 256 packets took 1ms in a benchmark, so larger bursts don't make sense.
const MAX_BURST_SIZE: u64 = 256;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn does_not_panic_on_bad_instant() {
        let old_instant = Instant::now();
        let new_instant = old_instant + Duration::from_micros(15);
        let rtt = Duration::from_micros(400);

        assert!(
            Pacer::new(rtt, 30000, 1500, new_instant)
                .delay(Duration::from_micros(0), 0, 1500, 1, old_instant)
                .is_none()
        );
        assert!(
            Pacer::new(rtt, 30000, 1500, new_instant)
                .delay(Duration::from_micros(0), 1600, 1500, 1, old_instant)
                .is_none()
        );
        assert!(
            Pacer::new(rtt, 30000, 1500, new_instant)
                .delay(Duration::from_micros(0), 1500, 1500, 3000, old_instant)
                .is_none()
        );
    }

    #[test]
    fn derives_initial_capacity() {
        let window = 2_000_000;
        let mtu = 1500;
        let rtt = Duration::from_millis(50);
        let now = Instant::now();

        let pacer = Pacer::new(rtt, window, mtu, now);
        assert_eq!(
            pacer.capacity,
            (window as u128 * BURST_INTERVAL_NANOS / rtt.as_nanos()) as u64
        );
        assert_eq!(pacer.tokens, pacer.capacity);

        let pacer = Pacer::new(Duration::from_millis(0), window, mtu, now);
        assert_eq!(pacer.capacity, MAX_BURST_SIZE * mtu as u64);
        assert_eq!(pacer.tokens, pacer.capacity);

        let pacer = Pacer::new(rtt, 1, mtu, now);
        assert_eq!(pacer.capacity, MIN_BURST_SIZE * mtu as u64);
        assert_eq!(pacer.tokens, pacer.capacity);
    }

    #[test]
    fn adjusts_capacity() {
        let window = 2_000_000;
        let mtu = 1500;
        let rtt = Duration::from_millis(50);
        let now = Instant::now();

        let mut pacer = Pacer::new(rtt, window, mtu, now);
        assert_eq!(
            pacer.capacity,
            (window as u128 * BURST_INTERVAL_NANOS / rtt.as_nanos()) as u64
        );
        assert_eq!(pacer.tokens, pacer.capacity);
        let initial_tokens = pacer.tokens;

        pacer.delay(rtt, mtu as u64, mtu, window * 2, now);
        assert_eq!(
            pacer.capacity,
            (2 * window as u128 * BURST_INTERVAL_NANOS / rtt.as_nanos()) as u64
        );
        assert_eq!(pacer.tokens, initial_tokens);

        pacer.delay(rtt, mtu as u64, mtu, window / 2, now);
        assert_eq!(
            pacer.capacity,
            (window as u128 / 2 * BURST_INTERVAL_NANOS / rtt.as_nanos()) as u64
        );
        assert_eq!(pacer.tokens, initial_tokens / 2);

        pacer.delay(rtt, mtu as u64, mtu * 2, window, now);
        assert_eq!(
            pacer.capacity,
            (window as u128 * BURST_INTERVAL_NANOS / rtt.as_nanos()) as u64
        );

        pacer.delay(rtt, mtu as u64, 20_000, window, now);
        assert_eq!(pacer.capacity, 20_000_u64 * MIN_BURST_SIZE);
    }

    #[test]
    fn computes_pause_correctly() {
        let window = 2_000_000u64;
        let mtu = 1000;
        let rtt = Duration::from_millis(50);
        let old_instant = Instant::now();

        let mut pacer = Pacer::new(rtt, window, mtu, old_instant);
        let packet_capacity = pacer.capacity / mtu as u64;

        for _ in 0..packet_capacity {
            assert_eq!(
                pacer.delay(rtt, mtu as u64, mtu, window, old_instant),
                None,
                "When capacity is available packets should be sent immediately"
            );

            pacer.on_transmit(mtu);
        }

        let pace_duration = Duration::from_nanos((BURST_INTERVAL_NANOS * 4 / 5) as u64);

        assert_eq!(
            pacer
                .delay(rtt, mtu as u64, mtu, window, old_instant)
                .expect("Send must be delayed")
                .duration_since(old_instant),
            pace_duration
        );

        // Refill half of the tokens
        assert_eq!(
            pacer.delay(
                rtt,
                mtu as u64,
                mtu,
                window,
                old_instant + pace_duration / 2
            ),
            None
        );
        assert_eq!(pacer.tokens, pacer.capacity / 2);

        for _ in 0..packet_capacity / 2 {
            assert_eq!(
                pacer.delay(rtt, mtu as u64, mtu, window, old_instant),
                None,
                "When capacity is available packets should be sent immediately"
            );

            pacer.on_transmit(mtu);
        }

        // Refill all capacity by waiting more than the expected duration
        assert_eq!(
            pacer.delay(
                rtt,
                mtu as u64,
                mtu,
                window,
                old_instant + pace_duration * 3 / 2
            ),
            None
        );
        assert_eq!(pacer.tokens, pacer.capacity);
    }
    /// wanopt patch: after the sender went idle, tokens banked while it
    /// was held back are cut to one burst.
    #[test]
    fn idle_sender_keeps_one_burst_of_banked_tokens() {
        let mtu = 1500u16;
        let rate = 250_000u64; // 2 Mbit/s
        let rtt = Duration::from_millis(340);
        let t0 = Instant::now();
        let mut pacer = Pacer::new(rtt, 100_000, mtu, t0);
        // Pacing (the tokens spent), then held back by the window for a
        // while: a round trip's worth of tokens accrues.
        while pacer.delay_at_rate(rate, rtt, 1500, mtu, t0).is_none() {
            pacer.on_transmit(1500);
        }
        let t1 = t0 + Duration::from_millis(400);
        assert_eq!(pacer.delay_at_rate(rate, rtt, 1500, mtu, t1), None);
        assert!(pacer.tokens > 80_000, "{}", pacer.tokens);
        // Idle, then a new transfer: at most one burst goes at once.
        pacer.stop_banking();
        let t2 = t1 + Duration::from_secs(2);
        let mut sent = 0;
        while pacer.delay_at_rate(rate, rtt, 1500, mtu, t2).is_none() {
            pacer.on_transmit(1500);
            sent += 1;
            assert!(sent < 100);
        }
        assert_eq!(sent, MIN_BURST_SIZE as usize);
    }

    #[test]
    fn window_held_time_banks_at_most_one_burst() {
        let mtu = 1500u16;
        let rate = 1_250_000u64; // 10 Mbit/s
        let rtt = Duration::from_millis(200);
        let t0 = Instant::now();
        let mut pacer = Pacer::new(rtt, 100_000, mtu, t0);
        while pacer.delay_at_rate(rate, rtt, 1500, mtu, t0).is_none() {
            pacer.on_transmit(1500);
        }
        // Held by the window for 300 ms (ProbeRTT, say), polled as acks
        // arrive: only the last burst of that time earns tokens.
        for ms in (10..=300).step_by(10) {
            pacer.window_blocked(t0 + Duration::from_millis(ms));
        }
        let t1 = t0 + Duration::from_millis(300);
        let mut sent = 0u64;
        while pacer.delay_at_rate(rate, rtt, 1500, mtu, t1).is_none() {
            pacer.on_transmit(1500);
            sent += 1500;
            assert!(sent < 1_000_000);
        }
        // 16 ms at 10 Mbit/s is 20 kB; a round trip's worth would be 250 kB.
        let burst = (rate as u128 * RATE_BURST_NANOS / 1_000_000_000) as u64;
        assert!(sent <= burst + 1500, "{sent} bytes at once");
    }
}
