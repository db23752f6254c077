//! Random early detection on the instantaneous backlog (see
//! [`crate::config::RedParams`] for the variant and why).

use rand::Rng;
use rand_chacha::ChaCha8Rng;

use crate::config::RedParams;

/// RED thresholds resolved against a queue limit.
#[derive(Debug, Clone)]
pub(crate) struct Red {
    min: f64,
    max: f64,
    max_probability: f64,
}

impl Red {
    /// Thresholds for a queue whose limit is `limit` (bytes or packets).
    pub(crate) fn new(params: RedParams, limit: u64) -> Red {
        let limit = limit as f64;
        let min = limit * params.min_threshold.clamp(0.0, 1.0);
        Red {
            min,
            max: (limit * params.max_threshold.clamp(0.0, 1.0)).max(min),
            max_probability: params.max_probability.clamp(0.0, 1.0),
        }
    }

    /// Whether a frame arriving to a backlog of `backlog` (in the limit's
    /// unit, before this frame) should be marked, or dropped if it is not
    /// ECN-capable. Draws a random number only between the thresholds.
    pub(crate) fn congested(&self, backlog: u64, rng: &mut ChaCha8Rng) -> bool {
        let backlog = backlog as f64;
        if backlog < self.min {
            return false;
        }
        if backlog >= self.max {
            return true;
        }
        let probability = self.max_probability * (backlog - self.min) / (self.max - self.min);
        rng.random::<f64>() < probability
    }
}

#[cfg(test)]
mod tests {
    use rand::SeedableRng;

    use super::*;

    #[test]
    fn probability_ramps_between_the_thresholds() {
        let red = Red::new(RedParams::default(), 1000);
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        assert!(!red.congested(249, &mut rng));
        assert!(red.congested(750, &mut rng));
        assert!(red.congested(999, &mut rng));
        // Half-way, the probability is max_p / 2 = 5%.
        let marks = (0..100_000)
            .filter(|_| red.congested(500, &mut rng))
            .count();
        assert!((4_700..5_300).contains(&marks), "{marks}");
    }
}
