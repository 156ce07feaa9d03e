//! Flink's REST bodies. Each struct names the endpoint that answers or
//! accepts it; the serde attributes carry Flink's field names, which mix
//! kebab-case, camelCase and snake_case even within one body.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// A count per Flink job / task state name (`RUNNING`, `running`, ...).
pub type StateCounts = BTreeMap<String, usize>;

/// An object Flink defines but ferry always sends empty (`{}`).
pub type EmptyMap = BTreeMap<String, serde_json::Value>;

/// Every error: `{"errors": [message]}` with a 4xx/5xx status.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ErrorResponse {
    pub errors: Vec<String>,
}

/// A body-less acknowledgement, `{}` (`PATCH /jobs/:jobid`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Acknowledged {}

/// `GET /overview`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct ClusterOverview {
    pub taskmanagers: usize,
    pub slots_total: usize,
    pub slots_available: usize,
    pub jobs_running: usize,
    pub jobs_finished: usize,
    pub jobs_cancelled: usize,
    pub jobs_failed: usize,
    pub flink_version: String,
    pub flink_commit: String,
}

/// `GET /config`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct DashboardConfiguration {
    pub refresh_interval: u64,
    pub timezone_name: String,
    pub timezone_offset: i64,
    pub flink_version: String,
    pub flink_revision: String,
    pub features: DashboardFeatures,
}

/// Which web-UI features the server offers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct DashboardFeatures {
    pub web_submit: bool,
    pub web_cancel: bool,
    pub web_rescale: bool,
    pub web_history: bool,
}

/// `GET /jobs`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JobIdsWithStatus {
    pub jobs: Vec<JobIdWithStatus>,
}

/// One entry of [`JobIdsWithStatus`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JobIdWithStatus {
    pub id: String,
    pub status: String,
}

/// `GET /jobs/overview`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MultipleJobsDetails {
    pub jobs: Vec<JobOverview>,
}

/// One job in [`MultipleJobsDetails`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct JobOverview {
    pub jid: String,
    pub name: String,
    pub state: String,
    pub start_time: u64,
    /// -1 while the job runs.
    pub end_time: i64,
    pub duration: u64,
    pub last_modification: u64,
    /// Subtasks per lower-case state name, plus `total`.
    pub tasks: StateCounts,
}

/// `GET /jobs/:jobid/status`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JobStatusBody {
    pub status: String,
}

/// `GET /jobs/:jobid`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct JobDetails {
    pub jid: String,
    pub name: String,
    #[serde(rename = "isStoppable")]
    pub is_stoppable: bool,
    pub state: String,
    pub job_type: String,
    pub start_time: u64,
    pub end_time: i64,
    pub duration: u64,
    #[serde(rename = "maxParallelism")]
    pub max_parallelism: i64,
    pub now: u64,
    /// When the job entered each state (epoch ms, 0 if never).
    pub timestamps: BTreeMap<String, i64>,
    pub vertices: Vec<JobVertex>,
    pub status_counts: StateCounts,
    pub plan: JobPlan,
}

/// One operator of [`JobDetails`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct JobVertex {
    pub id: String,
    pub name: String,
    #[serde(rename = "maxParallelism")]
    pub max_parallelism: usize,
    pub parallelism: usize,
    pub status: String,
    pub start_time: u64,
    pub end_time: i64,
    pub duration: u64,
    /// Subtasks per upper-case state name.
    pub tasks: StateCounts,
    pub metrics: VertexMetrics,
}

/// I/O totals of one [`JobVertex`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct VertexMetrics {
    pub read_bytes: u64,
    pub read_bytes_complete: bool,
    pub write_bytes: u64,
    pub write_bytes_complete: bool,
    pub read_records: u64,
    pub read_records_complete: bool,
    pub write_records: u64,
    pub write_records_complete: bool,
    pub accumulated_backpressured_time: u64,
    pub accumulated_idle_time: u64,
    pub accumulated_busy_time: f64,
}

/// The job graph in [`JobDetails`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JobPlan {
    pub jid: String,
    pub name: String,
    #[serde(rename = "type")]
    pub job_type: String,
    pub nodes: Vec<PlanNode>,
}

/// One node of a [`JobPlan`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PlanNode {
    pub id: String,
    pub parallelism: usize,
    pub operator: String,
    pub operator_strategy: String,
    pub description: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inputs: Option<Vec<PlanInput>>,
    pub optimizer_properties: EmptyMap,
}

/// An edge into a [`PlanNode`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PlanInput {
    pub num: usize,
    pub id: String,
    pub ship_strategy: String,
    pub exchange: String,
}

/// `GET /jobs/:jobid/config`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JobConfigInfo {
    pub jid: String,
    pub name: String,
    #[serde(rename = "execution-config")]
    pub execution_config: ExecutionConfig,
}

/// The `execution-config` of [`JobConfigInfo`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct ExecutionConfig {
    pub execution_mode: String,
    pub restart_strategy: String,
    pub job_parallelism: usize,
    pub object_reuse_mode: bool,
    /// Every effective job key with its value.
    pub user_config: BTreeMap<String, String>,
}

