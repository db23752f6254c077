//! The edge node: accepts client TCP connections (explicit forwards or
//! transparently redirected flows), picks by policy which go through the
//! tunnel, and carries each optimized flow on its own QUIC stream to the core.

use std::future::Future;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tracing::{debug, info, warn};

use wanopt_proto::{OpenRepr, Services, Target};

use crate::class::{service_names, Classes, Proto};
use crate::control;
use crate::error::{NodeError, ResolveFailure, UsageError};
use crate::flow::limits::{FlowLimits, FlowLimitsConfig, FlowPermit};
use crate::flow::udp::edge::{UdpEdge, UdpForward, UdpTunnel};
use crate::flow::udp::{read_datagrams, TunnelFlows};
use crate::flow::{carry, report, reset_tcp, splice_tcp, Abort, Facing, FlowState};
pub use crate::forward::{parse_target, Forward, WanPath, MAX_PATHS};
use crate::intercept::{self, listen_tcp, original_destination, LogLimit};
use crate::lifecycle::{self, Shutdown};
use crate::policy::RuleSet;
use crate::reduce::{self, Caches, ReduceConfig};
use crate::state::{NodeState, Role};
use crate::transport::identity::{self, peer_key, PrivateKey, PublicKey};
use crate::transport::tunnel::{self, TunnelTuning};

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
}

impl PathUse {
    /// The mode the paths' probes carry.
    pub fn mode(self) -> wanopt_proto::path::PathMode {
        match self {
            PathUse::Failover => wanopt_proto::path::PathMode::Failover,
            PathUse::Duplicate => wanopt_proto::path::PathMode::Duplicate,
            PathUse::SpreadFec => wanopt_proto::path::PathMode::SpreadFec,
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
            other => Err(format!(
                "unknown path mode {other:?} (expected failover, duplicate or spread-fec)"
            )),
        }
    }
}

/// A validated edge configuration.
#[derive(Debug)]
pub struct EdgeConfig {
    /// The core's UDP address (`HOST:PORT`); re-resolved at each reconnect.
    pub core: String,
    /// This node's key.
    pub key: PrivateKey,
    /// Pinned core keys.
    pub peer_keys: Vec<PublicKey>,
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
    /// The control token's file; `None` is [`control::token::default_path`].
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
}

impl std::fmt::Debug for PrivateKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "PrivateKey({})", self.public_key())
    }
}

/// The tunnel as flows use it.
#[derive(Clone)]
struct Tunnel {
    conn: quinn::Connection,
    /// The byte cache for the core, when both ends run `reduce`.
    cache: Option<wanopt_codec::PeerCache>,
}

/// How long a new tunnel waits for the core's control hello before flows
/// use it without data reduction.
const HELLO_WAIT: Duration = Duration::from_secs(3);

struct Edge {
    config: EdgeConfig,
    state: Arc<NodeState>,
    tunnel: watch::Receiver<Option<Tunnel>>,
    limits: Arc<FlowLimits>,
    /// Log lines of refused unmatched flows.
    unmatched_log: LogLimit,
}

/// At most one log line per this interval for flows refused by policy.
const REFUSAL_LOG_INTERVAL: Duration = Duration::from_secs(10);

/// The UDP sockets of `--forward-udp` (each with its destination) and
/// `--transparent-udp`, bound.
async fn bind_udp(
    config: &EdgeConfig,
) -> Result<
    (
        Vec<(tokio::net::UdpSocket, wanopt_proto::Target)>,
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
        forwards.push((socket, forward.destination.clone()));
    }
    let transparent = match config.transparent_udp {
        Some(addr) => Some(crate::flow::udp::transparent::bind(addr)?),
        None => None,
    };
    Ok((forwards, transparent))
}

impl EdgeConfig {
    /// Whether no forward and no transparent socket is configured.
    fn accepts_nothing(&self) -> bool {
        self.forwards.is_empty()
            && self.transparent.is_none()
            && self.udp_forwards.is_empty()
            && self.transparent_udp.is_none()
    }
}

