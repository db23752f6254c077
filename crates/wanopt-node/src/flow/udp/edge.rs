//! The edge's UDP forwards: `--forward-udp LISTEN=DEST` receives datagrams
//! on LISTEN and carries each client address's as one flow to DEST through
//! the core; replies go back to the client from LISTEN.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::io::Interest;
use tokio::net::UdpSocket;
use tokio::sync::{mpsc, watch};
use tracing::{debug, info, warn};

use wanopt_proto::{OpenRepr, Services, Status, Target};

use super::{
    lock, payload_buffer,
    recv::{ask_dscp, recv_meta},
    send_datagram, Activity, FlowEnd, Sink, TunnelFlows, ONE_EXCHANGE_IDLE, OPEN_TIMEOUT,
};
use crate::class::{service_names, LivePolicy, Proto};
use crate::flow::limits::{FlowLimits, FlowPermit};
use crate::flow::FlowState;
use crate::intercept::LogLimit;
use crate::policy::{AddrRule, RuleSet};
use crate::state::NodeState;

/// A UDP forward: datagrams received on `listen` go to `destination`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UdpForward {
    /// Local UDP address to receive on.
    pub listen: SocketAddr,
    /// Where the core sends them.
    pub destination: Target,
    /// The client sources it answers (`,from=CIDR` each); empty: any.
    pub from: RuleSet,
}

impl std::str::FromStr for UdpForward {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let mut parts = s.split(',');
        let spec = parts.next().unwrap_or_default();
        let from = parts
            .map(|part| match part.strip_prefix("from=") {
                Some(rule) => rule
                    .parse::<AddrRule>()
                    .map_err(|e| format!("bad udp forward {s:?}: from={rule}: {e}")),
                None => Err(format!(
                    "bad udp forward {s:?}: {part:?} is not from=CIDR (a source the forward answers, e.g. from=10.1.0.0/16)"
                )),
            })
            .collect::<Result<Vec<_>, _>>()?;
        let forward: crate::forward::Forward = spec.parse().map_err(|e: String| {
            if e.contains("port is 0") {
                format!("bad udp forward {s:?}: the destination's port is 0 (give the port it listens on)")
            } else {
                format!("bad udp forward {s:?} (expected LISTEN=DEST[,from=CIDR...], e.g. 127.0.0.1:5353=198.51.100.7:53 or :5004=media.example:5004,from=10.1.0.0/16)")
            }
        })?;
        Ok(UdpForward {
            listen: forward.listen,
            destination: forward.destination,
            from: RuleSet(from),
        })
    }
}

/// The tunnel as UDP flows use it: the connection and its flow registry,
/// when the core carries UDP flows.
#[derive(Clone)]
pub(crate) struct UdpTunnel {
    pub(crate) conn: quinn::Connection,
    pub(crate) flows: Arc<TunnelFlows>,
}

/// Datagrams a flow queues while its stream opens.
const FLOW_QUEUE: usize = 64;
/// How long a client whose flow the core refused is refused at once.
const REFUSAL_MEMORY: Duration = Duration::from_secs(10);
/// Refusals remembered at most.
const MAX_REFUSALS: usize = 4096;

/// Which tunnel a UDP flow to a destination goes through.
pub(crate) type UdpRoute = Arc<dyn Fn(&Target) -> Option<UdpTunnel> + Send + Sync>;

/// What every forward shares.
pub(crate) struct UdpEdge {
    /// The tunnel a flow to a destination goes through, while it is up
    /// and carries UDP flows.
    pub(crate) route: UdpRoute,
    /// `Some(())` while any tunnel carries UDP flows.
    pub(crate) any_up: watch::Receiver<Option<()>>,
    pub(crate) state: Arc<NodeState>,
    pub(crate) limits: Arc<FlowLimits>,
    pub(crate) idle_timeout: Duration,
    /// The edge's policy (its traffic classes), as the last reload left it.
    pub(crate) policy: Arc<LivePolicy>,
}

/// A flow's ends on the LAN side: the client, and the address it sent to
/// (the forward's listening address, or the original destination of a
/// TPROXY'd datagram).
pub(crate) type FlowKey = (SocketAddr, SocketAddr);

