//! Flink-shaped job endpoints. Field names, status codes and error shapes
//! follow Flink's REST API (`rest_v1_dispatcher.yml`), so scripts written
//! for `flink` work unchanged; values come from the engine.

use super::error::{parse_body, ApiError};
use super::AppState;
use crate::registry::{now_ms, JobEntry, OpKind, OpState, OpValue};
use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::Json;
use ferry_engine::checkpoint::{JobId, StorageLocation};
use ferry_engine::{JobStatus, StopMode};
use serde::Deserialize;
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::Duration;

/// ferry's version, reported where Flink reports its own.
pub const VERSION: &str = concat!("ferry ", env!("CARGO_PKG_VERSION"));

/// Operator names as Flink shows them for the reference job.
pub const SOURCE_NAME: &str = "Source: KuduSource";
pub const SINK_NAME: &str = "Sink: Writer";

/// Every Flink job / task state name, for count maps.
const STATES: [&str; 11] = [
    "INITIALIZING",
    "CREATED",
    "SCHEDULED",
    "DEPLOYING",
    "RUNNING",
    "FINISHED",
    "CANCELING",
    "CANCELED",
    "FAILED",
    "RECONCILING",
    "SUSPENDED",
];

type ApiResult = Result<Json<Value>, ApiError>;

pub(super) fn find_job(state: &AppState, jobid: &str) -> Result<Arc<JobEntry>, ApiError> {
    let id: JobId = jobid.parse().map_err(|_| {
        ApiError::bad_request(format!(
            "Invalid job id '{jobid}': expected 32 hexadecimal characters"
        ))
    })?;
    state
        .registry
        .get(&id)
        .ok_or_else(|| ApiError::not_found(format!("Job {id} not found")))
}

fn vertex_id(name: &str) -> String {
    // A stable id per operator name (FNV-1a, 128 bits as two halves).
    let mut a: u64 = 0xcbf2_9ce4_8422_2325;
    let mut b: u64 = 0x8422_2325_cbf2_9ce4;
    for byte in name.bytes() {
        a = (a ^ byte as u64).wrapping_mul(0x0100_0000_01b3);
        b = (b ^ byte as u64).wrapping_mul(0x0000_0100_0000_01b3 ^ 0x1f);
    }
    format!("{a:016x}{b:016x}")
}

fn task_counts(job: &JobEntry, upper: bool) -> Value {
    let state = job.status().flink_name();
    let mut m = serde_json::Map::new();
    for s in STATES {
        if s == "SUSPENDED" {
            continue;
        }
        let n = if s == state { job.parallelism } else { 0 };
        let key = if upper {
            s.to_string()
        } else {
            s.to_lowercase()
        };
        m.insert(key, json!(n));
    }
    if !upper {
        m.insert("total".into(), json!(job.parallelism * 2));
        // Two operators, `parallelism` subtasks each.
        if let Some(v) = m.get_mut(&state.to_lowercase()) {
            *v = json!(job.parallelism * 2);
        }
    }
    Value::Object(m)
}

fn job_overview_entry(job: &JobEntry) -> Value {
    json!({
        "jid": job.id.to_string(),
        "name": job.name,
        "state": job.status().flink_name(),
        "start-time": job.start_time_ms,
        "end-time": job.end_time_ms(),
        "duration": job.duration_ms(),
        "last-modification": if job.end_time_ms() > 0 { job.end_time_ms() as u64 } else { job.start_time_ms },
        "tasks": task_counts(job, false),
    })
}

pub async fn cluster_overview(State(state): State<AppState>) -> Json<Value> {
    let counts = state.registry.state_counts();
    let get = |k: &str| counts.get(k).copied().unwrap_or(0);
    let slots: usize = state
        .registry
        .jobs()
        .iter()
        .filter(|j| !j.status().is_terminal())
        .map(|j| j.parallelism)
        .sum();
    Json(json!({
        "taskmanagers": 1,
        "slots-total": slots,
        "slots-available": 0,
        "jobs-running": get("RUNNING"),
        "jobs-finished": get("FINISHED"),
        "jobs-cancelled": get("CANCELED"),
        "jobs-failed": get("FAILED"),
        "flink-version": VERSION,
        "flink-commit": option_env!("FERRY_GIT_COMMIT").unwrap_or("unknown"),
    }))
}

