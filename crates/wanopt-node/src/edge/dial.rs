//! An edge's tunnel to one dialed peer: resolving its name, the
//! connection kept up with backoff, and the control exchange that tells
//! whether data reduction runs on it.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tracing::{debug, info, warn};

use wanopt_proto::datagram::PathSpec;
use wanopt_proto::Services;

use crate::error::{NodeError, ResolveFailure};
use crate::flow::udp::edge::UdpTunnel;
use crate::flow::udp::{read_datagrams, TunnelFlows};
use crate::lifecycle::Shutdown;
use crate::peer_book::PeerRecord;
use crate::reduce;
use crate::state::NodeState;
use crate::transport::carrier;
use crate::transport::identity::{self, peer_key};
use crate::transport::tunnel::Transport;

use super::reach::{Reach, QUIC_RETRY, QUIC_TRY};
use super::retire::close_when_unused;

/// Whether `ip` is one of this host's addresses (binding to it succeeds).
pub(super) fn is_local(ip: IpAddr) -> bool {
    std::net::UdpSocket::bind(SocketAddr::new(ip, 0)).is_ok()
}

/// The tunnel as flows use it.
#[derive(Clone)]
pub(crate) struct Tunnel {
    pub(super) conn: quinn::Connection,
    /// The byte cache for the core, when both ends run `reduce`.
    pub(super) cache: Option<wanopt_codec::PeerCache>,
    /// What carries it.
    pub(super) transport: Transport,
    /// Held by each flow for its life: a tunnel the edge moved away from
    /// closes once no flow holds it.
    pub(super) users: Arc<()>,
}

/// What an edge dials over TCP with (`crate::transport::carrier`).
pub(super) struct TcpDial {
    /// The QUIC configuration of tunnels over TCP.
    pub(super) client: quinn::ClientConfig,
    /// The key of the carrier endpoints' stateless resets.
    pub(super) reset: ring::hmac::Key,
    /// The carrier connections' socket buffers.
    pub(super) buffer: usize,
    /// Which transports, and what `auto` learned.
    pub(super) reach: Reach,
}

/// How long a new tunnel waits for the core's control hello before flows
/// use it without data reduction.
const HELLO_WAIT: Duration = Duration::from_secs(3);

/// How long a handshake to the core may take.
pub(super) const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// How long a handshake to the shared address may take while the edge
/// alternates between it and its replica (a cut link): the replica gets
/// its turn again soon after the link is back.
const SHARED_TURN: Duration = Duration::from_secs(3);

/// The replica a core advertised (its own address, behind a cluster's
/// shared one): redials go there first, so that the edge keeps the replica
/// that holds its byte cache, whichever of the edge's addresses or ports
/// the redial leaves from. A replica that does not answer within
/// [`Sticky::patience`] is forgotten and the edge dials the shared address.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Sticky {
    addr: SocketAddr,
    /// The last tunnel's round-trip time.
    rtt: Duration,
}

impl Sticky {
    /// Three round trips, from 300 ms to 1 s: a live replica answers a
    /// handshake in one; a dead one costs no more than this before the
    /// shared address is tried.
    fn patience(&self) -> Duration {
        (self.rtt * 3).clamp(Duration::from_millis(300), Duration::from_secs(1))
    }
}

pub(super) async fn resolve(host_port: &str) -> Result<SocketAddr, NodeError> {
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
pub(super) struct Published {
    pub(super) tunnel: watch::Sender<Option<Tunnel>>,
    /// For UDP flows, while the core carries them.
    pub(super) udp: watch::Sender<Option<UdpTunnel>>,
    /// The edge has UDP forwards (a core without UDP is then worth a line).
    pub(super) wants_udp: bool,
    /// Called when the tunnel comes up or goes down.
    pub(super) changed: Arc<dyn Fn() + Send + Sync>,
    /// The configured peer, told when a dial fails.
    pub(super) record: Arc<PeerRecord>,
}

/// Keeps one connection to the core up, reconnecting with exponential
/// backoff (100 ms to 5 s) after failures, restarts of the core or path loss.
/// Where the core is: a name resolved at each attempt, or the address
/// the edge's paths were set up for (with the paths, `(local, remote)`
/// in preference order, and their mode).
pub(super) enum Core {
    Named(String),
    Fixed {
        addr: SocketAddr,
        paths: Vec<PathSpec>,
        mode: wanopt_proto::path::PathMode,
    },
}

impl Core {
    /// Before a redial to the replica at `replica`: an edge with paths
    /// sets them up for it, every path to the replica's address (a
    /// path's far end is the core's address on that path; a replica has
    /// one, that every path reaches).
    fn paths_to(&self, state: &NodeState, replica: SocketAddr) {
        if let Core::Fixed { paths, mode, .. } = self {
            let mapped: Vec<_> = paths
                .iter()
                .map(|p| PathSpec {
                    remote: replica,
                    ..*p
                })
                .collect();
            state.datagrams.set_paths(replica, &mapped, *mode);
        }
    }
}

impl std::fmt::Display for Core {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Core::Named(name) => f.write_str(name),
            Core::Fixed { addr, .. } => write!(f, "{addr}"),
        }
    }
}

