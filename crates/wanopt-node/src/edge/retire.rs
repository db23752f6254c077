//! A tunnel the edge moved away from (`--transport auto`): new flows
//! take the new one, and this one closes once its last flow is done, or
//! soon when it went silent (UDP blocked under it).

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::reach::LOOK_EVERY;
use crate::transport::tunnel::Transport;

/// How long a tunnel on QUIC that went silent may stay so after its new
/// flows moved to TCP before it is closed (its flows then end, counted
/// `tunnel_lost`, rather than wait for the tunnel's timeout); a tunnel
/// that hears from its peer within it keeps its flows.
pub const SILENT_GRACE: Duration = Duration::from_secs(2);

/// Closes a tunnel the edge moved away from once no flow holds it, or,
/// when it moved because the tunnel went `silent`, once it stayed silent
/// for [`SILENT_GRACE`] more.
pub(super) async fn close_when_unused(
    conn: quinn::Connection,
    users: Arc<()>,
    to: Transport,
    silent: bool,
) {
    let heard = conn.stats().udp_rx.datagrams;
    let mut grace = silent.then(|| Instant::now() + SILENT_GRACE);
    loop {
        tokio::select! {
            _ = conn.closed() => return,
            () = tokio::time::sleep(LOOK_EVERY) => {}
        }
        if let Some(until) = grace {
            if conn.stats().udp_rx.datagrams != heard {
                grace = None;
            } else if Instant::now() >= until {
                conn.close(
                    quinn::VarInt::from_u32(wanopt_proto::codes::SHUTDOWN),
                    b"UDP stayed silent",
                );
                return;
            }
        }
        if Arc::strong_count(&users) == 1 {
            let why = format!("new flows moved to {}", to.name());
            conn.close(
                quinn::VarInt::from_u32(wanopt_proto::codes::SHUTDOWN),
                why.as_bytes(),
            );
            return;
        }
    }
}