pub async fn dashboard_config(State(_): State<AppState>) -> Json<Value> {
    Json(json!({
        "refresh-interval": 3000,
        "timezone-name": "Coordinated Universal Time",
        "timezone-offset": 0,
        "flink-version": VERSION,
        "flink-revision": option_env!("FERRY_GIT_COMMIT").unwrap_or("unknown"),
        "features": {
            "web-submit": false,
            "web-cancel": true,
            "web-rescale": false,
            "web-history": false,
        },
    }))
}

pub async fn list_jobs(State(state): State<AppState>) -> Json<Value> {
    let jobs: Vec<Value> = state
        .registry
        .jobs()
        .iter()
        .map(|j| json!({ "id": j.id.to_string(), "status": j.status().flink_name() }))
        .collect();
    Json(json!({ "jobs": jobs }))
}

pub async fn jobs_overview(State(state): State<AppState>) -> Json<Value> {
    let jobs: Vec<Value> = state
        .registry
        .jobs()
        .iter()
        .map(|j| job_overview_entry(j))
        .collect();
    Json(json!({ "jobs": jobs }))
}

pub async fn job_status(State(state): State<AppState>, Path(jobid): Path<String>) -> ApiResult {
    let job = find_job(&state, &jobid)?;
    Ok(Json(json!({ "status": job.status().flink_name() })))
}

pub async fn job_details(State(state): State<AppState>, Path(jobid): Path<String>) -> ApiResult {
    let job = find_job(&state, &jobid)?;
    let status = job.status();
    let m = job.handle.metrics().snapshot();
    let now = now_ms();
    let mut timestamps = serde_json::Map::new();
    for s in STATES {
        let t = match s {
            "INITIALIZING" | "CREATED" | "RUNNING" => job.start_time_ms as i64,
            other if other == status.flink_name() && status.is_terminal() => job.end_time_ms(),
            _ => 0,
        };
        timestamps.insert(s.to_string(), json!(t));
    }
    let written = m.rows_upserted + m.rows_deleted;
    let vertex = |name: &str, read: (u64, u64), write: (u64, u64)| {
        json!({
            "id": vertex_id(name),
            "name": name,
            "maxParallelism": 128,
            "parallelism": job.parallelism,
            "status": status.flink_name(),
            "start-time": job.start_time_ms,
            "end-time": job.end_time_ms(),
            "duration": job.duration_ms(),
            "tasks": task_counts(&job, true),
            "metrics": {
                "read-bytes": read.1, "read-bytes-complete": true,
                "write-bytes": write.1, "write-bytes-complete": true,
                "read-records": read.0, "read-records-complete": true,
                "write-records": write.0, "write-records-complete": true,
                "accumulated-backpressured-time": 0,
                "accumulated-idle-time": 0,
                "accumulated-busy-time": 0.0,
            },
        })
    };
    let source = vertex(SOURCE_NAME, (0, 0), (m.rows_read, m.bytes_read));
    let sink = vertex(SINK_NAME, (written, m.bytes_read), (0, 0));
    let mut status_counts = serde_json::Map::new();
    for s in STATES {
        if s != "SUSPENDED" {
            status_counts.insert(
                s.to_string(),
                json!(if s == status.flink_name() { 2 } else { 0 }),
            );
        }
    }
    Ok(Json(json!({
        "jid": job.id.to_string(),
        "name": job.name,
        "isStoppable": false,
        "state": status.flink_name(),
        "job-type": "STREAMING",
        "start-time": job.start_time_ms,
        "end-time": job.end_time_ms(),
        "duration": job.duration_ms(),
        "maxParallelism": -1,
        "now": now,
        "timestamps": timestamps,
        "vertices": [source, sink],
        "status-counts": status_counts,
        "plan": {
            "jid": job.id.to_string(),
            "name": job.name,
            "type": "STREAMING",
            "nodes": [
                {
                    "id": vertex_id(SOURCE_NAME),
                    "parallelism": job.parallelism,
                    "operator": "",
                    "operator_strategy": "",
                    "description": format!("{SOURCE_NAME} ({})", job.config.table_name),
                    "optimizer_properties": {},
                },
                {
                    "id": vertex_id(SINK_NAME),
                    "parallelism": job.parallelism,
                    "operator": "",
                    "operator_strategy": "",
                    "description": format!("{SINK_NAME} ({})", job.sink_table_name()),
                    "inputs": [{
                        "num": 0,
                        "id": vertex_id(SOURCE_NAME),
                        "ship_strategy": "FORWARD",
                        "exchange": "pipelined_bounded",
                    }],
                    "optimizer_properties": {},
                },
            ],
        },
    })))
}

