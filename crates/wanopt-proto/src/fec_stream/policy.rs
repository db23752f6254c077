//! How much redundancy a path gets: from the loss measured on it (the
//! receiver's reports, which count every numbered datagram's loss before
//! repair; the sender's QUIC losses until the first report), under a
//! budget.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use super::wire::{Params, Report, MAX_DEPTH, MAX_K, MAX_M};

/// The default budget: repairs at most this share of the sources.
pub const DEFAULT_BUDGET: f64 = 0.20;
/// Packets over which the loss rate is averaged (about half a second at
/// 100 Mbit/s).
const HORIZON: f64 = 4_000.0;
/// Loss rate that switches FEC on ...
const ON: f64 = 0.002;
/// ... once this many losses (decayed) were seen.
const ON_LOST: f64 = 2.5;
/// Loss rate under which it goes off again.
const OFF: f64 = 0.0005;
/// Loss rate from which a sparse sender's every block gets repairs
/// ([`Policy::sparse_repairs`]); a fixed code asks for one from this
/// ratio of repairs.
const SPARSE_LOSS: f64 = 0.008;
const SPARSE_RATIO: f64 = 0.02;
/// A sparse sender's datagram may stay lost after repair at most this
/// often: a request that waits for QUIC's resend costs a round trip or
/// two, so at 5% loss a block gets 2 repairs.
const SPARSE_RESIDUAL: f64 = 0.001;
/// Repairs a sparse block gets at most, and a larger partial block.
const SPARSE_MAX: u8 = 4;
const PARTIAL_MAX: u8 = 8;
/// Losses (decayed) the measure must rest on before sparse blocks get
/// repairs: a few short transfers' counts say little (2 losses in 100
/// datagrams on a path that loses 0.5%), and sparse repairs multiply a
/// sparse sender's bytes.
const SPARSE_EVIDENCE: f64 = 16.0;
/// While the path carries datagrams ([`Policy::set_datagrams`]): the loss
/// from which every partial block gets repairs, and the losses the measure
/// must rest on. Nothing resends a call's datagram: two paths that each
/// lose 5% lose 0.25% together, which one repair per block takes to about
/// nothing (without it a duplicated call kept 0.13-0.23%).
const DATAGRAM_SPARSE_LOSS: f64 = 0.001;
const DATAGRAM_EVIDENCE: f64 = 4.0;

/// The flush deadline of every block while the path carries datagrams
/// of UDP flows ([`Policy::set_datagrams`]; a quarter of it for a block
/// of at most [`super::SPARSE`] sources): a lost datagram waits for its
/// block's repairs, and a call's packets may be late by a few
/// milliseconds at most (a 20 ms deadline, half the round trip of a
/// 40 ms path, put 19 ms on a voice stream's 99th percentile at 5% loss).
pub const DATAGRAM_FLUSH: Duration = Duration::from_millis(4);
/// While the path carries datagrams, the repairs beyond a partial block's
/// share of the code may take at most this share of what the node sends
/// ([`Policy::repair_rate`]): the separate budget of real-time traffic,
/// whose small blocks need 2 or 3 repairs each at 5% loss (a video
/// frame of 7 datagrams: 3 for a loss after repair of 0.1%).
pub const DATAGRAM_BUDGET: f64 = 0.5;
/// ... and of what the path carries (a sparse sender's blocks on a path
/// that carries more, such as a lone call).
const DATAGRAM_SHARE: f64 = 0.25;
/// Outside datagram traffic, the share of what the path carries that
/// sparse blocks' repairs beyond their share may take.
const SPARSE_SHARE: f64 = 0.01;

/// What the node's `--fec` asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FecMode {
    /// Never.
    Off,
    /// On paths that lose packets, with redundancy from the measured loss.
    #[default]
    Auto,
    /// Always, with this code.
    Fixed(Params),
}