pub(super) async fn maintain_tunnel(
    endpoint: quinn::Endpoint,
    client_config: quinn::ClientConfig,
    mut tcp: TcpDial,
    core: Core,
    state: Arc<NodeState>,
    published: Published,
    (shutdown, removed): (Shutdown, Shutdown),
) {
    const MIN_BACKOFF: Duration = Duration::from_millis(100);
    const MAX_BACKOFF: Duration = Duration::from_secs(5);
    let mut backoff = MIN_BACKOFF;
    let mut last_error = String::new();
    let mut target = Target::default();
    let mut moved: Option<DialedTunnel> = None;
    while !shutdown.is_triggered() {
        let dialer = Dialer {
            endpoint: &endpoint,
            client_config: &client_config,
            tcp: &tcp,
            core: &core,
            state: &state,
        };
        let attempt = match moved.take() {
            Some(up) => Ok(up),
            None => tokio::select! {
                attempt = dialer.attempt(&target) => attempt,
                () = removed.triggered() => break,
            },
        };
        match attempt {
            Ok(up) => {
                match up.transport {
                    Transport::Tcp => tcp.reach.to_tcp(up.why.clone()),
                    Transport::Quic => tcp.reach.to_quic(),
                }
                let dialer = Dialer {
                    endpoint: &endpoint,
                    client_config: &client_config,
                    tcp: &tcp,
                    core: &core,
                    state: &state,
                };
                let conn = up.conn.clone();
                let addr = conn.remote_address();
                target.up(addr, up.advertised, conn.rtt(), &state);
                if removed.is_triggered() {
                    conn.close(
                        quinn::VarInt::from_u32(wanopt_proto::codes::SHUTDOWN),
                        b"peer removed from the configuration",
                    );
                    break;
                }
                backoff = MIN_BACKOFF;
                last_error.clear();
                let reason = match carry(up, &state, &published, &removed, &dialer).await {
                    Carried::Closed(reason) => reason,
                    Carried::Moved(next) => {
                        moved = Some(next);
                        continue;
                    }
                };
                if removed.is_triggered() {
                    state.peer_gone(&conn);
                    break;
                }
                if shutdown.is_triggered() {
                    return;
                }
                warn!("tunnel to core {addr} down: {reason}; reconnecting");
                state.peer_down(addr, Some(reason.to_string()));
                continue;
            }
            Err((Some(replica), error)) if target.is_replica_turn(replica) => {
                // The replica does not answer: the shared address now, at
                // once (its balancer sends the edge to a live replica).
                target.failed(replica, error.clone(), &state);
                target.to_replica = false;
                warn!(
                    "replica {replica} does not answer ({}); dialing the shared address {core}",
                    identity::readable_handshake_error(error)
                );
                continue;
            }
            Err((addr, error)) => {
                let error = identity::readable_handshake_error(error);
                published.record.dial_failed(&error);
                if error != last_error {
                    warn!("cannot reach core {core}: {error}; retrying with backoff");
                    last_error = error.clone();
                } else {
                    debug!("cannot reach core {core}: {error}");
                }
                // The replica again next, if the edge has one.
                target.to_replica = true;
                if let Some(addr) = addr {
                    target.failed(addr, error, &state);
                }
            }
        }
        tokio::select! {
            () = tokio::time::sleep(backoff) => {}
            () = shutdown.triggered() => break,
        }
        backoff = (backoff * 2).min(MAX_BACKOFF);
    }
    // A removed peer leaves no entry in `status` and `/metrics`.
    if removed.is_triggered() {
        target.forget(None, &state);
    }
}

