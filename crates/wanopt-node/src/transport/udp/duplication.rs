//! The node's handle on the datagram layer ([`Duplication`]): which paths
//! repeat tails, with which parameters, and what it cost; it wraps the
//! runtime's socket ([`Duplication::wrap`]).

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use quinn::AsyncUdpSocket;
use tokio::sync::Notify;
use wanopt_proto::dup::{TailDup, TailParams, TailStats, BUSY_SHARE};
use wanopt_proto::path::PathMode;

use super::fec::FecStatus;
use super::path::{PathMemory, PathSample};
use super::shared::Shared;
use super::socket::{send_copies, DupSocket};
use super::status::{DuplicationMode, DuplicationStatus};

/// The node's handle on its socket's duplication: which paths repeat
/// tails, with which parameters, and what it cost.
#[derive(Debug, Clone)]
pub struct Duplication {
    pub(super) mode: DuplicationMode,
    pub(super) shared: Arc<Shared>,
    pub(super) paths: Arc<Mutex<std::collections::HashMap<SocketAddr, PathMemory>>>,
}

impl Duplication {
    /// A handle for a node running `mode`; nothing is repeated until
    /// [`Duplication::update_path`] says so.
    pub fn new(mode: DuplicationMode) -> Duplication {
        Duplication {
            mode,
            shared: Arc::new(Shared {
                policy: Mutex::new(TailDup::new()),
                active: AtomicBool::new(false),
                wake: Notify::new(),
                parity: Mutex::default(),
                parity_seen: AtomicBool::new(false),
                fec: Mutex::default(),
                fec_on: AtomicBool::new(false),
                senders: Mutex::default(),
                paths: Mutex::default(),
                paths_on: AtomicBool::new(false),
                probe_wake: Notify::new(),
            }),
            paths: Arc::default(),
        }
    }

    /// Re-decides the path to `peer` from a sample of its connection; call
    /// it about every [`super::SAMPLE_INTERVAL`].
    ///
    /// `auto` repeats tails while the path is lossy and not carrying bulk
    /// traffic: while it sends more than half its capacity, no burst ends
    /// (the rare pause is judged busy anyway), so copying every datagram
    /// into the tail would be CPU spent for nothing; tails come back within
    /// a sample of the traffic turning sparse. The exception is a path on
    /// which a stream is ending ([`super::StreamEnds::expect`]): its bulk
    /// transfer's end is a tail worth repeating.
    pub fn update_path(&self, peer: SocketAddr, sample: &PathSample) {
        let now = Instant::now();
        let mut paths = self.paths.lock().unwrap_or_else(|e| e.into_inner());
        let path = paths.entry(peer).or_default();
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
        drop(paths);
        let mut policy = self.shared.policy();
        policy.set_path(now, peer, params);
        policy.expect_ends(peer, ending);
        self.shared
            .active
            .store(policy.is_active(), Ordering::Relaxed);
        drop(policy);
        // The table's lock is let go before the FEC's is taken.
        let duplicating = self.shared.paths().mode(peer) == Some(PathMode::Duplicate);
        let mut fec = self.shared.fec();
        // What the path carries: this direction's estimate, or what
        // arrived from the peer (a direction that only acknowledges
        // measures nothing of its own).
        let carries = super::path::higher(capacity, received_peak);
        let traffic = super::fec::Traffic {
            bulk,
            ending,
            duplicating,
        };
        fec.on_sample(peer, sample, traffic, carries, send_rate);
        self.shared.fec_on.store(fec.any_wraps(), Ordering::Relaxed);
        let changed = !fec.outgoing.is_empty();
        drop(fec);
        if changed {
            self.shared.wake.notify_one();
        }
    }

    /// Sets continuous FEC (`--fec`, `--fec-budget` as a share of the
    /// sources, 0..=1) for the paths sampled from now on.
    pub fn set_fec(&self, mode: wanopt_proto::fec_stream::FecMode, budget: f64) {
        let mut fec = self.shared.fec();
        fec.mode = mode;
        fec.budget = budget;
    }

    /// The FEC setting.
    pub fn fec_mode(&self) -> wanopt_proto::fec_stream::FecMode {
        self.shared.fec().mode
    }