pub async fn job_config(State(state): State<AppState>, Path(jobid): Path<String>) -> ApiResult {
    let job = find_job(&state, &jobid)?;
    let mut user = serde_json::Map::new();
    for (key, value) in job.config.effective_values() {
        user.insert(key.name().to_string(), json!(value));
    }
    if let Some(dir) = &job.savepoint_dir {
        user.insert(
            "execution.checkpointing.savepoint-dir".into(),
            json!(dir.to_uri()),
        );
    }
    Ok(Json(json!({
        "jid": job.id.to_string(),
        "name": job.name,
        "execution-config": {
            "execution-mode": "PIPELINED",
            "restart-strategy": "Retry transient errors with exponential backoff; fail on fatal errors",
            "job-parallelism": job.parallelism,
            "object-reuse-mode": false,
            "user-config": user,
        },
    })))
}

pub async fn job_exceptions(State(state): State<AppState>, Path(jobid): Path<String>) -> ApiResult {
    let job = find_job(&state, &jobid)?;
    let (root, ts, entries) = match job.status() {
        JobStatus::Failed { error } => {
            let t = job.end_time_ms();
            let entry = json!({
                "exceptionName": "ferry.JobFailure",
                "stacktrace": error,
                "timestamp": t,
                "taskName": null,
                "location": null,
                "taskManagerId": null,
                "failureLabels": {},
                "concurrentExceptions": [],
            });
            (json!(error), json!(t), vec![entry])
        }
        _ => (Value::Null, Value::Null, vec![]),
    };
    Ok(Json(json!({
        "root-exception": root,
        "timestamp": ts,
        "all-exceptions": [],
        "truncated": false,
        "exceptionHistory": { "entries": entries, "truncated": false },
    })))
}

/// Job-scope metric values by Flink's names (`GET /jobs/:id/metrics`).
pub fn job_scope_metrics(job: &JobEntry) -> Vec<(&'static str, f64)> {
    let m = job.handle.metrics().snapshot();
    let status = job.status();
    let uptime = match status {
        JobStatus::Running | JobStatus::Stopping => m.uptime_ms as f64,
        _ => -1.0,
    };
    let savepoints = job.savepoints().len() as f64;
    vec![
        ("uptime", uptime),
        ("downtime", 0.0),
        ("numRestarts", m.restarts as f64),
        ("fullRestarts", m.restarts as f64),
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
        (
            "lastCheckpointRestoreTimestamp",
            job.restored
                .as_ref()
                .map_or(-1.0, |r| r.restored_at_ms as f64),
        ),
    ]
}

#[derive(Deserialize)]
pub struct MetricsQuery {
    get: Option<String>,
}

pub async fn job_metrics(
    State(state): State<AppState>,
    Path(jobid): Path<String>,
    Query(q): Query<MetricsQuery>,
) -> ApiResult {
    let job = find_job(&state, &jobid)?;
    let all = job_scope_metrics(&job);
    let out: Vec<Value> = match q.get {
        None => all.iter().map(|(n, _)| json!({ "id": n })).collect(),
        Some(list) => {
            let wanted: Vec<&str> = list.split(',').map(str::trim).collect();
            all.iter()
                .filter(|(n, _)| wanted.contains(n))
                .map(|(n, v)| json!({ "id": n, "value": format_metric(*v) }))
                .collect()
        }
    };
    Ok(Json(Value::Array(out)))
}

fn format_metric(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 9.0e15 {
        format!("{}", v as i64)
    } else {
        v.to_string()
    }
}

#[derive(Deserialize)]
pub struct CancelQuery {
    mode: Option<String>,
}

