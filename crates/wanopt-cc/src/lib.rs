//! wanopt's congestion control: BBR as a sans-IO state machine. Time comes
//! in with every event (`now: Instant`), decisions go out through queries;
//! the controller never reads a clock, touches a socket or draws global
//! randomness, so one copy runs per QUIC connection (behind the node's
//! adapter to quinn's congestion controller interface) and one per path of
//! a bond, each driven by its own acknowledgements, and the tests run it
//! on a virtual clock.
//!
//! # Use
//!
//! Build a [`Bbr`] with [`Bbr::new`] from a [`BbrConfig`], the path's
//! datagram size and a random seed (so that senders sharing a bottleneck
//! do not probe in lockstep). Then tell it what happens:
//!
//! - [`Bbr::handle_sent`] for every batch of datagrams sent;
//! - [`Bbr::handle_ack`] for every acknowledged packet and
//!   [`Bbr::handle_loss`] for every loss declared, then
//!   [`Bbr::handle_end_acks`] once the batch of acknowledgements is done
//!   (the model is updated there);
//! - [`Bbr::set_mtu`] when the path's datagram size changes and
//!   [`Bbr::set_blocked`] when the sender runs out of what it may send.
//!
//! and read its decisions: [`Bbr::congestion_window`] (bytes allowed in
//! flight) and [`Bbr::pacing_rate_bytes`] (bytes per second). A declared
//! link rate is a ceiling on both ([`Bbr::set_rate_cap`]).
//!
//! # The controller
//!
//! A model of the path's bottleneck bandwidth and round-trip propagation
//! time, and a sender that paces at the first and keeps about two of their
//! product in flight.
//!
//! This is BBR v1 as specified in draft-cardwell-iccrg-bbr-congestion-control-00
//! and implemented in Linux `net/ipv4/tcp_bbr.c`, over the delivery rate
//! estimator of draft-cheng-iccrg-delivery-rate-estimation (`rate.rs`). In
//! the tunnel it sits behind quinn's congestion controller interface (the
//! node's `transport::bbr` adapter), where it replaces quinn's own BBR, whose
//! bandwidth estimate is the maximum of per-packet send and ack rates: on a
//! 250 Mbit/s, 250 ms lab path it estimated ~500 Mbit/s, kept a 32-57 MB window
//! and lost half of the packets it sent at the bottleneck queue. With quinn's
//! window-based pacing (1.25 x window per RTT) even a right-sized window
//! overshoots, so the vendored quinn-proto takes the pacing rate from the
//! controller (its `Controller::pacing_rate`, a wanopt patch).
//!
//! Departures from Linux, each for the tunnel's sake:
//! - ProbeRTT keeps 3/4 of the estimated BDP in flight instead of 4 packets
//!   (as quinn's BBR does): a drained pipe every 10 s would cost a 250 ms path
//!   ~4% of its throughput. 3/4 still empties a queue the model did not cause,
//!   so the expired minimum stays until ProbeRTT has measured a new one
//!   (Linux takes the sample at hand, then drains to 4 packets; at 3/4 of a
//!   BDP sized from that sample a cellular link's queue stayed in the
//!   minimum, `probe_rtt.rs`).
//! - An RTT sample within 1/64 of the minimum refreshes the minimum's
//!   timestamp, so that ack-delay noise alone does not force a ProbeRTT when
//!   the pipe is already drained every gain cycle.
//! - The send quantum is the pacer's burst (8 ms at the pacing rate), not TSO
//!   segments.
//! - Random loss is told from congestion (`loss.rs`): packet conservation and
//!   the window cut answer only loss that comes with a queue's delay or runs
//!   well above the path's usual loss rate, and STARTUP leaves on loss with a
//!   queue once the bandwidth stopped growing (or on the plateau), never on
//!   random loss. A queue's delay is measured from the least delay of the
//!   last rounds, not the all-time minimum (delay that comes with any load,
//!   as order-keeping jitter's, is no queue), and a recovery episode restarts
//!   the round count only for congestion. The sending rate
//!   makes up for half the usual loss rate (`Bbr::sending_bandwidth`). On a
//!   simulated 100 Mbit/s, 100 ms path with 3% random loss this took the
//!   time to 90% of the rate from 15 s to 1.8 s, and the goodput at 5% from
//!   80-85% of the link to 92%.
//! - The window is bounded to the recent delivery rate plus a short queue,
//!   which a path whose rate moves (a cellular link) needs (`moving.rs`).
//! - For a bond's paths, an optional rate cap (a link's declared rate)
//!   bounds the pacing rate and the window (`cap.rs`).
//!
//! The phases are in their own files: `startup.rs` (STARTUP and DRAIN),
//! `probe_bw.rs`, `probe_rtt.rs` (with the min RTT filter), `window.rs`
//! (the congestion window and loss recovery), and beside them the
//! estimators: `rate.rs` (delivery rate), `filter.rs` (windowed max),
//! `loss.rs` (random loss or congestion), `aggregation.rs` (ack
//! aggregation), `moving.rs` (a moving bottleneck), and the rate cap
//! (`cap.rs`). The tests drive the controller through a simulated
//! bottleneck on a virtual clock (`sim.rs`).

