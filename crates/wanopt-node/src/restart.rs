//! What a reload cannot change: the settings a node reads once, at start,
//! named by their configuration keys. A reload that changes any of them
//! is refused whole, naming them, so that an operator who lowers
//! `max-flows` under attack is told it needs a restart rather than left
//! to believe it took effect.
//!
//! Live on reload: the peers, their routes and allowlists, and the edge's
//! policy (`optimize`, `pass-unmatched`, `no-reduce-to`, `class`).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use crate::flow::limits::FlowLimitsConfig;
use crate::reduce::ReduceConfig;
use crate::transport::tunnel::TunnelTuning;

/// The settings both roles read at start.
pub(crate) struct Common<'a> {
    pub(crate) control: Option<SocketAddr>,
    pub(crate) control_token: &'a Option<PathBuf>,
    pub(crate) reduce: &'a Option<ReduceConfig>,
    pub(crate) connect_timeout: Duration,
    pub(crate) drain: Duration,
    pub(crate) tuning: &'a TunnelTuning,
    pub(crate) limits: FlowLimitsConfig,
    pub(crate) flow_idle_timeout: Option<Duration>,
    pub(crate) udp_idle_timeout: Duration,
}

/// Keys whose values differ, in the order given.
#[derive(Default)]
pub(crate) struct Changed(Vec<&'static str>);

impl Changed {
    /// Notes `key` when `old` and `new` differ.
    pub(crate) fn check<T: PartialEq + ?Sized>(&mut self, key: &'static str, old: &T, new: &T) {
        if old != new && !self.0.contains(&key) {
            self.0.push(key);
        }
    }

    /// Notes the keys of the settings both roles read at start.
    pub(crate) fn common(&mut self, old: &Common<'_>, new: &Common<'_>) {
        self.check("control", &old.control, &new.control);
        self.check("control-token", old.control_token, new.control_token);
        match (old.reduce, new.reduce) {
            (Some(old), Some(new)) => {
                self.check("cache-dir", &old.cache_dir, &new.cache_dir);
                self.check("cache-size", &old.cache_size, &new.cache_size);
                self.check(
                    "cache-checkpoint",
                    &old.cache_checkpoint,
                    &new.cache_checkpoint,
                );
                self.check("compression", &old.compression, &new.compression);
                self.check(
                    "compressor-memory",
                    &old.compressor_memory,
                    &new.compressor_memory,
                );
            }
            (old, new) => self.check("no-reduce", &old.is_none(), &new.is_none()),
        }
        self.check(
            "connect-timeout",
            &old.connect_timeout,
            &new.connect_timeout,
        );
        self.check("drain", &old.drain, &new.drain);
        self.tuning(old.tuning, new.tuning);
        self.check("max-flows", &old.limits.max_flows, &new.limits.max_flows);
        self.check(
            "max-flows-per-source",
            &old.limits.max_flows_per_source,
            &new.limits.max_flows_per_source,
        );
        self.check(
            "flow-idle-timeout",
            &old.flow_idle_timeout,
            &new.flow_idle_timeout,
        );
        self.check(
            "udp-idle-timeout",
            &old.udp_idle_timeout,
            &new.udp_idle_timeout,
        );
    }

    fn tuning(&mut self, old: &TunnelTuning, new: &TunnelTuning) {
        self.check("congestion", &old.congestion, &new.congestion);
        self.check("stream-window", &old.stream_window, &new.stream_window);
        self.check(
            "stream-window-initial",
            &old.stream_window_initial,
            &new.stream_window_initial,
        );
        self.check(
            "connection-window",
            &old.connection_window,
            &new.connection_window,
        );
        self.check(
            "window-budget",
            &old.window_budget.limit(),
            &new.window_budget.limit(),
        );
        self.check("max-mtu", &old.max_mtu, &new.max_mtu);
        self.check("tunnel-timeout", &old.idle_timeout, &new.idle_timeout);
        self.check("duplication", &old.duplication, &new.duplication);
        self.check("fec", &old.fec, &new.fec);
        self.check("fec-budget", &old.fec_budget, &new.fec_budget);
    }
}

impl Changed {
    /// The keys noted, in order.
    pub(crate) fn keys(self) -> Vec<&'static str> {
        self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_key_is_named_once_in_order() {
        let mut changed = Changed(Vec::new());
        changed.check("max-flows", &10, &5);
        changed.check("control", &1, &1);
        changed.check("drain", &"1s", &"2s");
        changed.check("max-flows", &10, &4);
        assert_eq!(changed.0, ["max-flows", "drain"]);
    }
}
