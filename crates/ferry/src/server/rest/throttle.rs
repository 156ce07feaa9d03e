//! `GET /ferry/jobs/:jobid/throttle` (the limits and the time spent
//! throttled) and `PATCH` (or `POST`) with a [`ThrottleRequest`] (the
//! limits given change at once; the answer is the limits now). Shapes in
//! [`crate::api::throttle`].

use super::error::ApiError;
use super::jobs::find_job;
use super::AppState;
use crate::api::throttle::{ThrottleRequest, ThrottleSnapshot};
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::Json;
use ferry_engine::ControlError;

pub(super) async fn get_throttle(
    State(state): State<AppState>,
    Path(jobid): Path<String>,
) -> Result<Json<ThrottleSnapshot>, ApiError> {
    let job = find_job(&state, &jobid)?;
    Ok(Json(job.handle.throttle()))
}

pub(super) async fn set_throttle(
    State(state): State<AppState>,
    Path(jobid): Path<String>,
    body: Bytes,
) -> Result<Json<ThrottleSnapshot>, ApiError> {
    let job = find_job(&state, &jobid)?;
    let value: serde_json::Value = serde_json::from_slice(&body).map_err(|e| {
        ApiError::bad_request(format!(
            "Request did not match expected format ThrottleRequest: {e}"
        ))
    })?;
    let req = ThrottleRequest::from_json(&value)
        .map_err(|e| ApiError::bad_request(format!("Invalid throttle request: {e}")))?;
    if job.handle.status().is_terminal() {
        return Err(ApiError::conflict(format!("Job {} is not running", job.id)));
    }
    match job.handle.set_throttle(req.table.as_deref(), &req.update) {
        Ok(now) => {
            tracing::info!(job = %job.id, table = ?req.table, update = ?req.update, "throttle changed");
            Ok(Json(now))
        }
        Err(e @ ControlError::UnknownTable(_)) => Err(ApiError::bad_request(e.to_string())),
        Err(e) => Err(ApiError::internal(e.to_string())),
    }
}