/// Where the next attempt goes, and what the attempts so far left in the
/// node's status.
#[derive(Default)]
struct Target {
    /// The replica the core advertised, if any.
    sticky: Option<Sticky>,
    /// Whether the next attempt goes to the replica: attempts alternate
    /// between it and the shared address while neither answers (a cut
    /// link), and the replica is forgotten only when a tunnel comes up to
    /// one that advertises another (or none).
    to_replica: bool,
    /// Addresses marked down since the last tunnel (and the last one
    /// tried): forgotten once the peer is up at another, or removed.
    marked_down: Vec<SocketAddr>,
}

impl Target {
    /// Whether `addr` is the replica and it was its turn.
    fn is_replica_turn(&self, addr: SocketAddr) -> bool {
        self.to_replica && self.sticky.is_some_and(|s| s.addr == addr)
    }

    /// A tunnel came up at `addr`, whose core advertises `advertised`.
    fn up(
        &mut self,
        addr: SocketAddr,
        advertised: Option<SocketAddr>,
        rtt: Duration,
        state: &NodeState,
    ) {
        // The shared address or a former replica: this peer is now the
        // tunnel at `addr`.
        self.forget(Some(addr), state);
        self.to_replica = true;
        if let Some(own) = advertised.filter(|own| self.sticky.is_none_or(|s| s.addr != *own)) {
            info!("core {addr} is the replica at {own}: redials go there while it answers");
        }
        self.sticky = advertised.map(|addr| Sticky { addr, rtt });
    }

    /// An attempt at `addr` failed with `error`.
    fn failed(&mut self, addr: SocketAddr, error: String, state: &NodeState) {
        state.dial_failed(addr, error);
        state.datagrams.unbind_paths(addr);
        state.datagrams.handshake_failed(addr);
        if !self.marked_down.contains(&addr) {
            self.marked_down.push(addr);
        }
    }

    /// Forgets the status entries of every address marked down, but
    /// `keep`.
    fn forget(&mut self, keep: Option<SocketAddr>, state: &NodeState) {
        for old in self.marked_down.drain(..) {
            if Some(old) != keep {
                state.forget_down_peer(old);
            }
        }
        if let Some(keep) = keep {
            self.marked_down.push(keep);
        }
    }
}

/// What an attempt dials with.
#[derive(Clone, Copy)]
pub(super) struct Dialer<'a> {
    endpoint: &'a quinn::Endpoint,
    client_config: &'a quinn::ClientConfig,
    pub(super) tcp: &'a TcpDial,
    core: &'a Core,
    pub(super) state: &'a NodeState,
}

