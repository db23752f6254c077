//! The peers of a node's configuration, each listed whether it is up or
//! down: what the operator configured (its keys, its `name`, the endpoint
//! it is dialed at), the state it is in and since when, and what its flows
//! carried. Tunnels come and go at addresses (the `peers` of `/status`);
//! a configured peer stays in the book until a reload removes it, so a
//! branch that is down can be alerted on by its key or name.

use std::sync::{Arc, Mutex, RwLock};
use std::time::{Instant, SystemTime};

use serde::{Deserialize, Serialize};

use crate::flow::PeerTraffic;
use crate::transport::identity::PublicKey;

/// Where a configured peer is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PeerState {
    /// A tunnel to it is up.
    Up,
    /// Dialed and not up yet since the node started (or since a reload
    /// added it).
    Connecting,
    /// Was up, or is only accepted and not connected.
    Down,
    /// The last handshake failed on a key: one side does not pin the
    /// other's.
    Refused,
}

impl PeerState {
    /// Every state, in the order `/metrics` lists them.
    pub const ALL: [PeerState; 4] = [
        PeerState::Up,
        PeerState::Connecting,
        PeerState::Down,
        PeerState::Refused,
    ];

    /// Its name in `/status`, `/metrics` and logs.
    pub fn name(self) -> &'static str {
        match self {
            PeerState::Up => "up",
            PeerState::Connecting => "connecting",
            PeerState::Down => "down",
            PeerState::Refused => "refused",
        }
    }
}

/// A peer as the configuration gives it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfiguredPeer {
    /// The keys it may present (one, or a cluster's for one `--core`).
    pub keys: Vec<PublicKey>,
    /// Where the node dials it, if it does.
    pub endpoint: Option<String>,
    /// Whether the node accepts tunnels from it.
    pub accepted: bool,
    /// Its `name` in the configuration.
    pub name: Option<String>,
}

impl ConfiguredPeer {
    /// How flows and logs name it: its name, or its (first) key.
    pub fn label(&self) -> String {
        match (&self.name, self.keys.first()) {
            (Some(name), _) => name.clone(),
            (None, Some(key)) => key.to_string(),
            (None, None) => self.endpoint.clone().unwrap_or_default(),
        }
    }

    /// Whether `self` and `other` are one peer across a reload: the same
    /// endpoint and keys (its name may change).
    fn same_peer(&self, other: &ConfiguredPeer) -> bool {
        self.endpoint == other.endpoint && self.keys == other.keys
    }
}

#[derive(Debug)]
struct Condition {
    state: PeerState,
    since: Instant,
    why: Option<String>,
}

/// One configured peer while the node runs.
#[derive(Debug)]
pub struct PeerRecord {
    config: RwLock<ConfiguredPeer>,
    /// What its flows carried.
    pub traffic: Arc<PeerTraffic>,
    condition: Mutex<Condition>,
}

/// A configured peer as `/status` shows it (its live figures are added
/// by the node's state).
#[derive(Debug, Clone)]
pub struct PeerView {
    /// As configured.
    pub config: ConfiguredPeer,
    /// Its state, as last told (a state without a live tunnel is never
    /// `up`: the node's state checks).
    pub state: PeerState,
    /// When it entered the state.
    pub since: Instant,
    /// Why it is in the state (the last error), if known.
    pub why: Option<String>,
}

impl PeerRecord {
    fn new(config: ConfiguredPeer) -> PeerRecord {
        let (state, why) = match config.endpoint {
            Some(_) => (PeerState::Connecting, None),
            None => (
                PeerState::Down,
                Some("it has not connected since the node started".to_owned()),
            ),
        };
        PeerRecord {
            traffic: Arc::new(PeerTraffic::new(&config.label())),
            config: RwLock::new(config),
            condition: Mutex::new(Condition {
                state,
                since: Instant::now(),
                why,
            }),
        }
    }

    fn condition(&self) -> std::sync::MutexGuard<'_, Condition> {
        self.condition.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// As configured.
    pub fn config(&self) -> ConfiguredPeer {
        self.config
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// How flows and logs name it.
    pub fn label(&self) -> Arc<str> {
        self.traffic.label()
    }

    /// Whether it may present `key`.
    pub fn has_key(&self, key: &PublicKey) -> bool {
        self.config
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .keys
            .contains(key)
    }

    fn enter(&self, state: PeerState, why: Option<String>) {
        let mut c = self.condition();
        if c.state != state {
            c.state = state;
            c.since = Instant::now();
        }
        c.why = why;
    }

    /// A tunnel to it came up.
    pub fn up(&self) {
        self.enter(PeerState::Up, None);
    }

    /// Its tunnel went down, and why.
    pub fn down(&self, why: &str) {
        self.enter(PeerState::Down, Some(why.to_owned()));
    }

    /// A dial of it failed with `error`: refused when the handshake failed
    /// on a key, else still connecting (never up yet) or still down.
    pub fn dial_failed(&self, error: &str) {
        let state = match (is_refusal(error), self.condition().state) {
            (true, _) => PeerState::Refused,
            (false, PeerState::Connecting) => PeerState::Connecting,
            (false, _) => PeerState::Down,
        };
        self.enter(state, Some(error.to_owned()));
    }

    /// Its state now.
    pub fn view(&self) -> PeerView {
        let c = self.condition();
        PeerView {
            config: self.config(),
            state: c.state,
            since: c.since,
            why: c.why.clone(),
        }
    }
}

/// Whether a handshake `error` says one side does not pin the other's
/// key: the node's own check of the peer's key, or the peer's refusal of
/// this node's (quinn reports the peer's TLS alert, bad or unknown
/// certificate).
fn is_refusal(error: &str) -> bool {
    error.contains("is not among") || error.contains("handshake failed")
}

/// The configured peers.
#[derive(Debug, Default)]
pub struct PeerBook {
    records: Mutex<Vec<Arc<PeerRecord>>>,
}

impl PeerBook {
    fn records(&self) -> std::sync::MutexGuard<'_, Vec<Arc<PeerRecord>>> {
        self.records.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Takes the configuration's peers (at start, and at each reload): a
    /// peer listed before keeps its record, its state and its counters,
    /// and takes its new name; a peer no longer listed is dropped.
    pub fn configure(&self, peers: Vec<ConfiguredPeer>) {
        let mut records = self.records();
        let old = std::mem::take(&mut *records);
        for peer in peers {
            match old.iter().find(|r| r.config().same_peer(&peer)) {
                Some(record) => {
                    record.traffic.relabel(&peer.label());
                    *record.config.write().unwrap_or_else(|e| e.into_inner()) = peer;
                    records.push(record.clone());
                }
                None => records.push(Arc::new(PeerRecord::new(peer))),
            }
        }
    }

