//! What the lab reads around a `waas-3g` transfer besides the emulator's
//! counters ([`crate::link::published`]): the nodes' tunnel counters,
//! cache statistics and the flow resets they counted.

use super::super::results::TunnelSample;
use super::context::Context;
use crate::topology::Node;

/// A node's tunnel counters (its first peer in `wanopt status --json`)
/// and its reconnections so far, or `None` when the node cannot be asked:
/// the sample then goes without.
pub(super) fn tunnel_counters(
    ctx: &Context<'_>,
    node: Node,
    control: &str,
) -> Option<(TunnelSample, u64)> {
    let mut cmd = ctx.lab.command(node, &ctx.exe.to_string_lossy());
    cmd.args(["status", "--json", "--control", control]);
    let out = cmd.output().ok().filter(|o| o.status.success())?;
    let status: serde_json::Value = serde_json::from_slice(&out.stdout).ok()?;
    let peer = &status["peers"][0];
    let dup = &peer["duplication"];
    let count = |v: &serde_json::Value| v.as_u64().unwrap_or(0);
    let sample = TunnelSample {
        sent_packets: peer["sent_packets"].as_u64()?,
        lost_packets: count(&peer["lost_packets"]),
        duplicated: count(&dup["datagrams"]),
        rebuilt: count(&dup["rebuilt"]),
        tails_on: dup["active"].as_bool().unwrap_or(false),
        loss_percent: dup["loss_percent"].as_f64().unwrap_or(0.0),
    };
    Some((sample, count(&peer["reconnects"])))
}

/// What a node's tunnel counted between two snapshots (the state flags
/// as of the first); nothing if the tunnel reconnected in between (the
/// counters are then a new connection's).
pub(super) fn tunnel_delta(
    before: Option<(TunnelSample, u64)>,
    after: Option<(TunnelSample, u64)>,
) -> Option<TunnelSample> {
    let ((b, b_reconnects), (a, a_reconnects)) = (before?, after?);
    if a_reconnects != b_reconnects {
        return None;
    }
    Some(TunnelSample {
        sent_packets: a.sent_packets.checked_sub(b.sent_packets)?,
        lost_packets: a.lost_packets.saturating_sub(b.lost_packets),
        duplicated: a.duplicated.saturating_sub(b.duplicated),
        rebuilt: a.rebuilt.saturating_sub(b.rebuilt),
        ..b
    })
}

/// A node's `wanopt cache stats --json`, or what went wrong asking.
pub(super) fn cache_stats(ctx: &Context<'_>, node: Node, control: &str) -> serde_json::Value {
    let mut cmd = ctx.lab.command(node, &ctx.exe.to_string_lossy());
    cmd.args(["cache", "stats", "--json", "--control", control]);
    match cmd.output() {
        Ok(out) if out.status.success() => {
            serde_json::from_slice(&out.stdout).unwrap_or_else(|_| {
                serde_json::Value::String(String::from_utf8_lossy(&out.stdout).into_owned())
            })
        }
        Ok(out) => serde_json::json!({"error": String::from_utf8_lossy(&out.stderr).trim()}),
        Err(e) => serde_json::json!({"error": e.to_string()}),
    }
}

/// The flow resets for a codec error a node counted (`wanopt status
/// --json`, `flow_resets`: `codec` and `peer_codec`), as a line for the
/// report, or `None` when it counted none (or cannot be asked).
pub(super) fn counted_resets(ctx: &Context<'_>, node: Node, control: &str) -> Option<String> {
    let mut cmd = ctx.lab.command(node, &ctx.exe.to_string_lossy());
    cmd.args(["status", "--json", "--control", control]);
    let out = cmd.output().ok().filter(|o| o.status.success())?;
    let status: serde_json::Value = serde_json::from_slice(&out.stdout).ok()?;
    let resets = status["flow_resets"].as_object()?;
    let count = |reason: &str| resets.get(reason).and_then(|v| v.as_u64()).unwrap_or(0);
    let (codec, peer_codec) = (count("codec"), count("peer_codec"));
    (codec + peer_codec > 0).then(|| {
        format!(
            "{}: status counts flow resets for codec errors: codec {codec}, peer_codec {peer_codec}",
            node.name()
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn snapshot(sent: u64, lost: u64, tails_on: bool) -> (TunnelSample, u64) {
        let sample = TunnelSample {
            sent_packets: sent,
            lost_packets: lost,
            duplicated: sent / 10,
            rebuilt: lost / 2,
            tails_on,
            loss_percent: 1.5,
        };
        (sample, 0)
    }

    /// A transfer's tunnel record is the counters' growth, with the state
    /// as the transfer found it; a node that could not be asked, or whose
    /// tunnel reconnected in between, gives no record.
    #[test]
    fn tunnel_records_are_differences_of_snapshots() {
        let d = tunnel_delta(Some(snapshot(400, 6, true)), Some(snapshot(551, 8, false)));
        assert_eq!(
            d,
            Some(TunnelSample {
                sent_packets: 151,
                lost_packets: 2,
                duplicated: 15,
                rebuilt: 1,
                tails_on: true,
                loss_percent: 1.5,
            })
        );
        assert_eq!(tunnel_delta(None, Some(snapshot(551, 8, true))), None);
        assert_eq!(tunnel_delta(Some(snapshot(400, 6, true)), None), None);
        let reconnected = (snapshot(900, 8, true).0, 1);
        assert_eq!(
            tunnel_delta(Some(snapshot(400, 6, true)), Some(reconnected)),
            None
        );
        assert_eq!(
            tunnel_delta(Some(snapshot(400, 6, true)), Some(snapshot(20, 0, true))),
            None
        );
    }
}
