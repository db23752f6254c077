//! Receiving a client's datagram with what the kernel says of it: its
//! source, its original destination (a TPROXY'd datagram's
//! `IP_ORIGDSTADDR`) and its DSCP (`IP_RECVTOS`, `IPV6_RECVTCLASS`), which
//! traffic classes match on.

use std::io::IoSliceMut;
use std::net::{IpAddr, SocketAddr, SocketAddrV4, SocketAddrV6};
use std::os::fd::{AsFd, AsRawFd};

use nix::sys::socket::{
    recvmsg, setsockopt, sockopt, ControlMessageOwned, MsgFlags, SockaddrStorage,
};
use tokio::net::UdpSocket;

/// One datagram as received.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Received {
    /// Its length.
    pub len: usize,
    /// Who sent it.
    pub client: SocketAddr,
    /// Its original destination, when TPROXY diverted it.
    pub orig: Option<SocketAddr>,
    /// Its DSCP, when the kernel gave its TOS or traffic class.
    pub dscp: Option<u8>,
}

/// Asks the kernel for each datagram's TOS (IPv4) and traffic class
/// (IPv6). Best effort: without it classes by DSCP do not match.
pub(crate) fn ask_dscp(socket: &impl AsFd, v6: bool) {
    let _ = setsockopt(socket, sockopt::IpRecvTos, &true);
    if v6 {
        let _ = setsockopt(socket, sockopt::Ipv6RecvTClass, &true);
    }
}

/// An IPv4-mapped IPv6 address as the IPv4 one it stands for.
pub(crate) fn unmapped(addr: SocketAddr) -> SocketAddr {
    match addr {
        SocketAddr::V6(v6) => match v6.ip().to_ipv4_mapped() {
            Some(v4) => SocketAddr::new(IpAddr::V4(v4), v6.port()),
            None => addr,
        },
        v4 => v4,
    }
}

/// One datagram into `buf` (non-blocking: call it from
/// `UdpSocket::async_io`).
pub(crate) fn recv_meta(socket: &UdpSocket, buf: &mut [u8]) -> std::io::Result<Received> {
    let mut space = nix::cmsg_space!(
        libc::sockaddr_in6,
        libc::sockaddr_in,
        libc::c_int,
        libc::c_int
    );
    let mut iov = [IoSliceMut::new(buf)];
    let msg = recvmsg::<SockaddrStorage>(
        socket.as_raw_fd(),
        &mut iov,
        Some(&mut space),
        MsgFlags::empty(),
    )
    .map_err(std::io::Error::from)?;
    let client = msg
        .address
        .and_then(|a| match (a.as_sockaddr_in(), a.as_sockaddr_in6()) {
            (Some(v4), _) => Some(SocketAddr::V4(SocketAddrV4::from(*v4))),
            (_, Some(v6)) => Some(SocketAddr::V6(SocketAddrV6::from(*v6))),
            _ => None,
        })
        .map(unmapped)
        .ok_or_else(|| std::io::Error::other("a datagram without a source address"))?;
    let mut orig = None;
    let mut dscp = None;
    for cmsg in msg.cmsgs().map_err(std::io::Error::from)? {
        match cmsg {
            ControlMessageOwned::Ipv4OrigDstAddr(sin) => {
                let ip = std::net::Ipv4Addr::from(u32::from_be(sin.sin_addr.s_addr));
                orig = Some(SocketAddr::new(ip.into(), u16::from_be(sin.sin_port)));
            }
            ControlMessageOwned::Ipv6OrigDstAddr(sin6) => {
                let ip = std::net::Ipv6Addr::from(sin6.sin6_addr.s6_addr);
                orig = Some(unmapped(SocketAddr::new(
                    ip.into(),
                    u16::from_be(sin6.sin6_port),
                )));
            }
            ControlMessageOwned::Ipv4Tos(tos) => dscp = Some(tos >> 2),
            ControlMessageOwned::Ipv6TClass(class) => dscp = Some(((class >> 2) & 0x3f) as u8),
            _ => {}
        }
    }
    Ok(Received {
        len: msg.bytes,
        client,
        orig,
        dscp,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_datagrams_dscp_is_read_from_its_tos() {
        let rx = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        ask_dscp(&rx, false);
        let tx = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        // EF: DSCP 46, TOS 0xb8.
        setsockopt(&tx, sockopt::Ipv4Tos, &0xb8).unwrap();
        tx.send_to(b"voice", rx.local_addr().unwrap()).unwrap();
        let mut buf = [0u8; 64];
        let got = rx
            .async_io(tokio::io::Interest::READABLE, || recv_meta(&rx, &mut buf))
            .await
            .unwrap();
        assert_eq!(got.len, 5);
        assert_eq!(got.client, tx.local_addr().unwrap());
        assert_eq!(got.dscp, Some(46));
        assert_eq!(got.orig, None);
    }
}
