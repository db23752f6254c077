//! The `reduce` service's node side: one persistent byte cache per tunnel
//! peer, and the tunnel's control streams that keep the two ends' caches in
//! agreement.
//!
//! Caches live under `--cache-dir`, one directory per peer named by the
//! peer's public key (hex), each locked (`flock`) by the process using it so
//! two nodes can never share a store. When a tunnel comes up each node opens
//! a unidirectional *control stream* and sends a hello
//! ([`wanopt_proto::ControlRepr::Hello`]): the services it accepts and its
//! cache's hello ([`wanopt_codec::Hello`]). The edge marks a flow `reduce`
//! only when the core's hello accepted it. After `wanopt cache clear` a node
//! sends a new hello asking for the peer's in return, so both ends forget
//! what they assumed about each other.

use std::collections::HashMap;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::sync::{mpsc, oneshot};
use tracing::{debug, info, warn};

use wanopt_codec::{CacheConfig, CacheId, CacheStats, Compression, PeerCache, StoreConfig};
use wanopt_proto::{control_len, Control, ControlRepr, Services};

use crate::budget::CompressorBudget;
use crate::identity::PublicKey;
use crate::NodeError;

pub use crate::transport::model::{estimated_rate_bps, window_rate_bps};

/// Default bound on each peer's on-disk store.
pub const DEFAULT_CACHE_SIZE: u64 = 4 << 30;

/// How often caches are checkpointed by default (segments synced, peer
/// view saved and its journal folded in): [`ReduceConfig::cache_checkpoint`].
pub const DEFAULT_CACHE_CHECKPOINT: Duration = Duration::from_secs(10);

/// Below this estimated tunnel rate, `auto` compresses literals with zstd
/// or LZMA2 (about a third fewer bytes than LZ4 on office documents, at a
/// quarter of its speed and less: a core still compresses several hundred
/// Mbit/s, so the WAN, not the CPU, stays the bottleneck); above it, LZ4.
pub const ZSTD_BELOW_BPS: f64 = 100e6;

/// What `auto` uses by tunnel rate: (below this rate, compression). A
/// slower link leaves more CPU time per byte to spend. The whole encoder
/// (chunking, fingerprints, store, runs continuing one stream per flow),
/// cold, on the Table 1 Word and Excel files in 64 KiB reads (`cargo run
/// -p wanopt-codec --release --example stream_runs`), one core of the lab
/// VM: zstd level 3 at 80-190 MB/s, 9 at 20-45, 16 at 2.4-5.5 and 18 at
/// 2-4 MB/s; LZMA2 preset 5 at 3.5-4 and 6 at 3-3.5 MB/s, 7-20% smaller
/// than zstd 18 (most on spreadsheets: LZMA2 models a byte's position in
/// fixed-size records). Each step keeps the encoder at least twice as fast
/// as the link can carry data compressed 4 to 1 (1.5 MB/s of input at 3
/// Mbit/s, 0.5 MB/s at 1 Mbit/s).
///
/// Below 3 Mbit/s the runs that are mostly text go through PPMd instead
/// of LZMA2 ([`Compression::Max`]): 6-15% fewer bytes on the Word files,
/// within 1% on spreadsheets, and faster to encode (BENCHMARKS.md).
pub const AUTO_STEPS: [(f64, Compression); 4] = [
    (1e6, Compression::Max { preset: 6 }),
    (3e6, Compression::Max { preset: 5 }),
    (10e6, Compression::Zstd { level: 9 }),
    (ZSTD_BELOW_BPS, Compression::Zstd { level: 3 }),
];

/// How far (a fraction) the rate must leave the band of `auto`'s current
/// choice before the choice changes: a change of zstd level restarts the
/// flow's stream (its 1 MiB of history, and a new compressor of up to
/// 13 MiB), so a rate wavering around a threshold must not flip it.
pub const RATE_MARGIN: f64 = 0.2;

/// How flows with `reduce` compress their literals.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CompressionMode {
    /// zstd or LZMA2 while the tunnel's estimated rate
    /// ([`estimated_rate_bps`]) is below [`ZSTD_BELOW_BPS`], slower and
    /// smaller the slower the link ([`AUTO_STEPS`]); LZ4 above; re-checked
    /// as the flow runs.
    #[default]
    Auto,
    /// Always LZ4.
    Lz4,
    /// Always zstd (level 3).
    Zstd,
    /// Always LZMA2 (preset 6: 3-3.5 MB/s per core; for links of a few
    /// Mbit/s at most).
    Lzma,
    /// Always PPMd for runs of text and LZMA2 (preset 6) for the others:
    /// the fewest bytes, for links of a few Mbit/s at most.
    Max,
    /// No compression (deduplication only).
    Off,
}