mod aggregation;
mod cap;
mod filter;
mod loss;
mod moving;
mod probe_bw;
mod probe_rtt;
mod rate;
mod startup;
mod window;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use aggregation::AckAggregation;
use filter::WindowedMax;
use loss::{LossRate, RoundLoss};
use moving::MovingBottleneck;
pub use moving::MovingPolicy;
use rate::{RateSample, RateSampler};

/// The target of BBR's trace lines (`WANOPT_LOG=info,wanopt_node::bbr=trace`),
/// kept from when the controller lived in `wanopt-node`, so that the log
/// filters in use (and `wanopt_node=trace`) still select them.
pub const LOG_TARGET: &str = "wanopt_node::bbr";

/// Linux paces 1% below the estimate (`bbr_pacing_margin_percent`) to keep
/// the bottleneck queue empty. Ours is a round's median of user-space
/// samples, already slightly low, and a 1% margin cost 1-2% of goodput in the
/// lab at 250 ms; the 3/4 phase drains what the cruise builds.
const PACING_MARGIN: f64 = 1.0;
/// Rounds of the bandwidth filter window (§4.1.1.3).
const BANDWIDTH_WINDOW_ROUNDS: u64 = 10;
/// The share of the usual loss rate the sending rate makes up for, and the
/// most it makes up for (see `Bbr::sending_bandwidth`).
const COMPENSATED_SHARE: f64 = 0.5;
const MAX_COMPENSATED_LOSS: f64 = 0.1;
/// Samples kept per round for the round's median.
const MAX_ROUND_SAMPLES: usize = 16_384;
/// STARTUP's gain, 2/ln(2): doubles the sending rate every round (§4.3.1.1).
const HIGH_GAIN: f64 = 2.885;
/// DRAIN's pacing gain: the inverse of STARTUP's.
const DRAIN_GAIN: f64 = 1.0 / HIGH_GAIN;
/// STARTUP ends when three rounds grow the bandwidth by less than 25%.
const FULL_BANDWIDTH_GROWTH: f64 = 1.25;
const FULL_BANDWIDTH_ROUNDS: u32 = 3;
/// PROBE_BW's cwnd gain (§4.2.3.2).
const CWND_GAIN: f64 = 2.0;
/// PROBE_BW's pacing gain cycle, one phase per min RTT (§4.3.4.3).
const PACING_GAIN_CYCLE: [f64; 8] = [1.25, 0.75, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0];
/// Lifetime of a min RTT measurement before ProbeRTT re-measures it (§4.1.2.3).
const MIN_RTT_WINDOW: Duration = Duration::from_secs(10);
/// Time spent in ProbeRTT at the low window (§4.3.5).
const PROBE_RTT_DURATION: Duration = Duration::from_millis(200);
/// ProbeRTT's window, as a fraction of the estimated BDP (see module docs).
const PROBE_RTT_BDP_GAIN: f64 = 0.75;
/// Burst of the rate pacer (the vendored quinn-proto's `RATE_BURST_NANOS`).
const PACER_BURST: Duration = Duration::from_millis(16);

