//! Transparent interception at the edge: the listener that redirected flows
//! arrive on, closed while the tunnel is down under `--fail open`, and a
//! rate limit for the log lines of flows the edge refuses.
//!
//! Under `--fail open` the edge does not connect flows itself while the
//! tunnel is down (its connections would leave from its own address and
//! escape the gateway's FORWARD policy). It closes its transparent listener
//! instead: the nftables `tproxy` statement matches only when a transparent
//! socket listens on its port, so new flows are routed by the kernel, under
//! the FORWARD policy, as if the rule were absent (iptables' `TPROXY` target
//! drops them and clients retry; NAT `REDIRECT` is refused with a reset).
//! The same holds when the edge is stopped or crashes.

use std::net::SocketAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tracing::{info, warn};

/// How long the listener waits before retrying to bind after a failure.
const REBIND_RETRY: Duration = Duration::from_secs(1);

/// Accepts transparently redirected connections on `listener` (bound to
/// `addr`) and hands each to `accepted` with its source. With
/// `close_while_down`, the listener is closed while `tunnel` holds `None`
/// and bound again once it holds a value. Returns when `tunnel`'s sender is
/// gone.
pub(crate) async fn serve<T>(
    listener: TcpListener,
    addr: SocketAddr,
    mut tunnel: watch::Receiver<Option<T>>,
    close_while_down: bool,
    mut accepted: impl FnMut(TcpStream, SocketAddr),
) {
    let mut listener = Some(listener);
    loop {
        if close_while_down && tunnel.borrow_and_update().is_none() {
            if listener.take().is_some() {
                info!(
                    "tunnel down: transparent listener {addr} closed until it is up (--fail open); \
                     new flows take the kernel's route under TPROXY rules"
                );
            }
            let gone = tunnel.wait_for(Option::is_some).await.map(drop).is_err();
            if gone {
                return;
            }
        }
        let open = match &listener {
            Some(open) => open,
            None => match crate::listen_tcp(addr, true) {
                Ok(open) => {
                    info!("tunnel up: transparent listener {addr} open");
                    listener.insert(open)
                }
                Err(e) => {
                    warn!("{e}; retrying in {REBIND_RETRY:?}");
                    tokio::time::sleep(REBIND_RETRY).await;
                    continue;
                }
            },
        };
        tokio::select! {
            next = open.accept() => match next {
                Ok((tcp, source)) => accepted(tcp, source),
                Err(e) => {
                    // Out of file descriptors and the like: back off, keep serving.
                    warn!("accept on {addr} failed: {e}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            },
            gone = async { tunnel.wait_for(Option::is_none).await.map(drop).is_err() },
                if close_while_down =>
            {
                if gone {
                    return;
                }
            }
        }
    }
}

/// Lets through at most one log line per `interval`, counting the ones it
/// held back.
#[derive(Debug)]
pub(crate) struct LogLimit {
    interval: Duration,
    /// When the last line was let through, and lines held back since.
    state: Mutex<(Option<Instant>, u64)>,
}

impl LogLimit {
    /// A limit of one line per `interval`.
    pub(crate) fn new(interval: Duration) -> LogLimit {
        LogLimit {
            interval,
            state: Mutex::new((None, 0)),
        }
    }

    /// `Some(held back since the last line)` when a line may be written
    /// at `now`, `None` when it is held back.
    pub(crate) fn allow(&self, now: Instant) -> Option<u64> {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let (last, held) = &mut *state;
        match last {
            Some(at) if now.saturating_duration_since(*at) < self.interval => {
                *held += 1;
                None
            }
            _ => {
                *last = Some(now);
                Some(std::mem::take(held))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_line_per_interval_and_the_held_back_are_counted() {
        let limit = LogLimit::new(Duration::from_secs(10));
        let t0 = Instant::now();
        assert_eq!(limit.allow(t0), Some(0));
        assert_eq!(limit.allow(t0 + Duration::from_secs(1)), None);
        assert_eq!(limit.allow(t0 + Duration::from_secs(9)), None);
        assert_eq!(limit.allow(t0 + Duration::from_secs(10)), Some(2));
        assert_eq!(limit.allow(t0 + Duration::from_secs(11)), None);
        assert_eq!(limit.allow(t0 + Duration::from_secs(30)), Some(1));
    }

    #[tokio::test]
    async fn the_listener_is_closed_while_the_tunnel_is_down() {
        let listener = crate::listen_tcp("127.0.0.1:0".parse().unwrap(), false).unwrap();
        let addr = listener.local_addr().unwrap();
        let (tunnel, rx) = watch::channel(Some(()));
        let (tx, mut got) = tokio::sync::mpsc::unbounded_channel();
        tokio::spawn(serve(listener, addr, rx, true, move |tcp, _| {
            let _ = tx.send(tcp);
        }));
        assert!(TcpStream::connect(addr).await.is_ok());
        assert!(got.recv().await.is_some());
        tunnel.send_replace(None);
        let refused = async {
            loop {
                if TcpStream::connect(addr).await.is_err() {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        };
        tokio::time::timeout(Duration::from_secs(5), refused)
            .await
            .expect("the listener stays open with the tunnel down");
        tunnel.send_replace(Some(()));
        let reopened = async {
            loop {
                if TcpStream::connect(addr).await.is_ok() {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        };
        tokio::time::timeout(Duration::from_secs(5), reopened)
            .await
            .expect("the listener reopens with the tunnel up");
    }
}
