//! The last hour of each tunnel and path, for the dashboard's charts
//! (`GET /history`): a sampler reads the node's `/status` every
//! [`INTERVAL`] and keeps [`POINTS`] samples per series in a ring.
//!
//! Memory is bounded whatever the number of peers: at most
//! [`MAX_SERIES`] series (tunnels and paths together) of at most
//! [`POINTS`] points each. A series not sampled for an hour is dropped; a
//! new series finds room by evicting the one unused the longest, never one
//! sampled in the same round (a core with more tunnels than the bound keeps
//! the history of those it saw first rather than churning through all).

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use axum::{Extension, Json};
use serde::Serialize;

use crate::state::{NodeState, PeerStatus};

/// Time between two samples.
pub const INTERVAL: Duration = Duration::from_secs(10);

/// Samples kept per series: one hour at [`INTERVAL`].
pub const POINTS: usize = 360;

/// Series kept at most (tunnels and paths together).
pub const MAX_SERIES: usize = 64;

/// A history shared by its sampler and the route that serves it.
pub type SharedHistory = Arc<Mutex<History>>;

/// A bounded ring: pushing onto a full one drops its oldest item.
#[derive(Debug, Clone)]
pub struct Ring<T> {
    items: VecDeque<T>,
    capacity: usize,
}

impl<T> Ring<T> {
    /// An empty ring that holds at most `capacity` items (at least one).
    pub fn new(capacity: usize) -> Ring<T> {
        let capacity = capacity.max(1);
        Ring {
            items: VecDeque::with_capacity(capacity),
            capacity,
        }
    }

    /// Appends `item`, dropping the oldest when full.
    pub fn push(&mut self, item: T) {
        if self.items.len() == self.capacity {
            self.items.pop_front();
        }
        self.items.push_back(item);
    }

    /// The items, oldest first.
    pub fn iter(&self) -> impl Iterator<Item = &T> {
        self.items.iter()
    }

    /// Items held.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.items.len()
    }

    /// Whether it holds nothing.
    #[cfg(test)]
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }
}

/// Which series: a tunnel by its peer's address, or one of its paths.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum SeriesId {
    Tunnel { address: String },
    Path { peer: String, number: u8 },
}

/// A tunnel's sample.
#[derive(Debug, Clone, Copy)]
struct TunnelPoint {
    at: u64,
    rtt_ms: Option<f32>,
    loss_percent: Option<f32>,
    send_mbps: f32,
    receive_mbps: f32,
}

/// A path's sample.
#[derive(Debug, Clone, Copy)]
struct PathPoint {
    at: u64,
    rtt_ms: Option<f32>,
    loss_to_peer_percent: Option<f32>,
    sent_mbps: Option<f32>,
    received_mbps: Option<f32>,
}

#[derive(Debug)]
enum Samples {
    Tunnel {
        /// The peer's key, the latest one seen (unknown until the first
        /// handshake).
        key: Option<String>,
        /// Packets sent and lost at the previous sample.
        counts: Option<(u64, u64)>,
        points: Ring<TunnelPoint>,
    },
    Path {
        /// When, and bytes sent and received at the previous sample.
        counts: Option<(SystemTime, u64, u64)>,
        points: Ring<PathPoint>,
    },
}

#[derive(Debug)]
struct Series {
    /// The round that last sampled it.
    used: u64,
    samples: Samples,
}

/// The series of a node, bounded in number and length.
#[derive(Debug)]
pub struct History {
    series: BTreeMap<SeriesId, Series>,
    /// Rounds recorded so far.
    round: u64,
    points: usize,
    max_series: usize,
}

impl Default for History {
    fn default() -> History {
        History::new(POINTS, MAX_SERIES)
    }
}

impl History {
    /// An empty history of `points` samples per series and at most
    /// `max_series` series.
    pub fn new(points: usize, max_series: usize) -> History {
        History {
            series: BTreeMap::new(),
            round: 0,
            points: points.max(1),
            max_series,
        }
    }

    /// Series held now.
    #[cfg(test)]
    pub fn series_count(&self) -> usize {
        self.series.len()
    }