/// The state machine's modes (§4.3).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Doubling the rate each round until the bandwidth stops growing.
    Startup,
    /// Draining the queue STARTUP built.
    Drain,
    /// Cruising at the estimated bandwidth, probing for more every 8 rounds.
    ProbeBw,
    /// Briefly lowering the window to re-measure the propagation delay.
    ProbeRtt,
}

impl Mode {
    /// The mode's name as `wanopt status` shows it.
    pub fn name(self) -> &'static str {
        match self {
            Mode::Startup => "startup",
            Mode::Drain => "drain",
            Mode::ProbeBw => "probe_bw",
            Mode::ProbeRtt => "probe_rtt",
        }
    }
}

/// What every [`Bbr`] built from it shares: the settings of a kind of path,
/// not of one controller (the random seed is [`Bbr::new`]'s).
#[derive(Clone, Debug)]
pub struct BbrConfig {
    /// Congestion window before the first measurement, in bytes (at least
    /// four datagrams).
    pub initial_window: u64,
    /// When the window is bounded to a moving bottleneck's recent rate
    /// (`moving.rs`).
    pub moving: MovingPolicy,
}

impl Default for BbrConfig {
    fn default() -> Self {
        Self {
            initial_window: 14_720,
            moving: MovingPolicy::Auto,
        }
    }
}

/// Loss recovery state (Linux `bbr_set_cwnd_to_recover_or_restore`).
#[derive(Clone, Copy, Debug, Default)]
struct Recovery {
    /// In recovery since this instant: losses of packets sent before it
    /// belong to the same episode.
    since: Option<Instant>,
    /// First round of recovery: the window follows packet conservation.
    conservation: bool,
    /// The window is to be cut to what is in flight at the end of the batch.
    entering: bool,
    /// Recovery ended in this batch: the window before it is restored.
    exiting: bool,
}

/// A BBR v1 controller (see the module documentation).
#[derive(Clone, Debug)]
pub struct Bbr {
    mtu: u64,
    initial_window: u64,
    rng: u64,
    mode: Mode,
    bandwidth: WindowedMax,
    /// Whether the bottleneck's rate moves, and the window bound then.
    moving: MovingBottleneck,
    /// The most in flight in this round so far (before acks and losses).
    round_max_in_flight: u64,
    /// The least RTT sample of this round so far.
    round_min_rtt: Option<Duration>,
    min_rtt: Option<Duration>,
    min_rtt_stamp: Option<Instant>,
    round_count: u64,
    next_round_delivered: u64,
    round_start: bool,
    full_bandwidth: u64,
    full_bandwidth_rounds: u32,
    full_bandwidth_reached: bool,
    /// Loss per round and the path's usual loss rate.
    loss: LossRate,
    /// The last finished round lost more than random loss explains.
    congested: bool,
    /// Rounds that ended congested so far.
    congested_rounds: u64,
    /// Rounds that began with a sample that was not app-limited (the
    /// sender filled its window or its pacing): a sender that drives the
    /// path, whose losses may be its own queue's.
    filled_rounds: u64,
    /// Packets the peer's FEC rebuilt and the controller has not counted
    /// yet (shared with the datagram layer, see [`Bbr::repaired`]).
    repaired: Arc<AtomicU64>,
    /// The share of recent losses that FEC repaired (decayed per batch
    /// with losses): repaired packets are delivered, so the delivery rate
    /// already counts them and the pacing makes up only for the rest.
    repaired_share: f64,
    /// The delivery rate samples of the current round (see `median`).
    round_samples: Vec<u64>,
    pacing_gain: f64,
    cwnd_gain: f64,
    /// Bytes per second; 0 until the first RTT measurement.
    pacing_rate: u64,
    cwnd: u64,
    prior_cwnd: u64,
    cycle_index: usize,
    cycle_stamp: Option<Instant>,
    probe_rtt_done: Option<Instant>,
    probe_rtt_round_done: bool,
    /// The least RTT seen since the minimum expired: the new minimum when
    /// ProbeRTT ends.
    probe_rtt_min: Option<Duration>,
    idle_restart: bool,
    recovery: Recovery,
    aggregation: AckAggregation,
    /// The sender had nothing to send when last asked.
    app_limited: bool,
    /// Per batch of acks: bytes acked and lost, smallest RTT sample.
    batch_acked: u64,
    batch_lost: u64,
    batch_rtt: Option<Duration>,
    rate: RateSampler,
    /// Bytes sent so far, and the time and count at the last round start
    /// (for the trace's achieved send rate).
    sent_bytes: u64,
    round_mark: Option<(Instant, u64)>,
    /// Whether data waited for the window or the pacer when the sender
    /// last had nothing it could send (shared with clones, see
    /// [`Bbr::sender_blocked`]).
    blocked: Arc<AtomicBool>,
    /// The most the pacing rate may be, bytes per second (`cap.rs`).
    rate_cap: Option<u64>,
}

