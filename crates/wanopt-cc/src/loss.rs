//! Telling random loss from congestion, one round at a time.
//!
//! BBR v1 answers every loss episode with packet conservation and cuts its
//! window by what was lost (Linux `bbr_set_cwnd`). Under random loss that is
//! wrong: at 3% loss on a 100 Mbit/s, 100 ms path every round starts a new
//! episode, the window never grows past what is in flight, and the
//! bandwidth estimate, which needs a larger window to show more, stalls far
//! below the link (a fresh tunnel needed 15-25 s to reach its rate in the
//! lab). Random loss keeps its rate as the sender speeds up and comes
//! without a queue; loss at an overflowing queue rises with the excess and
//! comes with the queue's delay. So a round's loss is congestion when its
//! rate is well above the path's usual loss rate (learned as a moving
//! average over rounds), or when it comes while the round's acks carry a
//! queue's delay: more than the least the last rounds saw, not more than
//! the path's all-time minimum (delay that comes with any load, such as
//! jitter that keeps packets in order, is not a queue that loss tracks).

use std::collections::VecDeque;
use std::time::Duration;

/// A round's loss rate must exceed this to count as congestion, whatever the
/// usual rate (BBR v2's `loss_thresh`).
pub(super) const CONGESTIVE_LOSS_FLOOR: f64 = 0.02;
/// ... and this multiple of the path's usual loss rate.
const CONGESTIVE_LOSS_FACTOR: f64 = 2.0;
/// A round with fewer lost packets than this is never congestion.
pub(super) const CONGESTIVE_LOSS_PACKETS: u64 = 6;
/// A round's acks show a queue when their mean round-trip time exceeds
/// the minimum by this fraction of it ...
const QUEUE_RTT_FRACTION: f64 = 0.25;
/// ... plus this much (timer and scheduling noise on short paths).
const QUEUE_RTT_SLACK: Duration = Duration::from_millis(2);
/// Lost packets that, with a queue, make a round congestive.
const QUEUE_LOSS_PACKETS: u64 = 2;
/// Rounds whose mean round trip sets the delay a queue is measured
/// against (their least): a ProbeBW cycle and more, whose down phase
/// drains the queue the sender builds.
const BASE_ROUNDS: usize = 10;

/// What the counts behind the usual loss rate keep of themselves at each
/// round's end (7/8: about eight rounds, weighted by their packets).
const AVERAGE_DECAY: f64 = 7.0 / 8.0;

/// What a round lost, and why it counts as congestion.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(super) struct RoundLoss {
    /// Lost bytes / (acked + lost bytes) in the round.
    pub rate: f64,
    /// Loss while the round's acks carried a queue's delay.
    pub with_queue: bool,
    /// Loss well above the path's usual rate.
    pub excess: bool,
}

impl RoundLoss {
    /// The round lost more than random loss explains.
    pub fn congestive(&self) -> bool {
        self.with_queue || self.excess
    }
}

/// Per-round loss counting and the path's usual (random) loss rate.
#[derive(Clone, Debug, Default)]
pub(super) struct LossRate {
    acked: u64,
    lost: u64,
    /// Sum and count of the round's round-trip samples (one per batch).
    rtt_sum: Duration,
    rtt_samples: u32,
    /// Decayed sums of earlier rounds' bytes (acked + lost) and lost bytes.
    usual_total: f64,
    usual_lost: f64,
    /// The mean round trip of the last [`BASE_ROUNDS`] rounds that had
    /// samples.
    recent_means: VecDeque<Duration>,
}

impl LossRate {
    /// Counts one batch of acknowledgements and losses in the current round.
    pub fn on_batch(&mut self, acked: u64, lost: u64, rtt: Option<Duration>) {
        self.acked += acked;
        self.lost += lost;
        if let Some(rtt) = rtt {
            self.rtt_sum += rtt;
            self.rtt_samples += 1;
        }
    }

    /// The current round so far, judged as [`LossRate::end_round`] judges a
    /// whole one.
    pub fn so_far(&self, mtu: u64, min_rtt: Option<Duration>) -> RoundLoss {
        self.judge(mtu, min_rtt)
    }

