//! AF_PACKET sockets with batched receive and send (`recvmmsg`/`sendmmsg`).
//!
//! The emulator driver opens one receive socket on each `wan` interface
//! (ignoring the frames it sends itself, `PACKET_IGNORE_OUTGOING`) and one
//! send-only socket (protocol 0: it receives nothing) on each interface.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::time::Duration;

/// Largest frame we accept: the largest `--mtu` (9000) plus the Ethernet
/// header and a VLAN tag, with room.
pub const FRAME_CAPACITY: usize = 9216;

/// Frames handled per `recvmmsg` / `sendmmsg` call.
pub const BATCH: usize = 64;

const ETH_P_ALL: u16 = 0x0003;
/// `PACKET_IGNORE_OUTGOING` from `linux/if_packet.h` (Linux 4.20+).
const PACKET_IGNORE_OUTGOING: libc::c_int = 23;
/// `PACKET_QDISC_BYPASS` from `linux/if_packet.h`.
const PACKET_QDISC_BYPASS: libc::c_int = 20;

/// An AF_PACKET raw socket bound to one interface.
#[derive(Debug)]
pub struct PacketSocket {
    fd: OwnedFd,
    ifindex: i32,
}

fn cvt(ret: libc::c_int) -> io::Result<libc::c_int> {
    if ret < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(ret)
    }
}

