//! `--optimize`: a wanopt edge in `edge` (transparent interception of the
//! client's TCP via iptables `REDIRECT`) and a wanopt core in `core`.

use std::path::Path;

use crate::topology::Lab;

/// Starts the wanopt edge and core of `lab`.
pub fn start(lab: &Lab, exe: &Path) -> Result<(), String> {
    let _ = (lab, exe);
    Err("the wanopt edge/core nodes are not available in this build yet".to_string())
}