impl Dialer<'_> {
    /// One attempt: the replica if it is its turn, else the shared
    /// address (and then the replica once more, if the shared address led
    /// to another one).
    async fn attempt(&self, target: &Target) -> Result<DialedTunnel, (Option<SocketAddr>, String)> {
        let Dialer { core, state, .. } = *self;
        let shared_patience = match target.sticky {
            Some(_) => SHARED_TURN,
            None => HANDSHAKE_TIMEOUT,
        };
        let (addr, patience) = match (core, target.sticky.filter(|_| target.to_replica)) {
            (_, Some(sticky)) => {
                core.paths_to(state, sticky.addr);
                (sticky.addr, sticky.patience())
            }
            (Core::Named(name), None) => (
                resolve(name).await.map_err(|e| (None, e.to_string()))?,
                shared_patience,
            ),
            (Core::Fixed { addr, .. }, None) => (*addr, shared_patience),
        };
        let up = self.once(addr, patience).await?;
        // Through the shared address onto another replica while the edge
        // had one: a cut link that came back during that handshake, or a
        // replica that died. One more try of the replica tells which; the
        // edge stays where its cache is.
        let Some(own) = target
            .sticky
            .filter(|own| addr != own.addr && up.advertised != Some(own.addr))
        else {
            return Ok(up);
        };
        core.paths_to(state, own.addr);
        match self.once(own.addr, own.patience()).await {
            Ok(back) => {
                info!(
                    "core {addr} is another replica, and the edge's own at {} answers: back there",
                    own.addr
                );
                up.conn.close(
                    quinn::VarInt::from_u32(wanopt_proto::codes::SHUTDOWN),
                    b"the edge went back to its replica",
                );
                state.datagrams.unbind_paths(addr);
                Ok(back)
            }
            Err(_) => Ok(up),
        }
    }

    /// One dial of the core at `addr` (its UDP address) within
    /// `patience`: over what `--transport` and what `auto` learned say,
    /// and over TCP when `auto`'s QUIC handshake does not complete within
    /// [`QUIC_TRY`].
    async fn once(
        &self,
        addr: SocketAddr,
        patience: Duration,
    ) -> Result<DialedTunnel, (Option<SocketAddr>, String)> {
        let reach = &self.tcp.reach;
        let (first, why) = reach.first();
        if first == Transport::Tcp {
            return self.over_tcp(addr, patience, why).await;
        }
        if !reach.falls_back() {
            return self.over_quic(addr, patience).await;
        }
        // An edge with several paths gives QUIC its whole patience: the
        // paths' own failover may need it before TCP is worth a try.
        let quic_patience = match self.core {
            Core::Fixed { .. } => patience,
            Core::Named(_) => patience.min(QUIC_TRY),
        };
        match self.over_quic(addr, quic_patience).await {
            Err((_, e)) if e == HANDSHAKE_TIMED_OUT => {
                let why = format!("no QUIC handshake within {quic_patience:?}");
                self.over_tcp(addr, patience, why)
                    .await
                    .map_err(|(a, tcp)| (a, format!("{e} over UDP; over TCP: {tcp}")))
            }
            done => done,
        }
    }

    pub(super) async fn over_quic(
        &self,
        addr: SocketAddr,
        patience: Duration,
    ) -> Result<DialedTunnel, (Option<SocketAddr>, String)> {
        let connecting = self
            .endpoint
            .connect_with(self.client_config.clone(), addr, "wanopt")
            .map_err(|e| (Some(addr), e.to_string()))?;
        let why = match self.tcp.reach.choice {
            super::reach::TransportChoice::Quic => "--transport quic",
            _ => "UDP gets through",
        };
        handshake(
            connecting,
            self.state,
            addr,
            patience,
            (Transport::Quic, why.to_owned()),
        )
        .await
    }

    /// A dial of the core at `addr` (its UDP address) over TCP, to its
    /// carrier port, for `why`.
    pub(super) async fn over_tcp(
        &self,
        addr: SocketAddr,
        patience: Duration,
        why: String,
    ) -> Result<DialedTunnel, (Option<SocketAddr>, String)> {
        let TcpDial {
            client,
            reset,
            buffer,
            reach,
        } = self.tcp;
        let to = reach.tcp_addr(addr);
        let started = std::time::Instant::now();
        let (endpoint, lost) = carrier::connect(to, patience, reset, *buffer)
            .await
            .map_err(|e| (Some(addr), e.to_string()))?;
        let connecting = endpoint
            .connect_with(client.clone(), to, "wanopt")
            .map_err(|e| (Some(addr), e.to_string()))?;
        let left = patience.saturating_sub(started.elapsed());
        let mut up = handshake(connecting, self.state, to, left, (Transport::Tcp, why))
            .await
            .map_err(|(_, e)| (Some(addr), format!("over TCP {to}: {e}")))?;
        carrier::close_when_lost(up.conn.clone(), lost);
        up.dialed = addr;
        Ok(up)
    }
}

/// How [`carry`] ended.
enum Carried {
    /// The tunnel closed, for this reason.
    Closed(quinn::ConnectionError),
    /// New flows moved to another tunnel (`--transport auto`): carry it.
    Moved(DialedTunnel),
}

