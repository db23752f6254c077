//! Sans-IO data reduction for wanopt: content-defined chunking, BLAKE3
//! fingerprints, LZ4, zstd, LZMA2 or PPMd for literals, and a persistent
//! per-peer byte cache with a resynchronisation protocol that never stalls
//! and never delivers a wrong byte.
//!
//! No sockets, no clock, no threads, no global randomness: the node feeds
//! bytes in and writes bytes out. The only I/O is the cache's own files
//! under a directory the caller names.
//!
//! # Pieces
//!
//! - [`chunker`]: FastCDC 2020, incremental (the same boundaries however the
//!   stream is split);
//! - [`Fingerprint`]: BLAKE3 truncated to 128 bits;
//! - [`frame`] and [`control`]: the checked wire formats;
//! - [`compress`]: the compression engines (LZ4, zstd, LZMA2, PPMd) behind
//!   one trait, [`compress::Engine`];
//! - [`store`]: append-only checksummed segment files plus an in-memory
//!   index, FIFO eviction, torn-tail repair, verified reads;
//! - [`PeerCache`]: a node's cache for one peer (store + peer view), shared
//!   by all flows with that peer;
//! - [`Encoder`] / [`Decoder`]: one per flow direction.
//!
//! # Protocol
//!
//! **Handshake.** When the tunnel comes up each node sends
//! [`PeerCache::hello`] (cache id, epoch, store positions `low..high`) on
//! the tunnel's control stream and passes the peer's to
//! [`PeerCache::handle_hello`]. The encoder side keeps a *peer view*: the
//! fingerprints the peer's decoder acknowledged storing, with their store
//! positions. A new id (wiped or replaced peer) or epoch (the peer lost
//! records on a crash) clears the view; otherwise entries outside
//! `low..high` are dropped. Before the `Hello`, no cross-flow reference is
//! sent (a restarted peer can never be sent a reference it cannot resolve).
//!
//! **References.** An encoder emits a `Reference` only for a chunk that is
//! (a) in the peer view, i.e. the peer *acknowledged* storing it (`Ack`
//! frames, sent only after the append: by its decoder for a chunk it
//! received, and by its encoder for a literal it sent, so the cache works
//! in both directions), or (b) sent as a literal
//! earlier *on the same flow* (the stream is ordered, and the decoder
//! stores every literal before it reads the next frame). Flows are
//! independent QUIC streams with no order between them, so a chunk first
//! sent on flow A is referenced on flow B only after the peer acknowledged
//! it: never "waiting for unknown hashes".
//!
//! **NeedChunk.** If a reference cannot be resolved anyway (record damaged
//! on disk — every read is re-hashed —, evicted meanwhile, write error),
//! the decoder holds back the bytes after it (bounded by
//! [`DecoderConfig::max_backlog`]), sends `NeedChunk` on the reverse
//! direction of the same flow, and the encoder answers with a `Repair`
//! frame carrying the chunk (it retains the last referenced chunks,
//! [`EncoderConfig::retain_bytes`], and reads older ones from its own
//! store, verified). The stream goes on; a repair is verified against its
//! fingerprint before use.
//!
//! **End.** [`Encoder::finish`] writes `End`; the decoder answers `Done`
//! when every byte before it is delivered. Finish a side's QUIC send
//! direction only once its [`Encoder::is_done`] (until then a repair may
//! still be needed) and its [`Decoder::is_finished`] with the control
//! frames drained (so the last `Ack` and `Done` reach the peer). A stream
//! reset loses at most some acks: less dedup later, never a wrong byte.
//!
//! **Restarts.** Call [`PeerCache::checkpoint`] periodically and at
//! shutdown: it syncs the segments and saves the peer view, which a
//! restarted node reloads and re-confirms with the peer's next `Hello`, so
//! warm transfers stay warm across restarts of either side. Between
//! checkpoints the view's changes are journaled as they happen, so a
//! process that crashes loses none of them either. After a tunnel
//! drops, call [`PeerCache::handle_tunnel_down`] and discard control frames
//! of the old connection.
//!
//! **Framing on the stream.** Each direction of a flow's QUIC stream
//! carries the preamble, then the local encoder's data frames interleaved
//! (at frame boundaries) with the local decoder's control frames. The
//! receiving [`Decoder`] separates them: data becomes plain bytes, control
//! frames come out of [`Decoder::poll_peer_control`] for the local encoder.
//!
//! # Integration (one flow, one side)
//!
//! ```
//! use wanopt_codec::{CacheConfig, CacheId, Decoder, DecoderConfig, Encoder, EncoderConfig, PeerCache};
//! # let edge_dir = tempfile::tempdir().unwrap();
//! # let core_dir = tempfile::tempdir().unwrap();
//! // Once per peer, at startup (ids come from the node's random source).
//! let edge = PeerCache::open(edge_dir.path(), CacheConfig::default(), CacheId([1; 16])).unwrap();
//! let core = PeerCache::open(core_dir.path(), CacheConfig::default(), CacheId([2; 16])).unwrap();
//! // Tunnel up: exchange hellos on the control stream.
//! core.handle_hello(&edge.hello());
//! edge.handle_hello(&core.hello());
//!
//! // Per flow, each side has an encoder (its send direction) and a decoder
//! // (its receive direction). Edge: client -> server bytes.
//! let mut edge_enc = Encoder::new(edge.clone(), EncoderConfig::default()).unwrap();
//! let mut edge_dec = Decoder::new(edge.clone(), DecoderConfig::default());
//! let mut core_enc = Encoder::new(core.clone(), EncoderConfig::default()).unwrap();
//! let mut core_dec = Decoder::new(core.clone(), DecoderConfig::default());
//!
//! let mut to_core = Vec::new();
//! edge_enc.start(&mut to_core);
//! edge_enc.push(b"GET / HTTP/1.1\r\n\r\n", &mut to_core); // on every LAN read
//! edge_enc.finish(&mut to_core); // LAN EOF
//!
//! // Core: QUIC read -> decoder -> server socket; control goes back.
//! let mut to_server = Vec::new();
//! let mut to_edge = Vec::new();
//! core_enc.start(&mut to_edge);
//! core_dec.push(&to_core, &mut to_server).unwrap(); // error => reset the stream
//! while let Some(msg) = core_dec.poll_peer_control() {
//!     core_enc.handle_peer(&msg, &mut to_edge).unwrap();
//! }
//! core_dec.emit_control(&mut to_edge);
//! assert_eq!(to_server, b"GET / HTTP/1.1\r\n\r\n");
//! assert!(core_dec.is_finished()); // shut down the server socket's write side
//!
//! // Edge: reads the reverse direction the same way.
//! let mut to_client = Vec::new();
//! edge_dec.push(&to_edge, &mut to_client).unwrap();
//! while let Some(msg) = edge_dec.poll_peer_control() {
//!     edge_enc.handle_peer(&msg, &mut to_core).unwrap();
//! }
//! assert!(edge_enc.is_done()); // now finish the QUIC send direction
//! ```

pub mod cache;
pub mod chunker;
pub mod compress;
pub mod control;
pub mod decoder;
pub mod encoder;
pub mod fingerprint;
pub mod frame;
pub mod peer_view;
pub mod private;
pub mod stats;
pub mod store;

pub use cache::{CacheConfig, PeerCache};
pub use chunker::{Chunker, ChunkerConfig, StreamChunker, MAX_CHUNK_LEN};
pub use control::{CacheId, ControlRepr, Hello};
pub use decoder::{DecodeError, Decoder, DecoderConfig};
pub use encoder::{
    text_share, Compression, Encoder, EncoderConfig, PeerControlError, PPMD_KEEP_SHARE,
    PPMD_TEXT_SHARE,
};
pub use fingerprint::Fingerprint;
pub use stats::{CacheStats, DecoderStats, EncoderStats, StoreStats};
pub use store::{ChunkStore, StoreConfig};
