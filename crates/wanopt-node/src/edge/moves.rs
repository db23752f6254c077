//! A tunnel making way for another (`--transport auto`): a tunnel on
//! QUIC that goes silent, or that a probe over TCP shows policed, hands
//! new flows to a tunnel over TCP; a tunnel on TCP hands them back when
//! QUIC works again. The tunnel left closes once its flows are done.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use tracing::{debug, info, warn};
use wanopt_proto::{OpenRepr, ReplyRepr, Services, Target};

use super::dial::{DialedTunnel, Dialer, HANDSHAKE_TIMEOUT};
use super::reach::{self, Counts, Policing, Silence, LOOK_EVERY, POLICED_RETRY, QUIC_TRY};
use crate::transport::tunnel::Transport;

impl Dialer<'_> {
    /// Waits until the tunnel `conn` (over `over`, dialed for the core's
    /// UDP address `dialed`) should make way for another, and returns
    /// that one (only with `--transport auto`): on QUIC, when it goes
    /// silent, or loses and a probe over TCP carries far more, and a
    /// tunnel over TCP is up; on TCP, when a QUIC handshake completes
    /// again (after `retry`).
    pub(super) async fn next_move(
        &self,
        conn: &quinn::Connection,
        (over, dialed, retry): (Transport, SocketAddr, Duration),
    ) -> DialedTunnel {
        if !self.tcp.reach.retries_quic() {
            return std::future::pending().await;
        }
        if over == Transport::Tcp {
            return self.back_to_quic(dialed, retry).await;
        }
        let mut silence = Silence::default();
        let mut policing = Policing::default();
        loop {
            tokio::time::sleep(LOOK_EVERY).await;
            let now = Instant::now();
            let stats = conn.stats();
            let silent = silence.look(
                now,
                stats.udp_tx.datagrams,
                stats.udp_rx.datagrams,
                conn.rtt(),
            );
            if let Some(silent) = silent {
                let why = format!("UDP went silent ({} ms unanswered)", silent.as_millis());
                warn!("core {dialed}: {why}; dialing it over TCP");
                match self.over_tcp(dialed, HANDSHAKE_TIMEOUT, why).await {
                    Ok(mut up) => {
                        up.left_silent = true;
                        return up;
                    }
                    Err((_, e)) => {
                        debug!("core {dialed}: not over TCP either: {e}");
                        silence = Silence::default();
                        tokio::time::sleep(QUIC_TRY).await;
                    }
                }
                continue;
            }
            let fec = self.state.datagrams.fec_status(conn.remote_address());
            let counts = Counts {
                sent: stats.path.sent_packets,
                lost: stats.path.lost_packets,
                received: fec.received,
                missed: fec.lost,
                bytes_out: stats.udp_tx.bytes,
                bytes_in: stats.udp_rx.bytes,
            };
            let Some((loss, quic_bps)) = policing.look(now, counts) else {
                continue;
            };
            debug!(
                "core {dialed}: {:.1}% loss over QUIC at {:.1} Mbit/s: probing over TCP",
                loss * 100.0,
                quic_bps / 1e6
            );
            match self.probe_over_tcp(dialed, quic_bps).await {
                Some(up) => return up,
                None => policing.not_better(Instant::now()),
            }
        }
    }

    /// A tunnel on TCP: tries QUIC every `retry` until a handshake
    /// completes.
    async fn back_to_quic(&self, dialed: SocketAddr, retry: Duration) -> DialedTunnel {
        loop {
            tokio::time::sleep(retry).await;
            match self.over_quic(dialed, QUIC_TRY).await {
                Ok(up) => {
                    info!("core {dialed}: QUIC works again: new flows go over UDP, flows open over TCP finish there");
                    return up;
                }
                Err((_, e)) => debug!("core {dialed}: QUIC still does not work: {e}"),
            }
        }
    }

    /// Dials the core over TCP beside the tunnel on QUIC, which carried
    /// `quic_bps` before, and has it send filler for a probe's span: the
    /// tunnel over TCP, when it carried far more (UDP is policed); `None`
    /// (and the probe's tunnel closed) otherwise.
    async fn probe_over_tcp(&self, dialed: SocketAddr, quic_bps: f64) -> Option<DialedTunnel> {
        let mut up = match self
            .over_tcp(dialed, HANDSHAKE_TIMEOUT, String::new())
            .await
        {
            Ok(up) => up,
            Err((_, e)) => {
                debug!("core {dialed}: no probe over TCP: {e}");
                return None;
            }
        };
        let tcp_bps = match probe_rate(&up.conn).await {
            Ok(bps) => bps,
            Err(e) => {
                debug!("core {dialed}: probe over TCP failed: {e}");
                0.0
            }
        };
        let (q, t) = (quic_bps / 1e6, tcp_bps / 1e6);
        if !reach::policed(quic_bps, tcp_bps) {
            info!("core {dialed}: QUIC carried {q:.1} Mbit/s, a probe over TCP {t:.1}: QUIC stays");
            up.conn.close(
                quinn::VarInt::from_u32(wanopt_proto::codes::SHUTDOWN),
                b"probe done",
            );
            return None;
        }
        up.why = format!("UDP policed ({q:.1} Mbit/s over QUIC, {t:.1} over TCP)");
        up.quic_retry = POLICED_RETRY;
        warn!("core {dialed}: {}: new flows go over TCP", up.why);
        Some(up)
    }
}

/// What the tunnel `conn` carries toward this node on a probe stream,
/// bits per second, after the stream's first quarter (its start-up).
async fn probe_rate(conn: &quinn::Connection) -> Result<f64, String> {
    let header = OpenRepr {
        flow_id: 0,
        services: Services::PROBE,
        destination: Target::Addr(SocketAddr::from(([0, 0, 0, 0], 0))),
        source: SocketAddr::from(([0, 0, 0, 0], 0)),
    }
    .emit()
    .map_err(|e| e.to_string())?;
    let (mut send, mut recv) = conn.open_bi().await.map_err(|e| e.to_string())?;
    send.write_all(&header).await.map_err(|e| e.to_string())?;
    let _ = send.finish();
    let mut reply = [0u8; wanopt_proto::stream::REPLY_LEN];
    recv.read_exact(&mut reply)
        .await
        .map_err(|e| e.to_string())?;
    let status = wanopt_proto::Reply::new_checked(&reply[..])
        .and_then(|view| ReplyRepr::parse(&view))
        .map_err(|e| e.to_string())?
        .status;
    if status != wanopt_proto::Status::Connected {
        return Err(format!("the core answered {status}"));
    }
    let span = Duration::from_millis(wanopt_proto::stream::PROBE_SPAN_MS);
    let start = Instant::now();
    let settled = start + span / 4;
    let (mut bytes, mut from) = (0u64, None);
    let mut buf = vec![0u8; 64 << 10];
    let deadline = start + span * 2;
    loop {
        let n = match tokio::time::timeout_at(deadline.into(), recv.read(&mut buf)).await {
            Ok(Ok(Some(n))) => n,
            Ok(Ok(None)) | Err(_) => break,
            Ok(Err(e)) => return Err(e.to_string()),
        };
        let now = Instant::now();
        if now >= settled {
            from.get_or_insert(now);
            bytes += n as u64;
        }
    }
    let secs = from.map_or(0.0, |from| from.elapsed().as_secs_f64());
    Ok(if secs > 0.0 {
        bytes as f64 * 8.0 / secs
    } else {
        0.0
    })
}