/// The tunnel's local address: `--bind` (any port by default) or, with
/// `--path`s, the wildcard of its port, each datagram naming its local
/// address; the paths are checked and handed to the path layer.
fn tunnel_bind(
    config: &EdgeConfig,
    core_addr: SocketAddr,
    state: &NodeState,
) -> Result<SocketAddr, NodeError> {
    let wildcard = |port| match core_addr {
        SocketAddr::V4(_) => SocketAddr::new(Ipv4Addr::UNSPECIFIED.into(), port),
        SocketAddr::V6(_) => SocketAddr::new(Ipv6Addr::UNSPECIFIED.into(), port),
    };
    let mut bind = config.bind.unwrap_or(wildcard(0));
    if !config.paths.is_empty() {
        for path in &config.paths {
            if path.remote.is_ipv4() != core_addr.is_ipv4() {
                return Err(UsageError::PathFamily(path.to_string(), core_addr).into());
            }
            if !is_local(path.local) {
                return Err(UsageError::PathNotLocal(path.to_string(), path.local).into());
            }
        }
        // Each datagram names its local address: the socket takes any.
        bind = wildcard(bind.port());
        let paths: Vec<_> = config.paths.iter().map(|p| (p.local, p.remote)).collect();
        state
            .duplication
            .set_paths(core_addr, &paths, config.path_use.mode());
    }
    Ok(bind)
}

/// Runs an edge until `shutdown` resolves, then drains flows for a bounded
/// time. Every listener is bound before this returns an error-free start.
pub async fn run(config: EdgeConfig, shutdown: impl Future<Output = ()>) -> Result<(), NodeError> {
    if config.accepts_nothing() {
        return Err(UsageError::NothingToAccept.into());
    }
    let mut listeners = Vec::new();
    for forward in &config.forwards {
        listeners.push((
            listen_tcp(forward.listen, false)?,
            forward.destination.clone(),
        ));
    }
    let udp_sockets = bind_udp(&config).await?;
    let transparent = match config.transparent {
        Some(addr) => {
            let listener = listen_tcp(addr, true)?;
            // Port 0 took a port: reopen that one.
            let addr = listener.local_addr().unwrap_or(addr);
            Some((listener, addr))
        }
        None => None,
    };
    let caches = match config.reduce.clone() {
        Some(reduce) => Some(Arc::new(Caches::new(reduce)?)),
        None => None,
    };
    let state = NodeState::new(
        Role::Edge,
        config.tuning.congestion,
        config.tuning.duplication,
        caches,
    );
    state.flows.set_idle_timeout(config.flow_idle_timeout);
    state.set_window_budget(config.tuning.window_budget.clone());
    let control = match config.control {
        Some(addr) => Some(control::bind(addr, config.control_token.as_deref()).await?),
        None => None,
    };
    let core_addr = resolve(&config.core).await?;
    let bind = tunnel_bind(&config, core_addr, &state)?;
    let endpoint = tunnel::endpoint(bind, None, &config.key, &config.tuning, &state.duplication)?;
    let client_config = tunnel::client_config(&config.key, &config.peer_keys, &config.tuning)?;
    info!(
        "edge {} starting: core {}, {} forward(s){}",
        config.key.public_key(),
        config.core,
        config.forwards.len(),
        config
            .transparent
            .map(|a| format!(", transparent on {a}"))
            .unwrap_or_default()
    );

    let (tunnel_tx, tunnel_rx) = watch::channel(None);
    let (udp_tx, udp_rx) = watch::channel(None);
    let shutdown_signal = Shutdown::new();
    let mut tasks = tokio::task::JoinSet::new();
    tasks.spawn(maintain_tunnel(
        endpoint.clone(),
        client_config,
        match config.paths.is_empty() {
            true => Core::Named(config.core.clone()),
            // The paths were set up for this address: keep it.
            false => Core::Fixed(core_addr),
        },
        state.clone(),
        Published {
            tunnel: tunnel_tx,
            udp: udp_tx,
            wants_udp: !config.udp_forwards.is_empty() || config.transparent_udp.is_some(),
        },
        shutdown_signal.clone(),
    ));
    lifecycle::spawn_housekeeping(&mut tasks, &state, control);
    let drain = config.drain;
    let edge = Arc::new(Edge {
        limits: FlowLimits::new(config.limits),
        config,
        state: state.clone(),
        tunnel: tunnel_rx.clone(),
        unmatched_log: LogLimit::new(REFUSAL_LOG_INTERVAL),
    });
    for (listener, destination) in listeners {
        tasks.spawn(accept_loop(edge.clone(), listener, destination));
    }
    let udp_edge = Arc::new(UdpEdge {
        tunnel: udp_rx,
        state: state.clone(),
        limits: edge.limits.clone(),
        idle_timeout: edge.config.udp_idle_timeout,
        classes: Arc::new(edge.config.classes.clone()),
    });
    let (forwards, transparent_udp) = udp_sockets;
    for (socket, destination) in forwards {
        tasks.spawn(crate::flow::udp::edge::serve(
            udp_edge.clone(),
            socket,
            destination,
        ));
    }
    if let Some(socket) = transparent_udp {
        tasks.spawn(crate::flow::udp::transparent::serve(
            udp_edge.clone(),
            socket,
            edge.config.optimize.clone(),
            edge.config.fail == FailMode::Open,
        ));
    }
    if let Some((listener, addr)) = transparent {
        let edge = edge.clone();
        let close_while_down = edge.config.fail == FailMode::Open;
        tasks.spawn(intercept::serve(
            listener,
            addr,
            tunnel_rx,
            close_while_down,
            move |tcp, source| {
                let Some(permit) = edge.admit(source) else {
                    reset_tcp(tcp);
                    return;
                };
                let _ = tcp.set_nodelay(true);
                let edge = edge.clone();
                tokio::spawn(async move {
                    let _permit = permit;
                    edge.transparent(tcp, source, Some(addr)).await
                });
            },
        ));
    }

    shutdown.await;
    info!(
        "shutting down: no new flows; draining {} flow(s) for up to {drain:?}",
        state.flows.active()
    );
    shutdown_signal.trigger();
    tasks.abort_all();
    lifecycle::drain(&state, drain).await;
    lifecycle::checkpoint_caches(&state).await;
    if let Some(Tunnel { conn, .. }) = edge.tunnel.borrow().clone() {
        conn.close(
            quinn::VarInt::from_u32(wanopt_proto::codes::SHUTDOWN),
            b"edge shutting down",
        );
    }
    let _ = tokio::time::timeout(Duration::from_secs(2), endpoint.wait_idle()).await;
    Ok(())
}

