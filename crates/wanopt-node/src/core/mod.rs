//! The core node: accepts tunnels from pinned edges, and for each stream
//! connects to the requested destination if its allowlist permits it.

use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpStream;
use tracing::{debug, info, warn};

use wanopt_proto::{
    codes, open_header_len, HeaderError, Open, OpenRepr, ReplyRepr, Services, Status, Target,
};

mod carriers;
mod config;

pub use carriers::ListenTcp;
pub use config::{AcceptedPeer, CoreConfig};

use crate::class::{service_names, Priority};
use crate::error::{NodeError, UsageError};
use crate::flow::limits::FlowLimits;
use crate::flow::udp::core::CoreFlow;
use crate::flow::udp::{read_datagrams, TunnelFlows};
use crate::flow::urgency::interactive_level;
use crate::flow::{carry, report, Facing, FlowState};
use crate::intercept::LogLimit;
use crate::policy::{Permit, RuleSet};
use crate::reduce::{self, PeerEntry};
use crate::state::NodeState;
use crate::transport::handshakes::InProgress;
use crate::transport::identity::{self, peer_key, PublicKey};
use crate::transport::tunnel::{self, Transport};

/// How often the core checks whether a burst of handshakes is over and its
/// memory can be given back ([`crate::transport::handshakes::Handshakes::trim_after_burst`]).
const TRIM_CHECK: Duration = Duration::from_secs(2);

/// Time an edge has to send a complete stream header.
const HEADER_TIMEOUT: Duration = Duration::from_secs(10);

/// How long the host's interface addresses are reused before they are
/// listed again (an address added since may be reached by a broad rule
/// for up to this long).
const HOST_ADDRS_TTL: Duration = Duration::from_secs(1);

/// The core host's own interface addresses (`getifaddrs`), listed again
/// at most every [`HOST_ADDRS_TTL`].
#[derive(Debug, Default)]
struct HostAddrs {
    listed: std::sync::Mutex<Option<(std::time::Instant, Arc<Vec<std::net::IpAddr>>)>>,
}

impl HostAddrs {
    fn current(&self) -> Arc<Vec<std::net::IpAddr>> {
        let mut listed = self.listed.lock().unwrap_or_else(|e| e.into_inner());
        let now = std::time::Instant::now();
        match &*listed {
            Some((at, addrs)) if now.duration_since(*at) < HOST_ADDRS_TTL => addrs.clone(),
            _ => {
                let addrs = Arc::new(host_addresses());
                *listed = Some((now, addrs.clone()));
                addrs
            }
        }
    }
}

/// Every address of the host's interfaces (empty, with a warning, when
/// they cannot be listed: loopback, unspecified and link-local are refused
/// anyway).
fn host_addresses() -> Vec<std::net::IpAddr> {
    match nix::ifaddrs::getifaddrs() {
        Ok(list) => list
            .filter_map(|ifa| {
                let addr = ifa.address?;
                if let Some(v4) = addr.as_sockaddr_in() {
                    Some(std::net::IpAddr::V4(v4.ip()))
                } else {
                    addr.as_sockaddr_in6()
                        .map(|v6| std::net::IpAddr::V6(v6.ip()))
                }
            })
            .collect(),
        Err(e) => {
            warn!("cannot list this host's addresses ({e}); only loopback, unspecified and link-local destinations are known to be the host");
            Vec::new()
        }
    }
}

/// Warns of peers that may reach nothing (but the dialed ones, which
/// need not reach anything through this node).
fn warn_empty_allowlists(peers: &[AcceptedPeer], dialed: &[PublicKey]) {
    for peer in peers {
        if peer.allow.is_empty() && peer.allow_udp.is_empty() && !dialed.contains(&peer.key) {
            warn!("peer {}: no allow rule: every destination it asks for will be refused (a node is never an open relay)", peer.key);
        }
    }
}

