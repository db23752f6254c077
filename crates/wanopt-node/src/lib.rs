//! The tokio runtime of a wanopt node.
//!
//! An **edge** ([`edge::run`]) terminates client TCP connections on the LAN,
//! chosen by explicit forwards or transparent interception and by policy, and
//! carries each over one stream of a long-lived QUIC connection ([`tunnel`])
//! to a **core** ([`core::run`]), which connects to the destination if its
//! allowlist ([`policy`]) permits. Nodes authenticate each other by pinned
//! Ed25519 keys ([`identity`]). Each node keeps a flow table ([`flow`]) and
//! its state ([`state`]), served by the control API ([`control`]). Flows
//! with the `reduce` service run through the codec ([`reduced`]) against a
//! persistent per-peer byte cache ([`reduce`]), private to the node's user
//! on disk ([`cache_dir`]). Under QUIC, the tunnel's
//! socket repeats the tails of bursts on lossy paths ([`dupsock`]).

pub mod abort;
pub mod bbr;
pub mod budget;
pub mod cache_dir;
pub mod control;
pub mod core;
pub mod dupsock;
pub mod edge;
pub mod flow;
pub mod handshakes;
pub mod identity;
pub mod limits;
pub mod policy;
pub mod reassembly;
pub mod reduce;
pub mod reduced;
pub mod state;
pub mod tunnel;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::{TcpListener, TcpStream};

