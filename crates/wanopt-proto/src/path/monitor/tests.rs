use std::cmp::Reverse;
use std::collections::BinaryHeap;

use super::super::select::{Preference, Selector, RECOVER_HOLD};
use super::super::wire::{PathKey, Probe, ProbeBytes, EXPORTER_LEN};
use super::*;

const MS: Duration = Duration::from_millis(1);

fn id(n: u8) -> PathId {
    PathId::new(n).unwrap()
}

/// splitmix64: seeded, reproducible.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn chance(&mut self, p: f64) -> bool {
        ((self.next() >> 11) as f64) < p * (1u64 << 53) as f64
    }
}

#[derive(Debug, Clone, Copy)]
struct Link {
    one_way: Duration,
    loss: f64,
    cut: bool,
}

/// A probe on its way: arrival, serial (ties in sending order),
/// direction, bytes.
type InFlight = (Instant, u64, usize, ProbeBytes);

const TO_SERVER: usize = 0;
const TO_CLIENT: usize = 1;

/// A client and a server monitor joined by emulated paths, on a virtual
/// clock, their probes sealed and verified on the way.
struct Pair {
    now: Instant,
    key: PathKey,
    client: PathMonitor,
    server: PathMonitor,
    /// Per path: [client → server, server → client].
    links: Vec<[Link; 2]>,
    in_flight: BinaryHeap<Reverse<InFlight>>,
    serial: u64,
    rng: Rng,
    jitter: Duration,
    /// Whether the client's and the server's lanes send data.
    busy: [bool; 2],
    next_data: Instant,
    events: Vec<(Side, StateChange)>,
    last_arrival: Vec<[Instant; 2]>,
}

impl Pair {
    /// Paths of the given RTTs, clean, the lane idle.
    fn new(rtts: &[Duration], seed: u64) -> Pair {
        let now = Instant::now();
        let mut material = [0; EXPORTER_LEN];
        material[..8].copy_from_slice(&seed.to_be_bytes());
        let mut client = PathMonitor::new(now, Side::Client, PathMode::Failover);
        for n in 1..=rtts.len() {
            client.add_path(now, id(n as u8));
        }
        let link = |rtt: &Duration| Link {
            one_way: *rtt / 2,
            loss: 0.0,
            cut: false,
        };
        Pair {
            now,
            key: PathKey::from_exporter(&material),
            client,
            server: PathMonitor::new(now, Side::Server, PathMode::Failover),
            links: rtts.iter().map(|rtt| [link(rtt), link(rtt)]).collect(),
            in_flight: BinaryHeap::new(),
            serial: 0,
            rng: Rng(seed),
            jitter: Duration::ZERO,
            busy: [false; 2],
            next_data: now,
            events: Vec::new(),
            last_arrival: vec![[now; 2]; rtts.len()],
        }
    }

    fn monitor(&self, side: Side) -> &PathMonitor {
        match side {
            Side::Client => &self.client,
            Side::Server => &self.server,
        }
    }

    fn set_busy(&mut self, busy: bool) {
        self.busy = [busy; 2];
        self.next_data = self.now;
    }

    /// Runs until `duration` from now.
    fn run(&mut self, duration: Duration) {
        let end = self.now + duration;
        let mut stuck = 0;
        loop {
            self.step();
            let arrival = self.in_flight.peek().map(|Reverse(f)| f.0);
            let data = self.busy.contains(&true).then_some(self.next_data);
            let next = [
                self.client.next_timeout(),
                self.server.next_timeout(),
                arrival,
                data,
            ]
            .into_iter()
            .flatten()
            .min();
            match next {
                Some(t) if t <= end => {
                    // next_timeout must move on once its time was handled.
                    stuck = if t <= self.now { stuck + 1 } else { 0 };
                    assert!(stuck < 10, "no progress at {:?}", self.now);
                    self.now = self.now.max(t);
                }
                _ => {
                    self.now = end;
                    self.step();
                    return;
                }
            }
        }
    }

