//! The tokio runtime of a wanopt node.
