//! [`JobHandle`]: the requests a running job serves (checkpoint,
//! savepoint, stop, cancel) and what it shows (status, metrics, checkpoint
//! history, one [`JobSnapshot`] of all three), read from the board the
//! coordinator publishes (`publish`).

use super::coordinator::Coordinator;
use super::publish::Board;
use crate::checkpoint::{CheckpointStore, JobId, JobState, StorageLocation};
use crate::config::JobConfig;
use crate::connector::Tables;
use crate::error::ControlError;
use crate::metrics::JobMetrics;
use crate::status::{CheckpointRecord, ExceptionRecord, JobSnapshot, JobStatus};
use crate::throttle::{LimitsUpdate, ThrottleSnapshot, Throttles};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{mpsc, oneshot, watch};

/// How long a stop with drain waits for the open window by default.
pub const DEFAULT_DRAIN_TIMEOUT: Duration = Duration::from_secs(600);

/// How to stop a job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StopMode {
    /// Where the final savepoint goes (`None`: the job's default).
    pub savepoint_dir: Option<StorageLocation>,
    /// Let the open window complete and open no new one before the
    /// savepoint, so it holds no split in progress.
    pub drain: bool,
    /// With `drain`: give up after this long (the job keeps running).
    pub drain_timeout: Duration,
}

impl StopMode {
    /// Stop after the in-flight batches, with a savepoint into `dir`.
    pub fn savepoint(dir: Option<StorageLocation>) -> Self {
        StopMode {
            savepoint_dir: dir,
            drain: false,
            drain_timeout: DEFAULT_DRAIN_TIMEOUT,
        }
    }

    /// Stop once the open window has completed, with a savepoint into `dir`.
    pub fn drain(dir: Option<StorageLocation>, timeout: Duration) -> Self {
        StopMode {
            savepoint_dir: dir,
            drain: true,
            drain_timeout: timeout,
        }
    }
}

/// The answer channel of one request.
pub(super) type Reply<T> = oneshot::Sender<Result<T, ControlError>>;

/// A request to the coordinator.
pub(super) enum Control {
    Savepoint {
        dir: Option<StorageLocation>,
        reply: Reply<String>,
    },
    Stop {
        mode: StopMode,
        reply: Reply<String>,
    },
    Checkpoint {
        reply: Reply<u64>,
    },
    Cancel,
}

impl Control {
    /// Answers the request with `why` it is refused.
    pub(super) fn refuse(self, why: ControlError) {
        match self {
            Control::Checkpoint { reply } => {
                let _ = reply.send(Err(why));
            }
            Control::Savepoint { reply, .. } | Control::Stop { reply, .. } => {
                let _ = reply.send(Err(why));
            }
            // Nobody waits for an answer.
            Control::Cancel => {}
        }
    }
}

/// Controls and observes a running job. Cheap to clone.
#[derive(Clone)]
pub struct JobHandle {
    job_id: JobId,
    control: mpsc::Sender<Control>,
    /// What the coordinator publishes (status, history, tables).
    board: watch::Receiver<Board>,
    /// The live counters (the pipelines update them too).
    metrics: Arc<JobMetrics>,
    replicas: Vec<Arc<crate::replication::ReplicaMetrics>>,
    /// The limits the pipelines go through.
    throttles: Arc<Throttles>,
}

impl std::fmt::Debug for JobHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JobHandle")
            .field("job_id", &self.job_id)
            .field("status", &self.board.borrow().status)
            .finish_non_exhaustive()
    }
}

impl JobHandle {
    /// The job's id.
    pub fn job_id(&self) -> JobId {
        self.job_id
    }

    /// The current status.
    pub fn status(&self) -> JobStatus {
        self.board.borrow().status.clone()
    }

    /// Live metrics.
    pub fn metrics(&self) -> &Arc<JobMetrics> {
        &self.metrics
    }

    /// Completed checkpoints and savepoints, oldest first (last 100).
    pub fn checkpoint_history(&self) -> Vec<CheckpointRecord> {
        self.board.borrow().checkpoints.clone()
    }

    /// The job's failures (restarted or final), newest first.
    pub fn exceptions(&self) -> Vec<ExceptionRecord> {
        self.board.borrow().exceptions.iter().cloned().collect()
    }

