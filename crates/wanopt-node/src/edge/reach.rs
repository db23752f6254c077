//! How an edge reaches its core: QUIC over UDP, or the same tunnel
//! carried on TCP (`crate::transport::carrier`) where UDP does not get
//! through (`--transport auto|quic|tcp`).
//!
//! In `auto` the edge tries QUIC first; when no handshake completes
//! within [`QUIC_TRY`] it dials over TCP and stays there for its redials.
//! A tunnel on QUIC that goes silent while the edge sends
//! ([`Silence`]) is a path that stopped carrying UDP: the edge dials over
//! TCP beside it and new flows move there. A tunnel on TCP tries QUIC
//! again every [`QUIC_RETRY`]; when a handshake completes new flows go
//! back to QUIC, and the flows open on TCP finish there.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use crate::transport::tunnel::Transport;

/// How long `auto` waits for a QUIC handshake before it dials over TCP.
pub const QUIC_TRY: Duration = Duration::from_secs(3);

/// How often a tunnel on TCP tries QUIC again (`auto`).
pub const QUIC_RETRY: Duration = Duration::from_secs(20);

/// How often a tunnel on QUIC is looked at for silence.
pub const LOOK_EVERY: Duration = Duration::from_millis(250);

/// How often a tunnel on TCP tries QUIC again after it moved there
/// because UDP was policed: a QUIC handshake then completes at once, and
/// says nothing of the rate.
pub const POLICED_RETRY: Duration = Duration::from_secs(600);

/// Loss, either way, over [`LOSS_WINDOW`] (and in [`LOSSY_SECONDS`] of
/// its seconds) that makes a tunnel on QUIC worth a probe over TCP.
pub const PROBE_LOSS: f64 = 0.01;

/// The span the loss is taken over.
const LOSS_WINDOW: Duration = Duration::from_secs(3);

/// Seconds of [`LOSS_WINDOW`] that must each lose [`PROBE_LOSS`].
const LOSSY_SECONDS: usize = 2;

/// Packets a direction must have carried in each second of
/// [`LOSS_WINDOW`] for its loss to count.
const SPAN_PACKETS: u64 = 100;

/// The span of the rates [`Policing`] takes the best of.
const RATE_SPAN: Duration = Duration::from_secs(1);

/// The first wait between two probes over TCP, doubled after each that
/// finds TCP no better, up to [`PROBE_GAP_MAX`].
const PROBE_GAP: Duration = Duration::from_secs(30);
const PROBE_GAP_MAX: Duration = Duration::from_secs(600);

/// How much more than the tunnel on QUIC carried before a probe the
/// tunnel over TCP must carry during it for UDP to count as policed (a
/// policer holding 50 Mbit/s of path to 2 gives 20 or more; a path that
/// is merely lossy, under 1).
pub const POLICED_FACTOR: f64 = 3.0;

/// The shortest silence that counts: a peer that answers at all answers a
/// keepalive or an ack-eliciting packet well within this.
const MIN_SILENCE: Duration = Duration::from_secs(1);

/// Which transports an edge may use (`--transport`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TransportChoice {
    /// QUIC, and TCP where UDP does not get through.
    #[default]
    Auto,
    /// QUIC only.
    Quic,
    /// TCP only.
    Tcp,
}

impl std::str::FromStr for TransportChoice {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "auto" => Ok(TransportChoice::Auto),
            "quic" => Ok(TransportChoice::Quic),
            "tcp" => Ok(TransportChoice::Tcp),
            other => Err(format!(
                "unknown transport {other:?} (expected auto, quic or tcp)"
            )),
        }
    }
}

/// How an edge reaches one core: its choice, the core's TCP port, and
/// what `auto` has learned.
#[derive(Debug, Clone)]
pub struct Reach {
    /// `--transport`.
    pub choice: TransportChoice,
    /// The core's TCP port (`--tcp-port`).
    pub tcp_port: u16,
    /// `auto` after QUIC failed: redials go over TCP, with this reason.
    on_tcp: Option<String>,
}

impl Reach {
    /// A choice and the core's TCP port.
    pub fn new(choice: TransportChoice, tcp_port: u16) -> Reach {
        Reach {
            choice,
            tcp_port,
            on_tcp: None,
        }
    }

    /// The core's carrier address for its UDP address `addr`.
    pub fn tcp_addr(&self, addr: SocketAddr) -> SocketAddr {
        SocketAddr::new(addr.ip(), self.tcp_port)
    }

