use super::*;

const MS: Duration = Duration::from_millis(1);

fn id(n: u8) -> PathId {
    PathId::new(n).unwrap()
}

fn view(n: u8, rtt_ms: u32, loss: f64, jitter_ms: u32) -> PathView {
    PathView {
        id: id(n),
        state: PathState::Up,
        rtt: Some(rtt_ms * MS),
        loss: Some(loss),
        up_since: None,
        sla_loss: Some(loss),
        jitter: Some(jitter_ms * MS),
    }
}

fn sla(text: &str) -> Sla {
    let mut sla = Sla::default();
    for term in text.split(',') {
        sla.add_term(term).unwrap();
    }
    sla
}

#[test]
fn terms_parse_print_and_refuse_what_they_cannot_mean() {
    let s = sla("latency<150ms,loss<1%,jitter<30ms");
    assert_eq!(s.latency, Some(150 * MS));
    assert_eq!(s.loss, Some(0.01));
    assert_eq!(s.jitter, Some(30 * MS));
    assert_eq!(s.to_string(), "latency<150ms,loss<1%,jitter<30ms");
    assert_eq!(sla("loss<0.5%").to_string(), "loss<0.5%");
    for bad in [
        "latency=150ms",
        "latency<150",
        "latency<0ms",
        "latency<-5ms",
        "loss<1",
        "loss<101%",
        "loss<NaN%",
        "rtt<150ms",
        "jitter<",
    ] {
        let e = Sla::default().add_term(bad).unwrap_err();
        assert!(e.to_string().contains(bad), "{e}");
    }
    assert!(Sla::default().is_empty() && !s.is_empty());
}

#[test]
fn the_strictest_takes_each_lower_threshold() {
    let a = sla("latency<150ms,loss<1%");
    let b = sla("latency<100ms,jitter<30ms");
    assert_eq!(
        a.strictest(b).to_string(),
        "latency<100ms,loss<1%,jitter<30ms"
    );
    assert_eq!(Sla::default().strictest(a), a);
}

#[test]
fn the_score_is_the_worst_metric_over_its_threshold() {
    let s = sla("latency<100ms,loss<1%");
    let (score, worst) = s.score(&view(1, 50, 0.03, 0));
    assert!((score - 3.0).abs() < 1e-9 && worst == Some(Metric::Loss));
    let (score, worst) = s.score(&view(1, 120, 0.0, 90));
    assert!((score - 1.2).abs() < 1e-9 && worst == Some(Metric::Latency));
}

#[test]
fn the_first_meeting_path_until_it_fails_three_times_in_a_row() {
    let t0 = Instant::now();
    let mut sel = SlaSelector::new(sla("latency<100ms,loss<1%"));
    let good = [view(1, 80, 0.0, 2), view(2, 40, 0.0, 2)];
    let c = sel.select(t0, &good).unwrap();
    assert_eq!((c.path, c.meets), (id(1), true));
    assert_eq!(c.why, "meets latency<100ms,loss<1%");
    // Path 1 over its loss for two evaluations: a spike, kept.
    let lossy = [view(1, 80, 0.05, 2), view(2, 40, 0.0, 2)];
    let mut t = t0;
    for _ in 0..2 {
        t += EVALUATE_EVERY;
        assert_eq!(sel.select(t, &lossy).unwrap().path, id(1));
    }
    t += EVALUATE_EVERY;
    assert_eq!(sel.select(t, &good).unwrap().path, id(1));
    // Three in a row: it fails, and real-time datagrams move.
    for _ in 0..3 {
        t += EVALUATE_EVERY;
        sel.select(t, &lossy);
    }
    let c = sel.select(t, &lossy).unwrap();
    assert_eq!((c.path, c.meets), (id(2), true));
    assert_eq!(c.why, "meets latency<100ms,loss<1% (path 1: loss 5% > 1%)");
    assert_eq!(sel.moves(), 1);
    // Path 1 recovers: path 2 still meets and is kept (no flapping back).
    for _ in 0..40 {
        t += EVALUATE_EVERY;
        assert_eq!(sel.select(t, &good).unwrap().path, id(2));
    }
    // Path 2 fails: path 1 met again for 2 s, so it takes over.
    let slow2 = [view(1, 80, 0.0, 2), view(2, 140, 0.0, 2)];
    for _ in 0..3 {
        t += EVALUATE_EVERY;
        sel.select(t, &slow2);
    }
    assert_eq!(sel.select(t, &slow2).unwrap().path, id(1));
    assert_eq!(sel.moves(), 2);
}

