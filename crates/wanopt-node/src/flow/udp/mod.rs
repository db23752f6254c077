//! UDP flows through the tunnel.
//!
//! A UDP flow is one client address and one destination. The edge opens a
//! tunnel stream for it whose header asks for [`Services::UDP`]; the core
//! checks its `--allow-udp` list (never the TCP `--allow`), binds a socket
//! connected to the destination and replies. The flow's datagrams then ride
//! QUIC DATAGRAM frames (RFC 9221) in the format of
//! [`wanopt_proto::udp_flow`], tagged with the stream's index; the stream
//! stays open for the flow's life and its end is the flow's end. A flow
//! that carries nothing either way for `--udp-idle-timeout` ends.
//!
//! Datagrams are not retransmitted: a datagram QUIC loses is lost, as on
//! the path itself (the tunnel's FEC repairs most). One larger than a QUIC
//! datagram frame is cut into up to 16 fragments and put together by the
//! receiver; one larger still is refused and counted (`oversize`).
//!
//! - [`edge`]: `--forward-udp LISTEN=DEST`, one flow per client address;
//! - [`core`]: the core's side of a flow;
//! - this module: the per-tunnel registry that dispatches received
//!   datagrams to their flows, and sending.

pub mod core;
pub mod edge;
mod recv;
pub mod transparent;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use serde::Serialize;
use tokio::net::UdpSocket;
use tracing::debug;

use wanopt_proto::udp_flow::{
    split, FlowDatagram, FlowDatagramRepr, Reassembler, SeqCounter, SeqStats,
};
use wanopt_proto::Services;

use super::table::Flow;

/// `--udp-idle-timeout`'s default.
pub const DEFAULT_UDP_IDLE_TIMEOUT: Duration = Duration::from_secs(60);
/// The idle timeout of a flow that carried at most one datagram each way
/// (a query and its answer, or a datagram nobody answered), when the
/// configured one is longer: a resolver asking from a fresh port for each
/// query would otherwise hold a flow per query for a minute.
pub const ONE_EXCHANGE_IDLE: Duration = Duration::from_secs(10);
/// How long the edge waits for the tunnel to take a new flow's stream.
pub const OPEN_TIMEOUT: Duration = Duration::from_secs(5);
/// How long after its own idle timeout the core ends a flow whose edge
/// went silent without ending it.
pub const CORE_IDLE_GRACE: Duration = Duration::from_secs(10);
/// The largest UDP payload a flow carries.
const MAX_UDP_PAYLOAD: usize = 65_535;
/// Datagrams the core holds for a flow whose stream header it has not yet
/// read (the first datagrams may overtake it), per flow and in all.
const PENDING_PER_FLOW: usize = 16;
const PENDING_BYTES: usize = 256 << 10;
const PENDING_FLOWS: usize = 256;
const PENDING_TIMEOUT: Duration = Duration::from_secs(2);

/// The services a node's control hello names for UDP: this node carries
/// UDP flows (the edge opens them only to a core that says so).
pub const HELLO_SERVICES: Services = Services::UDP;

/// Where a flow's datagrams from the tunnel go.
#[derive(Debug)]
pub(crate) enum Sink {
    /// The edge: back to the client, from the forward's listening socket.
    Client {
        socket: Arc<UdpSocket>,
        client: SocketAddr,
    },
    /// The core: to the destination, on the flow's connected socket.
    Destination(Arc<UdpSocket>),
}

/// One flow as the tunnel's datagram reader sees it.
#[derive(Debug)]
pub(crate) struct FlowEnd {
    sink: Sink,
    flow: Arc<Flow>,
    /// Numbers of the datagrams that came from the tunnel.
    received: Mutex<SeqCounter>,
    /// When the flow last carried a datagram either way.
    pub(crate) activity: Activity,
}

impl FlowEnd {
    pub(crate) fn new(sink: Sink, flow: Arc<Flow>, activity: Activity) -> Arc<Self> {
        Arc::new(FlowEnd {
            sink,
            flow,
            received: Mutex::new(SeqCounter::new()),
            activity,
        })
    }

    /// What came from the tunnel so far: received, lost, reordered.
    pub(crate) fn received(&self) -> SeqStats {
        self.received
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .stats()
    }
}

/// When a flow last carried a datagram, as milliseconds since its start.
#[derive(Debug, Clone)]
pub(crate) struct Activity {
    start: Instant,
    last_ms: Arc<AtomicU64>,
}

impl Activity {
    pub(crate) fn new() -> Self {
        Activity {
            start: Instant::now(),
            last_ms: Arc::new(AtomicU64::new(0)),
        }
    }

