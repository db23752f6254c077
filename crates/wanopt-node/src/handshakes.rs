//! Admission of incoming tunnel handshakes: what a stranger can make a
//! core spend before it has proved its key.
//!
//! Every QUIC Initial that reaches a core's endpoint would start a
//! handshake that holds state until it completes or times out (the idle
//! timeout, 8 s), and the source address of an Initial can be forged. So:
//!
//! - while more than [`VALIDATE_ABOVE`] handshakes are in progress, an
//!   Initial from an address that has not proved it can receive is answered
//!   with a QUIC Retry (RFC 9000 section 8.1.2), which costs the core no
//!   state: a forged source never comes back with the token;
//! - at most [`MAX_HANDSHAKES`] are in progress at once, and at most
//!   [`MAX_PER_SOURCE`] from one validated source address; beyond that an
//!   Initial is refused (one small CONNECTION_REFUSED packet, so that a real
//!   edge backs off and tries again at once instead of waiting out its
//!   handshake timeout). Only validated handshakes count towards a source's
//!   share: a forged address cannot use up the share of the edge it names;
//! - failed and refused handshakes are counted for `/metrics` and logged at
//!   most once per [`LOG_INTERVAL`] (the rest at debug level), so that the
//!   log's volume is not the sender's to choose.
//!
//! The memory a burst of handshakes leaves freed but mapped is given back
//! to the system ([`Handshakes::trim_after_burst`]).

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tracing::{debug, warn};

/// Handshakes in progress above which a new one must first validate its
/// source address with a Retry.
pub const VALIDATE_ABOVE: usize = 16;

/// Handshakes in progress at once; more are refused.
pub const MAX_HANDSHAKES: usize = 256;

/// Handshakes in progress at once from one validated source address (one
/// host, or the hosts behind one NAT): a stranger at a real address holds
/// no more than this many of the [`MAX_HANDSHAKES`].
pub const MAX_PER_SOURCE: usize = 8;

/// At most one WARN line about failed or refused handshakes per interval.
pub const LOG_INTERVAL: Duration = Duration::from_secs(10);

/// Handshakes started since the last trim after which the memory they
/// freed is given back once they are over.
const TRIM_AFTER: u64 = 64;

/// Counters and limits of a core's incoming handshakes.
#[derive(Debug, Default)]
pub struct Handshakes {
    in_progress: AtomicUsize,
    started: AtomicU64,
    retried: AtomicU64,
    refused: AtomicU64,
    failed: AtomicU64,
    trimmed_at: AtomicU64,
    per_source: Mutex<HashMap<IpAddr, usize>>,
    log: Mutex<LogLimit>,
}

/// What `/metrics` shows of a core's incoming handshakes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct HandshakeCounts {
    /// Handshakes in progress now.
    pub in_progress: u64,
    /// Handshakes started (accepted for processing) since start.
    pub started: u64,
    /// Initials answered with a Retry (address validation) under load.
    pub retried: u64,
    /// Initials refused because [`MAX_HANDSHAKES`] were in progress, or
    /// [`MAX_PER_SOURCE`] from their address.
    pub refused: u64,
    /// Handshakes that failed: a key that is not pinned, a timeout, a
    /// protocol error.
    pub failed: u64,
}

#[derive(Debug, Default)]
struct LogLimit {
    last: Option<Instant>,
    suppressed: u64,
}

/// A handshake in progress; dropping it ends it.
#[derive(Debug)]
pub struct InProgress {
    handshakes: Arc<Handshakes>,
    /// The validated source address it counts against.
    source: Option<IpAddr>,
}

impl Drop for InProgress {
    fn drop(&mut self) {
        self.handshakes.in_progress.fetch_sub(1, Ordering::Relaxed);
        if let Some(ip) = self.source {
            let mut per_source = self.handshakes.per_source();
            if let Some(count) = per_source.get_mut(&ip) {
                *count -= 1;
                if *count == 0 {
                    per_source.remove(&ip);
                }
            }
        }
    }
}

