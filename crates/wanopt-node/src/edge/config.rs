//! An edge's validated configuration: the peers it dials, what it
//! intercepts, its policy, and what it does when the tunnel is down.

use std::net::SocketAddr;
use std::time::Duration;

use super::upstreams::UpstreamConfig;
use crate::class::{Classes, EdgePolicy};
use crate::flow::limits::FlowLimitsConfig;
use crate::flow::udp::edge::UdpForward;
use crate::forward::{Forward, WanPath};
use crate::policy::RuleSet;
use crate::reduce::ReduceConfig;
use crate::restart::{Changed, Common};
use crate::transport::identity::PrivateKey;
use crate::transport::tunnel::TunnelTuning;

/// What to do with a transparent flow when the tunnel is down.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FailMode {
    /// Leave the flow to the kernel: the transparent listener is closed
    /// while the tunnel is down, so TPROXY rules no longer match and the
    /// kernel routes new flows under its FORWARD policy (NAT REDIRECT
    /// refuses them). The edge never connects a flow from its own address.
    Open,
    /// Reset the flow (after waiting `tunnel_wait` for the tunnel).
    Closed,
}

impl std::str::FromStr for FailMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "open" => Ok(FailMode::Open),
            "closed" => Ok(FailMode::Closed),
            other => Err(format!(
                "unknown fail mode {other:?} (expected open or closed)"
            )),
        }
    }
}

/// How an edge uses its WAN paths (`--path-mode`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PathUse {
    /// One path carries everything; the next takes over when it fails.
    #[default]
    Failover,
    /// As failover, and every datagram that carries a UDP flow is also
    /// sent on every other path that is not down; the receiver keeps the
    /// first copy. TCP flows stay on the data path.
    Duplicate,
    /// As failover, and the FEC repairs go on another path that is up
    /// (the least lossy): a loss on the data path is repaired from a path
    /// that did not lose it, and the repairs take none of its room.
    SpreadFec,
    /// Every path carries data at once, each paced by its own controller:
    /// one flow gets the sum of the links; the receiving node puts the
    /// datagrams back in order, and a path that stalls hands what it
    /// carried to the others.
    Bond,
}

impl PathUse {
    /// The mode the paths' probes carry.
    pub fn mode(self) -> wanopt_proto::path::PathMode {
        match self {
            PathUse::Failover => wanopt_proto::path::PathMode::Failover,
            PathUse::Duplicate => wanopt_proto::path::PathMode::Duplicate,
            PathUse::SpreadFec => wanopt_proto::path::PathMode::SpreadFec,
            PathUse::Bond => wanopt_proto::path::PathMode::Bond,
        }
    }
}

impl std::str::FromStr for PathUse {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "failover" => Ok(PathUse::Failover),
            "duplicate" => Ok(PathUse::Duplicate),
            "spread-fec" => Ok(PathUse::SpreadFec),
            "bond" => Ok(PathUse::Bond),
            other => Err(format!(
                "unknown path mode {other:?} (expected failover, duplicate, spread-fec or bond)"
            )),
        }
    }
}

