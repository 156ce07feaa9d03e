//! What a job shows, at the bottom of the engine (it depends on no `job`
//! module; the job depends on it): its [`JobStatus`], the
//! [`CheckpointRecord`]s and [`ExceptionRecord`]s of its history, and one
//! view of it for every reader (REST, Prometheus, the CLI, the web page):
//! [`JobSnapshot`], from [`JobHandle::snapshot`](crate::JobHandle::snapshot).
//! The views serialize with serde, so a client can read back what a server
//! wrote.

use crate::checkpoint::JobId;
use serde::{Deserialize, Serialize};

/// A job's state, as Flink names them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JobStatus {
    /// Running (or preparing to).
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
        /// Where the savepoint (or final checkpoint) is.
        savepoint: String,
    },
    /// Cancelled.
    Canceled,
    /// Failed for good.
    Failed {
        /// Why, with what to do.
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

/// One completed checkpoint, for history views.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CheckpointRecord {
    /// The checkpoint id.
    pub id: u64,
    /// Where it is.
    pub path: String,
    /// When it completed, epoch ms.
    pub completed_at_ms: u64,
    /// How long it took, ms.
    pub duration_ms: u64,
    /// Its size, bytes.
    pub size_bytes: u64,
    /// Whether it is a savepoint.
    pub savepoint: bool,
}

/// A job's state, with Flink's names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
#[non_exhaustive]
pub enum FlinkState {
    /// Running (or preparing to).
    Running,
    /// Restarting after a failure.
    Restarting,
    /// Finished (stopped with a savepoint, or bounded and done).
    Finished,
    /// Cancelled.
    Canceled,
    /// Failed for good.
    Failed,
}

impl FlinkState {
    /// The name Flink uses (`RUNNING` …).
    pub fn as_str(self) -> &'static str {
        match self {
            FlinkState::Running => "RUNNING",
            FlinkState::Restarting => "RESTARTING",
            FlinkState::Finished => "FINISHED",
            FlinkState::Canceled => "CANCELED",
            FlinkState::Failed => "FAILED",
        }
    }
}

impl From<&JobStatus> for FlinkState {
    fn from(status: &JobStatus) -> Self {
        match status {
            JobStatus::Running | JobStatus::Stopping => FlinkState::Running,
            JobStatus::Restarting { .. } => FlinkState::Restarting,
            JobStatus::Finished { .. } => FlinkState::Finished,
            JobStatus::Canceled => FlinkState::Canceled,
            JobStatus::Failed { .. } => FlinkState::Failed,
        }
    }
}

/// Status, metrics and checkpoint history of one job, read together.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct JobSnapshot {
    /// The job's id.
    pub job_id: JobId,
    /// The state, as Flink names it.
    pub state: FlinkState,
    /// Why the job failed (when FAILED) or restarts (when RESTARTING).
    pub failure: Option<String>,
    /// The final savepoint (only when FINISHED).
    pub final_savepoint: Option<String>,
    /// Counters and gauges (split counts, `lastEndTimestamp`, rows, bytes,
    /// windows, checkpoints).
    pub metrics: MetricsSnapshot,
    /// Completed checkpoints and savepoints, oldest first (last 100).
    pub checkpoints: Vec<CheckpointRecord>,
    /// Failures, newest first (last 100): each restart's cause and the
    /// failure that ended the job, if one did.
    #[serde(default)]
    pub exceptions: Vec<ExceptionRecord>,
    /// Each state replica (`job.stateReplicas`): lag, last success,
    /// failures.
    #[serde(default)]
    pub replicas: Vec<crate::replication::ReplicaSnapshot>,
    /// Where the last periodic savepoint went.
    #[serde(default)]
    pub last_periodic_savepoint: Option<String>,
    /// Each table of the job (one for a job of one table), by current
    /// source name.
    #[serde(default)]
    pub tables: Vec<TableSnapshot>,
}

