//! The live flow table, and the pumps that carry one TCP flow over one QUIC
//! stream (or over a second TCP connection when a flow is passed through).
//!
//! TCP semantics survive the split: EOF on one side is a stream finish (a
//! half-close) on the other while the opposite direction keeps flowing; a
//! reset or error on either side becomes a stream reset plus STOP_SENDING,
//! which the far node turns back into a TCP reset.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use serde::Serialize;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, Semaphore};

use wanopt_codec::{Decoder, Encoder};

pub use crate::abort::{reset_tcp, Abort};
use crate::dupsock::StreamEnds;
use crate::reassembly::Reassembler;

/// Bytes read from a socket at a time. Large enough to amortise per-call
/// costs, small enough that a flow never holds much beyond the stream window.
pub const CHUNK: usize = 128 * 1024;

/// The flow table gives freed memory back to the system once this many
/// flows ended since the most it held.
const TRIM_AFTER_FLOWS: usize = 1000;

/// A flow's first read buffer: an idle or interactive flow holds no more
/// than this per direction (10,000 idle flows held 128 KiB each).
pub const FIRST_READ: usize = 4 * 1024;

/// A flow's buffer for reads from its TCP socket: [`FIRST_READ`] while the
/// flow is idle or interactive, [`CHUNK`] once a read fills it (a bulk
/// transfer), small again when the caller finds the flow quiet.
#[derive(Debug)]
pub(crate) struct ReadBuffer(Vec<u8>);

impl ReadBuffer {
    pub(crate) fn new() -> ReadBuffer {
        ReadBuffer(vec![0; FIRST_READ])
    }

    /// Where the next read goes.
    pub(crate) fn space(&mut self) -> &mut [u8] {
        &mut self.0
    }

    /// The bytes of a read of `n`; a read that filled a small buffer makes
    /// it [`CHUNK`] for the next.
    pub(crate) fn read(&mut self, n: usize) -> &[u8] {
        if n == self.0.len() && n < CHUNK {
            // Copy what was read: the caller uses it now.
            let mut big = vec![0; CHUNK];
            big[..n].copy_from_slice(&self.0[..n]);
            self.0 = big;
        }
        &self.0[..n]
    }

    /// Whether it holds more than [`FIRST_READ`].
    pub(crate) fn is_large(&self) -> bool {
        self.0.len() > FIRST_READ
    }

    /// Back to [`FIRST_READ`] (the flow went quiet).
    pub(crate) fn shrink(&mut self) {
        if self.is_large() {
            *self = ReadBuffer::new();
        }
    }
}

/// Where a flow is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
#[repr(u8)]
pub enum FlowState {
    /// Waiting for the tunnel or for the far side to connect.
    Connecting = 0,
    /// Data flows both ways.
    Open = 1,
    /// The client finished sending; the server may still send.
    ClientDone = 2,
    /// The server finished sending; the client may still send.
    ServerDone = 3,
    /// Ending.
    Closing = 4,
}

impl FlowState {
    fn from_u8(raw: u8) -> FlowState {
        match raw {
            0 => FlowState::Connecting,
            1 => FlowState::Open,
            2 => FlowState::ClientDone,
            3 => FlowState::ServerDone,
            _ => FlowState::Closing,
        }
    }
}

/// One flow's live counters.
#[derive(Debug)]
pub struct Flow {
    /// Identifier, unique within the node's run.
    pub id: u64,
    /// The client's address.
    pub source: SocketAddr,
    /// The destination, as requested.
    pub destination: String,
    /// Services applied: `tcp-opt` for tunnelled flows, `pass` for flows
    /// carried directly.
    pub services: Vec<&'static str>,
    /// The tunnel peer carrying the flow, if any.
    pub peer: Option<SocketAddr>,
    state: AtomicU8,
    /// Payload bytes from client to server.
    pub to_server: AtomicU64,
    /// Payload bytes from server to client.
    pub to_client: AtomicU64,
    /// Bytes of this flow on the WAN (tunnel stream, after data reduction)
    /// from client to server.
    pub wan_to_server: AtomicU64,
    /// WAN bytes from server to client.
    pub wan_to_client: AtomicU64,
    /// Data-reduction counters (zero without `reduce`).
    pub reduce: ReduceCounters,
    started: Instant,
    rate: Mutex<RateSample>,
    /// Told when the flow has carried no byte either way for the node's
    /// `--flow-idle-timeout`: its pumps end it with [`Abort::Idle`].
    idle: tokio::sync::Notify,
}