    /// What the next dial tries first, and the reason to give when it is
    /// TCP.
    pub fn first(&self) -> (Transport, String) {
        match (self.choice, &self.on_tcp) {
            (TransportChoice::Quic, _) => (Transport::Quic, "--transport quic".to_owned()),
            (TransportChoice::Tcp, _) => (Transport::Tcp, "--transport tcp".to_owned()),
            (TransportChoice::Auto, Some(why)) => (Transport::Tcp, why.clone()),
            (TransportChoice::Auto, None) => (Transport::Quic, "UDP gets through".to_owned()),
        }
    }

    /// Whether a failed QUIC dial is followed by one over TCP.
    pub fn falls_back(&self) -> bool {
        self.choice == TransportChoice::Auto
    }

    /// `auto` moved to TCP, for `why`: redials go there first.
    pub fn to_tcp(&mut self, why: String) {
        if self.choice == TransportChoice::Auto {
            self.on_tcp = Some(why);
        }
    }

    /// QUIC works again: redials try it first.
    pub fn to_quic(&mut self) {
        self.on_tcp = None;
    }

    /// Whether a tunnel on TCP tries QUIC again now and then.
    pub fn retries_quic(&self) -> bool {
        self.choice == TransportChoice::Auto
    }
}

/// Watches a tunnel on QUIC for silence: the edge keeps sending (data,
/// acknowledgements, keepalives) and nothing comes back for
/// `max(1 s, 4 RTT)`. Fed the connection's UDP counters every
/// [`LOOK_EVERY`].
#[derive(Debug, Default)]
pub struct Silence {
    /// Datagrams received at the last look.
    received: u64,
    /// Datagrams sent when the peer was last heard.
    sent_when_heard: u64,
    /// When the edge first sent after the peer was last heard.
    unanswered_since: Option<Instant>,
}

impl Silence {
    /// Takes the counters at `now`; returns how long the edge has sent
    /// unanswered, once that is past `max(1 s, 4 rtt)`.
    pub fn look(
        &mut self,
        now: Instant,
        sent: u64,
        received: u64,
        rtt: Duration,
    ) -> Option<Duration> {
        if received != self.received {
            self.received = received;
            self.sent_when_heard = sent;
            self.unanswered_since = None;
            return None;
        }
        if sent == self.sent_when_heard {
            return None;
        }
        let since = *self.unanswered_since.get_or_insert(now);
        let silent = now.saturating_duration_since(since);
        (silent >= MIN_SILENCE.max(rtt * 4)).then_some(silent)
    }
}

/// A tunnel's packet counters at one moment: what this node sent and
/// lost (acknowledgements tell), and what the peer sent it and it
/// missed (the datagram layer's count).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Counts {
    /// Packets sent.
    pub sent: u64,
    /// Of those, declared lost.
    pub lost: u64,
    /// The peer's packets that arrived.
    pub received: u64,
    /// The peer's packets that did not.
    pub missed: u64,
    /// Bytes sent.
    pub bytes_out: u64,
    /// Bytes received.
    pub bytes_in: u64,
}

/// Watches a tunnel on QUIC for loss that a policer would cause, and
/// spaces the probes over TCP that tell a policer from a lossy path.
#[derive(Debug)]
pub struct Policing {
    samples: std::collections::VecDeque<(Instant, Counts)>,
    next_probe: Option<Instant>,
    gap: Duration,
}

impl Default for Policing {
    fn default() -> Self {
        Policing {
            samples: Default::default(),
            next_probe: None,
            gap: PROBE_GAP,
        }
    }
}