/// Starts accepting tunnels: binds the listening endpoint (which the
/// node's dialed tunnels share) and spawns its accept loop in `tasks`.
pub(crate) fn start(
    config: CoreConfig,
    dialed: &[PublicKey],
    state: &Arc<NodeState>,
    tasks: &mut tokio::task::JoinSet<()>,
) -> Result<(Arc<Core>, quinn::Endpoint), NodeError> {
    if config.peers.is_empty() {
        return Err(UsageError::NoPeerKey.into());
    }
    warn_empty_allowlists(&config.peers, dialed);
    let pinned_keys = pinned(&config.peers, dialed);
    let server_config =
        tunnel::server_config(&config.key, &pinned_keys, &config.tuning, Transport::Quic)?;
    let tcp_server =
        tunnel::server_config(&config.key, &pinned_keys, &config.tuning, Transport::Tcp)?;
    let carriers = carriers::bind(config.listen_tcp)?;
    let endpoint = tunnel::endpoint(
        config.listen,
        Some(server_config),
        &config.key,
        &config.tuning,
        &state.datagrams,
    )?;
    info!(
        "core {} listening on udp {} ({} pinned peer key(s), {} allow rule(s))",
        config.key.public_key(),
        endpoint.local_addr().map_err(NodeError::LocalAddress)?,
        config.peers.len(),
        config.peers.iter().map(|p| p.allow.0.len()).sum::<usize>()
    );
    {
        let handshakes = state.handshakes.clone();
        tasks.spawn(async move {
            let mut tick = tokio::time::interval(TRIM_CHECK);
            loop {
                tick.tick().await;
                let handshakes = handshakes.clone();
                let _ = tokio::task::spawn_blocking(move || handshakes.trim_after_burst()).await;
            }
        });
    }
    let core = Arc::new(Core {
        limits: FlowLimits::new(config.limits),
        peers: std::sync::RwLock::new(Arc::new(config.peers.clone())),
        config,
        state: state.clone(),
        host: HostAddrs::default(),
        endpoint: endpoint.clone(),
        tcp_server: std::sync::RwLock::new(tcp_server),
        carrier_setups: Arc::new(tokio::sync::Semaphore::new(carriers::CARRIER_SETUPS)),
        reloads: tokio::sync::watch::channel(0).0,
        refusal_log: LogLimit::with_burst(REFUSAL_LOG_INTERVAL, REFUSAL_LOG_BURST),
    });
    if let Some(listener) = carriers {
        tasks.spawn(core.clone().serve_carriers(listener));
    }
    {
        let endpoint = endpoint.clone();
        let core = core.clone();
        tasks.spawn(async move {
            while let Some(incoming) = endpoint.accept().await {
                if let Some((incoming, handshake)) = core.state.handshakes.admit(incoming) {
                    tokio::spawn(
                        core.clone()
                            .connection(incoming, handshake, Transport::Quic),
                    );
                }
            }
        });
    }
    Ok((core, endpoint))
}

/// The keys the endpoint accepts: every accepted peer's and every
/// dialed peer's (a peer the node dials may dial it too).
fn pinned(peers: &[AcceptedPeer], dialed: &[PublicKey]) -> Vec<PublicKey> {
    let mut keys: Vec<PublicKey> = peers.iter().map(|p| p.key).collect();
    for key in dialed {
        if !keys.contains(key) {
            keys.push(*key);
        }
    }
    keys
}

/// A core while it runs.
pub(crate) struct Core {
    config: CoreConfig,
    /// The accepted peers and their allowlists, as the last reload left them.
    peers: std::sync::RwLock<Arc<Vec<AcceptedPeer>>>,
    state: Arc<NodeState>,
    limits: Arc<FlowLimits>,
    host: HostAddrs,
    endpoint: quinn::Endpoint,
    /// The server configuration of tunnels over TCP (each carrier
    /// connection gets an endpoint of its own).
    tcp_server: std::sync::RwLock<quinn::ServerConfig>,
    /// Carrier connections being set up.
    carrier_setups: Arc<tokio::sync::Semaphore>,
    /// Bumped by each reload of the accepted peers: live flows check
    /// that they are still permitted.
    reloads: tokio::sync::watch::Sender<u64>,
    /// Lines about refused flows (TCP and UDP): a flood of refusals
    /// writes [`REFUSAL_LOG_BURST`] lines per [`REFUSAL_LOG_INTERVAL`]
    /// with a count, not one per flow (the counters in `status` count
    /// them all).
    refusal_log: LogLimit,
}