#[derive(Debug, Default, Clone, Copy)]
struct RateSample {
    at: Option<Instant>,
    /// When the flow last carried a byte (as sampled).
    active_at: Option<Instant>,
    to_server: u64,
    to_client: u64,
    bps_to_server: f64,
    bps_to_client: f64,
}

impl Flow {
    /// Current state.
    pub fn state(&self) -> FlowState {
        FlowState::from_u8(self.state.load(Ordering::Relaxed))
    }

    /// Moves to `state`; a half-close on both sides becomes `Closing`.
    pub fn set_state(&self, state: FlowState) {
        let _ = self
            .state
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |old| {
                let old = FlowState::from_u8(old);
                let new = match (old, state) {
                    (FlowState::ClientDone, FlowState::ServerDone)
                    | (FlowState::ServerDone, FlowState::ClientDone) => FlowState::Closing,
                    (FlowState::Closing, _) => FlowState::Closing,
                    (_, s) => s,
                };
                Some(new as u8)
            });
    }

    /// Updates the rate estimate from the byte counters (called about once a
    /// second by the table's sampler).
    /// Samples the flow's rates; how long it has carried no byte.
    fn sample(&self, now: Instant) -> Duration {
        let to_server = self.to_server.load(Ordering::Relaxed);
        let to_client = self.to_client.load(Ordering::Relaxed);
        let mut rate = self.rate.lock().unwrap_or_else(|e| e.into_inner());
        if rate.at.is_none() || (to_server, to_client) != (rate.to_server, rate.to_client) {
            rate.active_at = Some(now);
        }
        let idle = now.saturating_duration_since(rate.active_at.unwrap_or(self.started));
        let since = rate.at.unwrap_or(self.started);
        let secs = now.saturating_duration_since(since).as_secs_f64();
        if secs > 0.0 {
            rate.bps_to_server = (to_server - rate.to_server.min(to_server)) as f64 * 8.0 / secs;
            rate.bps_to_client = (to_client - rate.to_client.min(to_client)) as f64 * 8.0 / secs;
        }
        rate.at = Some(now);
        rate.to_server = to_server;
        rate.to_client = to_client;
        idle
    }

    /// Resolves to [`Abort::Idle`] once the node's sampler finds the flow
    /// idle for its `--flow-idle-timeout`.
    async fn idle_out(&self) -> Result<(), Abort> {
        self.idle.notified().await;
        Err(Abort::Idle)
    }

    /// A serializable snapshot.
    pub fn info(&self, now: Instant) -> FlowInfo {
        let rate = *self.rate.lock().unwrap_or_else(|e| e.into_inner());
        let reduce = self.reduce.load();
        FlowInfo {
            id: self.id,
            source: self.source.to_string(),
            destination: self.destination.clone(),
            state: self.state(),
            bytes_to_server: self.to_server.load(Ordering::Relaxed),
            bytes_to_client: self.to_client.load(Ordering::Relaxed),
            wan_bytes_to_server: self.wan_to_server.load(Ordering::Relaxed),
            wan_bytes_to_client: self.wan_to_client.load(Ordering::Relaxed),
            reduction: reduction(
                self.to_server.load(Ordering::Relaxed) + self.to_client.load(Ordering::Relaxed),
                self.wan_to_server.load(Ordering::Relaxed)
                    + self.wan_to_client.load(Ordering::Relaxed),
            ),
            references: reduce.references,
            cache_hits: reduce.cache_hits,
            cache_misses: reduce.cache_misses,
            repairs: reduce.repairs,
            pieces: reduce.pieces,
            rate_to_server_bps: rate.bps_to_server.round() as u64,
            rate_to_client_bps: rate.bps_to_client.round() as u64,
            age_secs: now.saturating_duration_since(self.started).as_secs_f64(),
            services: self.services.iter().map(|s| s.to_string()).collect(),
            peer: self.peer.map(|p| p.to_string()),
        }
    }
}