/// `GET /jobs/:jobid/exceptions` (Flink's `JobExceptionsInfoWithHistory`):
/// the legacy fields of Flink 1.x (`root-exception` … `truncated`, kebab-case)
/// and `exceptionHistory` (camelCase), both limited by `?maxExceptions=`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct JobExceptionsInfo {
    /// The newest failure's cause chain; null if the job never failed.
    pub root_exception: Option<String>,
    /// When it happened, epoch ms.
    pub timestamp: Option<i64>,
    /// The failure the tasks are in now (while RESTARTING or FAILED).
    pub all_exceptions: Vec<ExecutionExceptionInfo>,
    /// Whether `all-exceptions` was cut at `maxExceptions`.
    pub truncated: bool,
    #[serde(rename = "exceptionHistory")]
    pub exception_history: ExceptionHistory,
}

/// One entry of the legacy `all-exceptions`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ExecutionExceptionInfo {
    pub exception: String,
    pub task: String,
    /// `(unassigned)`: ferry has no task managers.
    pub location: String,
    pub timestamp: i64,
    #[serde(rename = "taskManagerId")]
    pub task_manager_id: String,
}

/// The `exceptionHistory` of [`JobExceptionsInfo`], newest first.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ExceptionHistory {
    pub entries: Vec<RootExceptionInfo>,
    /// Whether entries were left out (`maxExceptions`).
    pub truncated: bool,
}

/// One failure. `taskName`, `location`, `endpoint` and `taskManagerId`
/// are left out when unknown, as Flink leaves them out for a global
/// failure.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ExceptionInfo {
    pub exception_name: String,
    /// The whole cause chain (ferry has no stack traces to show).
    pub stacktrace: String,
    pub timestamp: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task_name: Option<String>,
    /// Flink's deprecated spelling of `endpoint`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub location: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub endpoint: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task_manager_id: Option<String>,
    pub failure_labels: BTreeMap<String, String>,
}

/// An entry of [`ExceptionHistory`]: a failure and the ones that happened
/// with it (ferry records one failure per restart, so always empty).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RootExceptionInfo {
    #[serde(flatten)]
    pub info: ExceptionInfo,
    #[serde(rename = "concurrentExceptions")]
    pub concurrent_exceptions: Vec<ExceptionInfo>,
}

/// One entry of `GET /jobs/:jobid/metrics` (a JSON array of these):
/// `{"id"}` when listing, `{"id", "value"}` for `?get=`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Metric {
    pub id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
}

/// `POST /jobs/:jobid/savepoints`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SavepointTriggerRequestBody {
    #[serde(
        rename = "target-directory",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub target_directory: Option<String>,
    #[serde(rename = "cancel-job", default)]
    pub cancel_job: bool,
    #[serde(
        rename = "formatType",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub format_type: Option<FormatType>,
    #[serde(rename = "triggerId", default, skip_serializing_if = "Option::is_none")]
    pub trigger_id: Option<String>,
}

/// `POST /jobs/:jobid/stop` (camelCase `targetDirectory`, unlike the
/// savepoint trigger's kebab-case).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StopWithSavepointRequestBody {
    #[serde(
        rename = "targetDirectory",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub target_directory: Option<String>,
    #[serde(default)]
    pub drain: bool,
    #[serde(
        rename = "formatType",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub format_type: Option<FormatType>,
    #[serde(rename = "triggerId", default, skip_serializing_if = "Option::is_none")]
    pub trigger_id: Option<String>,
}

/// Accepted for compatibility; ferry has one savepoint format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum FormatType {
    Canonical,
    Native,
}

/// `POST /jobs/:jobid/checkpoints`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CheckpointTriggerRequestBody {
    #[serde(
        rename = "checkpointType",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub checkpoint_type: Option<CheckpointType>,
    #[serde(rename = "triggerId", default, skip_serializing_if = "Option::is_none")]
    pub trigger_id: Option<String>,
}

/// Accepted for compatibility; every ferry checkpoint is complete.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum CheckpointType {
    Configured,
    Full,
    Incremental,
}

/// 202 answer of every trigger (savepoint, stop, checkpoint).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TriggerResponse {
    #[serde(rename = "request-id")]
    pub request_id: String,
}

/// `GET /jobs/:jobid/savepoints/:triggerid` and
/// `GET /jobs/:jobid/checkpoints/:triggerid`: `operation` is null while
/// the operation runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AsynchronousOperationResult<O> {
    pub status: QueueStatus,
    pub operation: Option<O>,
}

/// Where an asynchronous operation is.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct QueueStatus {
    pub id: QueueStatusId,
}

/// `IN_PROGRESS` or `COMPLETED` (successfully or not).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum QueueStatusId {
    InProgress,
    Completed,
}

