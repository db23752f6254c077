//! The QUIC tunnel between two nodes: endpoint, TLS with pinned keys, and a
//! transport tuned for long fat pipes.
//!
//! One long-lived connection per peer carries every flow, one bidirectional
//! stream per TCP flow, so a new flow costs no handshake and no slow start.
//! Windows are sized to the bandwidth-delay product of the fastest path we
//! target (1 Gbit/s at 300 ms = 37.5 MB), path MTU discovery grows datagrams
//! to what the path allows, and quinn's UDP layer sends and receives in
//! batches (GSO/GRO) on Linux.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use quinn::congestion;
use quinn::crypto::rustls::{QuicClientConfig, QuicServerConfig};
use quinn::{IdleTimeout, MtuDiscoveryConfig, TransportConfig, VarInt};

use super::datagram::{DatagramHandle, DuplicationMode};
use super::identity::{PinnedKeys, PrivateKey, PublicKey};
use wanopt_proto::fec_stream::{self, FecMode};

/// ALPN of the wanopt tunnel; a peer speaking anything else is refused.
pub const ALPN: &[u8] = b"wanopt/1";

/// Congestion controller of the tunnel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Congestion {
    /// BBR (model-based; does not mistake random loss for congestion): our
    /// own [`super::bbr`], paced at its own rate.
    #[default]
    Bbr,
    /// CUBIC (loss-based).
    Cubic,
    /// NewReno (loss-based, for comparison).
    Newreno,
}

impl std::str::FromStr for Congestion {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "bbr" => Ok(Congestion::Bbr),
            "cubic" => Ok(Congestion::Cubic),
            "newreno" => Ok(Congestion::Newreno),
            other => Err(format!(
                "unknown congestion controller {other:?} (expected bbr, cubic or newreno)"
            )),
        }
    }
}

/// Tunables of the tunnel transport. Defaults suit 1 Gbit/s at 300 ms.
#[derive(Debug, Clone)]
pub struct TunnelTuning {
    /// Congestion controller.
    pub congestion: Congestion,
    /// Largest per-stream (per-flow) receive window in bytes: a flow's
    /// window starts at `stream_window_initial` and grows as its receiver
    /// reads, up to this.
    pub stream_window: u64,
    /// A flow's receive window when it opens.
    pub stream_window_initial: u64,
    /// The connection's base receive window, shared by flows beyond their
    /// own windows (the connection's window follows the open flows'
    /// windows on top of it), and the connection's send window.
    pub connection_window: u64,
    /// Bytes of flow receive window the node grants at once, over all its
    /// tunnels: a node-wide bound on what peers may have sent and the
    /// node's receivers not yet taken.
    pub window_budget: Arc<quinn_proto::ReceiveBudget>,
    /// Largest UDP payload path MTU discovery may try.
    pub max_mtu: u16,
    /// Socket send and receive buffer in bytes.
    pub socket_buffer: usize,
    /// Keepalive interval; the connection is declared dead after `idle_timeout`.
    pub keepalive: Duration,
    /// Silence after which the peer is considered gone.
    pub idle_timeout: Duration,
    /// When datagrams are repeated under QUIC (tail duplication).
    pub duplication: DuplicationMode,
    /// Continuous FEC under QUIC (`--fec`).
    pub fec: FecMode,
    /// Most repairs `auto` FEC may add, a share of the sources
    /// (`--fec-budget` / 100).
    pub fec_budget: f64,
}

impl Default for TunnelTuning {
    fn default() -> Self {
        TunnelTuning {
            congestion: Congestion::Bbr,
            // 1 Gbit/s x 300 ms = 37.5 MB; round up so one flow can fill it.
            stream_window: 48 << 20,
            // A flow starts with 4 MiB: the bandwidth-delay product of
            // 250 Mbit/s at 130 ms, so that a new flow on a warm tunnel
            // starts at the rate (with 1 MiB a 100 MB download at 250 Mbit/s
            // and 100 ms took 3% longer); the window then doubles per round
            // trip while its receiver keeps up. Each flow whose receiver
            // stops holds about this plus what it had read.
            stream_window_initial: 4 << 20,
            connection_window: 96 << 20,
            window_budget: Arc::new(quinn_proto::ReceiveBudget::new(DEFAULT_WINDOW_BUDGET)),
            // The UDP payload of a 1500-byte IPv4 MTU: WAN paths carry no
            // more. Larger values are for jumbo-frame or loopback paths (and,
            // with wanopt's BBR, 64 KiB datagrams on loopback stalled a bulk
            // test now and then).
            max_mtu: 1472,
            socket_buffer: 16 << 20,
            keepalive: Duration::from_secs(2),
            idle_timeout: Duration::from_secs(8),
            duplication: DuplicationMode::Auto,
            fec: FecMode::Auto,
            fec_budget: fec_stream::DEFAULT_BUDGET,
        }
    }
}