impl std::str::FromStr for CompressionMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "auto" => Ok(CompressionMode::Auto),
            "lz4" => Ok(CompressionMode::Lz4),
            "zstd" => Ok(CompressionMode::Zstd),
            "lzma" => Ok(CompressionMode::Lzma),
            "max" => Ok(CompressionMode::Max),
            "off" => Ok(CompressionMode::Off),
            other => Err(format!(
                "unknown compression {other:?} (expected auto, lz4, zstd, lzma, max or off)"
            )),
        }
    }
}

impl std::fmt::Display for CompressionMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            CompressionMode::Auto => "auto",
            CompressionMode::Lz4 => "lz4",
            CompressionMode::Zstd => "zstd",
            CompressionMode::Lzma => "lzma",
            CompressionMode::Max => "max",
            CompressionMode::Off => "off",
        })
    }
}

impl CompressionMode {
    /// The codec setting for a tunnel whose estimated rate is `rate_bps`
    /// (bits per second; `None` when unknown).
    pub fn pick(self, rate_bps: Option<f64>) -> Compression {
        match self {
            CompressionMode::Lz4 => Compression::Lz4,
            CompressionMode::Zstd => Compression::ZSTD,
            CompressionMode::Lzma => Compression::Lzma { preset: 6 },
            CompressionMode::Max => Compression::Max { preset: 6 },
            CompressionMode::Off => Compression::Off,
            CompressionMode::Auto => rate_bps
                .and_then(|rate| AUTO_STEPS.iter().find(|(below, _)| rate < *below))
                .map_or(Compression::Lz4, |&(_, compression)| compression),
        }
    }

    /// Like [`CompressionMode::pick`], for a flow that uses `current`:
    /// `auto` keeps it while the rate stays within [`RATE_MARGIN`] of the
    /// band it picks `current` for.
    pub fn repick(self, rate_bps: Option<f64>, current: Compression) -> Compression {
        let next = self.pick(rate_bps);
        if self != CompressionMode::Auto || next == current {
            return next;
        }
        match (rate_bps, auto_band(current)) {
            (Some(rate), Some((low, high)))
                if rate >= low * (1.0 - RATE_MARGIN) && rate < high * (1.0 + RATE_MARGIN) =>
            {
                current
            }
            _ => next,
        }
    }
}

/// The rates (bits per second, from and below) for which `auto` picks
/// `compression`; `None` for a choice it never makes.
fn auto_band(compression: Compression) -> Option<(f64, f64)> {
    if compression == Compression::Lz4 {
        return Some((ZSTD_BELOW_BPS, f64::INFINITY));
    }
    let i = AUTO_STEPS.iter().position(|&(_, c)| c == compression)?;
    let low = i.checked_sub(1).map_or(0.0, |j| AUTO_STEPS[j].0);
    Some((low, AUTO_STEPS[i].0))
}

/// Settings of the `reduce` service.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReduceConfig {
    /// Directory holding one cache directory per peer.
    pub cache_dir: PathBuf,
    /// Bound on each peer's store, bytes.
    pub cache_size: u64,
    /// How often every cache is checkpointed ([`Caches::checkpoint`]).
    pub cache_checkpoint: Duration,
    /// How literals are compressed.
    pub compression: CompressionMode,
    /// Bound on the memory all flows' stream compressors may hold, bytes
    /// (see [`crate::budget`]).
    pub compressor_memory: u64,
}

impl ReduceConfig {
    /// The default cache directory: `/var/cache/wanopt` for root, else
    /// `$XDG_CACHE_HOME/wanopt` or `~/.cache/wanopt`.
    pub fn default_dir() -> PathBuf {
        if nix::unistd::geteuid().is_root() {
            return PathBuf::from("/var/cache/wanopt");
        }
        if let Some(dir) = std::env::var_os("XDG_CACHE_HOME").filter(|d| !d.is_empty()) {
            return PathBuf::from(dir).join("wanopt");
        }
        match std::env::var_os("HOME") {
            Some(home) => PathBuf::from(home).join(".cache/wanopt"),
            None => PathBuf::from("/var/cache/wanopt"),
        }
    }
}