/// What `/flows` returns for one flow.
#[derive(Debug, Clone, Serialize, serde::Deserialize)]
pub struct FlowInfo {
    /// Identifier.
    pub id: u64,
    /// Client address.
    pub source: String,
    /// Destination.
    pub destination: String,
    /// State.
    pub state: FlowState,
    /// Payload bytes client to server.
    pub bytes_to_server: u64,
    /// Payload bytes server to client.
    pub bytes_to_client: u64,
    /// WAN bytes client to server (after data reduction).
    #[serde(default)]
    pub wan_bytes_to_server: u64,
    /// WAN bytes server to client (after data reduction).
    #[serde(default)]
    pub wan_bytes_to_client: u64,
    /// Fraction of LAN bytes that did not cross the WAN (0 without `reduce`;
    /// negative when framing cost more than reduction saved).
    #[serde(default)]
    pub reduction: f64,
    /// Chunks sent by this node as references.
    #[serde(default)]
    pub references: u64,
    /// References resolved by this node from its cache.
    #[serde(default)]
    pub cache_hits: u64,
    /// References and spans this node's cache could not resolve; it asked
    /// the peer for the chunks.
    #[serde(default)]
    pub cache_misses: u64,
    /// Chunks and chunk lists this node sent again at the peer's request.
    #[serde(default)]
    pub repairs: u64,
    /// Pieces sent: held bytes of a trickling source sent before their
    /// chunk's end.
    #[serde(default)]
    pub pieces: u64,
    /// Recent rate client to server, bits per second.
    pub rate_to_server_bps: u64,
    /// Recent rate server to client, bits per second.
    pub rate_to_client_bps: u64,
    /// Seconds since the flow started.
    pub age_secs: f64,
    /// Services applied.
    pub services: Vec<String>,
    /// Tunnel peer, if tunnelled.
    pub peer: Option<String>,
}

impl<'de> serde::Deserialize<'de> for FlowState {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        Ok(match s.as_str() {
            "connecting" => FlowState::Connecting,
            "open" => FlowState::Open,
            "client-done" => FlowState::ClientDone,
            "server-done" => FlowState::ServerDone,
            _ => FlowState::Closing,
        })
    }
}

/// Node-wide totals, kept after flows end.
#[derive(Debug, Default)]
pub struct Totals {
    /// Flows ever started.
    pub flows: AtomicU64,
    /// Flows that were refused or reset before carrying data end to end.
    pub refused: AtomicU64,
    /// Flows passed straight through (not optimized).
    pub passed_through: AtomicU64,
    /// Flows refused because the node or their source carried the most
    /// flows allowed (`--max-flows`, `--max-flows-per-source`).
    pub limited: AtomicU64,
    /// Flows that ran the `reduce` service.
    pub reduced: AtomicU64,
    /// Bytes client to server of finished flows.
    pub to_server: AtomicU64,
    /// Bytes server to client of finished flows.
    pub to_client: AtomicU64,
    /// WAN bytes client to server of finished flows.
    pub wan_to_server: AtomicU64,
    /// WAN bytes server to client of finished flows.
    pub wan_to_client: AtomicU64,
    /// Data-reduction counters of finished flows.
    pub reduce: ReduceCounters,
    /// Flows reset, by reason.
    pub resets: crate::abort::ResetCounters,
}

/// Byte counters over all flows, live and finished.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ByteTotals {
    /// LAN payload bytes client to server.
    pub to_server: u64,
    /// LAN payload bytes server to client.
    pub to_client: u64,
    /// WAN bytes client to server.
    pub wan_to_server: u64,
    /// WAN bytes server to client.
    pub wan_to_client: u64,
    /// Data-reduction counters.
    pub reduce: ReduceTotals,
}

/// A flow's data-reduction counters, or those of a node's finished flows.
/// The flow's pumps copy them from its encoder's and decoder's stats.
#[derive(Debug, Default)]
pub struct ReduceCounters {
    references: AtomicU64,
    pieces: AtomicU64,
    cache_hits: AtomicU64,
    cache_misses: AtomicU64,
    repairs: AtomicU64,
    compressor_bytes: AtomicU64,
    decompressor_bytes: AtomicU64,
}

