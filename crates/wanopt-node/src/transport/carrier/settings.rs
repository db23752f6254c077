//! The QUIC transport settings of a tunnel over TCP.

use quinn::TransportConfig;

use super::controller::Unlimited;

/// The QUIC packet size on a carrier: TCP segments it, so larger packets
/// only cost fewer headers and calls.
pub const CARRIED_MTU: u16 = 8192;

/// Sets `t` for a tunnel over TCP: packets of [`CARRIED_MTU`] with no
/// path MTU discovery (TCP segments them), and no congestion window of
/// its own below `window` (the kernel's TCP controls the rate).
pub fn over_tcp(t: &mut TransportConfig, window: u64) {
    t.initial_mtu(CARRIED_MTU)
        .mtu_discovery_config(None)
        .congestion_controller_factory(Unlimited::factory(window));
}
