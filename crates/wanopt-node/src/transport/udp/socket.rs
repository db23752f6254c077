//! The wrapped socket quinn sends and receives through: it wraps what
//! goes out as FEC sources where a peer is sent FEC and records it for the
//! tail policy; it takes parity, repairs and reports out of what comes in,
//! unwraps sources, hands rebuilt datagrams on; and a task of its own
//! sends the copies, the repairs of blocks due and the reports.

use std::io::{self, IoSliceMut};
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use quinn::udp::{RecvMeta, Transmit};
use quinn::{AsyncUdpSocket, UdpPoller};
use wanopt_proto::dup::MAX_TAIL_DATAGRAMS;
use wanopt_proto::fec;
use wanopt_proto::fec_stream::{self, SOURCE_HEADER};

use super::paths::is_probe;
use super::shared::Shared;

/// Most datagrams per batch quinn is offered, so that a batch of FEC
/// sources (five bytes longer each) stays under 64 KiB.
const MAX_SEGMENTS: usize = 40;

/// The wrapped socket.
#[derive(Debug)]
pub(super) struct DupSocket {
    pub(super) inner: Arc<dyn AsyncUdpSocket>,
    pub(super) shared: Arc<Shared>,
}

/// Whether `datagram` belongs to the datagram layer (tail parity, FEC)
/// rather than QUIC: its first byte has QUIC's fixed bit clear.
fn is_layer(datagram: &[u8]) -> bool {
    fec::is_parity(datagram) || fec_stream::kind(datagram).is_some() || is_probe(datagram)
}