    fn step(&mut self) {
        let now = self.now;
        while let Some(Reverse((at, _, direction, bytes))) = self.in_flight.peek().copied() {
            if at > now {
                break;
            }
            self.in_flight.pop();
            let probe = Probe::new_checked(&bytes[..]).unwrap();
            let repr = ProbeRepr::parse(&probe, &self.key).unwrap();
            let receiver = if direction == TO_SERVER {
                &mut self.server
            } else {
                &mut self.client
            };
            receiver.on_probe(now, repr.path, &repr).unwrap();
        }
        if self.busy.contains(&true) && self.next_data <= now {
            if self.busy[0] {
                self.client.on_data(now);
            }
            if self.busy[1] {
                self.server.on_data(now);
            }
            self.next_data = now + 100 * MS;
        }
        self.client.handle_timeout(now);
        self.server.handle_timeout(now);
        while let Some(probe) = self.client.poll_due(now) {
            self.send(TO_SERVER, &probe);
        }
        while let Some(probe) = self.server.poll_due(now) {
            self.send(TO_CLIENT, &probe);
        }
        while let Some(change) = self.client.poll_event() {
            self.events.push((Side::Client, change));
        }
        while let Some(change) = self.server.poll_event() {
            self.events.push((Side::Server, change));
        }
    }

    fn send(&mut self, direction: usize, probe: &ProbeRepr) {
        let link = self.links[probe.path.index()][direction];
        if link.cut || self.rng.chance(link.loss) {
            return;
        }
        let jitter = if self.jitter.is_zero() {
            Duration::ZERO
        } else {
            Duration::from_nanos(self.rng.next() % self.jitter.as_nanos() as u64)
        };
        self.serial += 1;
        // Links keep order: jitter delays what follows too.
        let last = &mut self.last_arrival[probe.path.index()][direction];
        let at = (self.now + link.one_way + jitter).max(*last);
        *last = at;
        self.in_flight
            .push(Reverse((at, self.serial, direction, probe.emit(&self.key))));
    }

    /// When `side`'s `path` first entered `state` at or after `since`.
    fn entered(&self, side: Side, path: u8, state: PathState, since: Instant) -> Option<Instant> {
        self.events
            .iter()
            .find(|(s, c)| *s == side && c.path == id(path) && c.to == state && c.at >= since)
            .map(|(_, c)| c.at)
    }

    fn downs(&self) -> usize {
        self.events
            .iter()
            .filter(|(_, c)| c.to == PathState::Down)
            .count()
    }
}

#[test]
fn paths_come_up_with_their_rtt() {
    let mut pair = Pair::new(&[40 * MS, 90 * MS], 1);
    pair.run(Duration::from_secs(3));
    for side in [Side::Client, Side::Server] {
        let monitor = pair.monitor(side);
        for (n, rtt) in [(1, 40 * MS), (2, 90 * MS)] {
            assert_eq!(monitor.state(id(n)), Some(PathState::Up), "{side:?} {n}");
            assert!(monitor.validated(id(n)));
            // The hold is taken out: the RTT is the path's, to the µs.
            let measured = monitor.rtt(id(n)).unwrap();
            assert!(
                measured.abs_diff(rtt) <= Duration::from_micros(2),
                "{measured:?}"
            );
            assert_eq!(
                monitor.loss(id(n)).unwrap(),
                Loss {
                    to_peer: Some(0.0),
                    from_peer: Some(0.0)
                }
            );
        }
    }
    assert_eq!(pair.server.peer_mode(), Some(PathMode::Failover));
    // The client's first probe got its answer within a round trip.
    let t0 = pair.now - Duration::from_secs(3);
    let up = pair.entered(Side::Client, 1, PathState::Up, t0).unwrap();
    assert!(up - t0 <= 40 * MS, "{:?}", up - t0);
    assert_eq!(pair.downs(), 0);
}

