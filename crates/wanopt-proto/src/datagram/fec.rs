//! Continuous FEC under QUIC (`wanopt_proto::fec_stream`), the node's
//! side: per destination an encoder and the policy that sizes it, per
//! peer that sends FEC a decoder, and what was rebuilt or held back,
//! waiting to be handed to quinn.
//!
//! Only peers the node has a connection with (those
//! [`super::DatagramLayer::handle_sample`] samples) get any state: a stranger's
//! FEC datagrams are unwrapped and passed on (QUIC drops them), never kept.

use std::collections::{HashMap, VecDeque};
use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, Instant};

use super::event::Event;
use super::sample::{PathSample, SAMPLE_INTERVAL};
use crate::fec_stream::{
    self, Decoder, Encoder, FecMode, Kind, Policy, Report, Strand, REPORT_LEN,
};

/// How often a receiver reports its counts to a peer that sends it FEC
/// (when sources arrived since the last report): often enough that the
/// repairs the sender's controller is told of spread over its rounds.
pub const REPORT_INTERVAL: Duration = Duration::from_millis(20);
/// ... and while no repair arrived since the last report (the sender only
/// measures the loss): every other sample of the sender's paths.
pub const MEASURE_REPORT_INTERVAL: Duration = Duration::from_millis(200);
/// Samples ([`SAMPLE_INTERVAL`]) after the controller's last
/// congested round during which losses are not FEC's to answer.
const CONGESTION_HOLD: u8 = 3;
/// Samples after the controller's last filled round during which its
/// random-loss estimate still bounds what FEC answers.
const FILLING_HOLD: u8 = 5;
/// Samples after the last QUIC DATAGRAM frame sent during which the path
/// still counts as carrying datagrams (a call's silence, a video's
/// pause: the code must not go lean and back with each).
const DATAGRAM_HOLD: u8 = 20;
/// The call strand's repairs beyond its code's share, over its own bytes.
const CALL_BUDGET: f64 = 1.0;
/// The call strand's block deadline: a video frame (7 datagrams paced
/// over about 4 ms at 20 Mbit/s) fits one block; a lost datagram waits
/// at most this for its repairs.
const CALL_FLUSH: Duration = Duration::from_millis(6);
/// Datagrams held for quinn at most (rebuilt ones, and those a received
/// batch could not keep in place).
const HELD: usize = 256;

pub use crate::fec_stream::flush_after;

/// The sending side towards one peer.
#[derive(Debug)]
pub(super) struct Sender {
    pub(super) encoder: Encoder,
    pub(super) policy: Policy,
    /// The peer's last report.
    pub(super) report: Option<Report>,
    pub(super) flush_after: Duration,
    /// The local address the connection sends from (for repairs sent by
    /// the task, not in a transmit of quinn's).
    pub(super) local_ip: Option<IpAddr>,
    /// Congestive rounds of the controller at the last sample.
    pub(super) congested_rounds: u64,
    /// Samples for which losses still count as congestion (QUIC declares
    /// a loss a round trip or more after the round that judged it).
    pub(super) congested_hold: u8,
    /// The controller saw congestion lately.
    pub(super) congested: bool,
    /// Sources sent as of the last sample that saw congestion: the
    /// peer's counts up to there hold the congestion's losses (it counts
    /// in sequence order, up to 256 sources behind the newest, so on a
    /// slow path long after the controller's rounds judged them).
    pub(super) congested_sources: u64,
    /// Filled rounds of the controller at the last sample, and samples
    /// for which the sender still counts as driving the path.
    pub(super) filled_rounds: u64,
    pub(super) filling_hold: u8,
    /// What sparse blocks' repairs may take, bytes per second.
    pub(super) sparse_rate: f64,
    /// QUIC DATAGRAM frames sent as of the last sample, and samples for
    /// which the path still counts as carrying datagrams.
    pub(super) datagrams_sent: u64,
    pub(super) datagram_hold: u8,
    /// The call strand: the QUIC datagrams that carry real-time UDP flows
    /// (quinn marks them), coded apart from the rest.
    pub(super) calls: CallSender,
}

/// The call strand's sending side towards one peer: short blocks and a
/// full code, whatever the bulk beside it does.
#[derive(Debug)]
pub(super) struct CallSender {
    pub(super) encoder: Encoder,
    pub(super) policy: Policy,
    pub(super) flush_after: Duration,
    pub(super) sparse_rate: f64,
    /// The peer's last report of this strand.
    pub(super) report: Option<Report>,
    /// Source bytes as of the last sample, and samples for which the
    /// strand still counts as in use.
    pub(super) source_bytes: u64,
    pub(super) hold: u8,
}

