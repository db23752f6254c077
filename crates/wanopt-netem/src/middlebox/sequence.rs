//! Sequence-number randomization, as done by firewalls that "harden" initial
//! sequence numbers (and, when they forget SACK, break it).

use crate::middlebox::options;
use crate::middlebox::Segment;
use crate::wire::tcp::{kind, TcpSegment, FLAG_ACK};

/// The offset added to the sequence numbers of the flow direction
/// `source:source_port -> destination:destination_port`: SplitMix64 over the
/// seed and the directed 4-tuple, so every middlebox with the same seed
/// agrees without sharing state.
pub(super) fn offset(
    seed: u64,
    source: [u8; 4],
    source_port: u16,
    destination: [u8; 4],
    destination_port: u16,
) -> u32 {
    let mut state = seed;
    let words = [
        u64::from(u32::from_be_bytes(source)) << 16 | u64::from(source_port),
        u64::from(u32::from_be_bytes(destination)) << 16 | u64::from(destination_port),
    ];
    for word in words {
        state = splitmix64(state ^ word);
    }
    // Never zero, so a randomized flow always differs from the original.
    (state as u32).max(1)
}

fn splitmix64(value: u64) -> u64 {
    let mut z = value.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Shifts the sequence number forward by this direction's offset, and the
/// acknowledgment number (and, with `rewrite_sack`, the SACK block edges)
/// back by the reverse direction's offset.
pub(super) fn shift<T: AsRef<[u8]> + AsMut<[u8]>>(
    segment: &mut TcpSegment<T>,
    seed: u64,
    fields: &Segment,
    rewrite_sack: bool,
) {
    let forward = offset(
        seed,
        fields.source,
        fields.source_port,
        fields.destination,
        fields.destination_port,
    );
    let reverse = offset(
        seed,
        fields.destination,
        fields.destination_port,
        fields.source,
        fields.source_port,
    );
    let sequence = segment.sequence();
    segment.set_sequence(sequence.wrapping_add(forward));
    if segment.flags() & FLAG_ACK != 0 {
        let acknowledgment = segment.acknowledgment();
        segment.set_acknowledgment(acknowledgment.wrapping_sub(reverse));
        if rewrite_sack {
            options::for_each(segment.options_mut(), kind::SACK, 0, |blocks| {
                for edge in blocks.chunks_exact_mut(4) {
                    let value = u32::from_be_bytes([edge[0], edge[1], edge[2], edge[3]]);
                    edge.copy_from_slice(&value.wrapping_sub(reverse).to_be_bytes());
                }
            });
        }
    }
}