    /// Ends the current round: judges its loss against the usual rate of the
    /// rounds before it, then folds it into that rate. Loss at a queue is
    /// congestion by its delay and is not folded in; loss above the usual
    /// rate counts only up to the threshold, so that overflow at a queue too
    /// shallow to show its delay teaches the average little, while loss that
    /// appears and stays is learned within a few dozen rounds.
    pub fn end_round(&mut self, mtu: u64, min_rtt: Option<Duration>) -> RoundLoss {
        let verdict = self.judge(mtu, min_rtt);
        let total = (self.acked + self.lost) as f64;
        if total > 0.0 && !verdict.with_queue {
            let counted = self.lost as f64
                * (self.threshold() / verdict.rate.max(f64::MIN_POSITIVE)).min(1.0);
            self.usual_total = self.usual_total * AVERAGE_DECAY + total;
            self.usual_lost = self.usual_lost * AVERAGE_DECAY + counted;
        }
        if self.rtt_samples > 0 {
            if self.recent_means.len() == BASE_ROUNDS {
                self.recent_means.pop_front();
            }
            self.recent_means.push_back(self.rtt_sum / self.rtt_samples);
        }
        (self.acked, self.lost) = (0, 0);
        (self.rtt_sum, self.rtt_samples) = (Duration::ZERO, 0);
        verdict
    }

    /// The path's usual loss rate: lost over sent bytes of the last rounds
    /// (about eight, see [`AVERAGE_DECAY`]).
    pub fn usual(&self) -> f64 {
        if self.usual_total > 0.0 {
            self.usual_lost / self.usual_total
        } else {
            0.0
        }
    }

    /// The loss rate above which a round's loss is congestion.
    fn threshold(&self) -> f64 {
        CONGESTIVE_LOSS_FLOOR.max(CONGESTIVE_LOSS_FACTOR * self.usual())
    }

    /// The delay a queue is measured against: the least mean round trip
    /// of the last rounds, at least `min_rtt`.
    fn base_rtt(&self, min_rtt: Duration) -> Duration {
        self.recent_means
            .iter()
            .copied()
            .min()
            .map_or(min_rtt, |m| m.max(min_rtt))
    }

