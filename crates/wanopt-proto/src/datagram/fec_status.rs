//! What continuous FEC shows in `/status`: what this node sends on a
//! path and what it receives.

use std::net::SocketAddr;

use serde::{Deserialize, Serialize};

use super::fec::FecPeers;

/// A path's FEC in `/status`: what this node sends and what it receives.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct FecStatus {
    /// The node's setting (`auto`, `off`, `K:M`).
    pub mode: String,
    /// The code on the path now (`K:M`, `xD` when interleaved), or none.
    pub code: Option<String>,
    /// Sending: the loss the peer measured before repair, percent.
    pub loss_percent: f64,
    /// Sending: the mean run of consecutive losses, packets.
    pub burst: f64,
    /// Sending: the path carries UDP flows' datagrams (the code protects
    /// them: short blocks, repairs for a 0.1% loss after repair).
    #[serde(default)]
    pub datagrams: bool,
    /// Sending: repairs over sources of the code now, percent.
    pub ratio_percent: f64,
    /// Sending: repair bytes over source bytes so far, percent.
    pub overhead_percent: f64,
    /// Sending: sources sent.
    pub sources_sent: u64,
    /// Sending: repairs sent.
    pub repairs_sent: u64,
    /// Sending: blocks closed, and how many of them by the flush deadline
    /// or a change of code before they were full.
    #[serde(default)]
    pub blocks: u64,
    /// Sending: blocks closed before they were full.
    #[serde(default)]
    pub blocks_partial: u64,
    /// Sending: the peer's counts, as it last reported them.
    pub peer_recovered: u64,
    /// Sending: loss after repair at the peer, percent.
    pub residual_loss_percent: f64,
    /// Receiving: sources that arrived.
    pub received: u64,
    /// Receiving: sources lost on the way (before repair).
    pub lost: u64,
    /// Receiving: lost sources rebuilt from repairs.
    pub recovered: u64,
    /// Receiving: repairs that arrived.
    pub repairs_received: u64,
    /// Receiving: loss before repair, percent.
    pub received_loss_percent: f64,
    /// Receiving: loss after repair, percent.
    pub received_residual_percent: f64,
    /// Sending, call strand (the packets of real-time UDP flows, coded
    /// apart): its code now, or none.
    #[serde(default)]
    pub calls_code: Option<String>,
    /// Sending, call strand: sources sent.
    #[serde(default)]
    pub calls_sources_sent: u64,
    /// Sending, call strand: repairs sent.
    #[serde(default)]
    pub calls_repairs_sent: u64,
    /// Sending, call strand: repair bytes over source bytes, percent.
    #[serde(default)]
    pub calls_overhead_percent: f64,
    /// Sending, call strand: loss before repair at the peer, percent, as
    /// it last reported.
    #[serde(default)]
    pub calls_loss_percent: f64,
    /// Sending, call strand: loss after repair at the peer, percent.
    #[serde(default)]
    pub calls_residual_loss_percent: f64,
    /// Receiving, call strand: sources that arrived.
    #[serde(default)]
    pub calls_received: u64,
    /// Receiving, call strand: sources lost on the way (before repair).
    #[serde(default)]
    pub calls_lost: u64,
    /// Receiving, call strand: lost sources rebuilt from repairs.
    #[serde(default)]
    pub calls_recovered: u64,
}

fn percent(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        0.0
    } else {
        part as f64 * 100.0 / whole as f64
    }
}

impl FecPeers {
    /// What FEC does on the path to `peer`.
    pub(super) fn status(&self, peer: SocketAddr) -> FecStatus {
        let mut s = FecStatus {
            mode: self.mode.to_string(),
            ..FecStatus::default()
        };
        if let Some(sender) = self.senders.get(&peer) {
            let state = sender.policy.state();
            let stats = sender.encoder.stats();
            s.code = state.params.map(|p| p.to_string());
            s.loss_percent = state.loss * 100.0;
            s.burst = state.burst;
            s.datagrams = sender.policy.datagrams();
            s.ratio_percent = state.params.map_or(0.0, |p| p.ratio() * 100.0);
            s.overhead_percent = percent(stats.repair_bytes, stats.source_bytes);
            s.sources_sent = stats.sources;
            s.repairs_sent = stats.repairs;
            s.blocks = stats.blocks;
            s.blocks_partial = stats.flushed;
            if let Some(r) = sender.report {
                s.peer_recovered = u64::from(r.recovered);
                let total = u64::from(r.received) + u64::from(r.lost);
                s.residual_loss_percent =
                    percent(u64::from(r.lost.saturating_sub(r.recovered)), total);
            }
        }
        if let Some(sender) = self.senders.get(&peer) {
            let calls = &sender.calls;
            let stats = calls.encoder.stats();
            s.calls_code = calls.policy.state().params.map(|p| p.to_string());
            s.calls_sources_sent = stats.sources;
            s.calls_repairs_sent = stats.repairs;
            s.calls_overhead_percent = percent(stats.repair_bytes, stats.source_bytes);
            if let Some(r) = calls.report {
                let total = u64::from(r.received) + u64::from(r.lost);
                s.calls_loss_percent = percent(u64::from(r.lost), total);
                s.calls_residual_loss_percent =
                    percent(u64::from(r.lost.saturating_sub(r.recovered)), total);
            }
        }
        if let Some(receiver) = self.receivers.get(&peer) {
            let c = receiver.calls.decoder.stats();
            s.calls_received = c.received;
            s.calls_lost = c.lost;
            s.calls_recovered = c.recovered;
            let d = receiver.bulk.decoder.stats();
            s.received = d.received;
            s.lost = d.lost;
            s.recovered = d.recovered;
            s.repairs_received = d.repairs;
            s.received_loss_percent = percent(d.lost, d.received + d.lost);
            s.received_residual_percent =
                percent(d.lost.saturating_sub(d.recovered), d.received + d.lost);
        }
        s
    }
}
