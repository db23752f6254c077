//! Why a flow ended abnormally and what each side is told: every reset is
//! counted by reason ([`ResetReason`], in `status` and `/metrics`); the
//! log line is written by [`super::carry::report`].

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpStream;
use wanopt_proto::codes;

/// Why a flow ended abnormally.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Abort {
    /// The local TCP peer reset or failed.
    #[error("local side: {0}")]
    Local(LocalFailure),
    /// The tunnel side reset the stream, stopped reading, or the tunnel died.
    #[error("tunnel side: {0}")]
    Remote(TunnelFailure),
    /// The core could not or would not connect to the destination.
    #[error("{0}")]
    Refused(wanopt_proto::Status),
    /// The peer's frames did not decode, or its decoder asked for chunks
    /// this node cannot supply: the peer is sent [`codes::CODEC_ERROR`].
    #[error("codec error: {0}")]
    Codec(CodecFailure),
    /// The peer reset the flow with [`codes::CODEC_ERROR`]: it could not
    /// decode this node's frames (its own log says why).
    #[error("the peer could not decode this node's data (its log says why)")]
    PeerCodec,
    /// The flow carried no byte either way for the node's
    /// `--flow-idle-timeout`.
    #[error("idle for --flow-idle-timeout")]
    Idle,
    /// A reload removed what permitted the flow (its peer's allowlist).
    #[error("no longer permitted after a configuration reload")]
    Revoked,
}

/// What failed on a flow's LAN side.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LocalFailure {
    /// Reading or writing the TCP socket failed (a reset, most often).
    #[error("{0}")]
    Socket(IoFailure),
    /// The flow's encoder could not be set up.
    #[error("{0}")]
    Encoder(Arc<wanopt_codec::chunker::ChunkerConfigError>),
    /// The flow was closed while its stream was being read ahead.
    #[error("flow closed")]
    Closed,
}

/// What failed on a flow's tunnel side.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TunnelFailure {
    /// Reading the stream failed: reset by the peer, or the tunnel lost.
    #[error("{0}")]
    Read(quinn::ReadError),
    /// Writing the stream failed: stopped by the peer, or the tunnel lost.
    #[error("{0}")]
    Write(quinn::WriteError),
    /// Writing to the destination's socket failed (a flow passed through:
    /// its far side is TCP).
    #[error("{0}")]
    Socket(IoFailure),
    /// The stream ended before the core's reply (edge side).
    #[error("no reply from the core: {0}")]
    NoReply(quinn::ReadExactError),
    /// The core's reply did not parse.
    #[error("bad reply from the core: {0}")]
    BadReply(wanopt_proto::HeaderError),
    /// The stream ended with bytes missing before its end.
    #[error("stream ended with a gap")]
    Gap,
    /// The stream ended before the peer's encoder said its data had ended.
    #[error("stream ended before the peer's end of data")]
    EndedEarly,
    /// The task writing the stream ended first.
    #[error("the tunnel stream's writer stopped")]
    WriterStopped,
}

impl TunnelFailure {
    /// Whether the whole tunnel was lost (timed out, closed, reset), not
    /// just this flow's stream: split TCP cannot move a server's
    /// connection to another tunnel, so the flow ends.
    pub fn is_tunnel_lost(&self) -> bool {
        use quinn::{ReadError, ReadExactError, WriteError};
        matches!(
            self,
            TunnelFailure::Read(ReadError::ConnectionLost(_))
                | TunnelFailure::Write(WriteError::ConnectionLost(_))
                | TunnelFailure::NoReply(ReadExactError::ReadError(ReadError::ConnectionLost(_)))
        )
    }
}

/// Why this node's codec ended a flow.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CodecFailure {
    /// The peer's frames did not decode.
    #[error("bad data from the peer: {0}")]
    BadData(Arc<wanopt_codec::DecodeError>),
    /// The peer's decoder asked for chunks neither cache holds any more
    /// (damaged disks at both ends); `count` of them in all.
    #[error("{first} ({count} chunks unavailable in all)")]
    Unavailable {
        /// The first request that could not be answered.
        first: Arc<wanopt_codec::PeerControlError>,
        /// Requests that could not be answered.
        count: usize,
    },
}

/// An I/O error of a flow's socket, shareable (an [`Abort`] is cloned and
/// compared; two are equal when their kind and message are).
#[derive(Debug, Clone, thiserror::Error)]
#[error("{0}")]
pub struct IoFailure(Arc<std::io::Error>);