/// A savepoint's result: its `location`, or `failure-cause` (kebab-case).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SavepointInfo {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub location: Option<String>,
    #[serde(
        rename = "failure-cause",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub failure_cause: Option<FailureCause>,
}

/// A checkpoint's result: its `checkpointId`, or `failureCause`
/// (camelCase).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CheckpointInfo {
    #[serde(
        rename = "checkpointId",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub checkpoint_id: Option<u64>,
    #[serde(
        rename = "failureCause",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub failure_cause: Option<FailureCause>,
}

/// An operation result that may carry a failure.
pub trait OperationOutcome {
    fn failure(&self) -> Option<&FailureCause>;
}

impl OperationOutcome for SavepointInfo {
    fn failure(&self) -> Option<&FailureCause> {
        self.failure_cause.as_ref()
    }
}

impl OperationOutcome for CheckpointInfo {
    fn failure(&self) -> Option<&FailureCause> {
        self.failure_cause.as_ref()
    }
}

/// Why an operation failed (Flink's `SerializedThrowable` in JSON).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct FailureCause {
    pub class: String,
    pub stack_trace: String,
    pub serialized_throwable: Option<String>,
    pub message: String,
}

impl FailureCause {
    /// A failure of one of ferry's operations with this message.
    pub fn operation_failed(message: &str) -> Self {
        FailureCause {
            class: "ferry.OperationFailed".into(),
            stack_trace: message.into(),
            serialized_throwable: None,
            message: message.into(),
        }
    }
}

/// `GET /jobs/:jobid/checkpoints`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CheckpointingStatistics {
    pub counts: CheckpointCounts,
    pub summary: CheckpointSummary,
    pub latest: LatestCheckpoints,
    /// Newest first.
    pub history: Vec<CheckpointStatistics>,
}

/// The `counts` of [`CheckpointingStatistics`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CheckpointCounts {
    pub restored: u64,
    pub total: u64,
    pub in_progress: u64,
    pub completed: u64,
    pub failed: u64,
}

/// The `summary` of [`CheckpointingStatistics`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CheckpointSummary {
    pub checkpointed_size: StatsSummary,
    pub state_size: StatsSummary,
    pub end_to_end_duration: StatsSummary,
    pub alignment_buffered: StatsSummary,
    pub processed_data: StatsSummary,
    pub persisted_data: StatsSummary,
}

/// Min / max / average (integers) and percentiles (floats) of a value.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct StatsSummary {
    pub min: u64,
    pub max: u64,
    pub avg: u64,
    pub p50: f64,
    pub p90: f64,
    pub p95: f64,
    pub p99: f64,
    pub p999: f64,
}

/// The `latest` of [`CheckpointingStatistics`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LatestCheckpoints {
    pub completed: Option<CheckpointStatistics>,
    pub savepoint: Option<CheckpointStatistics>,
    /// Always null: ferry keeps no record of failed checkpoints.
    pub failed: Option<CheckpointStatistics>,
    pub restored: Option<RestoredCheckpoint>,
}

/// One completed checkpoint or savepoint (`className` `completed`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CheckpointStatistics {
    #[serde(rename = "className")]
    pub class_name: String,
    pub id: u64,
    pub status: String,
    pub is_savepoint: bool,
    #[serde(rename = "savepointFormat")]
    pub savepoint_format: Option<String>,
    pub checkpoint_type: String,
    pub trigger_timestamp: u64,
    pub latest_ack_timestamp: u64,
    pub state_size: u64,
    pub checkpointed_size: u64,
    pub end_to_end_duration: u64,
    pub alignment_buffered: u64,
    pub processed_data: u64,
    pub persisted_data: u64,
    pub num_subtasks: usize,
    pub num_acknowledged_subtasks: usize,
    /// Per-vertex details; ferry reports none.
    pub tasks: EmptyMap,
    pub external_path: String,
    pub discarded: bool,
}

/// The checkpoint or savepoint the job was restored from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RestoredCheckpoint {
    pub id: u64,
    pub restore_timestamp: u64,
    pub is_savepoint: bool,
    pub external_path: String,
}

/// `GET /jobs/:jobid/checkpoints/config`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CheckpointConfigInfo {
    pub mode: String,
    pub interval: u64,
    pub timeout: u64,
    pub min_pause: u64,
    pub max_concurrent: u64,
    pub externalization: Externalization,
    pub state_backend: String,
    pub checkpoint_storage: String,
    pub unaligned_checkpoints: bool,
    pub tolerable_failed_checkpoints: u64,
    pub aligned_checkpoint_timeout: u64,
    pub checkpoints_after_tasks_finish: bool,
    pub state_changelog_enabled: bool,
    pub changelog_periodic_materialization_interval: i64,
    pub changelog_storage: String,
    pub checkpoints_directory: String,
    pub checkpoints_retained: usize,
    pub savepoint_directory: Option<String>,
}

/// Whether checkpoints outlive the job.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Externalization {
    pub enabled: bool,
    pub delete_on_cancellation: bool,
}

#[cfg(test)]
#[path = "flink_tests.rs"]
mod tests;