    /// Status, metrics, checkpoint history and failures, read together:
    /// one borrow of the published board, plus the live counters.
    pub fn snapshot(&self) -> JobSnapshot {
        let board = self.board.borrow();
        let mut snapshot = JobSnapshot::new(
            self.job_id,
            &board.status,
            self.metrics.snapshot(),
            board.checkpoints.clone(),
        );
        snapshot.exceptions = board.exceptions.iter().cloned().collect();
        snapshot.replicas = self.replicas();
        snapshot.last_periodic_savepoint = board.last_periodic_savepoint.clone();
        snapshot.tables = board.tables();
        snapshot
    }

    /// Each table's identity, chain and counters, by current name.
    pub fn tables(&self) -> Vec<crate::status::TableSnapshot> {
        self.board.borrow().tables()
    }

    /// Each state replica's metrics (`job.stateReplicas`), in order.
    pub fn replicas(&self) -> Vec<crate::replication::ReplicaSnapshot> {
        self.replicas.iter().map(|r| r.snapshot()).collect()
    }

    /// The limits (job-wide and per table) and the time spent throttled.
    pub fn throttle(&self) -> ThrottleSnapshot {
        self.throttles.snapshot()
    }

    /// Changes the job's limits (`table` `None`) or one table's (by its
    /// current name; refused if the job has no such table) at once, for
    /// the splits in progress too; returns the limits now. Not kept in
    /// checkpoints: a restarted process starts from the `throttle.*` keys.
    pub fn set_throttle(
        &self,
        table: Option<&str>,
        update: &LimitsUpdate,
    ) -> Result<ThrottleSnapshot, ControlError> {
        if let Some(name) = table {
            if !self.tables().iter().any(|t| t.table_name == name) {
                return Err(ControlError::UnknownTable(name.to_string()));
            }
        }
        self.throttles.update(table, update);
        Ok(self.throttles.snapshot())
    }

    async fn ask<T>(&self, make: impl FnOnce(Reply<T>) -> Control) -> Result<T, ControlError> {
        let (tx, rx) = oneshot::channel();
        self.control
            .send(make(tx))
            .await
            .map_err(|_| ControlError::NotRunning)?;
        rx.await.map_err(|_| ControlError::EndedBeforeAnswering)?
    }

    /// Writes a savepoint (into `dir`, or the default savepoint directory)
    /// and returns its path. The job keeps running.
    pub async fn savepoint(&self, dir: Option<StorageLocation>) -> Result<String, ControlError> {
        self.ask(|reply| Control::Savepoint { dir, reply }).await
    }

    /// Stops the job as `mode` says: a final savepoint is written and the
    /// job ends FINISHED. Returns the savepoint path.
    pub async fn stop(&self, mode: StopMode) -> Result<String, ControlError> {
        self.ask(|reply| Control::Stop { mode, reply }).await
    }

    /// Stops the job: in-flight batches finish, a final savepoint is
    /// written, the job ends FINISHED. Returns the savepoint path.
    pub async fn stop_with_savepoint(
        &self,
        dir: Option<StorageLocation>,
    ) -> Result<String, ControlError> {
        self.stop(StopMode::savepoint(dir)).await
    }

    /// Takes a checkpoint now and returns its id.
    pub async fn checkpoint(&self) -> Result<u64, ControlError> {
        self.ask(|reply| Control::Checkpoint { reply }).await
    }

    /// Cancels the job at once; checkpoints are kept.
    pub async fn cancel(&self) {
        let _ = self.control.send(Control::Cancel).await;
    }

    /// Waits until the job has ended and returns its final status.
    pub async fn wait(&self) -> JobStatus {
        let mut rx = self.board.clone();
        loop {
            let s = rx.borrow_and_update().status.clone();
            if s.is_terminal() {
                return s;
            }
            if rx.changed().await.is_err() {
                return rx.borrow().status.clone();
            }
        }
    }
}

/// Starts the coordinator of a checked job and returns its handle.
pub(super) fn spawn<T: Tables>(
    tables: T,
    store: CheckpointStore,
    config: JobConfig,
    options: super::JobOptions,
    restore: Option<JobState>,
) -> JobHandle {
    let (control_tx, control_rx) = mpsc::channel(16);
    let job_id = options.job_id;
    let coordinator = Coordinator::new(tables, store, config, options, restore);
    let handle = JobHandle {
        job_id,
        control: control_tx,
        board: coordinator.publisher.subscribe(),
        metrics: coordinator.publisher.metrics.clone(),
        throttles: coordinator.publisher.throttles.clone(),
        replicas: coordinator.checkpoints.replica_metrics(),
    };
    tokio::spawn(coordinator.run(control_rx));
    handle
}
