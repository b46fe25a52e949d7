//! Random loss processes.

use rand::Rng;
use rand_chacha::ChaCha8Rng;

use crate::config::LossConfig;

/// State of a loss process (the Gilbert-Elliott chain remembers its state).
#[derive(Debug, Clone, Default)]
pub(crate) struct LossState {
    in_bad_state: bool,
}

impl LossState {
    /// Decides whether the next packet is lost, then advances the chain.
    pub(crate) fn lose_next(&mut self, config: &LossConfig, rng: &mut ChaCha8Rng) -> bool {
        match *config {
            LossConfig::Bernoulli { p } => p > 0.0 && rng.random::<f64>() < p,
            LossConfig::GilbertElliott { p, r, loss_good, loss_bad } => {
                let loss_probability = if self.in_bad_state { loss_bad } else { loss_good };
                let lost = loss_probability > 0.0 && rng.random::<f64>() < loss_probability;
                let switch_probability = if self.in_bad_state { r } else { p };
                if rng.random::<f64>() < switch_probability {
                    self.in_bad_state = !self.in_bad_state;
                }
                lost
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    fn run(config: LossConfig, n: usize, seed: u64) -> Vec<bool> {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let mut state = LossState::default();
        (0..n).map(|_| state.lose_next(&config, &mut rng)).collect()
    }

    #[test]
    fn bernoulli_rate_converges() {
        for p in [0.001, 0.01, 0.025, 0.1] {
            let n = 400_000;
            let lost = run(LossConfig::Bernoulli { p }, n, 7).iter().filter(|&&l| l).count();
            let rate = lost as f64 / n as f64;
            let sd = (p * (1.0 - p) / n as f64).sqrt();
            assert!((rate - p).abs() < 4.0 * sd, "p={p} measured {rate}");
        }
        assert!(!run(LossConfig::Bernoulli { p: 0.0 }, 10_000, 1).contains(&true));
    }

    #[test]
    fn gilbert_elliott_burst_length_and_rate() {
        let (p, r) = (0.01, 0.25);
        let config = LossConfig::GilbertElliott { p, r, loss_good: 0.0, loss_bad: 1.0 };
        let outcome = run(config, 2_000_000, 11);
        let mut bursts = Vec::new();
        let mut current = 0usize;
        for &lost in &outcome {
            if lost {
                current += 1;
            } else if current > 0 {
                bursts.push(current);
                current = 0;
            }
        }
        let mean_burst = bursts.iter().sum::<usize>() as f64 / bursts.len() as f64;
        assert!((mean_burst - 1.0 / r).abs() < 0.1, "mean burst {mean_burst}, expected {}", 1.0 / r);
        let rate = outcome.iter().filter(|&&l| l).count() as f64 / outcome.len() as f64;
        let expected = p / (p + r);
        assert!((rate - expected).abs() < 0.003, "rate {rate}, expected {expected}");
    }
}
