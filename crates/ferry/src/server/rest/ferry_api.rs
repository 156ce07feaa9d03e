//! ferry's own endpoints (not in Flink):
//!
//! - `POST /ferry/jobs` with `{"config": {"job.tableName": "t", …},
//!   "parallelism": 2, "savepoint_path": …, "from_savepoint": …}` (the job's
//!   keys as given to `ferry run`, and its flags): submits a job to a
//!   session-mode `ferry server`, validated as `ferry run` validates its
//!   command line; answers `{"jobid": "..."}` like Flink's
//!   `/jars/:jarid/run`. The argv body of older clients (`{"args": […]}`)
//!   is refused with a message saying so.
//! - `GET /ferry/jobs/:jobid/live`: one job's live numbers (lag history,
//!   split counts, throughput, snapshot progress, tablet-server write
//!   counters, checkpoints, savepoints); polled by the web page and by
//!   `ferry stop --drain-check`; also the state replicas' lag, last
//!   success and failures (`replicas`) and the periodic savepoints
//!   (`periodic_savepoints`), the last verification (`verify`), and for
//!   jobs with a Kafka side the connectors' counters and partition lag
//!   (`kafka`), and the limits and time throttled (`throttle`).
//! - `GET` / `PATCH /ferry/jobs/:jobid/throttle`: the job's limits, read
//!   and changed live (`throttle.rs`).
//! - `GET /ferry/overview`: the same for every job, plus process facts.

use super::error::{parse_body, ApiError};
use super::jobs::find_job;
use super::AppState;
use crate::api::live::{
    CheckpointEntry, FailureEntry, JobLive, KuduTables, PeriodicSavepoints, ProcessOverview,
    SnapshotProgress, SplitCounts, SubmitRequestBody, SubmitResponse, Totals,
};
use crate::server::registry::{JobEntry, Mode};
use crate::server::view::{JobView, VERSION};
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::Json;
use ferry_engine::job::CheckpointRecord;
use ferry_engine::time::now_ms;
use ferry_engine::JobStatus;

pub(super) async fn submit_job(
    State(state): State<AppState>,
    body: Bytes,
) -> Result<Json<SubmitResponse>, ApiError> {
    if state.registry.mode == Mode::Application {
        return Err(ApiError::bad_request(
            "this process runs a single job (application mode, started by `ferry run`); start `ferry server` to submit jobs",
        ));
    }
    if serde_json::from_slice::<serde_json::Value>(&body)
        .is_ok_and(|v| v.get("args").is_some() && v.get("config").is_none())
    {
        return Err(ApiError::bad_request(
            "this server takes a job as its keys (\"config\": {\"job.tableName\": …}, \"parallelism\": …), \
             not as command-line arguments (\"args\"): submit it with a ferry of the same version",
        ));
    }
    let req: SubmitRequestBody = parse_body(&body, "SubmitRequestBody")?;
    let args =
        crate::run_args::from_submission(&req).map_err(|e| ApiError::bad_request(e.to_string()))?;
    let entry = crate::server::submit::start_job(&state.registry, args)
        .await
        .map_err(|e| ApiError::internal(format!("the job could not be started: {e:#}")))?;
    Ok(Json(SubmitResponse {
        jobid: entry.id.to_string(),
    }))
}

/// Lag history span sent to the page.
const HISTORY_SPAN_MS: u64 = 5 * 60 * 1000;

/// Checkpoints listed on the page.
const PAGE_CHECKPOINTS: usize = 10;

/// Failures listed on the page.
const PAGE_FAILURES: usize = 10;

fn checkpoint_entry(r: &CheckpointRecord) -> CheckpointEntry {
    CheckpointEntry {
        id: r.id,
        path: r.path.clone(),
        completed_at: r.completed_at_ms,
        duration_ms: r.duration_ms,
        size_bytes: r.size_bytes,
        savepoint: r.savepoint,
    }
}

fn totals(v: &JobView) -> Totals {
    let m = &v.metrics;
    Totals {
        rows_read: m.rows_read,
        rows_upserted: m.rows_upserted,
        rows_deleted: m.rows_deleted,
        bytes_read: m.bytes_read,
        windows_completed: m.windows_completed,
        snapshot_windows: m.snapshot_windows,
        last_window_duration_ms: m.last_window_duration_ms,
        checkpoints_completed: m.checkpoints_completed,
        checkpoints_failed: m.checkpoints_failed,
        last_checkpoint_duration_ms: m.last_checkpoint_duration_ms,
    }
}

