//! The coordinator: one task that owns the enumerator and the pipelines,
//! opens windows, assigns splits, reacts to pipeline events and serves
//! requests, all from one loop, so each decision sees a consistent state.

use super::handle::{Control, Exceptions, History, JobStatus};
use super::stop::Mode;
use super::JobOptions;
use crate::checkpoint::{CheckpointStore, JobState, WindowState};
use crate::config::JobConfig;
use crate::connector::{Sink, Source};
use crate::enumerator::Enumerator;
use crate::error::{ControlError, EngineError};
use crate::metrics::JobMetrics;
use crate::pipeline::{spawn_worker, PipelineEvent, Worker};
use crate::restart::RestartBackoff;
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{mpsc, watch};
use tokio::time::{sleep_until, Instant, Interval};

/// The pipelines and which of them wait for a split. A restart drops
/// them all (and with them their events) and spawns new ones, so no event
/// of a pipeline from before the restart reaches the restored state.
pub(super) struct Workers {
    list: Vec<Worker>,
    /// Indexes of idle workers (popped from the end).
    pub(super) idle: Vec<usize>,
    /// Tells running pipelines to stop after their current batch.
    stop: watch::Sender<bool>,
    /// What the pipelines report.
    events: mpsc::UnboundedReceiver<PipelineEvent>,
}

impl Workers {
    /// No pipelines (while a restart waits).
    fn none() -> Self {
        let (_, events) = mpsc::unbounded_channel();
        Workers {
            list: Vec::new(),
            idle: Vec::new(),
            stop: watch::channel(false).0,
            events,
        }
    }

    /// Whether no pipeline is working on a split.
    pub(super) fn all_idle(&self) -> bool {
        self.idle.len() == self.list.len()
    }

    /// Makes every pipeline stop after its current batch.
    pub(super) fn stop(&self) {
        let _ = self.stop.send(true);
    }
}

impl Drop for Workers {
    fn drop(&mut self) {
        for w in &self.list {
            w.task.abort();
        }
    }
}

/// Whether the loop goes on.
pub(super) enum Flow {
    Continue,
    /// A transient failure: restart from the newest complete checkpoint
    /// after this delay.
    Restart(Duration),
    End(JobStatus),
}

pub(super) struct Coordinator<S: Source, K: Sink<S::Batch>> {
    pub(super) source: Arc<S>,
    pub(super) sink: Arc<K>,
    pub(super) store: CheckpointStore,
    pub(super) config: JobConfig,
    pub(super) options: JobOptions,
    pub(super) metrics: Arc<JobMetrics>,
    pub(super) history: History,
    pub(super) exceptions: Exceptions,
    pub(super) status: watch::Sender<JobStatus>,
    pub(super) enumerator: Enumerator,
    pub(super) next_checkpoint_id: u64,
    pub(super) window_opened: Option<Instant>,
    next_window_at: Instant,
    /// Whether the open window's boundaries are in a completed checkpoint.
    pub(super) window_durable: bool,
    /// The window this coordinator last recorded as the sink position.
    pub(super) position_for: Option<WindowState>,
    /// The window this coordinator opened and has not handed a split of
    /// out yet (nor restarted since): the sink holds none of its rows, so
    /// a sink time taken now is valid for its `last_end`.
    pub(super) fresh_window: Option<WindowState>,
    /// The sink time known for a `last_end`: (last_end, sink time).
    pub(super) sink_time: Option<(u64, u64)>,
    /// The state the job was started from, until the sink position was
    /// compared with it (`position`).
    pub(super) restored: Option<JobState>,
    /// Running, draining or stopping.
    pub(super) mode: Mode,
    /// The state of the newest complete checkpoint (or the restored one):
    /// what a restart continues from.
    pub(super) last_complete: Option<JobState>,
    /// Checkpoints failed in a row (`tolerable-failed-checkpoints`).
    pub(super) failed_checkpoints: u32,
    pub(super) backoff: RestartBackoff,
    /// Copies completed states to `job.stateReplicas`, if any.
    pub(super) replication: Option<crate::replication::Replication>,
}