/// A snapshot of [`ReduceCounters`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReduceTotals {
    /// Chunks this node's encoders sent as references to the peer's cache.
    pub references: u64,
    /// Pieces this node's encoders sent: held bytes of a trickling source
    /// sent before their chunk's end (`Encoder::send_held`).
    pub pieces: u64,
    /// References this node's decoders resolved from its cache.
    pub cache_hits: u64,
    /// References and spans this node's decoders could not resolve from its
    /// cache and asked the peer for (`NeedChunk`, `NeedSpan`).
    pub cache_misses: u64,
    /// Chunks and chunk lists this node's encoders sent again at the peer's
    /// request (`Repair`, `SpanList`).
    pub repairs: u64,
    /// Memory held now by the stream compressors (zstd or LZMA2) of live
    /// flows (a gauge: finished flows hold none).
    pub compressor_bytes: u64,
    /// Memory held now by the stream decompression contexts of live
    /// flows (a gauge, freed when the peer's encoder frees its compressor).
    pub decompressor_bytes: u64,
}

impl ReduceTotals {
    fn plus(self, other: ReduceTotals) -> ReduceTotals {
        ReduceTotals {
            references: self.references + other.references,
            pieces: self.pieces + other.pieces,
            cache_hits: self.cache_hits + other.cache_hits,
            cache_misses: self.cache_misses + other.cache_misses,
            repairs: self.repairs + other.repairs,
            compressor_bytes: self.compressor_bytes + other.compressor_bytes,
            decompressor_bytes: self.decompressor_bytes + other.decompressor_bytes,
        }
    }
}

impl ReduceCounters {
    /// The current values.
    pub fn load(&self) -> ReduceTotals {
        let load = |a: &AtomicU64| a.load(Ordering::Relaxed);
        ReduceTotals {
            references: load(&self.references),
            pieces: load(&self.pieces),
            cache_hits: load(&self.cache_hits),
            cache_misses: load(&self.cache_misses),
            repairs: load(&self.repairs),
            compressor_bytes: load(&self.compressor_bytes),
            decompressor_bytes: load(&self.decompressor_bytes),
        }
    }

    /// Adds a finished flow's counters (not its gauge).
    fn add(&self, t: ReduceTotals) {
        self.references.fetch_add(t.references, Ordering::Relaxed);
        self.pieces.fetch_add(t.pieces, Ordering::Relaxed);
        self.cache_hits.fetch_add(t.cache_hits, Ordering::Relaxed);
        self.cache_misses
            .fetch_add(t.cache_misses, Ordering::Relaxed);
        self.repairs.fetch_add(t.repairs, Ordering::Relaxed);
    }

    /// Takes the encoder side's counters from the flow's encoder.
    pub fn record_encoder(&self, encoder: &Encoder) {
        let stats = encoder.stats();
        self.compressor_bytes
            .store(encoder.compressor_bytes() as u64, Ordering::Relaxed);
        self.references.store(stats.references, Ordering::Relaxed);
        self.pieces.store(stats.pieces, Ordering::Relaxed);
        self.repairs.store(
            stats.repairs_sent + stats.span_lists_sent,
            Ordering::Relaxed,
        );
    }

    /// Takes the decoder side's counters from the flow's decoder.
    pub fn record_decoder(&self, decoder: &Decoder) {
        let stats = decoder.stats();
        self.decompressor_bytes
            .store(decoder.decompressor_bytes() as u64, Ordering::Relaxed);
        self.cache_hits.store(stats.cache_hits, Ordering::Relaxed);
        self.cache_misses
            .store(stats.cache_misses + stats.span_misses, Ordering::Relaxed);
    }
}

/// Fraction of `lan` bytes saved on the WAN.
pub fn reduction(lan: u64, wan: u64) -> f64 {
    if lan == 0 {
        0.0
    } else {
        1.0 - wan as f64 / lan as f64
    }
}

/// The table of live flows.
#[derive(Debug, Default)]
pub struct FlowTable {
    next_id: AtomicU64,
    flows: Mutex<HashMap<u64, Arc<Flow>>>,
    /// `--flow-idle-timeout` in milliseconds; 0: flows never time out.
    idle_timeout_ms: AtomicU64,
    /// Totals over the node's life.
    pub totals: Totals,
}

/// Removes its flow from the table when dropped, folding its bytes into the
/// totals.
#[derive(Debug)]
pub struct FlowGuard {
    table: Arc<FlowTable>,
    /// The flow.
    pub flow: Arc<Flow>,
}

