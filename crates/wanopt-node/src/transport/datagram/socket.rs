//! The wrapped socket quinn sends and receives through, and the task that
//! drives the layer's timer: both call the layer with `Instant::now()`
//! and put on the runtime's socket what it gives.

use std::collections::HashMap;
use std::io::{self, IoSliceMut};
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use quinn::udp::{EcnCodepoint, RecvMeta, Transmit as QuinnTransmit};
use quinn::{AsyncUdpSocket, UdpPoller};
use tokio::sync::Notify;
use tracing::{debug, info, trace};
use wanopt_proto::datagram::{DatagramLayer, Ecn, Event, Received, Transmit};

use crate::transport::bbr::BondShare;

/// Most datagrams per batch quinn is offered, so that a batch of FEC
/// sources (five bytes longer each) stays under 64 KiB.
const MAX_SEGMENTS: usize = 40;

/// How long the timer task sleeps when the layer has no deadline, before
/// it looks whether its socket is gone.
const IDLE_LOOK: Duration = Duration::from_secs(1);

/// The layer, and what the adapter keeps beside it, behind the one lock.
#[derive(Debug)]
pub(super) struct Driver {
    pub(super) layer: DatagramLayer,
    /// Per peer, its connection's congestion controller's "data waits"
    /// flag, handed to the layer before each timeout.
    pub(super) senders: Vec<(SocketAddr, Arc<AtomicBool>)>,
    /// Per peer, the counter of repaired packets its connection's
    /// controller takes (wanopt's BBR).
    pub(super) repaired: HashMap<SocketAddr, Arc<AtomicU64>>,
    /// Per peer, where its bond's window and rate are published for its
    /// connection's controller (wanopt's BBR).
    pub(super) bonds: HashMap<SocketAddr, Arc<BondShare>>,
    /// The deadline the timer task sleeps until (`None`: idle).
    armed: Option<Instant>,
    /// What the socket received, in the layer's terms.
    received: Vec<Received>,
}

impl Driver {
    /// Hands the layer's events on (repairs to the controllers' counters,
    /// the rest to the log); returns whether the timer task must wake
    /// because the layer's deadline is now before the one it sleeps
    /// until.
    pub(super) fn settle(&mut self) -> bool {
        while let Some(event) = self.layer.poll_event() {
            match event {
                Event::Repaired { peer, packets } => {
                    if let Some(repaired) = self.repaired.get(&peer) {
                        repaired.fetch_add(packets, Ordering::Relaxed);
                    }
                }
                Event::PathState {
                    canonical,
                    path,
                    from,
                    to,
                } => info!(
                    "path {} to {}: {} -> {}",
                    path,
                    canonical,
                    from.name(),
                    to.name()
                ),
                Event::DataMoved {
                    canonical,
                    from,
                    to,
                } => info!("data to {canonical} moves from path {from} to path {to}"),
                Event::RealtimeMoved { canonical, to, why } => match to {
                    Some(to) if why.is_empty() => {
                        info!("real-time datagrams to {canonical} take path {to}")
                    }
                    Some(to) => info!("real-time datagrams to {canonical} take path {to}: {why}"),
                    None => info!("real-time datagrams to {canonical} follow the path mode"),
                },
                Event::ModeFollowed { canonical, mode } => {
                    info!("paths of {canonical}: mode {}", mode.name())
                }
                Event::PathBound {
                    canonical,
                    path,
                    remote,
                } => info!("path {path} of {canonical} bound to {remote}"),
                Event::ProbeDropped { from, error } => {
                    debug!("path probe from {from} dropped: {error}")
                }
                Event::ParityRefused { from, error } => {
                    debug!("parity datagram from {from} refused: {error}")
                }
                Event::RepairRefused { from, error } => {
                    trace!("FEC repair from {from} refused: {error}")
                }
            }
        }
        for (peer, share) in &self.bonds {
            let budget = self.layer.bond_budget(*peer);
            share.set(budget.map(|b| (b.window, b.pacing_rate)));
            share.set_rate_cap(self.layer.rate_cap(*peer));
        }
        match (self.layer.poll_timeout(), self.armed) {
            (Some(at), Some(armed)) => at < armed,
            (Some(_), None) => true,
            (None, _) => false,
        }
    }