/// Lines about refused flows let through per [`REFUSAL_LOG_INTERVAL`]:
/// a few refusals each get their line (with its reason), a flood one
/// line a second with a count.
const REFUSAL_LOG_INTERVAL: Duration = Duration::from_secs(1);
const REFUSAL_LOG_BURST: u64 = 5;

impl Core {
    /// Logs a refused flow's line, at most [`REFUSAL_LOG_BURST`] per
    /// [`REFUSAL_LOG_INTERVAL`], saying how many were held back.
    fn log_refusal(&self, warning: bool, line: std::fmt::Arguments<'_>) {
        let Some(held) = self.refusal_log.allow(std::time::Instant::now()) else {
            return;
        };
        let more = match held {
            0 => String::new(),
            n => format!(" ({n} more lines about refused flows held back)"),
        };
        if warning {
            warn!("{line}{more}");
        } else {
            info!("{line}{more}");
        }
    }

    /// The rules of the peer `conn` authenticated as; `None` once a reload
    /// removed it.
    fn rules_of(&self, conn: &quinn::Connection) -> Option<AcceptedPeer> {
        self.rules_of_key(peer_key(conn)?)
    }

    fn rules_of_key(&self, key: PublicKey) -> Option<AcceptedPeer> {
        let peers = self.peers.read().unwrap_or_else(|e| e.into_inner()).clone();
        peers.iter().find(|p| p.key == key).cloned()
    }

    /// Waits for a reload that no longer permits `peer`'s flow to `addr`
    /// (`udp`: by its `allow-udp`), then ends the flow; never returns.
    async fn revoke_when_not_permitted(
        &self,
        peer: Option<PublicKey>,
        addr: SocketAddr,
        udp: bool,
        flow: &crate::flow::Flow,
    ) {
        let mut reloads = self.reloads.subscribe();
        while reloads.changed().await.is_ok() {
            let permitted = peer
                .and_then(|key| self.rules_of_key(key))
                .is_some_and(|rules| {
                    let list = if udp { &rules.allow_udp } else { &rules.allow };
                    list.permits(addr, &self.host.current()) == Permit::Allowed
                });
            if !permitted {
                info!(
                    "flow {} {} -> {addr}: no longer permitted after a reload: resetting it",
                    flow.id, flow.source
                );
                flow.revoke();
                break;
            }
        }
        std::future::pending().await
    }

    /// Whether `new` can be taken by [`Core::reload`].
    pub(crate) fn check_reload(&self, new: &CoreConfig) -> Result<(), NodeError> {
        let fixed = self.config.restart_keys(new);
        if !fixed.is_empty() {
            return Err(UsageError::RestartKeys(fixed.join(", ")).into());
        }
        if new.peers.is_empty() {
            return Err(UsageError::NoPeerKey.into());
        }
        Ok(())
    }

    /// Takes a reloaded list of accepted peers: new handshakes pin the new
    /// keys (and `dialed`'s), the tunnels of peers no longer listed are
    /// closed, and the others' new flows follow their new allowlists.
    /// Returns what changed, for the log.
    pub(crate) fn reload(
        &self,
        new: &CoreConfig,
        dialed: &[PublicKey],
    ) -> Result<String, NodeError> {
        self.check_reload(new)?;
        warn_empty_allowlists(&new.peers, dialed);
        let pinned_keys = pinned(&new.peers, dialed);
        let server_config = tunnel::server_config(
            &self.config.key,
            &pinned_keys,
            &self.config.tuning,
            Transport::Quic,
        )?;
        let tcp_server = tunnel::server_config(
            &self.config.key,
            &pinned_keys,
            &self.config.tuning,
            Transport::Tcp,
        )?;
        let old = std::mem::replace(
            &mut *self.peers.write().unwrap_or_else(|e| e.into_inner()),
            Arc::new(new.peers.clone()),
        );
        self.endpoint.set_server_config(Some(server_config));
        *self.tcp_server.write().unwrap_or_else(|e| e.into_inner()) = tcp_server;
        self.reloads.send_modify(|n| *n += 1);
        let removed: Vec<PublicKey> = old
            .iter()
            .map(|p| p.key)
            .filter(|k| !new.peers.iter().any(|p| p.key == *k) && !dialed.contains(k))
            .collect();
        let closed = self
            .state
            .close_peers(&removed, b"peer removed from the configuration");
        let changed = old
            .iter()
            .filter(|o| new.peers.iter().any(|n| n.key == o.key && n != *o))
            .count();
        let added = new
            .peers
            .iter()
            .filter(|n| !old.iter().any(|o| o.key == n.key))
            .count();
        Ok(format!(
            "accepted peers: {added} added, {} removed ({closed} tunnel(s) closed), {changed} with new allowlists",
            removed.len()
        ))
    }