    /// Hands the peer's reports of repaired packets to the connection's
    /// controller through its counter (wanopt's BBR:
    /// [`crate::transport::bbr::Bbr::repaired`]). Idempotent.
    pub fn watch_repairs(&self, peer: SocketAddr, repaired: Arc<AtomicU64>) {
        if let Some(sender) = self.shared.fec().senders.get_mut(&peer) {
            sender.repaired = Some(repaired);
        }
    }

    /// What continuous FEC does on the path to `peer`.
    pub fn fec_status(&self, peer: SocketAddr) -> FecStatus {
        self.shared.fec().status(peer)
    }

    /// Watches the sender of the connection to `peer` through its
    /// congestion controller's flag (wanopt's BBR:
    /// [`crate::transport::bbr::Bbr::sender_blocked`]): while data waits for the
    /// window, a quiet path is no burst's end. Idempotent.
    pub fn watch_sender(&self, peer: SocketAddr, blocked: Arc<AtomicBool>) {
        let mut senders = self.shared.senders();
        match senders.iter_mut().find(|(p, _)| *p == peer) {
            Some((_, flag)) if Arc::ptr_eq(flag, &blocked) => {}
            Some((_, flag)) => *flag = blocked,
            None => senders.push((peer, blocked)),
        }
    }

    /// Forgets a path whose connection is gone.
    pub fn remove_path(&self, peer: SocketAddr) {
        self.shared.senders().retain(|(p, _)| *p != peer);
        self.paths
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&peer);
        self.shared.fec().remove(peer);
        let mut policy = self.shared.policy();
        policy.remove(peer);
        self.shared
            .active
            .store(policy.is_active(), Ordering::Relaxed);
    }

    /// What the path to `peer` does and did.
    pub fn status(&self, peer: SocketAddr) -> DuplicationStatus {
        let (loss, bulk, ending_streams) = self
            .paths
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&peer)
            .map_or((0.0, false, 0), |p| (p.loss.loss_rate(), p.bulk, p.ending));
        let policy = self.shared.policy();
        let params = policy.params(peer);
        let stats = policy.stats(peer).unwrap_or_default();
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
        } = stats;
        drop(policy);
        let rebuilt = self.shared.parity().rebuilt_from(peer);
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
            rebuilt,
        }
    }

    /// Wraps the runtime's `socket`; spawns (on the current tokio runtime)
    /// the task that sends the copies, which ends with the socket.
    pub fn wrap(&self, inner: Arc<dyn AsyncUdpSocket>) -> Arc<dyn AsyncUdpSocket> {
        let socket = Arc::new(DupSocket {
            inner,
            shared: self.shared.clone(),
        });
        tokio::spawn(send_copies(Arc::downgrade(&socket)));
        tokio::spawn(super::multipath::send_probes(Arc::downgrade(&socket)));
        socket
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// A sample of the 3G downlink (150 ms, 2 Mbit/s): packets sent and
    /// lost, UDP bytes sent, all since the connection began.
    fn sample(sent: u64, lost: u64, tx: u64) -> PathSample {
        PathSample {
            sent_packets: sent,
            lost_packets: lost,
            srtt: Duration::from_millis(150),
            rate_estimate: Some(250_000.0),
            udp_tx_bytes: tx,
            udp_rx_bytes: 0,
            mtu: 1472,
            datagrams_sent: 0,
            congested_rounds: None,
            filled_rounds: None,
            random_loss: None,
            startup: false,
        }
    }

    #[test]
    fn a_path_reports_its_remembered_capacity_to_its_flows() {
        let peer: SocketAddr = "192.0.2.1:4433".parse().unwrap();
        // Kept whatever the mode: flows use it too.
        let dup = Duplication::new(DuplicationMode::Off);
        let ends = dup.stream_ends(peer);
        assert_eq!(ends.capacity_bps(), None);
        dup.update_path(peer, &sample(1000, 0, 1_000_000));
        let c = ends.capacity_bps().unwrap();
        assert!((c - 2e6).abs() < 1e3, "{c}");
        // The traffic turns sparse: BBR's estimate falls, the capacity
        // does not.
        let mut sparse = sample(1100, 0, 1_100_000);
        sparse.rate_estimate = Some(1_000.0);
        dup.update_path(peer, &sparse);
        let c = ends.capacity_bps().unwrap();
        assert!(c > 1.99e6, "{c}");
        assert_eq!(
            dup.stream_ends("192.0.2.2:4433".parse().unwrap())
                .capacity_bps(),
            None
        );
    }

    #[test]
    fn auto_repeats_tails_on_a_lossy_path_unless_it_carries_bulk_traffic() {
        let peer: SocketAddr = "192.0.2.1:4433".parse().unwrap();
        let dup = Duplication::new(DuplicationMode::Auto);
        // Clean so far: off.
        dup.update_path(peer, &sample(1000, 0, 1_000_000));
        assert!(!dup.status(peer).active);
        // 1% loss, and the path sent 1.4 MB since the last sample a few
        // microseconds ago: bulk, so still off.
        dup.update_path(peer, &sample(2000, 20, 2_400_000));
        let s = dup.status(peer);
        assert!(!s.active && s.bulk, "{s:?}");
        assert!(s.loss_percent > 0.9, "{s:?}");
        // Nothing sent since: sparse, lossy: on, sized for the path.
        std::thread::sleep(Duration::from_millis(20));
        dup.update_path(peer, &sample(2000, 20, 2_400_000));
        let s = dup.status(peer);
        assert!(s.active && !s.bulk, "{s:?}");
        assert_eq!(s.tail_bytes, Some(7_500));
        assert_eq!(s.quiet_ms, Some(37.5));
        // `off` never, `tails` always.
        let off = Duplication::new(DuplicationMode::Off);
        off.update_path(peer, &sample(2000, 20, 0));
        assert!(!off.status(peer).active);
        let tails = Duplication::new(DuplicationMode::Tails);
        tails.update_path(peer, &sample(10, 0, 0));
        assert!(tails.status(peer).active);
        tails.remove_path(peer);
        assert!(!tails.status(peer).active);
    }

    #[tokio::test]
    async fn a_stream_ending_on_a_bulk_path_switches_its_tails_on_until_acknowledged() {
        let peer: SocketAddr = "192.0.2.1:4433".parse().unwrap();
        let dup = Duplication::new(DuplicationMode::Auto);
        let ends = dup.stream_ends(peer);
        // Before the first sample a stream end is not counted.
        drop(ends.expect());
        dup.update_path(peer, &sample(1000, 10, 1_000_000));
        dup.update_path(peer, &sample(2000, 20, 2_400_000));
        let s = dup.status(peer);
        assert!(!s.active && s.bulk && s.ending_streams == 0, "{s:?}");
        // A flow wrote its last bytes: tails on at once, busy or not.
        let end = ends.expect();
        let s = dup.status(peer);
        assert!(s.active && s.bulk && s.ending_streams == 1, "{s:?}");
        assert_eq!(s.tail_bytes, Some(7_500));
        assert!(dup.shared.active.load(Ordering::Relaxed));
        assert!(dup.shared.policy().params(peer).is_some());
        // Samples keep them on while the end is awaited, even bulk ones.
        dup.update_path(peer, &sample(3000, 30, 3_800_000));
        let s = dup.status(peer);
        assert!(s.active && s.bulk, "{s:?}");
        // The peer acknowledged the stream: the guard goes, and the next
        // bulk sample switches the tails off again.
        let (ack, acked) = tokio::sync::oneshot::channel::<()>();
        end.release_when(acked);
        tokio::task::yield_now().await;
        assert_eq!(
            dup.status(peer).ending_streams,
            1,
            "held until acknowledged"
        );
        ack.send(()).unwrap();
        for _ in 0..100 {
            if dup.status(peer).ending_streams == 0 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        assert_eq!(dup.status(peer).ending_streams, 0);
        dup.update_path(peer, &sample(4000, 40, 5_200_000));
        let s = dup.status(peer);
        assert!(!s.active && s.bulk, "{s:?}");
        // A clean path (auto) or `off` never turns on for a stream end.
        let clean: SocketAddr = "192.0.2.2:4433".parse().unwrap();
        dup.update_path(clean, &sample(2000, 0, 0));
        let _end = dup.stream_ends(clean).expect();
        assert!(!dup.status(clean).active);
        let off = Duplication::new(DuplicationMode::Off);
        off.update_path(peer, &sample(2000, 20, 0));
        let _end = off.stream_ends(peer).expect();
        let s = off.status(peer);
        assert!(!s.active && s.ending_streams == 0, "{s:?}");
    }
}
