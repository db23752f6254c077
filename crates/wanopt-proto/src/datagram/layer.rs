//! The datagram layer's state machine, [`DatagramLayer`]: everything
//! under QUIC in one value that takes the time and bytes through
//! `handle_*` and gives datagrams, deadlines and events through `poll_*`,
//! in the shape of quinn-proto's `Connection`.

use std::collections::{HashMap, VecDeque};
use std::net::{IpAddr, SocketAddr};
use std::ops::DerefMut;
use std::time::Instant;

use super::duplication::{DuplicationMode, DuplicationStatus};
use super::event::Event;
use super::fec::{FecPeers, Traffic};
use super::fec_status::FecStatus;
use super::parity::ParityReceivers;
use super::paths::{is_probe, BondBudget, Hop, PathSpec, PathTable, PathsStatus};
use super::receive::{any_segment, is_layer, map_received, take_layer};
use super::sample::{higher, PathMemory, PathSample};
use super::transmit::{flagged_len, flagged_runs, rewrite, Ecn, Received, Sending, Transmit};
use crate::dup::{TailDup, TailParams, TailStats, BUSY_SHARE, MAX_TAIL_DATAGRAMS};
use crate::fec;
use crate::fec_stream::{self, FecMode, SOURCE_HEADER};
use crate::path::{PathKey, PathMode, ProbeBytes, Side, Sla};

/// What the tail policy keeps of a datagram besides its bytes.
type Meta = (Option<Ecn>, Option<IpAddr>);

/// `transmit` as wrapped for `calls` (in `wire`), or unchanged.
fn wire_of<'a>(wire: &'a [u8], transmit: &Transmit<'a>, calls: Option<u64>) -> Transmit<'a> {
    match calls {
        Some(_) => Transmit {
            contents: wire,
            segment_size: transmit.segment_size.map(|s| s + SOURCE_HEADER),
            ..*transmit
        },
        None => *transmit,
    }
}

/// How a datagram the layer sends of its own finds its path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Routing {
    /// As quinn's datagrams to the same address (reports, tail copies).
    Data,
    /// As an FEC repair (spread-fec: on the repairs path).
    Repair,
    /// Already on its path (probes, copies of UDP flows' datagrams).
    Direct,
}

/// A datagram the layer sends of its own, waiting for
/// [`DatagramLayer::poll_transmit`].
#[derive(Debug)]
struct Pending {
    routing: Routing,
    destination: SocketAddr,
    src_ip: Option<IpAddr>,
    ecn: Option<Ecn>,
    segment_size: Option<usize>,
    bytes: Vec<u8>,
    /// A tail copy, whose buffer goes back to the tail policy.
    tail: bool,
}

/// The datagram layer under QUIC for one socket: tail copies and parity,
/// continuous FEC (bulk and call strands), several WAN paths per peer
/// with failover, duplication and spread-fec.
///
/// quinn sees one address per peer. Its transmits go through
/// [`DatagramLayer::handle_transmit`] (how they go out: [`Sending`]) and,
/// once the socket took them, [`DatagramLayer::handle_transmitted`];
/// what the socket receives goes through
/// [`DatagramLayer::handle_received`], then rebuilt datagrams come out of
/// [`DatagramLayer::poll_received`]. The layer's own datagrams (copies,
/// repairs, reports, probes) come out of
/// [`DatagramLayer::poll_transmit`]; call
/// [`DatagramLayer::handle_timeout`] at [`DatagramLayer::poll_timeout`].
/// It never reads a clock: every call that needs the time takes `now`.
#[derive(Debug)]
pub struct DatagramLayer {
    mode: DuplicationMode,
    /// Tail copies and parity.
    tails: TailDup<SocketAddr, Meta>,
    /// Whether any path repeats tails (the tail policy sees sends only
    /// then).
    tails_on: bool,
    /// What each peer's samples left.
    memory: HashMap<SocketAddr, PathMemory>,
    /// The receiving side of tail parity.
    parity: ParityReceivers,
    /// Continuous FEC.
    fec: FecPeers,
    /// Whether any peer is sent wrapped datagrams.
    fec_on: bool,
    /// Several WAN paths per peer.
    paths: PathTable,
    /// Whether any peer has a path or sent a probe (datagrams are mapped
    /// only then).
    paths_on: bool,
    /// Whether any peer sent a datagram of this layer (received buffers
    /// are looked through only then).
    layer_seen: bool,
    /// The last transmit `handle_transmit` wrapped as FEC sources.
    wire: Vec<u8>,
    queue: VecDeque<Pending>,
    /// The datagram `poll_transmit` gave last (its buffer is reused).
    out: Option<Pending>,
    events: VecDeque<Event>,
    probes: Vec<(Hop, ProbeBytes)>,
}

