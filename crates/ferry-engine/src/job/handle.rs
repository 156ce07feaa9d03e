//! [`JobHandle`]: the requests a running job serves (checkpoint,
//! savepoint, stop, cancel) and what it shows (status, metrics, checkpoint
//! history, one [`JobSnapshot`] of all three).

use super::coordinator::Coordinator;
use crate::checkpoint::{CheckpointStore, JobId, JobState, StorageLocation};
use crate::config::JobConfig;
use crate::connector::Tables;
use crate::error::ControlError;
use crate::metrics::{JobMetrics, TableMetrics};
use crate::status::{ExceptionRecord, JobSnapshot};
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{mpsc, oneshot, watch};

/// How long a stop with drain waits for the open window by default.
pub const DEFAULT_DRAIN_TIMEOUT: Duration = Duration::from_secs(600);

/// A job's state, as Flink names them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JobStatus {
    Running,
    /// A transient failure stopped the pipelines; the job restarts from its
    /// newest complete checkpoint once the restart strategy's delay passed.
    Restarting {
        /// The failure that caused the restart.
        cause: String,
    },
    /// Stopping with a savepoint (in-flight batches finish first).
    Stopping,
    /// Stopped with a savepoint at `savepoint`; or, every source being
    /// bounded and read to its end, finished with a final checkpoint there.
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
            JobStatus::Restarting { .. } => "RESTARTING",
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

/// One completed checkpoint, for history views.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CheckpointRecord {
    pub id: u64,
    pub path: String,
    pub completed_at_ms: u64,
    pub duration_ms: u64,
    pub size_bytes: u64,
    pub savepoint: bool,
}

/// Completed checkpoints and savepoints, oldest first.
pub(super) type History = Arc<Mutex<Vec<CheckpointRecord>>>;

/// The metrics of each table of the job, in the order they were found.
pub(super) type TableList = Arc<Mutex<Vec<Arc<TableMetrics>>>>;

/// Failures, newest first (at most [`MAX_EXCEPTIONS`]).
pub(super) type Exceptions = Arc<Mutex<VecDeque<ExceptionRecord>>>;

/// How many failures a job remembers.
pub const MAX_EXCEPTIONS: usize = 100;

/// Controls and observes a running job. Cheap to clone.
#[derive(Clone)]
pub struct JobHandle {
    job_id: JobId,
    control: mpsc::Sender<Control>,
    status: watch::Receiver<JobStatus>,
    metrics: Arc<JobMetrics>,
    history: History,
    exceptions: Exceptions,
    replicas: Vec<Arc<crate::replication::ReplicaMetrics>>,
    tables: TableList,
}

impl std::fmt::Debug for JobHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JobHandle")
            .field("job_id", &self.job_id)
            .field("status", &*self.status.borrow())
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

    /// The job's failures (restarted or final), newest first.
    pub fn exceptions(&self) -> Vec<ExceptionRecord> {
        self.exceptions
            .lock()
            .map(|e| e.iter().cloned().collect())
            .unwrap_or_default()
    }

    /// Status, metrics, checkpoint history and failures, read together.
    pub fn snapshot(&self) -> JobSnapshot {
        let mut snapshot = JobSnapshot::new(
            self.job_id,
            &self.status(),
            self.metrics.snapshot(),
            self.checkpoint_history(),
        );
        snapshot.exceptions = self.exceptions();
        snapshot.replicas = self.replicas();
        snapshot.last_periodic_savepoint = self.metrics.last_periodic_savepoint();
        snapshot.tables = self.tables();
        snapshot
    }

    /// Each table's identity, chain and counters, by current name.
    pub fn tables(&self) -> Vec<crate::status::TableSnapshot> {
        let mut tables: Vec<_> = self
            .tables
            .lock()
            .map(|l| l.iter().map(|m| m.snapshot()).collect())
            .unwrap_or_default();
        tables.sort_by(|a, b| a.table_name.cmp(&b.table_name));
        tables
    }

    /// Each state replica's metrics (`job.stateReplicas`), in order.
    pub fn replicas(&self) -> Vec<crate::replication::ReplicaSnapshot> {
        self.replicas.iter().map(|r| r.snapshot()).collect()
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

/// Starts the coordinator of a checked job and returns its handle.
pub(super) fn spawn<T: Tables>(
    tables: T,
    store: CheckpointStore,
    config: JobConfig,
    options: super::JobOptions,
    restore: Option<JobState>,
) -> JobHandle {
    let (control_tx, control_rx) = mpsc::channel(16);
    let (status_tx, status_rx) = watch::channel(JobStatus::Running);
    let job_id = options.job_id;
    let coordinator = Coordinator::new(tables, store, config, options, restore, status_tx);
    let handle = JobHandle {
        job_id,
        control: control_tx,
        status: status_rx,
        metrics: coordinator.metrics.clone(),
        history: coordinator.history.clone(),
        exceptions: coordinator.exceptions.clone(),
        replicas: coordinator
            .replication
            .as_ref()
            .map(|r| r.metrics().to_vec())
            .unwrap_or_default(),
        tables: coordinator.table_list.clone(),
    };
    tokio::spawn(coordinator.run(control_rx));
    handle
}