    pub(crate) fn touch(&self) {
        let ms = self.start.elapsed().as_millis() as u64;
        self.last_ms.fetch_max(ms, Ordering::Relaxed);
    }

    /// How long since the last datagram.
    pub(crate) fn idle(&self) -> Duration {
        let last = Duration::from_millis(self.last_ms.load(Ordering::Relaxed));
        self.start.elapsed().saturating_sub(last)
    }
}

/// A node's UDP flow counters, over its life.
#[derive(Debug, Default)]
pub struct UdpTotals {
    /// UDP flows opened through the tunnel.
    pub flows: AtomicU64,
    /// Flows the core refused (allowlist, limits, destination).
    pub refused: AtomicU64,
    /// Datagrams too large for 16 tunnel datagram frames, dropped.
    pub oversize: AtomicU64,
    /// Datagrams sent as fragments.
    pub fragmented: AtomicU64,
    /// Datagrams dropped: on the way into the tunnel (the flow refused,
    /// its queue full, the tunnel's datagram buffer) or out of it (a
    /// socket's send buffer full).
    pub dropped: AtomicU64,
    /// Tunnel datagrams for no known flow, dropped.
    pub unknown_flow: AtomicU64,
    /// Transparent datagrams to a destination `--optimize` does not
    /// select (or to the edge's own socket), dropped.
    pub unmatched: AtomicU64,
    /// Datagrams from a source a forward's `from=` list does not hold,
    /// dropped.
    pub strangers: AtomicU64,
}

/// UDP counters as `/status` shows them.
#[derive(Debug, Clone, Copy, Default, Serialize, serde::Deserialize, PartialEq, Eq)]
pub struct UdpSnapshot {
    /// UDP flows opened through the tunnel.
    pub flows: u64,
    /// Flows the core refused.
    pub refused: u64,
    /// Datagrams too large to carry, dropped.
    pub oversize: u64,
    /// Datagrams sent as fragments.
    pub fragmented: u64,
    /// Datagrams dropped on the way into the tunnel.
    pub dropped: u64,
    /// Tunnel datagrams for no known flow.
    pub unknown_flow: u64,
    /// Transparent datagrams no `--optimize` rule selects, dropped.
    #[serde(default)]
    pub unmatched: u64,
    /// Datagrams from a source outside a forward's `from=` list, dropped.
    #[serde(default)]
    pub strangers: u64,
}

impl UdpTotals {
    /// The counters now.
    pub fn snapshot(&self) -> UdpSnapshot {
        let load = |c: &AtomicU64| c.load(Ordering::Relaxed);
        UdpSnapshot {
            flows: load(&self.flows),
            refused: load(&self.refused),
            oversize: load(&self.oversize),
            fragmented: load(&self.fragmented),
            dropped: load(&self.dropped),
            unknown_flow: load(&self.unknown_flow),
            unmatched: load(&self.unmatched),
            strangers: load(&self.strangers),
        }
    }
}

/// Datagrams (number, payload) held for one flow, and since when.
type Held = (Instant, Vec<(u32, Vec<u8>)>);

/// Datagrams that came for a flow before its stream's header was read.
#[derive(Debug, Default)]
struct Pending {
    flows: HashMap<u64, Held>,
    bytes: usize,
}

/// Where a datagram from the tunnel goes.
enum Route {
    Flow(Arc<FlowEnd>, Vec<u8>),
    Held,
    Unknown,
}

/// One tunnel's UDP flows, by the index of their stream.
#[derive(Debug, Default)]
pub(crate) struct TunnelFlows {
    ends: Mutex<HashMap<u64, Arc<FlowEnd>>>,
    /// The core's datagrams for flows not yet registered.
    pending: Mutex<Pending>,
    /// Whether datagrams for unknown flows are held (the core) or dropped.
    hold_unknown: bool,
}

impl TunnelFlows {
    /// A registry; `hold_unknown` for the core, whose first datagrams of a
    /// flow may arrive before the stream that opens it.
    pub(crate) fn new(hold_unknown: bool) -> Arc<Self> {
        Arc::new(TunnelFlows {
            hold_unknown,
            ..TunnelFlows::default()
        })
    }

    /// Registers the flow of stream index `id`; returns the datagrams
    /// (number, payload) that were held for it and are not yet too old.
    /// The pending table's lock is taken first, here as in [`Self::route`],
    /// so a datagram is either held before the flow is registered (and
    /// returned here) or finds it.
    pub(crate) fn register(&self, id: u64, end: Arc<FlowEnd>) -> Vec<(u32, Vec<u8>)> {
        let mut pending = lock(&self.pending);
        lock(&self.ends).insert(id, end);
        match pending.flows.remove(&id) {
            Some((since, held)) => {
                pending.bytes -= held.iter().map(|(_, d)| d.len()).sum::<usize>();
                if since.elapsed() < PENDING_TIMEOUT {
                    held
                } else {
                    Vec::new()
                }
            }
            None => Vec::new(),
        }
    }