impl DatagramLayer {
    /// A layer for a node running duplication `mode`; `seed` seeds every
    /// random choice it makes (the duplicate filters' hashes).
    pub fn new(mode: DuplicationMode, seed: u64) -> DatagramLayer {
        DatagramLayer {
            mode,
            tails: TailDup::new(),
            tails_on: false,
            memory: HashMap::new(),
            parity: ParityReceivers::default(),
            fec: FecPeers::default(),
            fec_on: false,
            paths: PathTable::with_seed(seed),
            paths_on: false,
            layer_seen: false,
            wire: Vec::new(),
            queue: VecDeque::new(),
            out: None,
            events: VecDeque::new(),
            probes: Vec::new(),
        }
    }

    /// The node's duplication mode.
    pub fn mode(&self) -> DuplicationMode {
        self.mode
    }

    /// Sets continuous FEC (`--fec`, `--fec-budget` as a share of the
    /// sources, 0..=1) for the paths sampled from now on.
    pub fn set_fec(&mut self, mode: FecMode, budget: f64) {
        self.fec.mode = mode;
        self.fec.budget = budget;
    }

    /// The FEC setting.
    pub fn fec_mode(&self) -> FecMode {
        self.fec.mode
    }

    /// Re-decides the path to `peer` from a sample of its connection
    /// taken at `now`; call it about every [`super::SAMPLE_INTERVAL`].
    ///
    /// `auto` repeats tails while the path is lossy and not carrying bulk
    /// traffic: while it sends more than half its capacity, no burst ends
    /// (the rare pause is judged busy anyway), so copying every datagram
    /// into the tail would be CPU spent for nothing; tails come back within
    /// a sample of the traffic turning sparse. The exception is a path on
    /// which a stream is ending ([`DatagramLayer::handle_stream_end`]): its
    /// bulk transfer's end is a tail worth repeating.
    pub fn handle_sample(&mut self, now: Instant, peer: SocketAddr, sample: &PathSample) {
        let path = self.memory.entry(peer).or_default();
        path.loss.update(sample.sent_packets, sample.lost_packets);
        let capacity = path.capacity(now, sample.rate_estimate);
        let received_peak = path.received_peak(now, sample.udp_rx_bytes);
        let send_rate = path.send_rate(now, sample.udp_tx_bytes);
        path.bulk = capacity.is_some_and(|c| send_rate > BUSY_SHARE * c);
        path.params = Some(TailParams::for_path(
            sample.srtt,
            capacity,
            usize::from(sample.mtu),
        ));
        let params = path.params.filter(|_| path.repeats(self.mode));
        let ending = path.ending > 0;
        let bulk = path.bulk;
        self.tails.set_path(now, peer, params);
        self.tails.expect_ends(peer, ending);
        self.tails_on = self.tails.is_active();
        let duplicating = self.paths.mode(peer) == Some(PathMode::Duplicate);
        // What the path carries: this direction's estimate, or what
        // arrived from the peer (a direction that only acknowledges
        // measures nothing of its own).
        let carries = higher(capacity, received_peak);
        let traffic = Traffic {
            bulk,
            ending,
            duplicating,
        };
        self.fec
            .on_sample(peer, sample, traffic, carries, send_rate);
        self.fec_on = self.fec.any_wraps();
        self.queue_fec();
    }