    /// The current round's loss rate, and whether it is congestion: either
    /// loss with a queue (the round's mean round trip well above the base
    /// delay, [`LossRate::base_rtt`]),
    /// or loss above the threshold, of at least [`CONGESTIVE_LOSS_PACKETS`]
    /// packets and more than four standard deviations above what the usual
    /// rate predicts for this many packets (a short round, or the start of
    /// one, is noisy).
    fn judge(&self, mtu: u64, min_rtt: Option<Duration>) -> RoundLoss {
        let total = self.acked + self.lost;
        if total == 0 {
            return RoundLoss::default();
        }
        let rate = self.lost as f64 / total as f64;
        let queue = match (min_rtt, self.rtt_samples) {
            (Some(min_rtt), samples) if samples > 0 => {
                let mean = self.rtt_sum / samples;
                let base = self.base_rtt(min_rtt);
                mean > base.mul_f64(1.0 + QUEUE_RTT_FRACTION) + QUEUE_RTT_SLACK
            }
            _ => false,
        };
        let packets = total as f64 / mtu as f64;
        let lost_packets = self.lost as f64 / mtu as f64;
        let usual = self.usual();
        let expected = packets * usual;
        let deviation = (packets * usual * (1.0 - usual)).sqrt();
        RoundLoss {
            rate,
            with_queue: queue && self.lost >= QUEUE_LOSS_PACKETS * mtu,
            excess: self.lost >= CONGESTIVE_LOSS_PACKETS * mtu
                && rate > self.threshold()
                && lost_packets > expected + 4.0 * deviation,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MTU: u64 = 1200;
    const RTT: Duration = Duration::from_millis(100);

    fn round(loss: &mut LossRate, acked_packets: u64, lost_packets: u64) -> RoundLoss {
        loss.on_batch(acked_packets * MTU, lost_packets * MTU, Some(RTT));
        loss.end_round(MTU, Some(RTT))
    }

    #[test]
    fn steady_random_loss_is_not_congestion_once_learned() {
        let mut loss = LossRate::default();
        // Loss appears at 10%: the first rounds look like congestion, then
        // the usual rate catches up (each congestive round counts up to the
        // threshold, which doubles as the average rises).
        let verdicts: Vec<bool> = (0..60)
            .map(|_| round(&mut loss, 900, 100).congestive())
            .collect();
        assert!(
            verdicts[0],
            "a first lossy round on a clean history is congestion"
        );
        assert!(
            verdicts[40..].iter().all(|c| !c),
            "steady 10% loss still judged congestion: {verdicts:?}"
        );
        assert!(
            (loss.usual() - 0.1).abs() < 0.01,
            "usual rate {}",
            loss.usual()
        );
    }

    #[test]
    fn a_jump_above_the_usual_rate_is_congestion() {
        let mut loss = LossRate::default();
        for _ in 0..40 {
            round(&mut loss, 970, 30);
        }
        assert!(!round(&mut loss, 970, 30).congestive(), "the usual 3%");
        assert!(
            round(&mut loss, 700, 300).congestive(),
            "30% after a usual 3%"
        );
        // Below the floor nothing is congestion, and a handful of packets
        // never is.
        let mut clean = LossRate::default();
        assert!(!round(&mut clean, 1000, 15).congestive(), "1.5%");
        assert!(!round(&mut clean, 20, 5).congestive(), "5 packets");
        assert!(round(&mut clean, 1000, 200).congestive(), "17%");
    }

    #[test]
    fn loss_with_a_queue_is_congestion_at_any_rate() {
        let mut loss = LossRate::default();
        for _ in 0..40 {
            round(&mut loss, 990, 10);
        }
        // 1% loss, as usual, but the acks carry 60 ms of queue.
        loss.on_batch(990 * MTU, 10 * MTU, Some(RTT + Duration::from_millis(60)));
        assert!(loss.so_far(MTU, Some(RTT)).with_queue);
        assert!(loss.end_round(MTU, Some(RTT)).congestive());
        // The same delay without loss is not congestion; nor is one packet.
        loss.on_batch(1000 * MTU, 0, Some(RTT + Duration::from_millis(60)));
        assert!(!loss.end_round(MTU, Some(RTT)).congestive());
        loss.on_batch(1000 * MTU, MTU, Some(RTT + Duration::from_millis(60)));
        assert!(!loss.end_round(MTU, Some(RTT)).congestive());
        // Jitter within a quarter of the RTT is not a queue.
        loss.on_batch(990 * MTU, 10 * MTU, Some(RTT + Duration::from_millis(20)));
        assert!(!loss.end_round(MTU, Some(RTT)).congestive());
    }

    #[test]
    fn delay_that_comes_with_any_load_is_not_a_queue() {
        // A 50 ms path whose frames keep their order under 0-10 ms of
        // jitter each way: loaded, every round's acks come about 20 ms
        // late, though nothing queues; the loss is 3% at random.
        let rtt = Duration::from_millis(50);
        let loaded = rtt + Duration::from_millis(20);
        let mut loss = LossRate::default();
        let verdicts: Vec<bool> = (0..40)
            .map(|_| {
                loss.on_batch(970 * MTU, 30 * MTU, Some(loaded));
                loss.end_round(MTU, Some(rtt)).with_queue
            })
            .collect();
        assert!(
            verdicts[1..].iter().all(|q| !q),
            "the loaded delay taken for a queue: {verdicts:?}"
        );
        // A queue that grows on top of it is one.
        loss.on_batch(
            970 * MTU,
            30 * MTU,
            Some(loaded + Duration::from_millis(40)),
        );
        assert!(loss.end_round(MTU, Some(rtt)).with_queue);
        // And growing from the start, round after round (a startup's
        // overshoot), it is one before the base catches up.
        let mut startup = LossRate::default();
        let mut flagged = 0;
        for i in 0..8u64 {
            let queued = rtt + Duration::from_millis(15 * i);
            startup.on_batch(970 * MTU, 30 * MTU, Some(queued));
            flagged += u32::from(startup.end_round(MTU, Some(rtt)).with_queue);
        }
        assert!(flagged >= 5, "{flagged} of 8 growing rounds");
    }

    #[test]
    fn an_empty_round_changes_nothing() {
        let mut loss = LossRate::default();
        round(&mut loss, 900, 100);
        let usual = loss.usual();
        let empty = loss.end_round(MTU, Some(RTT));
        assert_eq!(empty, RoundLoss::default());
        assert_eq!(loss.usual(), usual);
    }
}