impl CallSender {
    fn new(mode: FecMode, budget: f64) -> CallSender {
        let mut policy = Policy::new(mode, budget);
        policy.set_datagrams(true);
        CallSender {
            encoder: Encoder::of(Strand::Calls),
            policy,
            flush_after: fec_stream::DATAGRAM_FLUSH,
            sparse_rate: 0.0,
            report: None,
            source_bytes: 0,
            hold: 0,
        }
    }
}

/// The receiving side of one strand from one peer.
#[derive(Debug, Default)]
pub(super) struct StrandReceiver {
    pub(super) decoder: Decoder,
    /// Sources since the last report, and when it went.
    pub(super) unreported: u64,
    pub(super) reported_at: Option<Instant>,
    /// When the first source not reported yet arrived.
    pub(super) waiting_since: Option<Instant>,
    /// Repairs received as of the last report.
    pub(super) repairs_reported: u64,
}

/// The receiving side from one peer.
#[derive(Debug, Default)]
pub(super) struct Receiver {
    pub(super) bulk: StrandReceiver,
    pub(super) calls: StrandReceiver,
    /// The local address the peer's datagrams arrive at.
    pub(super) local_ip: Option<IpAddr>,
}

impl Receiver {
    fn strand(&mut self, strand: Strand) -> &mut StrandReceiver {
        match strand {
            Strand::Bulk => &mut self.bulk,
            Strand::Calls => &mut self.calls,
        }
    }
}

/// The node's FEC state.
#[derive(Debug)]
pub(super) struct FecPeers {
    pub(super) mode: FecMode,
    pub(super) budget: f64,
    pub(super) senders: HashMap<SocketAddr, Sender>,
    pub(super) receivers: HashMap<SocketAddr, Receiver>,
    /// Datagrams waiting to be handed to quinn.
    pub(super) held: VecDeque<(SocketAddr, Option<IpAddr>, Vec<u8>)>,
    /// Repairs and reports to send (destination, bytes).
    pub(super) outgoing: Vec<(SocketAddr, Vec<u8>)>,
    scratch: Vec<Vec<u8>>,
    /// Repairs the peers reported, and repairs refused.
    pub(super) events: VecDeque<Event>,
}

impl Default for FecPeers {
    fn default() -> Self {
        FecPeers {
            mode: FecMode::Off,
            budget: fec_stream::DEFAULT_BUDGET,
            senders: HashMap::new(),
            receivers: HashMap::new(),
            held: VecDeque::new(),
            outgoing: Vec::new(),
            scratch: Vec::new(),
            events: VecDeque::new(),
        }
    }
}

/// What a path carries, for [`FecPeers::on_sample`].
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Traffic {
    /// Bulk traffic (bulk and no stream ending: the lean code).
    pub(super) bulk: bool,
    /// A stream is ending on it.
    pub(super) ending: bool,
    /// Its paths duplicate.
    pub(super) duplicating: bool,
}

impl FecPeers {
    /// Whether any destination is sent wrapped datagrams (a code, or
    /// numbered for the peer to measure the loss).
    pub(super) fn any_wraps(&self) -> bool {
        self.senders.values().any(|s| s.encoder.wraps())
    }

