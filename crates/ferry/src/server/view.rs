//! One job's state, read once per request: the engine's status, metrics
//! and checkpoint history together with the registry's facts about the
//! job. The REST handlers, the Prometheus collector and the web page's JSON
//! each build one [`JobView`] per job, so the numbers of one answer come
//! from one instant. Also the names the REST API and the Prometheus
//! endpoint share (operator names, version, job-scope metrics), kept here
//! so neither depends on the other.

use crate::server::registry::JobEntry;
use ferry_engine::job::CheckpointRecord;
use ferry_engine::metrics::MetricsSnapshot;
use ferry_engine::replication::ReplicaSnapshot;
use ferry_engine::status::{ExceptionRecord, JobSnapshot, TableSnapshot};
use ferry_engine::time::now_ms;
use ferry_engine::JobStatus;

/// ferry's version, reported where Flink reports its own.
pub const VERSION: &str = concat!("ferry ", env!("CARGO_PKG_VERSION"));

/// The sink's operator name as Flink shows it for the reference job.
pub const SINK_NAME: &str = "Sink: Writer";

/// The source's operator name as Flink shows it, for a source that calls
/// itself `source` (its connector's `Source::NAME`): `Source: KuduSource`,
/// `Source: KafkaSource`.
pub fn source_operator(source: &str) -> String {
    format!("Source: {source}")
}

/// A job as seen at one instant.
pub struct JobView<'a> {
    /// The job.
    pub job: &'a JobEntry,
    /// Its status.
    pub status: JobStatus,
    /// Its metrics.
    pub metrics: MetricsSnapshot,
    /// Completed checkpoints and savepoints, oldest first.
    pub checkpoints: Vec<CheckpointRecord>,
    /// Failures, newest first.
    pub exceptions: Vec<ExceptionRecord>,
    /// Each state replica (`job.stateReplicas`).
    pub replicas: Vec<ReplicaSnapshot>,
    /// Where the last periodic savepoint went.
    pub last_periodic_savepoint: Option<String>,
    /// Each table of the job, by current source name.
    pub tables: Vec<TableSnapshot>,
    /// The limits and the time spent throttled.
    pub throttle: ferry_engine::throttle::ThrottleSnapshot,
    /// When the view was taken, epoch ms.
    pub now_ms: u64,
    /// Epoch ms, or -1 while the job runs.
    pub end_time_ms: i64,
    /// From start to end (or to now while running).
    pub duration_ms: u64,
}

impl JobEntry {
    /// Reads the job's state once, as the engine's [`JobSnapshot`]: the only
    /// place the REST, Prometheus and web-page code reads the engine handle.
    pub fn view(&self) -> JobView<'_> {
        let snapshot = self.handle.snapshot();
        let status = snapshot.status();
        let JobSnapshot {
            metrics,
            checkpoints,
            exceptions,
            replicas,
            last_periodic_savepoint,
            tables,
            ..
        } = snapshot;
        JobView {
            job: self,
            status,
            metrics,
            checkpoints,
            exceptions,
            replicas,
            last_periodic_savepoint,
            tables,
            throttle: self.handle.throttle(),
            now_ms: now_ms(),
            end_time_ms: self.end_time_ms(),
            duration_ms: self.duration_ms(),
        }
    }
}