impl Handshakes {
    /// Decides what to do with an incoming connection attempt: returns it
    /// with its [`InProgress`] token when its handshake may start, or
    /// answers it (Retry or refusal) and returns `None`.
    pub fn admit(
        self: &Arc<Self>,
        incoming: quinn::Incoming,
    ) -> Option<(quinn::Incoming, InProgress)> {
        let remote = incoming.remote_address();
        let in_progress = self.in_progress.load(Ordering::Relaxed);
        if in_progress >= VALIDATE_ABOVE && !incoming.remote_address_validated() {
            if incoming.may_retry() {
                self.retried.fetch_add(1, Ordering::Relaxed);
                if let Err(e) = incoming.retry() {
                    e.into_incoming().ignore();
                }
            } else {
                incoming.ignore();
            }
            return None;
        }
        let refuse = |incoming: quinn::Incoming, why: String| {
            self.refused.fetch_add(1, Ordering::Relaxed);
            incoming.refuse();
            self.log(remote, &format!("refused: {why}"));
            None
        };
        if in_progress >= MAX_HANDSHAKES {
            return refuse(
                incoming,
                format!("{MAX_HANDSHAKES} handshakes in progress already"),
            );
        }
        let source = if incoming.remote_address_validated() {
            let ip = remote.ip();
            let mut per_source = self.per_source();
            let count = per_source.entry(ip).or_default();
            if *count >= MAX_PER_SOURCE {
                drop(per_source);
                return refuse(
                    incoming,
                    format!("{MAX_PER_SOURCE} handshakes from {ip} in progress already"),
                );
            }
            *count += 1;
            Some(ip)
        } else {
            None
        };
        self.in_progress.fetch_add(1, Ordering::Relaxed);
        self.started.fetch_add(1, Ordering::Relaxed);
        Some((
            incoming,
            InProgress {
                handshakes: self.clone(),
                source,
            },
        ))
    }

    fn per_source(&self) -> std::sync::MutexGuard<'_, HashMap<IpAddr, usize>> {
        self.per_source.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Records a handshake from `remote` that failed with `error`.
    pub fn failed(&self, remote: SocketAddr, error: &dyn std::fmt::Display) {
        self.failed.fetch_add(1, Ordering::Relaxed);
        self.log(remote, &format!("refused: {error}"));
    }

    /// One WARN line per [`LOG_INTERVAL`], saying how many it leaves out.
    fn log(&self, remote: SocketAddr, what: &str) {
        let mut limit = self.log.lock().unwrap_or_else(|e| e.into_inner());
        let now = Instant::now();
        if limit
            .last
            .is_some_and(|last| now.duration_since(last) < LOG_INTERVAL)
        {
            limit.suppressed += 1;
            debug!("tunnel handshake from {remote} {what}");
            return;
        }
        let suppressed = std::mem::take(&mut limit.suppressed);
        limit.last = Some(now);
        drop(limit);
        if suppressed == 0 {
            warn!("tunnel handshake from {remote} {what}");
        } else {
            warn!(
                "tunnel handshake from {remote} {what} (and {suppressed} more failed or refused since the last such line: see wanopt_tunnel_handshakes_*_total in /metrics)"
            );
        }
    }

    /// The counters now.
    pub fn counts(&self) -> HandshakeCounts {
        HandshakeCounts {
            in_progress: self.in_progress.load(Ordering::Relaxed) as u64,
            started: self.started.load(Ordering::Relaxed),
            retried: self.retried.load(Ordering::Relaxed),
            refused: self.refused.load(Ordering::Relaxed),
            failed: self.failed.load(Ordering::Relaxed),
        }
    }

    /// Gives the memory of a burst of handshakes back to the system once it
    /// is over (none in progress and at least `TRIM_AFTER` started since the
    /// last trim). glibc's allocator keeps what many threads freed in their
    /// arenas: after 2,000 abandoned handshakes a core's RSS stayed 58 MB
    /// above where it started. Call it now and then (the core does every
    /// few seconds); it returns whether it trimmed.
    pub fn trim_after_burst(&self) -> bool {
        let started = self.started.load(Ordering::Relaxed);
        let since = started - self.trimmed_at.load(Ordering::Relaxed);
        if since < TRIM_AFTER || self.in_progress.load(Ordering::Relaxed) > 0 {
            return false;
        }
        self.trimmed_at.store(started, Ordering::Relaxed);
        release_free_memory();
        true
    }
}

/// Returns the allocator's free memory to the system (glibc's
/// `malloc_trim`, which unmaps the free pages of every arena).
pub fn release_free_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only walks the allocator's own free lists.
    unsafe {
        libc::malloc_trim(0);
    }
}
