//! What the examples share.

use tempfile::TempDir;
use wanopt_codec::{CacheConfig, CacheId, PeerCache};

/// A fresh pair of byte caches that have exchanged their hellos, in
/// temporary directories removed when the pair is dropped.
pub struct CachePair {
    pub edge: PeerCache,
    pub core: PeerCache,
    _dirs: (TempDir, TempDir),
}

pub fn cache_pair() -> CachePair {
    let a = tempfile::tempdir().expect("temporary directory");
    let b = tempfile::tempdir().expect("temporary directory");
    let edge = PeerCache::open(a.path(), CacheConfig::default(), CacheId([1; 16])).expect("cache");
    let core = PeerCache::open(b.path(), CacheConfig::default(), CacheId([2; 16])).expect("cache");
    core.handle_hello(&edge.hello());
    edge.handle_hello(&core.hello());
    CachePair {
        edge,
        core,
        _dirs: (a, b),
    }
}
