//! The receiving side of the layer: what arrives in a GRO buffer is
//! taken apart in place. Probes are taken out and datagrams from a known
//! path given the peer's canonical address (and a peer that duplicates
//! has its second copies dropped); then parity, repairs and reports are
//! taken out, sources unwrapped, and what is left moved up so the buffer
//! stays `stride`-spaced with only its last datagram shorter.

use std::collections::VecDeque;
use std::ops::DerefMut;
use std::time::Instant;

use super::event::Event;
use super::fec::FecPeers;
use super::parity::ParityReceivers;
use super::paths::{is_bond, is_probe, PathTable};
use super::transmit::Received;
use crate::{fec, fec_stream};

/// Whether `datagram` belongs to the datagram layer (tail parity, FEC,
/// probes) rather than QUIC: its first byte has QUIC's fixed bit clear.
pub(super) fn is_layer(datagram: &[u8]) -> bool {
    fec::is_parity(datagram)
        || fec_stream::kind(datagram).is_some()
        || is_probe(datagram)
        || is_bond(datagram)
}

/// The datagrams of a received buffer (several with GRO, `stride` apart).
pub(super) fn segments(buf: &[u8], stride: usize) -> impl Iterator<Item = &[u8]> {
    buf.chunks(stride.max(1))
}

/// Whether any of the buffers holds a datagram `pred` picks.
pub(super) fn any_segment<B: DerefMut<Target = [u8]>>(
    bufs: &[B],
    meta: &[Received],
    pred: fn(&[u8]) -> bool,
) -> bool {
    bufs.iter()
        .zip(meta.iter())
        .any(|(buf, m)| segments(&buf[..m.len.min(buf.len())], m.stride).any(pred))
}

/// Keeps the datagrams of a received buffer that `keep` wants, moving
/// them up so the buffer stays `stride`-spaced (only its last datagram
/// shorter); sets `m.len`.
fn retain_segments(buf: &mut [u8], m: &mut Received, mut keep: impl FnMut(&[u8]) -> bool) {
    let stride = m.stride.max(1);
    let len = m.len.min(buf.len());
    let mut kept = 0;
    let mut at = 0;
    while at < len {
        let end = (at + stride).min(len);
        if keep(&buf[at..end]) {
            if at != kept {
                buf.copy_within(at..end, kept);
            }
            kept += end - at;
        }
        at = end;
    }
    m.len = kept;
}

/// Takes the probes out of the buffers (moving the rest up, so a GRO
/// buffer stays `stride`-spaced), drops the second copies of a peer that
/// duplicates, and hands a datagram from a known path on as from its
/// peer's canonical address. Returns whether any probe was taken.
pub(super) fn map_received<B: DerefMut<Target = [u8]>>(
    table: &mut PathTable,
    now: Instant,
    bufs: &mut [B],
    meta: &mut [Received],
) -> bool {
    let mut probes = false;
    for (buf, m) in bufs.iter_mut().zip(meta.iter_mut()) {
        let stride = m.stride.max(1);
        let len = m.len.min(buf.len());
        if segments(&buf[..len], stride).any(is_probe) {
            probes = true;
            let (from, dst_ip) = (m.addr, m.dst_ip);
            retain_segments(buf, m, |d| {
                if is_probe(d) {
                    let _ = table.on_probe(now, from, dst_ip, d);
                    false
                } else {
                    true
                }
            });
        }
        if m.len == 0 {
            continue;
        }
        if segments(&buf[..m.len.min(buf.len())], stride).any(is_bond) {
            // A bonded peer's: taken by its bond, which hands QUIC's
            // datagrams back in order (the layer's `poll_received`).
            let (from, dst_ip) = (m.addr, m.dst_ip);
            retain_segments(buf, m, |d| {
                !(is_bond(d) && table.bond_receive(now, from, dst_ip, d))
            });
            if m.len == 0 {
                continue;
            }
        }
        if let Some((canonical, local)) = table.map(m.addr, m.dst_ip, m.len) {
            m.addr = canonical;
            if local.is_some() {
                m.dst_ip = local;
            }
            if table.filters(canonical) {
                retain_segments(buf, m, |d| table.first_copy(canonical, d));
            }
        }
    }
    probes
}