/// Busy lanes on a 40 ms path: a cut path is down within
/// `max(6 × interval, 2 × srtt + 4 × rttvar, 150 ms)` of its last echo,
/// after a suspect spell, at both ends.
#[test]
fn a_cut_path_is_down_within_the_bound() {
    let mut pair = Pair::new(&[40 * MS, 50 * MS], 2);
    pair.set_busy(true);
    pair.run(Duration::from_secs(3));
    let cut = pair.now;
    pair.links[0][TO_SERVER].cut = true;
    pair.links[0][TO_CLIENT].cut = true;
    pair.run(Duration::from_secs(1));
    for side in [Side::Client, Side::Server] {
        let suspect = pair.entered(side, 1, PathState::Suspect, cut).unwrap();
        let down = pair.entered(side, 1, PathState::Down, cut).unwrap();
        // The last echo arrives up to one way after the cut; at 20 ms
        // intervals and 40 ms RTT the bound is its 150 ms floor.
        assert!(suspect < down, "{side:?}");
        let after = down - cut;
        assert!(after <= MIN_DOWN + 20 * MS, "{side:?} {after:?}");
        assert!(after >= MIN_DOWN - 2 * MIN_INTERVAL, "{side:?} {after:?}");
        assert_eq!(pair.monitor(side).state(id(2)), Some(PathState::Up));
    }
    // Restored: up again within a few intervals.
    let restored = pair.now;
    pair.links[0] = [Link {
        one_way: 20 * MS,
        loss: 0.0,
        cut: false,
    }; 2];
    pair.run(Duration::from_secs(1));
    for side in [Side::Client, Side::Server] {
        let up = pair.entered(side, 1, PathState::Up, restored).unwrap();
        assert!(
            up - restored <= 40 * MS + 6 * MIN_INTERVAL,
            "{:?}",
            up - restored
        );
    }
}

#[test]
fn an_idle_path_is_down_within_six_seconds() {
    let mut pair = Pair::new(&[40 * MS], 3);
    pair.run(Duration::from_secs(10));
    let cut = pair.now;
    pair.links[0][TO_CLIENT].cut = true;
    pair.links[0][TO_SERVER].cut = true;
    pair.run(Duration::from_secs(10));
    for side in [Side::Client, Side::Server] {
        let down = pair.entered(side, 1, PathState::Down, cut).unwrap() - cut;
        let bound = IDLE_INTERVAL * DOWN_INTERVALS;
        assert!(down <= bound + 20 * MS, "{side:?} {down:?}");
        assert!(down >= bound - IDLE_INTERVAL, "{side:?} {down:?}");
    }
}

#[test]
fn a_path_that_fails_one_way_is_down_at_both_ends() {
    for direction in [TO_SERVER, TO_CLIENT] {
        let mut pair = Pair::new(&[40 * MS, 40 * MS], 4);
        pair.set_busy(true);
        pair.run(Duration::from_secs(2));
        let cut = pair.now;
        // Probes still arrive the other way on path 1.
        pair.links[0][direction].cut = true;
        pair.run(Duration::from_secs(1));
        for side in [Side::Client, Side::Server] {
            let down = pair.entered(side, 1, PathState::Down, cut);
            // The probes that still arrive echo the last probe to cross
            // the other way for up to a round trip after the cut.
            let after = down.map(|d| d - cut);
            assert!(
                after.is_some_and(|a| a <= MIN_DOWN + 40 * MS + MIN_INTERVAL),
                "cut {direction}, {side:?}: {after:?}"
            );
            assert_eq!(pair.monitor(side).state(id(2)), Some(PathState::Up));
        }
        let receiving = if direction == TO_SERVER {
            Side::Client
        } else {
            Side::Server
        };
        let stats = pair.monitor(receiving).stats(id(1)).unwrap();
        assert!(stats.received > 0);
    }
}