    async fn connection(
        self: Arc<Self>,
        incoming: quinn::Incoming,
        handshake: InProgress,
        over: Transport,
    ) {
        let remote = incoming.remote_address();
        let conn = match incoming.await {
            Ok(conn) => conn,
            Err(e) => {
                self.state
                    .handshakes
                    .failed(remote, &identity::readable_handshake_error(e));
                return;
            }
        };
        drop(handshake);
        tunnel::authenticated(&conn);
        if over == Transport::Quic {
            self.state
                .datagrams
                .bind_paths(&conn, crate::transport::datagram::Side::Server);
        }
        let label = self.state.peer_up(
            &conn,
            over,
            &format!("the edge dialed over {}", over.name()),
        );
        let named = match &label {
            Some(label) => format!("{label} at {remote}"),
            None => remote.to_string(),
        };
        info!("tunnel up from edge {named} over {}", over.name());
        if let Some(key) = peer_key(&conn) {
            if let Some(other) = self.state.key_also_at(key, remote) {
                // Two nodes with one key, or one edge whose old tunnel has
                // not timed out yet: either way worth a line.
                warn!("edge key {key} is up from {remote} and from {other} at once (two edges with one key, or a stale tunnel)");
            }
        }
        let entry = match (&self.state.caches, peer_key(&conn)) {
            (Some(caches), Some(key)) => match caches.for_peer(key) {
                Ok(entry) => Some(entry),
                Err(e) => {
                    warn!("data reduction off on the tunnel from {named}: {e}");
                    None
                }
            },
            _ => None,
        };
        let (first_tx, _first_rx) = tokio::sync::oneshot::channel();
        tokio::spawn(reduce::run_control(
            conn.clone(),
            entry.clone(),
            first_tx,
            self.config.advertise,
        ));
        let udp_flows = TunnelFlows::new(true);
        tokio::spawn(read_datagrams(
            conn.clone(),
            udp_flows.clone(),
            self.state.udp.clone(),
        ));
        loop {
            match conn.accept_bi().await {
                Ok((send, recv)) => {
                    tokio::spawn(self.clone().stream(
                        send,
                        recv,
                        remote,
                        entry.clone(),
                        (conn.clone(), udp_flows.clone()),
                    ));
                }
                Err(e) => {
                    info!("tunnel from edge {named} closed: {e}");
                    break;
                }
            }
        }
        self.state.peer_gone(&conn);
    }

    /// A stream's header, read within [`HEADER_TIMEOUT`]; `None` when it
    /// does not come or does not parse (the stream is reset, the edge
    /// named in the log).
    async fn header(
        &self,
        send: &mut quinn::SendStream,
        recv: &mut quinn::RecvStream,
        peer: SocketAddr,
    ) -> Option<wanopt_proto::OpenRepr> {
        let why = match tokio::time::timeout(HEADER_TIMEOUT, read_header(recv)).await {
            Ok(Ok(header)) => return Some(header),
            Ok(Err(why)) => why.to_string(),
            Err(_) => format!("no header within {HEADER_TIMEOUT:?}"),
        };
        let named = self.state.peer_label(peer);
        warn!(
            "stream {} from edge {named}: {why}; resetting the stream",
            send.id()
        );
        reset_stream(send, recv, codes::PROTOCOL);
        None
    }

