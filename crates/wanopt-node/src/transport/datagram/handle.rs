//! The node's handle on the datagram layer ([`DatagramHandle`]): it
//! samples the tunnel's connections into the layer, sets FEC and paths,
//! reads their status, and wraps the runtime's socket
//! ([`DatagramHandle::wrap`]).

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::Arc;
use std::time::{Duration, Instant};

use quinn::AsyncUdpSocket;
use tracing::warn;
use wanopt_proto::datagram::{
    DatagramLayer, DuplicationMode, DuplicationStatus, FecStatus, PathSample, PathSpec, PathsStatus,
};
use wanopt_proto::fec_stream::FecMode;
use wanopt_proto::path::wire::{EXPORTER_LABEL, EXPORTER_LEN};
use wanopt_proto::path::{PathKey, PathMode, Side};

use super::socket::{drive_timers, DatagramSocket, Shared};
use crate::transport::bbr::BondShare;

/// The node's handle on the datagram layer under its tunnel: which paths
/// repeat tails, FEC, the WAN paths, and what they cost and show.
#[derive(Debug, Clone)]
pub struct DatagramHandle {
    pub(super) shared: Arc<Shared>,
}

impl DatagramHandle {
    /// A handle for a node running duplication `mode`; nothing is
    /// repeated until [`DatagramHandle::update_path`] says so.
    pub fn new(mode: DuplicationMode) -> DatagramHandle {
        DatagramHandle {
            shared: Arc::new(Shared::new(DatagramLayer::new(mode, rand::random()))),
        }
    }

    /// The node's duplication mode.
    pub fn mode(&self) -> DuplicationMode {
        self.shared.lock().layer.mode()
    }

    /// Re-decides the path to `peer` from a sample of its connection; call
    /// it about every [`super::SAMPLE_INTERVAL`]
    /// ([`DatagramLayer::handle_sample`] says how).
    pub fn update_path(&self, peer: SocketAddr, sample: &PathSample) {
        let now = Instant::now();
        let mut driver = self.shared.lock();
        driver.layer.handle_sample(now, peer, sample);
        self.shared.settle(driver);
        // Repairs of blocks a new code closed go out from the timer task.
        self.shared.timer.notify_one();
    }

    /// Sets continuous FEC (`--fec`, `--fec-budget` as a share of the
    /// sources, 0..=1) for the paths sampled from now on.
    pub fn set_fec(&self, mode: FecMode, budget: f64) {
        self.shared.lock().layer.set_fec(mode, budget);
    }

    /// The FEC setting.
    pub fn fec_mode(&self) -> FecMode {
        self.shared.lock().layer.fec_mode()
    }

    /// Hands the peer's reports of repaired packets to the connection's
    /// controller through its counter (wanopt's BBR:
    /// [`wanopt_cc::Bbr::repaired`]). Idempotent.
    pub fn watch_repairs(&self, peer: SocketAddr, repaired: Arc<AtomicU64>) {
        self.shared.lock().repaired.insert(peer, repaired);
    }

    /// Publishes the bond's window and rate to the connection's
    /// controller while the paths to `peer` are bonded (wanopt's BBR:
    /// [`crate::transport::bbr::BondShare`]). Idempotent.
    pub fn watch_bond(&self, peer: SocketAddr, share: Arc<BondShare>) {
        let mut driver = self.shared.lock();
        driver.bonds.insert(peer, share);
        let _ = driver.settle();
    }

    /// What continuous FEC does on the path to `peer`.
    pub fn fec_status(&self, peer: SocketAddr) -> FecStatus {
        self.shared.lock().layer.fec_status(peer)
    }

    /// Watches the sender of the connection to `peer` through its
    /// congestion controller's flag (wanopt's BBR:
    /// [`wanopt_cc::Bbr::sender_blocked`]): while data waits for the
    /// window, a quiet path is no burst's end. Idempotent.
    pub fn watch_sender(&self, peer: SocketAddr, blocked: Arc<AtomicBool>) {
        let mut driver = self.shared.lock();
        match driver.senders.iter_mut().find(|(p, _)| *p == peer) {
            Some((_, flag)) if Arc::ptr_eq(flag, &blocked) => {}
            Some((_, flag)) => *flag = blocked,
            None => driver.senders.push((peer, blocked)),
        }
    }

    /// Forgets a path whose connection is gone.
    pub fn remove_path(&self, peer: SocketAddr) {
        let mut driver = self.shared.lock();
        driver.senders.retain(|(p, _)| *p != peer);
        driver.repaired.remove(&peer);
        driver.bonds.remove(&peer);
        driver.layer.remove_peer(peer);
    }

    /// What tail duplication does and did on the path to `peer`.
    pub fn status(&self, peer: SocketAddr) -> DuplicationStatus {
        self.shared.lock().layer.duplication_status(peer)
    }

    /// Wraps the runtime's `socket`; spawns (on the current tokio runtime)
    /// the task that drives the layer's timer, which ends with the socket.
    pub fn wrap(&self, inner: Arc<dyn AsyncUdpSocket>) -> Arc<dyn AsyncUdpSocket> {
        let socket = Arc::new(DatagramSocket {
            inner,
            shared: self.shared.clone(),
        });
        tokio::spawn(drive_timers(Arc::downgrade(&socket)));
        socket
    }