impl Drop for FlowGuard {
    fn drop(&mut self) {
        let mut flows = self.table.flows.lock().unwrap_or_else(|e| e.into_inner());
        flows.remove(&self.flow.id);
        let (flow, totals) = (&self.flow, &self.table.totals);
        for (from, to) in [
            (&flow.to_server, &totals.to_server),
            (&flow.to_client, &totals.to_client),
            (&flow.wan_to_server, &totals.wan_to_server),
            (&flow.wan_to_client, &totals.wan_to_client),
        ] {
            to.fetch_add(from.load(Ordering::Relaxed), Ordering::Relaxed);
        }
        totals.reduce.add(flow.reduce.load());
    }
}

impl FlowTable {
    /// Registers a new flow. `id` is taken from the table unless given (the
    /// core reuses the edge's identifier so both tables agree).
    pub fn start(
        self: &Arc<Self>,
        id: Option<u64>,
        source: SocketAddr,
        destination: String,
        services: Vec<&'static str>,
        peer: Option<SocketAddr>,
    ) -> FlowGuard {
        let id = id.unwrap_or_else(|| self.next_id.fetch_add(1, Ordering::Relaxed) + 1);
        self.totals.flows.fetch_add(1, Ordering::Relaxed);
        if services.contains(&"reduce") {
            self.totals.reduced.fetch_add(1, Ordering::Relaxed);
        }
        let mut flows = self.flows.lock().unwrap_or_else(|e| e.into_inner());
        // Two edges may use the same id on a core; keep both by nudging.
        let mut key = id;
        while flows.contains_key(&key) {
            key = key.wrapping_add(1 << 48);
        }
        let flow = Arc::new(Flow {
            id: key,
            source,
            destination,
            services,
            peer,
            state: AtomicU8::new(FlowState::Connecting as u8),
            to_server: AtomicU64::new(0),
            to_client: AtomicU64::new(0),
            wan_to_server: AtomicU64::new(0),
            wan_to_client: AtomicU64::new(0),
            reduce: ReduceCounters::default(),
            started: Instant::now(),
            rate: Mutex::new(RateSample::default()),
            idle: tokio::sync::Notify::new(),
        });
        flows.insert(key, flow.clone());
        drop(flows);
        FlowGuard {
            table: self.clone(),
            flow,
        }
    }

    /// The live flows, taken out of the lock.
    fn live(&self) -> Vec<Arc<Flow>> {
        self.flows
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .values()
            .cloned()
            .collect()
    }

    /// Number of live flows.
    pub fn active(&self) -> usize {
        self.flows.lock().unwrap_or_else(|e| e.into_inner()).len()
    }

    /// Snapshot of every live flow, oldest first.
    pub fn snapshot(&self) -> Vec<FlowInfo> {
        let now = Instant::now();
        let flows = self.live();
        let mut infos: Vec<FlowInfo> = flows.iter().map(|f| f.info(now)).collect();
        infos.sort_by_key(|f| f.id);
        infos
    }

    /// Byte counters over all flows, live and finished.
    pub fn bytes(&self) -> ByteTotals {
        let flows = self.flows.lock().unwrap_or_else(|e| e.into_inner());
        let load = |a: &AtomicU64| a.load(Ordering::Relaxed);
        let t = &self.totals;
        let mut sum = ByteTotals {
            to_server: load(&t.to_server),
            to_client: load(&t.to_client),
            wan_to_server: load(&t.wan_to_server),
            wan_to_client: load(&t.wan_to_client),
            reduce: t.reduce.load(),
        };
        for f in flows.values() {
            sum.to_server += load(&f.to_server);
            sum.to_client += load(&f.to_client);
            sum.wan_to_server += load(&f.wan_to_server);
            sum.wan_to_client += load(&f.wan_to_client);
            sum.reduce = sum.reduce.plus(f.reduce.load());
        }
        sum
    }