impl FromStr for FecMode {
    type Err = String;
    fn from_str(s: &str) -> Result<FecMode, String> {
        match s {
            "off" => return Ok(FecMode::Off),
            "auto" => return Ok(FecMode::Auto),
            _ => {}
        }
        let bad = || {
            format!(
                "invalid FEC setting {s:?} (expected auto, off or K:M with K in 1..={MAX_K} \
                 sources and M in 1..={MAX_M} repairs per block)"
            )
        };
        let (k, m) = s.split_once(':').ok_or_else(bad)?;
        let k: u8 = k.trim().parse().map_err(|_| bad())?;
        let m: u8 = m.trim().parse().map_err(|_| bad())?;
        Params::new(k, m, 1).map(FecMode::Fixed).map_err(|_| bad())
    }
}

impl fmt::Display for FecMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FecMode::Off => f.write_str("off"),
            FecMode::Auto => f.write_str("auto"),
            FecMode::Fixed(p) => write!(f, "{}:{}", p.k, p.m),
        }
    }
}

/// What the policy knows of a path and chose for it.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct FecState {
    /// Loss before repair, recent (0..1).
    pub loss: f64,
    /// Mean run of consecutive losses, packets (1 when losses are
    /// isolated; 0 before any loss).
    pub burst: f64,
    /// The code in use, `None` while off.
    pub params: Option<Params>,
}

/// Chooses the code of one path.
#[derive(Debug, Clone)]
pub struct Policy {
    mode: FecMode,
    budget: f64,
    sent: f64,
    lost: f64,
    runs: f64,
    last_quic: Option<(u64, u64)>,
    last_report: Option<Report>,
    /// Reports arrived: they, not QUIC's losses, are the measure.
    reported: bool,
    on: bool,
    /// The congestion controller's estimate of the path's random loss,
    /// when it has one: loss it attributes to a queue is not FEC's.
    random_loss: Option<f64>,
    /// The code chosen, and the estimates since it was.
    chosen: Option<Params>,
    since_change: u32,
    /// The path carries bulk traffic and no stream is ending on it.
    lean: bool,
    /// The path carries datagrams of UDP flows, which nothing resends.
    datagrams: bool,
}

/// How far above the controller's random-loss estimate the loss FEC
/// answers may be.
const RANDOM_ROOM: f64 = 1.5;
/// Estimates (samples and reports) a code is kept at least, unless the
/// loss calls for half as many repairs again or bursts for interleaving
/// two deeper: codes that change with every report close blocks early.
const MIN_HOLD: u32 = 25;

impl Policy {
    /// A policy for `mode` spending at most `budget` (repairs over
    /// sources, 0..=1) in `auto`.
    pub fn new(mode: FecMode, budget: f64) -> Policy {
        Policy {
            mode,
            budget: if budget.is_finite() {
                budget.clamp(0.0, 1.0)
            } else {
                DEFAULT_BUDGET
            },
            sent: 0.0,
            lost: 0.0,
            runs: 0.0,
            last_quic: None,
            last_report: None,
            reported: false,
            on: matches!(mode, FecMode::Fixed(_)),
            random_loss: None,
            chosen: None,
            since_change: 0,
            lean: false,
            datagrams: false,
        }
    }

    /// Whether the path carries datagrams of UDP flows (QUIC DATAGRAM
    /// frames, RFC 9221), which QUIC never resends: what FEC does not
    /// rebuild is lost. Then the code is never lean, every partial block
    /// gets the repairs that keep a datagram's loss after repair under
    /// 0.1% ([`Policy::partial_repairs`]) within a budget of their own
    /// ([`Policy::repair_rate`]), and blocks close within
    /// [`DATAGRAM_FLUSH`] ([`Policy::flush_after`]).
    pub fn set_datagrams(&mut self, datagrams: bool) {
        if datagrams != self.datagrams {
            self.datagrams = datagrams;
            self.since_change = MIN_HOLD;
            self.choose();
        }
    }

    /// Whether the path carries datagrams ([`Policy::set_datagrams`]).
    pub fn datagrams(&self) -> bool {
        self.datagrams
    }