/// One table of a job: its identity, window chain and counters.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TableSnapshot {
    /// The source table's id.
    pub table_id: crate::identity::TableId,
    /// The source table's current name (it follows renames).
    pub table_name: String,
    /// The sink table's name.
    pub sink_table: String,
    /// End of the table's last completed window, epoch ms (0: none yet).
    pub last_end_timestamp_ms: u64,
    /// Whether a window of this table is open.
    pub window_open: bool,
    /// Split queues of the table's open window.
    pub unassigned_count: u64,
    /// Splits handed out and not finished.
    pub pending_count: u64,
    /// Finished splits waiting for a checkpoint.
    pub pending_removal_count: u64,
    /// Rows read from the table and written to its sink.
    pub rows_read: u64,
    /// Rows upserted into the sink.
    pub rows_upserted: u64,
    /// Rows deleted from the sink.
    pub rows_deleted: u64,
    /// Windows of this table completed since the job started.
    pub windows_completed: u64,
    /// Source schema changes applied to the sink since the job started.
    pub schema_changes: u64,
    /// Tablet scans left out of diff windows since the job started: the
    /// tablets were proven unchanged (`reader.quietTabletMaxSkips`).
    #[serde(default)]
    pub tablet_scans_skipped: u64,
    /// Rows the sink deleted and wrote again because the source had
    /// re-created them with new immutable cells (Kudu 1.17+).
    #[serde(default)]
    pub rows_recreated: u64,
    /// Tablets (key ranges) copied again because a diff window started
    /// before their history (`reader.recopyExpiredTablets`).
    #[serde(default)]
    pub tablets_recopied: u64,
    /// Milliseconds from the table's last window opening to the next one
    /// may open: `job.discoveryIntervalSeconds`, or longer where the
    /// source's budget (`reader.diffScanBudget`) paces it; 0 before the
    /// first window.
    #[serde(default)]
    pub window_interval_ms: u64,
    /// Why the table is paused, if it is (the others go on).
    pub paused: Option<String>,
    /// Continuous verify's results (`job.verifyInterval`).
    #[serde(default)]
    pub verify: TableVerify,
}

/// Continuous verify of one table: its last verification and totals.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TableVerify {
    /// Verifications finished (with an answer).
    pub runs: u64,
    /// Verifications that failed (no answer).
    pub failures: u64,
    /// The source instant of the last verified cut, epoch ms (0: none).
    pub last_cut_ms: u64,
    /// Source rows compared by the last verification.
    pub last_rows_compared: u64,
    /// Differences the last verification found.
    pub last_differences: u64,
    /// Differences found, all verifications.
    pub differences_total: u64,
    /// Rows repaired, all verifications.
    pub repaired_total: u64,
}

/// One failure of a job, as Flink's exception history shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ExceptionRecord {
    /// When it happened (epoch ms).
    pub timestamp_ms: u64,
    /// What failed: `SourceRead`, `SinkWrite`, `Checkpoint`, `SinkTable`,
    /// `Restore`, `Internal`.
    pub exception_name: String,
    /// The error, with its causes.
    pub message: String,
    /// Whether the job restarted after it (false: it ended the job).
    pub restarted: bool,
}

impl JobSnapshot {
    /// Puts the parts together.
    pub fn new(
        job_id: JobId,
        status: &JobStatus,
        metrics: MetricsSnapshot,
        checkpoints: Vec<CheckpointRecord>,
    ) -> Self {
        JobSnapshot {
            job_id,
            state: status.into(),
            failure: match status {
                JobStatus::Failed { error } => Some(error.clone()),
                JobStatus::Restarting { cause } => Some(cause.clone()),
                _ => None,
            },
            final_savepoint: match status {
                JobStatus::Finished { savepoint } => Some(savepoint.clone()),
                _ => None,
            },
            metrics,
            checkpoints,
            exceptions: Vec::new(),
            replicas: Vec::new(),
            last_periodic_savepoint: None,
            tables: Vec::new(),
        }
    }

