//! Windowed maximum over a sliding window of rounds (Kathleen Nichols'
//! algorithm, as in Linux `lib/win_minmax.c`): the best, second-best and
//! third-best samples of the window, so the maximum is known in O(1) and ages
//! out gracefully.

/// One sample: its value and the round it was taken in.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Sample {
    round: u64,
    value: u64,
}

/// Running maximum of the samples of the last `window` rounds.
#[derive(Clone, Debug)]
pub(crate) struct WindowedMax {
    window: u64,
    samples: [Sample; 3],
}

impl WindowedMax {
    /// An empty filter over `window` rounds.
    pub(crate) fn new(window: u64) -> Self {
        Self {
            window,
            samples: [Sample::default(); 3],
        }
    }

    /// The maximum of the window (0 when empty).
    pub(crate) fn get(&self) -> u64 {
        self.samples[0].value
    }

    /// Forgets every sample.
    pub(crate) fn reset(&mut self, round: u64, value: u64) {
        self.samples = [Sample { round, value }; 3];
    }

    /// Adds a sample taken in `round` (rounds never go backwards).
    pub(crate) fn update(&mut self, round: u64, value: u64) {
        let sample = Sample { round, value };
        if value >= self.samples[0].value
            || round.saturating_sub(self.samples[2].round) > self.window
        {
            // A new maximum, or nothing left in the window.
            self.reset(round, value);
            return;
        }
        if value >= self.samples[1].value {
            self.samples[2] = sample;
            self.samples[1] = sample;
        } else if value >= self.samples[2].value {
            self.samples[2] = sample;
        }
        self.subwindow_update(sample);
    }

    /// Ages the best samples out as they leave the window.
    fn subwindow_update(&mut self, sample: Sample) {
        let elapsed = sample.round.saturating_sub(self.samples[0].round);
        if elapsed > self.window {
            // The best left the window: promote the others.
            self.samples[0] = self.samples[1];
            self.samples[1] = self.samples[2];
            self.samples[2] = sample;
            if sample.round.saturating_sub(self.samples[0].round) > self.window {
                self.samples[0] = self.samples[1];
                self.samples[1] = self.samples[2];
                self.samples[2] = sample;
            }
        } else if self.samples[1].round == self.samples[0].round && elapsed > self.window / 4 {
            // A quarter of the window passed without a second choice: take one.
            self.samples[2] = sample;
            self.samples[1] = sample;
        } else if self.samples[2].round == self.samples[1].round && elapsed > self.window / 2 {
            // Half the window passed without a third choice: take one.
            self.samples[2] = sample;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The naive reference: the maximum of the samples of the last `window`
    /// rounds, or the latest sample when the window holds nothing newer.
    #[test]
    fn tracks_the_maximum_and_forgets_it_after_the_window() {
        let mut filter = WindowedMax::new(10);
        filter.update(0, 100);
        assert_eq!(filter.get(), 100);
        for round in 1..=10 {
            filter.update(round, 50);
            assert_eq!(
                filter.get(),
                100,
                "round {round}: the peak is still in the window"
            );
        }
        filter.update(11, 50);
        assert_eq!(
            filter.get(),
            50,
            "the peak of round 0 left the 10-round window"
        );
        filter.update(12, 70);
        assert_eq!(filter.get(), 70);
    }

    #[test]
    fn never_reports_more_than_the_true_windowed_maximum() {
        // Deterministic pseudo-random samples against the brute-force maximum.
        let mut filter = WindowedMax::new(10);
        let mut history: Vec<(u64, u64)> = Vec::new();
        let mut x: u64 = 0x2545_f491_4f6c_dd1d;
        for round in 0..2000u64 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let value = x % 1000;
            filter.update(round, value);
            history.push((round, value));
            let truth = history
                .iter()
                .filter(|(r, _)| round - r <= 10)
                .map(|(_, v)| *v)
                .max()
                .unwrap_or(0);
            let got = filter.get();
            assert!(got <= truth, "round {round}: {got} > windowed max {truth}");
            assert!(
                got >= value,
                "round {round}: {got} below the newest sample {value}"
            );
        }
    }
}