    /// Counts a stream ending on `peer` (`starts`: +1) or acknowledged
    /// (-1), and applies the change at once rather than at the next
    /// sample. Returns whether it counted (a path not sampled yet, or
    /// duplication off, is not).
    pub fn handle_stream_end(&mut self, now: Instant, peer: SocketAddr, starts: bool) -> bool {
        if self.mode == DuplicationMode::Off {
            return false;
        }
        let Some(path) = self.memory.get_mut(&peer) else {
            // No sample yet (or the path is gone): nothing to apply.
            return false;
        };
        if starts {
            path.ending += 1;
        } else {
            path.ending = path.ending.saturating_sub(1);
        }
        let ending = path.ending > 0;
        // Switch a bulk path's tails on now: the stream's last bytes may go
        // out before the next sample. Switching off waits for the sample.
        let params = path.params.filter(|_| ending && path.repeats(self.mode));
        if let Some(params) = params {
            if self.tails.params(peer).is_none() {
                self.tails.set_path(now, peer, Some(params));
            }
        }
        self.tails.expect_ends(peer, ending);
        self.tails_on = self.tails.is_active();
        true
    }

    /// The sender of the connection to `peer` has data waiting for its
    /// congestion window (or no longer): while it has, a quiet path is no
    /// burst's end.
    pub fn handle_sender_blocked(&mut self, peer: SocketAddr, blocked: bool) {
        self.tails.sender_blocked(peer, blocked);
    }

    /// Forgets a peer whose connection is gone.
    pub fn remove_peer(&mut self, peer: SocketAddr) {
        self.memory.remove(&peer);
        self.fec.remove(peer);
        self.tails.remove(peer);
        self.tails_on = self.tails.is_active();
    }

    /// The edge's paths to the core at `canonical` (`--path`, in order)
    /// and how they are used (`--path-mode`): from now on what quinn
    /// sends there leaves on the data path, and what arrives on any path
    /// is handed on as from `canonical`.
    pub fn set_paths(
        &mut self,
        now: Instant,
        canonical: SocketAddr,
        paths: &[PathSpec],
        mode: PathMode,
    ) {
        self.paths.configure(now, canonical, paths, mode);
        self.paths_on = self.paths.has_routes();
    }

    /// The SLA that chooses the path of real-time datagrams to every
    /// peer with paths (`sla=` of the edge's real-time classes, the
    /// strictest), or none.
    pub fn set_sla(&mut self, now: Instant, sla: Option<Sla>) {
        self.paths.set_sla(now, sla);
    }

    /// Whether datagrams go through the path table (this node has paths,
    /// or a peer probed).
    pub fn has_paths(&self) -> bool {
        self.paths_on
    }

    /// A connection to `canonical` came up (quinn's local address
    /// `local`, its probes keyed with `key`, `side`: which end this node
    /// is): the client probes its paths at once; the server binds paths
    /// as the client's probes arrive.
    pub fn bind_paths(
        &mut self,
        now: Instant,
        canonical: SocketAddr,
        local: Option<IpAddr>,
        key: PathKey,
        side: Side,
    ) {
        self.paths.bind(now, canonical, local, key, side);
    }

    /// The connection to `canonical` ended: its probes stop (the server
    /// forgets its paths).
    pub fn unbind_paths(&mut self, canonical: SocketAddr) {
        self.paths.unbind(canonical);
    }

    /// A handshake to `canonical` failed: the next one tries the next
    /// path.
    pub fn handshake_failed(&mut self, canonical: SocketAddr) {
        if self.paths_on {
            self.paths.rotate_fallback(canonical);
        }
    }

    /// How the paths to `canonical` are used, if it has any.
    pub fn path_mode(&self, canonical: SocketAddr) -> Option<PathMode> {
        self.paths.mode(canonical)
    }

