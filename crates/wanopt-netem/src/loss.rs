//! Random and bursty loss.

use rand::Rng;
use rand_chacha::ChaCha8Rng;

use crate::config::GilbertElliott;

/// The state of the loss models of one link direction.
#[derive(Debug, Clone)]
pub(crate) struct LossModel {
    bernoulli: f64,
    burst: Option<BurstLoss>,
}

#[derive(Debug, Clone)]
struct BurstLoss {
    model: GilbertElliott,
    bad: bool,
}

impl LossModel {
    pub(crate) fn new(bernoulli: f64, burst: Option<GilbertElliott>) -> LossModel {
        LossModel {
            bernoulli,
            burst: burst.map(|model| BurstLoss { model, bad: false }),
        }
    }

    /// Whether the next IP frame is lost. Draws only for the models that are
    /// configured; the burst chain steps once per frame.
    pub(crate) fn lose(&mut self, rng: &mut ChaCha8Rng) -> bool {
        let mut lost = false;
        if let Some(burst) = &mut self.burst {
            lost = burst.step(rng);
        }
        if self.bernoulli > 0.0 && rng.random::<f64>() < self.bernoulli {
            lost = true;
        }
        lost
    }
}

impl BurstLoss {
    fn step(&mut self, rng: &mut ChaCha8Rng) -> bool {
        let switch = if self.bad {
            self.model.bad_to_good
        } else {
            self.model.good_to_bad
        };
        if !switch.is_zero() && rng.random::<f64>() < switch.value() {
            self.bad = !self.bad;
        }
        let loss = if self.bad {
            self.model.loss_in_bad
        } else {
            self.model.loss_in_good
        };
        match loss.value() {
            0.0 => false,
            1.0 => true,
            p => rng.random::<f64>() < p,
        }
    }
}
