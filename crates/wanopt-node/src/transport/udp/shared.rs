//! The state the node's handle ([`super::Duplication`]) and its wrapped
//! socket share: the tail policy, the parity receivers and the senders'
//! "data waits" flags.

use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use quinn::udp::EcnCodepoint;
use tokio::sync::Notify;
use wanopt_proto::dup::TailDup;

use super::fec::FecPeers;
use super::parity::ParityReceivers;
use super::paths::PathTable;

/// What the policy keeps of a datagram besides its bytes.
pub(super) type Meta = (Option<EcnCodepoint>, Option<IpAddr>);

#[derive(Debug)]
pub(super) struct Shared {
    pub(super) policy: Mutex<TailDup<SocketAddr, Meta>>,
    /// Set while any path repeats tails, so the send path of a node with
    /// duplication off never takes the lock.
    pub(super) active: AtomicBool,
    pub(super) wake: Notify,
    /// The receiving side of parity.
    pub(super) parity: Mutex<ParityReceivers>,
    /// Set once any peer sent parity or FEC, so the receive path of a
    /// node that never got any takes no lock.
    pub(super) parity_seen: AtomicBool,
    /// Continuous FEC: encoders, decoders, policies.
    pub(super) fec: Mutex<FecPeers>,
    /// Set while FEC is sent to any peer, so the send path of a node
    /// without takes no lock.
    pub(super) fec_on: AtomicBool,
    /// Per peer, its connection's congestion controller's "data waits"
    /// flag ([`super::Duplication::watch_sender`]).
    pub(super) senders: Mutex<Vec<(SocketAddr, Arc<AtomicBool>)>>,
    /// Several WAN paths per peer (`--path`, BIND probes).
    pub(super) paths: Mutex<PathTable>,
    /// Set once any peer has a path or sent a probe, so the socket of a
    /// node without paths neither maps nor takes a lock.
    pub(super) paths_on: AtomicBool,
    /// Wakes the task that sends probes.
    pub(super) probe_wake: Notify,
}

impl Shared {
    pub(super) fn policy(&self) -> MutexGuard<'_, TailDup<SocketAddr, Meta>> {
        self.policy.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(super) fn parity(&self) -> MutexGuard<'_, ParityReceivers> {
        self.parity.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(super) fn fec(&self) -> MutexGuard<'_, FecPeers> {
        self.fec.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(super) fn paths(&self) -> MutexGuard<'_, PathTable> {
        self.paths.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(super) fn senders(&self) -> MutexGuard<'_, Vec<(SocketAddr, Arc<AtomicBool>)>> {
        self.senders.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Hands each watched sender's flag to the policy.
    pub(super) fn sync_senders(&self) {
        let senders = self.senders();
        if senders.is_empty() {
            return;
        }
        let mut policy = self.policy();
        for (peer, blocked) in senders.iter() {
            policy.sender_blocked(*peer, blocked.load(Ordering::Relaxed));
        }
    }
}