    /// A sample of the connection to `peer`: its QUIC totals, its
    /// controller's count of congestive rounds and its estimate of the
    /// random loss, what the path carries (`traffic`), the path's
    /// capacity and what this node sends on it, bytes per second.
    pub(super) fn on_sample(
        &mut self,
        peer: SocketAddr,
        sample: &PathSample,
        traffic: Traffic,
        capacity: Option<f64>,
        sending: f64,
    ) {
        let Traffic {
            bulk,
            ending,
            duplicating,
        } = traffic;
        let (mode, budget) = (self.mode, self.budget);
        let peer_numbers = self.receivers.get(&peer).is_some_and(|r| {
            r.bulk.decoder.stats().received > 0 || r.calls.decoder.stats().received > 0
        });
        let sender = self.senders.entry(peer).or_insert_with(|| Sender {
            encoder: Encoder::new(),
            policy: Policy::new(mode, budget),
            report: None,
            local_ip: None,
            flush_after: flush_after(sample.srtt),
            congested_rounds: sample.congested_rounds.unwrap_or(0),
            congested_hold: 0,
            congested: false,
            congested_sources: 0,
            filled_rounds: sample.filled_rounds.unwrap_or(0),
            filling_hold: 0,
            sparse_rate: 0.0,
            datagrams_sent: sample.datagrams_sent,
            datagram_hold: 0,
            calls: CallSender::new(mode, budget),
        });
        // In `auto` the datagrams are numbered, for the peer to count what
        // this direction loses, once either direction has lost one (this
        // node's QUIC declared a loss, or the peer numbers its own): on a
        // clean path nothing is wrapped (on loopback the numbering and the
        // copies it takes cost 13% of the throughput).
        if mode == FecMode::Auto
            && !sender.encoder.wraps()
            && (sample.lost_packets > 0 || peer_numbers)
        {
            sender.encoder.set_measuring(true);
        }
        if let Some(rounds) = sample.congested_rounds {
            if rounds != sender.congested_rounds {
                sender.congested_hold = CONGESTION_HOLD;
            } else {
                sender.congested_hold = sender.congested_hold.saturating_sub(1);
            }
            sender.congested = sender.congested_hold > 0;
            sender.congested_rounds = rounds;
            if sender.congested {
                sender.congested_sources = sender.encoder.stats().sources;
            }
        }
        if let Some(rounds) = sample.filled_rounds {
            if rounds != sender.filled_rounds {
                sender.filling_hold = FILLING_HOLD;
            } else {
                sender.filling_hold = sender.filling_hold.saturating_sub(1);
            }
            sender.filled_rounds = rounds;
        }
        // The controller's bound holds once it has left its startup and
        // while the sender drives the path (rounds that were not
        // app-limited): a sparse sender or an acknowledgement stream
        // overflows no queue, its controller learns little of the path,
        // and after a bulk transfer the estimate is stale.
        let filling = sample.filled_rounds.is_none() || sender.filling_hold > 0;
        let bounded = !sample.startup && filling;
        sender
            .policy
            .set_random_loss(sample.random_loss.filter(|_| bounded));
        sender.policy.set_lean(bulk && !ending);
        // UDP flows' datagrams went out since the last sample: the path
        // carries traffic that nothing resends. Not while the sender also
        // drives the path (its controller's rounds are filled: a bulk
        // transfer; without wanopt's BBR, the bulk share of the capacity):
        // the datagrams share the bulk's blocks then, and repairs for all
        // of them at the datagrams' budget, which the controller does not
        // count, overflow the path's queue (next to a bulk download at 5%
        // loss, 20 Mbit/s and a 1-BDP queue: 34% repairs, 12% lost before
        // repair instead of 5%, the delay's median up by 35 ms).
        if sample.datagrams_sent != sender.datagrams_sent {
            sender.datagram_hold = DATAGRAM_HOLD;
        } else {
            sender.datagram_hold = sender.datagram_hold.saturating_sub(1);
        }
        sender.datagrams_sent = sample.datagrams_sent;
        let driving = match sample.filled_rounds {
            Some(_) => sender.filling_hold > 0,
            None => bulk,
        };
        // The call strand: numbered whenever the bulk strand is (a batch
        // is wrapped whole), its own code from its own reports, its budget
        // from what it sends. Every loss counts, congestion's too: nothing
        // resends a call's datagram, and its repairs are a small load.
        let calls = &mut sender.calls;
        calls.encoder.set_measuring(sender.encoder.wraps());
        let call_bytes = calls.encoder.stats().source_bytes;
        let call_rate =
            call_bytes.saturating_sub(calls.source_bytes) as f64 / SAMPLE_INTERVAL.as_secs_f64();
        if call_bytes != calls.source_bytes {
            calls.hold = DATAGRAM_HOLD;
        } else {
            calls.hold = calls.hold.saturating_sub(1);
        }
        calls.source_bytes = call_bytes;
        // Until it has measured enough losses of its own, the bulk
        // strand's measure of the same path (a call's 50 packets a second
        // would take seconds to show 16 losses); not when the paths
        // duplicate: the call's packets then lose what both paths lose
        // together, the bulk's what one does.
        if !duplicating {
            calls.policy.seed_from(&sender.policy);
        }
        // Beside a bulk transfer, repairs beyond the code's share at most
        // the strand's own bytes: they are sent outside the controller,
        // and at a quarter of the path (the budget of a call alone) they
        // took 3 of a 20 Mbit/s path's 16 Mbit/s of bulk and filled its
        // queue (voice p50 +20 ms). Alone, a call's lone datagrams get
        // their three repairs each.
        calls.sparse_rate = if driving {
            call_rate * CALL_BUDGET
        } else {
            calls.policy.repair_rate(capacity.unwrap_or(0.0), call_rate)
        };
        calls
            .policy
            .on_quic(sample.sent_packets, sample.lost_packets, false);
        calls.flush_after = CALL_FLUSH.min(flush_after(sample.srtt));
        // Datagrams not in the call strand (flows of no real-time class)
        // get the datagram code of the bulk strand while no bulk drives
        // the path, as before; while the call strand is in use it has them.
        let calls_in_use = calls.hold > 0;
        sender
            .policy
            .set_datagrams(sender.datagram_hold > 0 && !driving && !calls_in_use);
        sender.sparse_rate = sender.policy.repair_rate(capacity.unwrap_or(0.0), sending);
        sender
            .policy
            .on_quic(sample.sent_packets, sample.lost_packets, sender.congested);
        sender.flush_after = sender.policy.flush_after(sample.srtt);
        self.apply(peer);
    }

