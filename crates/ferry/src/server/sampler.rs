//! Once a second, a job's metrics are sampled into a ring buffer: the lag
//! history the web page draws (the sawtooth of now − lastEndTimestamp) and
//! the records-per-second rates exported as Flink's
//! `numRecordsOutPerSecond` / `numRecordsInPerSecond` meters.

use crate::api::live::Rates;
use ferry_engine::metrics::{JobMetrics, MetricsSnapshot};
use ferry_engine::time::now_ms;
use serde::Serialize;
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// Samples kept: ten minutes at one a second.
const CAPACITY: usize = 600;
/// Flink's meters average over 60 seconds.
pub const METER_SPAN_MS: u64 = 60_000;

/// One sample.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Sample {
    /// Wall clock, epoch ms.
    pub t: u64,
    /// now − lastEndTimestamp in ms; `None` before the first window ended.
    pub lag_ms: Option<u64>,
    /// Rows read so far (for rates).
    #[serde(skip)]
    pub rows_read: u64,
    /// Rows written so far (for rates).
    #[serde(skip)]
    pub rows_written: u64,
    /// Splits being read.
    pub pending: u64,
    /// Splits not yet handed out.
    pub unassigned: u64,
    /// Splits of tablets that went away.
    pub pending_removal: u64,
}

impl Sample {
    fn of(t: u64, m: &MetricsSnapshot) -> Self {
        Sample {
            t,
            lag_ms: (m.last_end_timestamp_ms > 0)
                .then(|| t.saturating_sub(m.last_end_timestamp_ms)),
            rows_read: m.rows_read,
            rows_written: m.rows_upserted + m.rows_deleted,
            pending: m.pending_count,
            unassigned: m.unassigned_count,
            pending_removal: m.pending_removal_count,
        }
    }
}

/// The sampler of one job.
#[derive(Debug)]
pub struct Sampler {
    metrics: Arc<JobMetrics>,
    samples: Mutex<VecDeque<Sample>>,
}

impl Sampler {
    /// Samples `metrics`.
    pub fn new(metrics: Arc<JobMetrics>) -> Self {
        Sampler {
            metrics,
            samples: Mutex::new(VecDeque::with_capacity(CAPACITY)),
        }
    }

    /// Takes one sample now.
    pub fn sample_once(&self) {
        let s = Sample::of(now_ms(), &self.metrics.snapshot());
        let mut q = self.samples.lock().unwrap_or_else(|e| e.into_inner());
        if q.len() == CAPACITY {
            q.pop_front();
        }
        q.push_back(s);
    }

    /// Samples every second until `stop`.
    pub fn spawn(self: Arc<Self>, stop: CancellationToken) {
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_secs(1));
            loop {
                tokio::select! {
                    _ = tick.tick() => self.sample_once(),
                    _ = stop.cancelled() => return,
                }
            }
        });
    }

    /// The samples of the last `span_ms`, oldest first.
    pub fn history(&self, span_ms: u64) -> Vec<Sample> {
        let q = self.samples.lock().unwrap_or_else(|e| e.into_inner());
        let from = now_ms().saturating_sub(span_ms);
        q.iter().filter(|s| s.t >= from).copied().collect()
    }

    /// Average rates over the last `span_ms` (or since the first sample).
    pub fn rates(&self, span_ms: u64) -> Rates {
        let q = self.samples.lock().unwrap_or_else(|e| e.into_inner());
        let Some(last) = q.back() else {
            return Rates::default();
        };
        let from = last.t.saturating_sub(span_ms);
        let Some(first) = q.iter().find(|s| s.t >= from) else {
            return Rates::default();
        };
        let secs = (last.t.saturating_sub(first.t)) as f64 / 1000.0;
        if secs <= 0.0 {
            return Rates::default();
        }
        Rates {
            records_out_per_second: last.rows_read.saturating_sub(first.rows_read) as f64 / secs,
            records_in_per_second: last.rows_written.saturating_sub(first.rows_written) as f64
                / secs,
        }
    }
}