    async fn stream(
        self: Arc<Self>,
        mut send: quinn::SendStream,
        mut recv: quinn::RecvStream,
        peer: SocketAddr,
        entry: Option<Arc<PeerEntry>>,
        (conn, udp_flows): (quinn::Connection, Arc<TunnelFlows>),
    ) {
        let Some(header) = self.header(&mut send, &mut recv, peer).await else {
            return;
        };
        let Some(rules) = self.rules_of(&conn) else {
            // A reload removed the peer; its tunnel is closing.
            reset_stream(&mut send, &mut recv, codes::TCP_RESET);
            return;
        };
        if header.services.contains(Services::PROBE) {
            carriers::answer_probe(send, recv).await;
            return;
        }
        if header.services.contains(Services::UDP) {
            self.udp_stream(send, recv, (peer, &rules), header, conn, udp_flows)
                .await;
            return;
        }
        let reduce = header.services.contains(Services::REDUCE);
        let reduction = match (reduce, &entry, &self.state.caches) {
            (false, _, _) => None,
            (true, Some(entry), Some(caches)) => {
                Some(caches.reduction(entry.cache.clone(), conn.clone()))
            }
            (true, _, _) => {
                let named = self.state.peer_label(peer);
                warn!(
                    "stream {} from edge {named} asks for data reduction, which this tunnel does not run; resetting the stream",
                    send.id()
                );
                reset_stream(&mut send, &mut recv, codes::PROTOCOL);
                return;
            }
        };
        let flows = &self.state.flows;
        let _permit = match self
            .limits
            .admit(header.source.ip(), std::time::Instant::now())
        {
            Ok(permit) => permit,
            Err(refusal) => {
                flows.totals.limited.fetch_add(1, Ordering::Relaxed);
                if let Some(n) = refusal.log {
                    let named = self.state.peer_label(peer);
                    warn!(
                        "refusing new flows from edge {named}: {}; {n} refused since the last such line",
                        refusal.hit
                    );
                }
                let reply = ReplyRepr {
                    status: wanopt_proto::Status::Unavailable,
                }
                .emit();
                let _ = send.write_all(&reply).await;
                let _ = send.finish();
                let _ = recv.stop(quinn::VarInt::from_u32(codes::TCP_RESET));
                return;
            }
        };
        let guard = flows.start(
            Some(header.flow_id),
            header.source,
            header.destination.to_string(),
            if reduce {
                vec!["tcp-opt", "reduce"]
            } else {
                vec!["tcp-opt"]
            }
            .into_iter()
            .chain(service_names(header.services))
            .collect(),
            Some(peer),
        );
        let flow = &guard.flow;
        self.state.count_flow(flow, peer);
        // The edge's class for the flow: its download goes ahead of or
        // behind the others as its upload does.
        let _ = send.set_priority(interactive_level(
            Priority::of(header.services).stream_priority(),
        ));
        let (status, tcp) = self.connect(&rules.allow, &header).await;
        let reply = ReplyRepr { status }.emit();
        let Some(tcp) = tcp else {
            flows.totals.refused.fetch_add(1, Ordering::Relaxed);
            let named = self.state.peer_label(peer);
            self.log_refusal(
                false,
                format_args!(
                    "flow {} {} -> {} from edge {named}: {status}",
                    flow.id, header.source, header.destination
                ),
            );
            refuse_stream(send, recv, &reply).await;
            return;
        };
        if send.write_all(&reply).await.is_err() {
            return;
        }
        flow.set_state(FlowState::Open);
        let start = header.buffer_len() as u64;
        let ends = crate::transport::datagram::StreamEnds::new(&self.state.datagrams, peer);
        let server = tcp.peer_addr();
        let revoked = async {
            match server {
                Ok(addr) => {
                    self.revoke_when_not_permitted(peer_key(&conn), addr, false, flow)
                        .await
                }
                Err(_) => std::future::pending().await,
            }
        };
        // The watch never ends: the flow ends through its pumps, which a
        // revocation resets.
        let spliced = tokio::select! {
            spliced = carry(
                tcp,
                send,
                recv,
                flow,
                Facing::Server,
                start,
                ends,
                reduction,
            ) => spliced,
            () = revoked => Ok(()),
        };
        match spliced {
            Ok(()) => debug!("flow {} done", flow.id),
            Err(abort) => report(&self.state.flows.totals.resets, flow, "server", &abort),
        }
    }