impl Bbr {
    /// A controller in STARTUP for a path of `mtu`-byte datagrams (at
    /// least 1200). `seed` picks the random start phase of the gain cycle:
    /// draw one per controller, so that senders sharing a bottleneck do not
    /// probe in lockstep (a fixed one makes a run repeatable).
    pub fn new(config: &BbrConfig, mtu: u16, seed: u64) -> Self {
        let mtu = u64::from(mtu.max(1200));
        let initial_window = config.initial_window.max(4 * mtu);
        Self {
            mtu,
            initial_window,
            rng: seed | 1,
            mode: Mode::Startup,
            bandwidth: WindowedMax::new(BANDWIDTH_WINDOW_ROUNDS),
            moving: MovingBottleneck::new(config.moving),
            round_max_in_flight: 0,
            round_min_rtt: None,
            min_rtt: None,
            min_rtt_stamp: None,
            round_count: 0,
            next_round_delivered: 0,
            round_start: false,
            full_bandwidth: 0,
            full_bandwidth_rounds: 0,
            full_bandwidth_reached: false,
            loss: LossRate::default(),
            congested: false,
            congested_rounds: 0,
            filled_rounds: 0,
            repaired: Arc::default(),
            repaired_share: 0.0,
            round_samples: Vec::new(),
            pacing_gain: HIGH_GAIN,
            cwnd_gain: HIGH_GAIN,
            pacing_rate: 0,
            cwnd: initial_window,
            prior_cwnd: 0,
            cycle_index: 0,
            cycle_stamp: None,
            probe_rtt_done: None,
            probe_rtt_round_done: false,
            probe_rtt_min: None,
            idle_restart: false,
            recovery: Recovery::default(),
            aggregation: AckAggregation::default(),
            app_limited: false,
            batch_acked: 0,
            batch_lost: 0,
            batch_rtt: None,
            rate: RateSampler::new(),
            sent_bytes: 0,
            round_mark: None,
            blocked: Arc::default(),
            rate_cap: None,
        }
    }

    /// The path's datagrams are now `mtu` bytes (at least 1200): the
    /// least window follows.
    pub fn set_mtu(&mut self, mtu: u16) {
        self.mtu = u64::from(mtu.max(1200));
        self.cwnd = self.cwnd.max(self.min_cwnd());
    }

