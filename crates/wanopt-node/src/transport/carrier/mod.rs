//! The tunnel over TCP, for networks that block or police UDP: the same
//! QUIC connection (pinned keys, flows, classes, reduction, the control
//! stream), its packets framed on one TCP connection
//! ([`wanopt_proto::carrier`]) with the kernel's BBR and large buffers.
//!
//! Why QUIC on TCP rather than flows on TCP connections of their own:
//! everything above the socket stays one code path, so a tunnel over TCP
//! is the tunnel, with none of its features missing; the cost is
//! head-of-line blocking between flows while TCP repairs a loss, which a
//! path that forces TCP has anyway. Over TCP the tunnel's own congestion
//! controller steps aside ([`Unlimited`]): the kernel's controls the
//! path, and the socket makes quinn wait when TCP does.
//!
//! Each carrier connection is an endpoint of its own (one peer per
//! socket): the edge makes one per dial ([`connect`]), the core one per
//! accepted connection ([`accept`]).

mod controller;
pub mod settings;
mod socket;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tracing::debug;
use wanopt_proto::carrier::PREAMBLE;

pub use controller::Unlimited;
pub use socket::{CarrierSocket, Lost};

use super::tunnel::{self, TunnelError};

pub use settings::CARRIED_MTU;

/// Unsent bytes the kernel holds per carrier connection
/// (`TCP_NOTSENT_LOWAT`): enough to keep the path busy between two
/// wakeups, little enough that what quinn sends next (a control message,
/// an interactive flow) is not stuck behind a bulk flow's queue.
const NOTSENT_LOWAT: libc::c_int = 128 << 10;

/// The default TCP port of a core's carrier listener.
pub const DEFAULT_PORT: u16 = 443;

/// How long the core waits for the edge's preamble.
pub const PREAMBLE_TIMEOUT: Duration = Duration::from_secs(5);

/// Sets a carrier connection up: no Nagle (each write is a packet
/// batch), the kernel's BBR where it has it, large buffers, and little
/// unsent data in the kernel.
pub fn tune(stream: &TcpStream, buffer: usize) {
    use std::os::fd::AsRawFd;
    let _ = stream.set_nodelay(true);
    let fd = stream.as_raw_fd();
    let setopt = |level: libc::c_int, name: libc::c_int, value: &[u8]| {
        // SAFETY: setsockopt on a live fd with a pointer to `value`'s bytes.
        unsafe {
            libc::setsockopt(
                fd,
                level,
                name,
                value.as_ptr().cast(),
                value.len() as libc::socklen_t,
            ) == 0
        }
    };
    if !setopt(libc::IPPROTO_TCP, libc::TCP_CONGESTION, b"bbr") {
        debug!(
            "carrier: the kernel's bbr is not available; the system's default controls the carrier"
        );
    }
    setopt(
        libc::IPPROTO_TCP,
        libc::TCP_NOTSENT_LOWAT,
        &NOTSENT_LOWAT.to_ne_bytes(),
    );
    let size = libc::c_int::try_from(buffer).unwrap_or(libc::c_int::MAX);
    for (force, plain) in [
        (libc::SO_RCVBUFFORCE, libc::SO_RCVBUF),
        (libc::SO_SNDBUFFORCE, libc::SO_SNDBUF),
    ] {
        if !setopt(libc::SOL_SOCKET, force, &size.to_ne_bytes()) {
            setopt(libc::SOL_SOCKET, plain, &size.to_ne_bytes());
        }
    }
}

