//! Why a flow ended abnormally, what each side is told, and how a node
//! reports it: every reset is counted by reason ([`ResetReason`], in
//! `status` and `/metrics`), and one that comes from a codec or protocol
//! error (this node's or the peer's) is a WARN line naming the flow, the
//! reason and what the peer and the LAN side were sent.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::net::TcpStream;
use tracing::{debug, warn};

use wanopt_proto::codes;

use crate::flow::Flow;

/// Why a flow ended abnormally.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Abort {
    /// The local TCP peer reset or failed.
    Local(String),
    /// The tunnel side reset the stream, stopped reading, or the tunnel died.
    Remote(String),
    /// The core could not or would not connect to the destination.
    Refused(wanopt_proto::Status),
    /// The peer's frames did not decode, or its decoder asked for chunks
    /// this node cannot supply: the peer is sent [`codes::CODEC_ERROR`].
    Codec(String),
    /// The peer reset the flow with [`codes::CODEC_ERROR`]: it could not
    /// decode this node's frames (its own log says why).
    PeerCodec,
    /// The flow carried no byte either way for the node's
    /// `--flow-idle-timeout`.
    Idle,
}

impl std::fmt::Display for Abort {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Abort::Local(why) => write!(f, "local side: {why}"),
            Abort::Remote(why) => write!(f, "tunnel side: {why}"),
            Abort::Refused(status) => write!(f, "{status}"),
            Abort::Codec(why) => write!(f, "codec error: {why}"),
            Abort::PeerCodec => write!(
                f,
                "the peer could not decode this node's data (its log says why)"
            ),
            Abort::Idle => write!(f, "idle for --flow-idle-timeout"),
        }
    }
}

impl Abort {
    /// A failed read of the tunnel stream.
    pub fn from_read(e: quinn::ReadError) -> Abort {
        match e {
            quinn::ReadError::Reset(code) if code.into_inner() == u64::from(codes::CODEC_ERROR) => {
                Abort::PeerCodec
            }
            e => Abort::Remote(e.to_string()),
        }
    }

    /// A failed write to the tunnel stream.
    pub fn from_write(e: quinn::WriteError) -> Abort {
        match e {
            quinn::WriteError::Stopped(code)
                if code.into_inner() == u64::from(codes::CODEC_ERROR) =>
            {
                Abort::PeerCodec
            }
            e => Abort::Remote(e.to_string()),
        }
    }

    /// How the flow's stream is reset and stopped.
    pub fn stream_code(&self) -> u32 {
        match self {
            Abort::Codec(_) => codes::CODEC_ERROR,
            _ => codes::TCP_RESET,
        }
    }

    /// The counted reason; `None` for a refusal (counted as refused).
    pub fn reason(&self) -> Option<ResetReason> {
        match self {
            Abort::Local(_) => Some(ResetReason::Lan),
            Abort::Remote(_) => Some(ResetReason::Tunnel),
            Abort::Refused(_) => None,
            Abort::Codec(_) => Some(ResetReason::Codec),
            Abort::PeerCodec => Some(ResetReason::PeerCodec),
            Abort::Idle => Some(ResetReason::Idle),
        }
    }
}

/// Why flows were reset, as counted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResetReason {
    /// The LAN side (client or server) reset the connection or failed.
    Lan,
    /// The peer reset the stream (its LAN side did), stopped reading, or
    /// the tunnel was lost.
    Tunnel,
    /// This node could not decode the peer's data, or cannot supply the
    /// chunks the peer's decoder asked for.
    Codec,
    /// The peer could not decode this node's data.
    PeerCodec,
    /// The flow carried no byte for the node's `--flow-idle-timeout`.
    Idle,
}

impl ResetReason {
    /// Every reason, in the order of [`ResetCounters`].
    pub const ALL: [ResetReason; 5] = [
        ResetReason::Lan,
        ResetReason::Tunnel,
        ResetReason::Codec,
        ResetReason::PeerCodec,
        ResetReason::Idle,
    ];

    /// The name in `status` and the `reason` label in `/metrics`.
    pub fn name(self) -> &'static str {
        match self {
            ResetReason::Lan => "lan",
            ResetReason::Tunnel => "tunnel",
            ResetReason::Codec => "codec",
            ResetReason::PeerCodec => "peer_codec",
            ResetReason::Idle => "idle",
        }
    }

    /// A codec or protocol error: an operator must hear of it.
    pub fn is_error(self) -> bool {
        matches!(self, ResetReason::Codec | ResetReason::PeerCodec)
    }
}

/// Flows reset since start, by reason.
#[derive(Debug, Default)]
pub struct ResetCounters([AtomicU64; ResetReason::ALL.len()]);

impl ResetCounters {
    /// Counts one reset.
    pub fn count(&self, reason: ResetReason) {
        self.0[reason as usize].fetch_add(1, Ordering::Relaxed);
    }

    /// Each reason with its count.
    pub fn snapshot(&self) -> Vec<(ResetReason, u64)> {
        ResetReason::ALL
            .iter()
            .map(|&r| (r, self.0[r as usize].load(Ordering::Relaxed)))
            .collect()
    }
}

