//! The coordinator: one task that owns the enumerator and the pipelines,
//! opens windows, assigns splits, reacts to pipeline events and serves
//! requests, all from one loop, so each decision sees a consistent state.

use super::handle::{Control, History, JobStatus};
use super::stop::Mode;
use super::JobOptions;
use crate::checkpoint::{CheckpointStore, JobState};
use crate::config::JobConfig;
use crate::connector::{Sink, Source};
use crate::enumerator::Enumerator;
use crate::error::{ControlError, EngineError};
use crate::metrics::JobMetrics;
use crate::pipeline::{spawn_worker, PipelineEvent, Worker};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{mpsc, watch};
use tokio::time::{sleep_until, Instant, Interval};

/// The pipelines and which of them wait for a split.
pub(super) struct Workers {
    list: Vec<Worker>,
    /// Indexes of idle workers (popped from the end).
    pub(super) idle: Vec<usize>,
    /// Tells running pipelines to stop after their current batch.
    stop: watch::Sender<bool>,
}

impl Workers {
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
    End(JobStatus),
}

pub(super) struct Coordinator<S: Source, K: Sink<S::Batch>> {
    source: Arc<S>,
    sink: Arc<K>,
    pub(super) store: CheckpointStore,
    pub(super) config: JobConfig,
    pub(super) options: JobOptions,
    pub(super) metrics: Arc<JobMetrics>,
    pub(super) history: History,
    pub(super) enumerator: Enumerator,
    pub(super) next_checkpoint_id: u64,
    pub(super) window_opened: Option<Instant>,
    next_window_at: Instant,
    retry_not_before: Instant,
    consecutive_failures: u32,
    /// Whether the open window's boundaries are in a completed checkpoint.
    window_durable: bool,
    /// Running, draining or stopping.
    pub(super) mode: Mode,
}

impl<S: Source, K: Sink<S::Batch>> Coordinator<S, K> {
    pub(super) fn new(
        source: Arc<S>,
        sink: Arc<K>,
        store: CheckpointStore,
        config: JobConfig,
        options: JobOptions,
        restore: Option<JobState>,
    ) -> Self {
        let enumerator = match restore {
            Some(state) => Enumerator::restore(&state),
            None => Enumerator::new(),
        };
        let metrics = Arc::new(JobMetrics::default());
        if let Some(end) = enumerator.last_end() {
            metrics.set_last_end(end);
        }
        let now = Instant::now();
        Coordinator {
            source,
            sink,
            store,
            config,
            options,
            metrics,
            history: Arc::new(Mutex::new(Vec::new())),
            enumerator,
            next_checkpoint_id: 1,
            window_opened: None,
            next_window_at: now,
            retry_not_before: now,
            consecutive_failures: 0,
            window_durable: false,
            mode: Mode::Running,
        }
    }

    fn spawn_workers(&self, events: mpsc::UnboundedSender<PipelineEvent>) -> Workers {
        let (stop, stop_rx) = watch::channel(false);
        let list: Vec<Worker> = (0..self.options.parallelism.max(1))
            .map(|i| {
                spawn_worker(
                    i,
                    self.source.clone(),
                    self.sink.clone(),
                    events.clone(),
                    stop_rx.clone(),
                    self.metrics.clone(),
                )
            })
            .collect();
        let idle = (0..list.len()).rev().collect();
        Workers { list, idle, stop }
    }

    /// Runs the job until it ends; returns how it ended.
    pub(super) async fn run(mut self, mut control: mpsc::Receiver<Control>) -> JobStatus {
        let (events_tx, mut events) = mpsc::unbounded_channel();
        let mut workers = self.spawn_workers(events_tx);
        let mut checkpoint_tick = tokio::time::interval(self.config.checkpointing_interval);
        checkpoint_tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        checkpoint_tick.tick().await;
        // A restored window continues; record when it (re)started.
        if self.enumerator.window().is_some() {
            self.window_opened = Some(Instant::now());
        }
        let status = loop {
            if let Flow::End(status) = self.step(&mut workers).await {
                break status;
            }
            self.metrics.set_split_counts(self.enumerator.counts());
            let flow = self
                .wait(
                    &mut workers,
                    &mut events,
                    &mut control,
                    &mut checkpoint_tick,
                )
                .await;
            if let Flow::End(status) = flow {
                break status;
            }
        };
        drop(workers);
        self.mode.job_ended(&status);
        status
    }

