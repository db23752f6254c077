//! The per-peer byte caches of the `reduce` service: one persistent cache
//! per tunnel peer under `--cache-dir`, in a directory named by the peer's
//! public key (hex), each locked (`flock`) by the process using it so two
//! nodes can never share a store; checkpoints, reports and `cache clear`.

use std::collections::HashMap;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::sync::mpsc;
use tracing::{debug, info, warn};

use wanopt_codec::{CacheConfig, CacheId, CacheStats, PeerCache, StoreConfig};

use super::budget::CompressorBudget;
use super::compression::CompressionMode;
use crate::error::{NodeError, UsageError};
use crate::transport::identity::PublicKey;

/// What a flow with `reduce` needs besides its streams: handed ready to
/// the flow's pump ([`Caches::reduction`]).
#[derive(Debug, Clone)]
pub struct Reduction {
    /// The byte cache for the peer.
    pub cache: PeerCache,
    /// How literals are compressed.
    pub compression: CompressionMode,
    /// The tunnel (its rate picks the codec in `auto`).
    pub connection: quinn::Connection,
    /// The node's memory budget for stream compressors.
    pub budget: Arc<CompressorBudget>,
}

/// Default bound on each peer's on-disk store.
pub const DEFAULT_CACHE_SIZE: u64 = 4 << 30;

/// How often caches are checkpointed by default (segments synced, peer
/// view saved and its journal folded in): [`ReduceConfig::cache_checkpoint`].
pub const DEFAULT_CACHE_CHECKPOINT: Duration = Duration::from_secs(10);

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
    /// (see [`super::budget`]).
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
    pub(super) controls: Mutex<Vec<(usize, mpsc::UnboundedSender<bool>)>>,
    /// The connection whose hello the cache last applied.
    pub(super) current: Mutex<Option<usize>>,
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

/// Why a peer's byte cache could not be opened, locked or cleared.
#[derive(Debug, thiserror::Error)]
pub enum CacheError {
    /// A directory or file of the cache could not be created or secured.
    #[error("{}: {source}", path.display())]
    Dir {
        /// The directory or file.
        path: PathBuf,
        /// Why not.
        source: std::io::Error,
    },
    /// Another process holds the cache's lock.
    #[error(
        "{} is in use by another wanopt process (give each node its own --cache-dir)",
        dir.display()
    )]
    InUse {
        /// The peer's cache directory.
        dir: PathBuf,
    },
    /// The store did not open.
    #[error("cannot open the byte cache in {}: {source}", dir.display())]
    Open {
        /// The peer's cache directory.
        dir: PathBuf,
        /// Why not.
        source: wanopt_codec::store::OpenError,
    },
    /// Emptying a cache failed.
    #[error("cannot clear {}: {source}", dir.display())]
    Clear {
        /// The peer's cache directory.
        dir: PathBuf,
        /// Why not.
        source: std::io::Error,
    },
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
            return Err(UsageError::CacheTooSmall(config.cache_size).into());
        }
        let fail = |source| NodeError::CacheDir {
            dir: dir.clone(),
            source,
        };
        super::cache_dir::prepare_root(dir).map_err(fail)?;
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

    /// A flow's reduction with `cache` over `connection`, compressing as
    /// the node is set to.
    pub fn reduction(&self, cache: PeerCache, connection: quinn::Connection) -> Reduction {
        Reduction {
            cache,
            compression: self.compression(),
            connection,
            budget: self.budget.clone(),
        }
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
    pub fn for_peer(&self, peer: PublicKey) -> Result<Arc<PeerEntry>, CacheError> {
        let mut peers = self.peers.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(entry) = peers.get(&peer) {
            return Ok(entry.clone());
        }
        let dir = self.config.cache_dir.join(hex(&peer.0));
        if std::fs::symlink_metadata(&dir).is_err() {
            wanopt_codec::private::create_dir_all(&dir).map_err(|source| CacheError::Dir {
                path: dir.clone(),
                source,
            })?;
        }
        super::cache_dir::prepare_peer_dir(&dir, peer).map_err(|source| CacheError::Dir {
            path: dir.clone(),
            source,
        })?;
        let lock = lock_dir(&dir)?;
        let cache = PeerCache::open(&dir, self.cache_config(), random_id()).map_err(|source| {
            CacheError::Open {
                dir: dir.clone(),
                source,
            }
        })?;
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
    pub fn clear(&self) -> Result<(), CacheError> {
        let open = self.entries();
        for entry in &open {
            entry
                .cache
                .clear(random_id())
                .map_err(|source| CacheError::Clear {
                    dir: entry.dir.clone(),
                    source,
                })?;
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
                if let Some(why) = super::cache_dir::not_a_peer_cache(&dir) {
                    debug!("cache clear: leaving {} alone: {why}", dir.display());
                    continue;
                }
                match lock_dir(&dir) {
                    Ok(_lock) => {
                        std::fs::remove_dir_all(&dir).map_err(|source| CacheError::Clear {
                            dir: dir.clone(),
                            source,
                        })?;
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

fn lock_dir(dir: &Path) -> Result<nix::fcntl::Flock<File>, CacheError> {
    let path = dir.join("lock");
    let file =
        wanopt_codec::private::create_file(&path, false).map_err(|source| CacheError::Dir {
            path: path.clone(),
            source,
        })?;
    nix::fcntl::Flock::lock(file, nix::fcntl::FlockArg::LockExclusiveNonblock).map_err(|_| {
        CacheError::InUse {
            dir: dir.to_path_buf(),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn peers_get_their_own_locked_directory() {
        let dir = tempfile::tempdir().unwrap();
        let config = ReduceConfig {
            cache_dir: dir.path().to_path_buf(),
            cache_size: 64 << 20,
            compression: CompressionMode::Auto,
            compressor_memory: crate::reduce::budget::DEFAULT_COMPRESSOR_MEMORY,
            cache_checkpoint: DEFAULT_CACHE_CHECKPOINT,
        };
        let caches = Caches::new(config.clone()).unwrap();
        let a = caches.for_peer(PublicKey([1; 32])).unwrap();
        let again = caches.for_peer(PublicKey([1; 32])).unwrap();
        assert!(Arc::ptr_eq(&a, &again));
        assert!(a.dir.ends_with(hex(&[1; 32])));
        // A second process (here: a second Caches) cannot take the same peer.
        let other = Caches::new(config).unwrap();
        let err = other.for_peer(PublicKey([1; 32])).unwrap_err().to_string();
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
            compressor_memory: crate::reduce::budget::DEFAULT_COMPRESSOR_MEMORY,
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
            compressor_memory: crate::reduce::budget::DEFAULT_COMPRESSOR_MEMORY,
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
            compressor_memory: crate::reduce::budget::DEFAULT_COMPRESSOR_MEMORY,
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
        assert!(files
            .iter()
            .any(|f| f.ends_with(crate::reduce::cache_dir::MARKER)));
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
            compressor_memory: crate::reduce::budget::DEFAULT_COMPRESSOR_MEMORY,
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
            compressor_memory: crate::reduce::budget::DEFAULT_COMPRESSOR_MEMORY,
            cache_checkpoint: DEFAULT_CACHE_CHECKPOINT,
        })
        .unwrap_err()
        .to_string();
        assert!(err.contains("too small"), "{err}");
    }
}
