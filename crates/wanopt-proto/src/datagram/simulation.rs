//! A deterministic simulation of two nodes' layers over two WAN paths on
//! a virtual clock: both paths lose datagrams at random (seeded), then
//! the first is cut, and the data moves to the second without quinn
//! seeing any address but the canonical one.

use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, Instant};

use super::*;
use crate::path::wire::EXPORTER_LEN;
use crate::path::{PathId, PathKey, PathMode, Side};

/// The core's address on path 1 (the canonical one) and on path 2.
pub(super) fn core_at(path: usize) -> SocketAddr {
    [([192, 0, 2, 1], 4433), ([198, 51, 100, 1], 4433)][path].into()
}

/// The edge's local address on each path, and where the core sees it.
pub(super) fn edge_ip(path: usize) -> IpAddr {
    [[10, 0, 0, 1], [10, 1, 0, 1]][path].into()
}

pub(super) fn edge_at(path: usize) -> SocketAddr {
    SocketAddr::new(edge_ip(path), 5000)
}

/// One-way delay of each path.
const DELAY: [Duration; 2] = [Duration::from_millis(20), Duration::from_millis(35)];
/// Loss of each path, per mille.
const LOSS: [u64; 2] = [20, 10];
/// When path 1 is cut.
const CUT: Duration = Duration::from_secs(3);
/// How long the simulation runs.
const END: Duration = Duration::from_secs(7);
/// The applications send a datagram each way this often.
const SEND_EVERY: u64 = 10;

/// A datagram on the wire.
#[derive(Debug)]
struct InFlight {
    at: Instant,
    to_core: bool,
    from: SocketAddr,
    dst_ip: IpAddr,
    bytes: Vec<u8>,
}

/// A seeded xorshift generator: the simulation's only randomness.
struct Rng(u64);

impl Rng {
    fn per_mille(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % 1000
    }
}

/// What a run leaves: each side's received datagrams (sequence number,
/// address quinn saw), the edge's events and the paths' status.
#[derive(Debug, PartialEq)]
struct Outcome {
    at_core: Vec<(u64, SocketAddr)>,
    at_edge: Vec<(u64, SocketAddr)>,
    edge_events: Vec<Event>,
    before_cut: PathsStatus,
    edge: PathsStatus,
    core: PathsStatus,
}

/// A QUIC-like datagram (fixed bit set) carrying `seq`.
fn quic(seq: u64) -> Vec<u8> {
    let mut d = vec![0x5A; 1200];
    d[0] = 0x40;
    d[1..9].copy_from_slice(&seq.to_be_bytes());
    d
}

/// Puts what a layer sends on the wire: `to_core` for the edge's; `cut`:
/// path 1 is cut.
fn send(
    wire: &mut Vec<InFlight>,
    rng: &mut Rng,
    (now, cut): (Instant, bool),
    to_core: bool,
    t: Transmit,
) {
    let contents = t.contents;
    let size = t.segment_size.unwrap_or(contents.len()).max(1);
    for datagram in contents.chunks(size) {
        // Which path: by the address it goes to (the edge's) or comes
        // from (the core's answers go to the edge's address on the path).
        let path = if to_core {
            usize::from(t.destination != core_at(0))
        } else {
            usize::from(t.destination.ip() != edge_ip(0))
        };
        if (path == 0 && cut) || rng.per_mille() < LOSS[path] {
            continue;
        }
        let from = if to_core {
            edge_at(path)
        } else {
            core_at(path)
        };
        wire.push(InFlight {
            at: now + DELAY[path],
            to_core,
            from,
            dst_ip: t.destination.ip(),
            bytes: datagram.to_vec(),
        });
    }
}