    /// Records one round: every tunnel of `peers` (`/status`'s), and
    /// every path of those that have several, as of `now`.
    pub fn record(&mut self, now: SystemTime, peers: &[PeerStatus]) {
        self.round += 1;
        let round = self.round;
        let points = self.points;
        // A series unsampled for as long as a ring spans holds nothing of
        // the last hour.
        self.series
            .retain(|_, s| round - s.used < u64::try_from(points).unwrap_or(u64::MAX));
        let at = now
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        for peer in peers {
            let id = SeriesId::Tunnel {
                address: peer.address.clone(),
            };
            let Some(series) = self.slot(id, || Samples::Tunnel {
                key: None,
                counts: None,
                points: Ring::new(points),
            }) else {
                continue;
            };
            if let Samples::Tunnel {
                key,
                counts,
                points,
            } = &mut series.samples
            {
                if peer.key.is_some() {
                    key.clone_from(&peer.key);
                }
                let now_counts = peer.sent_packets.zip(peer.lost_packets);
                let loss = match (*counts, now_counts) {
                    (Some((sent0, lost0)), Some((sent1, lost1)))
                        if sent1 > sent0 && lost1 >= lost0 =>
                    {
                        Some(percent(lost1 - lost0, sent1 - sent0))
                    }
                    _ => None,
                };
                *counts = now_counts;
                points.push(TunnelPoint {
                    at,
                    rtt_ms: peer.rtt_ms.map(round3),
                    loss_percent: loss,
                    send_mbps: round3(peer.send_rate_mbps),
                    receive_mbps: round3(peer.receive_rate_mbps),
                });
            }
            for path in peer.paths.iter().flat_map(|p| &p.paths) {
                let id = SeriesId::Path {
                    peer: peer.address.clone(),
                    number: path.number,
                };
                let Some(series) = self.slot(id, || Samples::Path {
                    counts: None,
                    points: Ring::new(points),
                }) else {
                    continue;
                };
                if let Samples::Path { counts, points } = &mut series.samples {
                    let rate = |then: SystemTime, before: u64, after: u64| {
                        let secs = now.duration_since(then).ok()?.as_secs_f64();
                        let bytes = after.checked_sub(before)?;
                        (secs > 0.0).then(|| round3(bytes as f64 * 8.0 / secs / 1e6))
                    };
                    let (sent_mbps, received_mbps) = match *counts {
                        Some((then, sent, received)) => (
                            rate(then, sent, path.sent_bytes),
                            rate(then, received, path.received_bytes),
                        ),
                        None => (None, None),
                    };
                    *counts = Some((now, path.sent_bytes, path.received_bytes));
                    points.push(PathPoint {
                        at,
                        rtt_ms: path.rtt_ms.map(round3),
                        loss_to_peer_percent: path.loss_to_peer_percent.map(round3),
                        sent_mbps,
                        received_mbps,
                    });
                }
            }
        }
    }

    /// The series `id`, made with `fresh` if new, marked used in this
    /// round; `None` when it is new and every series held was used in
    /// this round (the bound holds).
    fn slot(&mut self, id: SeriesId, fresh: impl FnOnce() -> Samples) -> Option<&mut Series> {
        let round = self.round;
        if !self.series.contains_key(&id) {
            if self.series.len() >= self.max_series {
                let oldest = self
                    .series
                    .iter()
                    .filter(|(_, s)| s.used < round)
                    .min_by_key(|(_, s)| s.used)
                    .map(|(id, _)| id.clone())?;
                self.series.remove(&oldest);
            }
            self.series.insert(
                id.clone(),
                Series {
                    used: round,
                    samples: fresh(),
                },
            );
        }
        let series = self.series.get_mut(&id)?;
        series.used = round;
        Some(series)
    }

    /// The series as `/history` serves them.
    pub fn report(&self) -> HistoryReport {
        let mut report = HistoryReport {
            interval_secs: INTERVAL.as_secs(),
            points: self.points,
            tunnels: Vec::new(),
            paths: Vec::new(),
        };
        for (id, series) in &self.series {
            match (id, &series.samples) {
                (SeriesId::Tunnel { address }, Samples::Tunnel { key, points, .. }) => {
                    report.tunnels.push(TunnelSeries {
                        address: address.clone(),
                        key: key.clone(),
                        t: points.iter().map(|p| p.at).collect(),
                        rtt_ms: points.iter().map(|p| p.rtt_ms).collect(),
                        loss_percent: points.iter().map(|p| p.loss_percent).collect(),
                        send_mbps: points.iter().map(|p| p.send_mbps).collect(),
                        receive_mbps: points.iter().map(|p| p.receive_mbps).collect(),
                    });
                }
                (SeriesId::Path { peer, number }, Samples::Path { points, .. }) => {
                    report.paths.push(PathSeries {
                        peer: peer.clone(),
                        number: *number,
                        t: points.iter().map(|p| p.at).collect(),
                        rtt_ms: points.iter().map(|p| p.rtt_ms).collect(),
                        loss_to_peer_percent: points
                            .iter()
                            .map(|p| p.loss_to_peer_percent)
                            .collect(),
                        sent_mbps: points.iter().map(|p| p.sent_mbps).collect(),
                        received_mbps: points.iter().map(|p| p.received_mbps).collect(),
                    });
                }
                _ => {}
            }
        }
        report
    }
}