/// At 5% loss each way, 10⁵ intervals of a busy 40 ms path (2,000 s) and
/// as many spent going idle and busy again never make it down, and the
/// loss each way is measured.
#[test]
fn no_false_down_at_five_percent_loss() {
    let mut pair = Pair::new(&[40 * MS], 5);
    pair.jitter = MS;
    for link in &mut pair.links[0] {
        link.loss = 0.05;
    }
    pair.set_busy(true);
    pair.run(MIN_INTERVAL * 100_000);
    for side in [Side::Client, Side::Server] {
        // Both busy: one probe per interval each way, no answers on top.
        let sent = pair.monitor(side).stats(id(1)).unwrap().sent;
        assert!((99_990..=100_001).contains(&sent), "{side:?} {sent}");
    }
    assert_eq!(
        pair.downs(),
        0,
        "{:?}",
        pair.events.iter().find(|e| e.1.to == PathState::Down)
    );
    for side in [Side::Client, Side::Server] {
        let monitor = pair.monitor(side);
        assert_eq!(monitor.state(id(1)), Some(PathState::Up));
        let loss = monitor.loss(id(1)).unwrap();
        // Over the last 64 to 128 probes: 5% give or take a few.
        for measured in [loss.to_peer.unwrap(), loss.from_peer.unwrap()] {
            assert!((0.0..0.15).contains(&measured), "{side:?} {loss:?}");
        }
        let stats = monitor.stats(id(1)).unwrap();
        let lost = 1.0
            - pair.monitor(other(side)).stats(id(1)).unwrap().received as f64 / stats.sent as f64;
        assert!((0.045..0.055).contains(&lost), "{lost}");
    }
    // Busy and idle in turn, together and each side alone, 4 s each,
    // 1,000 times.
    for _ in 0..1000 {
        for busy in [[true, true], [false, true], [false, false], [true, false]] {
            pair.busy = busy;
            pair.next_data = pair.now;
            pair.run(Duration::from_secs(4));
        }
    }
    assert_eq!(
        pair.downs(),
        0,
        "{:?}",
        pair.events.iter().find(|e| e.1.to == PathState::Down)
    );
}

/// A busy server and an idle client: the client answers each of the
/// server's probes, so the server still sees a cut within its busy bound
/// (and the client within its idle one).
#[test]
fn an_idle_side_answers_a_busy_one() {
    let mut pair = Pair::new(&[40 * MS], 7);
    pair.busy = [false, true];
    pair.run(Duration::from_secs(10));
    let start = pair.client.stats(id(1)).unwrap().sent;
    pair.run(Duration::from_secs(10));
    let answers = pair.client.stats(id(1)).unwrap().sent - start;
    // 50 probes a second from the server, each answered.
    assert!((495..=510).contains(&answers), "{answers}");
    let cut = pair.now;
    pair.links[0][TO_CLIENT].cut = true;
    pair.links[0][TO_SERVER].cut = true;
    pair.run(Duration::from_secs(10));
    let server = pair.entered(Side::Server, 1, PathState::Down, cut).unwrap() - cut;
    assert!(server <= MIN_DOWN + 20 * MS, "{server:?}");
    let client = pair.entered(Side::Client, 1, PathState::Down, cut).unwrap() - cut;
    assert!(
        client <= DOWN_INTERVALS * IDLE_INTERVAL + 20 * MS,
        "{client:?}"
    );
}

fn other(side: Side) -> Side {
    match side {
        Side::Client => Side::Server,
        Side::Server => Side::Client,
    }
}