    /// A UDP flow's stream: checks `--allow-udp` and the flow limits,
    /// connects a socket to the destination and carries the flow.
    async fn udp_stream(
        &self,
        send: quinn::SendStream,
        recv: quinn::RecvStream,
        (peer, rules): (SocketAddr, &AcceptedPeer),
        header: OpenRepr,
        conn: quinn::Connection,
        udp_flows: Arc<TunnelFlows>,
    ) {
        let flows = &self.state.flows;
        let refuse = |status: Status| ReplyRepr { status }.emit();
        let admitted = self
            .limits
            .admit_udp(header.source.ip(), std::time::Instant::now());
        let outcome = match admitted {
            Err(refusal) => {
                flows.totals.limited.fetch_add(1, Ordering::Relaxed);
                if let Some(n) = refusal.log {
                    let named = self.state.peer_label(peer);
                    warn!(
                        "refusing new flows from edge {named}: {}; {n} refused since the last such line",
                        refusal.hit
                    );
                }
                Err(Status::Unavailable)
            }
            Ok(permit) => match self.permitted(&rules.allow_udp, &header, true).await {
                Err(status) => Err(status),
                Ok(addrs) => {
                    // The first permitted address that has a route.
                    let mut outcome = Err(Status::Unreachable);
                    for addr in addrs {
                        outcome = crate::flow::udp::core::connect(addr).await;
                        if outcome.is_ok() {
                            break;
                        }
                    }
                    outcome.map(|socket| (permit, socket))
                }
            },
        };
        let (_permit, socket) = match outcome {
            Ok(pair) => pair,
            Err(status) => {
                flows.totals.flows.fetch_add(1, Ordering::Relaxed);
                flows.totals.refused.fetch_add(1, Ordering::Relaxed);
                self.state.udp.refused.fetch_add(1, Ordering::Relaxed);
                let named = self.state.peer_label(peer);
                self.log_refusal(
                    false,
                    format_args!(
                        "udp flow {} -> {} from edge {named}: {status}",
                        header.source, header.destination
                    ),
                );
                refuse_stream(send, recv, &refuse(status)).await;
                return;
            }
        };
        self.state.udp.flows.fetch_add(1, Ordering::Relaxed);
        let mut names = vec!["udp"];
        names.extend(service_names(header.services));
        let guard = flows.start(
            Some(header.flow_id),
            header.source,
            header.destination.to_string(),
            names,
            Some(peer),
        );
        let server = socket.peer_addr();
        let key = peer_key(&conn);
        let flow = guard.flow.clone();
        self.state.count_flow(&flow, peer);
        let revoked = async {
            match server {
                Ok(addr) => self.revoke_when_not_permitted(key, addr, true, &flow).await,
                Err(_) => std::future::pending().await,
            }
        };
        let carried = CoreFlow {
            conn,
            flows: udp_flows,
            totals: self.state.udp.clone(),
            idle_timeout: self.config.udp_idle_timeout,
            marked: header.services.contains(Services::REALTIME),
        }
        .carry(send, recv, socket, guard.flow.clone());
        // The watch never ends: a revocation ends the flow's own loop.
        tokio::select! {
            () = carried => {}
            () = revoked => {}
        }
    }

