//! Starting the two listeners of a ferry process: the REST API with the
//! web page (`rest.address:rest.port`) and the Prometheus endpoint
//! (`metrics.address:metrics.port`). Both stop when the registry's
//! shutdown token is cancelled.
//!
//! A port the user chose that cannot be bound is an error. A busy *default*
//! port only disables that endpoint with a warning, so a second `ferry run`
//! on the same host still replicates (pass `--rest.port` to give it one).
//!
//! With `security.ssl.rest.enabled` the REST listener speaks TLS (rustls,
//! ring): TLS handshakes run in their own tasks (at most
//! [`MAX_HANDSHAKES`] at once, each bounded by [`HANDSHAKE_TIMEOUT`]) so a
//! slow or silent client cannot hold up the others; with
//! `security.ssl.rest.authentication-enabled` a client without a
//! certificate signed by a truststore CA fails the handshake and never
//! reaches the API. The Prometheus endpoint stays plain HTTP.

use crate::process_opts::{PortChoice, ServerOptions};
use crate::server::registry::Registry;
use crate::server::rest::AppState;
use anyhow::{bail, Result};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::{TcpListener, TcpStream};
use tokio_util::sync::CancellationToken;

/// TLS handshakes in progress at most; further connections wait in the
/// kernel's accept queue.
pub const MAX_HANDSHAKES: usize = 256;
/// A client that has not finished its TLS handshake by then is dropped.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Where the listeners ended up.
#[derive(Debug, Default)]
pub struct Bound {
    /// Where the REST API listens, if it does.
    pub rest: Option<SocketAddr>,
    /// Where the Prometheus endpoint listens, if it does.
    pub metrics: Option<SocketAddr>,
    /// Whether the REST API speaks TLS.
    pub rest_tls: bool,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Bound {
    /// The REST API's URL, if it listens.
    pub fn rest_url(&self) -> Option<String> {
        let scheme = if self.rest_tls { "https" } else { "http" };
        self.rest.map(|a| format!("{scheme}://{a}"))
    }

    /// The Prometheus endpoint's URL, if it listens.
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
    let mut bound = Bound::default();
    open_missing(&registry, opts, &mut bound).await?;
    Ok(bound)
}

/// Binds and serves the listeners `bound` does not have yet (all of them
/// for a new process; what was busy while an instance waited for its
/// lease, once it starts its job).
pub async fn open_missing(
    registry: &Arc<Registry>,
    opts: &ServerOptions,
    bound: &mut Bound,
) -> Result<()> {
    // Checked when the options were parsed; read again here (a file that
    // went away since is an error naming the key and the file).
    let security = opts
        .security
        .server(&opts.rest_address)
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    if bound.rest.is_none() {
        for key in opts.security.unused_without_tls() {
            tracing::warn!(
                "{key} is set but security.ssl.rest.enabled is not true: the REST API is plain HTTP"
            );
        }
    }
    let rest = match bound.rest {
        Some(_) => None,
        None => {
            bind(
                "REST API",
                "--rest.port",
                &opts.rest_address,
                opts.rest_port,
            )
            .await?
        }
    };
    let metrics = match bound.metrics {
        Some(_) => None,
        None => {
            bind(
                "Prometheus endpoint",
                "--metrics.port",
                opts.metrics_address(),
                opts.metrics_port,
            )
            .await?
        }
    };
    bound.rest_tls = security.tls.is_some();
    if let Some(listener) = metrics {
        bound.metrics = listener.local_addr().ok();
        bound.tasks.push(serve_metrics(listener, registry));
        if let Some(url) = bound.metrics_url() {
            tracing::info!(%url, "Prometheus metrics listening");
        }
    }
    if let Some(listener) = rest {
        bound.rest = listener.local_addr().ok();
        let state = AppState {
            registry: registry.clone(),
            metrics_url: bound.metrics_url(),
            token: security.token.clone(),
        };
        let tls = security.tls.clone();
        bound.tasks.push(serve_rest(listener, state, tls));
        if let Some(url) = bound.rest_url() {
            tracing::info!(
                %url,
                client_certificates = opts.security.authentication_enabled,
                bearer_token = security.token.is_some(),
                "REST API and web page listening"
            );
        }
    }
    Ok(())
}

/// Serves the Prometheus endpoint until the registry shuts down.
fn serve_metrics(listener: TcpListener, registry: &Arc<Registry>) -> tokio::task::JoinHandle<()> {
    let prom = Arc::new(crate::server::prom::new_registry(registry.clone()));
    let app = crate::server::prom::router(prom);
    let stop = registry.shutdown.clone();
    tokio::spawn(async move {
        let serve = axum::serve(listener, app)
            .with_graceful_shutdown(async move { stop.cancelled().await });
        if let Err(e) = serve.await {
            tracing::warn!(error = %e, "metrics endpoint stopped");
        }
    })
}

/// Serves the REST API and web page (TLS with `tls`) until the registry
/// shuts down.
fn serve_rest(
    listener: TcpListener,
    state: AppState,
    tls: Option<Arc<rustls::ServerConfig>>,
) -> tokio::task::JoinHandle<()> {
    let app = crate::server::rest::router(state.clone());
    let stop = state.registry.shutdown.clone();
    tokio::spawn(async move {
        let graceful = {
            let stop = stop.clone();
            async move { stop.cancelled().await }
        };
        let served = match tls {
            Some(config) => {
                let listener = TlsListener::start(listener, config, stop);
                axum::serve(listener, app)
                    .with_graceful_shutdown(graceful)
                    .await
            }
            None => {
                axum::serve(listener, app)
                    .with_graceful_shutdown(graceful)
                    .await
            }
        };
        if let Err(e) = served {
            tracing::warn!(error = %e, "REST API stopped");
        }
    })
}

/// A TLS listener for `axum::serve`: a task accepts TCP connections and
/// runs each handshake in a task of its own; completed handshakes are
/// handed to the server. A failed handshake (no or an untrusted client
/// certificate, plain HTTP on the TLS port, a timeout) is logged at debug
/// level with the peer's address.
struct TlsListener {
    ready: tokio::sync::mpsc::Receiver<(tokio_rustls::server::TlsStream<TcpStream>, SocketAddr)>,
    local: SocketAddr,
}

impl TlsListener {
    fn start(tcp: TcpListener, config: Arc<rustls::ServerConfig>, stop: CancellationToken) -> Self {
        let local = tcp
            .local_addr()
            .unwrap_or_else(|_| SocketAddr::from(([0, 0, 0, 0], 0)));
        let (tx, ready) = tokio::sync::mpsc::channel(64);
        let acceptor = tokio_rustls::TlsAcceptor::from(config);
        let permits = Arc::new(tokio::sync::Semaphore::new(MAX_HANDSHAKES));
        tokio::spawn(async move {
            loop {
                let permit = tokio::select! {
                    _ = stop.cancelled() => return,
                    p = permits.clone().acquire_owned() => match p {
                        Ok(p) => p,
                        Err(_) => return,
                    },
                };
                let (stream, peer) = tokio::select! {
                    _ = stop.cancelled() => return,
                    accepted = tcp.accept() => match accepted {
                        Ok(a) => a,
                        Err(e) => {
                            // Out of file descriptors and the like: retry.
                            tracing::debug!(error = %e, "REST API: accept failed");
                            tokio::time::sleep(Duration::from_millis(100)).await;
                            continue;
                        }
                    },
                };
                let _ = stream.set_nodelay(true);
                let acceptor = acceptor.clone();
                let tx = tx.clone();
                tokio::spawn(async move {
                    let _permit = permit;
                    let handshake = async {
                        if !starts_with_tls(&stream).await {
                            answer_plain_http(stream).await;
                            return None;
                        }
                        Some(acceptor.accept(stream).await)
                    };
                    match tokio::time::timeout(HANDSHAKE_TIMEOUT, handshake).await {
                        Ok(None) => {
                            tracing::debug!(%peer, "REST API: plain HTTP on the TLS port")
                        }
                        Ok(Some(Ok(tls))) => {
                            let _ = tx.send((tls, peer)).await;
                        }
                        Ok(Some(Err(e))) => {
                            tracing::debug!(%peer, error = %e, "REST API: TLS handshake refused")
                        }
                        Err(_) => tracing::debug!(%peer, "REST API: TLS handshake timed out"),
                    }
                });
            }
        });
        TlsListener { ready, local }
    }
}

/// Whether the client's first byte is a TLS handshake record (0x16).
async fn starts_with_tls(stream: &TcpStream) -> bool {
    let mut first = [0u8; 1];
    matches!(stream.peek(&mut first).await, Ok(1) if first[0] == 0x16)
}

/// A plain HTTP request on the TLS port gets a plain answer saying so (in
/// Flink's error shape) instead of a TLS alert that curl shows as
/// "HTTP/0.9".
async fn answer_plain_http(mut stream: TcpStream) {
    use tokio::io::AsyncWriteExt;
    let body = r#"{"errors":["This REST API speaks TLS: use https://"]}"#;
    let answer = format!(
        "HTTP/1.1 400 Bad Request\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = stream.write_all(answer.as_bytes()).await;
    let _ = stream.shutdown().await;
}

impl axum::serve::Listener for TlsListener {
    type Io = tokio_rustls::server::TlsStream<TcpStream>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        match self.ready.recv().await {
            Some(conn) => conn,
            // The accept task ended (shutdown): graceful shutdown ends the
            // server; until then there is nothing more to accept.
            None => std::future::pending().await,
        }
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        Ok(self.local)
    }
}
