//! Arrival times of datagrams: the kernel's receive timestamps
//! (`SO_TIMESTAMPNS`), on the clock every lab namespace shares (after
//! `wanopt-path`'s `probe/stamp.rs`).

use std::io::IoSliceMut;
use std::net::{SocketAddr, UdpSocket};
use std::os::fd::AsRawFd;
use std::time::{SystemTime, UNIX_EPOCH};

use nix::sys::socket::{
    recvmsg, setsockopt, sockopt, ControlMessageOwned, MsgFlags, SockaddrStorage,
};

/// Asks the kernel to stamp each datagram's arrival (`SO_TIMESTAMPNS`);
/// without it [`recv_stamped`] reads the clock itself.
pub fn stamp_arrivals(sock: &UdpSocket) {
    let _ = setsockopt(sock, sockopt::ReceiveTimestampns, &true);
}

/// Nanoseconds since the Unix epoch now (`CLOCK_REALTIME`, the clock the
/// kernel stamps arrivals on).
pub fn wall_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
}

/// Receives one datagram: its length, sender, and arrival time in
/// nanoseconds since the Unix epoch (the kernel's stamp when it gave one,
/// else the time now). Honours the socket's read timeout.
pub fn recv_stamped(
    sock: &UdpSocket,
    buf: &mut [u8],
) -> std::io::Result<(usize, Option<SocketAddr>, u64)> {
    let mut iov = [IoSliceMut::new(buf)];
    let mut cmsg = nix::cmsg_space!(nix::sys::time::TimeSpec);
    let msg = recvmsg::<SockaddrStorage>(
        sock.as_raw_fd(),
        &mut iov,
        Some(&mut cmsg),
        MsgFlags::empty(),
    )
    .map_err(std::io::Error::from)?;
    let mut at = None;
    if let Ok(cmsgs) = msg.cmsgs() {
        for c in cmsgs {
            if let ControlMessageOwned::ScmTimestampns(t) = c {
                at = Some(t.tv_sec() as u64 * 1_000_000_000 + t.tv_nsec() as u64);
            }
        }
    }
    let from = msg.address.and_then(|a| {
        a.as_sockaddr_in()
            .map(|v4| SocketAddr::from(std::net::SocketAddrV4::from(*v4)))
            .or_else(|| {
                a.as_sockaddr_in6()
                    .map(|v6| SocketAddr::from(std::net::SocketAddrV6::from(*v6)))
            })
    });
    Ok((msg.bytes, from, at.unwrap_or_else(wall_ns)))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A datagram on loopback is stamped by the kernel between the send
    /// and the return of the receive.
    #[test]
    fn arrivals_are_stamped_on_the_wall_clock() {
        let rx = UdpSocket::bind("127.0.0.1:0").unwrap_or_else(|e| panic!("{e}"));
        stamp_arrivals(&rx);
        let tx = UdpSocket::bind("127.0.0.1:0").unwrap_or_else(|e| panic!("{e}"));
        let before = wall_ns();
        let to = rx.local_addr().unwrap_or_else(|e| panic!("{e}"));
        tx.send_to(b"WORT", to).unwrap_or_else(|e| panic!("{e}"));
        let mut buf = [0u8; 16];
        let (n, from, at) = recv_stamped(&rx, &mut buf).unwrap_or_else(|e| panic!("{e}"));
        let after = wall_ns();
        assert_eq!(n, 4);
        assert_eq!(from, tx.local_addr().ok());
        assert!(before <= at && at <= after, "{before} {at} {after}");
    }
}
