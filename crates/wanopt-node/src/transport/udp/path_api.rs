//! [`Duplication`]'s side of the path layer: the edge's `--path` list,
//! the probe keys of each connection, and the paths' status.

use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::Ordering;
use std::time::Instant;

use tracing::warn;
use wanopt_proto::path::{PathMode, Side};

use super::duplication::Duplication;
use super::paths::{export_key, PathsStatus};

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
        self.shared.paths().bind(
            Instant::now(),
            conn.remote_address(),
            conn.local_ip(),
            key,
            side,
        );
        self.shared.probe_wake.notify_one();
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