    /// Sends what the layer sends of its own on `socket` (a full socket
    /// buffer drops it: the path is busy).
    fn flush(&mut self, socket: &dyn AsyncUdpSocket, now: Instant) {
        while let Some(transmit) = self.layer.poll_transmit(now) {
            let _ = socket.try_send(&to_quinn(&transmit));
        }
    }
}

/// What the node's handle and its wrapped sockets share.
#[derive(Debug)]
pub(super) struct Shared {
    driver: Mutex<Driver>,
    /// Wakes the timer task.
    pub(super) timer: Notify,
}

impl Shared {
    pub(super) fn new(layer: DatagramLayer) -> Shared {
        Shared {
            driver: Mutex::new(Driver {
                layer,
                senders: Vec::new(),
                repaired: HashMap::new(),
                bonds: HashMap::new(),
                armed: None,
                received: Vec::new(),
            }),
            timer: Notify::new(),
        }
    }

    pub(super) fn lock(&self) -> MutexGuard<'_, Driver> {
        self.driver.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Hands the events on after a call into the layer, and wakes the
    /// timer task if its deadline moved earlier.
    pub(super) fn settle(&self, mut driver: MutexGuard<'_, Driver>) {
        let wake = driver.settle();
        drop(driver);
        if wake {
            self.timer.notify_one();
        }
    }
}

/// The runtime's socket under the datagram layer, as quinn's socket.
#[derive(Debug)]
pub struct DatagramSocket {
    pub(super) inner: Arc<dyn AsyncUdpSocket>,
    pub(super) shared: Arc<Shared>,
}

fn ecn_from(ecn: EcnCodepoint) -> Ecn {
    match ecn {
        EcnCodepoint::Ect0 => Ecn::Ect0,
        EcnCodepoint::Ect1 => Ecn::Ect1,
        EcnCodepoint::Ce => Ecn::Ce,
    }
}

fn ecn_to(ecn: Ecn) -> EcnCodepoint {
    match ecn {
        Ecn::Ect0 => EcnCodepoint::Ect0,
        Ecn::Ect1 => EcnCodepoint::Ect1,
        Ecn::Ce => EcnCodepoint::Ce,
    }
}

fn to_quinn<'a>(transmit: &Transmit<'a>) -> QuinnTransmit<'a> {
    QuinnTransmit {
        destination: transmit.destination,
        ecn: transmit.ecn.map(ecn_to),
        contents: transmit.contents,
        segment_size: transmit.segment_size,
        src_ip: transmit.src_ip,
    }
}

fn from_quinn<'a>(transmit: &QuinnTransmit<'a>) -> Transmit<'a> {
    Transmit {
        destination: transmit.destination,
        ecn: transmit.ecn.map(ecn_from),
        contents: transmit.contents,
        segment_size: transmit.segment_size,
        src_ip: transmit.src_ip,
    }
}

impl AsyncUdpSocket for DatagramSocket {
    fn create_io_poller(self: Arc<Self>) -> Pin<Box<dyn UdpPoller>> {
        self.inner.clone().create_io_poller()
    }

    fn try_send(&self, transmit: &QuinnTransmit) -> io::Result<()> {
        self.try_send_marked(transmit, 0)
    }