/// One peer's cache, open and locked.
#[derive(Debug)]
pub struct PeerEntry {
    /// The peer.
    pub peer: PublicKey,
    /// Its directory.
    pub dir: PathBuf,
    /// The cache shared by every flow with the peer.
    pub cache: PeerCache,
    _lock: nix::fcntl::Flock<File>,
    /// Control streams of live tunnels with this peer.
    controls: Mutex<Vec<(usize, mpsc::UnboundedSender<bool>)>>,
    /// The connection whose hello the cache last applied.
    current: Mutex<Option<usize>>,
    /// Write errors already reported in the log.
    warned_write_errors: AtomicU64,
}

/// What `wanopt cache stats` shows for one peer.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PeerCacheStats {
    /// The peer's public key.
    pub peer: String,
    /// The cache directory.
    pub dir: String,
    /// Chunks received from the peer and held on disk.
    pub chunks: u64,
    /// Bytes in the store's segment files.
    pub store_bytes: u64,
    /// Store capacity, bytes.
    pub capacity_bytes: u64,
    /// Segment files.
    pub segments: u64,
    /// References resolved from the store.
    pub hits: u64,
    /// Lookups that found nothing usable.
    pub misses: u64,
    /// Damaged records found by verified reads.
    pub corrupt: u64,
    /// Segments evicted by the capacity bound.
    pub evicted_segments: u64,
    /// Bytes dropped from damaged or torn segment tails when the cache was
    /// opened.
    #[serde(default)]
    pub truncated_bytes: u64,
    /// The cache's epoch (bumped when records were lost other than by
    /// eviction, so the peer stops assuming them).
    #[serde(default)]
    pub epoch: u64,
    /// Appends or flushes of the store that failed (a full or failing
    /// disk): that data is not cached.
    #[serde(default)]
    pub write_errors: u64,
    /// The last of them, as the system reported it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_write_error: Option<String>,
    /// Chunks the peer acknowledged holding (what we may reference).
    pub peer_chunks: u64,
    /// Whether the peer's hello confirmed that view on a live tunnel.
    pub peer_confirmed: bool,
}

/// What `/cache` returns.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CacheReport {
    /// Whether the node runs the `reduce` service.
    pub enabled: bool,
    /// The cache directory.
    pub dir: Option<String>,
    /// One entry per peer cache open in this run.
    pub peers: Vec<PeerCacheStats>,
    /// Caches cleared since start.
    pub clears: u64,
}

/// Every peer cache of a node.
#[derive(Debug)]
pub struct Caches {
    config: ReduceConfig,
    budget: Arc<CompressorBudget>,
    peers: Mutex<HashMap<PublicKey, Arc<PeerEntry>>>,
    clears: AtomicU64,
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn random_id() -> CacheId {
    CacheId(rand::random())
}

impl Caches {
    /// The settings the caches were opened with.
    pub fn config(&self) -> &ReduceConfig {
        &self.config
    }

    /// Creates the cache directory if needed and checks it is writable.
    pub fn new(config: ReduceConfig) -> Result<Caches, NodeError> {
        let dir = &config.cache_dir;
        if config.cache_size < 64 << 20 {
            return Err(NodeError::Usage(format!(
                "--cache-size {} bytes is too small: give at least 64MiB",
                config.cache_size
            )));
        }
        let fail = |e: std::io::Error| {
            NodeError::Config(format!(
                "cannot use cache directory {}: {e} (give --cache-dir DIR, or --no-reduce)",
                dir.display()
            ))
        };
        crate::cache_dir::prepare_root(dir).map_err(fail)?;
        let probe = dir.join(format!(".probe-{}", std::process::id()));
        wanopt_codec::private::create_file(&probe, true).map_err(fail)?;
        let _ = std::fs::remove_file(&probe);
        Ok(Caches {
            budget: CompressorBudget::new(config.compressor_memory),
            config,
            peers: Mutex::new(HashMap::new()),
            clears: AtomicU64::new(0),
        })
    }

    /// How flows compress their literals.
    pub fn compression(&self) -> CompressionMode {
        self.config.compression
    }

    /// The node's budget for flows' stream compressors.
    pub fn budget(&self) -> &Arc<CompressorBudget> {
        &self.budget
    }

    /// The cache directory.
    pub fn dir(&self) -> &Path {
        &self.config.cache_dir
    }

    fn cache_config(&self) -> CacheConfig {
        let segment_size = (self.config.cache_size / 8).clamp(1 << 20, 64 << 20);
        CacheConfig {
            store: StoreConfig {
                capacity: self.config.cache_size,
                segment_size,
            },
            ..CacheConfig::default()
        }
    }