    /// The edge's paths to the core at `canonical` (`--path`, in order)
    /// and how they are used (`--path-mode`):
    /// from now on what quinn sends there leaves on the data path, and
    /// what arrives on any path is handed to quinn as from `canonical`.
    pub fn set_paths(&self, canonical: SocketAddr, paths: &[PathSpec], mode: PathMode) {
        let now = Instant::now();
        let mut driver = self.shared.lock();
        driver.layer.set_paths(now, canonical, paths, mode);
        self.shared.settle(driver);
    }

    /// The SLA that chooses the path of real-time datagrams (the edge's
    /// real-time classes', the strictest), or none.
    pub fn set_sla(&self, sla: Option<wanopt_proto::path::Sla>) {
        let now = Instant::now();
        let mut driver = self.shared.lock();
        driver.layer.set_sla(now, sla);
        self.shared.settle(driver);
    }

    /// A connection came up (`side`: which end this node is): its probes
    /// are keyed from its TLS exporter. The edge probes its paths at once;
    /// the core binds paths as the edge's probes arrive. Nothing on an
    /// edge without paths.
    pub fn bind_paths(&self, conn: &quinn::Connection, side: Side) {
        if side == Side::Client && !self.shared.lock().layer.has_paths() {
            return;
        }
        let Some(key) = export_key(conn) else {
            warn!(
                "no probe key for the tunnel to {}: its paths are not probed",
                conn.remote_address()
            );
            return;
        };
        // The connection's lock is taken (and let go) before the layer's:
        // quinn sends, and routes through the layer, under the
        // connection's. Taking the layer's first and the connection's
        // while it is held (evaluating `conn.remote_address()` as an
        // argument under the guard) hung the edge's handshake about 1 run
        // in 3 of tests/outside/duplicate.rs.
        let (remote, local) = (conn.remote_address(), conn.local_ip());
        let now = Instant::now();
        let mut driver = self.shared.lock();
        driver.layer.bind_paths(now, remote, local, key, side);
        self.shared.settle(driver);
        self.shared.timer.notify_one();
        tokio::spawn(keep_copies_apart(self.shared.clone(), conn.clone()));
    }

    /// The connection to `canonical` ended: its probes stop (the core
    /// forgets its paths).
    pub fn unbind_paths(&self, canonical: SocketAddr) {
        self.shared.lock().layer.unbind_paths(canonical);
    }

    /// A handshake to `canonical` failed: the next one tries the next
    /// path.
    pub fn handshake_failed(&self, canonical: SocketAddr) {
        self.shared.lock().layer.handshake_failed(canonical);
    }

    /// The paths to `canonical`, if it has any.
    pub fn paths_status(&self, canonical: SocketAddr) -> Option<PathsStatus> {
        self.shared.lock().layer.paths_status(canonical)
    }

    /// Counts a stream ending on `peer` (+1) or acknowledged (-1) in the
    /// layer at once; returns whether it counted.
    pub(super) fn stream_end(&self, peer: SocketAddr, starts: bool) -> bool {
        let now = Instant::now();
        let mut driver = self.shared.lock();
        let counted = driver.layer.handle_stream_end(now, peer, starts);
        self.shared.settle(driver);
        counted
    }

    /// The path's capacity now, bits per second.
    pub(super) fn capacity_bps(&self, peer: SocketAddr) -> Option<f64> {
        self.shared.lock().layer.capacity_bps(Instant::now(), peer)
    }
}

/// The keying material of a connection's probes.
fn export_key(conn: &quinn::Connection) -> Option<PathKey> {
    let mut material = [0u8; EXPORTER_LEN];
    conn.export_keying_material(&mut material, EXPORTER_LABEL, b"")
        .ok()?;
    Some(PathKey::from_exporter(&material))
}

/// How often the core looks whether its peer's paths went into duplicate
/// mode (learnt from the edge's probes), and for how long a peer that
/// shows no paths is watched.
const MODE_POLL: Duration = Duration::from_millis(250);
const MODE_WATCH: Duration = Duration::from_secs(30);

/// Once `conn`'s paths duplicate, tells its loss detection that packets
/// carrying UDP flows may overtake the rest (their copies take the faster
/// path): loss is then inferred within each kind only, and the copies
/// acknowledged early do not make the TCP flows' packets queued on the
/// data path look lost. Ends with the connection.
async fn keep_copies_apart(shared: Arc<Shared>, conn: quinn::Connection) {
    let canonical = conn.remote_address();
    let start = Instant::now();
    loop {
        // The layer's lock is let go before the connection's is taken:
        // quinn sends (and routes through the layer) under the
        // connection's.
        let mode = shared.lock().layer.path_mode(canonical);
        match mode {
            // A bond's real-time datagrams skip its reorder buffer too.
            Some(PathMode::Duplicate | PathMode::Bond) => {
                conn.set_datagram_packets_apart(true);
                return;
            }
            // A peer's mode stays what its first probe said.
            Some(_) => return,
            None if start.elapsed() > MODE_WATCH => return,
            None => {}
        }
        tokio::select! {
            _ = conn.closed() => return,
            () = tokio::time::sleep(MODE_POLL) => {}
        }
    }
}