/// Errors that stop a node from starting.
#[derive(Debug, thiserror::Error)]
pub enum NodeError {
    /// A listening socket could not be bound.
    #[error("cannot listen on {addr} for the {what}: {source}")]
    Bind {
        /// What the socket was for.
        what: &'static str,
        /// The address.
        addr: SocketAddr,
        /// The I/O error.
        source: std::io::Error,
    },
    /// A name did not resolve.
    #[error("cannot resolve {0}")]
    Resolve(String),
    /// The tunnel could not be set up.
    #[error(transparent)]
    Tunnel(#[from] tunnel::TunnelError),
    /// The configuration is inconsistent.
    #[error("{0}")]
    Config(String),
    /// The control API's token file could not be written.
    #[error(transparent)]
    ControlToken(#[from] control::token::TokenError),
    /// A flag or configuration value the node cannot run with (a usage
    /// error: the command line or file must change).
    #[error("{0}")]
    Usage(String),
}

/// A one-shot, cloneable shutdown flag.
#[derive(Debug, Clone)]
pub struct Shutdown(Arc<tokio::sync::watch::Sender<bool>>);

impl Shutdown {
    /// A flag not yet triggered.
    pub fn new() -> Shutdown {
        Shutdown(Arc::new(tokio::sync::watch::channel(false).0))
    }

    /// Triggers it.
    pub fn trigger(&self) {
        self.0.send_replace(true);
    }

    /// Whether it was triggered.
    pub fn is_triggered(&self) -> bool {
        *self.0.borrow()
    }
}

impl Default for Shutdown {
    fn default() -> Self {
        Shutdown::new()
    }
}

/// Raises the soft limit on open file descriptors to the hard limit (each
/// flow holds one or two; the default soft limit is often 1024). Returns
/// the limits before and after, or `None` when nothing changed.
pub fn raise_fd_limit() -> Option<(u64, u64)> {
    use nix::sys::resource::{getrlimit, setrlimit, Resource};
    let (soft, hard) = getrlimit(Resource::RLIMIT_NOFILE).ok()?;
    if soft >= hard {
        return None;
    }
    setrlimit(Resource::RLIMIT_NOFILE, hard, hard).ok()?;
    Some((soft, hard))
}

/// Resolves on the first SIGINT or SIGTERM.
pub async fn shutdown_signal() {
    use tokio::signal::unix::{signal, SignalKind};
    let (Ok(mut term), Ok(mut int)) = (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    ) else {
        // Without signal handlers the node runs until killed.
        return std::future::pending().await;
    };
    tokio::select! {
        _ = term.recv() => {}
        _ = int.recv() => {}
    }
}

/// Makes SIGHUP harmless from now on: each one is logged and ignored (a
/// node does not reload its configuration yet; SIGTERM stops it). Its
/// default action would kill the node at once, without draining. Call
/// it inside the runtime, before the node starts.
pub fn ignore_hangups() {
    use tokio::signal::unix::{signal, SignalKind};
    match signal(SignalKind::hangup()) {
        Ok(mut hangup) => {
            tokio::spawn(async move {
                while hangup.recv().await.is_some() {
                    tracing::info!(
                        "SIGHUP received and ignored: a node does not reload its configuration (restart it, or SIGTERM to stop it)"
                    );
                }
            });
        }
        Err(e) => tracing::warn!("cannot catch SIGHUP ({e}): one would stop this node"),
    }
}

/// Starts what every node runs beside its data plane: the flow-rate and
/// tunnel-rate samplers (once a second) and, if bound, the control API.
fn spawn_housekeeping(
    tasks: &mut tokio::task::JoinSet<()>,
    state: &Arc<state::NodeState>,
    control: Option<control::ControlServer>,
) {
    tasks.spawn(state.flows.clone().run_sampler());
    let sampled = state.clone();
    tasks.spawn(async move {
        let mut tick = tokio::time::interval(Duration::from_secs(1));
        loop {
            tick.tick().await;
            sampled.sample_peers();
        }
    });
    let sampled = state.clone();
    tasks.spawn(async move {
        let mut tick = tokio::time::interval(dupsock::SAMPLE_INTERVAL);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            sampled.sample_duplication();
        }
    });
    if let Some(listener) = control {
        tasks.spawn(control::serve(listener, state.clone()));
    }
    if let Some(caches) = state.caches.clone() {
        tasks.spawn(async move {
            let mut tick = tokio::time::interval(caches.config().cache_checkpoint);
            tick.tick().await;
            loop {
                tick.tick().await;
                let caches = caches.clone();
                let _ = tokio::task::spawn_blocking(move || caches.checkpoint()).await;
            }
        });
    }
}

/// Saves the byte caches (at shutdown).
async fn checkpoint_caches(state: &state::NodeState) {
    if let Some(caches) = state.caches.clone() {
        let _ = tokio::task::spawn_blocking(move || caches.checkpoint()).await;
    }
}

/// Waits until no flow is live or `limit` passes.
async fn drain(state: &state::NodeState, limit: Duration) {
    let deadline = tokio::time::Instant::now() + limit;
    while state.flows.active() > 0 && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Binds a TCP listener; `transparent` also allows TPROXY'd connections
/// (IP_TRANSPARENT, best effort: it needs CAP_NET_ADMIN).
pub fn listen_tcp(addr: SocketAddr, transparent: bool) -> Result<TcpListener, NodeError> {
    let what = if transparent {
        "transparent listener"
    } else {
        "forward listener"
    };
    let bind_err = |source| NodeError::Bind { what, addr, source };
    let socket = socket2::Socket::new(
        socket2::Domain::for_address(addr),
        socket2::Type::STREAM,
        Some(socket2::Protocol::TCP),
    )
    .map_err(bind_err)?;
    socket.set_reuse_address(true).map_err(bind_err)?;
    socket.set_nonblocking(true).map_err(bind_err)?;
    if transparent {
        set_ip_transparent(&socket, addr.is_ipv6());
    }
    socket.bind(&addr.into()).map_err(bind_err)?;
    socket.listen(1024).map_err(bind_err)?;
    TcpListener::from_std(socket.into()).map_err(bind_err)
}

fn set_ip_transparent(socket: &socket2::Socket, v6: bool) {
    use std::os::fd::AsRawFd;
    let one: libc::c_int = 1;
    let (level, name) = if v6 {
        (libc::SOL_IPV6, libc::IPV6_TRANSPARENT)
    } else {
        (libc::SOL_IP, libc::IP_TRANSPARENT)
    };
    // SAFETY: setsockopt on a valid fd with a pointer to a live c_int. Failure
    // (no CAP_NET_ADMIN) only means TPROXY will not work; REDIRECT still does.
    unsafe {
        libc::setsockopt(
            socket.as_raw_fd(),
            level,
            name,
            (&one as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        );
    }
}

/// The destination a redirected connection was addressed to: from conntrack
/// (`SO_ORIGINAL_DST`, iptables/nft REDIRECT) or, for TPROXY, the socket's
/// own local address.
pub fn original_destination(tcp: &TcpStream) -> std::io::Result<SocketAddr> {
    use nix::sys::socket::{getsockopt, sockopt};
    let local = tcp.local_addr()?;
    let recovered = match local {
        SocketAddr::V4(_) => getsockopt(tcp, sockopt::OriginalDst).ok().map(|sin| {
            SocketAddr::new(
                std::net::Ipv4Addr::from(u32::from_be(sin.sin_addr.s_addr)).into(),
                u16::from_be(sin.sin_port),
            )
        }),
        SocketAddr::V6(_) => getsockopt(tcp, sockopt::Ip6tOriginalDst).ok().map(|sin6| {
            SocketAddr::new(
                std::net::Ipv6Addr::from(sin6.sin6_addr.s6_addr).into(),
                u16::from_be(sin6.sin6_port),
            )
        }),
    };
    Ok(recovered.unwrap_or(local))
}

/// Returns the allocator's free memory to the system (glibc's
/// `malloc_trim`, which unmaps the free pages of every arena).
pub fn release_free_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only walks the allocator's own free lists.
    unsafe {
        libc::malloc_trim(0);
    }
}