pub async fn cancel_job(
    State(state): State<AppState>,
    Path(jobid): Path<String>,
    Query(q): Query<CancelQuery>,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    let job = find_job(&state, &jobid)?;
    match q.mode.as_deref().map(str::to_ascii_lowercase).as_deref() {
        None | Some("cancel") => {}
        Some("stop") => {
            return Err(ApiError::bad_request(
                "mode=stop is not supported; use POST /jobs/:jobid/stop (stop with a savepoint)",
            ))
        }
        Some(other) => {
            return Err(ApiError::bad_request(format!(
                "Invalid value '{other}' for query parameter mode: expected 'cancel'"
            )))
        }
    }
    match job.status() {
        JobStatus::Canceled => {}
        s if s.is_terminal() => {
            return Err(ApiError::conflict(format!(
                "Job cancellation failed because the job has already reached another terminal state ({}).",
                s.flink_name()
            )))
        }
        _ => {
            job.handle.cancel().await;
            // Answer once the cancel took effect, so a status read right
            // after sees CANCELED.
            let _ = tokio::time::timeout(Duration::from_secs(10), job.handle.wait()).await;
        }
    }
    Ok((StatusCode::ACCEPTED, Json(json!({}))))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SavepointTriggerRequestBody {
    #[serde(rename = "target-directory")]
    target_directory: Option<String>,
    #[serde(rename = "cancel-job", default)]
    cancel_job: bool,
    #[serde(rename = "formatType")]
    format_type: Option<FormatType>,
    #[serde(rename = "triggerId")]
    trigger_id: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct StopWithSavepointRequestBody {
    #[serde(rename = "targetDirectory")]
    target_directory: Option<String>,
    #[serde(default)]
    drain: bool,
    #[serde(rename = "formatType")]
    format_type: Option<FormatType>,
    #[serde(rename = "triggerId")]
    trigger_id: Option<String>,
}

/// Accepted for compatibility; ferry has one savepoint format.
#[derive(Deserialize, Clone, Copy)]
#[serde(rename_all = "UPPERCASE")]
enum FormatType {
    Canonical,
    Native,
}

fn check_trigger_id(id: &Option<String>) -> Result<(), ApiError> {
    match id {
        Some(t) if t.len() != 32 || !t.bytes().all(|b| b.is_ascii_hexdigit()) => {
            Err(ApiError::bad_request(format!(
                "Invalid triggerId '{t}': expected 32 hexadecimal characters"
            )))
        }
        _ => Ok(()),
    }
}

fn target_dir(
    job: &JobEntry,
    given: Option<&str>,
    field: &str,
) -> Result<Option<StorageLocation>, ApiError> {
    match given {
        Some(d) => StorageLocation::parse(d)
            .map(Some)
            .map_err(|e| ApiError::bad_request(format!("Invalid {field}: {e}"))),
        None if job.savepoint_dir.is_none() => Err(ApiError::bad_request(format!(
            "Config key [execution.checkpointing.savepoint-dir] is not set (ferry run --savepointPath). Property [{field}] must be provided."
        ))),
        None => Ok(None),
    }
}

pub async fn trigger_savepoint(
    State(state): State<AppState>,
    Path(jobid): Path<String>,
    body: Bytes,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    let job = find_job(&state, &jobid)?;
    let req: SavepointTriggerRequestBody = parse_body(&body, "SavepointTriggerRequestBody")?;
    let _ = req
        .format_type
        .map(|f| matches!(f, FormatType::Canonical | FormatType::Native));
    check_trigger_id(&req.trigger_id)?;
    let dir = target_dir(&job, req.target_directory.as_deref(), "target-directory")?;
    let (tid, new) = job.begin_operation(OpKind::Savepoint, req.trigger_id);
    if new {
        let job = job.clone();
        let tid = tid.clone();
        let cancel = req.cancel_job;
        tokio::spawn(async move {
            let result = job.handle.savepoint(dir).await;
            if result.is_ok() && cancel {
                job.handle.cancel().await;
                job.handle.wait().await;
            }
            job.finish_operation(&tid, result.map(OpValue::Location));
        });
    }
    Ok((StatusCode::ACCEPTED, Json(json!({ "request-id": tid }))))
}

/// How long `drain: true` waits for the open window to finish.
const DRAIN_TIMEOUT: Duration = ferry_engine::job::DEFAULT_DRAIN_TIMEOUT;

pub async fn stop_job(
    State(state): State<AppState>,
    Path(jobid): Path<String>,
    body: Bytes,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    let job = find_job(&state, &jobid)?;
    let req: StopWithSavepointRequestBody = parse_body(&body, "StopWithSavepointRequestBody")?;
    let _ = req
        .format_type
        .map(|f| matches!(f, FormatType::Canonical | FormatType::Native));
    check_trigger_id(&req.trigger_id)?;
    let dir = target_dir(&job, req.target_directory.as_deref(), "targetDirectory")?;
    let (tid, new) = job.begin_operation(OpKind::Savepoint, req.trigger_id);
    if new {
        let job = job.clone();
        let tid = tid.clone();
        // ferry has no watermarks; "drain" finishes the open window first,
        // so the savepoint holds no splits in progress.
        let mode = if req.drain {
            StopMode::drain(dir, DRAIN_TIMEOUT)
        } else {
            StopMode::savepoint(dir)
        };
        tokio::spawn(async move {
            let result = job.handle.stop(mode).await;
            job.finish_operation(&tid, result.map(OpValue::Location));
        });
    }
    Ok((StatusCode::ACCEPTED, Json(json!({ "request-id": tid }))))
}

fn operation_json(state: OpState) -> Value {
    match state {
        OpState::InProgress => json!({ "status": { "id": "IN_PROGRESS" }, "operation": null }),
        OpState::Done(Ok(OpValue::Location(location))) => {
            json!({ "status": { "id": "COMPLETED" }, "operation": { "location": location } })
        }
        OpState::Done(Ok(OpValue::CheckpointId(id))) => {
            json!({ "status": { "id": "COMPLETED" }, "operation": { "checkpointId": id } })
        }
        OpState::Done(Err(message)) => json!({
            "status": { "id": "COMPLETED" },
            "operation": { "failure-cause": failure_cause(&message), "failureCause": failure_cause(&message) },
        }),
    }
}

fn failure_cause(message: &str) -> Value {
    json!({
        "class": "ferry.OperationFailed",
        "stack-trace": message,
        "serialized-throwable": null,
        "message": message,
    })
}

pub async fn savepoint_status(
    State(state): State<AppState>,
    Path((jobid, triggerid)): Path<(String, String)>,
) -> ApiResult {
    let job = find_job(&state, &jobid)?;
    let op = job
        .operation(OpKind::Savepoint, &triggerid)
        .ok_or_else(|| {
            ApiError::not_found(format!(
                "There is no savepoint operation with triggerId={triggerid} for job {}.",
                job.id
            ))
        })?;
    let mut v = operation_json(op);
    // Savepoint results carry only `failure-cause` (kebab case).
    if let Some(o) = v.get_mut("operation").and_then(|o| o.as_object_mut()) {
        o.remove("failureCause");
    }
    Ok(Json(v))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CheckpointTriggerRequestBody {
    #[serde(rename = "checkpointType")]
    checkpoint_type: Option<CheckpointType>,
    #[serde(rename = "triggerId")]
    trigger_id: Option<String>,
}

#[derive(Deserialize, Clone, Copy)]
#[serde(rename_all = "UPPERCASE")]
enum CheckpointType {
    Configured,
    Full,
    Incremental,
}

pub async fn trigger_checkpoint(
    State(state): State<AppState>,
    Path(jobid): Path<String>,
    body: Bytes,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    let job = find_job(&state, &jobid)?;
    let req: CheckpointTriggerRequestBody = parse_body(&body, "CheckpointTriggerRequestBody")?;
    let _ = req.checkpoint_type.map(|t| {
        matches!(
            t,
            CheckpointType::Configured | CheckpointType::Full | CheckpointType::Incremental
        )
    });
    check_trigger_id(&req.trigger_id)?;
    let (tid, new) = job.begin_operation(OpKind::Checkpoint, req.trigger_id);
    if new {
        let job = job.clone();
        let tid = tid.clone();
        tokio::spawn(async move {
            let result = job.handle.checkpoint().await;
            job.finish_operation(&tid, result.map(OpValue::CheckpointId));
        });
    }
    Ok((StatusCode::ACCEPTED, Json(json!({ "request-id": tid }))))
}

pub async fn checkpoint_status(
    State(state): State<AppState>,
    Path((jobid, triggerid)): Path<(String, String)>,
) -> ApiResult {
    let job = find_job(&state, &jobid)?;
    let op = job
        .operation(OpKind::Checkpoint, &triggerid)
        .ok_or_else(|| {
            ApiError::not_found(format!(
                "There is no checkpoint operation with triggerId={triggerid} for job {}.",
                job.id
            ))
        })?;
    let mut v = operation_json(op);
    if let Some(o) = v.get_mut("operation").and_then(|o| o.as_object_mut()) {
        o.remove("failure-cause");
    }
    Ok(Json(v))
}

fn stats(values: &[u64]) -> Value {
    if values.is_empty() {
        return json!({ "min": 0, "max": 0, "avg": 0, "p50": 0.0, "p90": 0.0, "p95": 0.0, "p99": 0.0, "p999": 0.0 });
    }
    let mut v = values.to_vec();
    v.sort_unstable();
    let q = |p: f64| v[((v.len() - 1) as f64 * p).round() as usize] as f64;
    json!({
        "min": v[0],
        "max": v[v.len() - 1],
        "avg": v.iter().sum::<u64>() / v.len() as u64,
        "p50": q(0.5), "p90": q(0.9), "p95": q(0.95), "p99": q(0.99), "p999": q(0.999),
    })
}

/// Flink keeps this many checkpoints in `history` (`web.checkpoints.history`).
const HISTORY_SIZE: usize = 10;

pub async fn checkpoint_stats(
    State(state): State<AppState>,
    Path(jobid): Path<String>,
) -> ApiResult {
    let job = find_job(&state, &jobid)?;
    let m = job.handle.metrics().snapshot();
    let history = job.handle.checkpoint_history();
    let savepoints = history.iter().filter(|r| r.savepoint).count() as u64;
    let entry = |r: &ferry_engine::job::CheckpointRecord| {
        json!({
            "className": "completed",
            "id": r.id,
            "status": "COMPLETED",
            "is_savepoint": r.savepoint,
            "savepointFormat": if r.savepoint { json!("CANONICAL") } else { Value::Null },
            "checkpoint_type": if r.savepoint { "SAVEPOINT" } else { "CHECKPOINT" },
            "trigger_timestamp": r.completed_at_ms.saturating_sub(r.duration_ms),
            "latest_ack_timestamp": r.completed_at_ms,
            "state_size": r.size_bytes,
            "checkpointed_size": r.size_bytes,
            "end_to_end_duration": r.duration_ms,
            "alignment_buffered": 0,
            "processed_data": 0,
            "persisted_data": 0,
            "num_subtasks": job.parallelism * 2,
            "num_acknowledged_subtasks": job.parallelism * 2,
            "tasks": {},
            "external_path": r.path,
            "discarded": false,
        })
    };
    let latest_completed = history.iter().rev().find(|r| !r.savepoint).map(entry);
    let latest_savepoint = history.iter().rev().find(|r| r.savepoint).map(entry);
    let restored = job.restored.as_ref().map(|r| {
        json!({
            "id": r.checkpoint_id,
            "restore_timestamp": r.restored_at_ms,
            "is_savepoint": r.is_savepoint,
            "external_path": r.path,
        })
    });
    let sizes: Vec<u64> = history.iter().map(|r| r.size_bytes).collect();
    let durations: Vec<u64> = history.iter().map(|r| r.duration_ms).collect();
    let zeros = stats(&[]);
    let recent: Vec<Value> = history.iter().rev().take(HISTORY_SIZE).map(entry).collect();
    Ok(Json(json!({
        "counts": {
            "restored": u64::from(job.restored.is_some()),
            "total": m.checkpoints_completed + m.checkpoints_failed + savepoints,
            "in_progress": 0,
            "completed": m.checkpoints_completed + savepoints,
            "failed": m.checkpoints_failed,
        },
        "summary": {
            "checkpointed_size": stats(&sizes),
            "state_size": stats(&sizes),
            "end_to_end_duration": stats(&durations),
            "alignment_buffered": zeros.clone(),
            "processed_data": zeros.clone(),
            "persisted_data": zeros,
        },
        "latest": {
            "completed": latest_completed,
            "savepoint": latest_savepoint,
            "failed": null,
            "restored": restored,
        },
        "history": recent,
    })))
}

pub async fn checkpoint_config(
    State(state): State<AppState>,
    Path(jobid): Path<String>,
) -> ApiResult {
    let job = find_job(&state, &jobid)?;
    let c = &job.config;
    Ok(Json(json!({
        "mode": "at_least_once",
        "interval": c.checkpointing_interval.as_millis() as u64,
        "timeout": 600_000,
        "min_pause": 0,
        "max_concurrent": 1,
        "externalization": { "enabled": true, "delete_on_cancellation": false },
        "state_backend": "ferry",
        "checkpoint_storage": "FileSystemCheckpointStorage",
        "unaligned_checkpoints": false,
        "tolerable_failed_checkpoints": 0,
        "aligned_checkpoint_timeout": 0,
        "checkpoints_after_tasks_finish": true,
        "state_changelog_enabled": false,
        "changelog_periodic_materialization_interval": -1,
        "changelog_storage": "memory",
        "checkpoints_directory": c.checkpoints_directory.to_uri(),
        "checkpoints_retained": c.checkpoints_retained.get(),
        "savepoint_directory": job.savepoint_dir.as_ref().map(|d| d.to_uri()),
    })))
}
