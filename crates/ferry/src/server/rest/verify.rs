//! Verification of a running job's copy through the REST API (ferry only):
//!
//! - `POST /ferry/jobs/:jobid/verify` with `{"repair": false,
//!   "parallelism": 4, "method": "server", "maxListed": 100}` (all
//!   optional) starts [`ferry_verify::verify`] of the job's source table
//!   at its last completed window end against its sink table at the sink
//!   time recorded with it (the sink position record), and answers `202
//!   {"request-id": "..."}`; 400 when the job has no such record yet.
//! - `GET /ferry/jobs/:jobid/verify/:requestid` answers like a savepoint
//!   trigger: `{"status": {"id": "IN_PROGRESS" | "COMPLETED"},
//!   "operation": <the report> | {"failure-cause": {...}}, "progress":
//!   {...}}`.
//!
//! The last result is in `/ferry/jobs/:jobid/live` (`verify`) and in the
//! `ferry_verify_*` metrics.

use super::error::{parse_body, ApiError};
use super::jobs::find_job;
use super::AppState;
use crate::api::flink::{FailureCause, TriggerResponse};
use crate::server::registry::{OpKind, OpState, OpValue};
use crate::wiring::{no_position_message, position_times};
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::Json;
use ferry_verify::{At, Method, Progress, Side, VerifyOptions};
use kudu_client::HybridTime;
use serde::Deserialize;
use serde_json::{json, Value};

/// The body of `POST /ferry/jobs/:jobid/verify`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct VerifyRequestBody {
    #[serde(default)]
    repair: bool,
    parallelism: Option<usize>,
    method: Option<Method>,
    max_listed: Option<usize>,
}

pub(super) async fn trigger_verify(
    State(state): State<AppState>,
    Path(jobid): Path<String>,
    body: Bytes,
) -> Result<(StatusCode, Json<TriggerResponse>), ApiError> {
    let job = find_job(&state, &jobid)?;
    let req: VerifyRequestBody = parse_body(&body, "VerifyRequestBody")?;
    crate::wiring::kudu_table_pair(&job.config, "verify").map_err(ApiError::bad_request)?;
    let parallelism = req.parallelism.unwrap_or(4);
    if !(1..=1024).contains(&parallelism) {
        return Err(ApiError::bad_request(format!(
            "Invalid parallelism {parallelism}: expected 1 to 1024"
        )));
    }
    let (source, sink) =
        crate::wiring::clients(&job.config).map_err(|e| ApiError::internal(format!("{e:#}")))?;
    let sink_table = job.sink_table_name();
    let Some((source_time, sink_time)) = position_times(&sink, &job.config, &sink_table)
        .await
        .map_err(|e| ApiError::internal(format!("reading the sink position: {e:#}")))?
    else {
        return Err(ApiError::bad_request(no_position_message(
            &job.config,
            &sink_table,
        )));
    };
    let mut opts = VerifyOptions::new(
        Side {
            client: source,
            table: job.config.table_name.clone(),
            at: At::Time(HybridTime::from_raw(source_time.raw())),
        },
        Side {
            client: sink,
            table: sink_table,
            at: At::Time(HybridTime::from_raw(sink_time.raw())),
        },
    );
    opts.parallelism = parallelism;
    opts.method = req.method.unwrap_or_default();
    opts.max_listed = req.max_listed.unwrap_or(opts.max_listed);
    opts.repair = req.repair;
    let (tx, rx) = tokio::sync::watch::channel(Progress::default());
    opts.progress = Some(tx);
    let (id, _) = job.begin_operation(OpKind::Verify, None);
    job.verify_started(&id, rx);
    let (job, request) = (job.clone(), id.clone());
    tokio::spawn(async move {
        let result = ferry_verify::verify(opts).await.map_err(|e| {
            // The whole chain: the caller has no log to read it in.
            let mut text = e.to_string();
            let mut source = std::error::Error::source(&e);
            while let Some(s) = source {
                text.push_str(&format!(": {s}"));
                source = s.source();
            }
            text
        });
        job.verify_finished(&request, &result);
        job.finish_operation(&request, result.map(|r| OpValue::Verify(Box::new(r))));
    });
    Ok((
        StatusCode::ACCEPTED,
        Json(TriggerResponse { request_id: id }),
    ))
}

pub(super) async fn verify_status(
    State(state): State<AppState>,
    Path((jobid, requestid)): Path<(String, String)>,
) -> Result<Json<Value>, ApiError> {
    let job = find_job(&state, &jobid)?;
    let op = job.operation(OpKind::Verify, &requestid).ok_or_else(|| {
        ApiError::not_found(format!(
            "There is no verify operation with request-id={requestid} for job {}.",
            job.id
        ))
    })?;
    let progress = job.verify_progress(&requestid).unwrap_or_default();
    let (status, operation) = match op {
        OpState::InProgress => ("IN_PROGRESS", Value::Null),
        OpState::Done(Ok(OpValue::Verify(report))) => (
            "COMPLETED",
            serde_json::to_value(&*report).unwrap_or(Value::Null),
        ),
        OpState::Done(Ok(_)) => ("COMPLETED", Value::Null),
        OpState::Done(Err(message)) => (
            "COMPLETED",
            json!({ "failure-cause": FailureCause::operation_failed(&message) }),
        ),
    };
    Ok(Json(json!({
        "status": { "id": status },
        "operation": operation,
        "progress": progress,
    })))
}
