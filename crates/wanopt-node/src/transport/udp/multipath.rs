//! The path layer in the wrapped socket: what quinn sends to a peer's
//! canonical address leaves on the peer's data path (its `src_ip` and
//! destination rewritten, GSO batches kept whole), what arrives from any
//! of the peer's paths is handed to quinn as from the canonical address,
//! probes are taken out before quinn sees them, and a task of its own
//! sends the probes due. A node without paths pays one atomic load per
//! send and per receive, and sends no probe.

use std::io::{self, IoSliceMut};
use std::sync::atomic::Ordering;
use std::sync::Weak;
use std::time::{Duration, Instant};

use quinn::udp::{RecvMeta, Transmit};

use super::paths::{is_probe, Hop, PathTable};
use super::socket::{segments, DupSocket};

/// `transmit` sent on `hop`: the same datagrams, segment size and ECN.
pub(super) fn rewrite<'a>(transmit: &Transmit<'a>, hop: Hop) -> Transmit<'a> {
    Transmit {
        destination: hop.destination,
        ecn: transmit.ecn,
        contents: transmit.contents,
        segment_size: transmit.segment_size,
        src_ip: hop.src_ip.or(transmit.src_ip),
    }
}

/// Keeps the datagrams of a received buffer that `keep` wants, moving
/// them up so the buffer stays `stride`-spaced (only its last datagram
/// shorter); sets `m.len`.
fn retain_segments(buf: &mut [u8], m: &mut RecvMeta, mut keep: impl FnMut(&[u8]) -> bool) {
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

/// Takes the probes out of the first `received` buffers (moving the rest
/// up, so a GRO buffer stays `stride`-spaced), drops the second copies of
/// a peer that duplicates, and hands a datagram from a known path to quinn
/// as from its peer's canonical address. Returns whether any probe was
/// taken.
pub(super) fn map_received(
    table: &mut PathTable,
    now: Instant,
    bufs: &mut [IoSliceMut<'_>],
    meta: &mut [RecvMeta],
    received: usize,
) -> bool {
    let mut probes = false;
    for (buf, m) in bufs.iter_mut().zip(meta.iter_mut()).take(received) {
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

/// The bytes of `transmit`'s datagrams that `flagged` marks (bit i: the
/// i-th).
fn flagged_len(transmit: &Transmit, flagged: u64) -> usize {
    if flagged == 0 {
        return 0;
    }
    let size = transmit
        .segment_size
        .unwrap_or(transmit.contents.len())
        .max(1);
    transmit
        .contents
        .chunks(size)
        .enumerate()
        .filter(|(i, _)| *i < 64 && flagged & (1 << i) != 0)
        .map(|(_, d)| d.len())
        .sum()
}

/// The runs of consecutive datagrams of `transmit` that `flagged` marks,
/// each as a transmit of its own on `hop` (a run keeps the batch's
/// segment size: only a batch's last datagram is shorter).
fn flagged_runs<'a>(
    transmit: &Transmit<'a>,
    flagged: u64,
    hop: Hop,
) -> impl Iterator<Item = Transmit<'a>> + 'a {
    let size = transmit
        .segment_size
        .unwrap_or(transmit.contents.len())
        .max(1);
    let count = transmit.contents.len().div_ceil(size).min(64);
    let (contents, ecn) = (transmit.contents, transmit.ecn);
    let src_ip = hop.src_ip.or(transmit.src_ip);
    let mut i = 0;
    std::iter::from_fn(move || {
        while i < count && flagged & (1 << i) == 0 {
            i += 1;
        }
        if i >= count {
            return None;
        }
        let first = i;
        while i < count && flagged & (1 << i) != 0 {
            i += 1;
        }
        let end = (i * size).min(contents.len());
        let run = &contents[first * size..end];
        Some(Transmit {
            destination: hop.destination,
            ecn,
            contents: run,
            segment_size: (i - first > 1).then_some(size),
            src_ip,
        })
    })
}

impl DupSocket {
    /// Sends `transmit` on its destination's data path, or unchanged to
    /// an address with no paths. In duplicate mode the datagrams that
    /// `flagged` marks (those that carry UDP flows) are also sent on every
    /// other path that is not down; a copy that does not fit in the
    /// socket buffer is lost, as on a busy path.
    pub(super) fn send_raw(&self, transmit: &Transmit, flagged: u64) -> io::Result<()> {
        if self.shared.paths_on.load(Ordering::Relaxed) {
            let mut copies = Vec::new();
            let hop = self.shared.paths().route(
                Instant::now(),
                transmit.destination,
                transmit.contents.len(),
                flagged_len(transmit, flagged),
                &mut copies,
            );
            if let Some(hop) = hop {
                self.inner.try_send(&rewrite(transmit, hop))?;
                for copy in copies {
                    for run in flagged_runs(transmit, flagged, copy) {
                        let _ = self.inner.try_send(&run);
                    }
                }
                return Ok(());
            }
        }
        self.inner.try_send(transmit)
    }

    /// Sends an FEC repair: on the repairs path in spread-fec mode, else
    /// as [`DupSocket::send_raw`].
    pub(super) fn send_repair(&self, transmit: &Transmit) -> io::Result<()> {
        if self.shared.paths_on.load(Ordering::Relaxed) {
            let hop = self.shared.paths().route_repair(
                Instant::now(),
                transmit.destination,
                transmit.contents.len(),
            );
            if let Some(hop) = hop {
                return self.inner.try_send(&rewrite(transmit, hop));
            }
        }
        self.inner.try_send(transmit)
    }

    /// [`map_received`] on the socket's table; wakes the probe task when
    /// probes arrived (an answer may be due).
    pub(super) fn map_paths(
        &self,
        bufs: &mut [IoSliceMut<'_>],
        meta: &mut [RecvMeta],
        received: usize,
    ) {
        let probes = map_received(
            &mut self.shared.paths(),
            Instant::now(),
            bufs,
            meta,
            received,
        );
        if probes {
            self.shared.probe_wake.notify_one();
        }
    }
}

/// Sends the probes due on every path, sleeping until the next is, and
/// ends when the socket is dropped.
pub(super) async fn send_probes(socket: Weak<DupSocket>) {
    let Some(shared) = socket.upgrade().map(|s| s.shared.clone()) else {
        return;
    };
    let mut due = Vec::new();
    loop {
        let next = {
            let Some(socket) = socket.upgrade() else {
                return;
            };
            if shared.paths_on.load(Ordering::Relaxed) {
                let next = shared.paths().poll(Instant::now(), &mut due);
                for (hop, probe) in due.drain(..) {
                    // A full buffer loses the probe, as the path would.
                    let _ = socket.inner.try_send(&Transmit {
                        destination: hop.destination,
                        ecn: None,
                        contents: &probe,
                        segment_size: None,
                        src_ip: hop.src_ip,
                    });
                }
                next
            } else {
                None
            }
        };
        let sleep = match next {
            Some(at) => tokio::time::sleep_until(at.into()),
            None => tokio::time::sleep(Duration::from_secs(1)),
        };
        tokio::select! {
            () = sleep => {}
            () = shared.probe_wake.notified() => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{IpAddr, Ipv4Addr, SocketAddr};
    use wanopt_proto::path::wire::EXPORTER_LEN;
    use wanopt_proto::path::{PathId, PathKey, PathMode, ProbeRepr, Side, PROBE_LEN};

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
                ("10.0.0.1".parse().unwrap(), CANONICAL),
                ("10.1.0.1".parse().unwrap(), SECOND),
            ],
            mode,
        );
        let key = PathKey::from_exporter(&[3; EXPORTER_LEN]);
        table.bind(now, CANONICAL, None, key.clone(), Side::Client);
        (table, key)
    }

    #[test]
    fn a_transmit_keeps_its_batch_and_takes_the_paths_addresses() {
        let datagrams = vec![7u8; 3 * 1200 + 500];
        let quinn_sends = Transmit {
            destination: addr("192.0.2.1:4433"),
            ecn: None,
            contents: &datagrams,
            segment_size: Some(1200),
            src_ip: None,
        };
        let hop = Hop {
            destination: addr("198.51.100.1:4433"),
            src_ip: Some("10.1.0.1".parse().unwrap()),
        };
        let sent = rewrite(&quinn_sends, hop);
        assert_eq!(sent.destination, hop.destination);
        assert_eq!(sent.src_ip, hop.src_ip);
        assert_eq!(sent.segment_size, Some(1200));
        assert_eq!(sent.contents.as_ptr(), datagrams.as_ptr());
        // A path with no local address keeps quinn's.
        let any = Hop {
            src_ip: None,
            ..hop
        };
        let quinn_ip = Transmit {
            src_ip: Some("10.0.0.9".parse().unwrap()),
            ..quinn_sends
        };
        assert_eq!(rewrite(&quinn_ip, any).src_ip, quinn_ip.src_ip);
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
            RecvMeta {
                addr: second,
                len: 3 * PROBE_LEN,
                stride: PROBE_LEN,
                ecn: None,
                dst_ip: Some("10.1.0.1".parse().unwrap()),
            },
            RecvMeta {
                addr: second,
                len: 2 * 1200 + PROBE_LEN,
                stride: 1200,
                ecn: None,
                dst_ip: Some("10.1.0.1".parse().unwrap()),
            },
            RecvMeta {
                addr: addr("203.0.113.5:999"),
                len: 100,
                stride: 100,
                ecn: None,
                dst_ip: None,
            },
        ];
        let mut bufs: Vec<IoSliceMut<'_>> =
            storage.iter_mut().map(|b| IoSliceMut::new(b)).collect();
        assert!(map_received(&mut table, now, &mut bufs, &mut meta, 3));
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

    #[test]
    fn only_the_flagged_datagrams_are_copied_in_runs_that_keep_the_segment_size() {
        // Five datagrams of 100 bytes and a last of 40; the first, second,
        // fourth and last carry UDP flows.
        let contents: Vec<u8> = (0..540).map(|i| (i / 100) as u8).collect();
        let transmit = Transmit {
            destination: addr("192.0.2.1:4433"),
            ecn: None,
            contents: &contents,
            segment_size: Some(100),
            src_ip: None,
        };
        let flagged = 0b10_1011;
        assert_eq!(flagged_len(&transmit, flagged), 340);
        assert_eq!(flagged_len(&transmit, 0), 0);
        let hop = Hop {
            destination: addr("198.51.100.1:4433"),
            src_ip: Some("10.1.0.1".parse().unwrap()),
        };
        let runs: Vec<_> = flagged_runs(&transmit, flagged, hop).collect();
        assert_eq!(runs.len(), 3);
        assert_eq!(
            (runs[0].contents, runs[0].segment_size),
            (&contents[..200], Some(100))
        );
        assert_eq!(
            (runs[1].contents, runs[1].segment_size),
            (&contents[300..400], None)
        );
        assert_eq!(
            (runs[2].contents, runs[2].segment_size),
            (&contents[500..], None)
        );
        assert!(runs
            .iter()
            .all(|r| r.destination == hop.destination && r.src_ip == hop.src_ip));
        // A single datagram.
        let one = Transmit {
            segment_size: None,
            contents: &contents[..100],
            ..transmit
        };
        assert_eq!(flagged_runs(&one, 1, hop).count(), 1);
        assert_eq!(flagged_runs(&one, 0, hop).count(), 0);
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
            RecvMeta {
                addr: canonical,
                len: 600,
                stride: 300,
                ecn: None,
                dst_ip: None,
            },
            RecvMeta {
                addr: second,
                len: 300,
                stride: 300,
                ecn: None,
                dst_ip: Some("10.1.0.1".parse().unwrap()),
            },
        ];
        let mut bufs: Vec<IoSliceMut<'_>> =
            storage.iter_mut().map(|b| IoSliceMut::new(b)).collect();
        map_received(&mut table, now, &mut bufs, &mut meta, 2);
        assert_eq!((meta[0].len, meta[1].len), (600, 0));
        assert_eq!(table.status(canonical).unwrap().duplicates_dropped, 1);
    }
}