impl<S: Source, K: Sink<S::Batch>> Coordinator<S, K> {
    pub(super) fn new(
        source: Arc<S>,
        sink: Arc<K>,
        store: CheckpointStore,
        config: JobConfig,
        options: JobOptions,
        restore: Option<JobState>,
        status: watch::Sender<JobStatus>,
    ) -> Self {
        // A start from a hybrid time is a chain whose last window ended
        // there: the same as a state between windows, except that the sink
        // position (another chain's) is not compared with it.
        let started_at = options.start_at.filter(|_| restore.is_none()).map(|t| {
            let mut state = JobState::new(
                options.job_id,
                crate::checkpoint::SnapshotKind::Checkpoint,
                0,
                config.table_name.clone(),
                config.source_master_addresses.clone(),
                config.sink_master_addresses.clone(),
            );
            state.last_end_timestamp = Some(t);
            tracing::info!(
                last_end = t,
                "starting with a diff window from the given hybrid time (no snapshot)"
            );
            state
        });
        let enumerator = match restore.as_ref().or(started_at.as_ref()) {
            Some(state) => Enumerator::restore(state),
            None => Enumerator::new(),
        };
        let metrics = Arc::new(JobMetrics::default());
        if let Some(end) = enumerator.last_end() {
            metrics.set_last_end(end);
        }
        let now = Instant::now();
        let backoff = RestartBackoff::new(config.restart.strategy());
        let replication = super::replicas::start_replication(&config, &store);
        Coordinator {
            source,
            sink,
            store,
            options,
            metrics,
            history: Arc::new(Mutex::new(Vec::new())),
            exceptions: Arc::new(Mutex::new(VecDeque::new())),
            status,
            enumerator,
            next_checkpoint_id: 1,
            window_opened: None,
            next_window_at: now,
            window_durable: false,
            position_for: None,
            fresh_window: None,
            sink_time: None,
            restored: restore.clone(),
            mode: Mode::Running,
            last_complete: restore.or(started_at),
            failed_checkpoints: 0,
            backoff,
            replication,
            config,
        }
    }

    pub(super) fn spawn_workers(&self) -> Workers {
        let (events_tx, events) = mpsc::unbounded_channel();
        let (stop, stop_rx) = watch::channel(false);
        let list: Vec<Worker> = (0..self.options.parallelism.max(1))
            .map(|i| {
                spawn_worker(
                    i,
                    self.source.clone(),
                    self.sink.clone(),
                    events_tx.clone(),
                    stop_rx.clone(),
                    self.metrics.clone(),
                    self.options.fence.clone(),
                )
            })
            .collect();
        let idle = (0..list.len()).rev().collect();
        Workers {
            list,
            idle,
            stop,
            events,
        }
    }

    /// Runs the job until it ends, publishes and returns how it ended.
    pub(super) async fn run(mut self, mut control: mpsc::Receiver<Control>) -> JobStatus {
        self.number_checkpoints_above_existing().await;
        let status = match self.prepare_sink(&mut control).await {
            Some(status) => status,
            None => self.replicate(&mut control).await,
        };
        self.mode.job_ended(&status);
        self.metrics.ended();
        match &status {
            JobStatus::Failed { error } => tracing::error!(%error, "job failed"),
            other => tracing::info!(status = ?other, "job ended"),
        }
        if let Some(replication) = self.replication.take() {
            replication
                .finish(super::replicas::REPLICA_FINISH_TIMEOUT)
                .await;
        }
        let _ = self.status.send(status.clone());
        status
    }

    /// A job that keeps its id across a takeover (or a restore) numbers its
    /// checkpoints above every `chk-<N>` already there and above the
    /// restored one, so "highest number" stays "newest".
    async fn number_checkpoints_above_existing(&mut self) {
        let restored = self.last_complete.as_ref().map_or(0, |s| s.checkpoint_id);
        let existing = match self.store.next_checkpoint_id(&self.options.job_id).await {
            Ok(n) => n,
            Err(e) => {
                tracing::warn!(error = %e, "cannot list earlier checkpoints of this job id");
                1
            }
        };
        self.next_checkpoint_id = existing.max(restored.saturating_add(1));
    }

