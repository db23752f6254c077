//! Stream ends: flows say when their stream's last bytes are written, and
//! until the peer acknowledged them the path's tails are repeated even
//! while it carries bulk traffic.

use std::net::SocketAddr;
use std::time::Duration;

use super::handle::DatagramHandle;

/// Longest a [`StreamEnd`] is held waiting for the peer's acknowledgement
/// (a peer that stopped reading, a stuck tunnel).
pub const STREAM_END_HOLD: Duration = Duration::from_secs(30);

/// Lets the flows on one path say when their stream is ending.
#[derive(Debug, Clone)]
pub struct StreamEnds {
    layer: DatagramHandle,
    peer: SocketAddr,
}

impl StreamEnds {
    /// A handle for the flows on the path to `peer` to say when their
    /// stream is ending.
    pub fn new(layer: &DatagramHandle, peer: SocketAddr) -> StreamEnds {
        StreamEnds {
            layer: layer.clone(),
            peer,
        }
    }

    /// The path's capacity, bits per second: the highest rate estimate
    /// its samples saw, forgotten with a one-minute half-life (BBR's own
    /// estimate falls as soon as the traffic turns sparse). `None` before
    /// the first sample.
    pub fn capacity_bps(&self) -> Option<f64> {
        self.layer.capacity_bps(self.peer)
    }

    /// A stream on the path has had its last bytes written (they may still
    /// be queued in the QUIC connection): until the returned guard is
    /// dropped, the path's tails are repeated even while it is busy.
    pub fn expect(&self) -> StreamEnd {
        let counted = self.layer.stream_end(self.peer, true);
        StreamEnd {
            ends: counted.then(|| self.clone()),
        }
    }
}

/// A stream's end awaited on a path; dropping it says the end was
/// acknowledged (or given up on). Holds nothing when it was not counted
/// (duplication off, or the path not sampled yet).
#[derive(Debug)]
#[must_use = "the end is expected only while the guard lives"]
pub struct StreamEnd {
    ends: Option<StreamEnds>,
}

impl StreamEnd {
    /// Keeps the guard until `acknowledged` completes (a finished
    /// stream's `stopped()`), at most [`STREAM_END_HOLD`], in a task of
    /// its own so that the flow need not wait.
    pub fn release_when<F>(self, acknowledged: F)
    where
        F: std::future::Future + Send + 'static,
    {
        tokio::spawn(async move {
            let _ = tokio::time::timeout(STREAM_END_HOLD, acknowledged).await;
            drop(self);
        });
    }
}

impl Drop for StreamEnd {
    fn drop(&mut self) {
        if let Some(ends) = self.ends.take() {
            ends.layer.stream_end(ends.peer, false);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transport::datagram::{DuplicationMode, PathSample};

    /// A sample of the 3G downlink (150 ms, 2 Mbit/s): packets sent and
    /// lost, UDP bytes sent, all since the connection began.
    fn sample(sent: u64, lost: u64, tx: u64) -> PathSample {
        PathSample {
            sent_packets: sent,
            lost_packets: lost,
            srtt: Duration::from_millis(150),
            rate_estimate: Some(250_000.0),
            udp_tx_bytes: tx,
            udp_rx_bytes: 0,
            mtu: 1472,
            datagrams_sent: 0,
            congested_rounds: None,
            filled_rounds: None,
            random_loss: None,
            startup: false,
        }
    }

    #[tokio::test]
    async fn a_stream_ending_on_a_bulk_path_switches_its_tails_on_until_acknowledged() {
        let peer: SocketAddr = "192.0.2.1:4433".parse().unwrap();
        let layer = DatagramHandle::new(DuplicationMode::Auto);
        let ends = StreamEnds::new(&layer, peer);
        // Before the first sample a stream end is not counted.
        drop(ends.expect());
        layer.update_path(peer, &sample(1000, 10, 1_000_000));
        layer.update_path(peer, &sample(2000, 20, 2_400_000));
        let s = layer.status(peer);
        assert!(!s.active && s.bulk && s.ending_streams == 0, "{s:?}");
        // A flow wrote its last bytes: tails on at once, busy or not.
        let end = ends.expect();
        let s = layer.status(peer);
        assert!(s.active && s.bulk && s.ending_streams == 1, "{s:?}");
        assert_eq!(s.tail_bytes, Some(7_500));
        // Samples keep them on while the end is awaited, even bulk ones.
        layer.update_path(peer, &sample(3000, 30, 3_800_000));
        let s = layer.status(peer);
        assert!(s.active && s.bulk, "{s:?}");
        // The peer acknowledged the stream: the guard goes, and the next
        // bulk sample switches the tails off again.
        let (ack, acked) = tokio::sync::oneshot::channel::<()>();
        end.release_when(acked);
        tokio::task::yield_now().await;
        assert_eq!(
            layer.status(peer).ending_streams,
            1,
            "held until acknowledged"
        );
        ack.send(()).unwrap();
        for _ in 0..100 {
            if layer.status(peer).ending_streams == 0 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        assert_eq!(layer.status(peer).ending_streams, 0);
        layer.update_path(peer, &sample(4000, 40, 5_200_000));
        let s = layer.status(peer);
        assert!(!s.active && s.bulk, "{s:?}");
        // A clean path (auto) or `off` never turns on for a stream end.
        let clean: SocketAddr = "192.0.2.2:4433".parse().unwrap();
        layer.update_path(clean, &sample(2000, 0, 0));
        let _end = StreamEnds::new(&layer, clean).expect();
        assert!(!layer.status(clean).active);
        let off = DatagramHandle::new(DuplicationMode::Off);
        off.update_path(peer, &sample(2000, 20, 0));
        let _end = StreamEnds::new(&off, peer).expect();
        let s = off.status(peer);
        assert!(!s.active && s.ending_streams == 0, "{s:?}");
    }
}