impl TunnelTuning {
    /// The largest datagram QUIC itself sends: `max_mtu`, less the room a
    /// repair datagram of FEC takes beyond the datagrams it protects when
    /// FEC may be on, or the room of a bond's header if larger (at least
    /// QUIC's 1200). A core cannot know before an edge's probes whether
    /// the edge bonds its paths, so the bond's room is always kept. What
    /// the node receives stays `max_mtu`.
    pub fn quic_mtu(&self) -> u16 {
        let fec = if self.fec == FecMode::Off {
            0
        } else {
            fec_stream::REPAIR_OVERHEAD
        };
        let room = fec.max(wanopt_proto::bond::DATA_HEADER_LEN) as u16;
        self.max_mtu.saturating_sub(room).max(1200)
    }

    fn transport(&self, over: Transport) -> TransportConfig {
        let mut t = TransportConfig::default();
        let clamp = |v: u64| VarInt::from_u64(v).unwrap_or(VarInt::MAX);
        t.stream_receive_window(clamp(self.stream_window))
            // A flow whose receiver does not read holds its own window and
            // never the connection's: stalled flows cannot stop the others.
            .window_autotune(Some(quinn_proto::WindowAutotune::new(
                clamp(self.stream_window_initial.min(self.stream_window)),
                self.window_budget.clone(),
            )))
            .receive_window(clamp(self.connection_window))
            .send_window(self.connection_window)
            // UDP flows' datagrams waiting for the congestion window: a
            // quarter MiB (quinn's default is 1 MiB, seconds of a voice
            // call's queue at a slow path); beyond it a flow's new
            // datagram is dropped and counted (`flow::udp`).
            .datagram_send_buffer_size(256 << 10)
            // While TCP flows have data waiting, UDP flows' datagrams take
            // at most half of what the tunnel sends (and TCP flows the
            // other half); either alone takes it all. Without a share,
            // quinn puts datagrams first in every packet, and a UDP flow
            // offered faster than the path carries it starves every TCP
            // flow (vendor/README.md, change 5).
            .datagram_share(Some(UDP_SHARE_PERCENT))
            // A UDP datagram that waited this long for the window (a dead
            // path, a collapsed rate) is dropped, not sent seconds late
            // ahead of fresh ones (change 6).
            .datagram_max_age(Some(UDP_MAX_QUEUE_DELAY))
            // Few until the peer has proved its key: quinn-proto allocates
            // the state of every stream the peer may open when the
            // connection is created, and 16,384 of them cost a core about
            // 0.6 MB per stranger's Initial (quinn-rs/quinn#2600; lazy
            // allocation is proposed upstream in #2601, not yet released).
            // The core raises the limit to `MAX_FLOW_STREAMS` once the
            // edge is authenticated ([`authenticated`]); the core opens
            // no streams to an edge.
            .max_concurrent_bidi_streams(VarInt::from_u32(PRE_AUTH_STREAMS))
            // One control stream each way (see `reduce`).
            .max_concurrent_uni_streams(VarInt::from_u32(1))
            .keep_alive_interval(Some(self.keepalive))
            .max_idle_timeout(IdleTimeout::try_from(self.idle_timeout).ok())
            .initial_mtu(1200);
        if over == Transport::Tcp {
            // TCP segments the packets and controls the rate (see
            // `super::carrier`).
            super::carrier::settings::over_tcp(&mut t, self.connection_window);
            return t;
        }
        let mut mtu = MtuDiscoveryConfig::default();
        mtu.upper_bound(self.quic_mtu());
        t.mtu_discovery_config(Some(mtu));
        match self.congestion {
            Congestion::Bbr => {
                t.congestion_controller_factory(Arc::new(super::bbr::BbrFactory::default()))
            }
            Congestion::Cubic => {
                t.congestion_controller_factory(Arc::new(congestion::CubicConfig::default()))
            }
            Congestion::Newreno => {
                t.congestion_controller_factory(Arc::new(congestion::NewRenoConfig::default()))
            }
        };
        t
    }
}

