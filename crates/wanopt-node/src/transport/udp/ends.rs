//! Stream ends: flows say when their stream's last bytes are written, and
//! until the peer acknowledged them the path's tails are repeated even
//! while it carries bulk traffic.

use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use super::duplication::Duplication;
use super::status::DuplicationMode;

impl Duplication {
    /// A handle for the flows on the path to `peer` to say when their
    /// stream is ending.
    pub fn stream_ends(&self, peer: SocketAddr) -> StreamEnds {
        StreamEnds {
            duplication: self.clone(),
            peer,
        }
    }

    /// Counts a stream ending on `peer` (+1) or acknowledged (-1), and
    /// applies the change at once rather than at the next sample. Returns
    /// whether it counted (a path not sampled yet is not).
    fn ending(&self, peer: SocketAddr, starts: bool) -> bool {
        if self.mode == DuplicationMode::Off {
            return false;
        }
        let now = Instant::now();
        let mut paths = self.paths.lock().unwrap_or_else(|e| e.into_inner());
        let Some(path) = paths.get_mut(&peer) else {
            // No sample yet (or the path is gone): nothing to apply.
            return false;
        };
        if starts {
            path.ending += 1;
        } else {
            path.ending = path.ending.saturating_sub(1);
        }
        let ending = path.ending > 0;
        // Switch a bulk path's tails on now: the stream's last bytes may go
        // out before the next sample. Switching off waits for the sample.
        let params = path.params.filter(|_| ending && path.repeats(self.mode));
        drop(paths);
        let mut policy = self.shared.policy();
        if let Some(params) = params {
            if policy.params(peer).is_none() {
                policy.set_path(now, peer, Some(params));
            }
        }
        policy.expect_ends(peer, ending);
        self.shared
            .active
            .store(policy.is_active(), Ordering::Relaxed);
        true
    }
}

/// Longest a [`StreamEnd`] is held waiting for the peer's acknowledgement
/// (a peer that stopped reading, a stuck tunnel).
pub const STREAM_END_HOLD: Duration = Duration::from_secs(30);

/// Lets the flows on one path say when their stream is ending.
#[derive(Debug, Clone)]
pub struct StreamEnds {
    duplication: Duplication,
    peer: SocketAddr,
}

impl StreamEnds {
    /// The path's capacity, bits per second: the highest rate estimate
    /// its samples saw, forgotten with a one-minute half-life (BBR's own
    /// estimate falls as soon as the traffic turns sparse). `None` before
    /// the first sample.
    pub fn capacity_bps(&self) -> Option<f64> {
        let paths = self
            .duplication
            .paths
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        paths
            .get(&self.peer)?
            .remembered(Instant::now())
            .map(|bytes_per_sec| bytes_per_sec * 8.0)
    }

    /// A stream on the path has had its last bytes written (they may still
    /// be queued in the QUIC connection): until the returned guard is
    /// dropped, the path's tails are repeated even while it is busy.
    pub fn expect(&self) -> StreamEnd {
        let counted = self.duplication.ending(self.peer, true);
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
            ends.duplication.ending(ends.peer, false);
        }
    }
}
