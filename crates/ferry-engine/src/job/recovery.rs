//! Failures and restarts. A fatal error ends the job at once, with advice.
//! A transient one — the classification is [`EngineError::is_transient`],
//! which defers to the Kudu client's — asks the restart strategy: the job
//! either fails ("restart strategy exhausted") or goes RESTARTING: its
//! pipelines are dropped, the enumerator is reset to the newest complete
//! checkpoint, and after the strategy's delay new pipelines start from
//! there. A checkpoint failure counts against
//! `execution.checkpointing.tolerable-failed-checkpoints` first.
//!
//! Restoring from the newest complete checkpoint (not from the progress in
//! memory) is what Flink does, and it is safe for the same reason a
//! restore with `-s` is: the sink never holds changes from beyond the
//! window recorded there, and replaying part of that window is idempotent.

use super::coordinator::{Coordinator, Flow};
use super::handle::{Control, JobStatus, MAX_EXCEPTIONS};
use crate::connector::{Sink, Tables};
use crate::error::{ControlError, EngineError};
use crate::restart::RestartDecision;
use crate::status::ExceptionRecord;
use std::time::Duration;
use tokio::sync::mpsc;
use tokio::time::Instant;

impl<T: Tables> Coordinator<T> {
    /// A job failure: end the job, or restart it after a delay.
    pub(super) fn on_error(&mut self, error: EngineError) -> Flow {
        // With its causes: a connector's error says what it was doing, its
        // source why.
        let message = crate::error::display_chain(&error);
        if !error.is_transient() {
            self.record_exception(&error, false);
            let error = match error.advice() {
                Some(advice) => format!("{message}. What to do: {advice}"),
                None => message,
            };
            return Flow::End(JobStatus::Failed { error });
        }
        match self.backoff.on_failure(Instant::now().into_std()) {
            RestartDecision::GiveUp(why) => {
                self.record_exception(&error, false);
                Flow::End(JobStatus::Failed {
                    error: format!(
                        "restart strategy exhausted after {} restart(s) ({why}); last failure: {message}",
                        self.metrics.snapshot().restarts
                    ),
                })
            }
            RestartDecision::RestartAfter(delay) => {
                self.record_exception(&error, true);
                tracing::warn!(
                    restart = self.metrics.snapshot().restarts + 1,
                    delay_ms = delay.as_millis() as u64,
                    cause = %message,
                    "job restarting"
                );
                self.metrics.went_down();
                let _ = self.status.send(JobStatus::Restarting { cause: message });
                Flow::Restart(delay)
            }
        }
    }

    /// A failed checkpoint: tolerated up to the configured count in a row,
    /// then a job failure. Replication goes no further meanwhile: a new
    /// window opens only after a checkpoint recorded it.
    pub(super) fn on_checkpoint_failed(&mut self, error: EngineError) -> Flow {
        if let EngineError::Fenced(_) = error {
            return self.on_error(error);
        }
        if let EngineError::CheckpointSkipped = error {
            // Not the checkpoint's fault: the failure that stopped it is
            // handled next (`deferred`).
            tracing::debug!("checkpoint skipped: a pipeline failed meanwhile");
            return Flow::Continue;
        }
        self.metrics.checkpoint_failed();
        self.failed_checkpoints = self.failed_checkpoints.saturating_add(1);
        let tolerable = self.config.restart.tolerable_failed_checkpoints;
        if self.failed_checkpoints <= tolerable {
            tracing::warn!(
                error = %error,
                failed_in_a_row = self.failed_checkpoints,
                tolerable,
                "checkpoint failed"
            );
            return Flow::Continue;
        }
        self.failed_checkpoints = 0;
        self.on_error(error)
    }

    /// Records a table's failure that paused it (the job goes on).
    pub(super) fn record_table_exception(&self, error: &EngineError) {
        self.record_exception(error, false);
    }

    fn record_exception(&self, error: &EngineError, restarted: bool) {
        let record = ExceptionRecord {
            timestamp_ms: crate::time::now_ms(),
            exception_name: error.kind_name().to_string(),
            message: crate::error::display_chain(error),
            restarted,
        };
        if let Ok(mut list) = self.exceptions.lock() {
            list.push_front(record);
            list.truncate(MAX_EXCEPTIONS);
        }
    }

    /// Resets to the newest complete checkpoint, waits `delay` (answering
    /// requests meanwhile), and says RUNNING again; `Some` if the job ended
    /// instead (cancelled).
    pub(super) async fn restart(
        &mut self,
        delay: Duration,
        control: &mut mpsc::Receiver<Control>,
    ) -> Option<JobStatus> {
        // A stop under way cannot write the savepoint it promised.
        self.mode.interrupted();
        let states = self
            .last_complete
            .as_ref()
            .map(|s| s.table_states())
            .unwrap_or_default();
        // Failures seen while a checkpoint was prepared belong to the run
        // that ends here.
        self.deferred = None;
        for chain in &mut self.chains {
            chain.reset_to(super::chain::find_table(&states, &chain.table));
            // A transactional sink undoes what it did not commit, and may
            // be further than the checkpoint (committed, then the
            // checkpoint failed).
            if chain.sink.transactional() {
                chain.recover_sink = Some(chain.own_commit);
            }
        }
        self.publish_metrics();
        let resume_at = Instant::now() + delay;
        loop {
            tokio::select! {
                _ = tokio::time::sleep_until(resume_at) => break,
                ctl = control.recv() => match ctl {
                    None | Some(Control::Cancel) => return Some(JobStatus::Canceled),
                    Some(Control::Checkpoint { reply }) => {
                        let _ = reply.send(Err(ControlError::Restarting));
                    }
                    Some(Control::Savepoint { reply, .. }) | Some(Control::Stop { reply, .. }) => {
                        let _ = reply.send(Err(ControlError::Restarting));
                    }
                },
            }
        }
        self.metrics.came_up();
        let _ = self.status.send(JobStatus::Running);
        tracing::info!(
            restarts = self.metrics.snapshot().restarts,
            tables = self.chains.len(),
            "job running again from the newest complete checkpoint"
        );
        None
    }
}
