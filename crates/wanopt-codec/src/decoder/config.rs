//! The decoder's settings.

/// Decoder settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct DecoderConfig {
    /// Bound on the bytes held back behind an unresolved reference while
    /// its repair is on the way (about one round trip of data).
    pub max_backlog: usize,
    /// Bound on control frames from the peer waiting for
    /// [`Decoder::poll_peer_control`](crate::Decoder::poll_peer_control).
    pub max_peer_control: usize,
}

impl Default for DecoderConfig {
    fn default() -> Self {
        DecoderConfig {
            max_backlog: 64 << 20,
            max_peer_control: 1 << 16,
        }
    }
}