    /// Refreshes every flow's rate estimate once a second, forever.
    pub async fn run_sampler(self: Arc<Self>) {
        let mut tick = tokio::time::interval(Duration::from_secs(1));
        let mut peak = 0;
        loop {
            tick.tick().await;
            let now = Instant::now();
            let timeout = self.idle_timeout();
            let live = self.live();
            for flow in &live {
                let idle = flow.sample(now);
                if timeout.is_some_and(|t| idle >= t) {
                    flow.idle.notify_one();
                }
            }
            // Many flows ended since the most there were: give their
            // memory back (the allocator keeps it in its arenas).
            peak = peak.max(live.len());
            if peak - live.len() >= TRIM_AFTER_FLOWS {
                peak = live.len();
                drop(live);
                self.flows
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .shrink_to_fit();
                let _ = tokio::task::spawn_blocking(crate::process::release_free_memory).await;
            }
        }
    }

    /// Flows that carry no byte either way for `timeout` are reset (by
    /// the sampler, within a second of it); `None`: never.
    pub fn set_idle_timeout(&self, timeout: Option<Duration>) {
        let ms = timeout.map_or(0, |t| t.as_millis().clamp(1, u64::MAX as u128) as u64);
        self.idle_timeout_ms.store(ms, Ordering::Relaxed);
    }

    /// The idle timeout, if any.
    pub fn idle_timeout(&self) -> Option<Duration> {
        match self.idle_timeout_ms.load(Ordering::Relaxed) {
            0 => None,
            ms => Some(Duration::from_millis(ms)),
        }
    }
}

/// Which end of the flow a node's TCP socket faces.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Facing {
    /// The TCP socket is the client's (edge side).
    Client,
    /// The TCP socket is the server's (core side).
    Server,
}

async fn tcp_to_stream(
    rd: &mut (impl AsyncRead + Unpin),
    send: &mut quinn::SendStream,
    dir: &Direction<'_>,
    flow: &Flow,
    ends: &StreamEnds,
) -> Result<(), Abort> {
    loop {
        let mut buf = BytesMut::with_capacity(CHUNK);
        match rd.read_buf(&mut buf).await {
            Ok(0) => {
                let end = ends.expect();
                let _ = send.finish();
                end.release_when(send.stopped());
                flow.set_state(dir.done);
                return Ok(());
            }
            Ok(n) => {
                dir.lan.fetch_add(n as u64, Ordering::Relaxed);
                dir.wan.fetch_add(n as u64, Ordering::Relaxed);
                send.write_chunk(buf.freeze())
                    .await
                    .map_err(Abort::from_write)?;
            }
            Err(e) => return Err(Abort::Local(e.to_string())),
        }
    }
}

/// Reads the core's reply at the start of a stream (edge side); returns
/// its length, or the refusal.
pub(crate) async fn read_reply(recv: &mut quinn::RecvStream) -> Result<u64, Abort> {
    let mut reply = [0u8; wanopt_proto::stream::REPLY_LEN];
    recv.read_exact(&mut reply)
        .await
        .map_err(|e| Abort::Remote(format!("no reply from the core: {e}")))?;
    let status = wanopt_proto::Reply::new_checked(&reply[..])
        .and_then(|view| wanopt_proto::ReplyRepr::parse(&view))
        .map_err(|e| Abort::Remote(format!("bad reply from the core: {e}")))?
        .status;
    if status != wanopt_proto::Status::Connected {
        return Err(Abort::Refused(status));
    }
    Ok(reply.len() as u64)
}

/// Reads the core's reply first if `expect_reply` (edge side), then returns
/// the reassembler for the payload, which starts at stream offset `start`
/// plus the reply. Payload is read unordered: that keeps quinn's receive
/// buffer from fragmenting under heavy loss; the reassembler restores the
/// order (see `reassembly`).
pub(crate) async fn payload_reassembler(
    recv: &mut quinn::RecvStream,
    start: u64,
    expect_reply: bool,
) -> Result<Reassembler, Abort> {
    let reply = if expect_reply {
        read_reply(recv).await?
    } else {
        0
    };
    Ok(Reassembler::new(start + reply))
}

/// Counters and end state of one direction of a flow.
pub(crate) struct Direction<'a> {
    /// LAN payload bytes.
    pub(crate) lan: &'a AtomicU64,
    /// WAN bytes.
    pub(crate) wan: &'a AtomicU64,
    /// State once this direction ends.
    pub(crate) done: FlowState,
}