    /// Takes quinn's `transmit` (`flagged`: which of its datagrams carry
    /// UDP flows, bit i the i-th) and decides how it goes out: as FEC
    /// sources where the peer is sent FEC, on the peer's data path, with
    /// copies on the other paths in duplicate mode. [`Sending::route`]
    /// (not wrapped) or [`DatagramLayer::wire`] (wrapped) give the bytes
    /// to put on the wire now; hand the decision back to
    /// [`DatagramLayer::handle_transmitted`] once the socket took them.
    pub fn handle_transmit(&mut self, now: Instant, transmit: &Transmit, flagged: u64) -> Sending {
        if self.paths_on && self.paths.bonded(transmit.destination) {
            for (i, datagram) in transmit.contents.chunks(transmit.size()).enumerate() {
                let realtime = i < 64 && flagged & (1 << i) != 0;
                if !self
                    .paths
                    .bond_send(now, transmit.destination, datagram, realtime)
                {
                    // No path up for the bond any more: the rest is lost
                    // to QUIC, which sends it again.
                    break;
                }
            }
            return Sending {
                hop: None,
                calls: None,
                copies: Vec::new(),
                tails: false,
                held: true,
            };
        }
        let calls = if self.fec_on {
            self.fec.wrap(
                transmit.destination,
                transmit.src_ip,
                (transmit.contents, transmit.size()),
                flagged,
                &mut self.wire,
            )
        } else {
            None
        };
        let mut sending = Sending {
            hop: None,
            calls,
            copies: Vec::new(),
            tails: self.tails_on,
            held: false,
        };
        if self.paths_on {
            let wire = wire_of(&self.wire, transmit, calls);
            sending.hop = self.paths.route(
                now,
                wire.destination,
                wire.contents.len(),
                flagged_len(&wire, flagged),
                &mut sending.copies,
            );
        }
        sending
    }

    /// The bytes to put on the wire for `transmit` as `sending` decided:
    /// wrapped as FEC sources (valid until the next `handle_transmit`),
    /// on its path.
    pub fn wire<'a>(&'a self, transmit: &Transmit<'a>, sending: &Sending) -> Transmit<'a> {
        sending.route(&wire_of(&self.wire, transmit, sending.calls))
    }

    /// The socket took `transmit` at `now` as `sending` decided: the
    /// copies of its UDP flows' datagrams (duplicate), the repairs of the
    /// FEC blocks it closed and its tail's bookkeeping follow. A wrapped
    /// transmit's copies are taken from the layer's wire bytes: no other
    /// `handle_transmit` may come between.
    pub fn handle_transmitted(
        &mut self,
        now: Instant,
        transmit: &Transmit,
        flagged: u64,
        sending: Sending,
    ) {
        if sending.held {
            return;
        }
        let Sending { calls, copies, .. } = sending;
        if !copies.is_empty() {
            let wire = wire_of(&self.wire, transmit, calls);
            for hop in copies {
                for run in flagged_runs(&wire, flagged, hop) {
                    self.queue.push_back(Pending {
                        routing: Routing::Direct,
                        destination: run.destination,
                        src_ip: run.src_ip,
                        ecn: run.ecn,
                        segment_size: run.segment_size,
                        bytes: run.contents.to_vec(),
                        tail: false,
                    });
                }
            }
        }
        if let Some(calls) = calls {
            self.fec.on_sent(
                now,
                transmit.destination,
                transmit.contents,
                transmit.size(),
                calls,
            );
            self.queue_fec();
        }
        if self.tails_on {
            self.record(now, transmit);
        }
    }

    /// Hands the tail policy what quinn sent.
    fn record(&mut self, now: Instant, transmit: &Transmit) {
        let meta = (transmit.ecn, transmit.src_ip);
        // Only the batch's last datagrams can end up in a tail (a parity
        // tail is the longest): the front is counted, not copied.
        let unheld = transmit
            .count()
            .saturating_sub(MAX_TAIL_DATAGRAMS.max(fec::MAX_SOURCES));
        for (i, datagram) in transmit.contents.chunks(transmit.size()).enumerate() {
            if i < unheld {
                self.tails
                    .on_send_unheld(now, transmit.destination, datagram.len());
            } else {
                let _ = self
                    .tails
                    .on_send(now, transmit.destination, &meta, datagram);
            }
        }
    }

