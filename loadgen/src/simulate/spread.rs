//! A figure's spread: its median, its 99th percentile and its worst, as the benchmark records
//! them and the model measures them.

use serde::Serialize;

/// p50, p99 and max.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, serde::Deserialize)]
pub struct Spread {
    pub p50: f64,
    pub p99: f64,
    pub max: f64,
}

impl Spread {
    pub fn of(mut samples: Vec<f64>) -> Self {
        if samples.is_empty() {
            return Self::default();
        }
        samples.sort_by(f64::total_cmp);
        let rank = |q: f64| {
            samples[((samples.len() as f64 * q).ceil() as usize).clamp(1, samples.len()) - 1]
        };
        Self {
            p50: rank(0.5),
            p99: rank(0.99),
            max: samples[samples.len() - 1],
        }
    }
}
