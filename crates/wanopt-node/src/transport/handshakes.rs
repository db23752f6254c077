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

/// What to do with an incoming connection attempt.
#[derive(Debug)]
pub enum Admission {
    /// Start its handshake; the token ends it when dropped.
    Start(InProgress),
    /// Answer with a QUIC Retry: its address must be validated first.
    Retry,
    /// Send nothing (a Retry is not allowed for it and its address is not
    /// validated).
    Ignore,
    /// Refuse it, for the reason given.
    Refuse(String),
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
        match self.decide(
            remote,
            incoming.remote_address_validated(),
            incoming.may_retry(),
        ) {
            Admission::Start(token) => return Some((incoming, token)),
            Admission::Retry => {
                if let Err(e) = incoming.retry() {
                    e.into_incoming().ignore();
                }
            }
            Admission::Ignore => incoming.ignore(),
            Admission::Refuse(why) => {
                incoming.refuse();
                self.log(remote, &format!("refused: {why}"));
            }
        }
        None
    }

    /// The decision of [`Handshakes::admit`] for an attempt from `remote`,
    /// counted.
    pub fn decide(
        self: &Arc<Self>,
        remote: SocketAddr,
        validated: bool,
        may_retry: bool,
    ) -> Admission {
        let in_progress = self.in_progress.load(Ordering::Relaxed);
        if in_progress >= VALIDATE_ABOVE && !validated {
            if may_retry {
                self.retried.fetch_add(1, Ordering::Relaxed);
                return Admission::Retry;
            }
            return Admission::Ignore;
        }
        let refuse = |why: String| {
            self.refused.fetch_add(1, Ordering::Relaxed);
            Admission::Refuse(why)
        };
        if in_progress >= MAX_HANDSHAKES {
            return refuse(format!("{MAX_HANDSHAKES} handshakes in progress already"));
        }
        let source = if validated {
            let ip = remote.ip();
            let mut per_source = self.per_source();
            let count = per_source.entry(ip).or_default();
            if *count >= MAX_PER_SOURCE {
                drop(per_source);
                return refuse(format!(
                    "{MAX_PER_SOURCE} handshakes from {ip} in progress already"
                ));
            }
            *count += 1;
            Some(ip)
        } else {
            None
        };
        self.in_progress.fetch_add(1, Ordering::Relaxed);
        self.started.fetch_add(1, Ordering::Relaxed);
        Admission::Start(InProgress {
            handshakes: self.clone(),
            source,
        })
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
        crate::process::release_free_memory();
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addr(last: u8, port: u16) -> SocketAddr {
        SocketAddr::from(([192, 0, 2, last], port))
    }

    #[test]
    fn unvalidated_attempts_start_until_there_are_enough_then_get_a_retry() {
        let handshakes = Arc::new(Handshakes::default());
        let started: Vec<Admission> = (0..VALIDATE_ABOVE)
            .map(|i| handshakes.decide(addr(1, i as u16), false, true))
            .collect();
        assert!(started.iter().all(|a| matches!(a, Admission::Start(_))));
        assert!(matches!(
            handshakes.decide(addr(1, 9999), false, true),
            Admission::Retry
        ));
        assert!(matches!(
            handshakes.decide(addr(1, 9999), false, false),
            Admission::Ignore
        ));
        // A validated address still gets in, and an ended handshake frees
        // its place.
        let validated = handshakes.decide(addr(2, 1), true, false);
        assert!(matches!(validated, Admission::Start(_)));
        drop(started);
        let later = handshakes.decide(addr(1, 9999), false, true);
        assert!(matches!(later, Admission::Start(_)));
        let counts = handshakes.counts();
        assert_eq!((counts.in_progress, counts.retried), (2, 1));
    }

    #[test]
    fn one_validated_address_holds_its_share_and_all_hold_the_cap() {
        let handshakes = Arc::new(Handshakes::default());
        let mut held: Vec<Admission> = (0..MAX_PER_SOURCE)
            .map(|i| handshakes.decide(addr(1, i as u16), true, false))
            .collect();
        assert!(matches!(
            handshakes.decide(addr(1, 9999), true, false),
            Admission::Refuse(_)
        ));
        // An unvalidated attempt naming that address (it may be forged)
        // does not count against its share.
        held.push(handshakes.decide(addr(1, 9999), false, true));
        assert!(matches!(held.last(), Some(Admission::Start(_))));
        for source in 2..=u8::MAX {
            for port in 0..MAX_PER_SOURCE as u16 {
                held.push(handshakes.decide(addr(source, port), true, false));
            }
        }
        let started = held
            .iter()
            .filter(|a| matches!(a, Admission::Start(_)))
            .count();
        assert_eq!(started, MAX_HANDSHAKES);
        assert_eq!(handshakes.counts().in_progress, MAX_HANDSHAKES as u64);
        held.clear();
        assert_eq!(handshakes.counts().in_progress, 0);
        assert!(handshakes.per_source().is_empty());
    }

    #[test]
    fn memory_is_trimmed_once_after_a_burst_is_over() {
        let handshakes = Arc::new(Handshakes::default());
        let burst: Vec<Admission> = (0..TRIM_AFTER)
            .map(|i| handshakes.decide(addr((i % 200) as u8, i as u16), true, false))
            .collect();
        assert!(!handshakes.trim_after_burst(), "not while they run");
        drop(burst);
        assert!(handshakes.trim_after_burst());
        assert!(!handshakes.trim_after_burst(), "once per burst");
    }
}