    /// The sender ran out of what it may send: with data waiting for the
    /// window or the pacer (`blocked`) or with nothing left to send. Sets
    /// the flag [`Bbr::sender_blocked`] hands out.
    pub fn set_blocked(&self, blocked: bool) {
        self.blocked.store(blocked, Ordering::Relaxed);
    }

    /// The congestion window before the first measurement, in bytes.
    pub fn initial_window(&self) -> u64 {
        self.initial_window
    }

    /// A flag, shared by this controller and its clones (quinn's
    /// `Connection::congestion_state` hands out one), that says whether the
    /// sender's last quiet spell is data waiting for the congestion window
    /// or the pacer (`true`) or nothing left to send (`false`), as
    /// [`Bbr::set_blocked`] last told. Tail duplication
    /// reads it: a sender stalled on its window (a queue-inflated round
    /// trip in the middle of a transfer) is not at the end of anything.
    pub fn sender_blocked(&self) -> Arc<AtomicBool> {
        self.blocked.clone()
    }

    /// A counter, shared by this controller and its clones, to which the
    /// datagram layer adds the packets the peer's FEC rebuilt. They count
    /// as lost in the controller's judgement of a round: repaired random
    /// loss is learned as random loss, repaired loss at a growing queue is
    /// congestion, and cuts the window like a loss would. FEC must never
    /// hide congestion from the controller.
    pub fn repaired(&self) -> Arc<AtomicU64> {
        self.repaired.clone()
    }

    /// The path's usual (random) loss rate as the controller learned it
    /// from rounds without a queue (0..1).
    pub fn random_loss(&self) -> f64 {
        self.loss.usual()
    }

    /// Whether the path's rate is judged to move (`moving.rs`): its pacing
    /// then never falls below the recent rate, and a congestive loss sets
    /// an in-flight ceiling.
    pub fn moving(&self) -> bool {
        self.moving.active()
    }

    /// Rounds that ended congested (lost more than random loss explains).
    pub fn congested_rounds(&self) -> u64 {
        self.congested_rounds
    }

    /// Rounds that began with a sample that was not app-limited: while
    /// they grow, the sender drives the path (a sparse sender's, or an
    /// acknowledgement stream's, never do).
    pub fn filled_rounds(&self) -> u64 {
        self.filled_rounds
    }

    /// The current mode.
    pub fn mode(&self) -> Mode {
        self.mode
    }

    /// The bottleneck bandwidth estimate, bytes per second (0 before the
    /// first sample).
    pub fn bandwidth(&self) -> u64 {
        self.bandwidth.get()
    }

    /// The round-trip propagation time estimate.
    pub fn min_rtt(&self) -> Option<Duration> {
        self.min_rtt
    }

    /// The pacing rate in bytes per second, once an RTT was measured (at
    /// once, at most, under a rate cap: [`Bbr::set_rate_cap`]).
    pub fn pacing_rate_bytes(&self) -> Option<u64> {
        match (self.pacing_rate, self.rate_cap) {
            (0, cap) => cap,
            (rate, cap) => Some(cap.map_or(rate, |cap| rate.min(cap))),
        }
    }

    /// The congestion window in bytes.
    pub fn congestion_window(&self) -> u64 {
        if self.mode == Mode::ProbeRtt {
            self.cwnd.min(self.probe_rtt_cwnd())
        } else {
            self.cwnd
        }
    }

    /// A batch of `bytes` was sent at `now`.
    pub fn handle_sent(&mut self, now: Instant, bytes: u64) {
        if self.rate.in_flight() == 0 && self.app_limited {
            // Restarting from idle (Linux CA_EVENT_TX_START).
            self.idle_restart = true;
            self.aggregation.restart(now);
            if self.mode == Mode::ProbeBw {
                self.set_pacing_rate(1.0);
            } else if self.mode == Mode::ProbeRtt {
                self.check_probe_rtt_done(now);
            }
        }
        self.app_limited = false;
        self.sent_bytes += bytes;
        self.rate.on_sent(now, bytes);
    }