fn setsockopt_int(
    fd: RawFd,
    level: libc::c_int,
    name: libc::c_int,
    value: libc::c_int,
) -> io::Result<()> {
    // SAFETY: `value` lives for the call and its size is passed.
    let ret = unsafe {
        libc::setsockopt(
            fd,
            level,
            name,
            (&value as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    cvt(ret).map(|_| ())
}

/// The index of the interface `name` in the current namespace.
pub fn interface_index(name: &str) -> io::Result<i32> {
    let cname = CString::new(name)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "interface name has a NUL"))?;
    // SAFETY: `cname` is a valid NUL-terminated string.
    let index = unsafe { libc::if_nametoindex(cname.as_ptr()) };
    if index == 0 {
        return Err(io::Error::new(
            io::ErrorKind::NotFound,
            format!("no interface `{name}` in this namespace"),
        ));
    }
    Ok(index as i32)
}

impl PacketSocket {
    /// Opens a socket that receives every frame arriving on `interface`
    /// (not the ones sent from this host), with a receive buffer of `rcvbuf` bytes.
    pub fn receiver(interface: &str, rcvbuf: usize) -> io::Result<PacketSocket> {
        let sock = Self::open(interface, ETH_P_ALL)?;
        setsockopt_int(
            sock.fd.as_raw_fd(),
            libc::SOL_PACKET,
            PACKET_IGNORE_OUTGOING,
            1,
        )?;
        let size = rcvbuf.min(i32::MAX as usize) as libc::c_int;
        if setsockopt_int(
            sock.fd.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_RCVBUFFORCE,
            size,
        )
        .is_err()
        {
            setsockopt_int(sock.fd.as_raw_fd(), libc::SOL_SOCKET, libc::SO_RCVBUF, size)?;
        }
        Ok(sock)
    }

    /// Opens a send-only socket on `interface` (it receives nothing) that
    /// bypasses the qdisc layer.
    pub fn sender(interface: &str, sndbuf: usize) -> io::Result<PacketSocket> {
        let sock = Self::open(interface, 0)?;
        // Best effort: older kernels lack it, and it only saves a few cycles.
        let _ = setsockopt_int(
            sock.fd.as_raw_fd(),
            libc::SOL_PACKET,
            PACKET_QDISC_BYPASS,
            1,
        );
        let size = sndbuf.min(i32::MAX as usize) as libc::c_int;
        if setsockopt_int(
            sock.fd.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_SNDBUFFORCE,
            size,
        )
        .is_err()
        {
            setsockopt_int(sock.fd.as_raw_fd(), libc::SOL_SOCKET, libc::SO_SNDBUF, size)?;
        }
        Ok(sock)
    }

    fn open(interface: &str, protocol: u16) -> io::Result<PacketSocket> {
        let ifindex = interface_index(interface)?;
        // Opened with protocol 0 (receives nothing) and bound afterwards, so
        // that no frame of another interface slips in before the bind.
        // SAFETY: plain socket(2) call.
        let raw = cvt(unsafe {
            libc::socket(
                libc::AF_PACKET,
                libc::SOCK_RAW | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
                0,
            )
        })?;
        // SAFETY: `raw` is a fresh descriptor that we own.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        // SAFETY: sockaddr_ll is plain old data; all-zero is a valid value.
        let mut addr: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        addr.sll_family = libc::AF_PACKET as u16;
        addr.sll_protocol = protocol.to_be();
        addr.sll_ifindex = ifindex;
        // SAFETY: `addr` is a valid sockaddr_ll and its size is passed.
        cvt(unsafe {
            libc::bind(
                fd.as_raw_fd(),
                (&addr as *const libc::sockaddr_ll).cast(),
                std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t,
            )
        })?;
        Ok(PacketSocket { fd, ifindex })
    }

    /// The interface index the socket is bound to.
    pub fn ifindex(&self) -> i32 {
        self.ifindex
    }

    /// Waits until a frame can be read or `timeout` passes (nanosecond precision).
    pub fn wait_readable(&self, timeout: Duration) -> io::Result<bool> {
        let mut pfd = libc::pollfd {
            fd: self.fd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        let ts = libc::timespec {
            tv_sec: timeout.as_secs() as libc::time_t,
            tv_nsec: timeout.subsec_nanos() as libc::c_long,
        };
        // SAFETY: one valid pollfd, a valid timespec, no signal mask.
        let ret = unsafe { libc::ppoll(&mut pfd, 1, &ts, std::ptr::null()) };
        match cvt(ret) {
            Ok(n) => Ok(n > 0),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => Ok(false),
            Err(e) => Err(e),
        }
    }
}

/// Preallocated buffers and message headers for one `recvmmsg` batch,
/// built once (the headers point into the buffers, which never move: both
/// live on the heap and are never resized).
pub struct RecvBatch {
    buffers: Vec<[u8; FRAME_CAPACITY]>,
    iovecs: Vec<libc::iovec>,
    headers: Vec<libc::mmsghdr>,
    lengths: Vec<usize>,
    truncated: Vec<bool>,
}

impl Default for RecvBatch {
    fn default() -> Self {
        let mut buffers = vec![[0u8; FRAME_CAPACITY]; BATCH];
        let mut iovecs: Vec<libc::iovec> = buffers
            .iter_mut()
            .map(|b| libc::iovec {
                iov_base: b.as_mut_ptr().cast(),
                iov_len: FRAME_CAPACITY,
            })
            .collect();
        // SAFETY: mmsghdr is plain old data; all-zero is a valid value.
        let mut headers: Vec<libc::mmsghdr> =
            (0..BATCH).map(|_| unsafe { std::mem::zeroed() }).collect();
        for (h, iov) in headers.iter_mut().zip(iovecs.iter_mut()) {
            h.msg_hdr.msg_iov = iov;
            h.msg_hdr.msg_iovlen = 1;
        }
        RecvBatch {
            buffers,
            iovecs,
            headers,
            lengths: vec![0; BATCH],
            truncated: vec![false; BATCH],
        }
    }
}

impl RecvBatch {
    /// Receives up to [`BATCH`] frames without blocking; returns how many.
    pub fn receive(&mut self, sock: &PacketSocket) -> io::Result<usize> {
        debug_assert_eq!(self.iovecs.len(), BATCH);
        for h in &mut self.headers {
            h.msg_len = 0;
            h.msg_hdr.msg_flags = 0;
        }
        // SAFETY: every header points at one iovec over a live buffer of
        // FRAME_CAPACITY bytes (set up in `default`, never moved since);
        // BATCH headers are passed.
        let ret = unsafe {
            libc::recvmmsg(
                sock.fd.as_raw_fd(),
                self.headers.as_mut_ptr(),
                BATCH as libc::c_uint,
                libc::MSG_DONTWAIT | libc::MSG_TRUNC,
                std::ptr::null_mut(),
            )
        };
        match cvt(ret) {
            Ok(n) => {
                let n = n as usize;
                for (i, h) in self.headers.iter().take(n).enumerate() {
                    let len = h.msg_len as usize;
                    self.truncated[i] =
                        len > FRAME_CAPACITY || h.msg_hdr.msg_flags & libc::MSG_TRUNC != 0;
                    self.lengths[i] = len.min(FRAME_CAPACITY);
                }
                Ok(n)
            }
            Err(e)
                if e.kind() == io::ErrorKind::WouldBlock
                    || e.kind() == io::ErrorKind::Interrupted =>
            {
                Ok(0)
            }
            Err(e) => Err(e),
        }
    }

    /// Frame `i` of the last batch, or `None` if it was truncated.
    pub fn frame(&self, i: usize) -> Option<&[u8]> {
        if self.truncated[i] {
            None
        } else {
            Some(&self.buffers[i][..self.lengths[i]])
        }
    }
}

/// Sends `frames` with `sendmmsg`; returns how many the kernel took.
///
/// Retries briefly while the socket is full; frames it still cannot send, or
/// that the kernel refuses (too big), are left out of the count.
pub fn send_batch(sock: &PacketSocket, frames: &[Vec<u8>]) -> usize {
    let mut next = 0;
    let mut sent = 0;
    let mut retries = 0;
    while next < frames.len() {
        let chunk = &frames[next..frames.len().min(next + BATCH)];
        let mut iovecs: Vec<libc::iovec> = chunk
            .iter()
            .map(|f| libc::iovec {
                iov_base: f.as_ptr() as *mut libc::c_void,
                iov_len: f.len(),
            })
            .collect();
        // SAFETY: mmsghdr is plain old data; all-zero is a valid value.
        let mut headers: Vec<libc::mmsghdr> = (0..chunk.len())
            .map(|_| unsafe { std::mem::zeroed() })
            .collect();
        for (h, iov) in headers.iter_mut().zip(iovecs.iter_mut()) {
            h.msg_hdr.msg_iov = iov;
            h.msg_hdr.msg_iovlen = 1;
        }
        // SAFETY: each header points at one iovec over a live frame; the
        // socket is bound, so no destination address is needed.
        let ret = unsafe {
            libc::sendmmsg(
                sock.fd.as_raw_fd(),
                headers.as_mut_ptr(),
                headers.len() as libc::c_uint,
                libc::MSG_DONTWAIT,
            )
        };
        match cvt(ret) {
            Ok(n) => {
                sent += n as usize;
                next += n as usize;
                retries = 0;
            }
            Err(e)
                if (e.kind() == io::ErrorKind::WouldBlock
                    || e.raw_os_error() == Some(libc::ENOBUFS)
                    || e.kind() == io::ErrorKind::Interrupted)
                    && retries < 1000 =>
            {
                retries += 1;
                std::hint::spin_loop();
            }
            Err(_) => {
                // Full for too long, or this frame is refused: drop it.
                next += 1;
                retries = 0;
            }
        }
    }
    sent
}
