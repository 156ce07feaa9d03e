//! Starting the two listeners of a ferry process: the REST API with the
//! web page (`rest.address:rest.port`) and the Prometheus endpoint
//! (`metrics.address:metrics.port`). Both stop when the registry's
//! shutdown token is cancelled.
//!
//! A port the user chose that cannot be bound is an error. A busy *default*
//! port only disables that endpoint with a warning, so a second `ferry run`
//! on the same host still replicates (pass `--rest.port` to give it one).

use crate::process_opts::{PortChoice, ServerOptions};
use crate::registry::Registry;
use crate::rest::AppState;
use anyhow::{bail, Result};
use std::net::SocketAddr;
use std::sync::Arc;
use tokio::net::TcpListener;

/// Where the listeners ended up.
#[derive(Debug, Default)]
pub struct Bound {
    pub rest: Option<SocketAddr>,
    pub metrics: Option<SocketAddr>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Bound {
    pub fn rest_url(&self) -> Option<String> {
        self.rest.map(|a| format!("http://{a}"))
    }

    pub fn metrics_url(&self) -> Option<String> {
        self.metrics.map(|a| format!("http://{a}/metrics"))
    }

    /// After the shutdown token was cancelled: waits (up to `timeout`) for
    /// the servers to answer their in-flight requests.
    pub async fn finish(self, timeout: std::time::Duration) {
        let all = futures::future::join_all(self.tasks);
        let _ = tokio::time::timeout(timeout, all).await;
    }
}

async fn bind(
    what: &str,
    flag: &str,
    address: &str,
    port: PortChoice,
) -> Result<Option<TcpListener>> {
    match TcpListener::bind((address, port.port)).await {
        Ok(l) => Ok(Some(l)),
        Err(e) if port.explicit => bail!(
            "cannot listen on {address}:{} for the {what}: {e}",
            port.port
        ),
        Err(e) => {
            tracing::warn!(
                "{what} disabled: cannot listen on {address}:{} ({e}); pass {flag} PORT to choose another port",
                port.port
            );
            eprintln!(
                "ferry: warning: {what} disabled: {address}:{} is not available ({e}); pass {flag} PORT",
                port.port
            );
            Ok(None)
        }
    }
}

/// Binds both listeners and serves them in the background.
pub async fn start(registry: Arc<Registry>, opts: &ServerOptions) -> Result<Bound> {
    let rest = bind(
        "REST API",
        "--rest.port",
        &opts.rest_address,
        opts.rest_port,
    )
    .await?;
    let metrics = bind(
        "Prometheus endpoint",
        "--metrics.port",
        opts.metrics_address(),
        opts.metrics_port,
    )
    .await?;
    let mut bound = Bound::default();
    if let Some(l) = &metrics {
        bound.metrics = l.local_addr().ok();
    }
    if let Some(l) = &rest {
        bound.rest = l.local_addr().ok();
    }
    if let Some(listener) = metrics {
        let prom = Arc::new(crate::prom::new_registry(registry.clone()));
        let app = crate::prom::router(prom);
        let stop = registry.shutdown.clone();
        bound.tasks.push(tokio::spawn(async move {
            let serve = axum::serve(listener, app)
                .with_graceful_shutdown(async move { stop.cancelled().await });
            if let Err(e) = serve.await {
                tracing::warn!(error = %e, "metrics endpoint stopped");
            }
        }));
    }
    if let Some(listener) = rest {
        let state = AppState {
            registry: registry.clone(),
            metrics_url: bound.metrics_url(),
        };
        let app = crate::rest::router(state);
        let stop = registry.shutdown.clone();
        bound.tasks.push(tokio::spawn(async move {
            let serve = axum::serve(listener, app)
                .with_graceful_shutdown(async move { stop.cancelled().await });
            if let Err(e) = serve.await {
                tracing::warn!(error = %e, "REST API stopped");
            }
        }));
    }
    if let Some(url) = bound.rest_url() {
        tracing::info!(%url, "REST API and web page listening");
    }
    if let Some(url) = bound.metrics_url() {
        tracing::info!(%url, "Prometheus metrics listening");
    }
    Ok(bound)
}
