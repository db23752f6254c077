//! The reduce wing: the node side of the `reduce` service.
//!
//! - [`peer_caches`]: one persistent byte cache per tunnel peer, and the
//!   [`Reduction`] a flow's pump receives ready;
//! - [`control_stream`]: the tunnel's cache control stream, which keeps the
//!   two ends' caches in agreement;
//! - [`compression`]: how literals are compressed, chosen by the tunnel's
//!   rate;
//! - [`budget`]: the node-wide memory budget of stream compressors;
//! - [`cache_dir`]: the cache directories on disk, private to the node's
//!   user.
//!
//! The pump that runs a flow through the codec is the flow wing's
//! (`crate::flow::codec_pump`).

pub mod budget;
pub mod cache_dir;
pub mod compression;
pub mod control_stream;
pub mod peer_caches;

pub use compression::{CompressionMode, AUTO_STEPS, RATE_MARGIN, ZSTD_BELOW_BPS};
pub use control_stream::{run_control, ControlStreamError, PeerServices};
pub use peer_caches::{
    CacheError, CacheReport, Caches, PeerCacheStats, PeerEntry, ReduceConfig, Reduction,
    DEFAULT_CACHE_CHECKPOINT, DEFAULT_CACHE_SIZE,
};