/// Passes the buffers through parity and FEC: parity, repairs and
/// reports are taken out of them, sources unwrapped, and what is left
/// moved up so a GRO buffer stays `stride`-spaced with only its last
/// datagram shorter (a datagram that would break that is held and handed
/// on at the next poll). QUIC datagrams are remembered for peers that
/// send parity. A buffer left empty has length 0.
pub(super) fn take_layer<B: DerefMut<Target = [u8]>>(
    (parity, fec): (&mut ParityReceivers, &mut FecPeers),
    events: &mut VecDeque<Event>,
    now: Instant,
    bufs: &mut [B],
    meta: &mut [Received],
) {
    for (buf, m) in bufs.iter_mut().zip(meta.iter_mut()) {
        let stride = m.stride.max(1);
        let len = m.len.min(buf.len());
        let mut kept = 0;
        let mut out_stride = 0;
        let mut closed = false;
        let mut at = 0;
        while at < len {
            let end = (at + stride).min(len);
            let segment = &buf[at..end];
            // The QUIC datagram's place in the segment, if any.
            let quic = if fec::is_parity(segment) {
                parity.on_datagram(now, events, m.addr, m.dst_ip, segment);
                None
            } else if let Some((kind, strand)) = fec_stream::classify(segment) {
                let payload = fec.on_received(now, m.addr, m.dst_ip, (kind, strand), segment);
                if kind == fec_stream::Kind::Source {
                    if let Some(r) = fec.receivers.get_mut(&m.addr) {
                        r.local_ip = m.dst_ip;
                    }
                }
                payload.map(|p| (end - p.len(), end))
            } else {
                Some((at, end))
            };
            if let Some((start, stop)) = quic {
                parity.on_datagram(now, events, m.addr, m.dst_ip, &buf[start..stop]);
                let n = stop - start;
                let fits = !closed && (out_stride == 0 || n <= out_stride);
                if fits {
                    if start != kept {
                        buf.copy_within(start..stop, kept);
                    }
                    kept += n;
                    if out_stride == 0 {
                        out_stride = n;
                    } else if n < out_stride {
                        // Only the last may be shorter.
                        closed = true;
                    }
                } else {
                    fec.hold(m.addr, m.dst_ip, &buf[start..stop]);
                }
            }
            at = end;
        }
        m.len = kept;
        if out_stride > 0 {
            m.stride = out_stride;
        }
    }
}

#[cfg(test)]
mod tests {
    use std::net::{IpAddr, Ipv4Addr, SocketAddr};
    use std::time::Duration;

    use super::*;
    use crate::datagram::paths::Hop;
    use crate::datagram::PathSpec;
    use crate::path::wire::EXPORTER_LEN;
    use crate::path::{PathId, PathKey, PathMode, ProbeRepr, Side, PROBE_LEN};

    fn addr(s: &str) -> SocketAddr {
        s.parse().unwrap()
    }

    /// The core's address on path 1 (the canonical one) and on path 2.
    const CANONICAL: SocketAddr = SocketAddr::new(IpAddr::V4(Ipv4Addr::new(192, 0, 2, 1)), 4433);
    const SECOND: SocketAddr = SocketAddr::new(IpAddr::V4(Ipv4Addr::new(198, 51, 100, 1)), 4433);

    /// An edge's table with two paths to the core in `mode` (from 10.0.0.1
    /// and 10.1.0.1), bound to a connection; and the connection's key.
    fn edge_table(now: Instant, mode: PathMode) -> (PathTable, PathKey) {
        let mut table = PathTable::default();
        table.configure(
            now,
            CANONICAL,
            &[
                PathSpec::new("10.0.0.1".parse().unwrap(), CANONICAL),
                PathSpec::new("10.1.0.1".parse().unwrap(), SECOND),
            ],
            mode,
        );
        let key = PathKey::from_exporter(&[3; EXPORTER_LEN]);
        table.bind(now, CANONICAL, None, key.clone(), Side::Client);
        (table, key)
    }