    /// The flush deadline of a block on a path of round-trip time `srtt`:
    /// [`flush_after`], or [`DATAGRAM_FLUSH`] while the path carries
    /// datagrams.
    pub fn flush_after(&self, srtt: Duration) -> Duration {
        if self.datagrams {
            DATAGRAM_FLUSH.min(flush_after(srtt))
        } else {
            flush_after(srtt)
        }
    }

    /// The bytes per second that repairs of partial blocks beyond their
    /// share of the code may take ([`super::Encoder::set_partial_repairs`]),
    /// on a path that carries `carries` bytes per second (the higher of
    /// its capacity and what arrives from the peer) while the node sends
    /// `sending`: 1% of what it carries, so that a moderate stream of
    /// small blocks does not double its bytes on a slow path; while it
    /// carries datagrams, a quarter of that or half of what is sent
    /// ([`DATAGRAM_BUDGET`]), whichever is more.
    pub fn repair_rate(&self, carries: f64, sending: f64) -> f64 {
        let carries = if carries.is_finite() {
            carries.max(0.0)
        } else {
            0.0
        };
        let sending = if sending.is_finite() {
            sending.max(0.0)
        } else {
            0.0
        };
        if self.datagrams {
            (carries * DATAGRAM_SHARE).max(sending * DATAGRAM_BUDGET)
        } else {
            carries * SPARSE_SHARE
        }
    }

    /// Whether the path carries bulk traffic with no stream ending on it:
    /// then repairs stand in for part of what is lost (what they miss
    /// QUIC resends; a bulk transfer's goodput pays for every repair,
    /// measured: 128:8 at 5% loss cost it 4%); a sparse sender and the end of a
    /// transfer, whose lost datagrams would each cost a round trip, get
    /// the full code. The code follows at once.
    pub fn set_lean(&mut self, lean: bool) {
        if lean != self.lean {
            self.lean = lean;
            self.since_change = MIN_HOLD;
            self.choose();
        }
    }

    /// The congestion controller's estimate of the path's random loss
    /// (wanopt's BBR learns it from rounds without a queue): the loss FEC
    /// answers is at most 1.5 times this, so that loss at an overflowing queue,
    /// which the controller answers, never raises the code.
    pub fn set_random_loss(&mut self, loss: Option<f64>) {
        self.random_loss = loss.filter(|l| l.is_finite() && *l >= 0.0);
    }

    fn add(&mut self, sent: f64, lost: f64, runs: f64) {
        if sent <= 0.0 {
            return;
        }
        let keep = (-sent / HORIZON).exp();
        self.sent = self.sent * keep + sent;
        self.lost = self.lost * keep + lost.min(sent);
        self.runs = self.runs * keep + runs.min(lost);
        let rate = self.loss();
        if self.mode == FecMode::Auto {
            if !self.on && rate >= ON && self.lost >= ON_LOST {
                self.on = true;
            } else if self.on && rate < OFF {
                self.on = false;
            }
        }
        self.choose();
    }

    /// Starts from `other`'s measure of the same path while this policy has
    /// measured fewer losses than it and too few to act on: a second
    /// strand of a path (a call's packets, 50 a second) would need seconds
    /// to measure what the first already knows (16 losses at 5% are 320
    /// packets).
    pub fn seed_from(&mut self, other: &Policy) {
        if self.lost >= SPARSE_EVIDENCE || other.lost <= self.lost {
            return;
        }
        self.sent = other.sent;
        self.lost = other.lost;
        self.runs = other.runs;
        if self.mode == FecMode::Auto {
            let rate = self.loss();
            self.on = rate >= ON && self.lost >= ON_LOST;
        }
        self.choose();
    }

    /// Re-chooses the code (`auto`), keeping the last one for a while
    /// unless the loss rose well beyond it.
    fn choose(&mut self) {
        self.since_change = self.since_change.saturating_add(1);
        let candidate = match self.mode {
            FecMode::Auto if self.on => code_for(
                self.loss(),
                self.burst(),
                self.budget,
                self.lean && !self.datagrams,
            ),
            _ => None,
        };
        let keep = match (self.chosen, candidate) {
            (Some(old), Some(new)) => {
                self.since_change < MIN_HOLD
                    && 2 * u32::from(new.m) < 3 * u32::from(old.m)
                    && new.depth <= old.depth + 1
            }
            _ => false,
        };
        if !keep && candidate != self.chosen {
            self.chosen = candidate;
            self.since_change = 0;
        }
    }

