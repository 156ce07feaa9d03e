//! Flink-shaped endpoints of one job: details, status, config, metrics,
//! cancel and stop (exceptions are in [`super::exceptions`]). Field names, status codes and error shapes
//! follow Flink's REST API (`rest_v1_dispatcher.yml`), so scripts written
//! for `flink` work unchanged; values come from one [`JobView`] per request.

use super::error::{parse_body, ApiError};
use super::savepoints::{check_trigger_id, target_dir};
use super::AppState;
use crate::api::flink::{
    Acknowledged, ExecutionConfig, FormatType, JobConfigInfo, JobDetails, JobPlan, JobStatusBody,
    JobVertex, Metric, PlanInput, PlanNode, StateCounts, StopWithSavepointRequestBody,
    TriggerResponse, VertexMetrics,
};
use crate::server::registry::{JobEntry, OpKind, OpValue};
use crate::server::view::{JobView, SINK_NAME};
use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::Json;
use ferry_engine::checkpoint::JobId;
use ferry_engine::config::RestartConfig;
use ferry_engine::{JobStatus, StopMode};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

/// Flink's task (execution) state names, for count maps.
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

/// Flink's job state names, for the `timestamps` of job details.
const JOB_STATES: [&str; 11] = [
    "INITIALIZING",
    "CREATED",
    "RUNNING",
    "FAILING",
    "FAILED",
    "CANCELLING",
    "CANCELED",
    "FINISHED",
    "RESTARTING",
    "SUSPENDED",
    "RECONCILING",
];

type ApiResult<T> = Result<Json<T>, ApiError>;

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

/// Subtasks per state: upper-case names per operator (a vertex's
/// `tasks`), or lower-case names over both operators plus `total` (a job
/// overview's `tasks`).
pub(super) fn task_counts(v: &JobView, upper: bool) -> StateCounts {
    let state = v.task_state();
    let parallelism = v.job.parallelism;
    let mut m = StateCounts::new();
    for s in STATES {
        if s == "SUSPENDED" {
            continue;
        }
        let n = if s == state { parallelism } else { 0 };
        let key = if upper {
            s.to_string()
        } else {
            s.to_lowercase()
        };
        m.insert(key, n);
    }
    if !upper {
        m.insert("total".into(), parallelism * 2);
        // Two operators, `parallelism` subtasks each.
        if let Some(n) = m.get_mut(&state.to_lowercase()) {
            *n = parallelism * 2;
        }
    }
    m
}

pub(super) async fn job_status(
    State(state): State<AppState>,
    Path(jobid): Path<String>,
) -> ApiResult<JobStatusBody> {
    let job = find_job(&state, &jobid)?;
    let v = job.view();
    Ok(Json(JobStatusBody {
        status: v.state().into(),
    }))
}

/// When the job last entered each state (0 if never): start for the
/// states it passed on the way to RUNNING, the latest return to RUNNING,
/// the newest failure it restarted after, the end for the terminal state
/// it is in.
fn state_timestamps(v: &JobView) -> BTreeMap<String, i64> {
    let start = v.job.start_time_ms as i64;
    let running = if v.uptime_ms() > 0 {
        v.now_ms.saturating_sub(v.uptime_ms()) as i64
    } else {
        start
    };
    let restarted = v
        .exceptions
        .iter()
        .find(|e| e.restarted)
        .map_or(0, |e| e.timestamp_ms as i64);
    JOB_STATES
        .iter()
        .map(|&s| {
            let t = match s {
                "INITIALIZING" | "CREATED" => start,
                "RUNNING" => running,
                "FAILING" | "RESTARTING" => restarted,
                other if other == v.state() && v.is_terminal() => v.end_time_ms,
                _ => 0,
            };
            (s.to_string(), t)
        })
        .collect()
}

/// One operator; `read` and `write` are (records, bytes).
fn vertex(v: &JobView, name: &str, read: (u64, u64), write: (u64, u64)) -> JobVertex {
    JobVertex {
        id: vertex_id(name),
        name: name.into(),
        max_parallelism: 128,
        parallelism: v.job.parallelism,
        status: v.task_state().into(),
        start_time: v.job.start_time_ms,
        end_time: v.end_time_ms,
        duration: v.duration_ms,
        tasks: task_counts(v, true),
        metrics: VertexMetrics {
            read_bytes: read.1,
            read_bytes_complete: true,
            write_bytes: write.1,
            write_bytes_complete: true,
            read_records: read.0,
            read_records_complete: true,
            write_records: write.0,
            write_records_complete: true,
            accumulated_backpressured_time: 0,
            accumulated_idle_time: 0,
            accumulated_busy_time: 0.0,
        },
    }
}

/// The job graph: the source feeding the sink.
fn plan(v: &JobView) -> JobPlan {
    let job = v.job;
    let source = v.source_operator();
    let node = |name: &str, table: String, inputs: Option<Vec<PlanInput>>| PlanNode {
        id: vertex_id(name),
        parallelism: job.parallelism,
        operator: String::new(),
        operator_strategy: String::new(),
        description: format!("{name} ({table})"),
        inputs,
        optimizer_properties: Default::default(),
    };
    let from_source = PlanInput {
        num: 0,
        id: vertex_id(&source),
        ship_strategy: "FORWARD".into(),
        exchange: "pipelined_bounded".into(),
    };
    JobPlan {
        jid: job.id.to_string(),
        name: job.name.clone(),
        job_type: "STREAMING".into(),
        nodes: vec![
            node(&source, job.config.table_name.clone(), None),
            node(SINK_NAME, job.sink_table_name(), Some(vec![from_source])),
        ],
    }
}