    #[test]
    fn received_batches_lose_their_probes_and_take_the_canonical_address() {
        let (now, canonical, second) = (Instant::now(), CANONICAL, SECOND);
        let (mut table, key) = edge_table(now, PathMode::Failover);
        // The core's probe on path 2, in the middle of a GRO batch of
        // 36-byte datagrams, and last in a batch of longer ones.
        let probe = |seq| {
            ProbeRepr {
                bind: false,
                from_client: false,
                answer: false,
                path: PathId::new(2).unwrap(),
                mode: PathMode::Failover,
                seq,
                sent_us: 5 * seq,
                echo_us: 0,
                hold_us: 0,
                received: 0,
                rate_kbit: None,
                realtime: false,
            }
            .emit(&key)
        };
        let quic = |n: u8, len: usize| -> Vec<u8> {
            let mut d = vec![n; len];
            d[0] = 0x40 | n;
            d
        };
        let (a, b) = (quic(1, PROBE_LEN), quic(2, PROBE_LEN));
        let (c, d) = (quic(3, 1200), quic(4, 1200));
        let mut storage = [
            [a.as_slice(), &probe(1), &b].concat(),
            [c.as_slice(), &d, &probe(2)].concat(),
            quic(5, 100),
        ];
        let mut meta = [
            Received {
                addr: second,
                len: 3 * PROBE_LEN,
                stride: PROBE_LEN,
                ecn: None,
                dst_ip: Some("10.1.0.1".parse().unwrap()),
            },
            Received {
                addr: second,
                len: 2 * 1200 + PROBE_LEN,
                stride: 1200,
                ecn: None,
                dst_ip: Some("10.1.0.1".parse().unwrap()),
            },
            Received {
                addr: addr("203.0.113.5:999"),
                len: 100,
                stride: 100,
                ecn: None,
                dst_ip: None,
            },
        ];
        let mut bufs: Vec<&mut [u8]> = storage.iter_mut().map(|b| b.as_mut_slice()).collect();
        assert!(map_received(&mut table, now, &mut bufs, &mut meta));
        drop(bufs);
        assert_eq!((meta[0].len, meta[0].stride), (2 * PROBE_LEN, PROBE_LEN));
        assert_eq!(&storage[0][..2 * PROBE_LEN], [a, b].concat().as_slice());
        assert_eq!(meta[1].len, 2 * 1200);
        assert_eq!(&storage[1][..2400], [c, d].concat().as_slice());
        assert!(meta[..2].iter().all(|m| m.addr == canonical));
        // A stranger passes unchanged: quinn decides.
        assert_eq!(meta[2].addr, addr("203.0.113.5:999"));
        let status = table.status(canonical).unwrap();
        assert_eq!(status.paths[1].probes_received, 2);
        assert_eq!(status.paths[1].received_bytes, 2 * PROBE_LEN as u64 + 2400);
    }

    /// The core's table for the edge of [`edge_table`] (which it sees at
    /// 10.0.0.1:5000 and 10.1.0.1:5000), and probes exchanged for a second
    /// until both paths are up at both ends; returns the core's table and
    /// the time.
    fn both_up(edge: &mut PathTable, key: PathKey, now: Instant) -> (PathTable, Instant) {
        let edge_at = |hop: Hop| {
            if hop.destination == CANONICAL {
                addr("10.0.0.1:5000")
            } else {
                addr("10.1.0.1:5000")
            }
        };
        let mut core = PathTable::default();
        core.bind(now, addr("10.0.0.1:5000"), None, key, Side::Server);
        let mut at = now;
        let mut due = Vec::new();
        for _ in 0..40 {
            at += Duration::from_millis(25);
            edge.poll(at, &mut due);
            for (hop, probe) in due.drain(..) {
                let _ = core.on_probe(at, edge_at(hop), Some(hop.destination.ip()), &probe);
            }
            core.poll(at, &mut due);
            for (hop, probe) in due.drain(..) {
                let from = if hop.destination.ip().to_string() == "10.0.0.1" {
                    CANONICAL
                } else {
                    SECOND
                };
                let _ = edge.on_probe(at, from, Some(hop.destination.ip()), &probe);
            }
        }
        (core, at)
    }