#[test]
fn loss_is_measured_each_way() {
    let mut pair = Pair::new(&[40 * MS], 6);
    pair.links[0][TO_SERVER].loss = 0.2;
    pair.set_busy(true);
    pair.run(Duration::from_secs(60));
    let client = pair.client.loss(id(1)).unwrap();
    let server = pair.server.loss(id(1)).unwrap();
    assert!((0.1..0.3).contains(&client.to_peer.unwrap()), "{client:?}");
    assert!(
        (0.1..0.3).contains(&server.from_peer.unwrap()),
        "{server:?}"
    );
    assert_eq!(client.from_peer, Some(0.0));
    assert_eq!(server.to_peer, Some(0.0));
}

/// The server's side of an exchange with a client monitor, by hand.
struct FakeServer {
    seq: u32,
    received: u32,
}

impl FakeServer {
    /// The answer to `probe`, sent `hold` after it arrived.
    fn answer(&mut self, probe: &ProbeRepr, hold: Duration) -> ProbeRepr {
        self.seq += 1;
        self.received += 1;
        ProbeRepr {
            bind: false,
            from_client: false,
            answer: true,
            path: probe.path,
            mode: probe.mode,
            seq: self.seq,
            sent_us: self.seq * 1000,
            echo_us: probe.sent_us,
            hold_us: hold.as_micros() as u32,
            received: self.received,
            rate_kbit: None,
            realtime: false,
        }
    }
}

/// Runs `client` until its next probe on path 1 is due and returns it.
fn next_probe(client: &mut PathMonitor, now: &mut Instant) -> ProbeRepr {
    loop {
        client.handle_timeout(*now);
        if let Some(probe) = client.poll_probe(*now, id(1)) {
            return probe;
        }
        *now = client.next_timeout().unwrap().max(*now);
    }
}

#[test]
fn a_down_path_is_up_after_three_echoes_in_a_row() {
    let t0 = Instant::now();
    let mut now = t0;
    let mut client = PathMonitor::new(now, Side::Client, PathMode::Duplicate);
    client.add_path(now, id(1));
    let mut server = FakeServer {
        seq: 0,
        received: 0,
    };
    let rtt = 40 * MS;
    let probe = next_probe(&mut client, &mut now);
    assert_eq!((probe.seq, probe.echo_us, probe.bind), (1, 0, true));
    let answer = server.answer(&probe, MS);
    now += rtt + MS;
    client.on_probe(now, id(1), &answer).unwrap();
    assert_eq!(client.state(id(1)), Some(PathState::Up));
    assert_eq!(client.rtt(id(1)), Some(rtt));
    // No more answers: suspect, then down.
    let silent = now;
    while client.state(id(1)) != Some(PathState::Down) {
        let _ = next_probe(&mut client, &mut now);
        assert!(now - silent < Duration::from_secs(7));
    }
    assert_eq!(
        client.poll_event().map(|c| (c.from, c.to)),
        Some((PathState::Unknown, PathState::Up))
    );
    assert_eq!(
        client.poll_event().map(|c| (c.from, c.to)),
        Some((PathState::Up, PathState::Suspect))
    );
    assert_eq!(
        client.poll_event().map(|c| (c.from, c.to)),
        Some((PathState::Suspect, PathState::Down))
    );
    // Echoes again: the first two leave it down, the third brings it up.
    for echo in 1..=UP_ECHOES {
        let probe = next_probe(&mut client, &mut now);
        now += rtt;
        let answer = server.answer(&probe, Duration::ZERO);
        client.on_probe(now, id(1), &answer).unwrap();
        let expected = if echo < UP_ECHOES {
            PathState::Down
        } else {
            PathState::Up
        };
        assert_eq!(client.state(id(1)), Some(expected), "echo {echo}");
        // An echo of the same probe again does not count.
        let again = server.answer(&probe, Duration::ZERO);
        client.on_probe(now, id(1), &again).unwrap();
        assert_eq!(client.state(id(1)), Some(expected), "echo {echo} again");
    }
    assert_eq!(client.view(id(1)).unwrap().up_since, Some(now));
}

