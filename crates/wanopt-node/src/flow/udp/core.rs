//! The core's side of a UDP flow: a socket connected to the destination,
//! its datagrams into the tunnel, the tunnel's to it, until the edge ends
//! the stream or the flow is idle past the edge's timeout.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::net::UdpSocket;
use tracing::debug;

use wanopt_proto::{ReplyRepr, Status};

use super::edge::Unregister;
use super::{
    payload_buffer, receive, send_datagram, Activity, FlowEnd, Sink, TunnelFlows, UdpTotals,
    CORE_IDLE_GRACE,
};
use crate::flow::{Flow, FlowState};

thread_local! {
    /// Where a flow's datagram from its destination is read.
    static SCRATCH: std::cell::RefCell<Vec<u8>> = std::cell::RefCell::new(payload_buffer());
}

/// A socket bound to any local port and connected to `destination`; the
/// reply status when it cannot be made.
pub(crate) async fn connect(destination: SocketAddr) -> Result<UdpSocket, Status> {
    let any: IpAddr = match destination {
        SocketAddr::V4(_) => Ipv4Addr::UNSPECIFIED.into(),
        SocketAddr::V6(_) => Ipv6Addr::UNSPECIFIED.into(),
    };
    let socket = UdpSocket::bind(SocketAddr::new(any, 0))
        .await
        .map_err(|_| Status::Unavailable)?;
    socket
        .connect(destination)
        .await
        .map_err(|_| Status::Unreachable)?;
    Ok(socket)
}

/// What one flow needs from its tunnel.
pub(crate) struct CoreFlow {
    pub(crate) conn: quinn::Connection,
    pub(crate) flows: Arc<TunnelFlows>,
    pub(crate) totals: Arc<UdpTotals>,
    pub(crate) idle_timeout: Duration,
    /// Its datagrams are marked: the flow is real-time (the edge says).
    pub(crate) marked: bool,
}

impl CoreFlow {
    /// Carries the flow of the stream (`send`, `recv`) on `socket`: replies
    /// `Connected`, then runs until the edge ends the stream, the tunnel
    /// closes, or nothing moved for the idle timeout and its grace.
    pub(crate) async fn carry(
        self,
        mut send: quinn::SendStream,
        mut recv: quinn::RecvStream,
        socket: UdpSocket,
        flow: Arc<Flow>,
    ) {
        let socket = Arc::new(socket);
        let id = recv.id().index();
        let activity = Activity::new();
        let end = FlowEnd::new(
            Sink::Destination(socket.clone()),
            flow.clone(),
            activity.clone(),
        );
        // Datagrams that overtook the stream's header go first.
        for (seq, payload) in self.flows.register(id, end.clone()) {
            receive(&end, id, seq, &payload, &self.totals);
        }
        let _unregister = Unregister(self.flows.clone(), id);
        let reply = ReplyRepr {
            status: Status::Connected,
        }
        .emit();
        if send.write_all(&reply).await.is_err() {
            return;
        }
        flow.set_state(FlowState::Open);
        let seq = AtomicU32::new(0);
        let mut read_buf = [0u8; 64];
        let mut tick = tokio::time::interval(Duration::from_secs(1));
        let limit = self.idle_timeout + CORE_IDLE_GRACE;
        loop {
            tokio::select! {
                // No buffer is held while a flow waits: a datagram is read
                // into the thread's scratch buffer once one is ready (ten
                // thousand flows do not hold 64 KiB each).
                ready = socket.readable() => {
                    if ready.is_err() {
                        break;
                    }
                    let received = SCRATCH.with_borrow_mut(|buf| {
                        let n = socket.try_recv(buf)?;
                        let sent = send_datagram(&self.conn, id, &seq, &buf[..n], self.marked, &self.totals);
                        Ok::<_, std::io::Error>((n, sent))
                    });
                    match received {
                        Ok((n, sent)) => {
                            activity.touch();
                            if let Some(wan) = sent {
                                flow.to_client.fetch_add(n as u64, Ordering::Relaxed);
                                flow.wan_to_client.fetch_add(wan as u64, Ordering::Relaxed);
                                flow.datagrams.to_client.fetch_add(1, Ordering::Relaxed);
                            }
                        }
                        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                        // An ICMP error from the destination (port
                        // unreachable) reported on the connected socket:
                        // UDP goes on.
                        Err(e) => debug!("udp flow {}: {e}", flow.id),
                    }
                }
                read = recv.read(&mut read_buf) => {
                    if !matches!(read, Ok(Some(_))) {
                        break;
                    }
                }
                _ = tick.tick() => {
                    if activity.idle() >= limit {
                        debug!("udp flow {} idle for {limit:?}: ending it", flow.id);
                        break;
                    }
                }
                _ = self.conn.closed() => break,
                () = flow.revoked() => {
                    debug!("udp flow {}: no longer permitted after a reload: ending it", flow.id);
                    break;
                }
            }
        }
        let _ = send.finish();
        let received = end.received();
        debug!(
            "udp flow {} done: {} datagrams from the edge, {} lost",
            flow.id, received.received, received.lost
        );
    }
}
