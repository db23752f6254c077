//! The receiving side of parity: the last datagrams of each peer that
//! sends Reed-Solomon parity (`wanopt_proto::fec`), and the datagrams
//! rebuilt from it, waiting to be handed to quinn as received.

use std::collections::{HashMap, VecDeque};
use std::net::{IpAddr, SocketAddr};
use std::time::Instant;

use super::event::Event;
use crate::fec;

/// Peers whose parity this node receives at most (the least recently
/// heard from is forgotten).
const PARITY_PEERS: usize = 64;
/// Rebuilt datagrams waiting to be handed to quinn at most.
const REBUILT_QUEUE: usize = 64;

/// The parity receivers of the peers that send parity, and the datagrams
/// rebuilt and not yet handed on.
#[derive(Debug, Default)]
pub(super) struct ParityReceivers {
    peers: HashMap<SocketAddr, (fec::Receiver, Instant)>,
    pub(super) rebuilt: VecDeque<(SocketAddr, Option<IpAddr>, Vec<u8>)>,
}

impl ParityReceivers {
    /// Takes one datagram received at `now`: remembered if its sender
    /// sends parity; a parity datagram is consumed (returns true: not for
    /// quinn), a refused one told in `events`.
    pub(super) fn on_datagram(
        &mut self,
        now: Instant,
        events: &mut VecDeque<Event>,
        from: SocketAddr,
        dst_ip: Option<IpAddr>,
        datagram: &[u8],
    ) -> bool {
        if !fec::is_parity(datagram) {
            if let Some((rx, _)) = self.peers.get_mut(&from) {
                rx.on_datagram(datagram);
            }
            return false;
        }
        if !self.peers.contains_key(&from) && self.peers.len() >= PARITY_PEERS {
            if let Some(oldest) = self
                .peers
                .iter()
                .min_by_key(|(_, (_, at))| *at)
                .map(|(a, _)| *a)
            {
                self.peers.remove(&oldest);
            }
        }
        let (rx, at) = self
            .peers
            .entry(from)
            .or_insert_with(|| (fec::Receiver::new(), now));
        *at = now;
        match rx.on_parity(datagram) {
            Ok(rebuilt) => {
                for d in rebuilt {
                    if self.rebuilt.len() < REBUILT_QUEUE {
                        self.rebuilt.push_back((from, dst_ip, d));
                    }
                }
            }
            Err(error) => events.push_back(Event::ParityRefused { from, error }),
        }
        true
    }

    /// Datagrams rebuilt from `peer`'s parity so far.
    pub(super) fn rebuilt_from(&self, peer: SocketAddr) -> u64 {
        self.peers
            .get(&peer)
            .map_or(0, |(rx, _)| rx.stats().rebuilt)
    }
}
