//! The bulk-load drill of `bench/run lag --burst-seconds B`: the writer at
//! twice its rate for B seconds from `--burst-at` on, then back; the lag
//! before, during and after it.

use super::Sample;
use crate::report::percentile;
use serde::Serialize;
use std::time::Duration;

/// When the writer doubles its rate, from its start.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Burst {
    pub at_s: u64,
    pub seconds: u64,
}

impl Burst {
    /// The burst as the writer's pace takes it.
    pub fn span(&self) -> (Duration, Duration) {
        (
            Duration::from_secs(self.at_s),
            Duration::from_secs(self.seconds),
        )
    }

    fn end_s(&self) -> f64 {
        (self.at_s + self.seconds) as f64
    }
}

/// The lag around a burst, from the samples taken while writing.
#[derive(Debug, Clone, Serialize)]
pub struct BurstFigures {
    pub burst: Burst,
    /// Before the burst (from 10 s after the writer started).
    pub steady_p99_ms: f64,
    pub during_p99_ms: f64,
    pub during_max_ms: f64,
    /// From 60 s after the burst ended to the writer's end.
    pub after_60s_p99_ms: f64,
    /// Seconds from the burst's end to the first sample at or below the
    /// steady p99 (`None`: none was).
    pub back_to_steady_after_s: Option<f64>,
}

fn p99(samples: &[&Sample]) -> f64 {
    let mut v: Vec<f64> = samples.iter().map(|s| s.lag_ms).collect();
    v.sort_by(|a, b| a.total_cmp(b));
    percentile(&v, 99.0)
}

/// The figures of `burst` from `samples`.
pub fn figures(burst: Burst, samples: &[Sample]) -> BurstFigures {
    let writing: Vec<&Sample> = samples.iter().filter(|s| s.writing).collect();
    let between = |from: f64, to: f64| -> Vec<&Sample> {
        writing
            .iter()
            .copied()
            .filter(|s| s.t_s >= from && s.t_s < to)
            .collect()
    };
    let end = burst.end_s();
    let steady = p99(&between(10.0, burst.at_s as f64));
    let during = between(burst.at_s as f64, end);
    let back = writing
        .iter()
        .find(|s| s.t_s >= end && s.lag_ms <= steady)
        .map(|s| s.t_s - end);
    BurstFigures {
        burst,
        steady_p99_ms: steady,
        during_p99_ms: p99(&during),
        during_max_ms: during.iter().map(|s| s.lag_ms).fold(f64::NAN, f64::max),
        after_60s_p99_ms: p99(&between(end + 60.0, f64::INFINITY)),
        back_to_steady_after_s: back,
    }
}