/// Whether `ip` is one of this host's addresses (binding to it succeeds).
fn is_local(ip: IpAddr) -> bool {
    std::net::UdpSocket::bind(SocketAddr::new(ip, 0)).is_ok()
}

async fn resolve(host_port: &str) -> Result<SocketAddr, NodeError> {
    tokio::net::lookup_host(host_port)
        .await
        .map_err(|e| NodeError::Resolve {
            name: host_port.to_owned(),
            why: ResolveFailure::Lookup(e),
        })?
        .next()
        .ok_or_else(|| NodeError::Resolve {
            name: host_port.to_owned(),
            why: ResolveFailure::NoAddress,
        })
}

/// Where the tunnel is published for flows.
struct Published {
    tunnel: watch::Sender<Option<Tunnel>>,
    /// For UDP flows, while the core carries them.
    udp: watch::Sender<Option<UdpTunnel>>,
    /// The edge has UDP forwards (a core without UDP is then worth a line).
    wants_udp: bool,
}

/// Keeps one connection to the core up, reconnecting with exponential
/// backoff (100 ms to 5 s) after failures, restarts of the core or path loss.
/// Where the core is: a name resolved at each attempt, or the address
/// the edge's paths were set up for.
enum Core {
    Named(String),
    Fixed(SocketAddr),
}

impl std::fmt::Display for Core {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Core::Named(name) => f.write_str(name),
            Core::Fixed(addr) => write!(f, "{addr}"),
        }
    }
}

