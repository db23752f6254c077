//! What goes in and out of the datagram layer: the datagrams quinn
//! sends ([`Transmit`], several of one size with GSO), the buffers the
//! socket received ([`Received`], several `stride` apart with GRO), and
//! the helpers that put a transmit on a path and copy the datagrams of
//! UDP flows onto the others.

use std::net::{IpAddr, SocketAddr};

use super::paths::Hop;

/// An ECN codepoint (RFC 3168 section 5).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ecn {
    /// ECN-capable transport, ECT(0).
    Ect0,
    /// ECN-capable transport, ECT(1).
    Ect1,
    /// Congestion experienced.
    Ce,
}

/// Datagrams to send: one, or several `segment_size` apart (only the last
/// shorter), all to `destination`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Transmit<'a> {
    /// Where they go.
    pub destination: SocketAddr,
    /// Their ECN codepoint.
    pub ecn: Option<Ecn>,
    /// The datagrams' bytes.
    pub contents: &'a [u8],
    /// The size of each but the last, when there are several.
    pub segment_size: Option<usize>,
    /// The local address they leave from (`None`: the kernel's choice).
    pub src_ip: Option<IpAddr>,
}

impl Transmit<'_> {
    /// The size of each datagram but the last (at least 1).
    pub fn size(&self) -> usize {
        self.segment_size.unwrap_or(self.contents.len()).max(1)
    }

    /// How many datagrams it holds.
    pub fn count(&self) -> usize {
        self.contents.len().div_ceil(self.size())
    }
}

/// A received buffer: `len` bytes, one datagram or several `stride` apart
/// (only the last shorter), all from `addr`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Received {
    /// Where they came from.
    pub addr: SocketAddr,
    /// The bytes of the buffer that hold datagrams.
    pub len: usize,
    /// The size of each datagram but the last.
    pub stride: usize,
    /// Their ECN codepoint.
    pub ecn: Option<Ecn>,
    /// The local address they arrived at, when known.
    pub dst_ip: Option<IpAddr>,
}

/// What [`super::DatagramLayer::handle_transmit`] decided for one of
/// quinn's transmits, to hand back to
/// [`super::DatagramLayer::handle_transmitted`] once the socket took it.
#[derive(Debug)]
#[must_use = "the layer learns that the transmit went out from it"]
pub struct Sending {
    /// The path it goes on (`None`: to its destination, unchanged).
    pub(super) hop: Option<Hop>,
    /// When it goes out as FEC sources: its datagrams in the call strand
    /// (bit i: the i-th).
    pub(super) calls: Option<u64>,
    /// The other paths that carry copies of its UDP flows' datagrams.
    pub(super) copies: Vec<Hop>,
    /// Whether the tail policy was watching sends.
    pub(super) tails: bool,
    /// Whether the layer took its datagrams (a bonded peer's): nothing is
    /// to be put on the wire for it now, the layer sends them as the
    /// bond's paths let it ([`super::DatagramLayer::poll_transmit`]).
    pub(super) held: bool,
}

impl Sending {
    /// Whether it goes out as FEC sources: its wire bytes are then the
    /// layer's ([`super::DatagramLayer::wire`]), valid until its next
    /// `handle_transmit`.
    pub fn wrapped(&self) -> bool {
        self.calls.is_some()
    }

    /// Whether the layer has anything to do once it went out (copies,
    /// FEC, tails); if not, `handle_transmitted` may be skipped.
    pub fn has_followup(&self) -> bool {
        self.wrapped() || self.tails || !self.copies.is_empty()
    }

    /// Whether the layer took the transmit's datagrams to send them
    /// itself (a bonded peer's): put nothing on the wire, and flush the
    /// layer's own datagrams.
    pub fn held(&self) -> bool {
        self.held
    }

    /// `transmit` as it goes on the wire, when it is not wrapped.
    pub fn route<'a>(&self, transmit: &Transmit<'a>) -> Transmit<'a> {
        match self.hop {
            Some(hop) => rewrite(transmit, hop),
            None => *transmit,
        }
    }
}

/// `transmit` sent on `hop`: the same datagrams, segment size and ECN.
pub(super) fn rewrite<'a>(transmit: &Transmit<'a>, hop: Hop) -> Transmit<'a> {
    Transmit {
        destination: hop.destination,
        ecn: transmit.ecn,
        contents: transmit.contents,
        segment_size: transmit.segment_size,
        src_ip: hop.src_ip.or(transmit.src_ip),
    }
}

