//! The job: one coordinator task that owns the [`Enumerator`], opens
//! windows on the source clock, hands splits to pipelines, takes periodic
//! checkpoints, and serves lifecycle requests (savepoint, stop with
//! savepoint, cancel) through a [`JobHandle`].
//!
//! Window chain: the snapshot at t0, then [t_i, t_i+1) diff windows, each
//! opened `job.discoveryIntervalSeconds` after the previous one opened and
//! only once the previous one completed (all splits flushed and a
//! checkpoint recording that completed). When the last split of a window
//! finishes, a checkpoint is taken at once instead of waiting for the next
//! periodic one, so the window's end becomes durable (and visible as
//! `lastEndTimestamp`) as early as possible.
//!
//! A window's boundaries are made durable before any of its rows is
//! written: opening a window (or resuming one) takes a checkpoint first,
//! and splits are handed out only after it completed. So the sink never
//! holds changes from beyond the window recorded in the newest complete
//! checkpoint. Without this, a restore from an older checkpoint would
//! replay a wider window, and a row inserted (and already copied) then
//! deleted inside it would not come back from the diff scan — the sink
//! would keep it.

use crate::checkpoint::{CheckpointStore, JobId, JobState, SnapshotKind, StorageLocation};
use crate::connector::{Sink, Source};
use crate::enumerator::{AfterCheckpoint, CheckpointCapture, Enumerator};
use crate::error::EngineError;
use crate::metrics::JobMetrics;
use crate::pipeline::{spawn_worker, PipelineEvent, Worker};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{mpsc, oneshot, watch};
use tokio::time::{sleep_until, Instant};

/// What a job needs besides its connectors.
#[derive(Debug, Clone)]
pub struct JobSpec {
    pub job_id: JobId,
    pub job_name: String,
    pub table_name: String,
    pub source_masters: Vec<String>,
    pub sink_masters: Vec<String>,
    pub parallelism: usize,
    pub discovery_interval: Duration,
    pub checkpointing_interval: Duration,
    /// Where savepoints go when a request names no directory.
    pub default_savepoint_dir: Option<StorageLocation>,
    /// A restored checkpoint or savepoint.
    pub restore: Option<JobState>,
}

/// A job's state, as Flink names them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JobStatus {
    Running,
    /// Stopping with a savepoint (in-flight batches finish first).
    Stopping,
    /// Stopped with a savepoint at `savepoint`.
    Finished {
        savepoint: String,
    },
    Canceled,
    Failed {
        error: String,
    },
}

impl JobStatus {
    /// Flink's name: RUNNING, FINISHED, CANCELED, FAILED (stopping reports
    /// RUNNING until done, as Flink does during stop-with-savepoint).
    pub fn flink_name(&self) -> &'static str {
        match self {
            JobStatus::Running | JobStatus::Stopping => "RUNNING",
            JobStatus::Finished { .. } => "FINISHED",
            JobStatus::Canceled => "CANCELED",
            JobStatus::Failed { .. } => "FAILED",
        }
    }

    /// Whether the job has ended.
    pub fn is_terminal(&self) -> bool {
        matches!(
            self,
            JobStatus::Finished { .. } | JobStatus::Canceled | JobStatus::Failed { .. }
        )
    }
}

type Reply<T> = oneshot::Sender<Result<T, String>>;

enum Control {
    Savepoint {
        dir: Option<StorageLocation>,
        reply: Reply<String>,
    },
    Stop {
        dir: Option<StorageLocation>,
        reply: Reply<String>,
    },
    Checkpoint {
        reply: Reply<u64>,
    },
    Cancel,
}

/// One completed checkpoint, for history views.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckpointRecord {
    pub id: u64,
    pub path: String,
    pub completed_at_ms: u64,
    pub duration_ms: u64,
    pub size_bytes: u64,
    pub savepoint: bool,
}

/// Controls and observes a running job. Cheap to clone.
#[derive(Clone)]
pub struct JobHandle {
    job_id: JobId,
    control: mpsc::Sender<Control>,
    status: watch::Receiver<JobStatus>,
    metrics: Arc<JobMetrics>,
    history: Arc<std::sync::Mutex<Vec<CheckpointRecord>>>,
}