/// The (up, down) directions of `flow` as seen from a node facing `facing`:
/// up is what this node reads from its TCP socket.
pub(crate) fn directions(flow: &Flow, facing: Facing) -> (Direction<'_>, Direction<'_>) {
    let to_server = Direction {
        lan: &flow.to_server,
        wan: &flow.wan_to_server,
        done: FlowState::ClientDone,
    };
    let to_client = Direction {
        lan: &flow.to_client,
        wan: &flow.wan_to_client,
        done: FlowState::ServerDone,
    };
    match facing {
        Facing::Client => (to_server, to_client),
        Facing::Server => (to_client, to_server),
    }
}

/// How many in-order bytes a flow may hold for its TCP side beyond what
/// TCP took. The stream is read ahead of TCP (unordered, so quinn's
/// receive buffer keeps no islands while TCP is slow) up to this bound.
/// It is small because every byte read counts as consumed for the
/// stream's flow control: the window grows only while reads keep up, so a
/// read-ahead as large as the window (32 MiB before) let a flow whose
/// client had stopped reading take its window and the read-ahead again,
/// and grow the window to the read-ahead's size. The reader need not
/// drain quinn for quinn's sake: the vendored quinn-proto allows 65,536
/// islands per stream, more than the largest window holds.
pub(crate) const READ_AHEAD: usize = 1 << 20;

/// The in-order payload of a stream, read ahead of its consumer.
pub(crate) struct Incoming {
    rx: mpsc::UnboundedReceiver<Bytes>,
    budget: Arc<Semaphore>,
}

fn permits(len: usize) -> u32 {
    u32::try_from(len.div_ceil(1024)).unwrap_or(u32::MAX)
}

impl Incoming {
    /// The next in-order piece; `None` once the stream ended cleanly.
    pub(crate) async fn next(&mut self) -> Option<Bytes> {
        let bytes = self.rx.recv().await?;
        self.budget.add_permits(permits(bytes.len()) as usize);
        Some(bytes)
    }
}

/// Reads `recv` unordered as fast as quinn delivers, reassembles, and hands
/// in-order pieces to an [`Incoming`] (at most [`READ_AHEAD`] bytes queued).
/// Returns the reader (to run, joined with the consumer) and the receiver.
pub(crate) fn read_ahead(
    recv: &mut quinn::RecvStream,
    mut reassembler: Reassembler,
) -> (
    impl std::future::Future<Output = Result<(), Abort>> + '_,
    Incoming,
) {
    let (tx, rx) = mpsc::unbounded_channel();
    let budget = Arc::new(Semaphore::new((READ_AHEAD / 1024).max(CHUNK / 1024)));
    let reader_budget = budget.clone();
    let reader = async move {
        let mut ready: Vec<Bytes> = Vec::new();
        loop {
            match recv.read_chunk(CHUNK, false).await {
                Ok(Some(chunk)) => {
                    reassembler.insert(chunk.offset, chunk.bytes, |b| ready.push(b));
                    for bytes in ready.drain(..) {
                        reader_budget
                            .acquire_many(permits(bytes.len()))
                            .await
                            .map_err(|_| Abort::Local("flow closed".into()))?
                            .forget();
                        if tx.send(bytes).is_err() {
                            // The consumer stopped; its own result tells why.
                            return Ok(());
                        }
                    }
                }
                Ok(None) => {
                    if reassembler.buffered() != 0 {
                        return Err(Abort::Remote("stream ended with a gap".into()));
                    }
                    return Ok(());
                }
                Err(e) => return Err(Abort::from_read(e)),
            }
        }
    };
    (reader, Incoming { rx, budget })
}

async fn stream_to_tcp(
    recv: &mut quinn::RecvStream,
    wr: &mut (impl AsyncWrite + Unpin),
    dir: &Direction<'_>,
    flow: &Flow,
    start: u64,
    expect_reply: bool,
) -> Result<(), Abort> {
    let reassembler = payload_reassembler(recv, start, expect_reply).await?;
    let (reader, mut incoming) = read_ahead(recv, reassembler);
    let writer = async {
        while let Some(bytes) = incoming.next().await {
            dir.wan.fetch_add(bytes.len() as u64, Ordering::Relaxed);
            wr.write_all(&bytes)
                .await
                .map_err(|e| Abort::Local(e.to_string()))?;
            dir.lan.fetch_add(bytes.len() as u64, Ordering::Relaxed);
        }
        let _ = wr.shutdown().await;
        flow.set_state(dir.done);
        Ok(())
    };
    tokio::try_join!(reader, writer).map(|_| ())
}