    /// The window chain, until the job ends.
    async fn replicate(&mut self, control: &mut mpsc::Receiver<Control>) -> JobStatus {
        let mut workers = self.spawn_workers();
        let mut checkpoint_tick = tokio::time::interval(self.config.checkpointing_interval);
        checkpoint_tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        checkpoint_tick.tick().await;
        let mut savepoint_tick = super::replicas::periodic_timer(&self.config);
        // A restored window continues; record when it (re)started.
        if self.enumerator.window().is_some() {
            self.window_opened = Some(Instant::now());
        }
        let status = loop {
            let mut flow = self.step(&mut workers).await;
            if let Flow::Continue = flow {
                self.metrics.set_split_counts(self.enumerator.counts());
                self.publish_status();
                flow = self
                    .wait(
                        &mut workers,
                        control,
                        &mut checkpoint_tick,
                        &mut savepoint_tick,
                    )
                    .await;
            }
            match flow {
                Flow::Continue => {}
                Flow::End(status) => break status,
                Flow::Restart(delay) => {
                    // Dropping the pipelines aborts them mid-batch; what
                    // they wrote is replayed (idempotently) from the
                    // restored state.
                    workers = Workers::none();
                    if let Some(status) = self.restart(delay, control).await {
                        break status;
                    }
                    workers = self.spawn_workers();
                    checkpoint_tick.reset();
                }
            }
        };
        drop(workers);
        status
    }

    /// Publishes RUNNING or STOPPING as the mode says (a restart publishes
    /// RESTARTING itself).
    fn publish_status(&self) {
        let now = if self.mode.is_stopping() || self.mode.is_draining() {
            JobStatus::Stopping
        } else {
            JobStatus::Running
        };
        self.status.send_if_modified(|s| {
            let changed = *s != now;
            *s = now;
            changed
        });
    }

    /// What the coordinator does before it waits: stop at a window
    /// boundary if a stop is due, else open a window if one is due, make
    /// it durable, record it as the sink position, hand out splits.
    async fn step(&mut self, workers: &mut Workers) -> Flow {
        if self.mode.is_draining() && self.between_windows() {
            self.mode.drained(workers);
        }
        if self.mode.is_stopping() {
            if workers.all_idle() {
                // Every pipeline has stopped after a whole batch: the state
                // now records exactly what is in the sink.
                return Flow::End(self.finish_stop().await);
            }
            return Flow::Continue;
        }
        if self.mode.may_open_window(self.enumerator.last_end()) {
            if let Err(e) = self.maybe_open_window().await {
                return self.on_error(e);
            }
        }
        if self.enumerator.window().is_some() && !self.window_durable {
            // Splits are handed out only once this succeeded, so a failed
            // attempt is simply tried again on the next step.
            match self.checkpoint().await {
                Ok(_) => self.window_durable = true,
                Err(e) => return self.on_checkpoint_failed(e),
            }
        }
        if self.window_durable && !self.position_recorded() {
            // The sink must say it may hold this window's rows before it
            // holds any; like the checkpoint above, retried on the next
            // step until it succeeds.
            if let Err(e) = self.record_position().await {
                return self.on_checkpoint_failed(e);
            }
        }
        if self.window_durable && self.position_recorded() {
            self.assign(workers).await;
        }
        Flow::Continue
    }

    /// Waits for the next thing to do and does it.
    async fn wait(
        &mut self,
        workers: &mut Workers,
        control: &mut mpsc::Receiver<Control>,
        checkpoint_tick: &mut Interval,
        savepoint_tick: &mut Option<Interval>,
    ) -> Flow {
        // A drained window completes with a checkpoint right away.
        let drained = self.window_drained();
        let window_due = self.enumerator.window().is_none()
            && self.mode.may_open_window(self.enumerator.last_end());
        let drain_deadline = self.mode.drain_deadline();
        tokio::select! {
            event = workers.events.recv() => match event {
                Some(event) => return self.on_event(event, &mut workers.idle),
                None => return Flow::End(JobStatus::Failed { error: "pipelines vanished".into() }),
            },
            _ = checkpoint_tick.tick() => {
                if let Err(e) = self.checkpoint().await {
                    return self.on_checkpoint_failed(e);
                }
            }
            _ = super::replicas::periodic_tick(savepoint_tick) => self.periodic_savepoint().await,
            _ = std::future::ready(()), if drained => {
                if let Err(e) = self.checkpoint().await {
                    let flow = self.on_checkpoint_failed(e);
                    if let Flow::Continue = flow {
                        // Tolerated: try again soon, not in a busy loop.
                        tokio::time::sleep(Duration::from_millis(500)).await;
                    }
                    return flow;
                }
            }
            _ = sleep_until(self.next_window_at), if window_due => {}
            _ = sleep_until(drain_deadline.unwrap_or_else(Instant::now)), if drain_deadline.is_some() => {
                self.mode.drain_timed_out(&self.status);
            }
            ctl = control.recv() => return self.on_control(ctl, workers).await,
        }
        Flow::Continue
    }