    /// The cache for `peer`, opened (and locked) on first use.
    pub fn for_peer(&self, peer: PublicKey) -> Result<Arc<PeerEntry>, String> {
        let mut peers = self.peers.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(entry) = peers.get(&peer) {
            return Ok(entry.clone());
        }
        let dir = self.config.cache_dir.join(hex(&peer.0));
        if std::fs::symlink_metadata(&dir).is_err() {
            wanopt_codec::private::create_dir_all(&dir)
                .map_err(|e| format!("{}: {e}", dir.display()))?;
        }
        crate::cache_dir::prepare_peer_dir(&dir, peer)
            .map_err(|e| format!("{}: {e}", dir.display()))?;
        let lock = lock_dir(&dir)?;
        let cache = PeerCache::open(&dir, self.cache_config(), random_id())
            .map_err(|e| format!("cannot open the byte cache in {}: {e}", dir.display()))?;
        let stats = cache.stats();
        if stats.store.truncated_bytes > 0 {
            warn!(
                "byte cache for peer {peer}: dropped {} damaged or torn bytes when opening {} (the peer is told; nothing wrong is ever delivered)",
                stats.store.truncated_bytes,
                dir.display()
            );
        }
        let view = cache.view_load();
        if view.snapshot_damaged || view.journal_dropped_bytes > 0 {
            warn!(
                "byte cache for peer {peer}: what the peer holds was damaged on disk in {} ({}); chunks it holds may cross once more (nothing wrong is ever delivered)",
                dir.display(),
                match (view.snapshot_damaged, view.journal_dropped_bytes) {
                    (true, 0) => "the peer-view snapshot did not check out".to_string(),
                    (false, n) => format!("{n} journal bytes after the last good record dropped"),
                    (true, n) => format!(
                        "the peer-view snapshot did not check out, {n} journal bytes dropped"
                    ),
                }
            );
        }
        info!(
            "byte cache for peer {peer}: {} chunks, {} MB in {}; the peer holds {} of ours as far as we know ({} journaled changes replayed), to be confirmed by its hello",
            stats.store.chunks,
            stats.store.bytes / 1_000_000,
            dir.display(),
            stats.peer_chunks,
            view.journal_records
        );
        let entry = Arc::new(PeerEntry {
            peer,
            dir,
            cache,
            _lock: lock,
            controls: Mutex::new(Vec::new()),
            current: Mutex::new(None),
            warned_write_errors: AtomicU64::new(0),
        });
        peers.insert(peer, entry.clone());
        Ok(entry)
    }

    fn entries(&self) -> Vec<Arc<PeerEntry>> {
        self.peers
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .values()
            .cloned()
            .collect()
    }

    /// Syncs every open cache and saves what it knows of its peer.
    /// Says in the log when writes to a cache failed since the last
    /// checkpoint (a full disk would otherwise only show as transfers that
    /// stay cold).
    pub fn checkpoint(&self) {
        for entry in self.entries() {
            if let Err(e) = entry.cache.checkpoint() {
                warn!(
                    "cannot checkpoint the cache in {}: {e}",
                    entry.dir.display()
                );
            }
            let failed = entry.cache.stats().write_errors();
            let warned = entry.warned_write_errors.swap(failed, Ordering::Relaxed);
            if failed > warned {
                warn!(
                    "cache in {}: {} writes failed since the last check (last: {}); what could not be written is not cached (or, for the journal, not kept through a crash), so its transfers stay cold",
                    entry.dir.display(),
                    failed - warned,
                    entry.cache.last_write_error().unwrap_or_default()
                );
            }
        }
    }

    /// Counters of every open cache.
    pub fn report(&self) -> CacheReport {
        let mut peers: Vec<PeerCacheStats> = self
            .entries()
            .iter()
            .map(|e| peer_stats(e, e.cache.stats(), self.config.cache_size))
            .collect();
        peers.sort_by(|a, b| a.peer.cmp(&b.peer));
        CacheReport {
            enabled: true,
            dir: Some(self.config.cache_dir.display().to_string()),
            peers,
            clears: self.clears.load(Ordering::Relaxed),
        }
    }

