//! An edge's sockets: its listeners, bound before the node starts, and
//! the tunnel's local address.

use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr};

use tokio::net::TcpListener;
use wanopt_proto::Target;

use super::config::EdgeConfig;
use super::dial::{is_local, resolve};
use crate::error::{NodeError, UsageError};
use crate::intercept::listen_tcp;
use crate::policy::RuleSet;
use crate::state::NodeState;

/// The UDP sockets of `--forward-udp` (each with its destination) and
/// `--transparent-udp`, bound.
async fn bind_udp(
    config: &EdgeConfig,
) -> Result<
    (
        Vec<(tokio::net::UdpSocket, (wanopt_proto::Target, RuleSet))>,
        Option<std::net::UdpSocket>,
    ),
    NodeError,
> {
    let mut forwards = Vec::new();
    for forward in &config.udp_forwards {
        let socket = tokio::net::UdpSocket::bind(forward.listen)
            .await
            .map_err(|source| NodeError::Bind {
                what: "udp forward",
                addr: forward.listen,
                source,
            })?;
        if forward.listen.ip().is_unspecified() && forward.from.is_empty() {
            // UDP has no handshake: whoever can reach the listener, with any
            // source address, gets the destination's answers sent back.
            tracing::warn!(
                "--forward-udp {}: listens on every address and answers any sender (a spoofed source gets the replies); bind it to a LAN or loopback address, give it sources (,from=CIDR), or filter it with the host's firewall",
                forward.listen
            );
        }
        forwards.push((socket, (forward.destination.clone(), forward.from.clone())));
    }
    let transparent = match config.transparent_udp {
        Some(addr) => Some(crate::flow::udp::transparent::bind(addr)?),
        None => None,
    };
    Ok((forwards, transparent))
}

/// The tunnel's local address: `--bind` (any port by default; the family
/// of the first peer's endpoint when it names an address, else IPv4) or,
/// with `--path`s, the wildcard of its port, each datagram naming its
/// local address; the paths are checked and handed to the path layer,
/// for the one peer's address they name.
pub(crate) async fn tunnel_bind(
    config: &EdgeConfig,
    state: &NodeState,
) -> Result<(SocketAddr, Option<SocketAddr>), NodeError> {
    let v6 = config.upstreams.first().is_some_and(|u| {
        u.endpoint.starts_with('[') || u.endpoint.parse::<SocketAddr>().is_ok_and(|a| a.is_ipv6())
    });
    let wildcard = |port, v6: bool| match v6 {
        false => SocketAddr::new(Ipv4Addr::UNSPECIFIED.into(), port),
        true => SocketAddr::new(Ipv6Addr::UNSPECIFIED.into(), port),
    };
    if config.paths.is_empty() {
        return Ok((config.bind.unwrap_or(wildcard(0, v6)), None));
    }
    let [upstream] = config.upstreams.as_slice() else {
        return Err(UsageError::PathsNeedOnePeer(config.upstreams.len()).into());
    };
    // The paths are set up for one address of the core: resolved now.
    let core_addr = resolve(&upstream.endpoint).await?;
    for path in &config.paths {
        if path.remote.is_ipv4() != core_addr.is_ipv4() {
            return Err(UsageError::PathFamily(path.to_string(), core_addr).into());
        }
        if !is_local(path.local) {
            return Err(UsageError::PathNotLocal(path.to_string(), path.local).into());
        }
    }
    let paths: Vec<_> = config.paths.iter().map(|p| p.spec()).collect();
    state.datagrams.set_sla(config.classes.sla());
    state
        .datagrams
        .set_paths(core_addr, &paths, config.path_use.mode());
    // Each datagram names its local address: the socket takes any.
    let port = config.bind.map_or(0, |b| b.port());
    Ok((wildcard(port, core_addr.is_ipv6()), Some(core_addr)))
}

/// An edge's sockets, bound before the node starts (a port in use is an
/// error at start, not later).
pub(crate) struct Listeners {
    pub(super) tcp: Vec<(TcpListener, Target)>,
    pub(super) udp: Vec<(tokio::net::UdpSocket, (Target, RuleSet))>,
    pub(super) transparent: Option<(TcpListener, SocketAddr)>,
    pub(super) transparent_udp: Option<std::net::UdpSocket>,
}

/// Binds every listener `config` asks for.
pub(crate) async fn bind(config: &EdgeConfig) -> Result<Listeners, NodeError> {
    if config.accepts_nothing() {
        return Err(UsageError::NothingToAccept.into());
    }
    if config.upstreams.is_empty() {
        return Err(UsageError::NoUpstream.into());
    }
    let mut tcp = Vec::new();
    for forward in &config.forwards {
        tcp.push((
            listen_tcp(forward.listen, false)?,
            forward.destination.clone(),
        ));
    }
    let (udp, transparent_udp) = bind_udp(config).await?;
    let transparent = match config.transparent {
        Some(addr) => {
            let listener = listen_tcp(addr, true)?;
            // Port 0 took a port: reopen that one.
            let addr = listener.local_addr().unwrap_or(addr);
            Some((listener, addr))
        }
        None => None,
    };
    Ok(Listeners {
        tcp,
        udp,
        transparent,
        transparent_udp,
    })
}