    /// Gives the encoder towards `peer` the policy's code; repairs of
    /// blocks closed by a change go to `outgoing`.
    fn apply(&mut self, peer: SocketAddr) {
        let Some(sender) = self.senders.get_mut(&peer) else {
            return;
        };
        let mut repairs = std::mem::take(&mut self.scratch);
        sender
            .encoder
            .set_params(sender.policy.params(), sender.flush_after, &mut repairs);
        sender
            .encoder
            .set_partial_repairs(sender.policy.partial_repairs(), sender.sparse_rate);
        let calls = &mut sender.calls;
        calls
            .encoder
            .set_params(calls.policy.params(), calls.flush_after, &mut repairs);
        calls
            .encoder
            .set_partial_repairs(calls.policy.partial_repairs(), calls.sparse_rate);
        self.outgoing.extend(repairs.drain(..).map(|r| (peer, r)));
        self.scratch = repairs;
    }

    /// Holds a datagram for quinn's next poll.
    pub(super) fn hold(&mut self, from: SocketAddr, dst_ip: Option<IpAddr>, datagram: &[u8]) {
        if self.held.len() < HELD {
            self.held.push_back((from, dst_ip, datagram.to_vec()));
        }
    }

    /// Forgets a peer whose connection is gone.
    pub(super) fn remove(&mut self, peer: SocketAddr) {
        self.senders.remove(&peer);
        self.receivers.remove(&peer);
    }

    /// The next datagrams of `peer` went out as sources (`datagrams`, as
    /// quinn gave them, those of bit i of `calls` in the call strand);
    /// repairs of blocks they closed go to `outgoing`.
    pub(super) fn on_sent(
        &mut self,
        now: Instant,
        peer: SocketAddr,
        datagrams: &[u8],
        size: usize,
        calls: u64,
    ) {
        let Some(sender) = self.senders.get_mut(&peer) else {
            return;
        };
        let mut repairs = std::mem::take(&mut self.scratch);
        for (i, d) in datagrams.chunks(size.max(1)).enumerate() {
            if in_calls(calls, i) {
                sender.calls.encoder.on_sent(now, d, &mut repairs);
            } else {
                sender.encoder.on_sent(now, d, &mut repairs);
            }
        }
        self.outgoing.extend(repairs.drain(..).map(|r| (peer, r)));
        self.scratch = repairs;
    }

    /// Closes due blocks and makes due reports, into `outgoing`; returns
    /// when to look again.
    pub(super) fn poll(&mut self, now: Instant) -> Option<Instant> {
        let mut repairs = std::mem::take(&mut self.scratch);
        let mut next: Option<Instant> = None;
        for (peer, sender) in &mut self.senders {
            sender.encoder.flush_due(now, &mut repairs);
            sender.calls.encoder.flush_due(now, &mut repairs);
            self.outgoing.extend(repairs.drain(..).map(|r| (*peer, r)));
            next = min_time(next, sender.encoder.poll_timeout());
            next = min_time(next, sender.calls.encoder.poll_timeout());
        }
        self.scratch = repairs;
        for (peer, receiver) in &mut self.receivers {
            for strand in [Strand::Bulk, Strand::Calls] {
                let receiver = receiver.strand(strand);
                if receiver.unreported == 0 {
                    continue;
                }
                let repairs = receiver.decoder.stats().repairs;
                let interval = if repairs > receiver.repairs_reported {
                    REPORT_INTERVAL
                } else {
                    MEASURE_REPORT_INTERVAL
                };
                let due = receiver.reported_at.map_or(now, |at| at + interval);
                if due <= now {
                    let report = receiver.decoder.report().to_bytes_of(strand);
                    self.outgoing.push((*peer, report.to_vec()));
                    receiver.unreported = 0;
                    receiver.waiting_since = None;
                    receiver.reported_at = Some(now);
                    receiver.repairs_reported = repairs;
                } else {
                    next = min_time(next, Some(due));
                }
            }
        }
        next
    }

