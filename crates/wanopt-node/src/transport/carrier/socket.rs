//! One TCP connection as quinn's socket: what quinn sends is framed
//! ([`wanopt_proto::carrier`]) into a bounded outbox a writer task puts on
//! the connection; a reader task turns what arrives back into packets.
//!
//! Nothing is dropped: a full outbox makes quinn wait (`WouldBlock`, then
//! the poller), and a full inbox stops the reader, so the kernel's TCP
//! flow control slows the far side. With `TCP_NOTSENT_LOWAT` the kernel
//! holds little unsent data either, so quinn decides the order of what
//! goes next (classes, control) almost up to the wire.

use std::collections::VecDeque;
use std::fmt;
use std::io::{self, IoSliceMut};
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};

use bytes::Bytes;
use quinn::udp::{RecvMeta, Transmit};
use quinn::{AsyncUdpSocket, UdpPoller};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::{watch, Notify};
use tracing::debug;
use wanopt_proto::carrier::{encode, Deframer};

/// Framed bytes the outbox holds before quinn is told to wait.
const OUTBOX_LIMIT: usize = 64 << 10;

/// Packets' bytes the inbox holds before the reader stops reading.
const INBOX_LIMIT: usize = 1 << 20;

/// Bytes of one read from the connection.
const READ_CHUNK: usize = 64 << 10;

/// Packets one `Transmit` may carry (quinn's batches).
const MAX_SEGMENTS: usize = 16;

#[derive(Default)]
struct Outbox {
    bytes: Vec<u8>,
    /// Pollers waiting for room.
    waiting: Vec<Waker>,
}

#[derive(Default)]
struct Inbox {
    packets: VecDeque<Bytes>,
    bytes: usize,
    /// quinn's receiving task, waiting for a packet.
    waker: Option<Waker>,
}

/// What the socket, its pollers and its two tasks share.
struct Shared {
    outbox: Mutex<Outbox>,
    /// Wakes the writer: the outbox has bytes.
    queued: Notify,
    inbox: Mutex<Inbox>,
    /// Wakes the reader: quinn took packets from a full inbox.
    drained: Notify,
    /// Set once the connection failed or closed (with why).
    lost: watch::Sender<Option<String>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Shared {
    fn lose(&self, why: String) {
        self.lost.send_if_modified(|lost| {
            let first = lost.is_none();
            if first {
                *lost = Some(why);
            }
            first
        });
        // Whoever waits may look again (and see nothing comes).
        let waiting = std::mem::take(&mut lock(&self.outbox).waiting);
        waiting.into_iter().for_each(Waker::wake);
        if let Some(waker) = lock(&self.inbox).waker.take() {
            waker.wake();
        }
    }
}

/// One TCP connection as a quinn socket to one peer.
pub struct CarrierSocket {
    local: SocketAddr,
    peer: SocketAddr,
    shared: Arc<Shared>,
    tasks: [tokio::task::AbortHandle; 2],
}

impl fmt::Debug for CarrierSocket {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CarrierSocket")
            .field("local", &self.local)
            .field("peer", &self.peer)
            .finish()
    }
}

impl Drop for CarrierSocket {
    fn drop(&mut self) {
        // The tasks own the connection's halves: it closes with them.
        self.tasks.iter().for_each(|t| t.abort());
    }
}

/// Tells when the carrier's connection is lost, and why.
#[derive(Clone)]
pub struct Lost(watch::Receiver<Option<String>>);

impl Lost {
    /// Waits until the connection failed or closed; why.
    pub async fn wait(mut self) -> String {
        match self.0.wait_for(Option::is_some).await {
            Ok(why) => why.clone().unwrap_or_default(),
            Err(_) => "the carrier closed".to_owned(),
        }
    }
}

impl CarrierSocket {
    /// Wraps a connected stream (the preamble already exchanged); `peer`
    /// is the address quinn knows the far end by.
    pub fn new(stream: TcpStream, peer: SocketAddr) -> io::Result<(Arc<CarrierSocket>, Lost)> {
        let local = stream.local_addr()?;
        let (lost_tx, lost_rx) = watch::channel(None);
        let shared = Arc::new(Shared {
            outbox: Mutex::new(Outbox::default()),
            queued: Notify::new(),
            inbox: Mutex::new(Inbox::default()),
            drained: Notify::new(),
            lost: lost_tx,
        });
        let (read, write) = stream.into_split();
        let reader = tokio::spawn(read_packets(read, shared.clone()));
        let writer = tokio::spawn(write_packets(write, shared.clone()));
        let socket = CarrierSocket {
            local,
            peer,
            shared,
            tasks: [reader.abort_handle(), writer.abort_handle()],
        };
        Ok((Arc::new(socket), Lost(lost_rx)))
    }
}