/// Publishes a tunnel that came up for flows and carries it until it
/// closes (or the peer is removed, which closes it at once; a shutdown
/// leaves it to the drain); why it closed.
async fn carry(
    up: DialedTunnel,
    state: &NodeState,
    published: &Published,
    removed: &Shutdown,
    dialer: &Dialer<'_>,
) -> Carried {
    let DialedTunnel {
        conn,
        cache,
        accepts,
        transport,
        why,
        dialed,
        quic_retry,
        ..
    } = up;
    let addr = conn.remote_address();
    let label = state.peer_up(&conn, transport, &why);
    info!(
        "tunnel up to core {}{addr} over {} ({why}; rtt {:?})",
        label.map(|l| format!("{l} at ")).unwrap_or_default(),
        transport.name(),
        conn.rtt()
    );
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
    let users = Arc::new(());
    published.tunnel.send_replace(Some(Tunnel {
        conn: conn.clone(),
        cache,
        transport,
        users: users.clone(),
    }));
    (published.changed)();
    let reason = tokio::select! {
        reason = conn.closed() => reason,
        next = dialer.next_move(&conn, (transport, dialed, quic_retry)) => {
            // New flows take the new tunnel; this one closes once its
            // flows are done.
            state.peer_down(addr, None);
            state.forget_down_peer(addr);
            if transport == Transport::Quic {
                state.datagrams.unbind_paths(addr);
            }
            tokio::spawn(close_when_unused(
                conn,
                users,
                next.transport,
                next.left_silent,
            ));
            return Carried::Moved(next);
        }
        () = removed.triggered() => {
            conn.close(
                quinn::VarInt::from_u32(wanopt_proto::codes::SHUTDOWN),
                b"peer removed from the configuration",
            );
            conn.closed().await
        }
    };
    published.tunnel.send_replace(None);
    published.udp.send_replace(None);
    (published.changed)();
    state.datagrams.unbind_paths(addr);
    Carried::Closed(reason)
}

/// A tunnel that came up: the connection, the cache to use, what the
/// core accepts and the address it advertises.
pub(super) struct DialedTunnel {
    pub(super) conn: quinn::Connection,
    cache: Option<wanopt_codec::PeerCache>,
    accepts: Services,
    advertised: Option<SocketAddr>,
    /// What carries it, and why.
    transport: Transport,
    pub(super) why: String,
    /// The core's UDP address it was dialed for.
    pub(super) dialed: SocketAddr,
    /// How long a tunnel over TCP waits before it tries QUIC again.
    pub(super) quic_retry: Duration,
    /// It came up because the tunnel before it went silent.
    pub(super) left_silent: bool,
}

/// What a dial that took too long says.
const HANDSHAKE_TIMED_OUT: &str = "handshake timed out";

/// One handshake to `addr` within `patience`, over a transport (for a
/// reason), and the control exchange; `Err` with the address tried and
/// why.
async fn handshake(
    connecting: quinn::Connecting,
    state: &NodeState,
    addr: SocketAddr,
    patience: Duration,
    (transport, why): (Transport, String),
) -> Result<DialedTunnel, (Option<SocketAddr>, String)> {
    let conn = match tokio::time::timeout(patience, connecting).await {
        Ok(Ok(conn)) => conn,
        Ok(Err(e)) => return Err((Some(addr), e.to_string())),
        Err(_) => return Err((Some(addr), HANDSHAKE_TIMED_OUT.to_owned())),
    };
    if transport == Transport::Quic {
        state
            .datagrams
            .bind_paths(&conn, crate::transport::datagram::Side::Client);
    }
    // The client's side of a TLS 1.3 handshake completes before the core
    // has checked the edge's certificate: a core that does not pin this
    // edge closes the connection right after. So the tunnel is up only
    // once the core answered on the control stream (or stayed silent but
    // open for HELLO_WAIT).
    tokio::select! {
        biased;
        reason = conn.closed() => Err((
            Some(addr),
            format!("closed the tunnel during setup: {reason}"),
        )),
        (cache, accepts, advertised) = control_exchange(&conn, state) => Ok(DialedTunnel {
            conn,
            cache,
            accepts,
            advertised,
            transport,
            why,
            dialed: addr,
            quic_retry: QUIC_RETRY,
            left_silent: false,
        }),
    }
}

/// Runs the new tunnel's control stream (in the background, for the
/// connection's life) and waits for the core's first hello; returns the
/// cache to use when both ends run `reduce`, the services the core
/// accepts and the address it advertises as its own.
async fn control_exchange(
    conn: &quinn::Connection,
    state: &NodeState,
) -> (
    Option<wanopt_codec::PeerCache>,
    Services,
    Option<SocketAddr>,
) {
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
    tokio::spawn(reduce::run_control(
        conn.clone(),
        entry.clone(),
        first_tx,
        None,
    ));
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
            (
                reduce.map(|e| e.cache.clone()),
                peer.accepts,
                peer.advertise,
            )
        }
        _ => {
            warn!(
                "core {}: no control hello within {HELLO_WAIT:?}; flows go without data reduction on this tunnel",
                conn.remote_address()
            );
            (None, Services::default(), None)
        }
    }
}