/// What `/history` returns: each series as columns, oldest sample first.
#[derive(Debug, Clone, Serialize)]
pub struct HistoryReport {
    /// Seconds between samples.
    pub interval_secs: u64,
    /// Samples kept per series.
    pub points: usize,
    /// One series per tunnel peer.
    pub tunnels: Vec<TunnelSeries>,
    /// One series per WAN path of a peer that has several (`--path`).
    pub paths: Vec<PathSeries>,
}

/// A tunnel's last hour.
#[derive(Debug, Clone, Serialize)]
pub struct TunnelSeries {
    /// The peer's address.
    pub address: String,
    /// The peer's public key, once it was seen.
    pub key: Option<String>,
    /// Sample times, Unix seconds.
    pub t: Vec<u64>,
    /// Smoothed RTT, milliseconds (none while down).
    pub rtt_ms: Vec<Option<f32>>,
    /// Packets lost over packets sent since the previous sample, percent
    /// (none when nothing was sent).
    pub loss_percent: Vec<Option<f32>>,
    /// Send rate over the last second, Mbit/s.
    pub send_mbps: Vec<f32>,
    /// Receive rate over the last second, Mbit/s.
    pub receive_mbps: Vec<f32>,
}

/// A path's last hour.
#[derive(Debug, Clone, Serialize)]
pub struct PathSeries {
    /// The peer's address.
    pub peer: String,
    /// The path's number (`--path` order, from 1).
    pub number: u8,
    /// Sample times, Unix seconds.
    pub t: Vec<u64>,
    /// Smoothed RTT of the probes, milliseconds.
    pub rtt_ms: Vec<Option<f32>>,
    /// Loss of this node's probes toward the peer, percent.
    pub loss_to_peer_percent: Vec<Option<f32>>,
    /// Bytes sent on the path since the previous sample, Mbit/s.
    pub sent_mbps: Vec<Option<f32>>,
    /// Bytes received on it since the previous sample, Mbit/s.
    pub received_mbps: Vec<Option<f32>>,
}

/// `GET /history`.
pub(super) async fn history(Extension(history): Extension<SharedHistory>) -> Json<HistoryReport> {
    let report = history
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .report();
    Json(report)
}

/// The sampler's task, stopped when this is dropped (with the control
/// API that serves what it records).
#[derive(Debug)]
pub(super) struct Sampler(tokio::task::JoinHandle<()>);

impl Sampler {
    /// Samples `state` into `history` now and every [`INTERVAL`].
    pub(super) fn spawn(state: Arc<NodeState>, history: SharedHistory) -> Sampler {
        Sampler(tokio::spawn(async move {
            let mut tick = tokio::time::interval(INTERVAL);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tick.tick().await;
                let peers = state.status().peers;
                history
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .record(SystemTime::now(), &peers);
            }
        }))
    }
}

impl Drop for Sampler {
    fn drop(&mut self) {
        self.0.abort();
    }
}

fn percent(part: u64, whole: u64) -> f32 {
    round3(part as f64 * 100.0 / whole as f64)
}