impl JobHandle {
    /// The job's id.
    pub fn job_id(&self) -> JobId {
        self.job_id
    }

    /// The current status.
    pub fn status(&self) -> JobStatus {
        self.status.borrow().clone()
    }

    /// Live metrics.
    pub fn metrics(&self) -> &Arc<JobMetrics> {
        &self.metrics
    }

    /// Completed checkpoints and savepoints, oldest first (last 100).
    pub fn checkpoint_history(&self) -> Vec<CheckpointRecord> {
        self.history.lock().map(|h| h.clone()).unwrap_or_default()
    }

    async fn ask<T>(&self, make: impl FnOnce(Reply<T>) -> Control) -> Result<T, String> {
        let (tx, rx) = oneshot::channel();
        self.control
            .send(make(tx))
            .await
            .map_err(|_| "the job is not running".to_string())?;
        rx.await
            .map_err(|_| "the job ended before answering".to_string())?
    }

    /// Writes a savepoint (into `dir`, or the default savepoint directory)
    /// and returns its path.
    pub async fn savepoint(&self, dir: Option<StorageLocation>) -> Result<String, String> {
        self.ask(|reply| Control::Savepoint { dir, reply }).await
    }

    /// Stops the job: in-flight batches finish, a final savepoint is
    /// written, the job ends FINISHED. Returns the savepoint path.
    pub async fn stop_with_savepoint(
        &self,
        dir: Option<StorageLocation>,
    ) -> Result<String, String> {
        self.ask(|reply| Control::Stop { dir, reply }).await
    }

    /// Takes a checkpoint now and returns its id.
    pub async fn checkpoint(&self) -> Result<u64, String> {
        self.ask(|reply| Control::Checkpoint { reply }).await
    }

    /// Cancels the job at once; checkpoints are kept.
    pub async fn cancel(&self) {
        let _ = self.control.send(Control::Cancel).await;
    }

    /// Waits until the job has ended and returns its final status.
    pub async fn wait(&self) -> JobStatus {
        let mut rx = self.status.clone();
        loop {
            let s = rx.borrow().clone();
            if s.is_terminal() {
                return s;
            }
            if rx.changed().await.is_err() {
                return rx.borrow().clone();
            }
        }
    }
}

/// Starts a job; it runs until stopped, cancelled or failed.
pub fn spawn<S: Source, K: Sink>(
    source: S,
    sink: K,
    store: CheckpointStore,
    spec: JobSpec,
) -> JobHandle {
    let (control_tx, control_rx) = mpsc::channel(16);
    let (status_tx, status_rx) = watch::channel(JobStatus::Running);
    let metrics = Arc::new(JobMetrics::default());
    let history = Arc::new(std::sync::Mutex::new(Vec::new()));
    let handle = JobHandle {
        job_id: spec.job_id,
        control: control_tx,
        status: status_rx,
        metrics: metrics.clone(),
        history: history.clone(),
    };
    let coordinator = Coordinator::new(
        Arc::new(source),
        Arc::new(sink),
        store,
        spec,
        metrics,
        history,
    );
    tokio::spawn(async move {
        let status = coordinator.run(control_rx).await;
        match &status {
            JobStatus::Failed { error } => tracing::error!(%error, "job failed"),
            other => tracing::info!(status = ?other, "job ended"),
        }
        let _ = status_tx.send(status);
    });
    handle
}

struct Coordinator<S: Source, K: Sink> {
    source: Arc<S>,
    sink: Arc<K>,
    store: CheckpointStore,
    spec: JobSpec,
    metrics: Arc<JobMetrics>,
    history: Arc<std::sync::Mutex<Vec<CheckpointRecord>>>,
    enumerator: Enumerator,
    next_checkpoint_id: u64,
    window_opened: Option<Instant>,
    next_window_at: Instant,
    retry_not_before: Instant,
    consecutive_failures: u32,
    /// Whether the open window's boundaries are in a completed checkpoint.
    window_durable: bool,
}

enum Flow {
    Continue,
    End(JobStatus),
}

