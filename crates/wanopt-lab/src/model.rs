//! The bridge to the sans-IO emulator model in `wanopt-netem`.

use crate::driver::{FrameLink, Wire};

/// Checks that `spec` is a valid one-direction link spec.
pub fn validate(spec: &str) -> Result<(), String> {
    build(spec, 0).map(|_| ())
}

/// Builds the link model of one direction from its spec.
pub fn build(spec: &str, seed: u64) -> Result<Box<dyn FrameLink>, String> {
    let _ = seed;
    if spec.trim().is_empty() {
        return Ok(Box::new(Wire::default()));
    }
    Err("the emulator model (wanopt-netem) is not available in this build yet".to_string())
}
