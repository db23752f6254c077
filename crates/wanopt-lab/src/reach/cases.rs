//! Each case of the `reach` scenario on a lab that is up: the new flows
//! from the edge's start, the warm tunnel's fetches, the bulk download,
//! and what the case does to UDP in between, written into the case's
//! [`Row`].

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use super::nodes::{self, EdgeStatus};
use super::plan::{Case, Mode, Plan};
use super::results::{median, Row};
use super::transfer::{self, ms, Outcome, Request};
use crate::topology::Lab;

/// How long a new flow may take to work before the case gives up on it
/// (the goal is 5 s).
const FIRST_FLOW_LIMIT: Duration = Duration::from_secs(20);
/// How long the edge may take to move to TCP under policing, or after a
/// block, before the case gives up on it (the goal is 10 s).
const MOVE_LIMIT: Duration = Duration::from_secs(30);
/// How long the edge may take to bring new flows back to QUIC before the
/// case gives up on it (the goal is 60 s).
const RETURN_LIMIT: Duration = Duration::from_secs(90);
/// When UDP is blocked or let through, after the download that spans it
/// began.
const CHANGE_AFTER: Duration = Duration::from_secs(2);
/// A measured download gives up after this long without a byte.
const STALL: Duration = Duration::from_secs(10);
/// The download open when UDP is blocked gives up after this long without
/// a byte: longer than a tunnel takes to find its path dead.
const OPEN_FLOW_STALL: Duration = Duration::from_secs(40);

/// One case, mode and run on a lab that is up.
pub struct CaseRun<'a> {
    /// The lab.
    pub lab: &'a Lab,
    /// The executable of the lab's processes.
    pub exe: &'a Path,
    /// The run's settings.
    pub plan: &'a Plan,
    /// Where progress lines go.
    pub say: &'a dyn Fn(String),
    /// The row being filled in.
    pub row: Row,
    /// The next download's seed.
    seed: u64,
}

