//! The peers an edge dials (its upstreams) and the routes that send each
//! flow to one of them, WireGuard-style: the flow goes to the peer whose
//! routes hold its destination with the longest prefix (then the
//! narrowest port range); a peer without routes takes what no peer's
//! routes hold; with neither, the flow is refused.

use std::net::SocketAddr;
use std::sync::{Arc, RwLock};

use tokio::sync::watch;
use wanopt_proto::Target;

use super::dial::Tunnel;
use crate::flow::udp::edge::UdpTunnel;
use crate::lifecycle::Shutdown;
use crate::policy::RuleSet;
use crate::transport::identity::PublicKey;

/// A peer the edge dials.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UpstreamConfig {
    /// Where it is, `HOST:PORT`, resolved again at each connection attempt.
    pub endpoint: String,
    /// The keys it may present (a `[[peer]]` has one; `--peer-key` may pin
    /// several for one `--core`).
    pub keys: Vec<PublicKey>,
    /// The destinations sent to it; empty: what no other peer's routes hold.
    pub routes: RuleSet,
    /// Its `name` in the configuration.
    pub name: Option<String>,
}

impl UpstreamConfig {
    /// Whether a reload can keep this peer's tunnel: same endpoint and
    /// keys (its routes may change under it).
    pub(crate) fn same_peer(&self, other: &UpstreamConfig) -> bool {
        self.endpoint == other.endpoint && self.keys == other.keys
    }
}

/// A dialed peer while the edge runs: its tunnel as flows use it, kept up
/// by its own task until `stop`.
pub(crate) struct Upstream {
    pub(crate) config: UpstreamConfig,
    routes: RwLock<RuleSet>,
    pub(crate) tunnel: watch::Receiver<Option<Tunnel>>,
    pub(crate) udp: watch::Receiver<Option<UdpTunnel>>,
    /// No more connection attempts (the node stops, or the peer was
    /// removed).
    pub(crate) stop: Shutdown,
    /// A reload removed the peer: its tunnel closes at once.
    pub(crate) removed: Shutdown,
}

impl Upstream {
    pub(crate) fn new(
        config: UpstreamConfig,
        tunnel: watch::Receiver<Option<Tunnel>>,
        udp: watch::Receiver<Option<UdpTunnel>>,
    ) -> Upstream {
        Upstream {
            routes: RwLock::new(config.routes.clone()),
            config,
            tunnel,
            udp,
            stop: Shutdown::new(),
            removed: Shutdown::new(),
        }
    }

    fn routes(&self) -> RuleSet {
        self.routes
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Gives the peer new routes (a reload that keeps its tunnel);
    /// whether they differ from its old ones.
    pub(crate) fn set_routes(&self, routes: RuleSet) -> bool {
        let mut current = self.routes.write().unwrap_or_else(|e| e.into_inner());
        let changed = *current != routes;
        *current = routes;
        changed
    }

    /// Stops its task and closes its tunnel (a reload removed it).
    pub(crate) fn close(&self) {
        self.removed.trigger();
        self.stop.trigger();
        if let Some(tunnel) = self.tunnel.borrow().as_ref() {
            tunnel.conn.close(
                quinn::VarInt::from_u32(wanopt_proto::codes::SHUTDOWN),
                b"peer removed from the configuration",
            );
        }
    }
}

/// Every dialed peer, and whether any tunnel is up (transparent listeners
/// close while none is, under `--fail open`).
pub(crate) struct Upstreams {
    list: RwLock<Arc<Vec<Arc<Upstream>>>>,
    any_tcp: watch::Sender<Option<()>>,
    any_udp: watch::Sender<Option<()>>,
}

impl Upstreams {
    pub(crate) fn new() -> Arc<Upstreams> {
        Arc::new(Upstreams {
            list: RwLock::new(Arc::new(Vec::new())),
            any_tcp: watch::channel(None).0,
            any_udp: watch::channel(None).0,
        })
    }

