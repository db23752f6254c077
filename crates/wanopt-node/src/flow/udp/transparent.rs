//! Transparent UDP at the edge (`--transparent-udp LISTEN`): the firewall
//! sends the clients' datagrams to LISTEN with TPROXY, and each keeps its
//! original destination, read from `IP_ORIGDSTADDR` (`IPV6_ORIGDSTADDR`).
//! A flow is one (client, original destination) pair, carried to that
//! destination through the core like a `--forward-udp` flow.
//!
//! Each flow gets its own socket, bound to the original destination
//! (`IP_TRANSPARENT` allows the foreign address) and connected to the
//! client: replies leave from the address the client sent to, and the
//! kernel's TPROXY lookup delivers the client's later datagrams to that
//! socket directly (a connected socket is an established match), so the
//! listening socket sees only each flow's first datagrams.
//!
//! `--optimize` applies: a datagram to a destination it does not select is
//! dropped and counted (`unmatched`); the printed firewall rules divert
//! only what it selects. Under `--fail open` the listening socket is closed
//! while the tunnel is down, so the nftables `tproxy` rule stops matching
//! and the kernel routes new flows itself.

use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use nix::sys::socket::{setsockopt, sockopt};
use tokio::io::Interest;
use tokio::net::UdpSocket;
use tracing::{debug, info, warn};

use wanopt_proto::Target;

use super::edge::{Dispatch, UdpEdge};
use super::payload_buffer;
use super::recv::{ask_dscp, recv_meta};
use crate::error::NodeError;
use crate::intercept::set_ip_transparent;

/// Binds the transparent UDP socket at `addr`: `IP_TRANSPARENT` (TPROXY
/// delivers to it only with it, so it must be granted: `CAP_NET_ADMIN`)
/// and the original destination of every datagram.
pub fn bind(addr: SocketAddr) -> Result<std::net::UdpSocket, NodeError> {
    let what = "transparent udp socket";
    let bind_err = |source| NodeError::Bind { what, addr, source };
    let socket = new_transparent(addr).map_err(bind_err)?;
    let orig = match addr {
        SocketAddr::V4(_) => setsockopt(&socket, sockopt::Ipv4OrigDstAddr, &true),
        SocketAddr::V6(_) => {
            // An IPv6 socket takes IPv4 datagrams too, when the kernel
            // allows the IPv4 option on it.
            let _ = setsockopt(&socket, sockopt::Ipv4OrigDstAddr, &true);
            setsockopt(&socket, sockopt::Ipv6OrigDstAddr, &true)
        }
    };
    orig.map_err(|e| bind_err(e.into()))?;
    ask_dscp(&socket, addr.is_ipv6());
    socket.bind(&addr.into()).map_err(bind_err)?;
    Ok(socket.into())
}

/// A non-blocking UDP socket of `addr`'s family with `SO_REUSEADDR` and
/// `IP_TRANSPARENT`, not yet bound.
fn new_transparent(addr: SocketAddr) -> std::io::Result<socket2::Socket> {
    let socket = socket2::Socket::new(
        socket2::Domain::for_address(addr),
        socket2::Type::DGRAM,
        Some(socket2::Protocol::UDP),
    )?;
    socket.set_reuse_address(true)?;
    socket.set_nonblocking(true)?;
    if !set_ip_transparent(&socket, addr.is_ipv6()) {
        return Err(std::io::Error::new(
            std::io::ErrorKind::PermissionDenied,
            "IP_TRANSPARENT refused: TPROXY needs CAP_NET_ADMIN (run as root or grant it)",
        ));
    }
    Ok(socket)
}

/// A flow's own socket: bound to the client's original destination
/// `local`, connected to `client`.
fn reply_socket(local: SocketAddr, client: SocketAddr) -> std::io::Result<UdpSocket> {
    let socket = new_transparent(local)?;
    socket.bind(&local.into())?;
    socket.connect(&client.into())?;
    UdpSocket::from_std(socket.into())
}

/// Serves the transparent UDP socket until the node stops; with
/// `close_while_down`, the socket is closed while the tunnel is down and
/// bound again when it is back.
pub(crate) async fn serve(edge: Arc<UdpEdge>, socket: std::net::UdpSocket, close_while_down: bool) {
    let listen = match socket.local_addr() {
        Ok(addr) => addr,
        Err(e) => {
            warn!("transparent udp socket: {e}");
            return;
        }
    };
    let dispatch = Dispatch::default();
    let mut tunnel = edge.any_up.clone();
    let mut socket = Some(socket);
    loop {
        if close_while_down && tunnel.borrow_and_update().is_none() {
            if socket.take().is_some() {
                info!("transparent udp {listen}: closed while the tunnel is down (--fail open)");
            }
            if tunnel.changed().await.is_err() {
                return;
            }
            continue;
        }
        let std_socket = match socket.take() {
            Some(s) => s,
            None => match bind(listen) {
                Ok(s) => s,
                Err(e) => {
                    warn!("{e}; trying again in 1 s");
                    tokio::time::sleep(Duration::from_secs(1)).await;
                    continue;
                }
            },
        };
        let Ok(live) = UdpSocket::from_std(std_socket) else {
            tokio::time::sleep(Duration::from_secs(1)).await;
            continue;
        };
        tokio::select! {
            () = receive(&edge, &live, listen, &dispatch) => return,
            _ = down(&mut tunnel), if close_while_down => {}
        }
    }
}

/// Whether a datagram's destination `orig` is the transparent socket
/// itself (sent to it, not diverted to it): its port, at its address or
/// any when it listens on all.
fn is_itself(orig: SocketAddr, listen: SocketAddr) -> bool {
    orig.port() == listen.port() && (listen.ip().is_unspecified() || orig.ip() == listen.ip())
}

/// Resolves when the tunnel goes down (or its sender is gone).
async fn down(tunnel: &mut tokio::sync::watch::Receiver<Option<()>>) {
    while tunnel.borrow_and_update().is_some() {
        if tunnel.changed().await.is_err() {
            return;
        }
    }
}

/// Receives on `socket` and hands each datagram to its flow.
async fn receive(edge: &Arc<UdpEdge>, socket: &UdpSocket, listen: SocketAddr, dispatch: &Dispatch) {
    let mut buf = payload_buffer();
    loop {
        let read = socket
            .async_io(Interest::READABLE, || recv_meta(socket, &mut buf))
            .await;
        let got = match read {
            Ok(datagram) => datagram,
            Err(e) => {
                debug!("transparent udp: {e}");
                tokio::time::sleep(Duration::from_millis(10)).await;
                continue;
            }
        };
        let client = got.client;
        let Some(orig) = got.orig.filter(|&o| !is_itself(o, listen)) else {
            edge.state.udp.unmatched.fetch_add(1, Ordering::Relaxed);
            continue;
        };
        let optimize = &edge.policy.get().optimize;
        if !optimize.is_empty() && !optimize.matches(orig) {
            edge.state.udp.unmatched.fetch_add(1, Ordering::Relaxed);
            continue;
        }
        let payload = buf[..got.len].to_vec();
        dispatch.datagram(
            edge,
            (client, orig),
            &Target::Addr(orig),
            payload,
            got.dscp,
            || match reply_socket(orig, client) {
                Ok(s) => Some((Arc::new(s), true)),
                Err(e) => {
                    debug!("transparent udp {client} -> {orig}: {e}");
                    None
                }
            },
        );
    }
}