    /// Serves one request (`None`: every handle is gone, so cancel).
    async fn on_control(&mut self, ctl: Option<Control>, workers: &Workers) -> Flow {
        match ctl {
            None | Some(Control::Cancel) => return Flow::End(JobStatus::Canceled),
            Some(Control::Checkpoint { reply }) => {
                let r = self.checkpoint().await.map_err(ControlError::from);
                let _ = reply.send(r);
            }
            Some(Control::Savepoint { dir, reply }) => {
                let _ = reply.send(self.savepoint(dir).await);
            }
            Some(Control::Stop { mode, reply }) => {
                let has_dir =
                    mode.savepoint_dir.is_some() || self.options.default_savepoint_dir.is_some();
                self.mode.request_stop(mode, reply, has_dir, workers);
            }
        }
        Flow::Continue
    }

    /// No window is open and the snapshot is done: the sink holds exactly
    /// the source as of the last completed window's end.
    fn between_windows(&self) -> bool {
        self.enumerator.window().is_none() && self.enumerator.last_end().is_some()
    }

    fn window_drained(&self) -> bool {
        let c = self.enumerator.counts();
        self.enumerator.window().is_some() && c.unassigned == 0 && c.pending == 0
    }

    async fn maybe_open_window(&mut self) -> Result<(), EngineError> {
        if self.enumerator.window().is_some() || Instant::now() < self.next_window_at {
            return Ok(());
        }
        let now = self.source.now().await?;
        let window = self.enumerator.next_window(now);
        if window.start_timestamp.is_some_and(|s| s >= now) {
            // The source clock has not moved past the last end yet.
            self.next_window_at = Instant::now() + Duration::from_millis(100);
            return Ok(());
        }
        let splits = self.source.plan(window).await?;
        tracing::info!(
            snapshot = window.is_snapshot(),
            start = ?window.start_timestamp,
            end = window.end_timestamp,
            splits = splits.len(),
            "window opened"
        );
        self.enumerator.open_window(window, splits)?;
        self.fresh_window = Some(window);
        self.window_durable = false;
        self.window_opened = Some(Instant::now());
        self.next_window_at = Instant::now() + self.config.discovery_interval;
        Ok(())
    }

    async fn assign(&mut self, workers: &mut Workers) {
        self.fresh_window = None;
        while let Some(&w) = workers.idle.last() {
            let Some(split) = self.enumerator.assign() else {
                break;
            };
            let id = split.split_id.clone();
            if workers.list[w].splits.send(split).await.is_err() {
                // The worker is gone; put the split back and stop assigning.
                let _ = self.enumerator.give_back(&id);
                break;
            }
            workers.idle.pop();
        }
    }

    fn on_event(&mut self, event: PipelineEvent, idle: &mut Vec<usize>) -> Flow {
        match event {
            PipelineEvent::Progress {
                split_id,
                resume_key,
            } => {
                if let Err(e) = self.enumerator.progress(&split_id, resume_key) {
                    tracing::warn!(error = %e, "progress for an unknown split");
                }
            }
            PipelineEvent::Finished { worker, split_id } => {
                idle.push(worker);
                if let Err(e) = self.enumerator.finished(&split_id) {
                    return Flow::End(JobStatus::Failed {
                        error: e.to_string(),
                    });
                }
            }
            PipelineEvent::Stopped { worker, split_id } => {
                tracing::debug!(%split_id, "split stopped for a savepoint");
                idle.push(worker);
            }
            PipelineEvent::Failed {
                worker,
                split_id,
                error,
            } => {
                idle.push(worker);
                tracing::debug!(%split_id, "split failed");
                return self.on_error(error);
            }
        }
        Flow::Continue
    }
}
