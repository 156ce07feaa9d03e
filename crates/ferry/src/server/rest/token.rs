//! The bearer-token check of a REST API with `security.rest.token-file`.

use axum::extract::{Request, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::ApiError;
use crate::security::Token;

/// Middleware: every request carries `Authorization: Bearer <token>`;
/// else 401 in Flink's error shape. The answer never repeats what was sent.
pub async fn require_token(State(token): State<Token>, request: Request, next: Next) -> Response {
    let presented = request
        .headers()
        .get(header::AUTHORIZATION)
        .map(|v| v.as_bytes());
    let verdict = match presented {
        None => Err("this REST API needs an 'Authorization: Bearer <token>' header (the token of security.rest.token-file)"),
        Some(v) => match v.get(..7) {
            Some(scheme) if scheme.eq_ignore_ascii_case(b"bearer ") => {
                if token.matches(v[7..].trim_ascii()) {
                    Ok(())
                } else {
                    Err("the bearer token is not valid")
                }
            }
            _ => Err("the Authorization header must be 'Bearer <token>'"),
        },
    };
    match verdict {
        Ok(()) => next.run(request).await,
        Err(why) => {
            tracing::info!(
                method = %request.method(),
                path = %request.uri().path(),
                "REST request refused: {why}"
            );
            let mut resp = ApiError::new(StatusCode::UNAUTHORIZED, format!("Unauthorized: {why}"))
                .into_response();
            resp.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                HeaderValue::from_static("Bearer realm=\"ferry\""),
            );
            resp
        }
    }
}