impl JobView<'_> {
    /// The source's operator name (`Source: KuduSource`, `Source:
    /// KafkaSource`): the job's own source, as its connector names it.
    pub fn source_operator(&self) -> String {
        source_operator(self.job.source_name)
    }

    /// Flink's state name; SUSPENDED for a job stopped because its lease
    /// was lost while the process stands by for it again (as Flink shows a
    /// job whose JobManager lost leadership).
    pub fn state(&self) -> &'static str {
        if self.job.is_suspended() && self.status.is_terminal() {
            return "SUSPENDED";
        }
        self.status.flink_name()
    }

    /// Whether the job has ended.
    pub fn is_terminal(&self) -> bool {
        self.status.is_terminal()
    }

    /// Whether the job waits to run again after a transient failure.
    pub fn is_restarting(&self) -> bool {
        matches!(self.status, JobStatus::Restarting { .. })
    }

    /// The state of the job's tasks, by Flink's task (execution) state
    /// names: while the job restarts its pipelines are stopped, which
    /// Flink shows as CANCELED tasks until they are deployed again.
    pub fn task_state(&self) -> &'static str {
        if self.is_restarting() {
            "CANCELED"
        } else {
            self.state()
        }
    }

    /// Restarts so far.
    pub fn num_restarts(&self) -> u64 {
        self.metrics.restarts
    }

    /// Since the job last became RUNNING (0 while it is not).
    pub fn uptime_ms(&self) -> u64 {
        self.metrics.uptime_ms
    }

    /// Of the current outage (0 while running).
    pub fn downtime_ms(&self) -> u64 {
        self.metrics.downtime_ms
    }

    /// The newest failure, if any.
    pub fn newest_failure(&self) -> Option<&ExceptionRecord> {
        self.exceptions.first()
    }

    /// now − lastEndTimestamp, once a window completed.
    pub fn lag_ms(&self) -> Option<u64> {
        let end = self.metrics.last_end_timestamp_ms;
        (end > 0).then(|| self.now_ms.saturating_sub(end))
    }

    /// Rows written to the sink (upserts and deletes).
    pub fn rows_written(&self) -> u64 {
        self.metrics.rows_upserted + self.metrics.rows_deleted
    }

    /// Savepoints written so far.
    pub fn savepoint_count(&self) -> u64 {
        self.checkpoints.iter().filter(|r| r.savepoint).count() as u64
    }

    /// Job-scope metric values by Flink's names: the list of
    /// `GET /jobs/:id/metrics`, exported to Prometheus as
    /// `flink_jobmanager_job_<name>`.
    pub fn job_scope_metrics(&self) -> Vec<(&'static str, f64)> {
        let m = &self.metrics;
        // Flink's uptime and downtime gauges: -1 once the job ended.
        let (uptime, downtime) = if self.is_terminal() {
            (-1.0, -1.0)
        } else {
            (m.uptime_ms as f64, m.downtime_ms as f64)
        };
        // Flink's per-state time gauges (`metrics.job.status.enable`
        // CURRENT_TIME, its default): time in the state, 0 outside it.
        let running_time = match self.status {
            JobStatus::Running | JobStatus::Stopping => m.uptime_ms as f64,
            _ => 0.0,
        };
        let restarting_time = if self.is_restarting() {
            m.downtime_ms as f64
        } else {
            0.0
        };
        let restarts = m.restarts as f64;
        let savepoints = self.savepoint_count() as f64;
        let restored_at = self
            .job
            .restored
            .as_ref()
            .map_or(-1.0, |r| r.restored_at_ms as f64);
        vec![
            ("uptime", uptime),
            ("downtime", downtime),
            ("runningTime", running_time),
            ("restartingTime", restarting_time),
            ("numRestarts", restarts),
            // Deprecated in Flink for numRestarts; kept for old dashboards.
            ("fullRestarts", restarts),
            (
                "lastCheckpointDuration",
                m.last_checkpoint_duration_ms as f64,
            ),
            ("lastCheckpointSize", m.last_checkpoint_size_bytes as f64),
            (
                "lastCheckpointFullSize",
                m.last_checkpoint_size_bytes as f64,
            ),
            (
                "numberOfCompletedCheckpoints",
                m.checkpoints_completed as f64 + savepoints,
            ),
            ("numberOfFailedCheckpoints", m.checkpoints_failed as f64),
            ("numberOfInProgressCheckpoints", 0.0),
            (
                "totalNumberOfCheckpoints",
                (m.checkpoints_completed + m.checkpoints_failed) as f64 + savepoints,
            ),
            ("lastCheckpointRestoreTimestamp", restored_at),
        ]
    }
}