    /// The record of the peer dialed at `endpoint` with `keys`; one is
    /// made if the configuration did not list it.
    pub fn dialed(&self, endpoint: &str, keys: &[PublicKey]) -> Arc<PeerRecord> {
        let mut records = self.records();
        let wanted = ConfiguredPeer {
            keys: keys.to_vec(),
            endpoint: Some(endpoint.to_owned()),
            accepted: false,
            name: None,
        };
        if let Some(record) = records.iter().find(|r| r.config().same_peer(&wanted)) {
            return record.clone();
        }
        let record = Arc::new(PeerRecord::new(wanted));
        records.push(record.clone());
        record
    }

    /// The record of the peer that presents `key`, if it is configured.
    pub fn by_key(&self, key: &PublicKey) -> Option<Arc<PeerRecord>> {
        self.records().iter().find(|r| r.has_key(key)).cloned()
    }

    /// Every configured peer, in the configuration's order.
    pub fn list(&self) -> Vec<Arc<PeerRecord>> {
        self.records().clone()
    }
}

/// `at` as seconds since the Unix epoch (what a dashboard shows as "down
/// since").
pub fn unix_secs(at: Instant) -> f64 {
    let ago = Instant::now().saturating_duration_since(at);
    SystemTime::now()
        .checked_sub(ago)
        .and_then(|t| t.duration_since(SystemTime::UNIX_EPOCH).ok())
        .map_or(0.0, |d| d.as_secs_f64())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transport::identity::PrivateKey;

    fn key() -> PublicKey {
        PrivateKey::generate().public_key()
    }

    fn dialed(key: PublicKey, name: Option<&str>) -> ConfiguredPeer {
        ConfiguredPeer {
            keys: vec![key],
            endpoint: Some("core.example:4433".into()),
            accepted: false,
            name: name.map(str::to_owned),
        }
    }

    #[test]
    fn a_dialed_peer_connects_is_refused_comes_up_and_goes_down() {
        let book = PeerBook::default();
        let k = key();
        book.configure(vec![dialed(k, Some("branch-a"))]);
        let record = book.dialed("core.example:4433", &[k]);
        assert_eq!(record.view().state, PeerState::Connecting);
        assert_eq!(&*record.label(), "branch-a");
        record.dial_failed("timed out");
        assert_eq!(record.view().state, PeerState::Connecting);
        record.dial_failed("the core's key X is not among the edge's --peer-key");
        let view = record.view();
        assert_eq!(view.state, PeerState::Refused);
        assert!(view.why.unwrap().contains("not among"));
        record.up();
        assert_eq!(record.view().state, PeerState::Up);
        assert_eq!(record.view().why, None);
        record.down("connection lost");
        record.dial_failed("timed out");
        let view = record.view();
        assert_eq!(view.state, PeerState::Down);
        assert_eq!(view.why.as_deref(), Some("timed out"));
    }

    #[test]
    fn an_accepted_peer_starts_down_and_is_found_by_key() {
        let book = PeerBook::default();
        let (a, b) = (key(), key());
        book.configure(vec![ConfiguredPeer {
            keys: vec![a],
            endpoint: None,
            accepted: true,
            name: None,
        }]);
        let record = book.by_key(&a).unwrap();
        assert_eq!(record.view().state, PeerState::Down);
        assert_eq!(&*record.label(), a.to_string());
        assert!(book.by_key(&b).is_none());
    }

    #[test]
    fn a_reload_keeps_a_peers_record_and_counters_and_drops_the_removed() {
        let book = PeerBook::default();
        let (a, b) = (key(), key());
        book.configure(vec![dialed(a, None), dialed(b, None)]);
        let kept = book.by_key(&a).unwrap();
        kept.traffic
            .flows
            .fetch_add(3, std::sync::atomic::Ordering::Relaxed);
        kept.up();
        book.configure(vec![dialed(a, Some("renamed"))]);
        let again = book.by_key(&a).unwrap();
        assert!(Arc::ptr_eq(&kept, &again));
        assert_eq!(&*again.label(), "renamed");
        assert_eq!(again.view().state, PeerState::Up);
        assert!(book.by_key(&b).is_none());
        assert_eq!(book.list().len(), 1);
    }
}