/// Counts a flow's abnormal end and logs it: a WARN line for a codec or
/// protocol error (with the flow, the reason, and what the peer and the
/// LAN side were sent), DEBUG for a side that simply reset. A refusal is
/// the caller's to report.
pub fn report(counters: &ResetCounters, flow: &Flow, lan: &str, abort: &Abort) {
    let Some(reason) = abort.reason() else {
        return;
    };
    counters.count(reason);
    let (id, source, dest) = (flow.id, flow.source, &flow.destination);
    if reason.is_error() {
        let sent = match abort {
            Abort::Codec(_) => "the peer a stream reset (codec error)",
            _ => "the peer a stream reset",
        };
        warn!("flow {id} {source} -> {dest} reset: {abort}; sent {sent} and the {lan} a TCP reset");
    } else {
        debug!("flow {id} {source} -> {dest} reset: {abort}");
    }
}

/// Resets a TCP connection: linger 0 makes the close send RST.
pub fn reset_tcp(tcp: TcpStream) {
    let _ = socket2::SockRef::from(&tcp).set_linger(Some(Duration::ZERO));
    drop(tcp);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codec_errors_reset_the_peer_with_their_own_code_and_the_peer_knows_it() {
        let ours = Abort::Codec("pieces of a chunk out of order".into());
        assert_eq!(ours.stream_code(), codes::CODEC_ERROR);
        assert_eq!(ours.reason(), Some(ResetReason::Codec));
        let code = quinn::VarInt::from_u32(ours.stream_code());
        assert_eq!(
            Abort::from_read(quinn::ReadError::Reset(code)),
            Abort::PeerCodec
        );
        assert_eq!(
            Abort::from_write(quinn::WriteError::Stopped(code)),
            Abort::PeerCodec
        );
        // A LAN side's reset crosses as before.
        let lan = Abort::Local("connection reset by peer".into());
        assert_eq!(lan.stream_code(), codes::TCP_RESET);
        let tcp = quinn::VarInt::from_u32(codes::TCP_RESET);
        assert_eq!(
            Abort::from_read(quinn::ReadError::Reset(tcp)).reason(),
            Some(ResetReason::Tunnel)
        );
        assert!(ResetReason::PeerCodec.is_error() && !ResetReason::Tunnel.is_error());
    }

    #[test]
    fn resets_are_counted_by_reason() {
        let counters = ResetCounters::default();
        counters.count(ResetReason::Codec);
        counters.count(ResetReason::Codec);
        counters.count(ResetReason::Lan);
        let counts: Vec<(&str, u64)> = counters
            .snapshot()
            .into_iter()
            .map(|(r, n)| (r.name(), n))
            .collect();
        assert_eq!(
            counts,
            [
                ("lan", 1),
                ("tunnel", 0),
                ("codec", 2),
                ("peer_codec", 0),
                ("idle", 0)
            ]
        );
    }

    /// What `report` logs for `abort`, at which level.
    fn logged(abort: &Abort) -> String {
        use std::sync::{Arc, Mutex};
        #[derive(Clone, Default)]
        struct Sink(Arc<Mutex<Vec<u8>>>);
        impl std::io::Write for Sink {
            fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
                self.0.lock().unwrap().extend_from_slice(buf);
                Ok(buf.len())
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let sink = Sink::default();
        let writer = sink.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_max_level(tracing::Level::DEBUG)
            .with_ansi(false)
            .with_writer(move || writer.clone())
            .finish();
        let table = std::sync::Arc::new(crate::flow::FlowTable::default());
        let guard = table.start(
            Some(7),
            "10.1.0.2:50000".parse().unwrap(),
            "10.2.0.5:445".into(),
            vec!["tcp-opt", "reduce"],
            None,
        );
        let counters = ResetCounters::default();
        tracing::subscriber::with_default(subscriber, || {
            report(&counters, &guard.flow, "client", abort)
        });
        let text = String::from_utf8(sink.0.lock().unwrap().clone()).unwrap();
        text
    }

    #[test]
    fn a_codec_error_is_a_warning_with_the_flow_the_reason_and_what_was_sent() {
        let line = logged(&Abort::Codec(
            "bad data from the peer: pieces of a chunk out of order".into(),
        ));
        assert!(line.contains(" WARN "), "{line}");
        for part in [
            "flow 7 10.1.0.2:50000 -> 10.2.0.5:445 reset",
            "pieces of a chunk out of order",
            "sent the peer a stream reset (codec error) and the client a TCP reset",
        ] {
            assert!(line.contains(part), "{part:?} missing: {line}");
        }
        let peer = logged(&Abort::PeerCodec);
        assert!(
            peer.contains(" WARN ") && peer.contains("could not decode"),
            "{peer}"
        );
        // A side that simply reset is not a warning.
        let lan = logged(&Abort::Local("connection reset by peer".into()));
        assert!(lan.contains("DEBUG") && !lan.contains("WARN"), "{lan}");
    }
}