async fn maintain_tunnel(
    endpoint: quinn::Endpoint,
    client_config: quinn::ClientConfig,
    core: Core,
    state: Arc<NodeState>,
    published: Published,
    shutdown: Shutdown,
) {
    const MIN_BACKOFF: Duration = Duration::from_millis(100);
    const MAX_BACKOFF: Duration = Duration::from_secs(5);
    let mut backoff = MIN_BACKOFF;
    let mut last_error = String::new();
    while !shutdown.is_triggered() {
        let attempt = async {
            let addr = match &core {
                Core::Named(name) => resolve(name).await.map_err(|e| (None, e.to_string()))?,
                Core::Fixed(addr) => *addr,
            };
            let connecting = endpoint
                .connect_with(client_config.clone(), addr, "wanopt")
                .map_err(|e| (Some(addr), e.to_string()))?;
            let conn = match tokio::time::timeout(Duration::from_secs(10), connecting).await {
                Ok(Ok(conn)) => conn,
                Ok(Err(e)) => return Err((Some(addr), e.to_string())),
                Err(_) => return Err((Some(addr), "handshake timed out".to_owned())),
            };
            state
                .duplication
                .bind_paths(&conn, crate::transport::udp::Side::Client);
            // The client's side of a TLS 1.3 handshake completes before the
            // core has checked the edge's certificate: a core that does not
            // pin this edge closes the connection right after. So the
            // tunnel is up only once the core answered on the control
            // stream (or stayed silent but open for HELLO_WAIT).
            tokio::select! {
                biased;
                reason = conn.closed() => Err((
                    Some(addr),
                    format!("closed the tunnel during setup: {reason}"),
                )),
                (cache, accepts) = control_exchange(&conn, &state) => Ok((conn, cache, accepts)),
            }
        };
        match attempt.await {
            Ok((conn, cache, accepts)) => {
                let addr = conn.remote_address();
                info!("tunnel up to core {addr} (rtt {:?})", conn.rtt());
                state.peer_up(&conn);
                let flows = TunnelFlows::new(false);
                tokio::spawn(read_datagrams(
                    conn.clone(),
                    flows.clone(),
                    state.udp.clone(),
                ));
                if accepts.contains(Services::UDP) {
                    published.udp.send_replace(Some(UdpTunnel {
                        conn: conn.clone(),
                        flows,
                    }));
                } else if published.wants_udp {
                    warn!("core {addr} does not carry UDP flows (an older wanopt): --forward-udp datagrams are dropped; upgrade the core");
                }
                published.tunnel.send_replace(Some(Tunnel {
                    conn: conn.clone(),
                    cache,
                }));
                backoff = MIN_BACKOFF;
                last_error.clear();
                let reason = conn.closed().await;
                published.tunnel.send_replace(None);
                published.udp.send_replace(None);
                state.duplication.unbind_paths(addr);
                if shutdown.is_triggered() {
                    return;
                }
                warn!("tunnel to core {addr} down: {reason}; reconnecting");
                state.peer_down(addr, Some(reason.to_string()));
                continue;
            }
            Err((addr, error)) => {
                let error = identity::readable_handshake_error(error);
                if error != last_error {
                    warn!("cannot reach core {core}: {error}; retrying with backoff");
                    last_error = error.clone();
                } else {
                    debug!("cannot reach core {core}: {error}");
                }
                if let Some(addr) = addr {
                    state.peer_down(addr, Some(error));
                    state.duplication.unbind_paths(addr);
                    state.duplication.handshake_failed(addr);
                }
            }
        }
        tokio::time::sleep(backoff).await;
        backoff = (backoff * 2).min(MAX_BACKOFF);
    }
}

/// Runs the new tunnel's control stream (in the background, for the
/// connection's life) and waits for the core's first hello; returns the
/// cache to use when both ends run `reduce`, and the services the core
/// accepts.
async fn control_exchange(
    conn: &quinn::Connection,
    state: &NodeState,
) -> (Option<wanopt_codec::PeerCache>, Services) {
    let entry = match (&state.caches, peer_key(conn)) {
        (Some(caches), Some(key)) => match caches.for_peer(key) {
            Ok(entry) => Some(entry),
            Err(e) => {
                warn!("data reduction off on this tunnel: {e}");
                None
            }
        },
        _ => None,
    };
    let (first_tx, first_rx) = tokio::sync::oneshot::channel();
    tokio::spawn(reduce::run_control(conn.clone(), entry.clone(), first_tx));
    match tokio::time::timeout(HELLO_WAIT, first_rx).await {
        Ok(Ok(peer)) => {
            let cache_open = entry.is_some();
            let reduce = entry.filter(|_| peer.accepts.contains(Services::REDUCE));
            info!(
                "core {}: data reduction {}",
                conn.remote_address(),
                match (&reduce, &state.caches, cache_open) {
                    (Some(_), _, _) => "on",
                    (None, None, _) => "off (--no-reduce)",
                    // Its cache could not be opened (warned above).
                    (None, Some(_), false) => "off (this node's byte cache is unusable)",
                    (None, Some(_), true) => "off (the core runs --no-reduce)",
                }
            );
            (reduce.map(|e| e.cache.clone()), peer.accepts)
        }
        _ => {
            warn!(
                "core {}: no control hello within {HELLO_WAIT:?}; flows go without data reduction on this tunnel",
                conn.remote_address()
            );
            (None, Services::default())
        }
    }
}