    /// The flow of stream index `id`, or the datagram held for it (the
    /// core), or neither.
    fn route(&self, id: u64, seq: u32, payload: Vec<u8>, now: Instant) -> Route {
        let mut pending = lock(&self.pending);
        if let Some(end) = lock(&self.ends).get(&id) {
            return Route::Flow(end.clone(), payload);
        }
        if self.hold_unknown && Self::hold(&mut pending, id, seq, payload, now) {
            Route::Held
        } else {
            Route::Unknown
        }
    }

    pub(crate) fn unregister(&self, id: u64) {
        lock(&self.ends).remove(&id);
    }

    /// Holds a datagram for a flow not yet registered, within bounds;
    /// whether it was held.
    fn hold(pending: &mut Pending, id: u64, seq: u32, payload: Vec<u8>, now: Instant) -> bool {
        let Pending { flows, bytes } = pending;
        flows.retain(|_, (since, held)| {
            let keep = now.saturating_duration_since(*since) < PENDING_TIMEOUT;
            if !keep {
                *bytes -= held.iter().map(|(_, d)| d.len()).sum::<usize>();
            }
            keep
        });
        if *bytes + payload.len() > PENDING_BYTES
            || !flows.contains_key(&id) && flows.len() >= PENDING_FLOWS
        {
            return false;
        }
        let (_, held) = flows.entry(id).or_insert_with(|| (now, Vec::new()));
        if held.len() >= PENDING_PER_FLOW {
            return false;
        }
        *bytes += payload.len();
        held.push((seq, payload));
        true
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Reads a tunnel's datagrams until it closes and hands each UDP payload
/// to its flow's sink.
pub(crate) async fn read_datagrams(
    conn: quinn::Connection,
    flows: Arc<TunnelFlows>,
    totals: Arc<UdpTotals>,
) {
    let mut reassembler = Reassembler::new();
    loop {
        let datagram = match conn.read_datagram().await {
            Ok(d) => d,
            Err(e) => {
                debug!("udp flows of {}: {e}", conn.remote_address());
                return;
            }
        };
        let Ok(view) = FlowDatagram::new_checked(&datagram[..]) else {
            totals.unknown_flow.fetch_add(1, Ordering::Relaxed);
            continue;
        };
        let now = Instant::now();
        let Some(payload) = reassembler.handle(now, &view) else {
            continue;
        };
        match flows.route(view.flow(), view.seq(), payload, now) {
            Route::Flow(end, payload) => receive(&end, view.flow(), view.seq(), &payload, &totals),
            Route::Held => {}
            Route::Unknown => {
                totals.unknown_flow.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
}

/// Counts datagram `seq` of flow `id` from the tunnel and delivers it
/// unless it is a copy.
pub(crate) fn receive(end: &FlowEnd, id: u64, seq: u32, payload: &[u8], totals: &UdpTotals) {
    let (new, lost) = {
        let mut received = lock(&end.received);
        (received.record(seq), received.stats().lost)
    };
    let counters = &end.flow.datagrams;
    match end.sink {
        Sink::Client { .. } => counters.lost_to_client.store(lost, Ordering::Relaxed),
        Sink::Destination(_) => counters.lost_to_server.store(lost, Ordering::Relaxed),
    }
    if new {
        // On the wire: the payload and one header (a fragmented
        // datagram's other headers are not counted).
        let header = FlowDatagramRepr {
            flow: id,
            seq,
            fragment: None,
        }
        .header_len();
        deliver(end, payload, payload.len() + header, totals);
    }
}

/// Writes one payload from the tunnel to its flow's socket; counts it
/// dropped if the socket cannot take it now.
fn deliver(end: &FlowEnd, payload: &[u8], wire: usize, totals: &UdpTotals) {
    // Never waits: one tunnel's reader serves all its flows, and a socket
    // whose send buffer is full drops the datagram, as UDP does.
    // The send is made on the socket itself: tokio's `try_send*` answer
    // `WouldBlock` until its reactor has seen the socket writable, which a
    // socket that only ever received never is.
    let sent = match &end.sink {
        Sink::Client { socket, client } => {
            socket2::SockRef::from(&**socket).send_to(payload, &(*client).into())
        }
        Sink::Destination(socket) => socket2::SockRef::from(&**socket).send(payload),
    };
    if sent.is_err() {
        totals.dropped.fetch_add(1, Ordering::Relaxed);
    } else {
        end.activity.touch();
        let flow = &end.flow;
        let (lan, wan, datagrams) = match end.sink {
            Sink::Client { .. } => (
                &flow.to_client,
                &flow.wan_to_client,
                &flow.datagrams.to_client,
            ),
            Sink::Destination(_) => (
                &flow.to_server,
                &flow.wan_to_server,
                &flow.datagrams.to_server,
            ),
        };
        datagrams.fetch_add(1, Ordering::Relaxed);
        lan.fetch_add(payload.len() as u64, Ordering::Relaxed);
        wan.fetch_add(wire as u64, Ordering::Relaxed);
    }
}

/// Sends one UDP payload of stream index `id` into the tunnel, numbered
/// from `seq`, `marked` when the flow is real-time (duplicated when the
/// paths duplicate, in FEC's call strand); the bytes of its frames (headers included), or `None` if
/// it was dropped (counted).
pub(crate) fn send_datagram(
    conn: &quinn::Connection,
    id: u64,
    seq: &AtomicU32,
    payload: &[u8],
    marked: bool,
    totals: &UdpTotals,
) -> Option<usize> {
    let Some(frame) = conn.max_datagram_size() else {
        totals.dropped.fetch_add(1, Ordering::Relaxed);
        return None;
    };
    // A number is taken only by a datagram that goes out (one flow's
    // datagrams are sent by one task): the peer counts a gap as loss.
    let number = seq.load(Ordering::Relaxed);
    let mut frames = Vec::new();
    match split(id, number, payload, frame, &mut frames) {
        Ok(1) => {}
        Ok(_) => {
            totals.fragmented.fetch_add(1, Ordering::Relaxed);
        }
        Err(_) => {
            totals.oversize.fetch_add(1, Ordering::Relaxed);
            return None;
        }
    }
    // Dropped here, counted, rather than by quinn, which would drop the
    // oldest datagrams queued (any flow's) without a word.
    let bytes: usize = frames.iter().map(Vec::len).sum();
    if conn.datagram_send_buffer_space() < bytes {
        totals.dropped.fetch_add(1, Ordering::Relaxed);
        return None;
    }
    seq.store(number.wrapping_add(1), Ordering::Relaxed);
    for frame in frames {
        if conn
            .send_datagram_marked(Bytes::from(frame), marked)
            .is_err()
        {
            totals.dropped.fetch_add(1, Ordering::Relaxed);
            return None;
        }
    }
    Some(bytes)
}

/// A receive buffer for one UDP payload.
pub(crate) fn payload_buffer() -> Vec<u8> {
    vec![0u8; MAX_UDP_PAYLOAD]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_core_holds_early_datagrams_within_bounds() {
        let flows = TunnelFlows::new(true);
        let now = Instant::now();
        let held = |id, seq, len, at| matches!(flows.route(id, seq, vec![0; len], at), Route::Held);
        for i in 0..PENDING_PER_FLOW {
            assert!(held(4, i as u32, 100, now));
        }
        assert!(!held(4, 99, 100, now), "per flow");
        assert!(!held(5, 0, PENDING_BYTES, now), "in all");
        // They expire.
        assert!(held(6, 0, 10, now + PENDING_TIMEOUT));
        assert_eq!(lock(&flows.pending).bytes, 10);
    }

    #[tokio::test]
    async fn a_datagram_held_before_its_flow_registers_is_handed_to_it_with_its_number() {
        let flows = TunnelFlows::new(true);
        let now = Instant::now();
        assert!(matches!(
            flows.route(9, 7, b"early".to_vec(), now),
            Route::Held
        ));
        let table = std::sync::Arc::new(crate::flow::FlowTable::default());
        let guard = table.start(
            None,
            "127.0.0.1:1".parse().unwrap(),
            "x".into(),
            vec!["udp"],
            None,
        );
        let socket = Arc::new(UdpSocket::bind("127.0.0.1:0").await.unwrap());
        let end = FlowEnd::new(
            Sink::Destination(socket),
            guard.flow.clone(),
            Activity::new(),
        );
        assert_eq!(flows.register(9, end), vec![(7, b"early".to_vec())]);
        assert_eq!(lock(&flows.pending).bytes, 0);
        // Registered: the next one goes to the flow, not the table.
        assert!(
            matches!(flows.route(9, 8, b"next".to_vec(), now), Route::Flow(_, p) if p == b"next")
        );
        // A flow that never registers: unknown on the edge.
        let edge = TunnelFlows::new(false);
        assert!(matches!(edge.route(3, 0, vec![1], now), Route::Unknown));
    }
}