    #[test]
    fn in_spread_fec_mode_repairs_go_on_the_other_path_and_data_on_the_first() {
        let (mut table, key) = edge_table(Instant::now(), PathMode::SpreadFec);
        let (mut core, now) = both_up(&mut table, key, Instant::now());
        let data = table
            .route(now, CANONICAL, 1200, 1200, &mut Vec::new())
            .unwrap();
        assert_eq!(data.destination, CANONICAL, "no copies in spread-fec");
        let repair = table.route_repair(now, CANONICAL, 300).unwrap();
        assert_eq!(repair.destination, SECOND);
        assert_eq!(repair.src_ip, Some("10.1.0.1".parse().unwrap()));
        let status = table.status(CANONICAL).unwrap();
        assert_eq!(status.mode, "spread-fec");
        assert!(status.paths[1].repairs && !status.paths[1].data);
        assert_eq!(status.paths[1].repair_bytes, 300);
        // The core follows: its repairs go on its other path too.
        let edge = addr("10.0.0.1:5000");
        assert_eq!(core.status(edge).unwrap().mode, "spread-fec");
        let back = core.route_repair(now, edge, 300).unwrap();
        assert_eq!(back.destination, addr("10.1.0.1:5000"));
        // A repair to an address with no paths is not routed.
        assert_eq!(table.route_repair(now, addr("203.0.113.9:1"), 10), None);
    }

    #[test]
    fn in_duplicate_mode_copies_go_on_the_other_path_and_the_second_arrival_is_dropped() {
        let (now, canonical, second) = (Instant::now(), CANONICAL, SECOND);
        let (mut table, key) = edge_table(now, PathMode::Duplicate);
        let (core, now) = both_up(&mut table, key, now);
        let state = table.status(canonical).unwrap();
        assert!(state.paths.iter().all(|p| p.state == "up"), "{state:?}");
        assert_eq!(
            core.status(addr("10.0.0.1:5000")).unwrap().mode,
            "duplicate",
            "the core follows the edge's mode"
        );
        let mut copies = Vec::new();
        let hop = table.route(now, canonical, 1000, 0, &mut copies).unwrap();
        assert_eq!(hop.destination, canonical);
        assert!(copies.is_empty(), "nothing flagged: no copy");
        table.route(now, canonical, 1000, 300, &mut copies).unwrap();
        assert_eq!(copies.len(), 1);
        assert_eq!(copies[0].destination, second);
        assert_eq!(copies[0].src_ip, Some("10.1.0.1".parse().unwrap()));
        let status = table.status(canonical).unwrap();
        assert_eq!(status.mode, "duplicate");
        assert_eq!(status.paths[1].copy_bytes, 300);

        // The same datagram from both paths, and another: quinn sees each
        // once.
        let mut a = vec![0x41u8; 300];
        a[299] = 1;
        let mut b = vec![0x42u8; 300];
        b[299] = 2;
        let mut storage = [[a.as_slice(), &b].concat(), a.clone()];
        let mut meta = [
            Received {
                addr: canonical,
                len: 600,
                stride: 300,
                ecn: None,
                dst_ip: None,
            },
            Received {
                addr: second,
                len: 300,
                stride: 300,
                ecn: None,
                dst_ip: Some("10.1.0.1".parse().unwrap()),
            },
        ];
        let mut bufs: Vec<&mut [u8]> = storage.iter_mut().map(|b| b.as_mut_slice()).collect();
        map_received(&mut table, now, &mut bufs, &mut meta);
        assert_eq!((meta[0].len, meta[1].len), (600, 0));
        assert_eq!(table.status(canonical).unwrap().duplicates_dropped, 1);
    }
}
