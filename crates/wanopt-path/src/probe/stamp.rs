//! Arrival times of datagrams: the kernel's receive timestamps
//! (`SO_TIMESTAMPNS`), on the same clock at both ends of a probe.

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

/// Nanoseconds since the Unix epoch now (the kernel stamps arrivals on
/// the same clock).
fn wall_ns() -> u64 {
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