pub use quinn_proto::ReceiveBudget;

/// The share of the tunnel, in percent, that UDP flows' datagrams may
/// take while TCP flows' stream data waits.
pub const UDP_SHARE_PERCENT: u8 = 50;

/// How long a UDP flow's datagram may wait in the tunnel's send queue
/// before it is dropped (counted as `datagrams_expired`): about a router's
/// deepest queue; a call's audio later than that is useless.
pub const UDP_MAX_QUEUE_DELAY: Duration = Duration::from_millis(300);

/// Default node-wide bound on granted flow receive windows.
pub const DEFAULT_WINDOW_BUDGET: u64 = 1 << 30;

/// Flows (bidirectional streams) an edge may have open at once on one tunnel.
pub const MAX_FLOW_STREAMS: u32 = 16_384;

/// Bidirectional streams a peer may open before it has proved its key.
pub const PRE_AUTH_STREAMS: u32 = 16;

/// Lets an authenticated edge open up to [`MAX_FLOW_STREAMS`] flows at once
/// (the limit goes out in a MAX_STREAMS frame, ahead of the control
/// stream's hello that tells the edge the tunnel is up).
pub fn authenticated(conn: &quinn::Connection) {
    conn.set_max_concurrent_bi_streams(VarInt::from_u32(MAX_FLOW_STREAMS));
}

/// Errors setting up the tunnel endpoint.
#[derive(Debug, thiserror::Error)]
pub enum TunnelError {
    /// The UDP socket could not be bound.
    #[error("cannot bind UDP {addr}: {source}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// The I/O error.
        source: std::io::Error,
    },
    /// TLS configuration failed.
    #[error("tls setup failed: {0}")]
    Tls(String),
    /// The key could not be turned into a certificate.
    #[error(transparent)]
    Key(#[from] super::identity::KeyError),
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// What carries the tunnel's QUIC packets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Transport {
    /// UDP datagrams (under the datagram layer: duplication, FEC, paths).
    Quic,
    /// One TCP connection (`super::carrier`), where UDP is blocked or
    /// policed.
    Tcp,
}

impl Transport {
    /// Its name in status, metrics and logs.
    pub fn name(self) -> &'static str {
        match self {
            Transport::Quic => "quic",
            Transport::Tcp => "tcp",
        }
    }
}

/// The client side (edge) QUIC configuration, for tunnels `over` UDP or
/// TCP.
pub fn client_config(
    key: &PrivateKey,
    peers: &[PublicKey],
    tuning: &TunnelTuning,
    over: Transport,
) -> Result<quinn::ClientConfig, TunnelError> {
    let provider = provider();
    let (cert, private) = key.certificate()?;
    let mut tls = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(&[&rustls::version::TLS13])
        .map_err(|e| TunnelError::Tls(e.to_string()))?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(PinnedKeys::new(
            peers.iter().copied(),
            provider,
        )))
        .with_client_auth_cert(vec![cert], private)
        .map_err(|e| TunnelError::Tls(e.to_string()))?;
    tls.alpn_protocols = vec![ALPN.to_vec()];
    let quic = QuicClientConfig::try_from(tls).map_err(|e| TunnelError::Tls(e.to_string()))?;
    let mut config = quinn::ClientConfig::new(Arc::new(quic));
    config.transport_config(Arc::new(tuning.transport(over)));
    Ok(config)
}

/// The server side (core) QUIC configuration, for tunnels `over` UDP or
/// TCP.
pub fn server_config(
    key: &PrivateKey,
    peers: &[PublicKey],
    tuning: &TunnelTuning,
    over: Transport,
) -> Result<quinn::ServerConfig, TunnelError> {
    let provider = provider();
    let (cert, private) = key.certificate()?;
    let mut tls = rustls::ServerConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(&[&rustls::version::TLS13])
        .map_err(|e| TunnelError::Tls(e.to_string()))?
        .with_client_cert_verifier(Arc::new(PinnedKeys::new(peers.iter().copied(), provider)))
        .with_single_cert(vec![cert], private)
        .map_err(|e| TunnelError::Tls(e.to_string()))?;
    tls.alpn_protocols = vec![ALPN.to_vec()];
    tls.max_early_data_size = 0;
    let quic = QuicServerConfig::try_from(tls).map_err(|e| TunnelError::Tls(e.to_string()))?;
    let mut config = quinn::ServerConfig::with_crypto(Arc::new(quic));
    config.transport_config(Arc::new(tuning.transport(over)));
    // A Retry round trip is asked only under load (see `super::handshakes`).
    config.migration(true);
    Ok(config)
}

