//! Interception at the edge: the listening sockets (transparent ones with
//! `IP_TRANSPARENT` for TPROXY), a redirected flow's original destination,
//! the listener that redirected flows arrive on, closed while the tunnel is
//! down under `--fail open`, and a rate limit for the log lines of flows the
//! edge refuses.
//!
//! Under `--fail open` the edge does not connect flows itself while the
//! tunnel is down (its connections would leave from its own address and
//! escape the gateway's FORWARD policy). It closes its transparent listener
//! instead: the nftables `tproxy` statement matches only when a transparent
//! socket listens on its port, so new flows are routed by the kernel, under
//! the FORWARD policy, as if the rule were absent (iptables' `TPROXY` target
//! drops them and clients retry; NAT `REDIRECT` is refused with a reset).
//! The same holds when the edge is stopped or crashes.

use std::net::SocketAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tracing::{info, warn};

use crate::error::NodeError;

/// How long the listener waits before retrying to bind after a failure.
const REBIND_RETRY: Duration = Duration::from_secs(1);

/// Accepts transparently redirected connections on `listener` (bound to
/// `addr`) and hands each to `accepted` with its source. With
/// `close_while_down`, the listener is closed while `tunnel` holds `None`
/// and bound again once it holds a value. Returns when `tunnel`'s sender is
/// gone.
pub(crate) async fn serve<T>(
    listener: TcpListener,
    addr: SocketAddr,
    mut tunnel: watch::Receiver<Option<T>>,
    close_while_down: bool,
    mut accepted: impl FnMut(TcpStream, SocketAddr),
) {
    let mut listener = Some(listener);
    loop {
        if close_while_down && tunnel.borrow_and_update().is_none() {
            if listener.take().is_some() {
                info!(
                    "tunnel down: transparent listener {addr} closed until it is up (--fail open); \
                     new flows take the kernel's route under TPROXY rules"
                );
            }
            let gone = tunnel.wait_for(Option::is_some).await.map(drop).is_err();
            if gone {
                return;
            }
        }
        let open = match &listener {
            Some(open) => open,
            None => match listen_tcp(addr, true) {
                Ok(open) => {
                    info!("tunnel up: transparent listener {addr} open");
                    listener.insert(open)
                }
                Err(e) => {
                    warn!("{e}; retrying in {REBIND_RETRY:?}");
                    tokio::time::sleep(REBIND_RETRY).await;
                    continue;
                }
            },
        };
        tokio::select! {
            next = open.accept() => match next {
                Ok((tcp, source)) => accepted(tcp, source),
                Err(e) => {
                    // Out of file descriptors and the like: back off, keep serving.
                    warn!("accept on {addr} failed: {e}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            },
            gone = async { tunnel.wait_for(Option::is_none).await.map(drop).is_err() },
                if close_while_down =>
            {
                if gone {
                    return;
                }
            }
        }
    }
}

/// Lets through at most one log line per `interval`, counting the ones it
/// held back.
#[derive(Debug)]
pub(crate) struct LogLimit {
    interval: Duration,
    /// Lines let through per interval.
    burst: u64,
    /// When the current interval began, lines let through in it, and
    /// lines held back since the last one let through.
    state: Mutex<(Option<Instant>, u64, u64)>,
}

impl LogLimit {
    /// A limit of one line per `interval`.
    pub(crate) fn new(interval: Duration) -> LogLimit {
        LogLimit::with_burst(interval, 1)
    }

    /// A limit of `burst` lines per `interval`.
    pub(crate) fn with_burst(interval: Duration, burst: u64) -> LogLimit {
        LogLimit {
            interval,
            burst: burst.max(1),
            state: Mutex::new((None, 0, 0)),
        }
    }

    /// `Some(held back since the last line)` when a line may be written
    /// at `now`, `None` when it is held back.
    pub(crate) fn allow(&self, now: Instant) -> Option<u64> {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let (began, used, held) = &mut *state;
        match began {
            Some(at) if now.saturating_duration_since(*at) < self.interval => {
                if *used >= self.burst {
                    *held += 1;
                    return None;
                }
            }
            _ => {
                *began = Some(now);
                *used = 0;
            }
        }
        *used += 1;
        Some(std::mem::take(held))
    }
}

/// Connections a TCP listener queues before the accept loop takes them.
const LISTEN_BACKLOG: i32 = 4096;

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
    // Best effort: without it (no CAP_NET_ADMIN) TPROXY does not work,
    // REDIRECT still does.
    if transparent {
        set_ip_transparent(&socket, addr.is_ipv6());
    }
    socket.bind(&addr.into()).map_err(bind_err)?;
    // A branch's burst of new connections (a login, a browser's first
    // page) waits in this queue while the accept loop catches up; a full
    // queue drops the handshake's last ACK and costs the client a SYN-ACK
    // retransmission (1 s and more). The kernel caps it at
    // net.core.somaxconn (4096 by default).
    socket.listen(LISTEN_BACKLOG).map_err(bind_err)?;
    TcpListener::from_std(socket.into()).map_err(bind_err)
}

/// Sets `IP_TRANSPARENT` (`IPV6_TRANSPARENT`); false when refused (no
/// `CAP_NET_ADMIN`).
pub(crate) fn set_ip_transparent(socket: &socket2::Socket, v6: bool) -> bool {
    use std::os::fd::AsRawFd;
    let one: libc::c_int = 1;
    let (level, name) = if v6 {
        (libc::SOL_IPV6, libc::IPV6_TRANSPARENT)
    } else {
        (libc::SOL_IP, libc::IP_TRANSPARENT)
    };
    // SAFETY: setsockopt on a valid fd with a pointer to a live c_int.
    let rc = unsafe {
        libc::setsockopt(
            socket.as_raw_fd(),
            level,
            name,
            (&one as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    rc == 0
}

/// The destination a redirected connection was addressed to: from conntrack
/// (`SO_ORIGINAL_DST`, iptables/nft REDIRECT) or, for TPROXY, the socket's
/// own local address. An IPv4 flow on an IPv6 listener (`[::]:PORT`) comes
/// back as IPv4.
pub fn original_destination(tcp: &TcpStream) -> std::io::Result<SocketAddr> {
    use nix::sys::socket::{getsockopt, sockopt};
    let local = match tcp.local_addr()? {
        SocketAddr::V6(v6) => match v6.ip().to_ipv4_mapped() {
            Some(v4) => SocketAddr::new(v4.into(), v6.port()),
            None => SocketAddr::V6(v6),
        },
        v4 => v4,
    };
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_line_per_interval_and_the_held_back_are_counted() {
        let limit = LogLimit::new(Duration::from_secs(10));
        let t0 = Instant::now();
        assert_eq!(limit.allow(t0), Some(0));
        assert_eq!(limit.allow(t0 + Duration::from_secs(1)), None);
        assert_eq!(limit.allow(t0 + Duration::from_secs(9)), None);
        assert_eq!(limit.allow(t0 + Duration::from_secs(10)), Some(2));
        assert_eq!(limit.allow(t0 + Duration::from_secs(11)), None);
        assert_eq!(limit.allow(t0 + Duration::from_secs(30)), Some(1));
    }

    #[test]
    fn a_burst_per_interval_and_the_held_back_are_counted() {
        let limit = LogLimit::with_burst(Duration::from_secs(1), 3);
        let t0 = Instant::now();
        let ms = |n| t0 + Duration::from_millis(n);
        assert_eq!(limit.allow(ms(0)), Some(0));
        assert_eq!(limit.allow(ms(10)), Some(0));
        assert_eq!(limit.allow(ms(20)), Some(0));
        assert_eq!(limit.allow(ms(30)), None);
        assert_eq!(limit.allow(ms(999)), None);
        assert_eq!(limit.allow(ms(1000)), Some(2));
        assert_eq!(limit.allow(ms(1001)), Some(0));
    }

    #[tokio::test]
    async fn the_listener_is_closed_while_the_tunnel_is_down() {
        let listener = listen_tcp("127.0.0.1:0".parse().unwrap(), false).unwrap();
        let addr = listener.local_addr().unwrap();
        let (tunnel, rx) = watch::channel(Some(()));
        let (tx, mut got) = tokio::sync::mpsc::unbounded_channel();
        tokio::spawn(serve(listener, addr, rx, true, move |tcp, _| {
            let _ = tx.send(tcp);
        }));
        assert!(TcpStream::connect(addr).await.is_ok());
        assert!(got.recv().await.is_some());
        tunnel.send_replace(None);
        let refused = async {
            loop {
                if TcpStream::connect(addr).await.is_err() {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        };
        tokio::time::timeout(Duration::from_secs(5), refused)
            .await
            .expect("the listener stays open with the tunnel down");
        tunnel.send_replace(Some(()));
        let reopened = async {
            loop {
                if TcpStream::connect(addr).await.is_ok() {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        };
        tokio::time::timeout(Duration::from_secs(5), reopened)
            .await
            .expect("the listener reopens with the tunnel up");
    }
}