impl Policing {
    /// Takes the counters at `now`; once a probe is due and the worse
    /// direction lost at least [`PROBE_LOSS`] over the last
    /// [`LOSS_WINDOW`] and in most of its seconds (having carried enough
    /// to count), that loss and the best second's rate of the busier
    /// direction, bits per second.
    pub fn look(&mut self, now: Instant, counts: Counts) -> Option<(f64, f64)> {
        self.samples.push_back((now, counts));
        // Keep one sample at least LOSS_WINDOW old.
        while self
            .samples
            .get(1)
            .is_some_and(|(at, _)| now.saturating_duration_since(*at) >= LOSS_WINDOW)
        {
            self.samples.pop_front();
        }
        let (start, _) = *self.samples.front()?;
        if now.saturating_duration_since(start) < LOSS_WINDOW {
            return None;
        }
        // Loss in most seconds of the window, not a burst in one (a
        // controller's start-up overshoot): a policer drops whenever the
        // sender probes above its rate.
        let mut cuts = Vec::with_capacity(4);
        let mut next = start;
        for (at, c) in &self.samples {
            if *at >= next {
                cuts.push(*c);
                next = *at + RATE_SPAN;
            }
        }
        if cuts.last() != Some(&counts) {
            cuts.push(counts);
        }
        let spans = cuts.windows(2).map(|w| span_loss(&w[0], &w[1]));
        let lossy_seconds = spans.filter(|l| l.is_some_and(|l| l >= PROBE_LOSS)).count();
        let (_, old) = self.samples.front()?;
        let loss = span_loss(old, &counts)?;
        let due = self.next_probe.is_none_or(|next| now >= next);
        (due && loss >= PROBE_LOSS && lossy_seconds >= LOSSY_SECONDS)
            .then(|| (loss, self.best_second()))
    }

    /// The highest rate over any second of the window, bits per second,
    /// the busier direction: a transfer that was still starting at the
    /// window's beginning is judged by what it reached.
    fn best_second(&self) -> f64 {
        let mut best = 0.0f64;
        for (i, (from, a)) in self.samples.iter().enumerate() {
            let Some((to, b)) = self
                .samples
                .iter()
                .skip(i + 1)
                .find(|(to, _)| to.saturating_duration_since(*from) >= RATE_SPAN)
            else {
                break;
            };
            let bytes = b
                .bytes_in
                .saturating_sub(a.bytes_in)
                .max(b.bytes_out.saturating_sub(a.bytes_out));
            let secs = to.saturating_duration_since(*from).as_secs_f64();
            best = best.max(bytes as f64 * 8.0 / secs);
        }
        best
    }

    /// A probe ran at `now` and found TCP no better: the next waits
    /// twice as long.
    pub fn not_better(&mut self, now: Instant) {
        self.next_probe = Some(now + self.gap);
        self.gap = (self.gap * 2).min(PROBE_GAP_MAX);
        self.samples.clear();
    }
}

/// The worse direction's loss between two samples, when that direction
/// carried at least [`SPAN_PACKETS`].
fn span_loss(old: &Counts, new: &Counts) -> Option<f64> {
    let ratio = |lost: u64, total: u64| (total >= SPAN_PACKETS).then(|| lost as f64 / total as f64);
    let up = ratio(
        new.lost.saturating_sub(old.lost),
        new.sent.saturating_sub(old.sent),
    );
    let missed = new.missed.saturating_sub(old.missed);
    let down = ratio(missed, new.received.saturating_sub(old.received) + missed);
    match (up, down) {
        (Some(u), Some(d)) => Some(u.max(d)),
        (one, other) => one.or(other),
    }
}