    /// Takes the buffers the socket received at `now` (`meta[i]` says what
    /// `bufs[i]` holds) and rewrites them in place for quinn: probes,
    /// parity, repairs and reports taken out, sources unwrapped, second
    /// copies dropped, datagrams from a peer's paths given its canonical
    /// address. A buffer left empty has length 0.
    pub fn handle_received<B: DerefMut<Target = [u8]>>(
        &mut self,
        now: Instant,
        bufs: &mut [B],
        meta: &mut [Received],
    ) {
        let n = bufs.len().min(meta.len());
        let (bufs, meta) = (&mut bufs[..n], &mut meta[..n]);
        if !self.layer_seen {
            if self.paths_on {
                map_received(&mut self.paths, now, bufs, meta);
            }
            if !any_segment(bufs, meta, is_layer) {
                return;
            }
            if !self.paths_on && any_segment(bufs, meta, is_probe) {
                // A peer probes paths: map from now on.
                self.paths_on = true;
                map_received(&mut self.paths, now, bufs, meta);
            }
            if self.paths_on && !any_segment(bufs, meta, is_layer) {
                return;
            }
            self.layer_seen = true;
        } else if self.paths_on || any_segment(bufs, meta, is_probe) {
            self.paths_on = true;
            map_received(&mut self.paths, now, bufs, meta);
        }
        take_layer(
            (&mut self.parity, &mut self.fec),
            &mut self.events,
            now,
            bufs,
            meta,
        );
        self.queue_fec();
    }

    /// A datagram rebuilt from parity or repairs (or held back from a
    /// received batch), copied into `buf`, for quinn as received.
    #[must_use]
    pub fn poll_received(&mut self, buf: &mut [u8]) -> Option<Received> {
        if !self.layer_seen && !self.paths.bond_ready() {
            return None;
        }
        loop {
            let (addr, dst_ip, datagram) = self
                .paths
                .bond_released()
                .or_else(|| self.fec.held.pop_front())
                .or_else(|| self.parity.rebuilt.pop_front())?;
            let len = datagram.len();
            if len > buf.len() {
                continue;
            }
            buf[..len].copy_from_slice(&datagram);
            return Some(Received {
                addr,
                len,
                stride: len,
                ecn: None,
                dst_ip,
            });
        }
    }

    /// Does what is due at `now`: tail copies of quiet paths, repairs of
    /// blocks whose deadline passed, reports, probes.
    pub fn handle_timeout(&mut self, now: Instant) {
        while let Some(copy) = self.tails.poll_transmit(now) {
            self.queue.push_back(Pending {
                routing: Routing::Data,
                destination: copy.key,
                src_ip: copy.meta.1,
                ecn: copy.meta.0,
                segment_size: None,
                bytes: copy.datagram,
                tail: true,
            });
        }
        let _ = self.fec.poll(now);
        self.queue_fec();
        if self.paths_on {
            self.paths.bond_timeout(now);
            let _ = self.paths.poll(now, &mut self.probes);
            for (hop, probe) in self.probes.drain(..) {
                self.queue.push_back(Pending {
                    routing: Routing::Direct,
                    destination: hop.destination,
                    src_ip: hop.src_ip,
                    ecn: None,
                    segment_size: None,
                    bytes: probe.to_vec(),
                    tail: false,
                });
            }
        }
    }

    /// When [`DatagramLayer::handle_timeout`] is due next, if ever.
    #[must_use]
    pub fn poll_timeout(&self) -> Option<Instant> {
        let fec = self.fec.next_timeout();
        let paths = self.paths.next_timeout().filter(|_| self.paths_on);
        let bonds = self.paths.next_bond_timeout().filter(|_| self.paths_on);
        [self.tails.poll_timeout(), fec, paths, bonds]
            .into_iter()
            .flatten()
            .min()
    }