async fn accept_loop(edge: Arc<Edge>, listener: TcpListener, destination: Target) {
    let local = listener.local_addr().ok();
    loop {
        let (tcp, source) = match listener.accept().await {
            Ok(pair) => pair,
            Err(e) => {
                // Out of file descriptors and the like: back off, keep serving.
                warn!("accept on {local:?} failed: {e}");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let Some(permit) = edge.admit(source) else {
            reset_tcp(tcp);
            continue;
        };
        let _ = tcp.set_nodelay(true);
        let edge = edge.clone();
        let destination = destination.clone();
        tokio::spawn(async move {
            let _permit = permit;
            edge.tunnelled(tcp, source, destination, true).await
        });
    }
}

impl Edge {
    /// A place for a new flow from `source` under the flow limits, or
    /// `None` (counted, and logged at a limited rate) when a limit is hit.
    fn admit(&self, source: SocketAddr) -> Option<FlowPermit> {
        match self.limits.admit(source.ip(), std::time::Instant::now()) {
            Ok(permit) => Some(permit),
            Err(refusal) => {
                self.state
                    .flows
                    .totals
                    .limited
                    .fetch_add(1, Ordering::Relaxed);
                if let Some(n) = refusal.log {
                    warn!(
                        "refusing new flows: {}; {n} refused since the last such line",
                        refusal.hit
                    );
                }
                None
            }
        }
    }

    async fn transparent(&self, tcp: TcpStream, source: SocketAddr, listen: Option<SocketAddr>) {
        let dest = match original_destination(&tcp) {
            Ok(dest) => dest,
            Err(e) => {
                warn!("flow from {source}: cannot recover its original destination: {e}");
                reset_tcp(tcp);
                return;
            }
        };
        if let Some(listen) = listen {
            if dest.port() == listen.port()
                && (dest.ip() == listen.ip() || listen.ip().is_unspecified() && is_local(dest.ip()))
            {
                warn!("flow from {source} was addressed to the transparent port itself ({dest}); refusing it to avoid a loop");
                reset_tcp(tcp);
                return;
            }
        }
        if !self.config.optimize.is_empty() && !self.config.optimize.matches(dest) {
            if self.config.pass_unmatched {
                debug!("flow {source} -> {dest} matches no --optimize rule: passing through (--pass-unmatched)");
                self.pass_through(tcp, source, dest).await;
                return;
            }
            let totals = &self.state.flows.totals;
            totals.flows.fetch_add(1, Ordering::Relaxed);
            totals.refused.fetch_add(1, Ordering::Relaxed);
            if let Some(held) = self.unmatched_log.allow(std::time::Instant::now()) {
                let more = match held {
                    0 => String::new(),
                    n => format!(" ({n} more since the last such line)"),
                };
                warn!(
                    "flow {source} -> {dest} matches no --optimize rule: refused{more}; \
                     the firewall should not send it here (use the rules of --print-firewall, \
                     or give --pass-unmatched to connect such flows from the edge's address)"
                );
            }
            reset_tcp(tcp);
            return;
        }
        self.tunnelled(tcp, source, Target::Addr(dest), false).await;
    }

    async fn pass_through(&self, tcp: TcpStream, source: SocketAddr, dest: SocketAddr) {
        let flows = &self.state.flows;
        flows.totals.passed_through.fetch_add(1, Ordering::Relaxed);
        let guard = flows.start(None, source, dest.to_string(), vec!["pass"], None);
        let connected = tokio::time::timeout(self.config.connect_timeout, TcpStream::connect(dest))
            .await
            .unwrap_or_else(|_| Err(std::io::ErrorKind::TimedOut.into()));
        let server = match connected {
            Ok(server) => server,
            Err(e) => {
                info!(
                    "flow {} {source} -> {dest} (pass-through): {e}",
                    guard.flow.id
                );
                flows.totals.refused.fetch_add(1, Ordering::Relaxed);
                reset_tcp(tcp);
                return;
            }
        };
        let _ = server.set_nodelay(true);
        guard.flow.set_state(FlowState::Open);
        if let Err(abort) = splice_tcp(tcp, server, &guard.flow).await {
            report(&flows.totals.resets, &guard.flow, "client", &abort);
        }
    }

    /// The tunnel, waiting up to `wait` for it to come up.
    async fn connection(&self, wait: Duration) -> Option<Tunnel> {
        let mut rx = self.tunnel.clone();
        let current = rx.borrow().clone();
        if current.is_some() || wait.is_zero() {
            return current;
        }
        tokio::time::timeout(wait, rx.wait_for(|c| c.is_some()))
            .await
            .ok()
            .and_then(|r| r.ok().and_then(|c| c.clone()))
    }

    async fn tunnelled(&self, tcp: TcpStream, source: SocketAddr, dest: Target, explicit: bool) {
        let flows = &self.state.flows;
        // Under --fail open the transparent listener closes with the
        // tunnel; a flow accepted just before is reset, not connected from
        // the edge's address.
        let wait = if !explicit && self.config.fail == FailMode::Open {
            Duration::ZERO
        } else {
            self.config.tunnel_wait
        };
        let Some(Tunnel { conn, cache }) = self.connection(wait).await else {
            info!("tunnel down: resetting flow {source} -> {dest}");
            flows.totals.flows.fetch_add(1, Ordering::Relaxed);
            flows.totals.refused.fetch_add(1, Ordering::Relaxed);
            reset_tcp(tcp);
            return;
        };
        let reduction = cache
            .filter(|_| match &dest {
                Target::Addr(addr) => !self.config.no_reduce_to.matches(*addr),
                Target::Domain(..) => true,
            })
            .and_then(|cache| {
                let caches = self.state.caches.as_ref()?;
                Some(caches.reduction(cache, conn.clone()))
            });
        let (services, mut names) = match reduction {
            Some(_) => (Services::REDUCE, vec!["tcp-opt", "reduce"]),
            None => (Services::default(), vec!["tcp-opt"]),
        };
        let dst = match &dest {
            Target::Addr(addr) => Some(*addr),
            Target::Domain(..) => None,
        };
        let treatment = self.config.classes.classify(Proto::Tcp, dst, None);
        let services = services.with(treatment.services());
        names.extend(service_names(treatment.services()));
        let guard = flows.start(
            None,
            source,
            dest.to_string(),
            names,
            Some(conn.remote_address()),
        );
        let flow = &guard.flow;
        if let Some(class) = treatment.class {
            flow.set_class(class);
        }
        let header = OpenRepr {
            flow_id: flow.id,
            services,
            destination: dest.clone(),
            source,
        };
        let header = match header.emit() {
            Ok(h) => h,
            Err(e) => {
                warn!("flow {} to {dest}: {e}", flow.id);
                reset_tcp(tcp);
                return;
            }
        };
        let (mut send, recv) = match conn.open_bi().await {
            Ok(pair) => pair,
            Err(e) => {
                info!(
                    "flow {} to {dest}: cannot open a tunnel stream: {e}",
                    flow.id
                );
                flows.totals.refused.fetch_add(1, Ordering::Relaxed);
                reset_tcp(tcp);
                return;
            }
        };
        let _ = send.set_priority(treatment.priority.stream_priority());
        if let Err(e) = send.write_all(&header).await {
            info!("flow {} to {dest}: tunnel stream failed: {e}", flow.id);
            flows.totals.refused.fetch_add(1, Ordering::Relaxed);
            reset_tcp(tcp);
            return;
        }
        flow.set_state(FlowState::Open);
        let ends = self.state.duplication.stream_ends(conn.remote_address());
        let spliced = carry(tcp, send, recv, flow, Facing::Client, 0, ends, reduction).await;
        match spliced {
            Ok(()) => debug!("flow {} {source} -> {dest} done", flow.id),
            Err(Abort::Refused(status)) => {
                flows.totals.refused.fetch_add(1, Ordering::Relaxed);
                info!(
                    "flow {} {source} -> {dest} refused by the core: {status}",
                    flow.id
                );
            }
            Err(abort) => report(&flows.totals.resets, flow, "client", &abort),
        }
    }
}