impl From<std::io::Error> for IoFailure {
    fn from(e: std::io::Error) -> IoFailure {
        IoFailure(Arc::new(e))
    }
}

impl PartialEq for IoFailure {
    fn eq(&self, other: &IoFailure) -> bool {
        self.0.kind() == other.0.kind() && self.0.to_string() == other.0.to_string()
    }
}

impl Eq for IoFailure {}

impl Abort {
    /// A failed read or write of the flow's TCP socket.
    pub fn socket(e: std::io::Error) -> Abort {
        Abort::Local(LocalFailure::Socket(e.into()))
    }

    /// A failed read of the tunnel stream.
    pub fn from_read(e: quinn::ReadError) -> Abort {
        match e {
            quinn::ReadError::Reset(code) if code.into_inner() == u64::from(codes::CODEC_ERROR) => {
                Abort::PeerCodec
            }
            e => Abort::Remote(TunnelFailure::Read(e)),
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
            e => Abort::Remote(TunnelFailure::Write(e)),
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
            Abort::Remote(failure) if failure.is_tunnel_lost() => Some(ResetReason::TunnelLost),
            Abort::Remote(_) => Some(ResetReason::Tunnel),
            Abort::Refused(_) => None,
            Abort::Codec(_) => Some(ResetReason::Codec),
            Abort::PeerCodec => Some(ResetReason::PeerCodec),
            Abort::Idle => Some(ResetReason::Idle),
            Abort::Revoked => Some(ResetReason::Policy),
        }
    }
}

/// Why flows were reset, as counted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResetReason {
    /// The LAN side (client or server) reset the connection or failed.
    Lan,
    /// The peer reset the stream (its LAN side did) or stopped reading.
    Tunnel,
    /// This node could not decode the peer's data, or cannot supply the
    /// chunks the peer's decoder asked for.
    Codec,
    /// The peer could not decode this node's data.
    PeerCodec,
    /// The flow carried no byte for the node's `--flow-idle-timeout`.
    Idle,
    /// A reload no longer permitted the flow.
    Policy,
    /// The tunnel the flow rode was lost (its peer died or stopped
    /// answering: a core replica that failed, a cut path longer than
    /// `--tunnel-timeout`).
    TunnelLost,
}

impl ResetReason {
    /// Every reason, in the order of [`ResetCounters`].
    pub const ALL: [ResetReason; 7] = [
        ResetReason::Lan,
        ResetReason::Tunnel,
        ResetReason::Codec,
        ResetReason::PeerCodec,
        ResetReason::Idle,
        ResetReason::Policy,
        ResetReason::TunnelLost,
    ];

    /// The name in `status` and the `reason` label in `/metrics`.
    pub fn name(self) -> &'static str {
        match self {
            ResetReason::Lan => "lan",
            ResetReason::Tunnel => "tunnel",
            ResetReason::Codec => "codec",
            ResetReason::PeerCodec => "peer_codec",
            ResetReason::Idle => "idle",
            ResetReason::Policy => "policy",
            ResetReason::TunnelLost => "tunnel_lost",
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
        let ours = Abort::Codec(CodecFailure::BadData(Arc::new(
            wanopt_codec::DecodeError::PieceOrder,
        )));
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
        let lan = Abort::socket(std::io::ErrorKind::ConnectionReset.into());
        assert_eq!(lan.stream_code(), codes::TCP_RESET);
        let tcp = quinn::VarInt::from_u32(codes::TCP_RESET);
        assert_eq!(
            Abort::from_read(quinn::ReadError::Reset(tcp)).reason(),
            Some(ResetReason::Tunnel)
        );
        assert!(ResetReason::PeerCodec.is_error() && !ResetReason::Tunnel.is_error());
        // A tunnel that died is a reason of its own.
        let lost = quinn::ConnectionError::TimedOut;
        assert_eq!(
            Abort::from_read(quinn::ReadError::ConnectionLost(lost.clone())).reason(),
            Some(ResetReason::TunnelLost)
        );
        assert_eq!(
            Abort::from_write(quinn::WriteError::ConnectionLost(lost)).reason(),
            Some(ResetReason::TunnelLost)
        );
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
                ("idle", 0),
                ("policy", 0),
                ("tunnel_lost", 0)
            ]
        );
    }
}