#[test]
fn a_failed_path_meets_again_only_after_two_seconds_under_the_margin() {
    let t0 = Instant::now();
    let mut sel = SlaSelector::new(sla("latency<100ms"));
    let mut t = t0;
    let slow1 = [view(1, 120, 0.0, 0), view(2, 90, 0.0, 0)];
    for _ in 0..4 {
        sel.select(t, &slow1);
        t += EVALUATE_EVERY;
    }
    assert_eq!(sel.choice().unwrap().path, id(2));
    // Path 2 gets worse: at 95 ms it still meets (no move); path 1 at
    // 85 ms is under the threshold but not under 80% of it: still failed.
    let both = [view(1, 85, 0.0, 0), view(2, 95, 0.0, 0)];
    for _ in 0..40 {
        sel.select(t, &both);
        t += EVALUATE_EVERY;
    }
    assert!(sel.standings[0].failing, "85 ms is not under 80 ms");
    // Now both fail; path 1 is the better by 20%.
    let worse = [view(1, 105, 0.0, 0), view(2, 150, 0.0, 0)];
    for _ in 0..4 {
        sel.select(t, &worse);
        t += EVALUATE_EVERY;
    }
    let c = sel.choice().unwrap();
    assert_eq!((c.path, c.meets), (id(1), false));
    assert!(
        c.why
            .starts_with("no path meets latency<100ms; the best: path 1: latency 105 ms > 100 ms"),
        "{}",
        c.why
    );
}

#[test]
fn with_none_meeting_a_move_needs_a_better_score_and_the_hold() {
    let t0 = Instant::now();
    let mut sel = SlaSelector::new(sla("loss<1%"));
    let a = [view(1, 50, 0.05, 0), view(2, 50, 0.035, 0)];
    let mut t = t0;
    for _ in 0..4 {
        sel.select(t, &a);
        t += EVALUATE_EVERY;
    }
    // Both fail; path 2 is 30% better, but path 1 was chosen less than
    // the hold ago.
    assert_eq!(sel.choice().unwrap().path, id(1));
    for _ in 0..20 {
        sel.select(t, &a);
        t += EVALUATE_EVERY;
    }
    assert_eq!(sel.choice().unwrap().path, id(2));
    let moves = sel.moves();
    // Path 1 only a little better: kept.
    let b = [view(1, 50, 0.03, 0), view(2, 50, 0.035, 0)];
    for _ in 0..30 {
        sel.select(t, &b);
        t += EVALUATE_EVERY;
    }
    assert_eq!(sel.choice().unwrap().path, id(2));
    // Path 1 20% better: it moves once the hold is over.
    let c = [view(1, 50, 0.02, 0), view(2, 50, 0.035, 0)];
    sel.select(t, &c);
    assert_eq!(sel.choice().unwrap().path, id(1));
    assert_eq!(sel.moves(), moves + 1);
    // And not back within the hold, even if path 2 becomes better.
    let d = [view(1, 50, 0.04, 0), view(2, 50, 0.015, 0)];
    t += EVALUATE_EVERY;
    sel.select(t, &d);
    assert_eq!(sel.choice().unwrap().path, id(1));
}

#[test]
fn a_path_that_goes_down_is_left_at_once() {
    let t0 = Instant::now();
    let mut sel = SlaSelector::new(sla("latency<100ms"));
    let good = [view(1, 80, 0.0, 0), view(2, 40, 0.0, 0)];
    assert_eq!(sel.select(t0, &good).unwrap().path, id(1));
    let mut down = good;
    down[0].state = PathState::Down;
    // Within the evaluation interval all the same.
    let c = sel.select(t0 + MS, &down).unwrap();
    assert_eq!((c.path, c.meets), (id(2), true));
    assert_eq!(c.why, "meets latency<100ms (path 1 is down)");
    // Both down: the choice stays (nothing better to send on).
    down[1].state = PathState::Down;
    assert_eq!(sel.select(t0 + 2 * MS, &down), None);
}

#[test]
fn jitter_is_the_running_mean_of_changes_in_transit_time() {
    use super::super::entry::Entry;
    let t0 = Instant::now();
    let mut e = Entry::new(id(1), t0, true, Some(1));
    // Probes 20 ms apart, each 30 ms in transit: no jitter.
    let mut before = (0u32, t0 + 30 * MS);
    for i in 1..=20u32 {
        let sent_us = i * 20_000;
        let at = t0 + (i * 20 + 30) * MS;
        e.jitter_sample(before, sent_us, at);
        before = (sent_us, at);
    }
    assert_eq!(e.view().jitter, Some(Duration::ZERO));
    // Transit alternating 30 and 40 ms: |D| = 10 ms each time, and J
    // climbs toward it by 1/16 a step.
    for i in 21..=200u32 {
        let sent_us = i * 20_000;
        let at = t0 + (i * 20 + 30 + 10 * (i % 2)) * MS;
        e.jitter_sample(before, sent_us, at);
        before = (sent_us, at);
    }
    let j = e.view().jitter.unwrap();
    assert!(j > 9 * MS && j <= 10 * MS, "{j:?}");
    // The sender's clock wraps: the same.
    let mut w = Entry::new(id(1), t0, true, Some(1));
    let start = u32::MAX - 5_000;
    w.jitter_sample((start, t0), start.wrapping_add(20_000), t0 + 20 * MS);
    assert_eq!(w.view().jitter, Some(Duration::ZERO));
}