    /// Empties every cache, open or only on disk, gives each a new
    /// identity and tells live peers (whose answering hellos resynchronize
    /// both directions).
    pub fn clear(&self) -> Result<(), String> {
        let open = self.entries();
        for entry in &open {
            entry
                .cache
                .clear(random_id())
                .map_err(|e| format!("cannot clear {}: {e}", entry.dir.display()))?;
            for (_, control) in entry
                .controls
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .iter()
            {
                let _ = control.send(true);
            }
        }
        // Caches of peers not seen in this run: delete them if they are
        // wanopt's (never another program's directory, never through a
        // link) and no other process holds them.
        let open_dirs: Vec<&Path> = open.iter().map(|e| e.dir.as_path()).collect();
        if let Ok(dirs) = std::fs::read_dir(&self.config.cache_dir) {
            for dir in dirs.flatten().map(|d| d.path()) {
                if open_dirs.contains(&dir.as_path()) {
                    continue;
                }
                if let Some(why) = crate::cache_dir::not_a_peer_cache(&dir) {
                    debug!("cache clear: leaving {} alone: {why}", dir.display());
                    continue;
                }
                match lock_dir(&dir) {
                    Ok(_lock) => {
                        std::fs::remove_dir_all(&dir)
                            .map_err(|e| format!("cannot clear {}: {e}", dir.display()))?;
                    }
                    Err(e) => warn!("not clearing {}: {e}", dir.display()),
                }
            }
        }
        self.clears.fetch_add(1, Ordering::Relaxed);
        info!("byte caches cleared");
        Ok(())
    }
}

fn peer_stats(entry: &PeerEntry, stats: CacheStats, capacity: u64) -> PeerCacheStats {
    PeerCacheStats {
        peer: entry.peer.to_string(),
        dir: entry.dir.display().to_string(),
        chunks: stats.store.chunks,
        store_bytes: stats.store.bytes,
        capacity_bytes: capacity,
        segments: stats.store.segments,
        hits: stats.store.hits,
        misses: stats.store.misses,
        corrupt: stats.store.corrupt,
        evicted_segments: stats.store.evicted_segments,
        truncated_bytes: stats.store.truncated_bytes,
        write_errors: stats.write_errors(),
        last_write_error: entry.cache.last_write_error(),
        epoch: entry.cache.hello().epoch,
        peer_chunks: stats.peer_chunks,
        peer_confirmed: stats.peer_confirmed,
    }
}

fn lock_dir(dir: &Path) -> Result<nix::fcntl::Flock<File>, String> {
    let path = dir.join("lock");
    let file = wanopt_codec::private::create_file(&path, false)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    nix::fcntl::Flock::lock(file, nix::fcntl::FlockArg::LockExclusiveNonblock).map_err(|_| {
        format!(
            "{} is in use by another wanopt process (give each node its own --cache-dir)",
            dir.display()
        )
    })
}

/// The outcome of a tunnel's control exchange, known once the peer's first
/// hello arrived.
#[derive(Debug, Clone)]
pub struct PeerServices {
    /// Services the peer accepts on flows from us.
    pub accepts: Services,
}

/// The peer's cache hello; `None` when it is well formed but of another
/// codec version (the peer's flows then go without `reduce`).
fn peer_cache_hello(bytes: &[u8]) -> Result<Option<wanopt_codec::Hello>, String> {
    use wanopt_codec::{control::HelloError, frame::FrameError};
    match wanopt_codec::Hello::parse(bytes) {
        Ok((hello, _)) => Ok(Some(hello)),
        Err(HelloError::Frame(FrameError::UnsupportedVersion(_))) => Ok(None),
        Err(e) => Err(format!("bad cache hello from the peer: {e}")),
    }
}

/// Runs a connection's control stream: sends our hello, applies the peer's
/// hellos to `entry`'s cache (when both ends reduce), answers requests for
/// hellos and sends new ones after a local clear. `first` is completed
/// when the peer's first hello arrives. Returns when the connection ends.
pub async fn run_control(
    conn: quinn::Connection,
    entry: Option<Arc<PeerEntry>>,
    first: oneshot::Sender<PeerServices>,
) {
    let id = conn.stable_id();
    let (tx, mut rx) = mpsc::unbounded_channel::<bool>();
    if let Some(entry) = &entry {
        entry
            .controls
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push((id, tx.clone()));
    }
    let remote = conn.remote_address();
    let result: Result<std::convert::Infallible, String> = async {
        let mut send = conn
            .open_uni()
            .await
            .map_err(|e| format!("cannot open the control stream: {e}"))?;
        send_hello(&mut send, entry.as_deref(), false).await?;
        let mut recv = conn
            .accept_uni()
            .await
            .map_err(|e| format!("no control stream from the peer: {e}"))?;
        let mut first = Some(first);
        loop {
            tokio::select! {
                message = read_message(&mut recv) => {
                    let ControlRepr::Hello { mut services, reply_wanted, cache_hello } = message?;
                    if let Some(entry) = &entry {
                        if services.contains(Services::REDUCE) {
                            match peer_cache_hello(&cache_hello)? {
                                Some(hello) => {
                                    entry.cache.handle_hello(&hello);
                                    *entry.current.lock().unwrap_or_else(|e| e.into_inner()) =
                                        Some(id);
                                    debug!("peer {remote}: cache hello applied");
                                }
                                None => {
                                    warn!(
                                        "peer {remote} speaks another codec version (this node: {}); \
                                         its flows are not reduced: upgrade both nodes",
                                        wanopt_codec::frame::VERSION
                                    );
                                    services = services.without(Services::REDUCE);
                                }
                            }
                        }
                    }
                    if let Some(first) = first.take() {
                        let _ = first.send(PeerServices { accepts: services });
                    }
                    if reply_wanted {
                        send_hello(&mut send, entry.as_deref(), false).await?;
                    }
                }
                Some(reply_wanted) = rx.recv() => {
                    send_hello(&mut send, entry.as_deref(), reply_wanted).await?;
                }
            }
        }
    }
    .await;
    let Err(why) = result;
    if conn.close_reason().is_none() {
        warn!("control stream with {remote}: {why}; closing the tunnel");
        conn.close(
            quinn::VarInt::from_u32(wanopt_proto::codes::PROTOCOL),
            b"control stream failed",
        );
    }
    if let Some(entry) = &entry {
        entry
            .controls
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .retain(|(c, _)| *c != id);
        let mut current = entry.current.lock().unwrap_or_else(|e| e.into_inner());
        if *current == Some(id) {
            *current = None;
            entry.cache.handle_tunnel_down();
        }
    }
}

async fn send_hello(
    send: &mut quinn::SendStream,
    entry: Option<&PeerEntry>,
    reply_wanted: bool,
) -> Result<(), String> {
    let mut cache_hello = Vec::new();
    let services = match entry {
        Some(entry) => {
            entry.cache.hello().emit(&mut cache_hello);
            Services::REDUCE
        }
        None => Services::default(),
    };
    let message = ControlRepr::Hello {
        services,
        reply_wanted,
        cache_hello,
    }
    .emit()
    .map_err(|e| e.to_string())?;
    send.write_all(&message)
        .await
        .map_err(|e| format!("control stream: {e}"))
}

async fn read_message(recv: &mut quinn::RecvStream) -> Result<ControlRepr, String> {
    let mut prefix = [0u8; 4];
    recv.read_exact(&mut prefix)
        .await
        .map_err(|e| format!("control stream: {e}"))?;
    let length = control_len(&prefix).map_err(|e| format!("bad control message: {e}"))?;
    let mut buf = vec![0u8; length];
    buf[..4].copy_from_slice(&prefix);
    recv.read_exact(&mut buf[4..])
        .await
        .map_err(|e| format!("control stream: {e}"))?;
    let view = Control::new_checked(&buf[..]).map_err(|e| format!("bad control message: {e}"))?;
    ControlRepr::parse(&view).map_err(|e| format!("bad control message: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cache_hello_of_another_codec_version_turns_reduce_off_not_the_tunnel() {
        let dir = tempfile::tempdir().unwrap();
        let cache = PeerCache::open(dir.path(), CacheConfig::default(), CacheId([3; 16])).unwrap();
        let mut hello = Vec::new();
        cache.hello().emit(&mut hello);
        assert!(peer_cache_hello(&hello).unwrap().is_some());
        // The version byte follows the 4-byte header and the magic.
        hello[8] = wanopt_codec::frame::VERSION - 1;
        assert_eq!(peer_cache_hello(&hello), Ok(None));
        hello[4] = b'X';
        assert!(peer_cache_hello(&hello)
            .unwrap_err()
            .contains("bad cache hello"));
    }

    #[test]
    fn compression_modes_parse_and_auto_picks_by_rate() {
        for mode in ["auto", "lz4", "zstd", "lzma", "max", "off"] {
            assert_eq!(mode.parse::<CompressionMode>().unwrap().to_string(), mode);
        }
        assert!("gzip".parse::<CompressionMode>().is_err());
        let auto = CompressionMode::Auto;
        assert_eq!(auto.pick(Some(384e3)), Compression::Max { preset: 6 });
        assert_eq!(auto.pick(Some(2e6)), Compression::Max { preset: 5 });
        assert_eq!(auto.pick(Some(5e6)), Compression::Zstd { level: 9 });
        assert_eq!(auto.pick(Some(50e6)), Compression::ZSTD);
        // The slow levels are encoded off the runtime's workers.
        assert!(auto.pick(Some(2e6)).is_slow() && auto.pick(Some(5e6)).is_slow());
        assert!(!Compression::ZSTD.is_slow() && !Compression::Lz4.is_slow());
        assert_eq!(auto.pick(Some(1e9)), Compression::Lz4);
        assert_eq!(auto.pick(None), Compression::Lz4);
        assert_eq!(CompressionMode::Off.pick(Some(2e6)), Compression::Off);
        assert_eq!(CompressionMode::Lz4.pick(Some(2e6)), Compression::Lz4);
        assert_eq!(CompressionMode::Zstd.pick(Some(1e9)), Compression::ZSTD);
        assert_eq!(
            CompressionMode::Lzma.pick(Some(1e9)),
            Compression::Lzma { preset: 6 }
        );
        assert_eq!(
            CompressionMode::Max.pick(Some(1e9)),
            Compression::Max { preset: 6 }
        );
    }

    #[test]
    fn auto_keeps_its_choice_while_the_rate_wavers_near_a_threshold() {
        let auto = CompressionMode::Auto;
        let z = |level| Compression::Zstd { level };
        let x = |preset| Compression::Max { preset };
        // Around 1 Mbit/s (preset 6 below, 5 above): no flip within 20%.
        assert_eq!(auto.repick(Some(1.1e6), x(6)), x(6));
        assert_eq!(auto.repick(Some(0.9e6), x(5)), x(5));
        // Beyond the margin it changes, both ways.
        assert_eq!(auto.repick(Some(1.3e6), x(6)), x(5));
        assert_eq!(auto.repick(Some(0.7e6), x(5)), x(6));
        // Around 3 Mbit/s, LZMA2 and zstd 9 likewise.
        assert_eq!(auto.repick(Some(3.3e6), x(5)), x(5));
        assert_eq!(auto.repick(Some(2.7e6), z(9)), z(9));
        assert_eq!(auto.repick(Some(4e6), x(5)), z(9));
        // Far from the band it jumps straight to the rate's choice.
        assert_eq!(auto.repick(Some(50e6), x(6)), Compression::ZSTD);
        assert_eq!(auto.repick(Some(2e6), Compression::Lz4), x(5));
        // Around 100 Mbit/s, LZ4 and zstd 3 hold each other off.
        assert_eq!(auto.repick(Some(90e6), Compression::Lz4), Compression::Lz4);
        assert_eq!(
            auto.repick(Some(110e6), Compression::ZSTD),
            Compression::ZSTD
        );
        assert_eq!(
            auto.repick(Some(130e6), Compression::ZSTD),
            Compression::Lz4
        );
        // A level auto never picks, or no rate, gives the plain choice.
        assert_eq!(auto.repick(Some(2e6), z(5)), x(5));
        assert_eq!(auto.repick(Some(2e6), z(16)), x(5));
        assert_eq!(auto.repick(None, x(5)), Compression::Lz4);
        assert_eq!(auto.repick(Some(2e6), Compression::Off), x(5));
        // Fixed modes ignore the current choice.
        assert_eq!(
            CompressionMode::Lz4.repick(Some(2e6), x(5)),
            Compression::Lz4
        );
    }

    #[test]
    fn peers_get_their_own_locked_directory() {
        let dir = tempfile::tempdir().unwrap();
        let config = ReduceConfig {
            cache_dir: dir.path().to_path_buf(),
            cache_size: 64 << 20,
            compression: CompressionMode::Auto,
            compressor_memory: crate::budget::DEFAULT_COMPRESSOR_MEMORY,
            cache_checkpoint: DEFAULT_CACHE_CHECKPOINT,
        };
        let caches = Caches::new(config.clone()).unwrap();
        let a = caches.for_peer(PublicKey([1; 32])).unwrap();
        let again = caches.for_peer(PublicKey([1; 32])).unwrap();
        assert!(Arc::ptr_eq(&a, &again));
        assert!(a.dir.ends_with(hex(&[1; 32])));
        // A second process (here: a second Caches) cannot take the same peer.
        let other = Caches::new(config).unwrap();
        let err = other.for_peer(PublicKey([1; 32])).unwrap_err();
        assert!(err.contains("in use by another wanopt process"), "{err}");
        assert!(other.for_peer(PublicKey([2; 32])).is_ok());
    }

    #[test]
    fn clear_gives_a_new_identity_and_removes_unopened_caches() {
        let dir = tempfile::tempdir().unwrap();
        let config = ReduceConfig {
            cache_dir: dir.path().to_path_buf(),
            cache_size: 64 << 20,
            compression: CompressionMode::Auto,
            compressor_memory: crate::budget::DEFAULT_COMPRESSOR_MEMORY,
            cache_checkpoint: DEFAULT_CACHE_CHECKPOINT,
        };
        {
            let earlier = Caches::new(config.clone()).unwrap();
            earlier.for_peer(PublicKey([9; 32])).unwrap();
        }
        let caches = Caches::new(config).unwrap();
        let entry = caches.for_peer(PublicKey([1; 32])).unwrap();
        let before = entry.cache.hello().cache_id;
        caches.clear().unwrap();
        assert_ne!(entry.cache.hello().cache_id, before);
        assert!(!dir.path().join(hex(&[9; 32])).exists());
        assert!(entry.dir.exists());
        assert_eq!(caches.report().clears, 1);
    }

    #[test]
    fn clear_removes_only_wanopt_caches_and_follows_no_link() {
        let dir = tempfile::tempdir().unwrap();
        let config = ReduceConfig {
            cache_dir: dir.path().to_path_buf(),
            cache_size: 64 << 20,
            compression: CompressionMode::Auto,
            compressor_memory: crate::budget::DEFAULT_COMPRESSOR_MEMORY,
            cache_checkpoint: DEFAULT_CACHE_CHECKPOINT,
        };
        // Another program's directory, with `--cache-dir` shared.
        let apt = dir.path().join("apt");
        std::fs::create_dir(&apt).unwrap();
        std::fs::write(apt.join("pkgcache.bin"), b"keep").unwrap();
        // A link, named like a peer cache, to a directory elsewhere.
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("lock"), b"").unwrap();
        std::fs::write(outside.path().join("meta"), b"keep").unwrap();
        let link = dir.path().join(hex(&[7; 32]));
        std::os::unix::fs::symlink(outside.path(), &link).unwrap();
        // A cache of an older version (no marker, wanopt's files only).
        let legacy = dir.path().join(hex(&[8; 32]));
        std::fs::create_dir(&legacy).unwrap();
        for name in ["lock", "meta", "seg-0000000001.wseg", "peer-view.journal.3"] {
            std::fs::write(legacy.join(name), b"").unwrap();
        }
        let caches = Caches::new(config).unwrap();
        caches.for_peer(PublicKey([1; 32])).unwrap();
        caches.clear().unwrap();
        assert_eq!(std::fs::read(apt.join("pkgcache.bin")).unwrap(), b"keep");
        assert!(std::fs::symlink_metadata(&link).unwrap().is_symlink());
        assert_eq!(std::fs::read(outside.path().join("meta")).unwrap(), b"keep");
        assert!(!legacy.exists());
    }

    #[test]
    fn peer_caches_are_owner_only_and_marked() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let caches = Caches::new(ReduceConfig {
            cache_dir: dir.path().join("cache"),
            cache_size: 64 << 20,
            compression: CompressionMode::Auto,
            compressor_memory: crate::budget::DEFAULT_COMPRESSOR_MEMORY,
            cache_checkpoint: DEFAULT_CACHE_CHECKPOINT,
        })
        .unwrap();
        let entry = caches.for_peer(PublicKey([1; 32])).unwrap();
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&dir.path().join("cache")), 0o700);
        assert_eq!(mode(&entry.dir), 0o700);
        let files: Vec<PathBuf> = std::fs::read_dir(&entry.dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        assert!(files.iter().any(|f| f.ends_with("lock")), "{files:?}");
        assert!(files.iter().any(|f| f.ends_with(crate::cache_dir::MARKER)));
        for file in files {
            assert_eq!(mode(&file), 0o600, "{}", file.display());
        }
    }

    #[test]
    fn unusable_directories_are_one_line_errors() {
        let file = tempfile::NamedTempFile::new().unwrap();
        let err = Caches::new(ReduceConfig {
            cache_dir: file.path().join("sub"),
            cache_size: DEFAULT_CACHE_SIZE,
            compression: CompressionMode::Auto,
            compressor_memory: crate::budget::DEFAULT_COMPRESSOR_MEMORY,
            cache_checkpoint: DEFAULT_CACHE_CHECKPOINT,
        })
        .unwrap_err()
        .to_string();
        assert!(err.contains("--no-reduce"), "{err}");
        let dir = tempfile::tempdir().unwrap();
        let err = Caches::new(ReduceConfig {
            cache_dir: dir.path().to_path_buf(),
            cache_size: 1000,
            compression: CompressionMode::Auto,
            compressor_memory: crate::budget::DEFAULT_COMPRESSOR_MEMORY,
            cache_checkpoint: DEFAULT_CACHE_CHECKPOINT,
        })
        .unwrap_err()
        .to_string();
        assert!(err.contains("too small"), "{err}");
    }
}
