//! The per-peer byte cache shared by every flow to and from one peer.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use crate::control::{CacheId, Hello};
use crate::peer_view::PeerView;
use crate::stats::CacheStats;
use crate::store::{ChunkStore, OpenError, StoreConfig};

const PEER_VIEW_FILE: &str = "peer-view";

/// Sizing of a [`PeerCache`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct CacheConfig {
    /// The on-disk store of chunks received from the peer.
    pub store: StoreConfig,
    /// Bound on the fingerprints remembered as held by the peer (about 40
    /// bytes of memory each).
    pub max_peer_entries: usize,
}

impl Default for CacheConfig {
    fn default() -> Self {
        CacheConfig {
            store: StoreConfig::default(),
            max_peer_entries: 1 << 20,
        }
    }
}

/// State behind the lock.
#[derive(Debug)]
pub(crate) struct Shared {
    pub(crate) store: ChunkStore,
    pub(crate) peer: PeerView,
}

/// A node's cache for one peer, in both directions:
///
/// - the **store** holds every chunk our decoders received from the peer
///   (what the peer's encoders may reference);
/// - the **peer view** holds what the peer's decoders acknowledged storing
///   (what our encoders may reference).
///
/// Cheap to clone (an `Arc`); every [`crate::Encoder`] and
/// [`crate::Decoder`] of flows with this peer holds a clone.
#[derive(Debug, Clone)]
pub struct PeerCache {
    shared: Arc<Mutex<Shared>>,
    /// One checkpoint (or clear) at a time; taken before `shared`.
    checkpointing: Arc<Mutex<()>>,
    peer_view_path: PathBuf,
    max_peer_entries: usize,
}

impl PeerCache {
    /// Open (or create with identity `new_id`) the cache in `dir`. The peer
    /// view saved by [`PeerCache::checkpoint`], with the changes journaled
    /// since, is loaded but unusable until [`PeerCache::handle_hello`]
    /// confirms it.
    pub fn open(dir: &Path, config: CacheConfig, new_id: CacheId) -> Result<Self, OpenError> {
        let store = ChunkStore::open(dir, config.store, new_id)?;
        let peer_view_path = dir.join(PEER_VIEW_FILE);
        let peer = PeerView::open(&peer_view_path, config.max_peer_entries);
        Ok(PeerCache {
            shared: Arc::new(Mutex::new(Shared { store, peer })),
            checkpointing: Arc::new(Mutex::new(())),
            peer_view_path,
            max_peer_entries: config.max_peer_entries,
        })
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, Shared> {
        // A panic while holding the lock cannot leave the store in a state
        // that breaks safety (reads are verified), so keep going.
        self.shared.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Our `Hello` for the peer: send it when the tunnel comes up.
    pub fn hello(&self) -> Hello {
        let shared = self.lock();
        Hello {
            cache_id: shared.store.cache_id(),
            epoch: shared.store.epoch(),
            low: shared.store.low(),
            high: shared.store.high(),
        }
    }

    /// Apply the peer's `Hello`. Until this is called on a tunnel, encoders
    /// reference only chunks sent earlier on the same flow.
    pub fn handle_hello(&self, hello: &Hello) {
        self.lock().peer.handle_hello(hello);
    }

    /// The tunnel went down: stop referencing until the next `Hello`.
    pub fn handle_tunnel_down(&self) {
        self.lock().peer.handle_tunnel_down();
    }

    /// Flush the store and save the peer view (call periodically and on
    /// shutdown). Between two calls the view's changes are journaled, so a
    /// crashed process loses none of the peer's acknowledgements; a power
    /// cut may lose those since the last call, which costs dedup, never
    /// correctness.
    ///
    /// The disk syncs happen outside the lock the flows use: the store's
    /// buffered records are written, the view's journal moves on to a new
    /// file and the view is serialized under it, then the files are synced
    /// and the view written without it (and the journal files it covers
    /// deleted). A view that has not changed since the last checkpoint is
    /// not written again.
    pub fn checkpoint(&self) -> std::io::Result<()> {
        let _one = self.checkpointing.lock().unwrap_or_else(|e| e.into_inner());
        let (files, snapshot) = {
            let mut shared = self.lock();
            let files = shared.store.prepare_sync()?;
            let snapshot = shared
                .peer
                .rotate_journal()
                .map(|mark| (mark, shared.peer.encode()));
            (files, snapshot)
        };
        for file in files {
            file.sync_data()?;
        }
        if let Some((mark, view)) = snapshot {
            PeerView::write(&self.peer_view_path, view.as_deref())?;
            PeerView::snapshot_written(&self.peer_view_path, mark);
        }
        Ok(())
    }

    /// What opening found of the peer view on disk (damage included).
    pub fn view_load(&self) -> crate::peer_view::ViewLoad {
        self.lock().peer.loaded()
    }

    /// Delete the store and the peer view; the cache gets identity `new_id`
    /// (the peer forgets its assumptions at the next `Hello`).
    pub fn clear(&self, new_id: CacheId) -> std::io::Result<()> {
        // Not while a checkpoint writes the view it took before.
        let _one = self.checkpointing.lock().unwrap_or_else(|e| e.into_inner());
        let mut shared = self.lock();
        shared.store.clear(new_id)?;
        PeerView::remove_files(&self.peer_view_path);
        shared.peer = PeerView::open(&self.peer_view_path, self.max_peer_entries);
        Ok(())
    }

    /// The store's last failed write since it opened (a full or failing
    /// disk), if any.
    pub fn last_write_error(&self) -> Option<String> {
        let shared = self.lock();
        shared
            .store
            .last_write_error()
            .or(shared.peer.journal_last_error())
            .map(str::to_string)
    }

    /// Counters.
    pub fn stats(&self) -> CacheStats {
        let shared = self.lock();
        CacheStats {
            store: shared.store.stats(),
            peer_chunks: shared.peer.len() as u64,
            peer_confirmed: shared.peer.is_confirmed(),
            journal_write_errors: shared.peer.journal_write_errors(),
        }
    }

    /// Paths of the store's segment files, oldest first.
    pub fn segment_paths(&self) -> Vec<PathBuf> {
        self.lock().store.segment_paths()
    }
}
