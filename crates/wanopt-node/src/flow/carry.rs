//! The one entrance both roles use to carry a flow: [`carry`] picks the
//! pump (plain, or through the codec when the flow has a ready
//! [`Reduction`]) and runs it; [`report`] counts and logs how it ended.

use tokio::net::TcpStream;
use tracing::{debug, warn};

use super::abort::{Abort, ResetCounters};
use super::codec_pump::splice_reduced;
use super::pump::Facing;
use super::splice::splice_stream;
use super::table::Flow;
use crate::reduce::Reduction;
use crate::transport::datagram::StreamEnds;

/// Carries a TCP connection over a QUIC stream until both directions end:
/// through the codec when `reduction` is given, as it is otherwise.
/// Facing the client (on the edge), the core's reply is read first: a
/// refusal resets the client. `start` is the stream offset of the first
/// payload byte (the length of a header already read from `recv`). `ends`
/// is told when this side's last bytes are written (tail duplication
/// repeats the stream's end). On an abort, the TCP connection is reset and
/// the stream reset and stopped.
#[allow(clippy::too_many_arguments)]
pub async fn carry(
    tcp: TcpStream,
    send: quinn::SendStream,
    recv: quinn::RecvStream,
    flow: &Flow,
    facing: Facing,
    start: u64,
    ends: StreamEnds,
    reduction: Option<Reduction>,
) -> Result<(), Abort> {
    match reduction {
        Some(reduction) => {
            splice_reduced(tcp, send, recv, flow, facing, start, reduction, ends).await
        }
        None => splice_stream(tcp, send, recv, flow, facing, start, &ends).await,
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

#[cfg(test)]
mod tests {
    use super::*;

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
        let line = logged(&Abort::Codec(super::super::abort::CodecFailure::BadData(
            std::sync::Arc::new(wanopt_codec::DecodeError::PieceOrder),
        )));
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
        let lan = logged(&Abort::socket(std::io::ErrorKind::ConnectionReset.into()));
        assert!(lan.contains("DEBUG") && !lan.contains("WARN"), "{lan}");
    }
}
