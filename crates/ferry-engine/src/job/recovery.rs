//! Failures and restarts. In a job of several tables, a table's own fault
//! pauses that table. A fatal error ends the job at once, with advice. A
//! retryable one — the classification is [`EngineError::retry_hint`], a
//! connector's own hint — asks the restart strategy (waiting at least the
//! delay a hint asks for): the job
//! either fails ("restart strategy exhausted") or goes RESTARTING, a mode
//! of the coordinator (`stop`): its pipelines are dropped, every chain is
//! reset to the newest complete checkpoint (a transactional sink to
//! recover first), the coordinator's loop waits out the strategy's delay
//! (refusing every request but cancel), then new pipelines start from
//! there. A checkpoint failure counts against
//! `execution.checkpointing.tolerable-failed-checkpoints` first.
//!
//! Restoring from the newest complete checkpoint (not from the progress in
//! memory) is what Flink does, and it is safe for the same reason a
//! restore with `-s` is: the sink never holds changes from beyond the
//! window recorded there, and replaying part of that window is idempotent.

use super::coordinator::{Coordinator, Flow};
use crate::config::JobConfig;
use crate::connector::Tables;
use crate::error::{EngineError, RetryHint};
use crate::restart::{RestartBackoff, RestartDecision};
use crate::status::{ExceptionRecord, JobStatus};
use std::time::Duration;
use tokio::time::Instant;

/// The coordinator's part for failures: the restart strategy's state, and
/// a failure taken in while a checkpoint was prepared.
pub(super) struct Recovery {
    backoff: RestartBackoff,
    /// A pipeline failure taken in while a checkpoint was prepared
    /// (`commit`), to be acted on next.
    pub(super) deferred: Option<Flow>,
}

impl Recovery {
    /// The restart strategy of `config`, no failure yet.
    pub(super) fn new(config: &JobConfig) -> Self {
        Recovery {
            backoff: RestartBackoff::new(config.restart.strategy()),
            deferred: None,
        }
    }

    /// Keeps `flow` (a failure) for the loop, unless one is kept already.
    pub(super) fn defer(&mut self, flow: Flow) {
        self.deferred.get_or_insert(flow);
    }
}

impl<T: Tables> Coordinator<T> {
    /// A job failure: end the job, or restart it after a delay.
    pub(super) fn on_error(&mut self, error: EngineError) -> Flow {
        // With its causes: a connector's error says what it was doing, its
        // source why.
        let message = crate::error::display_chain(&error);
        let hint = error.retry_hint();
        if hint == RetryHint::Fatal {
            self.record_exception(&error, false);
            let error = match error.advice() {
                Some(advice) => format!("{message}. What to do: {advice}"),
                None => message,
            };
            return Flow::End(JobStatus::Failed { error });
        }
        let metrics = self.publisher.metrics.clone();
        match self.recovery.backoff.on_failure(Instant::now().into_std()) {
            RestartDecision::GiveUp(why) => {
                self.record_exception(&error, false);
                Flow::End(JobStatus::Failed {
                    error: format!(
                        "restart strategy exhausted after {} restart(s) ({why}); last failure: {message}",
                        metrics.snapshot().restarts
                    ),
                })
            }
            RestartDecision::RestartAfter(delay) => {
                // A connector that asked for a pause gets at least that.
                let delay = match hint {
                    RetryHint::After(at_least) => delay.max(at_least),
                    _ => delay,
                };
                self.record_exception(&error, true);
                tracing::warn!(
                    restart = metrics.snapshot().restarts + 1,
                    delay_ms = delay.as_millis() as u64,
                    cause = %message,
                    "job restarting"
                );
                metrics.went_down();
                Flow::Restart {
                    delay,
                    cause: message,
                }
            }
        }
    }

    /// A failure of table `i`: in a job of several tables, one of the
    /// table's own ([`EngineError::is_table_fault`]) pauses it and the
    /// others go on (`None`); anything else is the job's failure.
    pub(super) fn on_table_error(&mut self, i: usize, error: EngineError) -> Option<Flow> {
        match self.pause_on_table_fault(i, error) {
            Ok(()) => None,
            Err(error) => Some(self.on_error(error)),
        }
    }

    /// Pauses table `i` if `error` is its own fault in a job of several
    /// tables; else gives the error back.
    pub(super) fn pause_on_table_fault(
        &mut self,
        i: usize,
        error: EngineError,
    ) -> Result<(), EngineError> {
        if !(self.many_tables() && error.is_table_fault()) {
            return Err(error);
        }
        let text = crate::error::display_chain(&error);
        let message = match error.advice() {
            Some(advice) => format!("{text}. What to do: {advice}"),
            None => text,
        };
        let chain = &mut self.chains[i];
        tracing::error!(table = %chain.table.name, error = %message, "table paused; the job goes on with the other tables");
        chain.pause(message);
        self.show_table(i);
        // The job goes on: not a restart.
        self.record_exception(&error, false);
        Ok(())
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
        self.publisher.metrics.checkpoint_failed();
        let failed = self.checkpoints.failed();
        let tolerable = self.config.restart.tolerable_failed_checkpoints;
        if failed <= tolerable {
            tracing::warn!(
                error = %error,
                failed_in_a_row = failed,
                tolerable,
                "checkpoint failed"
            );
            return Flow::Continue;
        }
        self.checkpoints.forgive_failures();
        self.on_error(error)
    }

    fn record_exception(&self, error: &EngineError, restarted: bool) {
        self.publisher.exception(ExceptionRecord {
            timestamp_ms: crate::time::now_ms(),
            exception_name: error.kind_name().to_string(),
            message: crate::error::display_chain(error),
            restarted,
        });
    }

    /// Goes RESTARTING (the pipelines are gone already): a stop under way
    /// is answered, every chain is reset to the newest complete
    /// checkpoint (a transactional sink to recover first), and the loop
    /// waits `delay` (answering requests meanwhile) before it resumes.
    pub(super) fn restart(&mut self, delay: Duration, cause: String) {
        // A stop under way cannot write the savepoint it promised.
        self.mode.restart(Instant::now() + delay, cause);
        let states = self
            .checkpoints
            .last_complete
            .as_ref()
            .map(|s| s.table_states())
            .unwrap_or_default();
        // Failures seen while a checkpoint was prepared belong to the run
        // that ends here.
        self.recovery.deferred = None;
        for chain in &mut self.chains {
            chain.restart(super::chain::find_table(&states, &chain.table));
        }
        self.publish_metrics();
        self.publisher.status(self.mode.status());
    }

    /// The restart's delay is over: RUNNING again; new pipelines start on
    /// the next step.
    pub(super) fn resume(&mut self) {
        self.mode.resumed();
        self.publisher.metrics.came_up();
        self.publisher.status(self.mode.status());
        tracing::info!(
            restarts = self.publisher.metrics.snapshot().restarts,
            tables = self.chains.len(),
            "job running again from the newest complete checkpoint"
        );
    }
}