#[test]
fn replays_reflections_and_strangers_are_refused() {
    let t0 = Instant::now();
    let mut client = PathMonitor::new(t0, Side::Client, PathMode::Failover);
    client.add_path(t0, id(1));
    let mut server = PathMonitor::new(t0, Side::Server, PathMode::Failover);
    let probe = client.poll_probe(t0, id(1)).unwrap();
    // The client's own probe reflected back to it.
    assert_eq!(
        client.on_probe(t0, id(1), &probe),
        Err(ProbeRejected::Reflected)
    );
    // On the server: taken once, then a replay.
    assert_eq!(server.on_probe(t0, id(1), &probe), Ok(()));
    assert_eq!(
        server.on_probe(t0, id(1), &probe),
        Err(ProbeRejected::Replay {
            path: id(1),
            seq: 1,
            last: 1
        })
    );
    assert_eq!(server.stats(id(1)).unwrap().replays, 1);
    // Still a replay once the path was removed: it does not come back.
    server.remove_path(id(1));
    assert!(matches!(
        server.on_probe(t0, id(1), &probe),
        Err(ProbeRejected::Replay { .. })
    ));
    assert_eq!(server.paths().count(), 0);
    // A probe that names another path than it came on, and one on a path
    // the server has not bound without BIND.
    let mut unbound = probe;
    unbound.seq = 9;
    assert_eq!(
        server.on_probe(t0, id(2), &unbound),
        Err(ProbeRejected::WrongPath {
            named: id(1),
            arrived: id(2)
        })
    );
    unbound.path = id(3);
    unbound.bind = false;
    assert_eq!(
        server.on_probe(t0, id(3), &unbound),
        Err(ProbeRejected::UnknownPath(id(3)))
    );
    // The client takes nothing on a path it does not have.
    let mut reply = unbound;
    reply.from_client = false;
    assert_eq!(
        client.on_probe(t0, id(3), &reply),
        Err(ProbeRejected::UnknownPath(id(3)))
    );
}

/// The selector driven by the client's monitor: data leaves a cut path
/// within the down bound and comes back [`RECOVER_HOLD`] after the path
/// is up again.
#[test]
fn failover_leaves_a_cut_path_and_returns_after_the_hold() {
    let mut pair = Pair::new(&[40 * MS, 50 * MS], 9);
    pair.set_busy(true);
    pair.run(Duration::from_secs(3));
    let mut selector = Selector::new(PathMode::Failover, Preference::Listed);
    let mut views = Vec::new();
    let mut select = |pair: &mut Pair, step: Duration| {
        pair.run(step);
        pair.client.views(&mut views);
        selector.select(pair.now, &views).primary.unwrap()
    };
    assert_eq!(select(&mut pair, MS), id(1));
    let cut = pair.now;
    pair.links[0][TO_SERVER].cut = true;
    pair.links[0][TO_CLIENT].cut = true;
    while select(&mut pair, MS) == id(1) {}
    assert!(pair.now - cut <= MIN_DOWN + 20 * MS, "{:?}", pair.now - cut);
    for _ in 0..1000 {
        assert_eq!(select(&mut pair, 10 * MS), id(2));
    }
    let restored = pair.now;
    pair.links[0][TO_SERVER].cut = false;
    pair.links[0][TO_CLIENT].cut = false;
    while select(&mut pair, MS) == id(2) {}
    let back = pair.now - restored;
    assert!(back >= RECOVER_HOLD, "{back:?}");
    assert!(
        back <= RECOVER_HOLD + 40 * MS + 6 * MIN_INTERVAL,
        "{back:?}"
    );
    assert_eq!(selector.switches(), 2);
}

