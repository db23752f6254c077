//! A core's tunnels carried on TCP (`crate::transport::carrier`): the
//! listener, and each accepted connection's preamble, handshake and
//! tunnel.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpStream;
use tracing::{debug, info, warn};
use wanopt_proto::codes;

use super::Core;
use crate::error::NodeError;
use crate::transport::carrier;
use crate::transport::tunnel::Transport;

/// Where a core accepts tunnels carried on TCP (`crate::transport::carrier`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ListenTcp {
    /// Nowhere (`--listen-tcp off`).
    Off,
    /// The default: the UDP listen address's IP on port 443; a core that
    /// cannot bind it says so and accepts tunnels on UDP alone.
    Default(SocketAddr),
    /// As given: a core that cannot bind it does not start.
    At(SocketAddr),
}

impl ListenTcp {
    /// The default for a core listening on UDP at `listen`.
    pub fn default_for(listen: SocketAddr) -> ListenTcp {
        ListenTcp::Default(SocketAddr::new(listen.ip(), carrier::DEFAULT_PORT))
    }
}

/// Carrier connections a core sets up at once (before their tunnel's
/// handshake is admitted); more wait in the kernel's backlog.
pub(super) const CARRIER_SETUPS: usize = 64;

/// How long a carrier connection may take to start its handshake.
const CARRIER_HANDSHAKE: Duration = Duration::from_secs(10);

impl Core {
    /// Accepts carrier connections (tunnels over TCP) until the node
    /// stops.
    pub(super) async fn serve_carriers(self: Arc<Self>, listener: tokio::net::TcpListener) {
        loop {
            let (stream, peer) = match listener.accept().await {
                Ok(accepted) => accepted,
                Err(e) => {
                    warn!("tcp tunnel listener: {e}");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            };
            let Ok(setup) = self.carrier_setups.clone().try_acquire_owned() else {
                debug!("tcp tunnel from {peer} refused: {CARRIER_SETUPS} others are being set up");
                continue;
            };
            tokio::spawn(self.clone().carrier(stream, peer, setup));
        }
    }

    /// One carrier connection: the edge's preamble, its tunnel's
    /// handshake, then the tunnel; the tunnel closes when the connection
    /// is lost.
    async fn carrier(
        self: Arc<Self>,
        stream: TcpStream,
        peer: SocketAddr,
        setup: tokio::sync::OwnedSemaphorePermit,
    ) {
        let server = self
            .tcp_server
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        let (endpoint, lost) = match carrier::accept(
            stream,
            peer,
            server,
            &self.config.key.reset_key(),
            self.config.tuning.socket_buffer,
        )
        .await
        {
            Ok(carrier) => carrier,
            Err(e) => {
                debug!("tcp tunnel refused: {e}");
                return;
            }
        };
        let incoming = match tokio::time::timeout(CARRIER_HANDSHAKE, endpoint.accept()).await {
            Ok(Some(incoming)) => incoming,
            _ => {
                debug!("tcp tunnel from {peer}: no handshake within {CARRIER_HANDSHAKE:?}");
                return;
            }
        };
        let Some((incoming, handshake)) = self.state.handshakes.admit(incoming) else {
            return;
        };
        drop(setup);
        let closer = {
            let endpoint = endpoint.clone();
            tokio::spawn(async move {
                let why = lost.wait().await;
                endpoint.close(quinn::VarInt::from_u32(codes::CARRIER_LOST), why.as_bytes());
            })
        };
        self.connection(incoming, handshake, Transport::Tcp).await;
        closer.abort();
    }
}

/// Binds the carrier listener `at` asks for: `None` when off, or when the
/// default address cannot be bound (said in the log); an error when a
/// given address cannot.
pub(super) fn bind(at: ListenTcp) -> Result<Option<tokio::net::TcpListener>, NodeError> {
    let (addr, required) = match at {
        ListenTcp::Off => return Ok(None),
        ListenTcp::Default(addr) => (addr, false),
        ListenTcp::At(addr) => (addr, true),
    };
    let bind = || -> std::io::Result<tokio::net::TcpListener> {
        let socket = socket2::Socket::new(
            socket2::Domain::for_address(addr),
            socket2::Type::STREAM,
            Some(socket2::Protocol::TCP),
        )?;
        if addr.is_ipv6() {
            let _ = socket.set_only_v6(false);
        }
        socket.set_reuse_address(true)?;
        socket.set_nonblocking(true)?;
        socket.bind(&addr.into())?;
        socket.listen(1024)?;
        tokio::net::TcpListener::from_std(socket.into())
    };
    match bind() {
        Ok(listener) => {
            info!("core listening on tcp {addr} (tunnels where UDP is blocked)");
            Ok(Some(listener))
        }
        Err(source) if required => Err(NodeError::Bind {
            what: "tunnels over TCP (--listen-tcp)",
            addr,
            source,
        }),
        Err(e) => {
            warn!("no tunnels over TCP: cannot listen on tcp {addr} ({e}); give --listen-tcp ADDR:PORT, or --listen-tcp off to silence this");
            Ok(None)
        }
    }
}

/// Answers an edge's probe stream (`Services::PROBE`): `Connected`,
/// then filler for `PROBE_SPAN_MS`, as fast as the tunnel takes it, then
/// the stream's end. Nothing is connected and no flow is counted.
pub(super) async fn answer_probe(mut send: quinn::SendStream, mut recv: quinn::RecvStream) {
    let reply = wanopt_proto::ReplyRepr {
        status: wanopt_proto::Status::Connected,
    }
    .emit();
    let _ = recv.stop(quinn::VarInt::from_u32(0));
    if send.write_all(&reply).await.is_err() {
        return;
    }
    let filler = bytes::Bytes::from(vec![0u8; 64 << 10]);
    let until =
        tokio::time::Instant::now() + Duration::from_millis(wanopt_proto::stream::PROBE_SPAN_MS);
    while tokio::time::Instant::now() < until {
        match tokio::time::timeout_at(until, send.write_chunk(filler.clone())).await {
            Ok(Ok(())) => {}
            Ok(Err(_)) => return,
            Err(_) => break,
        }
    }
    let _ = send.finish();
}