/// Whether a tunnel over TCP that carried `tcp_bps` during a probe,
/// where the one over QUIC carried `quic_bps` before it (the busier
/// direction), says UDP is policed.
pub fn policed(quic_bps: f64, tcp_bps: f64) -> bool {
    tcp_bps > POLICED_FACTOR * quic_bps && tcp_bps > 1e6
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn choices_parse_and_say_what_they_try_first() {
        assert_eq!("auto".parse(), Ok(TransportChoice::Auto));
        assert_eq!("tcp".parse(), Ok(TransportChoice::Tcp));
        assert!("udp"
            .parse::<TransportChoice>()
            .unwrap_err()
            .contains("expected auto, quic or tcp"));
        let mut auto = Reach::new(TransportChoice::Auto, 443);
        assert_eq!(auto.first().0, Transport::Quic);
        assert!(auto.falls_back() && auto.retries_quic());
        auto.to_tcp("no QUIC handshake within 3s".into());
        assert_eq!(
            auto.first(),
            (Transport::Tcp, "no QUIC handshake within 3s".into())
        );
        auto.to_quic();
        assert_eq!(auto.first().0, Transport::Quic);
        let mut quic = Reach::new(TransportChoice::Quic, 443);
        quic.to_tcp("ignored".into());
        assert_eq!(quic.first().0, Transport::Quic);
        assert!(!quic.falls_back());
        let tcp = Reach::new(TransportChoice::Tcp, 8443);
        assert_eq!(tcp.first().0, Transport::Tcp);
        assert_eq!(
            tcp.tcp_addr("192.0.2.1:4433".parse().unwrap()),
            "192.0.2.1:8443".parse().unwrap()
        );
    }

    #[test]
    fn silence_is_sending_unanswered_for_a_second_or_four_round_trips() {
        let t0 = Instant::now();
        let rtt = Duration::from_millis(50);
        let at = |ms| t0 + Duration::from_millis(ms);
        let mut s = Silence::default();
        // Heard, then idle: nothing sent, no silence however long.
        assert_eq!(s.look(at(0), 10, 10, rtt), None);
        assert_eq!(s.look(at(5000), 10, 10, rtt), None);
        // Sent, unanswered: counted from the first look that saw it.
        assert_eq!(s.look(at(5250), 12, 10, rtt), None);
        assert_eq!(s.look(at(6000), 14, 10, rtt), None);
        assert_eq!(
            s.look(at(6250), 15, 10, rtt),
            Some(Duration::from_millis(1000))
        );
        // An answer resets it.
        assert_eq!(s.look(at(6500), 16, 11, rtt), None);
        assert_eq!(s.look(at(7600), 17, 11, rtt), None);
        // A long round trip waits four of them.
        let mut slow = Silence::default();
        let rtt = Duration::from_millis(600);
        assert_eq!(slow.look(at(0), 1, 1, rtt), None);
        assert_eq!(slow.look(at(100), 2, 1, rtt), None);
        assert_eq!(slow.look(at(2000), 3, 1, rtt), None);
        assert!(slow.look(at(2500), 4, 1, rtt).is_some());
    }

    #[test]
    fn policing_probes_on_loss_in_most_seconds_and_backs_off() {
        let t0 = Instant::now();
        let at = |ms| t0 + Duration::from_millis(ms);
        // A download: `received` packets of 1200 bytes arrive per 250 ms
        // look, `missed` lost on the way.
        let feed = |p: &mut Policing, from: u64, looks: u64, per: (u64, u64)| {
            let mut last = None;
            for k in 0..looks {
                let n = from + k;
                let counts = Counts {
                    sent: n * 10,
                    lost: 0,
                    received: n * per.0,
                    missed: n * per.1,
                    bytes_out: n * 10 * 60,
                    bytes_in: n * per.0 * 1200,
                };
                last = p.look(at(n * 250), counts);
            }
            last
        };
        // Too little traffic: no verdict, however lossy.
        assert_eq!(feed(&mut Policing::default(), 0, 16, (10, 3)), None);
        // 5% loss in every second: a probe once the window is full.
        let mut q = Policing::default();
        assert_eq!(feed(&mut q, 0, 12, (38, 2)), None, "window not yet full");
        let (loss, rate) = feed(&mut q, 12, 1, (38, 2)).unwrap();
        assert!((loss - 0.05).abs() < 1e-9, "{loss}");
        assert!((rate - 38.0 * 4.0 * 1200.0 * 8.0).abs() < 1.0, "{rate}");
        // No better over TCP: the next probe waits 30 s, then 60.
        q.not_better(at(3000));
        assert_eq!(feed(&mut q, 13, 100, (38, 2)), None);
        assert!(feed(&mut q, 113, 20, (38, 2)).is_some());
        q.not_better(at(33_000));
        assert_eq!(q.gap, Duration::from_secs(120));
        // A burst of loss in one second (a start-up overshoot) and none
        // after: no probe.
        let mut burst = Policing::default();
        feed(&mut burst, 0, 4, (30, 10));
        let mut n = 4;
        let missed = 40;
        let mut verdict = None;
        while n < 20 {
            let counts = Counts {
                sent: n * 10,
                lost: 0,
                received: n * 40,
                missed,
                bytes_out: 0,
                bytes_in: n * 40 * 1200,
            };
            verdict = verdict.or(burst.look(at(n * 250), counts));
            n += 1;
        }
        assert_eq!(verdict, None);
        // A clean upload never asks for a probe.
        let mut clean = Policing::default();
        assert_eq!(feed(&mut clean, 0, 16, (40, 0)), None);
        // The verdict: TCP at least three times what QUIC carried.
        assert!(policed(2e6, 45e6));
        assert!(!policed(17e6, 35e6));
        assert!(!policed(0.1e6, 0.5e6));
    }
}
