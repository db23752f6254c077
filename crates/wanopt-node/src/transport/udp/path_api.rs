//! [`Duplication`]'s side of the path layer: the edge's `--path` list,
//! the probe keys of each connection, and the paths' status.

use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tracing::warn;
use wanopt_proto::path::{PathMode, Side};

use super::duplication::Duplication;
use super::paths::{export_key, PathsStatus};
use super::shared::Shared;

impl Duplication {
    /// The edge's paths to the core at `canonical` (`--path`, in order)
    /// and how they are used (`--path-mode`):
    /// from now on what quinn sends there leaves on the data path, and
    /// what arrives on any path is handed to quinn as from `canonical`.
    pub fn set_paths(&self, canonical: SocketAddr, paths: &[(IpAddr, SocketAddr)], mode: PathMode) {
        let mut table = self.shared.paths();
        table.configure(Instant::now(), canonical, paths, mode);
        let on = table.has_routes();
        drop(table);
        self.shared.paths_on.store(on, Ordering::Relaxed);
    }

    /// A connection came up (`side`: which end this node is): its probes
    /// are keyed from its TLS exporter. The edge probes its paths at once;
    /// the core binds paths as the edge's probes arrive. Nothing on an
    /// edge without paths.
    pub fn bind_paths(&self, conn: &quinn::Connection, side: Side) {
        if side == Side::Client && !self.shared.paths_on.load(Ordering::Relaxed) {
            return;
        }
        let Some(key) = export_key(conn) else {
            warn!(
                "no probe key for the tunnel to {}: its paths are not probed",
                conn.remote_address()
            );
            return;
        };
        // The connection's lock is taken (and let go) before the table's:
        // quinn sends, and routes on the table, under the connection's. In
        // `paths().bind(.., conn.remote_address(), ..)` the table's guard
        // is taken first and held while the arguments are evaluated, which
        // hung the edge's handshake about 1 run in 3 of tests/duplicate.rs.
        let (remote, local) = (conn.remote_address(), conn.local_ip());
        self.shared
            .paths()
            .bind(Instant::now(), remote, local, key, side);
        self.shared.probe_wake.notify_one();
        tokio::spawn(keep_copies_apart(self.shared.clone(), conn.clone()));
    }

    /// The connection to `canonical` ended: its probes stop (the core
    /// forgets its paths).
    pub fn unbind_paths(&self, canonical: SocketAddr) {
        self.shared.paths().unbind(canonical);
    }

    /// A handshake to `canonical` failed: the next one tries the next
    /// path.
    pub fn handshake_failed(&self, canonical: SocketAddr) {
        if self.shared.paths_on.load(Ordering::Relaxed) {
            self.shared.paths().rotate_fallback(canonical);
        }
    }

    /// The paths to `canonical`, if it has any.
    pub fn paths_status(&self, canonical: SocketAddr) -> Option<PathsStatus> {
        if !self.shared.paths_on.load(Ordering::Relaxed) {
            return None;
        }
        self.shared
            .paths()
            .status(canonical)
            .filter(|s| !s.paths.is_empty())
    }
}

/// How often the core looks whether its peer's paths went into duplicate
/// mode (learnt from the edge's probes), and for how long a peer that
/// shows no paths is watched.
const MODE_POLL: Duration = Duration::from_millis(250);
const MODE_WATCH: Duration = Duration::from_secs(30);

/// Once `conn`'s paths duplicate, tells its loss detection that packets
/// carrying UDP flows may overtake the rest (their copies take the faster
/// path): loss is then inferred within each kind only, and the copies
/// acknowledged early do not make the TCP flows' packets queued on the
/// data path look lost. Ends with the connection.
async fn keep_copies_apart(shared: Arc<Shared>, conn: quinn::Connection) {
    let canonical = conn.remote_address();
    let start = Instant::now();
    loop {
        // The table's lock is let go before the connection's is taken:
        // quinn sends (and routes on the table) under the connection's.
        let mode = shared.paths().mode(canonical);
        match mode {
            Some(PathMode::Duplicate) => {
                conn.set_datagram_packets_apart(true);
                return;
            }
            // A peer's mode stays what its first probe said.
            Some(_) => return,
            None if start.elapsed() > MODE_WATCH => return,
            None => {}
        }
        tokio::select! {
            _ = conn.closed() => return,
            () = tokio::time::sleep(MODE_POLL) => {}
        }
    }
}