/// Length of the connection IDs a tunnel endpoint issues.
pub const TUNNEL_CID_LEN: usize = 4;

/// Binds a UDP socket with large buffers and wraps it in a quinn endpoint,
/// with the datagram layer `datagrams` underneath (see [`super::datagram`]); its stateless
/// resets are keyed by `key` ([`PrivateKey::reset_key`]).
pub fn endpoint(
    bind: SocketAddr,
    server: Option<quinn::ServerConfig>,
    key: &PrivateKey,
    tuning: &TunnelTuning,
    datagrams: &DatagramHandle,
) -> Result<quinn::Endpoint, TunnelError> {
    let bind_err = |source| TunnelError::Bind { addr: bind, source };
    let domain = socket2::Domain::for_address(bind);
    let socket = socket2::Socket::new(domain, socket2::Type::DGRAM, Some(socket2::Protocol::UDP))
        .map_err(bind_err)?;
    if bind.is_ipv6() {
        // Best effort: dual-stack where the system allows it.
        let _ = socket.set_only_v6(false);
    }
    set_buffers(&socket, tuning.socket_buffer);
    socket.bind(&bind.into()).map_err(bind_err)?;
    let socket: std::net::UdpSocket = socket.into();
    let runtime = quinn::default_runtime()
        .ok_or_else(|| TunnelError::Tls("no async runtime for quinn".into()))?;
    let mut config = quinn::EndpointConfig::new(Arc::new(key.reset_key()));
    config
        .max_udp_payload_size(tuning.max_mtu.max(1200))
        .map_err(|e| TunnelError::Tls(format!("max mtu {}: {e}", tuning.max_mtu)))?;
    // Peers must keep QUIC's fixed bit set in what they send us (RFC 9287
    // greasing is quinn's default): a datagram with it clear is then never
    // a QUIC packet, which is how parity datagrams are told apart.
    config.grease_quic_bit(false);
    // Every packet carries its receiver's connection ID: 4 bytes instead
    // of quinn's 8 take 4 bytes off each datagram (1.1 KB of a 1 MB office
    // file's download on the 3G lab link, 4 ms at 2 Mbit/s). Four random
    // bytes leave room for any number of tunnels a node holds, and quinn
    // draws again on a collision.
    config.cid_generator(|| {
        Box::new(quinn_proto::RandomConnectionIdGenerator::new(
            TUNNEL_CID_LEN,
        ))
    });
    datagrams.set_fec(tuning.fec, tuning.fec_budget);
    let socket = datagrams.wrap(runtime.wrap_udp_socket(socket).map_err(bind_err)?);
    quinn::Endpoint::new_with_abstract_socket(config, server, socket, runtime).map_err(bind_err)
}

/// Asks for `size`-byte socket buffers, past `net.core.*mem_max` when we are
/// allowed to (root), else as large as the system permits.
fn set_buffers(socket: &socket2::Socket, size: usize) {
    use std::os::fd::AsRawFd;
    let fd = socket.as_raw_fd();
    let value = libc::c_int::try_from(size).unwrap_or(libc::c_int::MAX);
    for (force, plain) in [
        (libc::SO_RCVBUFFORCE, libc::SO_RCVBUF),
        (libc::SO_SNDBUFFORCE, libc::SO_SNDBUF),
    ] {
        // SAFETY: setsockopt on a valid fd with a pointer to a live c_int.
        let forced = unsafe {
            libc::setsockopt(
                fd,
                libc::SOL_SOCKET,
                force,
                (&value as *const libc::c_int).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            )
        } == 0;
        if !forced {
            // SAFETY: as above.
            unsafe {
                libc::setsockopt(
                    fd,
                    libc::SOL_SOCKET,
                    plain,
                    (&value as *const libc::c_int).cast(),
                    std::mem::size_of::<libc::c_int>() as libc::socklen_t,
                );
            }
        }
    }
}
