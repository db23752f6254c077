//! The cache control stream of a tunnel: when a tunnel comes up each node
//! opens a unidirectional *control stream* and sends a hello
//! ([`wanopt_proto::ControlRepr::Hello`]): the services it accepts and its
//! cache's hello ([`wanopt_codec::Hello`]). The edge marks a flow `reduce`
//! only when the core's hello accepted it. After `wanopt cache clear` a node
//! sends a new hello asking for the peer's in return, so both ends forget
//! what they assumed about each other.

use std::sync::Arc;

use tokio::sync::{mpsc, oneshot};
use tracing::{debug, warn};

use wanopt_proto::{control_len, Control, ControlRepr, HeaderError, Services};

use super::peer_caches::PeerEntry;

/// The outcome of a tunnel's control exchange, known once the peer's first
/// hello arrived.
#[derive(Debug, Clone)]
pub struct PeerServices {
    /// Services the peer accepts on flows from us.
    pub accepts: Services,
    /// The address the peer advertises as its own (a core replica's).
    pub advertise: Option<std::net::SocketAddr>,
}

/// Why a tunnel's control stream failed (the tunnel is then closed).
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum ControlStreamError {
    /// This node could not open its side of the stream.
    #[error("cannot open the control stream: {0}")]
    Open(quinn::ConnectionError),
    /// The peer opened no control stream.
    #[error("no control stream from the peer: {0}")]
    Accept(quinn::ConnectionError),
    /// Reading the peer's messages failed.
    #[error("control stream: {0}")]
    Read(quinn::ReadExactError),
    /// Writing this node's messages failed.
    #[error("control stream: {0}")]
    Write(quinn::WriteError),
    /// The peer's message did not parse.
    #[error("bad control message: {0}")]
    Message(HeaderError),
    /// This node's hello could not be written out.
    #[error("{0}")]
    Hello(HeaderError),
    /// The peer's cache hello did not parse.
    #[error("bad cache hello from the peer: {0}")]
    CacheHello(wanopt_codec::control::HelloError),
}

/// The peer's cache hello; `None` when it is well formed but of another
/// codec version (the peer's flows then go without `reduce`).
fn peer_cache_hello(bytes: &[u8]) -> Result<Option<wanopt_codec::Hello>, ControlStreamError> {
    use wanopt_codec::{control::HelloError, frame::FrameError};
    match wanopt_codec::Hello::parse(bytes) {
        Ok((hello, _)) => Ok(Some(hello)),
        Err(HelloError::Frame(FrameError::UnsupportedVersion(_))) => Ok(None),
        Err(e) => Err(ControlStreamError::CacheHello(e)),
    }
}