impl<S: Source, K: Sink> Coordinator<S, K> {
    fn new(
        source: Arc<S>,
        sink: Arc<K>,
        store: CheckpointStore,
        mut spec: JobSpec,
        metrics: Arc<JobMetrics>,
        history: Arc<std::sync::Mutex<Vec<CheckpointRecord>>>,
    ) -> Self {
        let enumerator = match spec.restore.take() {
            Some(state) => Enumerator::restore(&state),
            None => Enumerator::new(),
        };
        if let Some(end) = enumerator.last_end() {
            metrics.set_last_end(end);
        }
        let now = Instant::now();
        Coordinator {
            source,
            sink,
            store,
            spec,
            metrics,
            history,
            enumerator,
            next_checkpoint_id: 1,
            window_opened: None,
            next_window_at: now,
            retry_not_before: now,
            consecutive_failures: 0,
            window_durable: false,
        }
    }

    async fn run(mut self, mut control: mpsc::Receiver<Control>) -> JobStatus {
        let (events_tx, mut events) = mpsc::unbounded_channel();
        let (stop_tx, stop_rx) = watch::channel(false);
        let workers: Vec<Worker> = (0..self.spec.parallelism.max(1))
            .map(|i| {
                spawn_worker(
                    i,
                    self.source.clone(),
                    self.sink.clone(),
                    events_tx.clone(),
                    stop_rx.clone(),
                    self.metrics.clone(),
                )
            })
            .collect();
        let mut idle: Vec<usize> = (0..workers.len()).rev().collect();
        let mut checkpoint_tick = tokio::time::interval(self.spec.checkpointing_interval);
        checkpoint_tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        checkpoint_tick.tick().await;
        // A restored window continues; record when it (re)started.
        if self.enumerator.window().is_some() {
            self.window_opened = Some(Instant::now());
        }
        let mut stopping: Option<(Option<StorageLocation>, Reply<String>)> = None;

        let status = loop {
            if stopping.is_none() {
                if let Err(e) = self.maybe_open_window().await {
                    if let Some(end) = self.on_error(e) {
                        break end;
                    }
                }
                if self.enumerator.window().is_some() && !self.window_durable {
                    match self.checkpoint().await {
                        Ok(_) => self.window_durable = true,
                        Err(e) => {
                            tracing::warn!(error = %e, "checkpoint of a new window failed");
                            self.metrics.checkpoint_failed();
                            if let Some(end) = self.on_error(e) {
                                break end;
                            }
                        }
                    }
                }
                if self.window_durable {
                    self.assign(&workers, &mut idle).await;
                }
            } else if idle.len() == workers.len() {
                // Every pipeline has stopped after a whole batch: the state
                // now records exactly what is in the sink.
                let Some((dir, reply)) = stopping.take() else {
                    continue;
                };
                match self.savepoint(dir).await {
                    Ok(path) => {
                        let _ = reply.send(Ok(path.clone()));
                        break JobStatus::Finished { savepoint: path };
                    }
                    Err(e) => {
                        let _ = reply.send(Err(e.to_string()));
                        break JobStatus::Failed {
                            error: e.to_string(),
                        };
                    }
                }
            }
            self.metrics.set_split_counts(self.enumerator.counts());

            // A drained window completes with a checkpoint right away.
            let drained = self.window_drained();
            let window_due = self.enumerator.window().is_none() && stopping.is_none();
            tokio::select! {
                event = events.recv() => {
                    let Some(event) = event else { break JobStatus::Failed { error: "pipelines vanished".into() } };
                    match self.on_event(event, &mut idle) {
                        Flow::Continue => {}
                        Flow::End(status) => break status,
                    }
                }
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
                _ = sleep_until(self.retry_not_before), if self.retry_not_before > Instant::now() => {}
                ctl = control.recv() => match ctl {
                    None | Some(Control::Cancel) => break JobStatus::Canceled,
                    Some(Control::Checkpoint { reply }) => {
                        let r = self.checkpoint().await.map_err(|e| e.to_string());
                        let _ = reply.send(r);
                    }
                    Some(Control::Savepoint { dir, reply }) => {
                        let r = self.savepoint(dir).await.map_err(|e| e.to_string());
                        let _ = reply.send(r);
                    }
                    Some(Control::Stop { dir, reply }) => {
                        if dir.is_none() && self.spec.default_savepoint_dir.is_none() {
                            let _ = reply.send(Err("no savepoint directory given and none configured".into()));
                        } else {
                            let _ = stop_tx.send(true);
                            stopping = Some((dir, reply));
                        }
                    }
                },
            }
        };
        for w in &workers {
            w.task.abort();
        }
        status
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
        self.next_window_at = Instant::now() + self.spec.discovery_interval;
        Ok(())
    }