#[test]
fn a_removed_path_keeps_its_numbers() {
    let t0 = Instant::now();
    let mut client = PathMonitor::new(t0, Side::Client, PathMode::Failover);
    let mut server = PathMonitor::new(t0, Side::Server, PathMode::Failover);
    client.add_path(t0, id(1));
    let probe = client.poll_probe(t0, id(1)).unwrap();
    server.on_probe(t0, id(1), &probe).unwrap();
    let answer = server.poll_due(t0).unwrap();
    client.on_probe(t0, id(1), &answer).unwrap();
    // Both forget the path and take it up again: the numbers go on, so
    // neither takes the other's new probes for replays.
    client.remove_path(id(1));
    server.remove_path(id(1));
    let t1 = t0 + Duration::from_secs(1);
    client.add_path(t1, id(1));
    let probe = client.poll_probe(t1, id(1)).unwrap();
    assert_eq!(probe.seq, 2);
    assert_eq!(server.on_probe(t1, id(1), &probe), Ok(()));
    let answer = server.poll_due(t1).unwrap();
    assert_eq!(answer.seq, 2);
    assert_eq!(client.on_probe(t1, id(1), &answer), Ok(()));
}

#[test]
fn a_rebound_path_gets_only_answers_until_echoed() {
    let mut pair = Pair::new(&[40 * MS], 8);
    pair.run(Duration::from_secs(3));
    assert!(pair.server.validated(id(1)));
    // The client's address changed: the server sends nothing of its own
    // there until the client shows it receives.
    pair.links[0][TO_SERVER].cut = true;
    pair.server.rebound(id(1));
    let now = pair.now;
    assert!(!pair.server.validated(id(1)));
    for later in [now, now + Duration::from_secs(5)] {
        assert_eq!(pair.server.poll_due(later), None);
    }
    pair.links[0][TO_SERVER].cut = false;
    pair.run(Duration::from_secs(3));
    assert!(pair.server.validated(id(1)));
}

#[test]
fn the_server_only_answers_until_the_client_echoes() {
    let t0 = Instant::now();
    let mut client = PathMonitor::new(t0, Side::Client, PathMode::SpreadFec);
    client.add_path(t0, id(4));
    let mut server = PathMonitor::new(t0, Side::Server, PathMode::Failover);
    let mut now = t0;
    for n in 1..=3u32 {
        // A BIND probe whose echo names nothing of the server's.
        let mut probe = client.poll_probe(now, id(4)).unwrap();
        probe.echo_us = 0;
        server.on_probe(now, id(4), &probe).unwrap();
        assert!(!server.validated(id(4)));
        let answer = server.poll_due(now).unwrap();
        assert_eq!(
            (answer.seq, answer.path, answer.mode),
            (n, id(4), PathMode::Failover)
        );
        assert!(!answer.bind && !answer.from_client);
        // One answer per probe, however long the server waits.
        for later in [now, now + Duration::from_secs(5)] {
            assert_eq!(server.poll_due(later), None);
        }
        now += Duration::from_secs(1);
    }
    assert_eq!(server.peer_mode(), Some(PathMode::SpreadFec));
    // Unanswered since its first probe: down after six of the client's
    // intervals (a second here), however many probes it sent.
    server.handle_timeout(now);
    assert_eq!(server.state(id(4)), Some(PathState::Unknown));
    now = t0 + DOWN_INTERVALS * IDLE_INTERVAL;
    server.handle_timeout(now);
    assert_eq!(server.state(id(4)), Some(PathState::Down));
    // The client echoes the last answer: validated, probes on schedule.
    let answer = {
        let probe = client.poll_probe(now, id(4)).unwrap();
        server.on_probe(now, id(4), &probe).unwrap();
        server.poll_due(now).unwrap()
    };
    client.on_probe(now + 10 * MS, id(4), &answer).unwrap();
    now += Duration::from_secs(2);
    let echo = client.poll_probe(now, id(4)).unwrap();
    server.on_probe(now, id(4), &echo).unwrap();
    assert!(server.validated(id(4)));
    assert!(server.poll_due(now).is_some());
    let next = server.next_timeout().unwrap();
    assert!(next > now);
    assert!(server.poll_due(next).is_some());
}