/// Runs the simulation with `seed`.
fn run(seed: u64) -> Outcome {
    let t0 = Instant::now();
    let key = PathKey::from_exporter(&[9; EXPORTER_LEN]);
    let mut edge = DatagramLayer::new(DuplicationMode::Auto, seed);
    let mut core = DatagramLayer::new(DuplicationMode::Auto, seed + 1);
    edge.set_paths(
        t0,
        core_at(0),
        &[
            PathSpec::new(edge_ip(0), core_at(0)),
            PathSpec::new(edge_ip(1), core_at(1)),
        ],
        PathMode::Failover,
    );
    edge.bind_paths(t0, core_at(0), None, key.clone(), Side::Client);
    core.bind_paths(t0, edge_at(0), None, key, Side::Server);
    let mut rng = Rng(seed | 1);
    let mut wire: Vec<InFlight> = Vec::new();
    let (mut at_core, mut at_edge, mut edge_events) = (Vec::new(), Vec::new(), Vec::new());
    let mut before_cut = None;
    let mut seq = 0;
    let mut buf = vec![0u8; 1500];
    for ms in 0..=END.as_millis() as u64 {
        let now = t0 + Duration::from_millis(ms);
        let cut = now >= t0 + CUT;
        if before_cut.is_none() && cut {
            before_cut = edge.paths_status(core_at(0));
        }
        // Deliver what arrived.
        let (due, rest): (Vec<_>, Vec<_>) = wire.drain(..).partition(|d: &InFlight| d.at <= now);
        wire.extend(rest);
        for d in due {
            let (layer, seen) = if d.to_core {
                (&mut core, &mut at_core)
            } else {
                (&mut edge, &mut at_edge)
            };
            let mut bufs = [d.bytes.clone()];
            let mut meta = [Received {
                addr: d.from,
                len: d.bytes.len(),
                stride: d.bytes.len(),
                ecn: None,
                dst_ip: Some(d.dst_ip),
            }];
            layer.handle_received(now, &mut bufs, &mut meta);
            if meta[0].len > 0 {
                let n = u64::from_be_bytes(bufs[0][1..9].try_into().unwrap());
                seen.push((n, meta[0].addr));
            }
            while let Some(m) = layer.poll_received(&mut buf) {
                seen.push((0, m.addr));
            }
        }
        // quinn sends, each way.
        if ms % SEND_EVERY == 0 {
            seq += 1;
            for (layer, to_core, to) in [
                (&mut edge, true, core_at(0)),
                (&mut core, false, edge_at(0)),
            ] {
                let datagram = quic(seq);
                let transmit = Transmit {
                    destination: to,
                    ecn: None,
                    contents: &datagram,
                    segment_size: None,
                    src_ip: None,
                };
                let sending = layer.handle_transmit(now, &transmit, 0);
                send(
                    &mut wire,
                    &mut rng,
                    (now, cut),
                    to_core,
                    layer.wire(&transmit, &sending),
                );
                layer.handle_transmitted(now, &transmit, 0, sending);
            }
        }
        // Timers and the layers' own datagrams.
        for (layer, to_core) in [(&mut edge, true), (&mut core, false)] {
            if layer.poll_timeout().is_some_and(|at| at <= now) {
                layer.handle_timeout(now);
            }
            while let Some(t) = layer.poll_transmit(now) {
                send(&mut wire, &mut rng, (now, cut), to_core, t);
            }
        }
        while let Some(event) = edge.poll_event() {
            edge_events.push(event);
        }
        while core.poll_event().is_some() {}
    }
    Outcome {
        at_core,
        at_edge,
        edge_events,
        before_cut: before_cut.unwrap(),
        edge: edge.paths_status(core_at(0)).unwrap(),
        core: core.paths_status(edge_at(0)).unwrap(),
    }
}

#[test]
fn two_lossy_paths_then_a_cut_move_the_data_and_quinn_sees_one_address() {
    let outcome = run(7);
    // Before the cut both paths are up and path 1 carries the data.
    let before = &outcome.before_cut;
    assert!(before.paths.iter().all(|p| p.state == "up"), "{before:?}");
    assert!(before.paths[0].data && !before.paths[1].data, "{before:?}");
    assert_eq!(before.switches, 0);
    // After it path 1 is down and the data goes on path 2, at both ends.
    let edge = &outcome.edge;
    assert_eq!(edge.paths[0].state, "down", "{edge:?}");
    assert!(edge.paths[1].data && !edge.paths[0].data, "{edge:?}");
    assert_eq!(edge.switches, 1, "{edge:?}");
    let core = &outcome.core;
    assert!(core.paths[1].data, "{core:?}");
    let (one, two) = (PathId::new(1).unwrap(), PathId::new(2).unwrap());
    assert!(outcome.edge_events.contains(&Event::DataMoved {
        canonical: core_at(0),
        from: one,
        to: two,
    }));
    // quinn only ever sees the canonical addresses.
    assert!(outcome.at_core.iter().all(|(_, a)| *a == edge_at(0)));
    assert!(outcome.at_edge.iter().all(|(_, a)| *a == core_at(0)));
    // What was sent in the last two seconds arrived, but for the second
    // path's random loss.
    let sent = END.as_millis() as u64 / SEND_EVERY;
    let late = |got: &[(u64, SocketAddr)]| {
        got.iter()
            .filter(|(n, _)| *n > sent - 200 && *n <= sent - 10)
            .count()
    };
    assert!(late(&outcome.at_core) >= 180, "{}", late(&outcome.at_core));
    assert!(late(&outcome.at_edge) >= 180, "{}", late(&outcome.at_edge));
    // Before the cut, path 1's loss shows in what arrived, no more.
    let early = outcome.at_core.iter().filter(|(n, _)| *n <= 290).count();
    assert!((270..290).contains(&early), "{early}");
}

#[test]
fn the_simulation_is_deterministic() {
    assert_eq!(run(11), run(11));
}