    /// When [`FecPeers::poll`] has something to do next: a block's flush
    /// deadline or a report due.
    pub(super) fn next_timeout(&self) -> Option<Instant> {
        let mut next: Option<Instant> = None;
        for sender in self.senders.values() {
            next = min_time(next, sender.encoder.poll_timeout());
            next = min_time(next, sender.calls.encoder.poll_timeout());
        }
        for receiver in self.receivers.values() {
            for receiver in [&receiver.bulk, &receiver.calls] {
                if receiver.unreported == 0 {
                    continue;
                }
                let interval = if receiver.decoder.stats().repairs > receiver.repairs_reported {
                    REPORT_INTERVAL
                } else {
                    MEASURE_REPORT_INTERVAL
                };
                let due = receiver
                    .reported_at
                    .map(|at| at + interval)
                    .or(receiver.waiting_since);
                next = min_time(next, due);
            }
        }
        next
    }

    /// Wraps the datagrams of a transmit to `destination` (`size` bytes
    /// apart) as sources into `wire`: those that `flagged` marks (real-time
    /// UDP flows) in the call strand when it is coded, the rest in the
    /// bulk strand, each strand numbering its own. Returns the datagrams
    /// in the call strand (bit i: the i-th); `None` when `destination` is
    /// not sent FEC.
    pub(super) fn wrap(
        &mut self,
        destination: SocketAddr,
        src_ip: Option<IpAddr>,
        (contents, size): (&[u8], usize),
        flagged: u64,
        wire: &mut Vec<u8>,
    ) -> Option<u64> {
        let sender = self.senders.get_mut(&destination)?;
        if !sender.encoder.wraps() {
            return None;
        }
        let count = contents.len().div_ceil(size);
        wire.clear();
        wire.reserve(contents.len() + count * fec_stream::SOURCE_HEADER);
        let calls = if sender.calls.encoder.wraps() {
            flagged
        } else {
            0
        };
        let (mut bulk_n, mut calls_n) = (0, 0);
        for (i, datagram) in contents.chunks(size).enumerate() {
            if in_calls(calls, i) {
                sender.calls.encoder.wrap(calls_n, datagram, wire);
                calls_n += 1;
            } else {
                sender.encoder.wrap(bulk_n, datagram, wire);
                bulk_n += 1;
            }
        }
        sender.local_ip = src_ip;
        Some(calls)
    }

    /// Takes one datagram of this layer received from `from` at `now`;
    /// returns the QUIC datagram it carries for a source (to be handed
    /// on), `None` for a repair or a report (consumed; rebuilt datagrams
    /// are held).
    pub(super) fn on_received<'a>(
        &mut self,
        now: Instant,
        from: SocketAddr,
        dst_ip: Option<IpAddr>,
        (kind, strand): (Kind, Strand),
        datagram: &'a [u8],
    ) -> Option<&'a [u8]> {
        let known = self.senders.contains_key(&from);
        match kind {
            Kind::Source => {
                if !known {
                    return fec_stream::parse_source(datagram).ok().map(|(_, d)| d);
                }
                let receiver = self.receivers.entry(from).or_default().strand(strand);
                if receiver.unreported == 0 {
                    receiver.waiting_since = Some(now);
                }
                receiver.unreported += 1;
                receiver.decoder.on_source(datagram).ok()
            }
            Kind::Repair => {
                let receiver = self.receivers.get_mut(&from)?.strand(strand);
                let mut rebuilt = std::mem::take(&mut self.scratch);
                if let Err(error) = receiver.decoder.on_repair(datagram, &mut rebuilt) {
                    self.events.push_back(Event::RepairRefused { from, error });
                }
                for d in rebuilt.drain(..) {
                    if self.held.len() < HELD {
                        self.held.push_back((from, dst_ip, d));
                    }
                }
                self.scratch = rebuilt;
                None
            }
            Kind::Report => {
                if datagram.len() != REPORT_LEN {
                    return None;
                }
                let sender = self.senders.get_mut(&from)?;
                let Ok(report) = fec_stream::parse_report(datagram) else {
                    return None;
                };
                let last = match strand {
                    Strand::Bulk => sender.report.replace(report),
                    Strand::Calls => sender.calls.report.replace(report),
                };
                // Both strands' repaired packets are the controller's.
                if let Some(last) = last {
                    let d = report.since(&last);
                    if d.recovered > 0 && d.recovered < 1 << 20 {
                        self.events.push_back(Event::Repaired {
                            peer: from,
                            packets: u64::from(d.recovered),
                        });
                    }
                }
                if strand == Strand::Calls {
                    sender.calls.policy.on_report(report, false);
                    self.apply(from);
                    return None;
                }
                // The report counts the sources from the first up to
                // `received + lost`: while that is short of the last
                // congested sample's, its losses are the congestion's.
                let counted = report.received.wrapping_add(report.lost);
                let behind = (sender.congested_sources as u32).wrapping_sub(counted) as i32 > 0;
                sender.policy.on_report(report, sender.congested || behind);
                self.apply(from);
                None
            }
        }
    }
}

