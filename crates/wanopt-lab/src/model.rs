//! The bridge to the sans-IO emulator model in `wanopt-netem`.

use std::time::Instant;

use wanopt_netem::{units, Link, LinkConfig};

use crate::driver::FrameLink;

/// Parses a one-direction link spec (`"rtt 100ms rate 250mbit queue 2bdp"`)
/// on top of a perfect link.
pub fn config(spec: &str) -> Result<LinkConfig, String> {
    let mut config = LinkConfig::default();
    units::apply_spec(&mut config, spec).map_err(|e| e.to_string())?;
    Ok(config)
}

/// Checks that `spec` is a valid one-direction link spec.
pub fn validate(spec: &str) -> Result<(), String> {
    config(spec).map(|_| ())
}

/// Builds the link model of one direction from its spec.
pub fn build(spec: &str, seed: u64) -> Result<Link, String> {
    Ok(Link::new(config(spec)?, seed))
}

impl FrameLink for Link {
    fn handle_frame(&mut self, now: Instant, frame: Vec<u8>) {
        Link::handle_frame(self, now, frame)
    }
    fn poll_transmit(&mut self, now: Instant) -> Option<Vec<u8>> {
        Link::poll_transmit(self, now)
    }
    fn poll_timeout(&self) -> Option<Instant> {
        Link::poll_timeout(self)
    }
    fn counters_json(&self) -> serde_json::Value {
        let mut value = serde_json::to_value(self.counters()).unwrap_or(serde_json::Value::Null);
        if let (Some(map), Some(limit)) = (value.as_object_mut(), self.queue_limit()) {
            map.insert(
                "queue_limit".into(),
                serde_json::Value::String(format!("{limit:?}")),
            );
        }
        value
    }
}