    /// The sender's QUIC totals (packets sent, declared lost): the loss
    /// measure until the receiver reports (QUIC sees only what repair did
    /// not rebuild, and no acknowledgement's loss). `congested`: the
    /// congestion controller found these losses at a growing queue, which
    /// FEC must not answer.
    pub fn on_quic(&mut self, sent_total: u64, lost_total: u64, congested: bool) {
        let delta = match self.last_quic {
            Some((s, l)) if sent_total >= s && lost_total >= l => {
                Some((sent_total - s, lost_total - l))
            }
            _ => None,
        };
        self.last_quic = Some((sent_total, lost_total));
        let Some((sent, lost)) = delta else {
            return;
        };
        if self.reported || self.params().is_some() || congested {
            return;
        }
        // Bursts are not seen here: each loss counts as its own run.
        self.add(sent as f64, lost as f64, lost as f64);
    }

    /// A report of the receiver (counts before repair, of the numbered
    /// datagrams: while the code is on, or off in `auto`).
    pub fn on_report(&mut self, report: Report, congested: bool) {
        self.reported = true;
        let Some(last) = self.last_report.replace(report) else {
            return;
        };
        let d = report.since(&last);
        // A report from before a restart, or nonsense: start again.
        if d.received > 1 << 30 || d.lost > 1 << 30 {
            return;
        }
        if congested || self.mode == FecMode::Off {
            return;
        }
        let sent = f64::from(d.received) + f64::from(d.lost);
        self.add(sent, f64::from(d.lost), f64::from(d.runs));
    }

    /// Loss before repair, recent, at most half as much again as what the
    /// controller takes for random loss.
    pub fn loss(&self) -> f64 {
        let measured = if self.sent > 0.0 {
            self.lost / self.sent
        } else {
            0.0
        };
        match self.random_loss {
            // The controller's estimate lags and leaves out rounds that
            // merely look queued (jitter): it bounds, with room, rather
            // than replaces the measure.
            Some(random) => measured.min(RANDOM_ROOM * random),
            None => measured,
        }
    }

    /// The mean run of consecutive losses.
    pub fn burst(&self) -> f64 {
        if self.runs > 0.0 {
            self.lost / self.runs
        } else {
            0.0
        }
    }

    /// The code for the path now.
    pub fn params(&self) -> Option<Params> {
        match self.mode {
            FecMode::Off => None,
            FecMode::Fixed(p) => Some(p),
            FecMode::Auto => self.chosen,
        }
    }

    /// The repairs a sparse sender's block gets at least
    /// ([`super::Encoder::set_sparse_repairs`]). In `auto`, from about 1%
    /// loss, as many as keep a datagram of a full sparse block lost after
    /// repair at most 0.1% of the time (independent losses at the
    /// measured rate: 1 at 1%, 2 at 3%, 3 at 5%, 4 at 10%), once 16
    /// losses were measured; at less loss a
    /// sparse sender's datagrams ride on the carried fractions like the
    /// rest (a repair for each would double a chatty control connection's
    /// bytes on a slow link, for a loss that rarely strikes). A fixed
    /// code of 2% or more: one.
    pub fn sparse_repairs(&self) -> u8 {
        self.partial_repairs()[super::encoder::SPARSE]
    }