impl<'a> CaseRun<'a> {
    /// A run of `case` in `mode` on `lab`.
    pub fn new(
        lab: &'a Lab,
        exe: &'a Path,
        plan: &'a Plan,
        say: &'a dyn Fn(String),
        (case, mode, run): (Case, Mode, u32),
    ) -> CaseRun<'a> {
        let seed =
            crate::rng::hash_name(format!("{}-{}-{run}", case.name(), mode.name()).as_bytes());
        CaseRun {
            lab,
            exe,
            plan,
            say,
            row: Row::new(case, mode, run, plan.floor_ms()),
            seed,
        }
    }

    /// Runs the case; the row has what it measured.
    pub fn run(mut self) -> Row {
        let before = self.status().map(|s| s.flow_resets);
        let outcome = match self.row.case {
            Case::Open | Case::Blocked => self.steady(),
            Case::Policed => self.policed(),
            Case::BlockedMid => self.blocked_mid(),
            Case::Returns => self.returns(),
        };
        if let Err(e) = outcome {
            self.row.failures.push(e);
        }
        if let (Some(before), Some(after)) = (before, self.status()) {
            self.row.reset_reasons = nodes::resets_since(&before, &after.flow_resets);
        }
        self.row
    }

    fn tunnel(&self) -> bool {
        self.row.mode == Mode::Wanopt
    }

    /// The edge's status (wanopt mode; `None` direct or unreadable).
    fn status(&self) -> Option<EdgeStatus> {
        self.tunnel()
            .then(|| nodes::edge_status(self.lab, self.exe).ok())
            .flatten()
    }

    /// A download of `length` bytes on a new stream, given up after
    /// `deadline` if any; its wrong bytes count.
    fn download(&mut self, length: u64, deadline: Option<Duration>) -> Outcome {
        self.seed = self.seed.wrapping_add(1);
        let request = Request {
            deadline,
            ..Request::new(self.seed, length, STALL)
        };
        let outcome = transfer::download(self.lab, request);
        self.row.wrong_bytes += outcome.wrong_bytes;
        outcome
    }

    /// A measured download: its reset counts, its failure is noted.
    fn measured(&mut self, what: &str, length: u64) -> Outcome {
        self.measured_until(what, length, None)
    }

    /// A measured download given up after `deadline` if any.
    fn measured_until(&mut self, what: &str, length: u64, deadline: Option<Duration>) -> Outcome {
        let outcome = self.download(length, deadline);
        self.row.resets += u32::from(outcome.was_reset());
        if let Some(f) = &outcome.failure {
            self.row.failures.push(format!("{what}: {f}"));
        }
        outcome
    }

    /// New small flows, one after another (100 ms apart when one fails),
    /// until one works: ms from `since` to its first byte.
    fn first_flow(&mut self, since: Instant) -> Option<f64> {
        while since.elapsed() < FIRST_FLOW_LIMIT {
            let probe = self.download(self.plan.probe_bytes, None);
            if probe.complete() {
                let first = probe.first_byte?;
                return Some(ms(first.saturating_duration_since(since)));
            }
            thread::sleep(Duration::from_millis(100));
        }
        self.row
            .failures
            .push(format!("no new flow worked within {FIRST_FLOW_LIMIT:?}"));
        None
    }

    /// Starts the case: through wanopt the edge starts again (the path's
    /// rules are in place), directly the lab is ready; then the first new
    /// flow, timed from that start. Returns the start.
    fn start(&mut self) -> Result<Instant, String> {
        let started = if self.tunnel() {
            nodes::restart_edge(self.lab)?
        } else {
            Instant::now()
        };
        self.row.first_byte_ms = self.first_flow(started);
        Ok(started)
    }

    /// What crosses a new tunnel before it is timed.
    fn warm(&mut self) {
        if self.tunnel() {
            self.measured("warm-up", self.plan.warm_bytes);
        }
    }

    /// The fetches (median) and the bulk download, and the transport the
    /// edge used for them.
    fn measure(&mut self) {
        for i in 0..self.plan.fetches {
            let fetch = self.measured(&format!("fetch {}", i + 1), self.plan.fetch_bytes);
            if fetch.complete() {
                self.row.fetch_runs_ms.extend(fetch.request_to_end_ms());
            }
        }
        self.row.fetch_ms = median(self.row.fetch_runs_ms.clone());
        // A crawling tunnel is measured over the deadline, not waited for.
        let deadline = Some(self.plan.bulk_deadline());
        let bulk = self.measured_until("bulk", self.plan.bulk_bytes, deadline);
        if bulk.complete() || bulk.cut_at_deadline() {
            self.row.mbit_s = bulk.mbit_s();
        }
        if let Some(status) = self.status() {
            self.row.transport = status.transport;
            self.row.transport_why = status.transport_why;
        }
    }

    /// `open` and `blocked`: the rules stay as the edge found them.
    fn steady(&mut self) -> Result<(), String> {
        self.start()?;
        self.warm();
        self.measure();
        Ok(())
    }

    /// Polls the edge's status every 100 ms until `done` holds of it: ms
    /// from `since`, or `None` after `limit`.
    fn wait_for(
        &self,
        since: Instant,
        limit: Duration,
        done: impl Fn(&EdgeStatus) -> bool,
    ) -> Option<f64> {
        while since.elapsed() < limit {
            if self.status().is_some_and(|s| done(&s)) {
                return Some(ms(since.elapsed()));
            }
            thread::sleep(Duration::from_millis(100));
        }
        None
    }

    /// A long download on its own thread (stopped by the flag it returns).
    fn long_download(&mut self, stall: Duration) -> (thread::JoinHandle<Outcome>, Arc<AtomicBool>) {
        self.seed = self.seed.wrapping_add(1);
        let stop = Arc::new(AtomicBool::new(false));
        let request = Request {
            stop: Some(stop.clone()),
            ..Request::new(self.seed, self.plan.long_bytes, stall)
        };
        let lab = self.lab.clone();
        (
            thread::spawn(move || transfer::download(&lab, request)),
            stop,
        )
    }

    /// Joins a long download; its wrong bytes count.
    fn join(&mut self, handle: thread::JoinHandle<Outcome>) -> Result<Outcome, String> {
        let outcome = handle
            .join()
            .map_err(|_| "the long download's thread panicked".to_string())?;
        self.row.wrong_bytes += outcome.wrong_bytes;
        Ok(outcome)
    }

    /// `policed`: a long download gives the tunnel traffic until the edge
    /// moves to TCP (`moved_after_ms`, from the edge's start); then the
    /// measurements, on TCP.
    fn policed(&mut self) -> Result<(), String> {
        let started = self.start()?;
        if self.tunnel() {
            let (handle, stop) = self.long_download(STALL);
            self.row.moved_after_ms = self.wait_for(started, MOVE_LIMIT, |s| s.on("tcp"));
            stop.store(true, Ordering::Relaxed);
            let long = self.join(handle)?;
            self.row.resets += u32::from(long.was_reset());
            (self.say)(format!(
                "  policed: on TCP {} after the edge's start; the download that ran meanwhile: {} MB{}",
                self.row
                    .moved_after_ms
                    .map_or("never".into(), |m| format!("{:.1} s", m / 1e3)),
                long.bytes / 1_000_000,
                long.failure
                    .filter(|f| f != "stopped")
                    .map_or(String::new(), |f| format!(", {f}"))
            ));
        }
        self.warm();
        self.measure();
        Ok(())
    }

    /// `blocked-mid`: UDP blocked while a long download runs; new flows
    /// from the block; the open download reset or continued.
    fn blocked_mid(&mut self) -> Result<(), String> {
        self.start()?;
        self.warm();
        let (handle, stop) = self.long_download(OPEN_FLOW_STALL);
        thread::sleep(CHANGE_AFTER);
        // From here the first byte is timed from the block.
        self.row.first_byte_ms = None;
        let rules = self.row.case.rules_mid_run().unwrap_or_default();
        if let Err(e) = nodes::set_middlebox(self.lab, rules) {
            stop.store(true, Ordering::Relaxed);
            let _ = self.join(handle);
            return Err(e);
        }
        let blocked = Instant::now();
        (self.say)("  blocked-mid: UDP blocked".into());
        self.row.first_byte_ms = self.first_flow(blocked);
        if self.tunnel() {
            self.row.moved_after_ms = self.wait_for(blocked, MOVE_LIMIT, |s| s.on("tcp"));
        }
        let open = self.join(handle)?;
        self.row.resets += u32::from(open.was_reset());
        self.row.open_flow = Some(match &open.failure {
            None if open.complete() => "continued".into(),
            None => format!("ended with {} of {} bytes", open.bytes, open.wanted),
            Some(_) if open.was_reset() => "reset".into(),
            Some(f) => f.clone(),
        });
        self.measure();
        Ok(())
    }

    /// `returns`: on TCP with UDP blocked, then UDP let through: a new
    /// flow every second until the edge's new flows are on QUIC again
    /// (`moved_after_ms`, from UDP's return); then the measurements.
    fn returns(&mut self) -> Result<(), String> {
        self.start()?;
        self.warm();
        let rules = self.row.case.rules_mid_run().unwrap_or_default();
        nodes::set_middlebox(self.lab, rules)?;
        let opened = Instant::now();
        (self.say)("  returns: UDP let through again".into());
        if self.tunnel() {
            while opened.elapsed() < RETURN_LIMIT {
                let on_quic = self.status().is_some_and(|s| s.on("quic"));
                let probe = self.measured("a flow after UDP's return", self.plan.probe_bytes);
                if on_quic && probe.complete() {
                    self.row.moved_after_ms = Some(ms(opened.elapsed()));
                    break;
                }
                thread::sleep(Duration::from_secs(1));
            }
        }
        self.measure();
        Ok(())
    }
}