/// Whether datagram `i` of a transmit is in the call strand (bit `i` of
/// `calls`; none past the 64th).
pub(super) fn in_calls(calls: u64, i: usize) -> bool {
    i < 64 && calls >> i & 1 == 1
}

fn min_time(a: Option<Instant>, b: Option<Instant>) -> Option<Instant> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn traffic(bulk: bool) -> Traffic {
        Traffic {
            bulk,
            ..Traffic::default()
        }
    }

    fn sample(datagrams_sent: u64) -> PathSample {
        PathSample {
            sent_packets: 0,
            lost_packets: 0,
            srtt: Duration::from_millis(40),
            rate_estimate: None,
            udp_tx_bytes: 0,
            udp_rx_bytes: 0,
            mtu: 1472,
            datagrams_sent,
            congested_rounds: None,
            filled_rounds: None,
            random_loss: None,
            startup: false,
        }
    }

    #[test]
    fn a_path_that_sends_datagrams_and_no_bulk_gets_short_blocks_until_they_stop_for_two_seconds() {
        let peer: SocketAddr = "192.0.2.1:4433".parse().unwrap();
        let mut fec = FecPeers {
            mode: FecMode::Auto,
            ..FecPeers::default()
        };
        fec.on_sample(peer, &sample(0), traffic(false), Some(2.5e6), 2e6);
        let sender = &fec.senders[&peer];
        assert!(!fec.status(peer).datagrams);
        assert_eq!(sender.flush_after, Duration::from_millis(20));
        assert_eq!(sender.sparse_rate, 25_000.0);
        // A UDP flow's datagrams went out since.
        fec.on_sample(peer, &sample(50), traffic(false), Some(2.5e6), 2e6);
        let sender = &fec.senders[&peer];
        assert!(fec.status(peer).datagrams);
        assert_eq!(sender.flush_after, fec_stream::DATAGRAM_FLUSH);
        assert_eq!(sender.sparse_rate, 1e6);
        // A pause shorter than the hold keeps it; a longer one ends it.
        for _ in 0..DATAGRAM_HOLD - 1 {
            fec.on_sample(peer, &sample(50), traffic(false), Some(2.5e6), 2e6);
        }
        assert!(fec.status(peer).datagrams);
        fec.on_sample(peer, &sample(50), traffic(false), Some(2.5e6), 2e6);
        assert!(!fec.status(peer).datagrams);
        assert_eq!(fec.senders[&peer].flush_after, Duration::from_millis(20));
        // Next to bulk traffic, the bulk's code: without wanopt's BBR, by
        // the bulk flag ...
        fec.on_sample(peer, &sample(90), traffic(true), Some(2.5e6), 2e6);
        assert!(!fec.status(peer).datagrams);
        fec.on_sample(peer, &sample(99), traffic(false), Some(2.5e6), 2e6);
        assert!(fec.status(peer).datagrams);
        // ... with it, while its rounds are filled (an acknowledgement
        // stream above the bulk share of a slow estimate is no bulk).
        let rounds = |filled, datagrams| PathSample {
            filled_rounds: Some(filled),
            ..sample(datagrams)
        };
        fec.on_sample(peer, &rounds(0, 100), traffic(true), Some(2.5e6), 2e6);
        assert!(fec.status(peer).datagrams);
        fec.on_sample(peer, &rounds(5, 101), traffic(true), Some(2.5e6), 2e6);
        assert!(!fec.status(peer).datagrams);
    }
}