    /// The repairs a block closed by the deadline gets at least, by its
    /// number of sources up to [`super::encoder::PARTIAL`]
    /// ([`super::Encoder::set_partial_repairs`]): the same rule as
    /// [`Policy::sparse_repairs`] for every size (at 1% loss 1 repair up to
    /// 10 sources, 2 from 11; at 5% 3 up to 10, then 4, 5 from 19 and 6
    /// from 28), at most 4 up to 4 sources and 8 beyond; a block of fewer
    /// than 4 gets what one of 4 gets. Several interactive connections at
    /// once close blocks of 5 to 20 requests, each worth a repair as a lone
    /// one is (8 connections' 1 KB exchanges at 150 ms and 1-5% loss had a
    /// 99th percentile of 325-353 ms, a resend's round trip, with only
    /// their blocks' share).
    pub fn partial_repairs(&self) -> [u8; super::encoder::PARTIAL + 1] {
        let mut table = [0; super::encoder::PARTIAL + 1];
        match self.mode {
            FecMode::Off => {}
            FecMode::Fixed(p) => {
                table[1..=super::encoder::SPARSE].fill(u8::from(p.ratio() >= SPARSE_RATIO));
            }
            FecMode::Auto => {
                let p = self.loss();
                let (floor, evidence) = match self.datagrams {
                    true => (DATAGRAM_SPARSE_LOSS, DATAGRAM_EVIDENCE),
                    false => (SPARSE_LOSS, SPARSE_EVIDENCE),
                };
                if self.chosen.is_none() || p < floor || self.lost < evidence {
                    return table;
                }
                for (count, entry) in table.iter_mut().enumerate().skip(1) {
                    let most = if count <= super::encoder::SPARSE {
                        SPARSE_MAX
                    } else {
                        PARTIAL_MAX
                    };
                    *entry = (1..=most)
                        .find(|&m| {
                            let others = count + usize::from(m) - 1;
                            p * at_least(usize::from(m), others, p) <= SPARSE_RESIDUAL
                        })
                        .unwrap_or(most);
                }
                // A block of fewer sources than a sparse one gets as many
                // as a sparse one: a lone request is the one most worth it.
                let sparse = table[super::encoder::SPARSE];
                table[1..super::encoder::SPARSE].fill(sparse);
            }
        }
        table
    }

    /// What the policy knows and chose.
    pub fn state(&self) -> FecState {
        FecState {
            loss: self.loss(),
            burst: self.burst(),
            params: self.params(),
        }
    }
}

/// The flush deadline for a path of round-trip time `srtt`: half of it,
/// 4 to 50 ms (a quarter of that for a sparse sender's block). A repair
/// that comes half a round trip after its block still beats QUIC's loss
/// detection and retransmission by more than a round trip, and a bulk
/// sender's blocks fill to their full length first.
pub fn flush_after(srtt: Duration) -> Duration {
    (srtt / 2).clamp(Duration::from_millis(4), Duration::from_millis(50))
}

/// The chance that `n` independent trials at `p` succeed `m` times or
/// more.
fn at_least(m: usize, n: usize, p: f64) -> f64 {
    let mut below = 0.0;
    let mut term = (1.0 - p).powi(n as i32);
    for i in 0..m.min(n + 1) {
        below += term;
        term *= (n - i) as f64 / (i + 1) as f64 * p / (1.0 - p);
    }
    (1.0 - below).max(0.0)
}

/// The code for a loss rate and mean burst: repairs of about 1.6 x loss +
/// 0.4% of the sources (so the wire overhead stays under 2 x loss + 1%),
/// or 0.6 x loss + 0.2% when `lean` (bulk traffic: the controller keeps
/// its rate through random loss, so repairs there cost goodput and buy
/// little but fewer resends), at most `budget`, over the longest
/// blocks (which rebuild the most for a given overhead), interleaved as
/// deep as the bursts are long.
pub fn code_for(loss: f64, burst: f64, budget: f64, lean: bool) -> Option<Params> {
    let ratio = if lean {
        0.6 * loss + 0.002
    } else {
        1.6 * loss + 0.004
    };
    let ratio = ratio.min(budget);
    let k = MAX_K;
    let m = (ratio * f64::from(k)).round();
    if m < 1.0 {
        // The budget does not pay for one repair per longest block.
        return None;
    }
    let m = (m as u8).min(MAX_M);
    let depth = (burst.round() as u8).clamp(1, MAX_DEPTH);
    Params::new(k, m, depth).ok()
}
