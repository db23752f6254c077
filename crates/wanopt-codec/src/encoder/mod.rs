//! The encoder: plain bytes from the LAN -> frames for the WAN.
//!
//! [`Encoder`] (in `flow.rs`) cuts the bytes into chunks (`chunking.rs`)
//! and decides, per chunk (`chunk.rs`), between a reference to a chunk the
//! peer holds (`refer.rs`, gathered into spans, `span.rs`), a delta
//! against a chunk like it (`delta.rs`) and a literal (`literal.rs`: alone,
//! in runs, `run.rs`, in the flow's compression stream, `stream.rs`, or as
//! pieces). What the peer holds is the flow's view (`view.rs`). Whether a
//! literal is compressed, and how, is the [`Compression`] setting
//! (`compression.rs`) and the flow's compressors with a backoff over
//! incompressible data (`compressor.rs`); referenced chunks are kept
//! (`retain.rs`) to answer the peer's repairs (`repair.rs`).
//!
//! The state of a flow apart from its chunker is `Core` (`state.rs`),
//! made of those parts, each owning its fields.

mod chunk;
mod chunking;
mod compression;
mod compressor;
mod config;
mod delta;
mod error;
mod flow;
mod literal;
mod refer;
mod repair;
mod retain;
mod run;
mod span;
mod state;
mod stream;
mod view;

pub use self::compression::{
    text_share, Compression, LZMA_ALONE_ZSTD_LEVEL, LZMA_ENCODER_BYTES, PPMD_KEEP_SHARE,
    PPMD_TEXT_SHARE,
};
pub use self::config::{EncoderConfig, DEFAULT_RUN_LEN};
pub use self::error::PeerControlError;
pub use self::flow::Encoder;
#[cfg(test)]
mod tests;
