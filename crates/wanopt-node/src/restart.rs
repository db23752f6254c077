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

use crate::core::CoreConfig;
use crate::edge::EdgeConfig;
use crate::flow::limits::FlowLimitsConfig;
use crate::reduce::ReduceConfig;
use crate::transport::tunnel::TunnelTuning;

/// The settings both roles read at start.
struct Common<'a> {
    control: Option<SocketAddr>,
    control_token: &'a Option<PathBuf>,
    reduce: &'a Option<ReduceConfig>,
    connect_timeout: Duration,
    drain: Duration,
    tuning: &'a TunnelTuning,
    limits: FlowLimitsConfig,
    flow_idle_timeout: Option<Duration>,
    udp_idle_timeout: Duration,
}

/// Keys whose values differ, in the order given.
struct Changed(Vec<&'static str>);

impl Changed {
    fn check<T: PartialEq + ?Sized>(&mut self, key: &'static str, old: &T, new: &T) {
        if old != new && !self.0.contains(&key) {
            self.0.push(key);
        }
    }

    fn common(&mut self, old: &Common<'_>, new: &Common<'_>) {
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
        self.check("connect-timeout", &old.connect_timeout, &new.connect_timeout);
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

fn edge_common(c: &EdgeConfig) -> Common<'_> {
    Common {
        control: c.control,
        control_token: &c.control_token,
        reduce: &c.reduce,
        connect_timeout: c.connect_timeout,
        drain: c.drain,
        tuning: &c.tuning,
        limits: c.limits,
        flow_idle_timeout: c.flow_idle_timeout,
        udp_idle_timeout: c.udp_idle_timeout,
    }
}

fn core_common(c: &CoreConfig) -> Common<'_> {
    Common {
        control: c.control,
        control_token: &c.control_token,
        reduce: &c.reduce,
        connect_timeout: c.connect_timeout,
        drain: c.drain,
        tuning: &c.tuning,
        limits: c.limits,
        flow_idle_timeout: c.flow_idle_timeout,
        udp_idle_timeout: c.udp_idle_timeout,
    }
}

/// The keys an edge's reload from `old` to `new` changes that only a
/// restart applies.
pub(crate) fn edge_keys(old: &EdgeConfig, new: &EdgeConfig) -> Vec<&'static str> {
    let mut changed = Changed(Vec::new());
    changed.common(&edge_common(old), &edge_common(new));
    changed.check("forward", &old.forwards, &new.forwards);
    changed.check("forward-udp", &old.udp_forwards, &new.udp_forwards);
    changed.check("transparent", &old.transparent, &new.transparent);
    changed.check(
        "transparent-udp",
        &old.transparent_udp,
        &new.transparent_udp,
    );
    changed.check("fail", &old.fail, &new.fail);
    changed.check("tunnel-wait", &old.tunnel_wait, &new.tunnel_wait);
    changed.check("bind", &old.bind, &new.bind);
    changed.check("path", &old.paths, &new.paths);
    changed.check("path-mode", &old.path_use, &new.path_use);
    changed.check("transport", &old.transport, &new.transport);
    changed.check("tcp-port", &old.tcp_port, &new.tcp_port);
    changed.0
}

/// The keys a core's reload from `old` to `new` changes that only a
/// restart applies.
pub(crate) fn core_keys(old: &CoreConfig, new: &CoreConfig) -> Vec<&'static str> {
    let mut changed = Changed(Vec::new());
    changed.common(&core_common(old), &core_common(new));
    changed.check("listen", &old.listen, &new.listen);
    changed.check("listen-tcp", &old.listen_tcp, &new.listen_tcp);
    changed.check("advertise", &old.advertise, &new.advertise);
    changed.0
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
