//! Checkpoint endpoints: statistics (`GET /jobs/:jobid/checkpoints`), the
//! checkpointing configuration, and manual checkpoints
//! (`POST /jobs/:jobid/checkpoints`, polled at
//! `GET /jobs/:jobid/checkpoints/:triggerid`).

use super::error::{parse_body, ApiError};
use super::jobs::find_job;
use super::savepoints::{check_trigger_id, operation_result};
use super::AppState;
use crate::api::flink::{
    AsynchronousOperationResult, CheckpointConfigInfo, CheckpointCounts, CheckpointInfo,
    CheckpointStatistics, CheckpointSummary, CheckpointTriggerRequestBody, CheckpointType,
    CheckpointingStatistics, Externalization, FailureCause, LatestCheckpoints, RestoredCheckpoint,
    StatsSummary, TriggerResponse,
};
use crate::server::registry::{OpKind, OpValue};
use crate::server::view::JobView;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::Json;
use ferry_engine::job::CheckpointRecord;

/// Flink keeps this many checkpoints in `history` (`web.checkpoints.history`).
const HISTORY_SIZE: usize = 10;

pub(super) async fn trigger_checkpoint(
    State(state): State<AppState>,
    Path(jobid): Path<String>,
    body: Bytes,
) -> Result<(StatusCode, Json<TriggerResponse>), ApiError> {
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
    Ok((
        StatusCode::ACCEPTED,
        Json(TriggerResponse { request_id: tid }),
    ))
}

pub(super) async fn checkpoint_status(
    State(state): State<AppState>,
    Path((jobid, triggerid)): Path<(String, String)>,
) -> Result<Json<AsynchronousOperationResult<CheckpointInfo>>, ApiError> {
    let job = find_job(&state, &jobid)?;
    let op = job
        .operation(OpKind::Checkpoint, &triggerid)
        .ok_or_else(|| {
            ApiError::not_found(format!(
                "There is no checkpoint operation with triggerId={triggerid} for job {}.",
                job.id
            ))
        })?;
    Ok(Json(operation_result(op, |result| match result {
        Ok(value) => CheckpointInfo {
            // Checkpoint operations only ever record an id.
            checkpoint_id: match value {
                OpValue::CheckpointId(id) => Some(id),
                OpValue::Location(_) | OpValue::Verify(_) => None,
            },
            failure_cause: None,
        },
        Err(message) => CheckpointInfo {
            checkpoint_id: None,
            failure_cause: Some(FailureCause::operation_failed(&message)),
        },
    })))
}

fn stats(values: &[u64]) -> StatsSummary {
    if values.is_empty() {
        return StatsSummary::default();
    }
    let mut v = values.to_vec();
    v.sort_unstable();
    let q = |p: f64| v[((v.len() - 1) as f64 * p).round() as usize] as f64;
    StatsSummary {
        min: v[0],
        max: v[v.len() - 1],
        avg: v.iter().sum::<u64>() / v.len() as u64,
        p50: q(0.5),
        p90: q(0.9),
        p95: q(0.95),
        p99: q(0.99),
        p999: q(0.999),
    }
}

fn completed(v: &JobView, r: &CheckpointRecord) -> CheckpointStatistics {
    let subtasks = v.job.parallelism * 2;
    CheckpointStatistics {
        class_name: "completed".into(),
        id: r.id,
        status: "COMPLETED".into(),
        is_savepoint: r.savepoint,
        savepoint_format: r.savepoint.then(|| "CANONICAL".into()),
        checkpoint_type: if r.savepoint {
            "SAVEPOINT"
        } else {
            "CHECKPOINT"
        }
        .into(),
        trigger_timestamp: r.completed_at_ms.saturating_sub(r.duration_ms),
        latest_ack_timestamp: r.completed_at_ms,
        state_size: r.size_bytes,
        checkpointed_size: r.size_bytes,
        end_to_end_duration: r.duration_ms,
        alignment_buffered: 0,
        processed_data: 0,
        persisted_data: 0,
        num_subtasks: subtasks,
        num_acknowledged_subtasks: subtasks,
        tasks: Default::default(),
        external_path: r.path.clone(),
        discarded: false,
    }
}

fn summary(history: &[CheckpointRecord]) -> CheckpointSummary {
    let sizes: Vec<u64> = history.iter().map(|r| r.size_bytes).collect();
    let durations: Vec<u64> = history.iter().map(|r| r.duration_ms).collect();
    CheckpointSummary {
        checkpointed_size: stats(&sizes),
        state_size: stats(&sizes),
        end_to_end_duration: stats(&durations),
        alignment_buffered: StatsSummary::default(),
        processed_data: StatsSummary::default(),
        persisted_data: StatsSummary::default(),
    }
}

pub(super) async fn checkpoint_stats(
    State(state): State<AppState>,
    Path(jobid): Path<String>,
) -> Result<Json<CheckpointingStatistics>, ApiError> {
    let job = find_job(&state, &jobid)?;
    let v = job.view();
    let (m, history) = (&v.metrics, &v.checkpoints);
    let savepoints = v.savepoint_count();
    let newest = |savepoint: bool| {
        history
            .iter()
            .rev()
            .find(|r| r.savepoint == savepoint)
            .map(|r| completed(&v, r))
    };
    let restored = job.restored.as_ref().map(|r| RestoredCheckpoint {
        id: r.checkpoint_id,
        restore_timestamp: r.restored_at_ms,
        is_savepoint: r.is_savepoint,
        external_path: r.path.clone(),
    });
    Ok(Json(CheckpointingStatistics {
        counts: CheckpointCounts {
            restored: u64::from(job.restored.is_some()),
            total: m.checkpoints_completed + m.checkpoints_failed + savepoints,
            in_progress: 0,
            completed: m.checkpoints_completed + savepoints,
            failed: m.checkpoints_failed,
        },
        summary: summary(history),
        latest: LatestCheckpoints {
            completed: newest(false),
            savepoint: newest(true),
            failed: None,
            restored,
        },
        history: history
            .iter()
            .rev()
            .take(HISTORY_SIZE)
            .map(|r| completed(&v, r))
            .collect(),
    }))
}

pub(super) async fn checkpoint_config(
    State(state): State<AppState>,
    Path(jobid): Path<String>,
) -> Result<Json<CheckpointConfigInfo>, ApiError> {
    let job = find_job(&state, &jobid)?;
    let c = &job.config;
    Ok(Json(CheckpointConfigInfo {
        mode: "at_least_once".into(),
        interval: c.checkpointing_interval.as_millis() as u64,
        timeout: 600_000,
        min_pause: 0,
        max_concurrent: 1,
        externalization: Externalization {
            enabled: true,
            delete_on_cancellation: false,
        },
        state_backend: "ferry".into(),
        checkpoint_storage: "FileSystemCheckpointStorage".into(),
        unaligned_checkpoints: false,
        tolerable_failed_checkpoints: c.restart.tolerable_failed_checkpoints as u64,
        aligned_checkpoint_timeout: 0,
        checkpoints_after_tasks_finish: true,
        state_changelog_enabled: false,
        changelog_periodic_materialization_interval: -1,
        changelog_storage: "memory".into(),
        checkpoints_directory: c.checkpoints_directory.to_uri(),
        checkpoints_retained: c.checkpoints_retained.get(),
        savepoint_directory: job.savepoint_dir.as_ref().map(|d| d.to_uri()),
    }))
}