    /// Resolves the destination and keeps the addresses `rules` permit;
    /// the reply status when none is left (logged).
    async fn permitted(
        &self,
        rules: &RuleSet,
        header: &OpenRepr,
        udp: bool,
    ) -> Result<Vec<SocketAddr>, Status> {
        let (what, flag, list) = if udp {
            ("udp ", "--allow-udp", "--allow-udp list")
        } else {
            ("", "--allow", "allowlist")
        };
        let candidates: Vec<SocketAddr> = match &header.destination {
            Target::Addr(addr) => vec![*addr],
            Target::Domain(name, port) => {
                match tokio::net::lookup_host((name.as_str(), *port)).await {
                    Ok(addrs) => addrs.collect(),
                    Err(_) => return Err(Status::NameNotFound),
                }
            }
        };
        if candidates.is_empty() {
            return Err(Status::NameNotFound);
        }
        let host = self.host.current();
        let mut itself = None;
        let allowed: Vec<SocketAddr> = candidates
            .into_iter()
            .filter(|&a| match rules.permits(a, &host) {
                Permit::Allowed => true,
                Permit::NotListed => false,
                Permit::SelfNotNamed(why) => {
                    itself = Some((a, why));
                    false
                }
            })
            .collect();
        if allowed.is_empty() {
            match itself {
                Some((addr, why)) => {
                    let is = match why {
                        "multicast" | "broadcast" => format!("a {why} address"),
                        _ => format!("this core host itself ({why})"),
                    };
                    self.log_refusal(
                        true,
                        format_args!(
                            "refused {what}flow {} -> {}: {addr} is {is}, which a broad {flag} does not reach; name it to allow it (e.g. {flag} {addr})",
                            header.source, header.destination
                        ),
                    )
                }
                None => self.log_refusal(
                    true,
                    format_args!(
                        "refused {what}flow {} -> {}: not permitted by the {list}",
                        header.source, header.destination
                    ),
                ),
            }
            return Err(Status::Denied);
        }
        Ok(allowed)
    }

    /// Resolves and checks the destination, then connects to it.
    async fn connect(&self, allow: &RuleSet, header: &OpenRepr) -> (Status, Option<TcpStream>) {
        let allowed = match self.permitted(allow, header, false).await {
            Ok(allowed) => allowed,
            Err(status) => return (status, None),
        };
        let mut status = Status::Unreachable;
        for addr in allowed {
            match tokio::time::timeout(self.config.connect_timeout, TcpStream::connect(addr)).await
            {
                Ok(Ok(tcp)) => {
                    let _ = tcp.set_nodelay(true);
                    return (Status::Connected, Some(tcp));
                }
                Ok(Err(e)) if e.kind() == std::io::ErrorKind::ConnectionRefused => {
                    status = Status::Refused;
                }
                Ok(Err(e)) if e.kind() == std::io::ErrorKind::TimedOut => {
                    status = Status::TimedOut;
                }
                Ok(Err(_)) => status = Status::Unreachable,
                Err(_) => status = Status::TimedOut,
            }
        }
        (status, None)
    }
}

/// Why a stream's open header could not be read.
#[derive(Debug, thiserror::Error)]
pub enum HeaderReadError {
    /// The stream failed or ended before the header did.
    #[error("cannot read stream header: {0}")]
    Read(#[from] quinn::ReadExactError),
    /// The header did not parse.
    #[error(transparent)]
    Parse(#[from] HeaderError),
}

/// Reads and parses a stream's open header.
async fn read_header(recv: &mut quinn::RecvStream) -> Result<OpenRepr, HeaderReadError> {
    let mut prefix = [0u8; 4];
    recv.read_exact(&mut prefix).await?;
    let length = open_header_len(&prefix)?;
    let mut buf = vec![0u8; length];
    buf[..4].copy_from_slice(&prefix);
    recv.read_exact(&mut buf[4..]).await?;
    let view = Open::new_checked(&buf[..])?;
    Ok(OpenRepr::parse(&view)?)
}

/// Resets both halves of a tunnel stream with `code` (a stream the core
/// will not carry).
fn reset_stream(send: &mut quinn::SendStream, recv: &mut quinn::RecvStream, code: u32) {
    let code = quinn::VarInt::from_u32(code);
    let _ = send.reset(code);
    let _ = recv.stop(code);
}

/// Answers a refused flow's stream with `reply` and ends it, letting the
/// reply reach the edge (up to 5 s) before the stream is dropped.
async fn refuse_stream(mut send: quinn::SendStream, mut recv: quinn::RecvStream, reply: &[u8]) {
    let _ = send.write_all(reply).await;
    let _ = send.finish();
    let _ = recv.stop(quinn::VarInt::from_u32(codes::TCP_RESET));
    let _ = tokio::time::timeout(Duration::from_secs(5), send.stopped()).await;
}