/// Runs a connection's control stream: sends our hello, applies the peer's
/// hellos to `entry`'s cache (when both ends reduce), answers requests for
/// hellos and sends new ones after a local clear. `first` is completed
/// when the peer's first hello arrives. Every hello of ours carries
/// `advertise`. Returns when the connection ends.
pub async fn run_control(
    conn: quinn::Connection,
    entry: Option<Arc<PeerEntry>>,
    first: oneshot::Sender<PeerServices>,
    advertise: Option<std::net::SocketAddr>,
) {
    let id = conn.stable_id();
    let (tx, mut rx) = mpsc::unbounded_channel::<bool>();
    if let Some(entry) = &entry {
        entry
            .controls
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push((id, tx.clone()));
    }
    let remote = conn.remote_address();
    let result: Result<std::convert::Infallible, ControlStreamError> = async {
        let mut send = conn
            .open_uni()
            .await
            .map_err(ControlStreamError::Open)?;
        send_hello(&mut send, entry.as_deref(), false, advertise).await?;
        let mut recv = conn
            .accept_uni()
            .await
            .map_err(ControlStreamError::Accept)?;
        let mut first = Some(first);
        loop {
            tokio::select! {
                message = read_message(&mut recv) => {
                    let ControlRepr::Hello { mut services, reply_wanted, advertise: advertised, cache_hello } = message?;
                    if let Some(entry) = &entry {
                        if services.contains(Services::REDUCE) {
                            match peer_cache_hello(&cache_hello)? {
                                Some(hello) => {
                                    entry.cache.handle_hello(&hello);
                                    *entry.current.lock().unwrap_or_else(|e| e.into_inner()) =
                                        Some(id);
                                    debug!("peer {remote}: cache hello applied");
                                }
                                None => {
                                    warn!(
                                        "peer {remote} speaks another codec version (this node: {}); \
                                         its flows are not reduced: upgrade both nodes",
                                        wanopt_codec::frame::VERSION
                                    );
                                    services = services.without(Services::REDUCE);
                                }
                            }
                        }
                    }
                    if let Some(first) = first.take() {
                        let _ = first.send(PeerServices { accepts: services, advertise: advertised });
                    }
                    if reply_wanted {
                        send_hello(&mut send, entry.as_deref(), false, advertise).await?;
                    }
                }
                Some(reply_wanted) = rx.recv() => {
                    send_hello(&mut send, entry.as_deref(), reply_wanted, advertise).await?;
                }
            }
        }
    }
    .await;
    let Err(why) = result;
    if conn.close_reason().is_none() {
        warn!("control stream with {remote}: {why}; closing the tunnel");
        conn.close(
            quinn::VarInt::from_u32(wanopt_proto::codes::PROTOCOL),
            b"control stream failed",
        );
    }
    if let Some(entry) = &entry {
        entry
            .controls
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .retain(|(c, _)| *c != id);
        let mut current = entry.current.lock().unwrap_or_else(|e| e.into_inner());
        if *current == Some(id) {
            *current = None;
            entry.cache.handle_tunnel_down();
        }
    }
}

async fn send_hello(
    send: &mut quinn::SendStream,
    entry: Option<&PeerEntry>,
    reply_wanted: bool,
    advertise: Option<std::net::SocketAddr>,
) -> Result<(), ControlStreamError> {
    let mut cache_hello = Vec::new();
    let services = match entry {
        Some(entry) => {
            entry.cache.hello().emit(&mut cache_hello);
            Services::REDUCE
        }
        None => Services::default(),
    }
    .with(crate::flow::udp::HELLO_SERVICES);
    let message = ControlRepr::Hello {
        services,
        reply_wanted,
        advertise,
        cache_hello,
    }
    .emit()
    .map_err(ControlStreamError::Hello)?;
    send.write_all(&message)
        .await
        .map_err(ControlStreamError::Write)
}

async fn read_message(recv: &mut quinn::RecvStream) -> Result<ControlRepr, ControlStreamError> {
    use ControlStreamError::{Message, Read};
    let mut prefix = [0u8; 4];
    recv.read_exact(&mut prefix).await.map_err(Read)?;
    let length = control_len(&prefix).map_err(Message)?;
    let mut buf = vec![0u8; length];
    buf[..4].copy_from_slice(&prefix);
    recv.read_exact(&mut buf[4..]).await.map_err(Read)?;
    let view = Control::new_checked(&buf[..]).map_err(Message)?;
    ControlRepr::parse(&view).map_err(Message)
}

#[cfg(test)]
mod tests {
    use super::*;
    use wanopt_codec::{CacheConfig, CacheId, PeerCache};

    #[test]
    fn a_cache_hello_of_another_codec_version_turns_reduce_off_not_the_tunnel() {
        let dir = tempfile::tempdir().unwrap();
        let cache = PeerCache::open(dir.path(), CacheConfig::default(), CacheId([3; 16])).unwrap();
        let mut hello = Vec::new();
        cache.hello().emit(&mut hello);
        assert!(peer_cache_hello(&hello).unwrap().is_some());
        // The version byte follows the 4-byte header and the magic.
        hello[8] = wanopt_codec::frame::VERSION - 1;
        assert_eq!(peer_cache_hello(&hello), Ok(None));
        hello[4] = b'X';
        assert!(peer_cache_hello(&hello)
            .unwrap_err()
            .to_string()
            .contains("bad cache hello"));
    }
}