/// Carries a TCP connection over a QUIC stream until both directions end.
/// Facing the client (on the edge), the core's reply is read first: a refusal
/// resets the client. `start` is the stream offset of the first payload byte
/// (the length of a header already read from `recv`). `ends` is told when
/// this side's last bytes are written (tail duplication repeats the
/// stream's end).
/// On an abort, the TCP connection is reset and the stream reset and stopped.
pub async fn splice_stream(
    mut tcp: TcpStream,
    mut send: quinn::SendStream,
    mut recv: quinn::RecvStream,
    flow: &Flow,
    facing: Facing,
    start: u64,
    ends: &StreamEnds,
) -> Result<(), Abort> {
    let (up, down) = directions(flow, facing);
    let result = {
        let (mut rd, mut wr) = tcp.split();
        until_idle(flow, async {
            tokio::try_join!(
                tcp_to_stream(&mut rd, &mut send, &up, flow, ends),
                stream_to_tcp(
                    &mut recv,
                    &mut wr,
                    &down,
                    flow,
                    start,
                    facing == Facing::Client
                ),
            )
            .map(|_| ())
        })
        .await
    };
    abort_on_error(result, tcp, send, recv, flow)
}

/// Runs a flow's `pumps` until they end, or until the flow is idle for the
/// node's `--flow-idle-timeout` ([`Abort::Idle`]: the caller resets both
/// sides as for any abort).
pub(crate) async fn until_idle(
    flow: &Flow,
    pumps: impl std::future::Future<Output = Result<(), Abort>>,
) -> Result<(), Abort> {
    tokio::select! {
        biased;
        result = pumps => result,
        idle = flow.idle_out() => idle,
    }
}

/// Resets everything of a flow whose pumps failed.
pub(crate) fn abort_on_error(
    result: Result<(), Abort>,
    tcp: TcpStream,
    mut send: quinn::SendStream,
    mut recv: quinn::RecvStream,
    flow: &Flow,
) -> Result<(), Abort> {
    match result {
        Ok(()) => Ok(()),
        Err(abort) => {
            flow.set_state(FlowState::Closing);
            let code = quinn::VarInt::from_u32(abort.stream_code());
            let _ = send.reset(code);
            let _ = recv.stop(code);
            reset_tcp(tcp);
            Err(abort)
        }
    }
}

async fn tcp_to_tcp(
    rd: &mut (impl AsyncRead + Unpin),
    wr: &mut (impl AsyncWrite + Unpin),
    counters: [&AtomicU64; 2],
    flow: &Flow,
    done: FlowState,
) -> Result<(), Abort> {
    let mut buf = ReadBuffer::new();
    loop {
        match rd.read(buf.space()).await {
            Ok(0) => {
                let _ = wr.shutdown().await;
                flow.set_state(done);
                return Ok(());
            }
            Ok(n) => {
                wr.write_all(buf.read(n))
                    .await
                    .map_err(|e| Abort::Remote(e.to_string()))?;
                for counter in counters {
                    counter.fetch_add(n as u64, Ordering::Relaxed);
                }
            }
            Err(e) => return Err(Abort::Local(e.to_string())),
        }
    }
}

/// Carries a flow between two TCP connections (pass-through), with the same
/// half-close and reset semantics as [`splice_stream`].
pub async fn splice_tcp(
    mut client: TcpStream,
    mut server: TcpStream,
    flow: &Flow,
) -> Result<(), Abort> {
    let result = {
        let (mut crd, mut cwr) = client.split();
        let (mut srd, mut swr) = server.split();
        until_idle(flow, async {
            tokio::try_join!(
                tcp_to_tcp(
                    &mut crd,
                    &mut swr,
                    [&flow.to_server, &flow.wan_to_server],
                    flow,
                    FlowState::ClientDone
                ),
                tcp_to_tcp(
                    &mut srd,
                    &mut cwr,
                    [&flow.to_client, &flow.wan_to_client],
                    flow,
                    FlowState::ServerDone
                ),
            )
            .map(|_| ())
        })
        .await
    };
    match result {
        Ok(()) => Ok(()),
        Err(abort) => {
            flow.set_state(FlowState::Closing);
            reset_tcp(client);
            reset_tcp(server);
            Err(abort)
        }
    }
}