    /// What the coordinator does before it waits: stop at a window
    /// boundary if a stop is due, else open a window if one is due, make
    /// it durable, hand out splits.
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
                if let Some(end) = self.on_error(e) {
                    return Flow::End(end);
                }
            }
        }
        if self.enumerator.window().is_some() && !self.window_durable {
            match self.checkpoint().await {
                Ok(_) => self.window_durable = true,
                Err(e) => {
                    tracing::warn!(error = %e, "checkpoint of a new window failed");
                    self.metrics.checkpoint_failed();
                    if let Some(end) = self.on_error(e) {
                        return Flow::End(end);
                    }
                }
            }
        }
        if self.window_durable {
            self.assign(workers).await;
        }
        Flow::Continue
    }

    /// Waits for the next thing to do and does it.
    async fn wait(
        &mut self,
        workers: &mut Workers,
        events: &mut mpsc::UnboundedReceiver<PipelineEvent>,
        control: &mut mpsc::Receiver<Control>,
        checkpoint_tick: &mut Interval,
    ) -> Flow {
        // A drained window completes with a checkpoint right away.
        let drained = self.window_drained();
        let window_due = self.enumerator.window().is_none()
            && self.mode.may_open_window(self.enumerator.last_end());
        let retrying = self.retry_not_before > Instant::now();
        let drain_deadline = self.mode.drain_deadline();
        tokio::select! {
            event = events.recv() => match event {
                Some(event) => return self.on_event(event, &mut workers.idle),
                None => return Flow::End(JobStatus::Failed { error: "pipelines vanished".into() }),
            },
            _ = checkpoint_tick.tick() => {
                if let Err(e) = self.checkpoint().await {
                    tracing::warn!(error = %e, "checkpoint failed");
                    self.metrics.checkpoint_failed();
                }
            }
            _ = std::future::ready(()), if drained => {
                if let Err(e) = self.checkpoint().await {
                    tracing::warn!(error = %e, "checkpoint failed");
                    self.metrics.checkpoint_failed();
                    tokio::time::sleep(Duration::from_millis(500)).await;
                }
            }
            _ = sleep_until(self.next_window_at), if window_due => {}
            _ = sleep_until(self.retry_not_before), if retrying => {}
            _ = sleep_until(drain_deadline.unwrap_or_else(Instant::now)), if drain_deadline.is_some() => {
                self.mode.drain_timed_out();
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
        if self.enumerator.window().is_some()
            || Instant::now() < self.next_window_at
            || Instant::now() < self.retry_not_before
        {
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
        self.window_durable = false;
        self.window_opened = Some(Instant::now());
        self.next_window_at = Instant::now() + self.config.discovery_interval;
        Ok(())
    }

    async fn assign(&mut self, workers: &mut Workers) {
        if Instant::now() < self.retry_not_before {
            return;
        }
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
                self.consecutive_failures = 0;
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
                let _ = self.enumerator.give_back(&split_id);
                if let Some(end) = self.on_error(error) {
                    return Flow::End(end);
                }
            }
        }
        Flow::Continue
    }

    /// Transient errors back off and retry (counted as restarts); fatal
    /// ones end the job with advice.
    fn on_error(&mut self, error: EngineError) -> Option<JobStatus> {
        if !error.is_transient() {
            let error = match error.advice() {
                Some(advice) => format!("{error}. What to do: {advice}"),
                None => error.to_string(),
            };
            return Some(JobStatus::Failed { error });
        }
        self.metrics.restarted();
        self.consecutive_failures = self.consecutive_failures.saturating_add(1);
        let delay = Duration::from_millis(100 * 2u64.pow(self.consecutive_failures.min(7)));
        tracing::warn!(error = %error, ?delay, "transient failure; retrying");
        self.retry_not_before = Instant::now() + delay;
        None
    }
}