/// The live numbers of one job, from one view plus the job's sampler and
/// tablet-server poller.
pub(super) fn job_live(v: &JobView) -> JobLive {
    let (job, m) = (v.job, &v.metrics);
    let history = job
        .sampler
        .history(HISTORY_SPAN_MS)
        .iter()
        .map(|s| (s.t, s.lag_ms, s.pending, s.unassigned, s.pending_removal))
        .collect();
    let newest = |savepoint: bool| {
        v.checkpoints
            .iter()
            .rev()
            .filter(move |r| r.savepoint == savepoint)
    };
    JobLive {
        jid: job.id.to_string(),
        name: job.name.clone(),
        state: v.state().into(),
        stopping: matches!(v.status, JobStatus::Stopping),
        error: match &v.status {
            JobStatus::Failed { error } => Some(error.clone()),
            _ => None,
        },
        final_savepoint: match &v.status {
            JobStatus::Finished { savepoint } => Some(savepoint.clone()),
            _ => None,
        },
        table: job.config.table_name.clone(),
        sink_table: job.sink_table_name(),
        parallelism: job.parallelism,
        discovery_interval_ms: job.config.discovery_interval.as_millis() as u64,
        start_time: job.start_time_ms,
        end_time: v.end_time_ms,
        now: v.now_ms,
        uptime_ms: if v.is_terminal() { 0 } else { v.uptime_ms() },
        downtime_ms: if v.is_terminal() { 0 } else { v.downtime_ms() },
        restarts: v.num_restarts(),
        failures: failures(v),
        last_end_timestamp: m.last_end_timestamp_ms,
        lag_ms: v.lag_ms(),
        splits: SplitCounts {
            pending: m.pending_count,
            unassigned: m.unassigned_count,
            pending_removal: m.pending_removal_count,
        },
        rates: job.sampler.rates(5_000),
        totals: totals(v),
        snapshot: SnapshotProgress {
            in_progress: m.last_end_timestamp_ms == 0 && !v.is_terminal(),
            rows_copied: m.rows_upserted,
            rows_estimate: job.source_rows_estimate,
        },
        lag_history: history,
        kudu: kudu_tables(job),
        checkpoints: newest(false)
            .take(PAGE_CHECKPOINTS)
            .map(checkpoint_entry)
            .collect(),
        savepoints: newest(true).map(checkpoint_entry).collect(),
        restored_from: job.restored.as_ref().map(|r| r.path.clone()),
        replicas: v.replicas.clone(),
        periodic_savepoints: periodic_savepoints(v),
        verify: job.verify_live(),
        tables: v.tables.clone(),
        kafka: job.kafka.as_ref().map(|k| k.snapshot()),
        throttle: v.throttle.clone(),
    }
}

/// The newest failures, for the web page.
fn failures(v: &JobView) -> Vec<FailureEntry> {
    v.exceptions
        .iter()
        .take(PAGE_FAILURES)
        .map(|e| FailureEntry {
            timestamp: e.timestamp_ms,
            name: e.exception_name.clone(),
            message: e.message.clone(),
            restarted: e.restarted,
        })
        .collect()
}

/// The tablet servers' write counters of the job's tables.
fn kudu_tables(job: &JobEntry) -> KuduTables {
    KuduTables {
        enabled: job.activity.enabled(),
        poll_interval_ms: job.activity.interval().as_millis() as u64,
        tables: job.activity.snapshot(),
        sink_foreign_writes: job.activity.foreign_writes(),
    }
}

/// Periodic savepoints: the interval and how they went.
fn periodic_savepoints(v: &JobView) -> PeriodicSavepoints {
    let m = &v.metrics;
    PeriodicSavepoints {
        interval_ms: v
            .job
            .config
            .periodic_savepoint_interval
            .map_or(0, |d| d.as_millis() as u64),
        completed: m.periodic_savepoints_completed,
        failed: m.periodic_savepoints_failed,
        last_at: m.last_periodic_savepoint_ms,
        last_path: v.last_periodic_savepoint.clone(),
    }
}

pub(super) async fn job_live_handler(
    State(state): State<AppState>,
    Path(jobid): Path<String>,
) -> Result<Json<JobLive>, ApiError> {
    let job = find_job(&state, &jobid)?;
    Ok(Json(job_live(&job.view())))
}

/// `GET /ferry/shards`: the sharded job this process is a worker of.
pub(super) async fn shards(
    State(state): State<AppState>,
) -> Result<Json<crate::api::shards::ShardsOverview>, ApiError> {
    let Some(board) = state.registry.shards.get() else {
        return Err(ApiError::not_found(
            "this process is not a worker of a sharded job (job.shards > 1 with a high-availability type)",
        ));
    };
    Ok(Json(board.overview(&state.registry).await))
}

pub(super) async fn overview(State(state): State<AppState>) -> Json<ProcessOverview> {
    let jobs = state
        .registry
        .jobs()
        .iter()
        .rev()
        .map(|j| job_live(&j.view()))
        .collect();
    Json(ProcessOverview {
        version: VERSION.into(),
        mode: match state.registry.mode {
            Mode::Application => "application",
            Mode::Session => "session",
        }
        .into(),
        started_at: state.registry.started_at_ms,
        now: now_ms(),
        metrics_url: state.metrics_url.clone(),
        jobs,
    })
}