/// A quinn endpoint over one carrier socket.
fn endpoint(
    socket: Arc<CarrierSocket>,
    server: Option<quinn::ServerConfig>,
    reset: &ring::hmac::Key,
) -> Result<quinn::Endpoint, TunnelError> {
    let runtime = quinn::default_runtime()
        .ok_or_else(|| TunnelError::Tls("no async runtime for quinn".into()))?;
    let mut config = quinn::EndpointConfig::new(Arc::new(reset.clone()));
    config
        .max_udp_payload_size(CARRIED_MTU)
        .map_err(|e| TunnelError::Tls(format!("carrier mtu {CARRIED_MTU}: {e}")))?;
    config.cid_generator(|| {
        Box::new(quinn_proto::RandomConnectionIdGenerator::new(
            tunnel::TUNNEL_CID_LEN,
        ))
    });
    let local = quinn::AsyncUdpSocket::local_addr(&*socket)
        .unwrap_or_else(|_| SocketAddr::from(([0, 0, 0, 0], 0)));
    quinn::Endpoint::new_with_abstract_socket(config, server, socket, runtime).map_err(|source| {
        TunnelError::Bind {
            addr: local,
            source,
        }
    })
}

/// Why a carrier could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum CarrierError {
    /// The TCP connection failed (or took longer than allowed).
    #[error("tcp {addr}: {why}")]
    Connect {
        /// Where to.
        addr: SocketAddr,
        /// Why.
        why: String,
    },
    /// The endpoint could not be made.
    #[error(transparent)]
    Tunnel(#[from] TunnelError),
}

/// The edge's side: a TCP connection to `addr` within `patience`, the
/// preamble, and an endpoint over it (stateless resets keyed by `reset`,
/// socket buffers of `buffer` bytes); returns the endpoint and the
/// connection's loss.
pub async fn connect(
    addr: SocketAddr,
    patience: Duration,
    reset: &ring::hmac::Key,
    buffer: usize,
) -> Result<(quinn::Endpoint, Lost), CarrierError> {
    let failed = |why: String| CarrierError::Connect { addr, why };
    let mut stream = match tokio::time::timeout(patience, TcpStream::connect(addr)).await {
        Ok(Ok(stream)) => stream,
        Ok(Err(e)) => return Err(failed(e.to_string())),
        Err(_) => return Err(failed(format!("no connection within {patience:?}"))),
    };
    tune(&stream, buffer);
    stream
        .write_all(PREAMBLE)
        .await
        .map_err(|e| failed(e.to_string()))?;
    let (socket, lost) = CarrierSocket::new(stream, addr).map_err(|e| failed(e.to_string()))?;
    Ok((endpoint(socket, None, reset)?, lost))
}

/// The core's side of an accepted connection from `peer`: the edge's
/// preamble within [`PREAMBLE_TIMEOUT`], and an endpoint over it that
/// accepts with `server`.
pub async fn accept(
    mut stream: TcpStream,
    peer: SocketAddr,
    server: quinn::ServerConfig,
    reset: &ring::hmac::Key,
    buffer: usize,
) -> Result<(quinn::Endpoint, Lost), CarrierError> {
    let failed = |why: String| CarrierError::Connect { addr: peer, why };
    tune(&stream, buffer);
    let mut preamble = [0u8; PREAMBLE.len()];
    match tokio::time::timeout(PREAMBLE_TIMEOUT, stream.read_exact(&mut preamble)).await {
        Ok(Ok(_)) if &preamble == PREAMBLE => {}
        Ok(Ok(_)) => return Err(failed("not a wanopt edge (wrong preamble)".to_owned())),
        Ok(Err(e)) => return Err(failed(e.to_string())),
        Err(_) => return Err(failed(format!("no preamble within {PREAMBLE_TIMEOUT:?}"))),
    }
    let (socket, lost) = CarrierSocket::new(stream, peer).map_err(|e| failed(e.to_string()))?;
    Ok((endpoint(socket, Some(server), reset)?, lost))
}

/// Closes `conn` when its carrier is lost (the tunnel ends at once, with
/// the reason, rather than after the idle timeout).
pub fn close_when_lost(conn: quinn::Connection, lost: Lost) {
    tokio::spawn(async move {
        tokio::select! {
            why = lost.wait() => {
                debug!("carrier of the tunnel to {}: {why}", conn.remote_address());
                conn.close(
                    quinn::VarInt::from_u32(wanopt_proto::codes::CARRIER_LOST),
                    why.as_bytes(),
                );
            }
            _ = conn.closed() => {}
        }
    });
}