/// Whether any of the first `received` buffers holds a datagram `pred`
/// picks.
fn any_segment(
    bufs: &[IoSliceMut<'_>],
    meta: &[RecvMeta],
    received: usize,
    pred: fn(&[u8]) -> bool,
) -> bool {
    bufs.iter()
        .zip(meta.iter())
        .take(received)
        .any(|(buf, m)| segments(&buf[..m.len.min(buf.len())], m.stride).any(pred))
}

impl DupSocket {
    fn record(&self, transmit: &Transmit) {
        let now = Instant::now();
        let meta = (transmit.ecn, transmit.src_ip);
        let size = transmit
            .segment_size
            .unwrap_or(transmit.contents.len())
            .max(1);
        let mut armed = false;
        {
            let mut policy = self.shared.policy();
            let count = transmit.contents.len().div_ceil(size);
            // Only the batch's last datagrams can end up in a tail (a
            // parity tail is the longest): the front is counted, not
            // copied.
            let unheld = count.saturating_sub(MAX_TAIL_DATAGRAMS.max(fec::MAX_SOURCES));
            for (i, datagram) in transmit.contents.chunks(size).enumerate() {
                if i < unheld {
                    policy.on_send_unheld(now, transmit.destination, datagram.len());
                } else {
                    armed |= policy.on_send(now, transmit.destination, &meta, datagram);
                }
            }
        }
        if armed {
            self.shared.wake.notify_one();
        }
    }

    /// Sends `transmit` as FEC sources if its destination is sent FEC;
    /// `None` if it is not (the caller sends it as it is).
    fn try_send_fec(&self, transmit: &Transmit, flagged: u64) -> Option<io::Result<()>> {
        let mut fec = self.shared.fec();
        if !fec
            .senders
            .get(&transmit.destination)
            .is_some_and(|s| s.encoder.wraps())
        {
            return None;
        }
        let mut wrapped = std::mem::take(&mut fec.wire);
        let sender = fec.senders.get_mut(&transmit.destination)?;
        let size = transmit
            .segment_size
            .unwrap_or(transmit.contents.len())
            .max(1);
        let count = transmit.contents.len().div_ceil(size);
        wrapped.clear();
        wrapped.reserve(transmit.contents.len() + count * SOURCE_HEADER);
        // The datagrams that carry real-time UDP flows (quinn marks them)
        // go in the call strand, the rest in the bulk strand; each strand
        // numbers its own.
        let calls = if sender.calls.encoder.wraps() {
            flagged
        } else {
            0
        };
        let (mut bulk_n, mut calls_n) = (0, 0);
        for (i, datagram) in transmit.contents.chunks(size).enumerate() {
            if super::fec::in_calls(calls, i) {
                sender.calls.encoder.wrap(calls_n, datagram, &mut wrapped);
                calls_n += 1;
            } else {
                sender.encoder.wrap(bulk_n, datagram, &mut wrapped);
                bulk_n += 1;
            }
        }
        // A block began (a code is on and none was being filled): the
        // task must watch its deadline.
        let idle = |e: &fec_stream::Encoder| e.params().is_some() && e.poll_timeout().is_none();
        let idle = idle(&sender.encoder) || idle(&sender.calls.encoder);
        sender.local_ip = transmit.src_ip;
        let sent = self.send_raw(
            &Transmit {
                destination: transmit.destination,
                ecn: transmit.ecn,
                contents: &wrapped,
                segment_size: transmit.segment_size.map(|s| s + SOURCE_HEADER),
                src_ip: transmit.src_ip,
            },
            flagged,
        );
        fec.wire = wrapped;
        if let Err(e) = sent {
            return Some(Err(e));
        }
        fec.on_sent(
            Instant::now(),
            transmit.destination,
            transmit.contents,
            size,
            calls,
        );
        self.send_outgoing(&mut fec);
        if idle {
            self.shared.wake.notify_one();
        }
        Some(Ok(()))
    }

    /// Sends the repairs and reports waiting in `fec` (a full socket
    /// buffer drops them: the path is busy).
    fn send_outgoing(&self, fec: &mut super::fec::FecPeers) {
        for (destination, datagram) in fec.outgoing.drain(..) {
            let src_ip = fec
                .senders
                .get(&destination)
                .and_then(|s| s.local_ip)
                .or_else(|| fec.receivers.get(&destination).and_then(|r| r.local_ip));
            let transmit = Transmit {
                destination,
                ecn: None,
                contents: &datagram,
                segment_size: None,
                src_ip,
            };
            let _ = if fec_stream::kind(&datagram) == Some(fec_stream::Kind::Repair) {
                self.send_repair(&transmit)
            } else {
                self.send_raw(&transmit, 0)
            };
        }
    }

    /// Closes the FEC blocks that are due and sends reports; returns when
    /// to look again.
    fn send_fec_due(&self, now: Instant) -> Option<Instant> {
        let mut fec = self.shared.fec();
        let next = fec.poll(now);
        self.send_outgoing(&mut fec);
        next
    }
}

impl AsyncUdpSocket for DupSocket {
    fn create_io_poller(self: Arc<Self>) -> Pin<Box<dyn UdpPoller>> {
        self.inner.clone().create_io_poller()
    }

    fn try_send(&self, transmit: &Transmit) -> io::Result<()> {
        self.try_send_marked(transmit, 0)
    }

    /// `flagged`: which datagrams carry UDP flows (quinn's connection
    /// sending, vendored quinn's typed hook).
    fn try_send_marked(&self, transmit: &Transmit, flagged: u64) -> io::Result<()> {
        let fec_sent = if self.shared.fec_on.load(Ordering::Relaxed) {
            self.try_send_fec(transmit, flagged)
        } else {
            None
        };
        match fec_sent {
            Some(result) => result?,
            None => self.send_raw(transmit, flagged)?,
        }
        if self.shared.active.load(Ordering::Relaxed) {
            self.record(transmit);
        }
        Ok(())
    }

    fn poll_recv(
        &self,
        cx: &mut Context,
        bufs: &mut [IoSliceMut<'_>],
        meta: &mut [RecvMeta],
    ) -> Poll<io::Result<usize>> {
        if !self.shared.parity_seen.load(Ordering::Relaxed) {
            let received = std::task::ready!(self.inner.poll_recv(cx, bufs, meta))?;
            let mut paths = self.shared.paths_on.load(Ordering::Relaxed);
            if paths {
                self.map_paths(bufs, meta, received);
            }
            if !any_segment(bufs, meta, received, is_layer) {
                return Poll::Ready(Ok(received));
            }
            if !paths && any_segment(bufs, meta, received, is_probe) {
                // A peer probes paths: map from now on.
                self.shared.paths_on.store(true, Ordering::Relaxed);
                self.map_paths(bufs, meta, received);
                paths = true;
            }
            if paths && !any_segment(bufs, meta, received, is_layer) {
                return Poll::Ready(Ok(received));
            }
            self.shared.parity_seen.store(true, Ordering::Relaxed);
            return Poll::Ready(Ok(self.take_parity(bufs, meta, received)));
        }
        // Datagrams rebuilt from the last batch's parity go first.
        let handed = self.hand_rebuilt(bufs, meta);
        if handed > 0 {
            return Poll::Ready(Ok(handed));
        }
        let received = std::task::ready!(self.inner.poll_recv(cx, bufs, meta))?;
        if self.shared.paths_on.load(Ordering::Relaxed)
            || any_segment(bufs, meta, received, is_probe)
        {
            self.shared.paths_on.store(true, Ordering::Relaxed);
            self.map_paths(bufs, meta, received);
        }
        Poll::Ready(Ok(self.take_parity(bufs, meta, received)))
    }

    fn local_addr(&self) -> io::Result<SocketAddr> {
        self.inner.local_addr()
    }

    fn max_transmit_segments(&self) -> usize {
        self.inner.max_transmit_segments().min(MAX_SEGMENTS)
    }

    fn max_receive_segments(&self) -> usize {
        self.inner.max_receive_segments()
    }

    fn may_fragment(&self) -> bool {
        self.inner.may_fragment()
    }
}

/// The datagrams of a received buffer (several with GRO, `stride` apart).
pub(super) fn segments(buf: &[u8], stride: usize) -> impl Iterator<Item = &[u8]> {
    buf.chunks(stride.max(1))
}

impl DupSocket {
    /// Passes the first `received` buffers through the datagram layer:
    /// parity, repairs and reports are taken out of them, sources
    /// unwrapped, and what is left moved up so a GRO buffer stays
    /// `stride`-spaced with only its last datagram shorter (a datagram
    /// that would break that is held and handed on at the next poll).
    /// QUIC datagrams are remembered for peers that send parity. Returns
    /// `received` (a buffer left empty has length 0).
    fn take_parity(
        &self,
        bufs: &mut [IoSliceMut<'_>],
        meta: &mut [RecvMeta],
        received: usize,
    ) -> usize {
        let mut parity = self.shared.parity();
        let mut fec = self.shared.fec();
        let mut wake = false;
        for (buf, m) in bufs.iter_mut().zip(meta.iter_mut()).take(received) {
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
                    parity.on_datagram(m.addr, m.dst_ip, segment);
                    None
                } else if let Some((kind, strand)) = fec_stream::classify(segment) {
                    let waiting = fec
                        .receivers
                        .get(&m.addr)
                        .is_none_or(|r| r.unreported() == 0);
                    let payload = fec.on_received(m.addr, m.dst_ip, (kind, strand), segment);
                    if kind == fec_stream::Kind::Source {
                        wake |= waiting;
                        if let Some(r) = fec.receivers.get_mut(&m.addr) {
                            r.local_ip = m.dst_ip;
                        }
                    }
                    payload.map(|p| (end - p.len(), end))
                } else {
                    Some((at, end))
                };
                if let Some((start, stop)) = quic {
                    parity.on_datagram(m.addr, m.dst_ip, &buf[start..stop]);
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
        drop(fec);
        drop(parity);
        if wake {
            self.shared.wake.notify_one();
        }
        // Rebuilt datagrams wait for the next poll: quinn polls again at
        // once after a batch (or wakes itself when it paused for fairness).
        received
    }

    /// Moves rebuilt and held datagrams into the buffers; returns how
    /// many.
    fn hand_rebuilt(&self, bufs: &mut [IoSliceMut<'_>], meta: &mut [RecvMeta]) -> usize {
        let mut parity = self.shared.parity();
        let mut fec = self.shared.fec();
        let mut handed = 0;
        for (buf, m) in bufs.iter_mut().zip(meta.iter_mut()) {
            let next: Option<(SocketAddr, Option<IpAddr>, Vec<u8>)> =
                fec.held.pop_front().or_else(|| parity.rebuilt.pop_front());
            let Some((addr, dst_ip, datagram)) = next else {
                break;
            };
            if datagram.len() > buf.len() {
                continue;
            }
            buf[..datagram.len()].copy_from_slice(&datagram);
            *m = RecvMeta {
                addr,
                len: datagram.len(),
                stride: datagram.len(),
                ecn: None,
                dst_ip,
            };
            handed += 1;
        }
        handed
    }
}

/// Sleeps until the next deadline (the tail policy's, an FEC block's, a
/// report's), sends what is due, and ends when the socket is dropped.
pub(super) async fn send_copies(socket: Weak<DupSocket>) {
    let Some(shared) = socket.upgrade().map(|s| s.shared.clone()) else {
        return;
    };
    loop {
        let fec_next = {
            let Some(socket) = socket.upgrade() else {
                return;
            };
            let now = Instant::now();
            shared.sync_senders();
            loop {
                let Some(copy) = shared.policy().poll_transmit(now) else {
                    break;
                };
                let transmit = Transmit {
                    destination: copy.key,
                    ecn: copy.meta.0,
                    contents: &copy.datagram,
                    segment_size: None,
                    src_ip: copy.meta.1,
                };
                // A full socket buffer means the path is busy, not quiet:
                // the copy is not worth waiting for.
                let _ = socket.send_raw(&transmit, 0);
                shared.policy().recycle(copy.datagram);
            }
            socket.send_fec_due(now)
        };
        let deadline = match (shared.policy().poll_timeout(), fec_next) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        match deadline {
            Some(at) => {
                let sleep = tokio::time::sleep_until(at.into());
                tokio::select! {
                    () = sleep => {}
                    () = shared.wake.notified() => {}
                }
            }
            None => {
                // Idle: wait for a send, but look at the socket now and
                // then so the task ends with it.
                tokio::select! {
                    () = shared.wake.notified() => {}
                    () = tokio::time::sleep(Duration::from_secs(1)) => {}
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transport::udp::{Duplication, DuplicationMode};

    /// A datagram like a QUIC packet (fixed bit set), `len` bytes.
    fn quic_like(n: u8, len: usize) -> Vec<u8> {
        let mut d: Vec<u8> = (0..len).map(|i| (i as u8).wrapping_mul(n) ^ n).collect();
        d[0] = 0x40 | (n & 0x3F);
        d
    }

    #[tokio::test]
    async fn parity_is_taken_out_of_received_batches_and_lost_datagrams_handed_on() {
        let std_socket = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let runtime = quinn::default_runtime().unwrap();
        let inner = runtime.wrap_udp_socket(std_socket).unwrap();
        let socket = DupSocket {
            inner,
            shared: Duplication::new(DuplicationMode::Auto).shared,
        };
        let peer: SocketAddr = "192.0.2.1:4433".parse().unwrap();
        let sources: Vec<Vec<u8>> = (1..=10).map(|n| quic_like(n, 1000)).collect();
        let refs: Vec<&[u8]> = sources.iter().map(Vec::as_slice).collect();
        let parity = fec::parity(0, &refs, 4).unwrap();
        let p_len = parity[0].len();

        // A first group only makes the socket start remembering this peer.
        let mut storage = vec![vec![0u8; 4 * 1500]; 2];
        let mut meta = [RecvMeta::default(); 2];
        let fill =
            |storage: &mut Vec<Vec<u8>>, meta: &mut [RecvMeta; 2], batches: &[Vec<&[u8]>]| {
                for (i, batch) in batches.iter().enumerate() {
                    let mut at = 0;
                    for d in batch {
                        storage[i][at..at + d.len()].copy_from_slice(d);
                        at += d.len();
                    }
                    meta[i] = RecvMeta {
                        addr: peer,
                        len: at,
                        stride: batch[0].len(),
                        ecn: None,
                        dst_ip: None,
                    };
                }
            };
        let received =
            |socket: &DupSocket, storage: &mut Vec<Vec<u8>>, meta: &mut [RecvMeta; 2]| {
                let mut bufs: Vec<IoSliceMut<'_>> =
                    storage.iter_mut().map(|b| IoSliceMut::new(b)).collect();
                socket.take_parity(&mut bufs, meta, 2)
            };
        fill(
            &mut storage,
            &mut meta,
            &[vec![&parity[0]], vec![&sources[0]]],
        );
        assert_eq!(received(&socket, &mut storage, &mut meta), 2);
        assert_eq!(meta[0].len, 0, "parity never reaches quinn");
        assert_eq!(meta[1].len, 1000);

        // Now the sources arrive in GRO batches, two of them lost (the
        // third and the ninth),
        // then the parity: first as a GRO batch of its own, then one shard
        // in the middle of a batch of datagrams the same size.
        fill(
            &mut storage,
            &mut meta,
            &[
                vec![&sources[0], &sources[1], &sources[3]],
                vec![
                    &sources[4],
                    &sources[5],
                    &sources[6],
                    &sources[7],
                    &sources[9],
                ],
            ],
        );
        received(&socket, &mut storage, &mut meta);
        let same_size = quic_like(60, p_len);
        let short = quic_like(61, 100);
        fill(
            &mut storage,
            &mut meta,
            &[
                vec![&parity[0], &parity[1], &parity[2]],
                vec![&same_size, &parity[3], &short],
            ],
        );
        assert_eq!(received(&socket, &mut storage, &mut meta), 2);
        assert_eq!(meta[0].len, 0);
        // The rest moved up: still `stride` apart, the short one last.
        assert_eq!((meta[1].len, meta[1].stride), (p_len + 100, p_len));
        assert_eq!(&storage[1][..p_len], &same_size[..]);
        assert_eq!(&storage[1][p_len..p_len + 100], &short[..]);

        // The next poll hands the two rebuilt datagrams over, byte exact.
        let mut out = vec![vec![0u8; 1500]; 3];
        let mut bufs: Vec<IoSliceMut<'_>> = out.iter_mut().map(|b| IoSliceMut::new(b)).collect();
        let mut meta3 = [RecvMeta::default(); 3];
        assert_eq!(socket.hand_rebuilt(&mut bufs, &mut meta3), 2);
        drop(bufs);
        let mut got: Vec<Vec<u8>> = (0..2).map(|i| out[i][..meta3[i].len].to_vec()).collect();
        got.sort();
        let mut lost = vec![sources[2].clone(), sources[8].clone()];
        lost.sort();
        assert_eq!(got, lost);
        assert!(meta3[..2]
            .iter()
            .all(|m| m.addr == peer && m.stride == m.len));
        assert_eq!(socket.shared.parity().rebuilt_from(peer), 2);
        assert_eq!(socket.hand_rebuilt(&mut [], &mut []), 0);
    }
}
