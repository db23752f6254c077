//! The bridge to the sans-IO emulator model in `wanopt-netem`.

use std::sync::Arc;
use std::time::Instant;

use wanopt_netem::middlebox::{Middlebox, Rule, Verdict};
use wanopt_netem::units::{self, ParseSpecError};
use wanopt_netem::{DeliveryTrace, Link, LinkConfig};

use crate::link::rules::RulesFollower;
use crate::link::{FrameLink, RulesSwitch};

/// Parses a one-direction link spec (`"rtt 100ms rate 250mbit queue 2bdp"`)
/// on top of a perfect link; `trace FILE` reads a trace of delivery
/// opportunities in Mahimahi's format from the file.
pub fn config(spec: &str) -> Result<LinkConfig, ParseSpecError> {
    let mut config = LinkConfig::default();
    units::apply_spec_with(&mut config, spec, &read_trace)?;
    Ok(config)
}

/// Reads the trace file `path` (Mahimahi's format), in one line on error.
pub fn read_trace(path: &str) -> Result<DeliveryTrace, String> {
    let text =
        std::fs::read_to_string(path).map_err(|e| format!("cannot read trace `{path}`: {e}"))?;
    DeliveryTrace::parse(&text).map_err(|e| format!("trace `{path}`: {e}"))
}

/// Checks that `spec` is a valid one-direction link spec.
pub fn validate(spec: &str) -> Result<(), ParseSpecError> {
    config(spec).map(|_| ())
}

/// One direction of the wan namespace: the middlebox rules in front of the
/// queue (if any), the link, and the rules after the queue (if any); with
/// [`Bump::following`], rules that change while it runs (`lab middlebox`).
pub struct Bump {
    middlebox: Option<Middlebox>,
    link: Link,
    after_queue: Option<Middlebox>,
    middlebox_seed: u64,
    follower: Option<RulesFollower>,
}

/// Builds one direction from its link configuration and seed, with
/// middleboxes holding `rules` keyed by `middlebox_seed`: one in front of
/// the queue, one after it for the `after-queue` rules (none without rules).
pub fn build(config: LinkConfig, seed: u64, rules: &[Rule], middlebox_seed: u64) -> Bump {
    let place = |after_queue: bool| {
        let rules: Vec<Rule> = rules
            .iter()
            .filter(|rule| rule.after_queue == after_queue)
            .cloned()
            .collect();
        (!rules.is_empty()).then(|| Middlebox::new(rules, middlebox_seed))
    };
    Bump {
        middlebox: place(false),
        link: Link::new(config, seed),
        after_queue: place(true),
        middlebox_seed,
        follower: None,
    }
}

impl Bump {
    /// The same direction, taking the rules of `switch` whenever they
    /// change.
    pub fn following(mut self, switch: Arc<RulesSwitch>) -> Bump {
        self.follower = Some(RulesFollower::new(switch));
        self
    }

    /// Takes new rules if the switch has them: each place's middlebox gets
    /// its rules (its counters go on), one is made for a place that had
    /// none.
    fn follow_switch(&mut self) {
        let Some(rules) = self.follower.as_mut().and_then(RulesFollower::poll_change) else {
            return;
        };
        let seed = self.middlebox_seed;
        for (after_queue, place) in [(false, &mut self.middlebox), (true, &mut self.after_queue)] {
            let rules: Vec<Rule> = rules
                .iter()
                .filter(|rule| rule.after_queue == after_queue)
                .cloned()
                .collect();
            match place {
                Some(middlebox) => middlebox.set_rules(rules),
                None if !rules.is_empty() => *place = Some(Middlebox::new(rules, seed)),
                None => {}
            }
        }
    }
}

impl FrameLink for Bump {
    fn handle_frame(&mut self, now: Instant, mut frame: Vec<u8>) {
        self.follow_switch();
        if let Some(middlebox) = &mut self.middlebox {
            if middlebox.process(now, &mut frame) == Verdict::Drop {
                return;
            }
        }
        self.link.handle_frame(now, frame)
    }
    fn poll_transmit(&mut self, now: Instant) -> Option<Vec<u8>> {
        self.follow_switch();
        loop {
            let mut frame = self.link.poll_transmit(now)?;
            let dropped = self
                .after_queue
                .as_mut()
                .is_some_and(|middlebox| middlebox.process(now, &mut frame) == Verdict::Drop);
            if !dropped {
                return Some(frame);
            }
        }
    }
    fn poll_timeout(&self) -> Option<Instant> {
        self.link.poll_timeout()
    }
    fn counters_json(&self) -> serde_json::Value {
        let mut value =
            serde_json::to_value(self.link.counters()).unwrap_or(serde_json::Value::Null);
        if let (Some(map), Some(limit)) = (value.as_object_mut(), self.link.queue_limit()) {
            map.insert(
                "queue_limit".into(),
                serde_json::Value::String(format!("{limit:?}")),
            );
        }
        for (key, middlebox) in [
            ("middlebox", &self.middlebox),
            ("middlebox_after_queue", &self.after_queue),
        ] {
            if let (Some(map), Some(middlebox)) = (value.as_object_mut(), middlebox) {
                map.insert(
                    key.into(),
                    serde_json::to_value(middlebox.counters()).unwrap_or(serde_json::Value::Null),
                );
            }
        }
        let change = self.follower.as_ref().and_then(RulesFollower::to_json);
        if let (Some(map), Some(change)) = (value.as_object_mut(), change) {
            map.insert("middlebox_rules".into(), change);
        }
        value
    }
}