    /// A packet of `bytes` sent at `sent` was acknowledged at `now`.
    pub fn handle_ack(&mut self, now: Instant, sent: Instant, bytes: u64) {
        self.rate.on_ack(now, sent, bytes);
        self.batch_acked += bytes;
        let rtt = now.saturating_duration_since(sent);
        self.batch_rtt = Some(self.batch_rtt.map_or(rtt, |r| r.min(rtt)));
        if self.recovery.since.is_some_and(|since| sent > since) {
            // A packet sent after recovery began arrived: the episode is over.
            self.recovery.since = None;
            self.recovery.exiting = true;
        }
    }

    /// Packets sent at or before `sent`, `bytes` in all, were declared lost at
    /// `now`; `persistent` when the loss detector declared persistent
    /// congestion (RFC 9002 §7.6). `bytes == 0` is an ECN mark, ignored.
    pub fn handle_loss(&mut self, now: Instant, sent: Instant, bytes: u64, persistent: bool) {
        if bytes == 0 {
            // An ECN mark: BBR v1 does not respond to ECN.
            return;
        }
        self.rate.on_lost(bytes);
        self.batch_lost += bytes;
        if persistent {
            // Like a TCP retransmission timeout: start over from a minimal
            // window, restore the old one when recovery ends.
            self.save_cwnd();
            self.cwnd = self.min_cwnd();
            self.full_bandwidth = 0;
            self.full_bandwidth_rounds = 0;
            self.recovery = Recovery {
                since: Some(now),
                ..Recovery::default()
            };
            return;
        }
        let new_episode = self.recovery.since.is_none_or(|since| sent > since);
        if new_episode {
            if self.recovery.since.is_none() {
                self.save_cwnd();
            }
            self.recovery = Recovery {
                since: Some(now),
                conservation: true,
                entering: true,
                exiting: false,
            };
            // The first round of recovery starts now, when recovery will
            // conserve packets (congestion): restarting rounds for random
            // loss, which at 5% starts an episode every round trip, made
            // rounds two round trips long, and a round's median then never
            // saw the rate a probe reached.
            if self.loss_is_congestion() {
                self.next_round_delivered = self.rate.delivered();
            }
        }
    }

    /// A batch of acknowledgements ended; `in_flight` bytes remain in flight
    /// and `app_limited` says whether the sender had nothing to send.
    pub fn handle_end_acks(&mut self, now: Instant, in_flight: u64, app_limited: bool) {
        self.app_limited = app_limited;
        let acked = std::mem::take(&mut self.batch_acked);
        let lost = std::mem::take(&mut self.batch_lost);
        let repaired = self
            .repaired
            .swap(0, Ordering::Relaxed)
            .min(1 << 20)
            .saturating_mul(self.mtu);
        let rtt = self.batch_rtt.take();
        if lost + repaired > 0 {
            let share = repaired as f64 / (lost + repaired) as f64;
            self.repaired_share = 0.9 * self.repaired_share + 0.1 * share;
        }
        let prior_in_flight = in_flight + acked + lost;
        let sample = self.rate.on_end_acks(in_flight, app_limited, self.min_rtt);
        if acked == 0 {
            return;
        }
        self.update_bandwidth(now, sample);
        self.round_max_in_flight = self.round_max_in_flight.max(prior_in_flight);
        let round_loss = self.update_loss(acked, lost + repaired, rtt);
        self.aggregation.on_ack(
            now,
            acked,
            self.bandwidth.get(),
            self.cwnd,
            self.round_start,
        );
        self.update_cycle_phase(now, prior_in_flight, lost);
        self.check_full_bandwidth_reached(sample, round_loss);
        self.check_drain(now, in_flight);
        self.update_min_rtt(now, rtt, in_flight);
        self.update_gains();
        self.set_pacing_rate(self.pacing_gain);
        self.set_cwnd(acked, lost + repaired, in_flight);
        if self.round_start {
            let send_kbit = self.round_mark.map_or(0, |(at, bytes)| {
                let seconds = now.saturating_duration_since(at).as_secs_f64().max(1e-6);
                ((self.sent_bytes - bytes) as f64 * 8.0 / seconds / 1e3) as u64
            });
            self.round_mark = Some((now, self.sent_bytes));
            tracing::trace!(
                target: LOG_TARGET,
                send_kbit,
                mode = ?self.mode,
                bandwidth_kbit = self.bandwidth.get() * 8 / 1_000,
                pacing_kbit = self.pacing_rate * 8 / 1_000,
                min_rtt = ?self.min_rtt,
                cwnd = self.cwnd,
                in_flight,
                app_limited,
                cycle = self.cycle_index,
                "bbr round {}",
                self.round_count
            );
        }
    }

