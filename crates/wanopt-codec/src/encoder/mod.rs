//! The encoder: plain bytes from the LAN -> frames for the WAN.
//!
//! [`Encoder`] (in `flow.rs`) cuts the bytes into chunks and decides, per
//! chunk (`chunk.rs`), between a reference to a chunk the peer holds
//! (`refer.rs`, gathered into spans), a delta against a chunk like it
//! (`delta.rs`) and a literal (`literal.rs`: alone, in runs, in the flow's
//! compression stream, `stream.rs`, or as pieces). Whether a literal is
//! compressed, and how, is the [`Compression`] setting (`compression.rs`)
//! and a backoff over incompressible data (`choose.rs`); referenced chunks
//! are kept for repairs (`retain.rs`).

mod choose;
mod chunk;
mod compression;
mod config;
mod delta;
mod error;
mod flow;
mod literal;
mod refer;
mod retain;
mod span;
mod state;
mod stream;

pub use self::compression::{
    text_share, Compression, LZMA_ALONE_ZSTD_LEVEL, LZMA_ENCODER_BYTES, PPMD_KEEP_SHARE,
    PPMD_TEXT_SHARE,
};
pub use self::config::{EncoderConfig, DEFAULT_RUN_LEN};
pub use self::error::PeerControlError;
pub use self::flow::Encoder;
#[cfg(test)]
mod tests;
