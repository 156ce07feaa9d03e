//! The REST API, with Flink's paths, JSON shapes and status codes (see
//! `docs/operations.md` for the list), plus ferry's own endpoints under
//! `/ferry/` (job submission in session mode, the live JSON the web page
//! and `ferry stop --drain-check` poll, verification of a job's copy) and
//! the web page at `/`.
//!
//! Every route is also served under `/v1/`, as Flink does. With
//! `security.rest.token-file` every request (the web page too) but the
//! probes `GET /healthz` and `GET /readyz` ([`health`]) must carry the
//! bearer token ([`token::require_token`]); TLS and client
//! certificates are the listener's (`crate::server::listen`).

mod checkpoints;
mod error;
mod exceptions;
mod ferry_api;
pub mod health;
mod jobs;
mod overview;
mod savepoints;
mod throttle;
pub mod token;
mod verify;

pub use error::ApiError;

use crate::server::registry::Registry;
use axum::http::{header, StatusCode, Uri};
use axum::response::{Html, IntoResponse};
use axum::routing::{get, post};
use axum::Router;
use std::sync::Arc;

/// Shared state of the handlers.
#[derive(Clone)]
pub struct AppState {
    /// The jobs of the process.
    pub registry: Arc<Registry>,
    /// Where the Prometheus endpoint listens (shown on the web page).
    pub metrics_url: Option<String>,
    /// `security.rest.token-file`: the bearer token every request needs.
    pub token: Option<crate::security::Token>,
}

const INDEX_HTML: &str = include_str!("../../../web/index.html");

fn api() -> Router<AppState> {
    Router::new()
        .route("/overview", get(overview::cluster_overview))
        .route("/config", get(overview::dashboard_config))
        .route("/jobs", get(overview::list_jobs))
        .route("/jobs/overview", get(overview::jobs_overview))
        .route(
            "/jobs/{jobid}",
            get(jobs::job_details).patch(jobs::cancel_job),
        )
        .route("/jobs/{jobid}/status", get(jobs::job_status))
        .route("/jobs/{jobid}/config", get(jobs::job_config))
        .route("/jobs/{jobid}/exceptions", get(exceptions::job_exceptions))
        .route("/jobs/{jobid}/metrics", get(jobs::job_metrics))
        .route(
            "/jobs/{jobid}/savepoints",
            post(savepoints::trigger_savepoint),
        )
        .route(
            "/jobs/{jobid}/savepoints/{triggerid}",
            get(savepoints::savepoint_status),
        )
        .route("/jobs/{jobid}/stop", post(jobs::stop_job))
        .route(
            "/jobs/{jobid}/checkpoints",
            get(checkpoints::checkpoint_stats).post(checkpoints::trigger_checkpoint),
        )
        .route(
            "/jobs/{jobid}/checkpoints/config",
            get(checkpoints::checkpoint_config),
        )
        .route(
            "/jobs/{jobid}/checkpoints/{triggerid}",
            get(checkpoints::checkpoint_status),
        )
        .route("/ferry/jobs", post(ferry_api::submit_job))
        .route("/ferry/overview", get(ferry_api::overview))
        .route("/ferry/shards", get(ferry_api::shards))
        .route("/ferry/jobs/{jobid}/live", get(ferry_api::job_live_handler))
        .route("/ferry/jobs/{jobid}/verify", post(verify::trigger_verify))
        .route(
            "/ferry/jobs/{jobid}/throttle",
            get(throttle::get_throttle)
                .patch(throttle::set_throttle)
                .post(throttle::set_throttle),
        )
        .route(
            "/ferry/jobs/{jobid}/verify/{requestid}",
            get(verify::verify_status),
        )
}

/// The whole router: API (also under `/v1`), the web page, Flink-shaped
/// 404s for everything else, and the probes ([`health`]), which alone
/// answer without the token.
pub fn router(state: AppState) -> Router {
    let token = state.token.clone();
    let probes = health::routes(state.clone());
    let router = Router::new()
        .route("/", get(index))
        .route("/index.html", get(index))
        .merge(api())
        .nest("/v1", api())
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .with_state(state);
    let router = match token {
        // Outermost layer: unknown routes and wrong methods need it too.
        Some(token) => router.layer(axum::middleware::from_fn_with_state(
            token,
            token::require_token,
        )),
        None => router,
    };
    // Merged after the layer, so the token check does not wrap them.
    probes.merge(router)
}

async fn index() -> impl IntoResponse {
    ([(header::CACHE_CONTROL, "no-cache")], Html(INDEX_HTML))
}

async fn not_found(uri: Uri) -> ApiError {
    ApiError::not_found(format!("Not found: {}", uri.path()))
}

async fn method_not_allowed(uri: Uri) -> ApiError {
    ApiError::new(
        StatusCode::METHOD_NOT_ALLOWED,
        format!("Method not allowed for {}", uri.path()),
    )
}
