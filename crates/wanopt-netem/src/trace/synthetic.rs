//! Synthetic cellular traces: a capacity that wanders around a mean, with
//! radio outages, written as delivery opportunities.
//!
//! The rate's logarithm follows an Ornstein-Uhlenbeck process (a random walk
//! pulled back to its mean), stepped every 10 ms: `x += -θ·x·dt +
//! σ·√dt·N(0,1)`, and the rate is `mean · exp(x - σ²/4θ)`, so that its
//! long-run average is `mean` (the stationary variance of `x` is `σ²/2θ`).
//! Outages of a fixed length start at random (a Poisson process), and the
//! capacity is zero while one lasts. Recorded traces are what the lab's
//! figures rest on; a synthetic one is a reproducible stand-in with known
//! statistics, for tests and for machines without recorded traces.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::{DeliveryTrace, OPPORTUNITY_BYTES};
use crate::units::BitsPerSecond;

/// Step of the rate process, ms.
const STEP_MS: u32 = 10;

/// A synthetic cellular trace's parameters.
#[derive(Debug, Clone, PartialEq)]
pub struct CellularWalk {
    /// The long-run average rate.
    pub mean: BitsPerSecond,
    /// The trace's length (and period), ms.
    pub length_ms: u32,
    /// σ: how fast the log-rate wanders, per √second.
    pub volatility: f64,
    /// θ: how fast it is pulled back to the mean, per second.
    pub reversion: f64,
    /// Mean time between outages, ms (0: none).
    pub outage_every_ms: u32,
    /// How long an outage lasts, ms.
    pub outage_ms: u32,
    /// Seed of every random draw.
    pub seed: u64,
}

impl CellularWalk {
    /// A walk around `mean`, over `length_ms`, as the lab's cellular
    /// scenario draws it: σ 0.7, θ 0.5 (the rate mostly between a quarter
    /// and four times the mean, wandering over seconds) and an outage of
    /// 300 ms every 15 s on average.
    pub fn lab(mean: BitsPerSecond, length_ms: u32, seed: u64) -> CellularWalk {
        CellularWalk {
            mean,
            length_ms,
            volatility: 0.7,
            reversion: 0.5,
            outage_every_ms: 15_000,
            outage_ms: 300,
            seed,
        }
    }

    /// The trace. It always lasts `length_ms` (at least 1 ms): its last
    /// opportunity is at the end.
    pub fn generate(&self) -> DeliveryTrace {
        let mut rng = ChaCha8Rng::seed_from_u64(self.seed);
        let length_ms = self.length_ms.max(1);
        let dt = f64::from(STEP_MS) / 1000.0;
        let theta = self.reversion.max(1e-3);
        let sigma = self.volatility.max(0.0);
        let bias = sigma * sigma / (4.0 * theta);
        let per_ms_at_mean = self.mean.0 as f64 / 1000.0 / f64::from(OPPORTUNITY_BYTES * 8);
        let outage_chance = if self.outage_every_ms == 0 {
            0.0
        } else {
            f64::from(STEP_MS) / f64::from(self.outage_every_ms)
        };
        let mut x = 0.0f64;
        let mut outage_left_ms = 0u32;
        let mut credit = 0.0f64;
        let mut times = Vec::new();
        let mut ms = 0u32;
        while ms < length_ms {
            let step_end = (ms + STEP_MS).min(length_ms);
            if outage_left_ms == 0 && rng.random::<f64>() < outage_chance {
                outage_left_ms = self.outage_ms;
            }
            x += -theta * x * dt + sigma * dt.sqrt() * gaussian(&mut rng);
            let factor = (x - bias).exp().min(20.0);
            while ms < step_end {
                ms += 1;
                if outage_left_ms > 0 {
                    outage_left_ms -= 1;
                    continue;
                }
                credit += per_ms_at_mean * factor;
                while credit >= 1.0 {
                    credit -= 1.0;
                    times.push(ms);
                }
            }
        }
        if times.last() != Some(&length_ms) {
            times.push(length_ms);
        }
        // Never decreasing, never empty, ends above 0: always valid.
        DeliveryTrace::try_from(times).unwrap_or_else(|_| DeliveryTrace {
            times_ms: vec![length_ms],
        })
    }
}

/// A standard normal draw (Box-Muller).
fn gaussian(rng: &mut ChaCha8Rng) -> f64 {
    let u1: f64 = rng.random::<f64>().max(f64::MIN_POSITIVE);
    let u2: f64 = rng.random();
    (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_walk_averages_its_mean_and_moves() {
        let walk = CellularWalk::lab(BitsPerSecond(8_000_000), 600_000, 7);
        let trace = walk.generate();
        assert_eq!(trace.period_ms(), 600_000);
        let mean = trace.mean_rate().0 as f64 / 1e6;
        assert!((6.0..10.0).contains(&mean), "{mean}");
        let bins = trace.rate_series(1000, 600);
        let mut mbit: Vec<f64> = bins.iter().map(|r| r.0 as f64 / 1e6).collect();
        mbit.sort_by(f64::total_cmp);
        // A wide spread of one-second rates: a moving bottleneck.
        assert!(
            mbit[60] < 4.0 && mbit[540] > 14.0,
            "{} {}",
            mbit[60],
            mbit[540]
        );
        // Outages: 100 ms windows with no opportunity at all.
        let silent = trace
            .rate_series(100, 6000)
            .iter()
            .filter(|r| r.0 == 0)
            .count();
        assert!(silent >= 40, "{silent}");
    }

    #[test]
    fn the_same_seed_gives_the_same_trace() {
        let walk = CellularWalk::lab(BitsPerSecond(5_000_000), 10_000, 3);
        assert_eq!(walk.generate(), walk.generate());
        let other = CellularWalk {
            seed: 4,
            ..walk.clone()
        };
        assert_ne!(walk.generate(), other.generate());
        let still = CellularWalk {
            volatility: 0.0,
            outage_every_ms: 0,
            ..walk
        };
        // No randomness left: 5 Mbit/s is 5/12 of an opportunity per ms.
        let rate = still.generate().mean_rate().0;
        assert!((4_900_000..=5_100_000).contains(&rate), "{rate}");
    }
}