async fn read_packets(mut read: tokio::net::tcp::OwnedReadHalf, shared: Arc<Shared>) {
    let mut deframer = Deframer::default();
    let mut chunk = vec![0u8; READ_CHUNK];
    loop {
        // A full inbox: wait until quinn takes some (TCP holds the rest).
        loop {
            let drained = shared.drained.notified();
            if lock(&shared.inbox).bytes < INBOX_LIMIT {
                break;
            }
            drained.await;
        }
        let n = match read.read(&mut chunk).await {
            Ok(0) => return shared.lose("the peer closed the TCP connection".to_owned()),
            Ok(n) => n,
            Err(e) => return shared.lose(format!("TCP connection failed: {e}")),
        };
        deframer.extend(&chunk[..n]);
        let mut inbox = lock(&shared.inbox);
        loop {
            match deframer.next_frame() {
                Ok(Some(packet)) => {
                    inbox.bytes += packet.len();
                    inbox.packets.push_back(packet);
                }
                Ok(None) => break,
                Err(e) => {
                    drop(inbox);
                    return shared.lose(format!("not a wanopt carrier: {e}"));
                }
            }
        }
        if let Some(waker) = inbox.waker.take() {
            waker.wake();
        }
    }
}

async fn write_packets(mut write: tokio::net::tcp::OwnedWriteHalf, shared: Arc<Shared>) {
    let mut sending = Vec::with_capacity(OUTBOX_LIMIT);
    loop {
        let queued = shared.queued.notified();
        let waiting = {
            let mut outbox = lock(&shared.outbox);
            std::mem::swap(&mut outbox.bytes, &mut sending);
            std::mem::take(&mut outbox.waiting)
        };
        // Room again: quinn may queue the next while these go out.
        waiting.into_iter().for_each(Waker::wake);
        if sending.is_empty() {
            if shared.lost.borrow().is_some() {
                return;
            }
            queued.await;
            continue;
        }
        if let Err(e) = write.write_all(&sending).await {
            return shared.lose(format!("TCP connection failed: {e}"));
        }
        sending.clear();
    }
}

/// Waits for room in the outbox.
struct Poller(Arc<Shared>);

impl fmt::Debug for Poller {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("CarrierPoller")
    }
}

impl UdpPoller for Poller {
    fn poll_writable(self: Pin<&mut Self>, cx: &mut Context) -> Poll<io::Result<()>> {
        let mut outbox = lock(&self.0.outbox);
        if outbox.bytes.len() < OUTBOX_LIMIT || self.0.lost.borrow().is_some() {
            return Poll::Ready(Ok(()));
        }
        if !outbox.waiting.iter().any(|w| w.will_wake(cx.waker())) {
            outbox.waiting.push(cx.waker().clone());
        }
        Poll::Pending
    }
}

impl AsyncUdpSocket for CarrierSocket {
    fn create_io_poller(self: Arc<Self>) -> Pin<Box<dyn UdpPoller>> {
        Box::pin(Poller(self.shared.clone()))
    }

    fn try_send(&self, transmit: &Transmit) -> io::Result<()> {
        if self.shared.lost.borrow().is_some() {
            // Dropped, as on a dead path: the tunnel closes on `Lost`.
            return Ok(());
        }
        let mut outbox = lock(&self.shared.outbox);
        if outbox.bytes.len() >= OUTBOX_LIMIT {
            return Err(io::ErrorKind::WouldBlock.into());
        }
        let segment = transmit
            .segment_size
            .unwrap_or(transmit.contents.len())
            .max(1);
        for packet in transmit.contents.chunks(segment) {
            if let Err(e) = encode(packet, &mut outbox.bytes) {
                debug!("carrier to {}: packet not sent: {e}", self.peer);
            }
        }
        drop(outbox);
        self.shared.queued.notify_one();
        Ok(())
    }

    fn poll_recv(
        &self,
        cx: &mut Context,
        bufs: &mut [IoSliceMut<'_>],
        meta: &mut [RecvMeta],
    ) -> Poll<io::Result<usize>> {
        let mut inbox = lock(&self.shared.inbox);
        let mut handed = 0;
        for (buf, m) in bufs.iter_mut().zip(meta.iter_mut()) {
            let Some(packet) = inbox.packets.pop_front() else {
                break;
            };
            inbox.bytes -= packet.len();
            if packet.len() > buf.len() {
                // Longer than quinn takes: not one of ours.
                debug!(
                    "carrier from {}: {}-byte packet dropped",
                    self.peer,
                    packet.len()
                );
                continue;
            }
            buf[..packet.len()].copy_from_slice(&packet);
            *m = RecvMeta {
                addr: self.peer,
                len: packet.len(),
                stride: packet.len(),
                ecn: None,
                dst_ip: None,
            };
            handed += 1;
        }
        if handed > 0 {
            drop(inbox);
            self.shared.drained.notify_one();
            return Poll::Ready(Ok(handed));
        }
        // Nothing (or only dropped packets): wait. A lost connection ends
        // the tunnel through `Lost`, not through an error here, which
        // would stop the endpoint without a reason.
        if inbox.packets.is_empty() {
            inbox.waker = Some(cx.waker().clone());
        } else {
            cx.waker().wake_by_ref();
        }
        drop(inbox);
        self.shared.drained.notify_one();
        Poll::Pending
    }

    fn local_addr(&self) -> io::Result<SocketAddr> {
        Ok(self.local)
    }

    fn max_transmit_segments(&self) -> usize {
        MAX_SEGMENTS
    }

    fn may_fragment(&self) -> bool {
        false
    }
}