    /// Round counting and the bandwidth filter (§4.1.1).
    fn update_bandwidth(&mut self, now: Instant, sample: Option<RateSample>) {
        self.round_start = false;
        let Some(sample) = sample else {
            return;
        };
        if sample.prior_delivered >= self.next_round_delivered {
            self.next_round_delivered = self.rate.delivered();
            self.round_count += 1;
            self.round_start = true;
            self.filled_rounds += u64::from(!sample.app_limited);
            self.recovery.conservation = false;
            let high = percentile(&mut self.round_samples, 0.9);
            self.moving.on_round(
                now,
                self.round_count - 1,
                self.rate.delivered(),
                high,
                sample.app_limited,
                self.mode == Mode::ProbeBw,
            );
            if let Some(median) = percentile(&mut self.round_samples, 0.5) {
                self.bandwidth.update(self.round_count - 1, median);
            }
            self.round_samples.clear();
        }
        let bandwidth = sample.rate();
        // App-limited samples only count when they show more than we knew.
        if (!sample.app_limited || bandwidth >= self.bandwidth.get())
            && self.round_samples.len() < MAX_ROUND_SAMPLES
        {
            self.round_samples.push(bandwidth);
        }
    }

    /// Loss per round: at a round's start, whether the round that ended
    /// lost more than random loss explains (`loss.rs`). The batch that
    /// starts a round counts in the new one.
    fn update_loss(&mut self, acked: u64, lost: u64, rtt: Option<Duration>) -> RoundLoss {
        if self.round_start {
            self.congested = self.loss.end_round(self.mtu, self.min_rtt).congestive();
            self.congested_rounds += u64::from(self.congested);
            let max_in_flight = std::mem::take(&mut self.round_max_in_flight);
            self.moving
                .on_round_end(self.congested, max_in_flight, self.mtu);
            self.moving
                .on_round_delay(self.round_min_rtt.take(), self.min_rtt);
        }
        if let Some(rtt) = rtt {
            self.round_min_rtt = Some(self.round_min_rtt.map_or(rtt, |m| m.min(rtt)));
        }
        self.loss.on_batch(acked, lost, rtt);
        self.loss.so_far(self.mtu, self.min_rtt)
    }

    fn update_gains(&mut self) {
        (self.pacing_gain, self.cwnd_gain) = match self.mode {
            Mode::Startup => (HIGH_GAIN, HIGH_GAIN),
            Mode::Drain => (DRAIN_GAIN, HIGH_GAIN),
            // A moving path with room probes until a queue shows.
            Mode::ProbeBw if self.moving.headroom() => (
                PACING_GAIN_CYCLE[self.cycle_index].max(PACING_GAIN_CYCLE[0]),
                CWND_GAIN,
            ),
            Mode::ProbeBw => (PACING_GAIN_CYCLE[self.cycle_index], CWND_GAIN),
            Mode::ProbeRtt => (1.0, 1.0),
        };
    }