/// `value` to three decimals, as f32 (what a chart needs, half the
/// memory).
fn round3(value: f64) -> f32 {
    ((value * 1000.0).round() / 1000.0) as f32
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::transport::datagram::{PathStatus, PathsStatus};

    fn at(secs: u64) -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(secs)
    }

    fn peer(address: &str, sent: u64, lost: u64) -> PeerStatus {
        serde_json::from_value(serde_json::json!({
            "address": address,
            "state": "up",
            "key": format!("key-of-{address}"),
            "rtt_ms": 40.0,
            "bandwidth_estimate_mbps": null,
            "send_rate_mbps": 12.5,
            "receive_rate_mbps": 3.0,
            "cwnd_bytes": null,
            "mtu": null,
            "sent_packets": sent,
            "lost_packets": lost,
            "congestion_events": null,
            "state_secs": 1.0,
            "reconnects": 0,
            "last_error": null,
        }))
        .unwrap()
    }

    fn path(number: u8, sent_bytes: u64, received_bytes: u64) -> PathStatus {
        PathStatus {
            number,
            local: None,
            remote: "198.18.2.2:4433".into(),
            state: "up".into(),
            rtt_ms: Some(41.0),
            jitter_ms: None,
            loss_to_peer_percent: Some(0.5),
            loss_from_peer_percent: None,
            data: true,
            sent_bytes,
            received_bytes,
            probes_sent: 0,
            probes_received: 0,
            copy_bytes: 0,
            repair_bytes: 0,
            repairs: false,
            bond: None,
            send_mbps: None,
            realtime: false,
        }
    }

    #[test]
    fn a_ring_keeps_the_newest_items_in_order() {
        let mut ring = Ring::new(3);
        assert!(ring.is_empty());
        for i in 0..10usize {
            ring.push(i);
            assert_eq!(ring.len(), (i + 1).min(3));
            let held: Vec<usize> = ring.iter().copied().collect();
            let expected: Vec<usize> = (i.saturating_sub(2)..=i).collect();
            assert_eq!(held, expected);
        }
        let mut one = Ring::new(0);
        one.push('a');
        one.push('b');
        assert_eq!(one.iter().collect::<Vec<_>>(), [&'b']);
    }

    #[test]
    fn an_hour_of_samples_is_kept_per_series() {
        let mut history = History::default();
        for round in 0..(POINTS as u64 + 50) {
            history.record(
                at(1000 + round * 10),
                &[peer("198.18.2.2:4433", round * 100, round)],
            );
        }
        let report = history.report();
        assert_eq!(report.tunnels.len(), 1);
        let tunnel = &report.tunnels[0];
        assert_eq!(tunnel.t.len(), POINTS);
        assert_eq!(tunnel.t[0], 1000 + 50 * 10);
        assert_eq!(*tunnel.t.last().unwrap(), 1000 + (POINTS as u64 + 49) * 10);
        assert_eq!(tunnel.key.as_deref(), Some("key-of-198.18.2.2:4433"));
        // 1 lost of 100 sent each round.
        assert_eq!(tunnel.loss_percent.last().copied(), Some(Some(1.0)));
        assert_eq!(tunnel.send_mbps.last().copied(), Some(12.5));
    }

    #[test]
    fn the_first_sample_and_a_reconnect_have_no_loss() {
        let mut history = History::default();
        let address = "198.18.2.2:4433";
        history.record(at(0), &[peer(address, 1000, 10)]);
        history.record(at(10), &[peer(address, 2000, 30)]);
        // A new connection's counters start again from zero.
        history.record(at(20), &[peer(address, 50, 0)]);
        history.record(at(30), &[peer(address, 50, 0)]);
        let report = history.report();
        assert_eq!(
            report.tunnels[0].loss_percent,
            [None, Some(2.0), None, None]
        );
    }

    #[test]
    fn path_rates_come_from_byte_counts_between_samples() {
        let mut history = History::default();
        let with_paths = |sent: u64, received: u64| {
            let mut p = peer("198.18.2.2:4433", 0, 0);
            p.paths = Some(PathsStatus {
                mode: "failover".into(),
                duplicates_dropped: 0,
                switches: 0,
                probes_dropped: 0,
                bond: None,
                realtime: None,
                paths: vec![path(1, sent, received), path(2, 0, 0)],
            });
            vec![p]
        };
        history.record(at(100), &with_paths(0, 0));
        // 12.5 MB in 10 s: 10 Mbit/s.
        history.record(at(110), &with_paths(12_500_000, 1_250_000));
        let report = history.report();
        assert_eq!(report.paths.len(), 2);
        let first = &report.paths[0];
        assert_eq!(first.number, 1);
        assert_eq!(first.sent_mbps, [None, Some(10.0)]);
        assert_eq!(first.received_mbps, [None, Some(1.0)]);
        assert_eq!(first.rtt_ms, [Some(41.0), Some(41.0)]);
        assert_eq!(first.loss_to_peer_percent, [Some(0.5), Some(0.5)]);
        assert_eq!(report.paths[1].sent_mbps, [None, Some(0.0)]);
    }

    #[test]
    fn many_peers_never_hold_more_than_the_bound() {
        let max = 8;
        let mut history = History::new(POINTS, max);
        let peers = |from: usize, n: usize| {
            (from..from + n)
                .map(|i| peer(&format!("10.0.{}.{}:4433", i / 250, i % 250), 0, 0))
                .collect::<Vec<_>>()
        };
        // Twice the bound at once: the first ones seen are kept, round
        // after round, rather than evicting each other.
        for round in 0..5 {
            history.record(at(round * 10), &peers(0, 2 * max));
            assert_eq!(history.series_count(), max);
        }
        let report = history.report();
        assert!(report.tunnels.iter().all(|t| t.t.len() == 5));
        // Those gone make room for new ones: the unused longest go first.
        history.record(at(50), &peers(100, 3));
        assert_eq!(history.series_count(), max);
        let report = history.report();
        let fresh = report
            .tunnels
            .iter()
            .filter(|t| t.address.starts_with("10.0.0.10"))
            .count();
        assert_eq!(fresh, 3);
        // A thousand peers, one round each: still the bound.
        for round in 0..1000 {
            history.record(at(100 + round * 10), &peers(round as usize, 1));
            assert!(history.series_count() <= max);
        }
    }

    #[test]
    fn a_series_unsampled_for_an_hour_is_dropped() {
        let mut history = History::new(4, MAX_SERIES);
        history.record(at(0), &[peer("10.0.0.1:4433", 0, 0)]);
        for round in 1..4 {
            history.record(at(round * 10), &[]);
            assert_eq!(history.series_count(), 1);
        }
        history.record(at(40), &[]);
        assert_eq!(history.series_count(), 0);
    }
}
