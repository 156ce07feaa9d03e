//! Process-wide Flink endpoints: `GET /overview`, `GET /config`, `GET /jobs`
//! and `GET /jobs/overview`.

use super::jobs::task_counts;
use super::AppState;
use crate::api::flink::{
    ClusterOverview, DashboardConfiguration, DashboardFeatures, JobIdWithStatus, JobIdsWithStatus,
    JobOverview, MultipleJobsDetails,
};
use crate::server::view::{JobView, VERSION};
use axum::extract::State;
use axum::Json;

/// The commit ferry was built from, where Flink reports its own.
fn commit() -> String {
    option_env!("FERRY_GIT_COMMIT")
        .unwrap_or("unknown")
        .to_string()
}

pub(super) async fn cluster_overview(State(state): State<AppState>) -> Json<ClusterOverview> {
    let jobs = state.registry.jobs();
    let views: Vec<JobView> = jobs.iter().map(|j| j.view()).collect();
    let count = |name: &str| views.iter().filter(|v| v.state() == name).count();
    let slots = views
        .iter()
        .filter(|v| !v.is_terminal())
        .map(|v| v.job.parallelism)
        .sum();
    Json(ClusterOverview {
        taskmanagers: 1,
        slots_total: slots,
        slots_available: 0,
        // Flink counts every job that has not ended (RESTARTING too).
        jobs_running: views.iter().filter(|v| !v.is_terminal()).count(),
        jobs_finished: count("FINISHED"),
        jobs_cancelled: count("CANCELED"),
        jobs_failed: count("FAILED"),
        flink_version: VERSION.into(),
        flink_commit: commit(),
    })
}

pub(super) async fn dashboard_config(State(_): State<AppState>) -> Json<DashboardConfiguration> {
    Json(DashboardConfiguration {
        refresh_interval: 3000,
        timezone_name: "Coordinated Universal Time".into(),
        timezone_offset: 0,
        flink_version: VERSION.into(),
        flink_revision: commit(),
        features: DashboardFeatures {
            web_submit: false,
            web_cancel: true,
            web_rescale: false,
            web_history: false,
        },
    })
}

pub(super) async fn list_jobs(State(state): State<AppState>) -> Json<JobIdsWithStatus> {
    let jobs = state
        .registry
        .jobs()
        .iter()
        .map(|j| {
            let v = j.view();
            JobIdWithStatus {
                id: j.id.to_string(),
                status: v.state().into(),
            }
        })
        .collect();
    Json(JobIdsWithStatus { jobs })
}

fn job_overview(v: &JobView) -> JobOverview {
    let job = v.job;
    JobOverview {
        jid: job.id.to_string(),
        name: job.name.clone(),
        state: v.state().into(),
        start_time: job.start_time_ms,
        end_time: v.end_time_ms,
        duration: v.duration_ms,
        last_modification: if v.end_time_ms > 0 {
            v.end_time_ms as u64
        } else {
            job.start_time_ms
        },
        tasks: task_counts(v, false),
    }
}

pub(super) async fn jobs_overview(State(state): State<AppState>) -> Json<MultipleJobsDetails> {
    let jobs = state
        .registry
        .jobs()
        .iter()
        .map(|j| job_overview(&j.view()))
        .collect();
    Json(MultipleJobsDetails { jobs })
}