/// Where a new flow's replies go out: the socket, and whether the flow
/// also reads its client's datagrams from it (a transparent flow's own
/// socket, to which the kernel delivers them once it exists).
pub(crate) type ReplySocket = (Arc<UdpSocket>, bool);

/// The live flows of one receiving socket, and the clients refused lately.
#[derive(Default)]
pub(crate) struct Dispatch {
    flows: Arc<Mutex<HashMap<FlowKey, mpsc::Sender<Vec<u8>>>>>,
    refused: Arc<Mutex<HashMap<FlowKey, Instant>>>,
}

impl Dispatch {
    /// Hands `payload` from `key`'s client to its flow, or starts a flow to
    /// `destination` whose replies go out on the socket `open` gives (its
    /// class chosen with the datagram's `dscp`).
    pub(crate) fn datagram(
        &self,
        edge: &Arc<UdpEdge>,
        key: FlowKey,
        destination: &Target,
        payload: Vec<u8>,
        dscp: Option<u8>,
        open: impl FnOnce() -> Option<ReplySocket>,
    ) {
        let existing = lock(&self.flows).get(&key).cloned();
        let payload = match existing {
            None => payload,
            Some(queue) => match queue.try_send(payload) {
                Ok(()) => return,
                Err(mpsc::error::TrySendError::Full(_)) => {
                    edge.state.udp.dropped.fetch_add(1, Ordering::Relaxed);
                    return;
                }
                // The flow ended: a new one starts below.
                Err(mpsc::error::TrySendError::Closed(payload)) => {
                    lock(&self.flows).remove(&key);
                    payload
                }
            },
        };
        self.start(edge, key, destination, payload, dscp, open);
    }

    fn start(
        &self,
        edge: &Arc<UdpEdge>,
        key: FlowKey,
        destination: &Target,
        first: Vec<u8>,
        dscp: Option<u8>,
        open: impl FnOnce() -> Option<ReplySocket>,
    ) {
        let totals = &edge.state.udp;
        let now = Instant::now();
        {
            let mut refused = lock(&self.refused);
            refused.retain(|_, at| now.saturating_duration_since(*at) < REFUSAL_MEMORY);
            if refused.contains_key(&key) {
                totals.dropped.fetch_add(1, Ordering::Relaxed);
                return;
            }
        }
        let Some(tunnel) = (edge.route)(destination) else {
            totals.dropped.fetch_add(1, Ordering::Relaxed);
            return;
        };
        let client = key.0;
        let permit = match edge.limits.admit_udp(client.ip(), now) {
            Ok(permit) => permit,
            Err(refusal) => {
                edge.state
                    .flows
                    .totals
                    .limited
                    .fetch_add(1, Ordering::Relaxed);
                if let Some(n) = refusal.log {
                    warn!(
                        "refusing new flows: {}; {n} refused since the last such line",
                        refusal.hit
                    );
                }
                totals.dropped.fetch_add(1, Ordering::Relaxed);
                return;
            }
        };
        let Some((socket, reads)) = open() else {
            totals.dropped.fetch_add(1, Ordering::Relaxed);
            return;
        };
        let (queue, datagrams) = mpsc::channel(FLOW_QUEUE);
        let _ = queue.try_send(first);
        let own = queue.clone();
        lock(&self.flows).insert(key, queue);
        let flow = FlowRun {
            edge: edge.clone(),
            tunnel,
            socket,
            reads,
            client,
            destination: destination.clone(),
            dscp,
            _permit: permit,
        };
        let flows = self.flows.clone();
        let refused = self.refused.clone();
        tokio::spawn(async move {
            if let Some(status) = flow.run(datagrams).await {
                let mut refused = lock(&refused);
                if refused.len() < MAX_REFUSALS {
                    refused.insert(key, Instant::now());
                }
                debug!("udp flow {client}: refused by the core: {status}");
            }
            // Only its own entry: a new flow of the same client may have
            // taken the place since this one's queue closed.
            let mut flows = lock(&flows);
            if flows.get(&key).is_some_and(|q| q.same_channel(&own)) {
                flows.remove(&key);
            }
        });
    }
}

