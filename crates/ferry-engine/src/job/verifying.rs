//! Continuous verify's turns ([`crate::verify`]): every interval / tables
//! the next table (round robin) is verified at its newest cut — its last
//! window end and that end's sink time, known from the window's opening —
//! by the job's [`crate::verify::Verifier`], in a task of its own so the
//! job's loop never waits for it. One verification at a time; a table
//! whose cut is not known yet (its first window, or a resumed one) waits
//! for its next turn. The running verification is stopped with the job.

use super::coordinator::{Coordinator, Src};
use super::JobOptions;
use crate::config::JobConfig;
use crate::connector::{Sink, Source, Tables};
use crate::verify::{VerifierHandle, VerifyRequest};
use std::time::Duration;
use tokio::task::JoinHandle;
use tokio::time::Instant;

/// Continuous verify's schedule.
pub(super) struct Verifying {
    verifier: Option<VerifierHandle>,
    interval: Option<Duration>,
    repair: bool,
    next_at: Instant,
    /// The chain whose turn is next.
    turn: usize,
    running: Option<JoinHandle<()>>,
}

impl Verifying {
    /// Off unless `job.verifyInterval` is set and the binary gave a
    /// verifier.
    pub(super) fn new(config: &JobConfig, options: &JobOptions) -> Self {
        Verifying {
            verifier: options.verifier.clone(),
            interval: config.verify_interval,
            repair: config.verify_repair,
            next_at: Instant::now() + config.verify_interval.unwrap_or_default(),
            turn: 0,
            running: None,
        }
    }

    /// When the next turn is due; `None`: off, or a verification still
    /// runs.
    pub(super) fn due(&self) -> Option<Instant> {
        self.verifier.as_ref()?;
        self.interval?;
        match &self.running {
            Some(task) if !task.is_finished() => None,
            _ => Some(self.next_at),
        }
    }
}

impl Drop for Verifying {
    fn drop(&mut self) {
        // A verification (and its repair) never outlives its job.
        if let Some(task) = self.running.take() {
            task.abort();
        }
    }
}

impl<T: Tables> Coordinator<T> {
    /// Starts the next table's verification, if its cut is known.
    pub(super) fn verify_turn(&mut self) {
        let v = &mut self.verifying;
        let (Some(verifier), Some(interval)) = (v.verifier.clone(), v.interval) else {
            return;
        };
        let n = self.chains.len().max(1);
        v.next_at = Instant::now() + interval / u32::try_from(n).unwrap_or(u32::MAX);
        let i = v.turn % n;
        v.turn = (i + 1) % n;
        let Some(chain) = self.chains.get(i).filter(|c| c.active()) else {
            return;
        };
        let Some((source_time, sink_time)) = chain.sink_time else {
            tracing::debug!(table = %chain.table.name, "no cut known yet: verified at its next turn");
            return;
        };
        // A fenced instance repairs nothing (it writes nothing).
        let repair = v.repair && self.options.fence.check().is_ok();
        let request = VerifyRequest {
            source_table: chain.table.name.clone(),
            sink_table: chain.sink.name(),
            source_time,
            sink_time,
            repair,
        };
        let metrics = chain.metrics.clone();
        let cut_ms = <Src<T> as Source>::CLOCK.epoch_millis(source_time);
        v.running = Some(tokio::spawn(async move {
            match verifier.0.verify(&request).await {
                Ok(found) => {
                    if found.differences > 0 {
                        tracing::warn!(table = %request.source_table, sink = %request.sink_table, source_time = %source_time, sink_time = %sink_time, differences = found.differences, repaired = found.repaired, "continuous verify found differences");
                    } else {
                        tracing::info!(table = %request.source_table, source_time = %source_time, rows = found.rows_compared, "continuous verify: equal");
                    }
                    metrics.verified(cut_ms, Some(found));
                }
                Err(e) => {
                    tracing::warn!(table = %request.source_table, error = %e, "continuous verify failed; tried again at the table's next turn");
                    metrics.verified(cut_ms, None);
                }
            }
        }));
    }
}