    pub(crate) fn list(&self) -> Arc<Vec<Arc<Upstream>>> {
        self.list.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    pub(crate) fn set(&self, list: Vec<Arc<Upstream>>) {
        *self.list.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(list);
        self.refresh();
    }

    /// Publishes whether any tunnel is up (after one came up or went down).
    pub(crate) fn refresh(&self) {
        let list = self.list();
        let tcp = list.iter().any(|u| u.tunnel.borrow().is_some());
        let udp = list.iter().any(|u| u.udp.borrow().is_some());
        self.any_tcp
            .send_if_modified(|v| std::mem::replace(v, tcp.then_some(())) != tcp.then_some(()));
        self.any_udp
            .send_if_modified(|v| std::mem::replace(v, udp.then_some(())) != udp.then_some(()));
    }

    /// `Some(())` while any peer's tunnel is up.
    pub(crate) fn any_tcp(&self) -> watch::Receiver<Option<()>> {
        self.any_tcp.subscribe()
    }

    /// `Some(())` while any peer carries UDP flows.
    pub(crate) fn any_udp(&self) -> watch::Receiver<Option<()>> {
        self.any_udp.subscribe()
    }

    /// The peer a flow to `dest` goes to.
    pub(crate) fn route(&self, dest: &Target) -> Option<Arc<Upstream>> {
        let list = self.list();
        let routes: Vec<RuleSet> = list.iter().map(|u| u.routes()).collect();
        let addr = match dest {
            Target::Addr(addr) => Some(*addr),
            Target::Domain(..) => None,
        };
        choose(&routes, addr).map(|i| list[i].clone())
    }
}

/// Which of the peers whose routes are `routes` a flow to `dest` goes to
/// (`None` for a name, which only a peer without routes takes, or the
/// one peer there is).
fn choose(routes: &[RuleSet], dest: Option<SocketAddr>) -> Option<usize> {
    if let Some(dest) = dest {
        let best = routes
            .iter()
            .enumerate()
            .filter_map(|(i, r)| Some((r.specificity(dest)?, std::cmp::Reverse(i))))
            .max();
        if let Some((_, std::cmp::Reverse(i))) = best {
            return Some(i);
        }
    }
    match routes.iter().position(|r| r.0.is_empty()) {
        Some(i) => Some(i),
        None if dest.is_none() && routes.len() == 1 => Some(0),
        None => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rules(list: &[&str]) -> RuleSet {
        RuleSet(
            list.iter()
                .map(|r| r.parse().unwrap_or_else(|e| panic!("{e}")))
                .collect(),
        )
    }

    fn at(addr: &str) -> Option<SocketAddr> {
        Some(addr.parse().unwrap_or_else(|e| panic!("{e}")))
    }

    #[test]
    fn the_longest_prefix_wins_then_the_narrowest_ports() {
        let routes = [
            rules(&["10.0.0.0/8"]),
            rules(&["10.1.0.0/16", "192.0.2.0/24"]),
            rules(&["10.1.2.0/24:443"]),
            rules(&["10.1.2.0/24"]),
        ];
        assert_eq!(choose(&routes, at("10.9.9.9:80")), Some(0));
        assert_eq!(choose(&routes, at("10.1.9.9:80")), Some(1));
        assert_eq!(choose(&routes, at("192.0.2.7:22")), Some(1));
        assert_eq!(choose(&routes, at("10.1.2.3:443")), Some(2));
        assert_eq!(choose(&routes, at("10.1.2.3:80")), Some(3));
        assert_eq!(choose(&routes, at("198.51.100.1:80")), None);
        assert_eq!(choose(&routes, None), None);
    }

    #[test]
    fn a_peer_without_routes_takes_the_rest() {
        let routes = [rules(&["10.0.0.0/8"]), rules(&[]), rules(&[])];
        assert_eq!(choose(&routes, at("10.0.0.1:80")), Some(0));
        assert_eq!(choose(&routes, at("198.51.100.1:80")), Some(1));
        assert_eq!(choose(&routes, None), Some(1));
    }

    #[test]
    fn the_first_of_equal_routes_wins() {
        let routes = [rules(&["10.0.0.0/8"]), rules(&["10.0.0.0/8"])];
        assert_eq!(choose(&routes, at("10.0.0.1:80")), Some(0));
    }

    #[test]
    fn one_peer_with_routes_takes_names_but_not_other_addresses() {
        let routes = [rules(&["10.0.0.0/8"])];
        assert_eq!(choose(&routes, None), Some(0));
        assert_eq!(choose(&routes, at("198.51.100.1:80")), None);
        assert_eq!(choose(&[], at("198.51.100.1:80")), None);
    }
}