/// The bytes of `transmit`'s datagrams that `flagged` marks (bit i: the
/// i-th).
pub(super) fn flagged_len(transmit: &Transmit, flagged: u64) -> usize {
    if flagged == 0 {
        return 0;
    }
    transmit
        .contents
        .chunks(transmit.size())
        .enumerate()
        .filter(|(i, _)| *i < 64 && flagged & (1 << i) != 0)
        .map(|(_, d)| d.len())
        .sum()
}

/// The runs of consecutive datagrams of `transmit` that `flagged` marks,
/// each as a transmit of its own on `hop` (a run keeps the batch's
/// segment size: only a batch's last datagram is shorter).
pub(super) fn flagged_runs<'a>(
    transmit: &Transmit<'a>,
    flagged: u64,
    hop: Hop,
) -> impl Iterator<Item = Transmit<'a>> + 'a {
    let size = transmit.size();
    let count = transmit.count().min(64);
    let (contents, ecn) = (transmit.contents, transmit.ecn);
    let src_ip = hop.src_ip.or(transmit.src_ip);
    let mut i = 0;
    std::iter::from_fn(move || {
        while i < count && flagged & (1 << i) == 0 {
            i += 1;
        }
        if i >= count {
            return None;
        }
        let first = i;
        while i < count && flagged & (1 << i) != 0 {
            i += 1;
        }
        let end = (i * size).min(contents.len());
        let run = &contents[first * size..end];
        Some(Transmit {
            destination: hop.destination,
            ecn,
            contents: run,
            segment_size: (i - first > 1).then_some(size),
            src_ip,
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addr(s: &str) -> SocketAddr {
        s.parse().unwrap()
    }

    #[test]
    fn a_transmit_keeps_its_batch_and_takes_the_paths_addresses() {
        let datagrams = vec![7u8; 3 * 1200 + 500];
        let quinn_sends = Transmit {
            destination: addr("192.0.2.1:4433"),
            ecn: None,
            contents: &datagrams,
            segment_size: Some(1200),
            src_ip: None,
        };
        let hop = Hop {
            destination: addr("198.51.100.1:4433"),
            src_ip: Some("10.1.0.1".parse().unwrap()),
        };
        let sent = rewrite(&quinn_sends, hop);
        assert_eq!(sent.destination, hop.destination);
        assert_eq!(sent.src_ip, hop.src_ip);
        assert_eq!(sent.segment_size, Some(1200));
        assert_eq!(sent.contents.as_ptr(), datagrams.as_ptr());
        // A path with no local address keeps quinn's.
        let any = Hop {
            src_ip: None,
            ..hop
        };
        let quinn_ip = Transmit {
            src_ip: Some("10.0.0.9".parse().unwrap()),
            ..quinn_sends
        };
        assert_eq!(rewrite(&quinn_ip, any).src_ip, quinn_ip.src_ip);
    }

    #[test]
    fn only_the_flagged_datagrams_are_copied_in_runs_that_keep_the_segment_size() {
        // Five datagrams of 100 bytes and a last of 40; the first, second,
        // fourth and last carry UDP flows.
        let contents: Vec<u8> = (0..540).map(|i| (i / 100) as u8).collect();
        let transmit = Transmit {
            destination: addr("192.0.2.1:4433"),
            ecn: None,
            contents: &contents,
            segment_size: Some(100),
            src_ip: None,
        };
        let flagged = 0b10_1011;
        assert_eq!(flagged_len(&transmit, flagged), 340);
        assert_eq!(flagged_len(&transmit, 0), 0);
        let hop = Hop {
            destination: addr("198.51.100.1:4433"),
            src_ip: Some("10.1.0.1".parse().unwrap()),
        };
        let runs: Vec<_> = flagged_runs(&transmit, flagged, hop).collect();
        assert_eq!(runs.len(), 3);
        assert_eq!(
            (runs[0].contents, runs[0].segment_size),
            (&contents[..200], Some(100))
        );
        assert_eq!(
            (runs[1].contents, runs[1].segment_size),
            (&contents[300..400], None)
        );
        assert_eq!(
            (runs[2].contents, runs[2].segment_size),
            (&contents[500..], None)
        );
        assert!(runs
            .iter()
            .all(|r| r.destination == hop.destination && r.src_ip == hop.src_ip));
        // A single datagram.
        let one = Transmit {
            segment_size: None,
            contents: &contents[..100],
            ..transmit
        };
        assert_eq!(flagged_runs(&one, 1, hop).count(), 1);
        assert_eq!(flagged_runs(&one, 0, hop).count(), 0);
    }
}