/// A validated edge configuration.
#[derive(Debug)]
pub struct EdgeConfig {
    /// The peers it dials (`--core` and `--peer-key`, or `[[peer]]`
    /// sections with an endpoint), each with the routes sent to it.
    pub upstreams: Vec<UpstreamConfig>,
    /// This node's key.
    pub key: PrivateKey,
    /// Explicit forwards.
    pub forwards: Vec<Forward>,
    /// UDP forwards (`--forward-udp`).
    pub udp_forwards: Vec<UdpForward>,
    /// A UDP flow that carries no datagram either way this long ends.
    pub udp_idle_timeout: Duration,
    /// Address for transparently redirected connections.
    pub transparent: Option<SocketAddr>,
    /// Address for TPROXY'd UDP datagrams (`--transparent-udp`).
    pub transparent_udp: Option<SocketAddr>,
    /// Flows to optimize; empty means all.
    pub optimize: RuleSet,
    /// Connect a transparent flow that matches no `optimize` rule to its
    /// destination from the edge's own address (`--pass-unmatched`; such a
    /// connection escapes the gateway's FORWARD policy). Without it such a
    /// flow is refused.
    pub pass_unmatched: bool,
    /// Data reduction; `None` disables it (`--no-reduce`).
    pub reduce: Option<ReduceConfig>,
    /// Optimized flows to these destinations skip data reduction (e.g.
    /// already-encrypted traffic that cannot be reduced).
    pub no_reduce_to: RuleSet,
    /// Behaviour of transparent flows while the tunnel is down.
    pub fail: FailMode,
    /// Control API address.
    pub control: Option<SocketAddr>,
    /// The control token's file; `None` is [`crate::control::token::default_path`].
    pub control_token: Option<std::path::PathBuf>,
    /// How long a flow waits for the tunnel before it is reset.
    pub tunnel_wait: Duration,
    /// Timeout of direct (pass-through) connections.
    pub connect_timeout: Duration,
    /// How long flows may drain at shutdown.
    pub drain: Duration,
    /// Local UDP address of the tunnel; default picks any port.
    pub bind: Option<SocketAddr>,
    /// WAN paths to the core (`--path`), in preference order; empty: the
    /// one path the routing table picks. With paths the tunnel's socket
    /// binds the wildcard address (the port of `bind`).
    pub paths: Vec<WanPath>,
    /// How the paths are used.
    pub path_use: PathUse,
    /// Traffic classes (`--class`): which UDP flows are real-time, which
    /// flows go ahead of or behind the others.
    pub classes: Classes,
    /// Transport tuning.
    pub tuning: TunnelTuning,
    /// Bounds on the flows carried at once.
    pub limits: FlowLimitsConfig,
    /// Flows that carry no byte either way this long are reset; `None`:
    /// never.
    pub flow_idle_timeout: Option<Duration>,
    /// Which transports reach the cores (`--transport`).
    pub transport: super::TransportChoice,
    /// The cores' TCP port for tunnels over TCP (`--tcp-port`).
    pub tcp_port: u16,
}

impl std::fmt::Debug for PrivateKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "PrivateKey({})", self.public_key())
    }
}

impl EdgeConfig {
    /// Its policy: what the edge optimizes and how.
    pub(super) fn policy(&self) -> EdgePolicy {
        EdgePolicy {
            optimize: self.optimize.clone(),
            pass_unmatched: self.pass_unmatched,
            no_reduce_to: self.no_reduce_to.clone(),
            classes: self.classes.clone(),
        }
    }

    /// The keys a reload from `self` to `new` changes that only a restart
    /// applies.
    pub(crate) fn restart_keys(&self, new: &EdgeConfig) -> Vec<&'static str> {
        let (old, mut changed) = (self, Changed::default());
        changed.common(&old.common(), &new.common());
        changed.check("forward", &old.forwards, &new.forwards);
        changed.check("forward-udp", &old.udp_forwards, &new.udp_forwards);
        changed.check("transparent", &old.transparent, &new.transparent);
        changed.check(
            "transparent-udp",
            &old.transparent_udp,
            &new.transparent_udp,
        );
        changed.check("fail", &old.fail, &new.fail);
        changed.check("tunnel-wait", &old.tunnel_wait, &new.tunnel_wait);
        changed.check("bind", &old.bind, &new.bind);
        changed.check("path", &old.paths, &new.paths);
        changed.check("path-mode", &old.path_use, &new.path_use);
        changed.check("transport", &old.transport, &new.transport);
        changed.check("tcp-port", &old.tcp_port, &new.tcp_port);
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

    /// Whether no forward and no transparent socket is configured.
    pub(super) fn accepts_nothing(&self) -> bool {
        self.forwards.is_empty()
            && self.transparent.is_none()
            && self.udp_forwards.is_empty()
            && self.transparent_udp.is_none()
    }
}
