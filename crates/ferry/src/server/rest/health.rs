//! Probes for orchestrators (Kubernetes, systemd watchdogs, load
//! balancers): `GET /healthz` answers 200 whenever the process serves its
//! REST API; `GET /readyz` answers 200 only when this process runs its job
//! — under high availability, while it holds the job's lease — and 503
//! otherwise, with the reason. A Service in front of an active and a
//! standby thus reaches the active only (deploy/kubernetes).
//!
//! Both answer without the REST token (a kubelet's probe cannot send a
//! secret header): they tell nothing but these two facts.

use super::AppState;
use crate::server::registry::{Mode, Registry};
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::get;
use axum::{Json, Router};
use ferry_engine::lease::Fence;
use ferry_engine::JobStatus;
use serde::Serialize;

/// Liveness: the process serves its REST API.
pub const LIVENESS_PATH: &str = "/healthz";
/// Readiness: the process runs its job (and holds its lease, with HA).
pub const READINESS_PATH: &str = "/readyz";

/// The probes' routes, served outside the token check.
pub fn routes(state: AppState) -> Router {
    Router::new()
        .route(LIVENESS_PATH, get(healthz))
        .route(READINESS_PATH, get(readyz))
        .with_state(state)
}

/// A probe's answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Probe {
    /// `ok`, `ready` or `not ready`.
    pub status: &'static str,
    /// Why not ready (absent when ready).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

async fn healthz() -> Json<Probe> {
    Json(Probe {
        status: "ok",
        reason: None,
    })
}

async fn readyz(State(state): State<AppState>) -> (StatusCode, Json<Probe>) {
    match readiness_of(&state.registry) {
        Ok(()) => (
            StatusCode::OK,
            Json(Probe {
                status: "ready",
                reason: None,
            }),
        ),
        Err(reason) => (
            StatusCode::SERVICE_UNAVAILABLE,
            Json(Probe {
                status: "not ready",
                reason: Some(reason),
            }),
        ),
    }
}

/// Whether `registry`'s process is ready, else why not.
fn readiness_of(registry: &Registry) -> Result<(), String> {
    let newest = registry.jobs().pop();
    readiness(
        registry.mode,
        newest
            .as_ref()
            .map(|job| (job.id.to_string(), job.status(), &job.fence)),
    )
}

/// The readiness rule. A session server is ready once it serves: it runs
/// what is submitted. An application process is ready while its newest
/// job (id, status, lease fence) is RUNNING and, with a lease, its fence
/// is open; a standby that has not claimed the lease has no job yet.
pub fn readiness(mode: Mode, newest: Option<(String, JobStatus, &Fence)>) -> Result<(), String> {
    if mode == Mode::Session {
        return Ok(());
    }
    let Some((id, status, fence)) = newest else {
        return Err(
            "no job runs in this process (a standby waiting for the lease, or starting)".into(),
        );
    };
    match status {
        JobStatus::Running => {}
        // Flink calls it RUNNING too, but it is on its way out.
        JobStatus::Stopping => return Err(format!("job {id} is stopping with a savepoint")),
        other => return Err(format!("job {id} is {}", other.flink_name())),
    }
    fence
        .check()
        .map_err(|fenced| format!("job {id}: {fenced}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    fn running() -> Option<(String, JobStatus, &'static Fence)> {
        static NONE: std::sync::OnceLock<Fence> = std::sync::OnceLock::new();
        Some((
            "j1".into(),
            JobStatus::Running,
            NONE.get_or_init(Fence::none),
        ))
    }

    #[test]
    fn an_application_is_ready_only_while_its_job_runs() {
        assert_eq!(readiness(Mode::Application, running()), Ok(()));
        let none = readiness(Mode::Application, None).unwrap_err();
        assert!(none.contains("no job runs"), "{none}");
        let fence = Fence::none();
        let restarting = readiness(
            Mode::Application,
            Some((
                "j1".into(),
                JobStatus::Restarting {
                    cause: "timed out".into(),
                },
                &fence,
            )),
        )
        .unwrap_err();
        assert_eq!(restarting, "job j1 is RESTARTING");
        let canceled = readiness(
            Mode::Application,
            Some(("j1".into(), JobStatus::Canceled, &fence)),
        )
        .unwrap_err();
        assert_eq!(canceled, "job j1 is CANCELED");
        let stopping = readiness(
            Mode::Application,
            Some(("j1".into(), JobStatus::Stopping, &fence)),
        )
        .unwrap_err();
        assert_eq!(stopping, "job j1 is stopping with a savepoint");
    }

    #[test]
    fn a_holder_whose_lease_lapsed_or_was_taken_is_not_ready() {
        let held = Fence::new(4, Instant::now() + Duration::from_secs(60));
        let job = |f: &Fence| {
            readiness(
                Mode::Application,
                Some(("j1".into(), JobStatus::Running, f)),
            )
        };
        assert_eq!(job(&held), Ok(()));
        held.taken_over(5);
        let taken = job(&held).unwrap_err();
        assert!(taken.contains("generation 5 took over"), "{taken}");
        let lapsed = Fence::new(4, Instant::now());
        let expired = job(&lapsed).unwrap_err();
        assert!(expired.contains("not renewed in time"), "{expired}");
    }

    #[test]
    fn a_session_server_is_ready_as_soon_as_it_serves() {
        assert_eq!(readiness(Mode::Session, None), Ok(()));
    }

    /// The status line and body of `GET path` against `addr`.
    async fn get(addr: std::net::SocketAddr, path: &str) -> (u16, String) {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let mut conn = tokio::net::TcpStream::connect(addr).await.unwrap();
        let request = format!("GET {path} HTTP/1.1\r\nHost: ferry\r\nConnection: close\r\n\r\n");
        conn.write_all(request.as_bytes()).await.unwrap();
        let mut answer = String::new();
        conn.read_to_string(&mut answer).await.unwrap();
        let code = answer[9..12].parse().unwrap();
        let body = answer.split("\r\n\r\n").nth(1).unwrap_or("").to_string();
        (code, body)
    }

    #[tokio::test]
    async fn the_probes_answer_without_the_token_the_api_does_not() {
        let dir = tempfile::tempdir().unwrap();
        let token_file = dir.path().join("token");
        std::fs::write(&token_file, "0123456789abcdef0123456789abcdef\n").unwrap();
        let resolver = crate::wiring::resolver(&crate::process_opts::ProcessOptions::default());
        let state = AppState {
            registry: Registry::new(Mode::Application, resolver),
            metrics_url: None,
            token: Some(crate::security::Token::read(&token_file).unwrap()),
        };
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let server = tokio::spawn(async move {
            axum::serve(listener, super::super::router(state))
                .await
                .unwrap();
        });

        assert_eq!(
            get(addr, LIVENESS_PATH).await,
            (200, r#"{"status":"ok"}"#.into())
        );
        // No job registered yet: what a standby waiting for the lease shows.
        let (code, body) = get(addr, READINESS_PATH).await;
        assert_eq!(code, 503, "{body}");
        assert!(body.contains(r#""status":"not ready""#), "{body}");
        assert!(body.contains("waiting for the lease"), "{body}");
        // Everything else still needs the token.
        assert_eq!(get(addr, "/jobs").await.0, 401);
        assert_eq!(get(addr, "/v1/healthz").await.0, 401);
        server.abort();
    }
}
