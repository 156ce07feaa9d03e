//! Stopping as a mode of the coordinator. A plain stop tells the pipelines
//! to stop after their current batch and writes the savepoint once all are
//! idle. A stop with drain first keeps the job running without opening new
//! windows; when the open window has completed (its splits flushed and the
//! checkpoint that completes it written), it becomes a plain stop with no
//! split in progress. Every transition happens in the coordinator's loop,
//! so no window opens between "the window is done" and "stop".

use super::coordinator::{Coordinator, Workers};
use super::handle::{JobStatus, Reply, StopMode};
use crate::checkpoint::StorageLocation;
use crate::connector::{Source, Tables};
use crate::error::ControlError;
use std::time::Duration;
use tokio::time::Instant;

/// A stop someone is waiting for.
pub(super) struct StopRequest {
    dir: Option<StorageLocation>,
    reply: Reply<String>,
    drain: bool,
}

/// The coordinator's mode.
#[derive(Default)]
pub(super) enum Mode {
    /// Windows open and complete as configured.
    #[default]
    Running,
    /// Stop with drain: the open window completes, no new one opens
    /// (except the first snapshot, which a drain waits for).
    Draining {
        request: StopRequest,
        deadline: Instant,
        timeout: Duration,
    },
    /// Pipelines stop after their current batch; then the savepoint.
    Stopping { request: StopRequest },
}

impl Mode {
    pub(super) fn is_draining(&self) -> bool {
        matches!(self, Mode::Draining { .. })
    }

    pub(super) fn is_stopping(&self) -> bool {
        matches!(self, Mode::Stopping { .. })
    }

    /// Whether a window may open, given the last completed window's end.
    pub(super) fn may_open_window(&self, last_end: Option<crate::time::SourceTime>) -> bool {
        match self {
            Mode::Running => true,
            // Drain means "stop between windows", and there is no
            // between before the snapshot has completed.
            Mode::Draining { .. } => last_end.is_none(),
            Mode::Stopping { .. } => false,
        }
    }

    /// When a drain gives up.
    pub(super) fn drain_deadline(&self) -> Option<Instant> {
        match self {
            Mode::Draining { deadline, .. } => Some(*deadline),
            _ => None,
        }
    }

    /// A stop request arrived.
    pub(super) fn request_stop<S, K>(
        &mut self,
        mode: StopMode,
        reply: Reply<String>,
        has_dir: bool,
        workers: &Workers<S, K>,
    ) {
        if !has_dir {
            let _ = reply.send(Err(ControlError::NoSavepointDirectory));
            return;
        }
        match std::mem::take(self) {
            Mode::Running => {}
            // A plain stop overrides a drain (that waits too long for
            // the operator); the drain's requester learns why it ended.
            Mode::Draining { request, .. } if !mode.drain => {
                let _ = request.reply.send(Err(ControlError::DrainOverridden));
            }
            busy => {
                *self = busy;
                let _ = reply.send(Err(ControlError::AlreadyStopping));
                return;
            }
        }
        let request = StopRequest {
            dir: mode.savepoint_dir,
            reply,
            drain: mode.drain,
        };
        if mode.drain {
            tracing::info!(timeout = ?mode.drain_timeout, "draining: the open window completes, no new one opens");
            *self = Mode::Draining {
                request,
                deadline: Instant::now() + mode.drain_timeout,
                timeout: mode.drain_timeout,
            };
        } else {
            workers.stop();
            *self = Mode::Stopping { request };
        }
    }

    /// The drain reached a window boundary: stop now.
    pub(super) fn drained<S, K>(&mut self, workers: &Workers<S, K>) {
        if let Mode::Draining { request, .. } = std::mem::take(self) {
            tracing::info!("drained: the open window completed; stopping");
            workers.stop();
            *self = Mode::Stopping { request };
        }
    }

    /// The drain took too long: the request fails, the job runs on.
    pub(super) fn drain_timed_out(&mut self, status: &tokio::sync::watch::Sender<JobStatus>) {
        if let Mode::Draining {
            request, timeout, ..
        } = std::mem::take(self)
        {
            tracing::warn!(?timeout, "drain gave up; the job keeps running");
            // RUNNING again before the requester hears of it, so it never
            // sees the STOPPING of a drain that is over.
            status.send_replace(JobStatus::Running);
            let _ = request.reply.send(Err(ControlError::DrainTimeout(timeout)));
        }
    }

    /// A failure made the job restart before a requested stop completed:
    /// the requester learns it and may ask again once the job runs.
    pub(super) fn interrupted(&mut self) {
        if let Mode::Draining { request, .. } | Mode::Stopping { request } = std::mem::take(self) {
            let _ = request.reply.send(Err(ControlError::Restarting));
        }
    }

    /// The job ended before a requested stop completed.
    pub(super) fn job_ended(&mut self, status: &JobStatus) {
        if let Mode::Draining { request, .. } | Mode::Stopping { request } = std::mem::take(self) {
            let _ = request.reply.send(Err(ControlError::EndedWhileStopping {
                status: status.flink_name(),
                drain: request.drain,
            }));
        }
    }
}

impl<T: Tables> Coordinator<T> {
    /// Every pipeline is idle: writes the final savepoint and answers the
    /// stop request; the job ends FINISHED, or FAILED if that failed.
    pub(super) async fn finish_stop(
        &mut self,
        workers: &mut super::coordinator::JobWorkers<T>,
    ) -> JobStatus {
        let Mode::Stopping { request } = std::mem::take(&mut self.mode) else {
            return JobStatus::Failed {
                error: "internal error: stopping without a stop request".into(),
            };
        };
        match self.savepoint(request.dir, workers).await {
            Ok(path) => {
                let _ = request.reply.send(Ok(path.clone()));
                JobStatus::Finished { savepoint: path }
            }
            Err(e) => {
                let error = e.to_string();
                let _ = request.reply.send(Err(e));
                JobStatus::Failed { error }
            }
        }
    }

    /// Every table's source is exhausted (bounded, read to its end) and
    /// its last window completed; paused tables do not count, but at least
    /// one table runs.
    pub(super) fn sources_exhausted(&self) -> bool {
        self.built
            && self.chains.iter().any(|c| c.active())
            && self
                .chains
                .iter()
                .filter(|c| c.active())
                .all(|c| c.between_windows() && c.source.exhausted())
    }

    /// Ends a job whose sources are exhausted: a final checkpoint (which a
    /// later `-s` can resume, ending at once), then FINISHED with its path.
    pub(super) async fn finish_bounded(
        &mut self,
        workers: &mut super::coordinator::JobWorkers<T>,
    ) -> super::coordinator::Flow {
        match self.checkpoint(workers).await {
            Ok((id, path)) => {
                tracing::info!(checkpoint = id, %path, "every source read to its bounded end; the job finished");
                super::coordinator::Flow::End(JobStatus::Finished { savepoint: path })
            }
            // Tolerated failures try again on the next step.
            Err(e) => self.on_checkpoint_failed(e),
        }
    }
}
