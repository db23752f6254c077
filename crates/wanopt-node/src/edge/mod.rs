//! The edge node: accepts client TCP connections (explicit forwards or
//! transparently redirected flows), picks by policy which go through the
//! tunnel, and carries each optimized flow on its own QUIC stream to the core.

use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tracing::{debug, info, warn};

use wanopt_proto::{OpenRepr, Services, Target};

mod config;
mod dial;
mod listen;
mod moves;
mod reach;
mod retire;
mod upstreams;

use crate::class::{service_names, LivePolicy, Proto};
use crate::error::{NodeError, UsageError};
use crate::flow::limits::{FlowLimits, FlowPermit};
use crate::flow::udp::edge::UdpEdge;
use crate::flow::urgency::interactive_level;
use crate::flow::{carry, report, reset_tcp, splice_tcp, Abort, Facing, FlowState};
pub use crate::forward::{parse_target, Forward, WanPath, MAX_PATHS};
use crate::intercept::{self, original_destination, LogLimit};
use crate::state::NodeState;
use crate::transport::datagram::StreamEnds;
use crate::transport::tunnel;
pub use config::{EdgeConfig, FailMode, PathUse};
use dial::{is_local, maintain_tunnel, Core, Published, TcpDial, Tunnel};
pub(crate) use listen::{bind, tunnel_bind, Listeners};
pub use reach::{Reach, TransportChoice};
pub use upstreams::UpstreamConfig;
use upstreams::{Upstream, Upstreams};

/// A running edge.
pub(crate) struct Edge {
    config: EdgeConfig,
    state: Arc<NodeState>,
    /// The peers it dials, and which one a flow goes to.
    upstreams: Arc<Upstreams>,
    /// The tunnels' endpoint.
    endpoint: quinn::Endpoint,
    limits: Arc<FlowLimits>,
    /// Log lines of refused unmatched flows.
    unmatched_log: LogLimit,
    /// Log lines of flows refused for want of a route.
    no_route_log: LogLimit,
    /// What it optimizes and how, as the last reload left it.
    policy: Arc<LivePolicy>,
    /// The core's address the `--path`s were set up for.
    paths_core: Option<SocketAddr>,
}

/// At most one log line per this interval for flows refused by policy.
const REFUSAL_LOG_INTERVAL: Duration = Duration::from_secs(10);

