//! `wanopt probe --listen`: the reflector on a UDP socket, answering
//! probes, echoes and trains with [`wanopt_proto::probe::Reflector`].

use std::io::ErrorKind;
use std::net::{SocketAddr, UdpSocket};
use std::time::Instant;

use thiserror::Error;
use wanopt_proto::probe::{set_send_offset, Kind, Packet, Reflector};

use crate::probe::stamp::{recv_stamped, stamp_arrivals};

/// The reflector stopped, or never started.
#[derive(Debug, Error)]
pub enum ListenError {
    /// The address cannot be bound.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// The address asked for.
        addr: SocketAddr,
        /// Why.
        source: std::io::Error,
    },
    /// Receiving failed with something other than an interruption or a
    /// stale ICMP error.
    #[error("receiving probes: {0}")]
    Receive(#[source] std::io::Error),
}

/// A reflector bound to its UDP address.
#[derive(Debug)]
pub struct UdpReflector {
    sock: UdpSocket,
}

impl UdpReflector {
    /// Binds `addr`.
    pub fn bind(addr: SocketAddr) -> Result<UdpReflector, ListenError> {
        UdpSocket::bind(addr)
            .map(UdpReflector::from_socket)
            .map_err(|source| ListenError::Bind { addr, source })
    }

    /// A reflector on a socket already bound.
    pub fn from_socket(sock: UdpSocket) -> UdpReflector {
        UdpReflector { sock }
    }

    /// The address it answers on.
    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.sock.local_addr()
    }

    /// Answers probes until an error other than an interruption or a
    /// stale ICMP error.
    pub fn run(&self) -> Result<(), ListenError> {
        let sock = &self.sock;
        stamp_arrivals(sock);
        let mut reflector = Reflector::new();
        let mut buf = vec![0u8; 65_536];
        loop {
            let (n, from, at) = match recv_stamped(sock, &mut buf) {
                Ok((n, Some(from), at)) => (n, from, at),
                Ok(_) => continue,
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                // An ICMP error for an earlier answer; the next datagram is fine.
                Err(e) if e.kind() == ErrorKind::ConnectionRefused => continue,
                Err(e) => return Err(ListenError::Receive(e)),
            };
            // A train's answers go back to back, as the train came, each
            // saying when it left (after the first) so the prober can tell
            // this host's own pace from the path's.
            let first = Instant::now();
            for mut answer in reflector.handle(&buf[..n], at).unwrap_or_default() {
                if Packet::parse(&answer).is_ok_and(|p| p.kind == Kind::TrainBack) {
                    set_send_offset(&mut answer, first.elapsed().as_nanos() as u64);
                }
                let _ = sock.send_to(&answer, from);
            }
        }
    }
}