/// Serves one forward until the node stops: a datagram from a source its
/// `from` list does not hold is dropped, counted and logged (a few lines
/// a second).
pub(crate) async fn serve(
    edge: Arc<UdpEdge>,
    socket: UdpSocket,
    (destination, from): (Target, RuleSet),
) {
    let socket = Arc::new(socket);
    let listen = match socket.local_addr() {
        Ok(addr) => addr,
        Err(e) => {
            warn!("udp forward to {destination}: {e}");
            return;
        }
    };
    let dispatch = Dispatch::default();
    ask_dscp(&*socket, listen.is_ipv6());
    let mut buf = payload_buffer();
    let strangers = LogLimit::with_burst(Duration::from_secs(1), 5);
    loop {
        let read = socket
            .async_io(Interest::READABLE, || recv_meta(&socket, &mut buf))
            .await;
        let got = match read {
            Ok(got) => got,
            Err(e) => {
                debug!("udp forward {listen}: {e}");
                tokio::time::sleep(Duration::from_millis(10)).await;
                continue;
            }
        };
        if !from.is_empty() && !from.matches(got.client) {
            edge.state.udp.strangers.fetch_add(1, Ordering::Relaxed);
            if let Some(n) = strangers.allow(Instant::now()) {
                warn!("udp forward {listen}: datagram from {} dropped: not in its from= list; {n} dropped since the last such line", got.client);
            }
            continue;
        }
        let payload = buf[..got.len].to_vec();
        let key = (got.client, listen);
        dispatch.datagram(&edge, key, &destination, payload, got.dscp, || {
            Some((socket.clone(), false))
        });
    }
}

/// One client's flow, from its first datagram to its end.
struct FlowRun {
    edge: Arc<UdpEdge>,
    tunnel: UdpTunnel,
    socket: Arc<UdpSocket>,
    reads: bool,
    client: SocketAddr,
    destination: Target,
    /// The DSCP of the flow's first datagram.
    dscp: Option<u8>,
    _permit: FlowPermit,
}

