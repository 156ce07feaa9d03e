//! ferry's own endpoints (not in Flink):
//!
//! - `POST /ferry/jobs` with `{"args": [...]}` (the `ferry run` arguments):
//!   submits a job to a session-mode `ferry server`; answers
//!   `{"jobid": "..."}` like Flink's `/jars/:jarid/run`.
//! - `GET /ferry/jobs/:jobid/live`: one job's live numbers (lag history,
//!   split counts, throughput, snapshot progress, tablet-server write
//!   counters, checkpoints, savepoints); polled by the web page and by
//!   `ferry stop --drain-check`.
//! - `GET /ferry/overview`: the same for every job, plus process facts.

use super::error::{parse_body, ApiError};
use super::jobs::find_job;
use super::AppState;
use crate::registry::{now_ms, JobEntry, Mode};
use crate::run_args::RunCommand;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::Json;
use serde::Deserialize;
use serde_json::{json, Value};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SubmitRequestBody {
    args: Vec<String>,
}

pub async fn submit_job(
    State(state): State<AppState>,
    body: Bytes,
) -> Result<Json<Value>, ApiError> {
    if state.registry.mode == Mode::Application {
        return Err(ApiError::bad_request(
            "this process runs a single job (application mode, started by `ferry run`); start `ferry server` to submit jobs",
        ));
    }
    let req: SubmitRequestBody = parse_body(&body, "SubmitRequestBody")?;
    let args = match crate::run_args::parse(&req.args) {
        Ok(RunCommand::Run(args)) => *args,
        Ok(RunCommand::Help) => return Err(ApiError::bad_request("--help is not a job")),
        Err(e) => return Err(ApiError::bad_request(e.to_string())),
    };
    if args.jobmanager.is_some() {
        return Err(ApiError::bad_request(
            "--jobmanager is a client option; do not send it to the server",
        ));
    }
    let entry = crate::submit::start_job(&state.registry, args)
        .await
        .map_err(|e| ApiError::internal(format!("the job could not be started: {e:#}")))?;
    Ok(Json(json!({ "jobid": entry.id.to_string() })))
}

/// Lag history span sent to the page.
const HISTORY_SPAN_MS: u64 = 5 * 60 * 1000;

pub fn live_json(job: &JobEntry) -> Value {
    let now = now_ms();
    let m = job.handle.metrics().snapshot();
    let status = job.status();
    let rates = job.sampler.rates(5_000);
    let history: Vec<Value> = job
        .sampler
        .history(HISTORY_SPAN_MS)
        .iter()
        .map(|s| json!([s.t, s.lag_ms, s.pending, s.unassigned, s.pending_removal]))
        .collect();
    let records = |r: &ferry_engine::job::CheckpointRecord| {
        json!({
            "id": r.id,
            "path": r.path,
            "completed_at": r.completed_at_ms,
            "duration_ms": r.duration_ms,
            "size_bytes": r.size_bytes,
            "savepoint": r.savepoint,
        })
    };
    let all = job.handle.checkpoint_history();
    let checkpoints: Vec<Value> = all
        .iter()
        .rev()
        .filter(|r| !r.savepoint)
        .take(10)
        .map(records)
        .collect();
    let savepoints: Vec<Value> = all
        .iter()
        .rev()
        .filter(|r| r.savepoint)
        .map(records)
        .collect();
    let in_snapshot = m.last_end_timestamp_ms == 0 && !status.is_terminal();
    json!({
        "jid": job.id.to_string(),
        "name": job.name,
        "state": status.flink_name(),
        "stopping": matches!(status, ferry_engine::JobStatus::Stopping),
        "error": match &status { ferry_engine::JobStatus::Failed { error } => json!(error), _ => Value::Null },
        "final_savepoint": match &status { ferry_engine::JobStatus::Finished { savepoint } => json!(savepoint), _ => Value::Null },
        "table": job.config.table_name,
        "sink_table": job.sink_table_name(),
        "parallelism": job.parallelism,
        "discovery_interval_ms": job.config.discovery_interval.as_millis() as u64,
        "start_time": job.start_time_ms,
        "end_time": job.end_time_ms(),
        "now": now,
        "uptime_ms": if status.is_terminal() { 0 } else { m.uptime_ms },
        "restarts": m.restarts,
        "last_end_timestamp": m.last_end_timestamp_ms,
        "lag_ms": (m.last_end_timestamp_ms > 0).then(|| now.saturating_sub(m.last_end_timestamp_ms)),
        "splits": {
            "pending": m.pending_count,
            "unassigned": m.unassigned_count,
            "pending_removal": m.pending_removal_count,
        },
        "rates": rates,
        "totals": {
            "rows_read": m.rows_read,
            "rows_upserted": m.rows_upserted,
            "rows_deleted": m.rows_deleted,
            "bytes_read": m.bytes_read,
            "windows_completed": m.windows_completed,
            "snapshot_windows": m.snapshot_windows,
            "last_window_duration_ms": m.last_window_duration_ms,
            "checkpoints_completed": m.checkpoints_completed,
            "checkpoints_failed": m.checkpoints_failed,
            "last_checkpoint_duration_ms": m.last_checkpoint_duration_ms,
        },
        "snapshot": {
            "in_progress": in_snapshot,
            "rows_copied": m.rows_upserted,
            "rows_estimate": job.source_rows_estimate,
        },
        "lag_history": history,
        "kudu": {
            "enabled": job.activity.enabled(),
            "poll_interval_ms": job.activity.interval().as_millis() as u64,
            "tables": job.activity.snapshot(),
        },
        "checkpoints": checkpoints,
        "savepoints": savepoints,
        "restored_from": job.restored.as_ref().map(|r| r.path.clone()),
    })
}

pub async fn job_live(
    State(state): State<AppState>,
    Path(jobid): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let job = find_job(&state, &jobid)?;
    Ok(Json(live_json(&job)))
}

pub async fn overview(State(state): State<AppState>) -> Json<Value> {
    let jobs: Vec<Value> = state
        .registry
        .jobs()
        .iter()
        .rev()
        .map(|j| live_json(j))
        .collect();
    Json(json!({
        "version": super::jobs::VERSION,
        "mode": match state.registry.mode { Mode::Application => "application", Mode::Session => "session" },
        "started_at": state.registry.started_at_ms,
        "now": now_ms(),
        "metrics_url": state.metrics_url,
        "jobs": jobs,
    }))
}