    /// The next datagram the layer sends of its own (a copy, a repair, a
    /// report, a probe), already on its path. A full socket buffer may
    /// drop it: the path is busy.
    #[must_use]
    pub fn poll_transmit(&mut self, now: Instant) -> Option<Transmit<'_>> {
        if let Some(last) = self.out.take() {
            if last.tail {
                self.tails.recycle(last.bytes);
            }
        }
        let pending = match self.queue.pop_front() {
            Some(pending) => pending,
            None if self.paths_on => {
                let (hop, bytes) = self.paths.bond_poll(now)?;
                Pending {
                    routing: Routing::Direct,
                    destination: hop.destination,
                    src_ip: hop.src_ip,
                    ecn: None,
                    segment_size: None,
                    bytes,
                    tail: false,
                }
            }
            None => return None,
        };
        let len = pending.bytes.len();
        let hop = match pending.routing {
            _ if !self.paths_on => None,
            Routing::Data => self
                .paths
                .route(now, pending.destination, len, 0, &mut Vec::new()),
            Routing::Repair => self.paths.route_repair(now, pending.destination, len),
            Routing::Direct => None,
        };
        let out = self.out.insert(pending);
        let transmit = Transmit {
            destination: out.destination,
            ecn: out.ecn,
            contents: &out.bytes,
            segment_size: out.segment_size,
            src_ip: out.src_ip,
        };
        Some(match hop {
            Some(hop) => rewrite(&transmit, hop),
            None => transmit,
        })
    }

    /// What the QUIC connection to `canonical` may send while its paths
    /// are bonded (`None`: not bonded now, its own controller decides).
    pub fn bond_budget(&self, canonical: SocketAddr) -> Option<BondBudget> {
        self.paths.bond_budget(canonical)
    }

    /// The most the QUIC connection to `canonical` may send, bytes per
    /// second of UDP payload, when its data path has a declared rate and
    /// is not bonded (`paths/shape.rs`).
    pub fn rate_cap(&self, canonical: SocketAddr) -> Option<u64> {
        self.paths.rate_cap(canonical)
    }

    /// The next event: repairs the peer reported, paths that changed.
    #[must_use]
    pub fn poll_event(&mut self) -> Option<Event> {
        self.events
            .pop_front()
            .or_else(|| self.paths.events.pop_front())
            .or_else(|| self.fec.events.pop_front())
    }

    /// Moves the repairs and reports FEC made into the queue.
    fn queue_fec(&mut self) {
        for (destination, datagram) in self.fec.outgoing.drain(..) {
            let src_ip = self
                .fec
                .senders
                .get(&destination)
                .and_then(|s| s.local_ip)
                .or_else(|| {
                    self.fec
                        .receivers
                        .get(&destination)
                        .and_then(|r| r.local_ip)
                });
            let routing = if fec_stream::kind(&datagram) == Some(fec_stream::Kind::Repair) {
                Routing::Repair
            } else {
                Routing::Data
            };
            self.queue.push_back(Pending {
                routing,
                destination,
                src_ip,
                ecn: None,
                segment_size: None,
                bytes: datagram,
                tail: false,
            });
        }
    }

    /// The path's capacity at `now`, bits per second: the highest rate
    /// estimate its samples saw, forgotten with a one-minute half-life.
    /// `None` before the first sample.
    pub fn capacity_bps(&self, now: Instant, peer: SocketAddr) -> Option<f64> {
        self.memory
            .get(&peer)?
            .remembered(now)
            .map(|bytes_per_sec| bytes_per_sec * 8.0)
    }

    /// What tail duplication does and did on the path to `peer`.
    pub fn duplication_status(&self, peer: SocketAddr) -> DuplicationStatus {
        let (loss, bulk, ending_streams) = self
            .memory
            .get(&peer)
            .map_or((0.0, false, 0), |p| (p.loss.loss_rate(), p.bulk, p.ending));
        let params = self.tails.params(peer);
        let TailStats {
            bursts,
            datagrams,
            bytes,
            over_budget,
            busy,
            stream_ends,
            parity_groups,
            stalled,
            ..
        } = self.tails.stats(peer).unwrap_or_default();
        DuplicationStatus {
            mode: self.mode,
            active: params.is_some(),
            bulk,
            loss_percent: loss * 100.0,
            quiet_ms: params.map(|p| p.quiet.as_secs_f64() * 1e3),
            tail_bytes: params.map(|p| p.max_bytes),
            bursts,
            datagrams,
            bytes,
            over_budget,
            busy,
            stream_ends,
            ending_streams,
            parity_groups,
            stalled,
            rebuilt: self.parity.rebuilt_from(peer),
        }
    }

    /// What continuous FEC does on the path to `peer`.
    pub fn fec_status(&self, peer: SocketAddr) -> FecStatus {
        self.fec.status(peer)
    }

    /// The paths to `canonical`, if it has any.
    pub fn paths_status(&self, canonical: SocketAddr) -> Option<PathsStatus> {
        if !self.paths_on {
            return None;
        }
        self.paths.status(canonical).filter(|s| !s.paths.is_empty())
    }

    /// Whether tails are repeated on any path now.
    pub fn tails_active(&self) -> bool {
        self.tails_on
    }
}