    /// §4.2.1: pace at gain x bandwidth; during STARTUP never slower.
    fn set_pacing_rate(&mut self, gain: f64) {
        let bandwidth = self.sending_bandwidth();
        if bandwidth == 0 {
            // No sample yet: the initial window per RTT, at STARTUP's gain.
            if let (0, Some(rtt)) = (self.pacing_rate, self.min_rtt) {
                let rtt = rtt.max(Duration::from_micros(100));
                self.pacing_rate = self.capped_rate(
                    (HIGH_GAIN * self.initial_window as f64 / rtt.as_secs_f64()) as u64,
                );
            }
            return;
        }
        let rate = (bandwidth as f64 * gain * PACING_MARGIN) as u64;
        if self.full_bandwidth_reached || rate > self.pacing_rate {
            self.pacing_rate = self.capped_rate(rate.max(1));
        }
    }

    /// The loss being counted is congestion (`loss.rs`): the last round or
    /// this one so far lost more than the path's usual rate explains (in
    /// STARTUP, whose usual rate is still being learned: lost with a queue).
    fn loss_is_congestion(&self) -> bool {
        let so_far = self.loss.so_far(self.mtu, self.min_rtt);
        if self.mode == Mode::Startup {
            so_far.with_queue
        } else {
            self.congested || so_far.congestive()
        }
    }

    /// What the sender must send for the bottleneck to deliver the
    /// estimated bandwidth: the estimate is a delivery rate, which random
    /// loss lowers by its rate whether it strikes before the bottleneck or
    /// after it, so pacing at the estimate alone would leave that share of
    /// the link unused (at 5% loss, 90% of the link instead of 95%). Only
    /// half the path's usual loss is made up for, and at most
    /// [`MAX_COMPENSATED_LOSS`]: congestion is answered, not paid for, and an
    /// estimate a little high must not pace above the bottleneck (making up
    /// all of a 2.5% estimate of 2% loss kept a standing queue that
    /// overflowed every few rounds). Loss the peer's FEC repaired is
    /// delivered, counted in the estimate already: it is not made up for
    /// (with it, 3% repaired loss kept a queue overflowing 1% of packets).
    fn sending_bandwidth(&self) -> u64 {
        let resent = self.loss.usual() * (1.0 - self.repaired_share);
        let loss = (COMPENSATED_SHARE * resent).clamp(0.0, MAX_COMPENSATED_LOSS);
        let mut bandwidth = self.bandwidth.get();
        if self.moving.active() {
            // A probe is not held by a stale low estimate (`moving.rs`).
            bandwidth = bandwidth.max(self.moving.recent());
        }
        (bandwidth as f64 / (1.0 - loss)) as u64
    }
}

/// The `q`-quantile of a round's rate samples: the median is the value the
/// bandwidth filter takes for the round (the 90th percentile is a moving
/// bottleneck's high sample, `moving.rs`).
///
/// Linux feeds every sample to the max filter; its timestamps come from the
/// kernel. Ours come from a user-space event loop that shares the CPU, and a
/// sample's two ends are stamped when the loop got to them: on a busy lab
/// machine 1% of the samples of a 250 Mbit/s, 250 ms path read 10-15% above
/// the link's rate, and the max over 10 rounds (thousands of samples) was
/// always one of them, so BBR paced ~15% above the link and kept a standing
/// queue. A round's median is not moved by a few late stamps, and still
/// rises within a round when PROBE_BW's 1.25 phase finds more bandwidth.
fn percentile(samples: &mut [u64], q: f64) -> Option<u64> {
    if samples.is_empty() {
        return None;
    }
    let middle = ((samples.len() as f64 * q) as usize).min(samples.len() - 1);
    Some(*samples.select_nth_unstable(middle).1)
}

/// Bytes sent in `time` at `rate` bytes per second.
fn mul_rate(rate: u64, time: Duration) -> u64 {
    (u128::from(rate) * time.as_nanos() / 1_000_000_000).min(u128::from(u64::MAX)) as u64
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod sim;

#[cfg(test)]
mod cellular_tests;