pub(super) async fn job_details(
    State(state): State<AppState>,
    Path(jobid): Path<String>,
) -> ApiResult<JobDetails> {
    let job = find_job(&state, &jobid)?;
    let v = job.view();
    let m = &v.metrics;
    let source = vertex(
        &v,
        &v.source_operator(),
        (0, 0),
        (m.rows_read, m.bytes_read),
    );
    let sink = vertex(&v, SINK_NAME, (v.rows_written(), m.bytes_read), (0, 0));
    let status_counts = STATES
        .iter()
        .filter(|&&s| s != "SUSPENDED")
        .map(|&s| (s.to_string(), if s == v.task_state() { 2 } else { 0 }))
        .collect();
    Ok(Json(JobDetails {
        jid: job.id.to_string(),
        name: job.name.clone(),
        is_stoppable: false,
        state: v.state().into(),
        job_type: "STREAMING".into(),
        start_time: job.start_time_ms,
        end_time: v.end_time_ms,
        duration: v.duration_ms,
        max_parallelism: -1,
        now: v.now_ms,
        timestamps: state_timestamps(&v),
        vertices: vec![source, sink],
        status_counts,
        plan: plan(&v),
    }))
}

/// The restart strategy in words, as Flink describes its own in
/// `execution-config.restart-strategy`.
fn restart_description(r: &RestartConfig) -> String {
    let ms = |d: Duration| d.as_millis();
    match r.kind {
        "none" => "Restart deactivated.".into(),
        "fixed-delay" => format!(
            "Restart with fixed delay ({} ms). #{} restart attempts.",
            ms(r.fixed_delay),
            r.fixed_delay_attempts
        ),
        "failure-rate" => format!(
            "Failure rate restart with maximum of {} failures within interval {} ms and fixed delay {} ms.",
            r.failure_rate_max_failures,
            ms(r.failure_rate_interval),
            ms(r.failure_rate_delay)
        ),
        _ => {
            let attempts = match r.attempts_before_reset_backoff {
                n if n >= i32::MAX as u32 => "unlimited".to_string(),
                n => n.to_string(),
            };
            format!(
                "Exponential delay restart: initial backoff {} ms, max backoff {} ms, multiplier {}, reset after {} ms without failure, jitter {}, attempts before reset {attempts}.",
                ms(r.initial_backoff),
                ms(r.max_backoff),
                r.backoff_multiplier.0,
                ms(r.reset_backoff_threshold),
                r.jitter_factor.0
            )
        }
    }
}

pub(super) async fn job_config(
    State(state): State<AppState>,
    Path(jobid): Path<String>,
) -> ApiResult<JobConfigInfo> {
    let job = find_job(&state, &jobid)?;
    let mut user: BTreeMap<String, String> = job
        .keys
        .iter()
        .map(|(key, value)| (key.to_string(), value.to_string()))
        .collect();
    user.insert("job.name".into(), job.config.job_name.clone());
    if let Some(dir) = &job.savepoint_dir {
        user.insert("execution.checkpointing.savepoint-dir".into(), dir.to_uri());
    }
    Ok(Json(JobConfigInfo {
        jid: job.id.to_string(),
        name: job.name.clone(),
        execution_config: ExecutionConfig {
            execution_mode: "PIPELINED".into(),
            restart_strategy: restart_description(&job.config.restart),
            job_parallelism: job.parallelism,
            object_reuse_mode: false,
            user_config: user,
        },
    }))
}

#[derive(Deserialize)]
pub(super) struct MetricsQuery {
    get: Option<String>,
}

pub(super) async fn job_metrics(
    State(state): State<AppState>,
    Path(jobid): Path<String>,
    Query(q): Query<MetricsQuery>,
) -> ApiResult<Vec<Metric>> {
    let job = find_job(&state, &jobid)?;
    let all = job.view().job_scope_metrics();
    let out = match q.get {
        None => all
            .iter()
            .map(|(n, _)| Metric {
                id: n.to_string(),
                value: None,
            })
            .collect(),
        Some(list) => {
            let wanted: Vec<&str> = list.split(',').map(str::trim).collect();
            all.iter()
                .filter(|(n, _)| wanted.contains(n))
                .map(|(n, v)| Metric {
                    id: n.to_string(),
                    value: Some(format_metric(*v)),
                })
                .collect()
        }
    };
    Ok(Json(out))
}

fn format_metric(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 9.0e15 {
        format!("{}", v as i64)
    } else {
        v.to_string()
    }
}

#[derive(Deserialize)]
pub(super) struct CancelQuery {
    mode: Option<String>,
}

pub(super) async fn cancel_job(
    State(state): State<AppState>,
    Path(jobid): Path<String>,
    Query(q): Query<CancelQuery>,
) -> Result<(StatusCode, Json<Acknowledged>), ApiError> {
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
    Ok((StatusCode::ACCEPTED, Json(Acknowledged {})))
}

/// How long `drain: true` waits for the open window to finish.
const DRAIN_TIMEOUT: Duration = ferry_engine::job::DEFAULT_DRAIN_TIMEOUT;

pub(super) async fn stop_job(
    State(state): State<AppState>,
    Path(jobid): Path<String>,
    body: Bytes,
) -> Result<(StatusCode, Json<TriggerResponse>), ApiError> {
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
    Ok((
        StatusCode::ACCEPTED,
        Json(TriggerResponse { request_id: tid }),
    ))
}