/// Starts the edge's work on `state`: a task per dialed peer keeping its
/// tunnel up on `endpoint`, and the listeners' tasks in `tasks`.
pub(crate) fn start(
    config: EdgeConfig,
    listeners: Listeners,
    state: &Arc<NodeState>,
    (endpoint, paths_core): (quinn::Endpoint, Option<SocketAddr>),
    tasks: &mut tokio::task::JoinSet<()>,
) -> Result<Arc<Edge>, NodeError> {
    info!(
        "edge {} starting: {} peer(s) ({}), {} forward(s){}",
        config.key.public_key(),
        config.upstreams.len(),
        config
            .upstreams
            .iter()
            .map(|u| u.endpoint.as_str())
            .collect::<Vec<_>>()
            .join(", "),
        config.forwards.len(),
        config
            .transparent
            .map(|a| format!(", transparent on {a}"))
            .unwrap_or_default()
    );
    let upstreams = Upstreams::new();
    let policy = Arc::new(LivePolicy::new(config.policy()));
    let edge = Arc::new(Edge {
        limits: FlowLimits::new(config.limits),
        config,
        state: state.clone(),
        upstreams: upstreams.clone(),
        endpoint,
        unmatched_log: LogLimit::new(REFUSAL_LOG_INTERVAL),
        no_route_log: LogLimit::new(REFUSAL_LOG_INTERVAL),
        paths_core,
        policy,
    });
    let dialed = edge
        .config
        .upstreams
        .iter()
        .map(|u| edge.dial(u.clone()))
        .collect::<Result<Vec<_>, _>>()?;
    upstreams.set(dialed);
    for (listener, destination) in listeners.tcp {
        tasks.spawn(accept_loop(edge.clone(), listener, destination));
    }
    let routes = upstreams.clone();
    let udp_edge = Arc::new(UdpEdge {
        route: Arc::new(move |dest: &Target| {
            let upstream = routes.route(dest)?;
            let tunnel = upstream.udp.borrow().clone();
            tunnel
        }),
        any_up: upstreams.any_udp(),
        state: state.clone(),
        limits: edge.limits.clone(),
        idle_timeout: edge.config.udp_idle_timeout,
        policy: edge.policy.clone(),
    });
    for (socket, forward) in listeners.udp {
        tasks.spawn(crate::flow::udp::edge::serve(
            udp_edge.clone(),
            socket,
            forward,
        ));
    }
    if let Some(socket) = listeners.transparent_udp {
        tasks.spawn(crate::flow::udp::transparent::serve(
            udp_edge.clone(),
            socket,
            edge.config.fail == FailMode::Open,
        ));
    }
    if let Some((listener, addr)) = listeners.transparent {
        let edge = edge.clone();
        let close_while_down = edge.config.fail == FailMode::Open;
        tasks.spawn(intercept::serve(
            listener,
            addr,
            upstreams.any_tcp(),
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
    Ok(edge)
}

impl Edge {
    /// Starts the task that keeps `config`'s tunnel up.
    fn dial(&self, config: UpstreamConfig) -> Result<Arc<Upstream>, NodeError> {
        let client_config = tunnel::client_config(
            &self.config.key,
            &config.keys,
            &self.config.tuning,
            tunnel::Transport::Quic,
        )?;
        let tcp = TcpDial {
            client: tunnel::client_config(
                &self.config.key,
                &config.keys,
                &self.config.tuning,
                tunnel::Transport::Tcp,
            )?,
            reset: self.config.key.reset_key(),
            buffer: self.config.tuning.socket_buffer,
            reach: Reach::new(self.config.transport, self.config.tcp_port),
        };
        let (tunnel_tx, tunnel_rx) = watch::channel(None);
        let (udp_tx, udp_rx) = watch::channel(None);
        let core = match self.config.paths.is_empty() {
            true => Core::Named(config.endpoint.clone()),
            // The paths were set up for the address it had at start.
            false => match self.paths_core {
                Some(addr) => Core::Fixed {
                    addr,
                    paths: self.config.paths.iter().map(WanPath::spec).collect(),
                    mode: self.config.path_use.mode(),
                },
                None => Core::Named(config.endpoint.clone()),
            },
        };
        let record = self.state.book.dialed(&config.endpoint, &config.keys);
        let upstream = Arc::new(Upstream::new(config, tunnel_rx, udp_rx));
        tokio::spawn(maintain_tunnel(
            self.endpoint.clone(),
            client_config,
            tcp,
            core,
            self.state.clone(),
            Published {
                tunnel: tunnel_tx,
                udp: udp_tx,
                wants_udp: !self.config.udp_forwards.is_empty()
                    || self.config.transparent_udp.is_some(),
                changed: {
                    let upstreams = self.upstreams.clone();
                    Arc::new(move || upstreams.refresh())
                },
                record,
            },
            (upstream.stop.clone(), upstream.removed.clone()),
        ));
        Ok(upstream)
    }

    /// Takes a reloaded configuration's peers: a peer whose endpoint and
    /// keys are unchanged keeps its tunnel (and its flows) and takes its
    /// new routes; a new one is dialed; one no longer listed is closed.
    /// Returns what changed, for the log.
    pub(crate) fn reload(&self, new: EdgeConfig) -> Result<String, NodeError> {
        self.check_reload(&new)?;
        self.state.datagrams.set_sla(new.classes.sla());
        let policy = match self.policy.set(new.policy()) {
            true => "policy changed",
            false => "policy unchanged",
        };
        let new = new.upstreams;
        let old = self.upstreams.list();
        let mut list = Vec::new();
        let (mut kept, mut added, mut rerouted) = (0, 0, 0);
        for config in new {
            match old.iter().find(|u| u.config.same_peer(&config)) {
                Some(upstream) => {
                    if upstream.set_routes(config.routes.clone()) {
                        rerouted += 1;
                    }
                    list.push(upstream.clone());
                    kept += 1;
                }
                None => {
                    list.push(self.dial(config)?);
                    added += 1;
                }
            }
        }
        let removed: Vec<_> = old
            .iter()
            .filter(|u| !list.iter().any(|n| Arc::ptr_eq(n, u)))
            .cloned()
            .collect();
        if list.is_empty() {
            warn!("the edge dials no peer now: its flows are refused until a reload gives it one");
        }
        self.upstreams.set(list);
        for upstream in &removed {
            upstream.close();
        }
        Ok(format!(
            "dialed peers: {kept} kept ({rerouted} with new routes), {added} added, {} removed; {policy}",
            removed.len()
        ))
    }

    /// Whether `new` can be taken by [`Edge::reload`].
    pub(crate) fn check_reload(&self, new: &EdgeConfig) -> Result<(), NodeError> {
        if !self.config.paths.is_empty() && new.upstreams.len() != 1 {
            return Err(UsageError::PathsNeedOnePeer(new.upstreams.len()).into());
        }
        let fixed = self.config.restart_keys(new);
        if !fixed.is_empty() {
            return Err(UsageError::RestartKeys(fixed.join(", ")).into());
        }
        Ok(())
    }

    /// The tunnels' endpoint.
    pub(crate) fn endpoint(&self) -> quinn::Endpoint {
        self.endpoint.clone()
    }

    /// Stops every tunnel task from reconnecting (shutdown: the tunnels
    /// stay up while flows drain).
    pub(crate) fn stop_dialing(&self) {
        for upstream in self.upstreams.list().iter() {
            upstream.stop.trigger();
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
        let policy = self.policy.get();
        if !policy.optimize.is_empty() && !policy.optimize.matches(dest) {
            if policy.pass_unmatched {
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
    /// The tunnel of the peer `dest` is routed to, waiting up to `wait`
    /// for it to come up; `Err(())` when no peer's routes hold `dest`.
    async fn connection(&self, dest: &Target, wait: Duration) -> Result<Option<Tunnel>, ()> {
        let upstream = self.upstreams.route(dest).ok_or(())?;
        Ok(Self::wait_tunnel(&upstream, wait).await)
    }

    async fn wait_tunnel(upstream: &Upstream, wait: Duration) -> Option<Tunnel> {
        let mut rx = upstream.tunnel.clone();
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
        let policy = self.policy.get();
        // Under --fail open the transparent listener closes with the
        // tunnel; a flow accepted just before is reset, not connected from
        // the edge's address.
        let wait = if !explicit && self.config.fail == FailMode::Open {
            Duration::ZERO
        } else {
            self.config.tunnel_wait
        };
        let tunnel = match self.connection(&dest, wait).await {
            Ok(tunnel) => tunnel,
            Err(()) => {
                flows.totals.flows.fetch_add(1, Ordering::Relaxed);
                flows.totals.refused.fetch_add(1, Ordering::Relaxed);
                if let Some(held) = self.no_route_log.allow(std::time::Instant::now()) {
                    let more = match held {
                        0 => String::new(),
                        n => format!(" ({n} more since the last such line)"),
                    };
                    warn!("flow {source} -> {dest}: no peer's routes hold it and no peer takes the rest: refused{more}");
                }
                reset_tcp(tcp);
                return;
            }
        };
        let Some(Tunnel {
            conn,
            cache,
            transport,
            users: _users,
        }) = tunnel
        else {
            info!("tunnel down: resetting flow {source} -> {dest}");
            flows.totals.flows.fetch_add(1, Ordering::Relaxed);
            flows.totals.refused.fetch_add(1, Ordering::Relaxed);
            reset_tcp(tcp);
            return;
        };
        let reduction = cache
            .filter(|_| match &dest {
                Target::Addr(addr) => !policy.no_reduce_to.matches(*addr),
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
        let treatment = policy.classes.classify(Proto::Tcp, dst, None);
        let services = services.with(treatment.services());
        names.extend(service_names(treatment.services()));
        if transport == tunnel::Transport::Tcp {
            // The tunnel is carried on TCP: said with the flow's services.
            names.push("over-tcp");
        }
        let guard = flows.start(
            None,
            source,
            dest.to_string(),
            names,
            Some(conn.remote_address()),
        );
        let flow = &guard.flow;
        self.state.count_flow(flow, conn.remote_address());
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
        let _ = send.set_priority(interactive_level(treatment.priority.stream_priority()));
        if let Err(e) = send.write_all(&header).await {
            info!("flow {} to {dest}: tunnel stream failed: {e}", flow.id);
            flows.totals.refused.fetch_add(1, Ordering::Relaxed);
            reset_tcp(tcp);
            return;
        }
        flow.set_state(FlowState::Open);
        let ends = StreamEnds::new(&self.state.datagrams, conn.remote_address());
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
