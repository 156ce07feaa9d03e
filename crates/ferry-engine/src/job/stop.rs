//! The coordinator's mode: running, stopping (with or without drain) or
//! restarting. A plain stop tells the pipelines to stop after their
//! current batch and writes the savepoint once all are idle. A stop with
//! drain first keeps the job running without opening new windows; when the
//! open window has completed (its splits flushed and the checkpoint that
//! completes it written), it becomes a plain stop with no split in
//! progress. A restart drops the pipelines and waits out the restart
//! strategy's delay, refusing every request but cancel. Every transition
//! happens in the coordinator's loop, so no window opens between "the
//! window is done" and "stop".

use super::coordinator::Coordinator;
use super::handle::{Reply, StopMode};
use super::publish::Publisher;
use super::workers::Workers;
use crate::checkpoint::StorageLocation;
use crate::connector::{Source, Tables};
use crate::error::ControlError;
use crate::status::JobStatus;
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
    /// A transient failure (`cause`) dropped the pipelines and reset the
    /// chains to the newest complete checkpoint; new pipelines start at
    /// `resume_at`. Requests but cancel are refused meanwhile.
    Restarting { resume_at: Instant, cause: String },
}

impl Mode {
    pub(super) fn is_draining(&self) -> bool {
        matches!(self, Mode::Draining { .. })
    }

    pub(super) fn is_stopping(&self) -> bool {
        matches!(self, Mode::Stopping { .. })
    }

    pub(super) fn is_restarting(&self) -> bool {
        matches!(self, Mode::Restarting { .. })
    }

    /// The status this mode shows.
    pub(super) fn status(&self) -> JobStatus {
        match self {
            Mode::Running => JobStatus::Running,
            Mode::Draining { .. } | Mode::Stopping { .. } => JobStatus::Stopping,
            Mode::Restarting { cause, .. } => JobStatus::Restarting {
                cause: cause.clone(),
            },
        }
    }

    /// Why a checkpoint, savepoint or stop request is refused in this
    /// mode, if it is (cancel never is).
    pub(super) fn refusal(&self) -> Option<ControlError> {
        self.is_restarting().then_some(ControlError::Restarting)
    }

    /// Whether a window may open, given the last completed window's end.
    pub(super) fn may_open_window(&self, last_end: Option<crate::time::SourceTime>) -> bool {
        match self {
            Mode::Running => true,
            // Drain means "stop between windows", and there is no
            // between before the snapshot has completed.
            Mode::Draining { .. } => last_end.is_none(),
            Mode::Stopping { .. } | Mode::Restarting { .. } => false,
        }
    }

    /// Whether checkpoints and periodic savepoints are taken on their
    /// timers (not while the pipelines are gone).
    pub(super) fn takes_checkpoints(&self) -> bool {
        !self.is_restarting()
    }

    /// Whether the source is asked for new, renamed and dropped tables.
    pub(super) fn discovers_tables(&self) -> bool {
        matches!(self, Mode::Running | Mode::Draining { .. })
    }

    /// When a restart's delay is over.
    pub(super) fn resume_at(&self) -> Option<Instant> {
        match self {
            Mode::Restarting { resume_at, .. } => Some(*resume_at),
            _ => None,
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
            restarting @ Mode::Restarting { .. } => {
                *self = restarting;
                let _ = reply.send(Err(ControlError::Restarting));
                return;
            }
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
    pub(super) fn drain_timed_out(&mut self, publisher: &Publisher) {
        if let Mode::Draining {
            request, timeout, ..
        } = std::mem::take(self)
        {
            tracing::warn!(?timeout, "drain gave up; the job keeps running");
            // RUNNING again before the requester hears of it, so it never
            // sees the STOPPING of a drain that is over.
            publisher.status(self.status());
            let _ = request.reply.send(Err(ControlError::DrainTimeout(timeout)));
        }
    }

    /// A transient failure: the job restarts at `resume_at`. A requested
    /// stop cannot complete: the requester learns it and may ask again
    /// once the job runs.
    pub(super) fn restart(&mut self, resume_at: Instant, cause: String) {
        if let Mode::Draining { request, .. } | Mode::Stopping { request } = std::mem::take(self) {
            let _ = request.reply.send(Err(ControlError::Restarting));
        }
        *self = Mode::Restarting { resume_at, cause };
    }

    /// The restart's delay is over: running again.
    pub(super) fn resumed(&mut self) {
        if self.is_restarting() {
            *self = Mode::Running;
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
        self.discovery.built()
            && self.chains.iter().any(|c| c.active())
            && self
                .chains
                .iter()
                .filter(|c| c.active())
                .all(|c| c.between_windows() && c.source.exhausted(c.cursor.as_ref()))
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::time::SourceTime;
    use tokio::sync::oneshot;

    fn stop(mode: &mut Mode, drain: bool) -> oneshot::Receiver<Result<String, ControlError>> {
        let (reply, answer) = oneshot::channel();
        let dir = Some(StorageLocation::parse("/mem/sp").expect("dir"));
        let request = match drain {
            true => StopMode::drain(dir, Duration::from_secs(60)),
            false => StopMode::savepoint(dir),
        };
        mode.request_stop(request, reply, true, &Workers::<(), ()>::none());
        answer
    }

    #[tokio::test]
    async fn a_restart_answers_the_stop_under_way_and_refuses_requests_until_it_resumes() {
        for drain in [true, false] {
            let mut mode = Mode::Running;
            assert!(mode.refusal().is_none());
            let mut answer = stop(&mut mode, drain);
            assert_eq!(mode.status(), JobStatus::Stopping);
            let resume_at = Instant::now() + Duration::from_secs(5);
            mode.restart(resume_at, "timed out".into());
            assert!(
                matches!(answer.try_recv(), Ok(Err(ControlError::Restarting))),
                "the stop's requester learns of the restart (drain: {drain})"
            );
            assert_eq!(
                mode.status(),
                JobStatus::Restarting {
                    cause: "timed out".into()
                }
            );
            assert!(matches!(mode.refusal(), Some(ControlError::Restarting)));
            assert_eq!(mode.resume_at(), Some(resume_at));
            assert!(
                !mode.may_open_window(None)
                    && !mode.may_open_window(Some(SourceTime::from_raw(10)))
            );
            assert!(!mode.takes_checkpoints() && !mode.discovers_tables());
            // A stop asked meanwhile is refused and leaves the restart be.
            let mut again = stop(&mut mode, drain);
            assert!(matches!(
                again.try_recv(),
                Ok(Err(ControlError::Restarting))
            ));
            assert!(mode.is_restarting());
            mode.resumed();
            assert_eq!(mode.status(), JobStatus::Running);
            assert!(mode.resume_at().is_none() && mode.refusal().is_none());
            assert!(
                mode.may_open_window(Some(SourceTime::from_raw(10))) && mode.takes_checkpoints()
            );
        }
    }

    #[tokio::test]
    async fn a_drain_opens_no_window_after_the_snapshot_and_stops_between_windows() {
        let mut mode = Mode::Running;
        let mut answer = stop(&mut mode, true);
        assert!(mode.is_draining() && mode.discovers_tables());
        assert!(mode.may_open_window(None), "the snapshot first");
        assert!(!mode.may_open_window(Some(SourceTime::from_raw(10))));
        mode.drained(&Workers::<(), ()>::none());
        assert!(mode.is_stopping() && !mode.discovers_tables());
        assert!(!mode.may_open_window(None));
        assert!(answer.try_recv().is_err(), "answered by the savepoint");
    }
}