impl FlowRun {
    /// Runs the flow; returns the core's refusal, if it refused.
    async fn run(self, mut datagrams: mpsc::Receiver<Vec<u8>>) -> Option<Status> {
        let state = &self.edge.state;
        let UdpTunnel { conn, flows } = &self.tunnel;
        let dst = match &self.destination {
            Target::Addr(addr) => Some(*addr),
            Target::Domain(..) => None,
        };
        let policy = self.edge.policy.get();
        let treatment = policy.classes.classify(Proto::Udp, dst, self.dscp);
        let mut names = vec!["udp"];
        names.extend(service_names(treatment.services()));
        let guard = state.flows.start(
            None,
            self.client,
            self.destination.to_string(),
            names,
            Some(conn.remote_address()),
        );
        let flow = &guard.flow;
        state.count_flow(flow, conn.remote_address());
        if let Some(class) = treatment.class {
            flow.set_class(class);
        }
        let marked = treatment.realtime;
        state.udp.flows.fetch_add(1, Ordering::Relaxed);
        let header = OpenRepr {
            flow_id: flow.id,
            services: Services::UDP.with(treatment.services()),
            destination: self.destination.clone(),
            source: self.client,
        }
        .emit();
        let header = match header {
            Ok(h) => h,
            Err(e) => {
                warn!("udp flow {} to {}: {e}", flow.id, self.destination);
                return None;
            }
        };
        let (mut send, mut recv) = match tokio::time::timeout(OPEN_TIMEOUT, conn.open_bi()).await {
            Ok(Ok(pair)) => pair,
            Ok(Err(e)) => {
                info!(
                    "udp flow {} to {}: cannot open a tunnel stream: {e}",
                    flow.id, self.destination
                );
                return None;
            }
            Err(_) => {
                info!(
                    "udp flow {} to {}: the tunnel took no new stream within {OPEN_TIMEOUT:?}",
                    flow.id, self.destination
                );
                return None;
            }
        };
        let id = send.id().index();
        let activity = Activity::new();
        let sink = Sink::Client {
            socket: self.socket.clone(),
            client: self.client,
        };
        let end = FlowEnd::new(sink, flow.clone(), activity.clone());
        flows.register(id, end.clone());
        let _unregister = Unregister(flows.clone(), id);
        if send.write_all(&header).await.is_err() {
            return None;
        }
        flow.set_state(FlowState::Open);
        let seq = AtomicU32::new(0);
        let mut reply = Vec::with_capacity(wanopt_proto::stream::REPLY_LEN);
        let mut read_buf = [0u8; 64];
        let mut tick = tokio::time::interval(Duration::from_secs(1));
        let mut own_buf = match self.reads {
            true => payload_buffer(),
            false => Vec::new(),
        };
        let carry = |payload: &[u8]| {
            activity.touch();
            if let Some(wan) = send_datagram(conn, id, &seq, payload, marked, &state.udp) {
                flow.to_server
                    .fetch_add(payload.len() as u64, Ordering::Relaxed);
                flow.wan_to_server.fetch_add(wan as u64, Ordering::Relaxed);
                flow.datagrams.to_server.fetch_add(1, Ordering::Relaxed);
            }
        };
        loop {
            tokio::select! {
                datagram = datagrams.recv() => {
                    let Some(payload) = datagram else { break };
                    carry(&payload);
                }
                read = self.socket.recv(&mut own_buf), if self.reads => {
                    let Ok(n) = read else { continue };
                    carry(&own_buf[..n]);
                }
                // The core's reply, then nothing until the stream's end
                // (or reset), which is the flow's.
                read = recv.read(&mut read_buf) => {
                    let Ok(Some(n)) = read else { break };
                    if reply.len() < wanopt_proto::stream::REPLY_LEN {
                        reply.extend_from_slice(&read_buf[..n]);
                        if reply.len() >= wanopt_proto::stream::REPLY_LEN {
                            let status = wanopt_proto::Reply::new_checked(&reply[..])
                                .and_then(|view| wanopt_proto::ReplyRepr::parse(&view))
                                .map(|r| r.status)
                                .unwrap_or(Status::Unavailable);
                            if status != Status::Connected {
                                state.udp.refused.fetch_add(1, Ordering::Relaxed);
                                state.flows.totals.refused.fetch_add(1, Ordering::Relaxed);
                                return Some(status);
                            }
                        }
                    }
                }
                _ = tick.tick() => {
                    let one_exchange = flow.datagrams.to_server.load(Ordering::Relaxed) <= 1
                        && flow.datagrams.to_client.load(Ordering::Relaxed) <= 1;
                    let limit = match one_exchange {
                        true => self.edge.idle_timeout.min(ONE_EXCHANGE_IDLE),
                        false => self.edge.idle_timeout,
                    };
                    if activity.idle() >= limit {
                        debug!("udp flow {} idle for {limit:?}: ending it", flow.id);
                        break;
                    }
                }
                _ = conn.closed() => break,
            }
        }
        let _ = send.finish();
        let received = end.received();
        debug!(
            "udp flow {} {} -> {} done: {} datagrams back, {} lost",
            flow.id, self.client, self.destination, received.received, received.lost
        );
        None
    }
}

/// Takes a flow out of its tunnel's registry when dropped.
pub(crate) struct Unregister(pub(crate) Arc<TunnelFlows>, pub(crate) u64);

impl Drop for Unregister {
    fn drop(&mut self) {
        self.0.unregister(self.1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forwards_parse_or_say_why() {
        let f: UdpForward = "127.0.0.1:5353=198.51.100.7:53".parse().unwrap();
        assert_eq!(f.listen, "127.0.0.1:5353".parse().unwrap());
        assert_eq!(
            f.destination,
            Target::Addr("198.51.100.7:53".parse().unwrap())
        );
        let f: UdpForward = ":5004=media.example:5004".parse().unwrap();
        assert_eq!(f.listen.port(), 5004);
        let e = "5353".parse::<UdpForward>().unwrap_err();
        assert!(e.starts_with("bad udp forward"), "{e}");
        let f: UdpForward = "0.0.0.0:5004=10.2.0.5:5004,from=10.1.0.0/16,from=192.0.2.7"
            .parse()
            .unwrap();
        assert!(f.from.matches("10.1.3.4:40000".parse().unwrap()));
        assert!(f.from.matches("192.0.2.7:1".parse().unwrap()));
        assert!(!f.from.matches("10.2.0.1:40000".parse().unwrap()));
        for bad in [
            ":5004=10.2.0.5:5004,from=10.1.0.0/33",
            ":5004=10.2.0.5:5004,to=10.1.0.0/16",
            ":5004=10.2.0.5:5004,",
        ] {
            let e = bad.parse::<UdpForward>().unwrap_err();
            assert!(e.starts_with("bad udp forward"), "{e}");
        }
    }
}
