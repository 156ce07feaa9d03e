//! Savepoint endpoints: `POST /jobs/:jobid/savepoints` and
//! `GET /jobs/:jobid/savepoints/:triggerid` (which also reports a
//! stop-with-savepoint), plus what the other trigger endpoints share:
//! trigger-id checks, target directories and operation results.

use super::error::{parse_body, ApiError};
use super::jobs::find_job;
use super::AppState;
use crate::api::flink::{
    AsynchronousOperationResult, FailureCause, FormatType, QueueStatus, QueueStatusId,
    SavepointInfo, SavepointTriggerRequestBody, TriggerResponse,
};
use crate::server::registry::{JobEntry, OpKind, OpState, OpValue};
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::Json;
use ferry_engine::checkpoint::StorageLocation;

pub(super) fn check_trigger_id(id: &Option<String>) -> Result<(), ApiError> {
    match id {
        Some(t) if t.len() != 32 || !t.bytes().all(|b| b.is_ascii_hexdigit()) => {
            Err(ApiError::bad_request(format!(
                "Invalid triggerId '{t}': expected 32 hexadecimal characters"
            )))
        }
        _ => Ok(()),
    }
}

/// The directory a savepoint goes to: `given`, else the job's default
/// (`None` here), else a 400 naming the request's `field`.
pub(super) fn target_dir(
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

/// An operation's progress in Flink's shape; `done` turns a completed
/// operation's result into its `operation` object.
pub(super) fn operation_result<O>(
    state: OpState,
    done: impl FnOnce(Result<OpValue, String>) -> O,
) -> AsynchronousOperationResult<O> {
    let (id, operation) = match state {
        OpState::InProgress => (QueueStatusId::InProgress, None),
        OpState::Done(result) => (QueueStatusId::Completed, Some(done(result))),
    };
    AsynchronousOperationResult {
        status: QueueStatus { id },
        operation,
    }
}

pub(super) async fn trigger_savepoint(
    State(state): State<AppState>,
    Path(jobid): Path<String>,
    body: Bytes,
) -> Result<(StatusCode, Json<TriggerResponse>), ApiError> {
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
    Ok((
        StatusCode::ACCEPTED,
        Json(TriggerResponse { request_id: tid }),
    ))
}

pub(super) async fn savepoint_status(
    State(state): State<AppState>,
    Path((jobid, triggerid)): Path<(String, String)>,
) -> Result<Json<AsynchronousOperationResult<SavepointInfo>>, ApiError> {
    let job = find_job(&state, &jobid)?;
    let op = job
        .operation(OpKind::Savepoint, &triggerid)
        .ok_or_else(|| {
            ApiError::not_found(format!(
                "There is no savepoint operation with triggerId={triggerid} for job {}.",
                job.id
            ))
        })?;
    Ok(Json(operation_result(op, |result| match result {
        Ok(value) => SavepointInfo {
            // Savepoint operations only ever record a location.
            location: match value {
                OpValue::Location(location) => Some(location),
                OpValue::CheckpointId(_) | OpValue::Verify(_) => None,
            },
            failure_cause: None,
        },
        Err(message) => SavepointInfo {
            location: None,
            failure_cause: Some(FailureCause::operation_failed(&message)),
        },
    })))
}