    /// `flagged`: which datagrams carry UDP flows (quinn's connection
    /// sending, vendored quinn's typed hook).
    fn try_send_marked(&self, transmit: &QuinnTransmit, flagged: u64) -> io::Result<()> {
        let now = Instant::now();
        let transmit = from_quinn(transmit);
        let mut driver = self.shared.lock();
        let sending = driver.layer.handle_transmit(now, &transmit, flagged);
        if sending.held() {
            // A bond took the datagrams: its paths' pacers let them go.
            driver.flush(&*self.inner, now);
            self.shared.settle(driver);
            return Ok(());
        }
        if sending.wrapped() {
            // The wrapped bytes are the layer's: sent under its lock.
            let wire = driver.layer.wire(&transmit, &sending);
            self.inner.try_send(&to_quinn(&wire))?;
        } else {
            // quinn's own bytes: the lock is not held over the system call.
            drop(driver);
            self.inner.try_send(&to_quinn(&sending.route(&transmit)))?;
            if !sending.has_followup() {
                return Ok(());
            }
            driver = self.shared.lock();
        }
        driver
            .layer
            .handle_transmitted(now, &transmit, flagged, sending);
        driver.flush(&*self.inner, now);
        self.shared.settle(driver);
        Ok(())
    }

    fn poll_recv(
        &self,
        cx: &mut Context,
        bufs: &mut [IoSliceMut<'_>],
        meta: &mut [RecvMeta],
    ) -> Poll<io::Result<usize>> {
        // Datagrams rebuilt from the last batch's parity or repairs go
        // first.
        let mut driver = self.shared.lock();
        let mut handed = 0;
        for (buf, m) in bufs.iter_mut().zip(meta.iter_mut()) {
            let Some(r) = driver.layer.poll_received(buf) else {
                break;
            };
            *m = RecvMeta {
                addr: r.addr,
                len: r.len,
                stride: r.stride,
                ecn: None,
                dst_ip: r.dst_ip,
            };
            handed += 1;
        }
        drop(driver);
        if handed > 0 {
            return Poll::Ready(Ok(handed));
        }
        let received = std::task::ready!(self.inner.poll_recv(cx, bufs, meta))?;
        let now = Instant::now();
        let mut driver = self.shared.lock();
        let Driver {
            layer,
            received: layered,
            ..
        } = &mut *driver;
        layered.clear();
        layered.extend(meta[..received].iter().map(|m| Received {
            addr: m.addr,
            len: m.len,
            stride: m.stride,
            ecn: m.ecn.map(ecn_from),
            dst_ip: m.dst_ip,
        }));
        layer.handle_received(now, &mut bufs[..received], layered);
        for (m, r) in meta.iter_mut().zip(layered.iter()) {
            m.addr = r.addr;
            m.len = r.len;
            m.stride = r.stride;
            m.dst_ip = r.dst_ip;
        }
        // Rebuilt datagrams wait for the next poll: quinn polls again at
        // once after a batch (or wakes itself when it paused for fairness).
        driver.flush(&*self.inner, now);
        self.shared.settle(driver);
        Poll::Ready(Ok(received))
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

/// Sleeps until the layer's next deadline (a tail's copies, an FEC
/// block's repairs, a report, a probe), has it do what is due and sends
/// what it gives; ends when the socket is dropped.
pub(super) async fn drive_timers(socket: Weak<DatagramSocket>) {
    let Some(shared) = socket.upgrade().map(|s| s.shared.clone()) else {
        return;
    };
    loop {
        let deadline = {
            let Some(socket) = socket.upgrade() else {
                return;
            };
            let now = Instant::now();
            let mut driver = shared.lock();
            let Driver { layer, senders, .. } = &mut *driver;
            for (peer, blocked) in senders.iter() {
                layer.handle_sender_blocked(*peer, blocked.load(Ordering::Relaxed));
            }
            layer.handle_timeout(now);
            driver.flush(&*socket.inner, now);
            let _ = driver.settle();
            driver.armed = driver.layer.poll_timeout();
            driver.armed
        };
        let sleep = match deadline {
            Some(at) => tokio::time::sleep_until(at.into()),
            None => tokio::time::sleep(IDLE_LOOK),
        };
        tokio::select! {
            () = sleep => {}
            () = shared.timer.notified() => {}
        }
    }
}