    async fn assign(&mut self, workers: &[Worker], idle: &mut Vec<usize>) {
        if Instant::now() < self.retry_not_before {
            return;
        }
        while let Some(&w) = idle.last() {
            let Some(split) = self.enumerator.assign() else {
                break;
            };
            let id = split.split_id.clone();
            if workers[w].splits.send(split).await.is_err() {
                // The worker is gone; put the split back and stop assigning.
                let _ = self.enumerator.give_back(&id);
                break;
            }
            idle.pop();
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

    fn state(&self, capture: &CheckpointCapture, kind: SnapshotKind, id: u64) -> JobState {
        let mut state = JobState::new(
            self.spec.job_id,
            kind,
            id,
            self.spec.table_name.clone(),
            self.spec.source_masters.clone(),
            self.spec.sink_masters.clone(),
        );
        state.last_end_timestamp = capture.last_end_timestamp;
        state.window = capture.window;
        state.unassigned = capture.unassigned.clone();
        state.pending = capture.pending.clone();
        state
    }

    async fn checkpoint(&mut self) -> Result<u64, EngineError> {
        let started = Instant::now();
        let capture = self.enumerator.capture();
        let id = self.next_checkpoint_id;
        let state = self.state(&capture, SnapshotKind::Checkpoint, id);
        let written = self
            .store
            .write_checkpoint(&self.spec.job_id, id, &state)
            .await?;
        self.next_checkpoint_id += 1;
        let duration = started.elapsed().as_millis() as u64;
        let size = crate::checkpoint::encode_metadata(&state)
            .map(|b| b.len() as u64)
            .unwrap_or(0);
        self.metrics.checkpoint_completed(duration, size);
        self.record(id, written.location.to_string(), duration, size, false);
        if let AfterCheckpoint::WindowCompleted { end, was_snapshot } =
            self.enumerator.checkpoint_completed(&capture)
        {
            self.metrics.set_last_end(end);
            let took = self
                .window_opened
                .take()
                .map_or(0, |t| t.elapsed().as_millis() as u64);
            self.metrics.window_completed(took, was_snapshot);
            tracing::info!(
                end,
                snapshot = was_snapshot,
                took_ms = took,
                checkpoint = id,
                "window completed"
            );
        }
        Ok(id)
    }

    async fn savepoint(&mut self, dir: Option<StorageLocation>) -> Result<String, EngineError> {
        let started = Instant::now();
        let dir = dir
            .or_else(|| self.spec.default_savepoint_dir.clone())
            .ok_or_else(|| {
                EngineError::Restore("no savepoint directory given and none configured".into())
            })?;
        let capture = self.enumerator.capture();
        let state = self.state(&capture, SnapshotKind::Savepoint, self.next_checkpoint_id);
        let location = self.store.write_savepoint(&dir, &state).await?;
        let duration = started.elapsed().as_millis() as u64;
        let size = crate::checkpoint::encode_metadata(&state)
            .map(|b| b.len() as u64)
            .unwrap_or(0);
        let path = location.to_uri();
        self.record(self.next_checkpoint_id, path.clone(), duration, size, true);
        tracing::info!(%path, "savepoint written");
        Ok(path)
    }

    fn record(&self, id: u64, path: String, duration_ms: u64, size_bytes: u64, savepoint: bool) {
        if let Ok(mut h) = self.history.lock() {
            h.push(CheckpointRecord {
                id,
                path,
                completed_at_ms: crate::checkpoint::state_now_ms(),
                duration_ms,
                size_bytes,
                savepoint,
            });
            let excess = h.len().saturating_sub(100);
            h.drain(..excess);
        }
    }
}