    /// The status these parts describe.
    pub fn status(&self) -> JobStatus {
        match self.state {
            FlinkState::Running => JobStatus::Running,
            FlinkState::Restarting => JobStatus::Restarting {
                cause: self.failure.clone().unwrap_or_default(),
            },
            FlinkState::Finished => JobStatus::Finished {
                savepoint: self.final_savepoint.clone().unwrap_or_default(),
            },
            FlinkState::Canceled => JobStatus::Canceled,
            FlinkState::Failed => JobStatus::Failed {
                error: self.failure.clone().unwrap_or_default(),
            },
        }
    }
}

/// A consistent-enough copy of every metric.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MetricsSnapshot {
    /// Time since the job last became RUNNING (0 while it is not), as
    /// Flink's `uptime`.
    pub uptime_ms: u64,
    /// Time since the current outage (restart) began (0 while running),
    /// as Flink's `downtime`.
    #[serde(default)]
    pub downtime_ms: u64,
    /// End of the last completed window, epoch ms (0: none yet).
    pub last_end_timestamp_ms: u64,
    /// Splits handed out and not finished.
    pub pending_count: u64,
    /// Splits not handed out yet.
    pub unassigned_count: u64,
    /// Finished splits waiting for a checkpoint.
    pub pending_removal_count: u64,
    /// Rows read from the source.
    pub rows_read: u64,
    /// Rows upserted into the sink.
    pub rows_upserted: u64,
    /// Rows deleted from the sink.
    pub rows_deleted: u64,
    /// Bytes read from the source.
    pub bytes_read: u64,
    /// Windows completed.
    pub windows_completed: u64,
    /// Completed full-snapshot windows (1 for a fresh job, 0 after a resume).
    pub snapshot_windows: u64,
    /// How long the last completed window took, ms.
    pub last_window_duration_ms: u64,
    /// How long the last checkpoint took, ms.
    pub last_checkpoint_duration_ms: u64,
    /// Size of the last checkpoint, bytes.
    pub last_checkpoint_size_bytes: u64,
    /// Checkpoints completed.
    pub checkpoints_completed: u64,
    /// Checkpoints failed.
    pub checkpoints_failed: u64,
    /// Restarts after failures.
    pub restarts: u64,
    /// Periodic savepoints written (`job.periodicSavepointInterval`).
    #[serde(default)]
    pub periodic_savepoints_completed: u64,
    /// Periodic savepoints that failed (the job went on).
    #[serde(default)]
    pub periodic_savepoints_failed: u64,
    /// When the last periodic savepoint completed (epoch ms; 0 = none).
    #[serde(default)]
    pub last_periodic_savepoint_ms: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_snapshot_reads_back_as_written() {
        let status = JobStatus::Failed {
            error: "boom".into(),
        };
        let metrics = MetricsSnapshot {
            last_end_timestamp_ms: 42,
            pending_count: 3,
            ..MetricsSnapshot::default()
        };
        let record = CheckpointRecord {
            id: 7,
            path: "file:///tmp/chk-7".into(),
            completed_at_ms: 1,
            duration_ms: 2,
            size_bytes: 3,
            savepoint: false,
        };
        let snap = JobSnapshot::new(JobId::random(), &status, metrics, vec![record]);
        let json = serde_json::to_value(&snap).expect("serialize");
        assert_eq!(json["state"], "FAILED");
        assert_eq!(json["failure"], "boom");
        assert_eq!(json["metrics"]["lastEndTimestampMs"], 42);
        assert_eq!(json["checkpoints"][0]["id"], 7);
        let back: JobSnapshot = serde_json::from_value(json).expect("deserialize");
        assert_eq!(back, snap);
        assert_eq!(back.status(), status);
    }

    #[test]
    fn flink_names_agree_with_the_status() {
        for status in [
            JobStatus::Running,
            JobStatus::Stopping,
            JobStatus::Finished {
                savepoint: "p".into(),
            },
            JobStatus::Canceled,
            JobStatus::Restarting {
                cause: "timed out".into(),
            },
        ] {
            assert_eq!(FlinkState::from(&status).as_str(), status.flink_name());
        }
    }
}
