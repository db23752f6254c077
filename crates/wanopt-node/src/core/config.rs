//! A core's validated configuration, and what of it a reload cannot
//! change.

use std::net::SocketAddr;
use std::time::Duration;

use super::ListenTcp;
use crate::flow::limits::FlowLimitsConfig;
use crate::policy::RuleSet;
use crate::reduce::ReduceConfig;
use crate::restart::{Changed, Common};
use crate::transport::identity::{PrivateKey, PublicKey};
use crate::transport::tunnel::TunnelTuning;

/// A peer the core accepts tunnels from, and what it may reach.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AcceptedPeer {
    /// Its pinned public key.
    pub key: PublicKey,
    /// Its `name` in the configuration (how `status`, `flows` and logs
    /// name it).
    pub name: Option<String>,
    /// Destinations the core may connect to for it; empty allows nothing.
    pub allow: RuleSet,
    /// Destinations the core may send its UDP flows to (never implied by
    /// `allow`); empty allows none.
    pub allow_udp: RuleSet,
}

/// A validated core configuration.
#[derive(Debug)]
pub struct CoreConfig {
    /// UDP address to accept tunnels on.
    pub listen: SocketAddr,
    /// This node's key.
    pub key: PrivateKey,
    /// The peers it accepts (`--peer-key` with `--allow` and
    /// `--allow-udp`, or `[[peer]]` sections, each with its own lists).
    pub peers: Vec<AcceptedPeer>,
    /// A UDP flow the edge neither used nor ended for this long (plus
    /// [`crate::flow::udp::CORE_IDLE_GRACE`]) ends.
    pub udp_idle_timeout: Duration,
    /// Control API address.
    pub control: Option<SocketAddr>,
    /// The control token's file; `None` is [`crate::control::token::default_path`].
    pub control_token: Option<std::path::PathBuf>,
    /// Data reduction; `None` disables it (`--no-reduce`).
    pub reduce: Option<ReduceConfig>,
    /// Timeout of connections to destinations.
    pub connect_timeout: Duration,
    /// How long flows may drain at shutdown.
    pub drain: Duration,
    /// Transport tuning.
    pub tuning: TunnelTuning,
    /// Bounds on the flows carried at once.
    pub limits: FlowLimitsConfig,
    /// Flows that carry no byte either way this long are reset; `None`:
    /// never.
    pub flow_idle_timeout: Option<Duration>,
    /// This replica's own address, told to every edge in its hello so that
    /// the edge's redials reach this replica directly (`--advertise`, for
    /// a core behind a cluster's shared address).
    pub advertise: Option<SocketAddr>,
    /// Where it accepts tunnels over TCP (`--listen-tcp`).
    pub listen_tcp: ListenTcp,
}

impl CoreConfig {
    /// The keys a reload from `self` to `new` changes that only a restart
    /// applies.
    pub(crate) fn restart_keys(&self, new: &CoreConfig) -> Vec<&'static str> {
        let (old, mut changed) = (self, Changed::default());
        changed.common(&old.common(), &new.common());
        changed.check("listen", &old.listen, &new.listen);
        changed.check("listen-tcp", &old.listen_tcp, &new.listen_tcp);
        changed.check("advertise", &old.advertise, &new.advertise);
        changed.keys()
    }

    fn common(&self) -> Common<'_> {
        Common {
            control: self.control,
            control_token: &self.control_token,
            reduce: &self.reduce,
            connect_timeout: self.connect_timeout,
            drain: self.drain,
            tuning: &self.tuning,
            limits: self.limits,
            flow_idle_timeout: self.flow_idle_timeout,
            udp_idle_timeout: self.udp_idle_timeout,
        }
    }
}
