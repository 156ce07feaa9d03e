//! One negotiated KRPC connection, multiplexing many calls.
//!
//! A [`Connection`] is a cheap, cloneable handle. Behind it two tasks own
//! the socket: a writer that sends encoded request frames in arrival order
//! and a reader that decodes response frames and hands each one to the
//! caller waiting on its call id (a `oneshot` per call, responses may come
//! back in any order). Callers never touch the socket.
//!
//! When either task hits an error (EOF, reset, malformed frame) the
//! connection closes: every call still in flight fails with the same
//! [`Error::ConnectionClosed`] reason, later calls fail at once, and
//! [`Connection::closed`] resolves so the pool can evict it. Dropping the
//! last handle shuts the connection down.

use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use prost::Message;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufWriter};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, oneshot, watch};
use tokio::time::Instant;

use super::frame::{self, ResponseFrame};
use super::negotiate::{negotiate_attempt, Attempt, NegotiateOptions, Negotiated};
use crate::error::{Error, Result, RpcErrorCode};
use crate::pb::rpc::{ErrorStatusPb, RemoteMethodPb, RequestHeader, RequestIdPb, ResponseHeader};
use crate::pb::RpcMethod;

/// How to open connections.
#[derive(Debug, Clone)]
pub struct ConnectOptions {
    /// Bound on TCP connect plus negotiation.
    pub connect_timeout: Duration,
    /// User name and TLS policy.
    pub negotiate: NegotiateOptions,
    /// Largest response frame accepted.
    pub max_frame_len: usize,
}

impl Default for ConnectOptions {
    fn default() -> Self {
        ConnectOptions {
            connect_timeout: Duration::from_secs(10),
            negotiate: NegotiateOptions::default(),
            max_frame_len: frame::DEFAULT_MAX_FRAME_LEN,
        }
    }
}

/// Whether a failed negotiation is worth one more try, and with what: a
/// server that refused our authentication token gets Kerberos instead (and
/// the token is dropped); a Kerberos ticket that expired is acquired anew.
fn second_attempt(err: &Error, done: Attempt, opts: &ConnectOptions) -> Option<Attempt> {
    match err {
        Error::Rpc {
            code: RpcErrorCode::FatalInvalidAuthenticationToken,
            ..
        } if !done.no_token => {
            if let Some(store) = &opts.negotiate.tokens {
                store.invalidate_current();
            }
            Some(Attempt {
                no_token: true,
                ..done
            })
        }
        Error::Authentication { message, .. }
        | Error::Rpc {
            code: RpcErrorCode::FatalUnauthorized,
            message,
            ..
        } if !done.fresh_credentials
            && opts.negotiate.uses_kerberos()
            && message.to_ascii_lowercase().contains("expired") =>
        {
            Some(Attempt {
                fresh_credentials: true,
                ..done
            })
        }
        _ => None,
    }
}

/// Per-call settings.
#[derive(Debug, Clone)]
pub struct CallOptions {
    /// When the caller stops waiting. The remaining time is also sent to the
    /// server as `timeout_millis`.
    pub deadline: Instant,
    /// Application feature numbers the server must support
    /// (`MasterFeatures` / `TabletServerFeatures`).
    pub required_feature_flags: Vec<u32>,
    /// Exactly-once identity of a write (kept across its retries).
    pub request_id: Option<RequestIdPb>,
}

impl CallOptions {
    /// A call that may take at most `timeout` from now.
    pub fn with_timeout(timeout: Duration) -> Self {
        Self::with_deadline(Instant::now() + timeout)
    }

    /// A call that must finish by `deadline`.
    pub fn with_deadline(deadline: Instant) -> Self {
        CallOptions {
            deadline,
            required_feature_flags: Vec::new(),
            request_id: None,
        }
    }

    /// Adds a required application feature flag.
    pub fn require_feature(mut self, flag: u32) -> Self {
        self.required_feature_flags.push(flag);
        self
    }

    /// Sets the exactly-once request id.
    pub fn request_id(mut self, id: RequestIdPb) -> Self {
        self.request_id = Some(id);
        self
    }
}

/// A successful response: the decoded body plus the frame's sidecars.
#[derive(Debug, Clone)]
pub struct Response<T> {
    /// The response message.
    pub body: T,
    /// Sidecars in order; `RowwiseRowBlockPB.rows_sidecar` etc. index here.
    pub sidecars: Vec<Bytes>,
}

/// A handle to one negotiated connection. Clones share the connection.
#[derive(Clone)]
pub struct Connection {
    handle: Arc<Handle>,
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connection")
            .field("addr", &self.handle.shared.addr)
            .field("tls", &self.handle.tls)
            .field("closed", &self.is_closed())
            .finish()
    }
}

/// Owned by the handles only: dropping the last one drops `tx`, which
/// tells the writer to shut the connection down.
struct Handle {
    shared: Arc<Shared>,
    tx: mpsc::Sender<Bytes>,
    /// TLS version and cipher suite; `None` for plaintext.
    tls: Option<String>,
}

/// State shared by the handles and the two tasks.
struct Shared {
    addr: String,
    next_call_id: AtomicI32,
    state: Mutex<State>,
    closed_tx: watch::Sender<bool>,
}

#[derive(Default)]
struct State {
    /// Callers waiting for a response, by call id.
    calls: HashMap<i32, oneshot::Sender<Result<ResponseFrame>>>,
    /// Set once, when the connection dies; why it died.
    closed: Option<String>,
}

/// How many encoded requests may queue for the writer before callers wait.
const WRITE_QUEUE: usize = 256;

impl Connection {
    /// Connects to `addr` (`host:port`), negotiates, and starts the reader
    /// and writer tasks. Bounded by `opts.connect_timeout`.
    pub async fn connect(addr: &str, opts: &ConnectOptions) -> Result<Connection> {
        let started = Instant::now();
        let connect = async {
            let mut attempt = Attempt::default();
            loop {
                let tcp = TcpStream::connect(addr).await.map_err(|source| Error::Io {
                    addr: addr.to_owned(),
                    source,
                })?;
                // Small request frames must not wait for Nagle.
                let _ = tcp.set_nodelay(true);
                let err = match negotiate_attempt(tcp, addr, &opts.negotiate, attempt).await {
                    Ok(n) => return Ok(n),
                    Err(e) => e,
                };
                match second_attempt(&err, attempt, opts) {
                    Some(next) => {
                        tracing::debug!(addr, error = %err, "negotiating again");
                        attempt = next;
                    }
                    None => return Err(err),
                }
            }
        };
        let negotiated = match tokio::time::timeout(opts.connect_timeout, connect).await {
            Ok(r) => r?,
            Err(_) => {
                return Err(Error::Io {
                    addr: addr.to_owned(),
                    source: std::io::Error::new(
                        std::io::ErrorKind::TimedOut,
                        format!(
                            "connecting and negotiating took longer than {:?}",
                            started.elapsed()
                        ),
                    ),
                })
            }
        };
        Ok(Self::start(addr, negotiated, opts.max_frame_len))
    }

    /// Starts the tasks over an already negotiated stream.
    pub fn start<S>(addr: &str, negotiated: Negotiated<S>, max_frame_len: usize) -> Connection
    where
        S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    {
        let Negotiated {
            stream, read_buf, ..
        } = negotiated;
        let tls = stream.tls_description();
        let (closed_tx, _) = watch::channel(false);
        let shared = Arc::new(Shared {
            addr: addr.to_owned(),
            next_call_id: AtomicI32::new(0),
            state: Mutex::new(State::default()),
            closed_tx,
        });
        let (rd, wr) = tokio::io::split(stream);
        let (tx, rx) = mpsc::channel(WRITE_QUEUE);
        tokio::spawn(write_loop(wr, rx, shared.clone()));
        tokio::spawn(read_loop(rd, read_buf, max_frame_len, shared.clone()));
        Connection {
            handle: Arc::new(Handle { shared, tx, tls }),
        }
    }

    /// The server address this connection was opened to.
    pub fn addr(&self) -> &str {
        &self.handle.shared.addr
    }

    /// Whether the connection is encrypted.
    pub fn is_tls(&self) -> bool {
        self.handle.tls.is_some()
    }

    /// TLS version and cipher suite (e.g. `TLSv1_3 TLS13_AES_128_GCM_SHA256`),
    /// or `None` for a plaintext connection.
    pub fn tls_description(&self) -> Option<&str> {
        self.handle.tls.as_deref()
    }

    /// Whether the connection has died (calls would fail at once).
    pub fn is_closed(&self) -> bool {
        *self.handle.shared.closed_tx.borrow()
    }

    /// Why the connection died, once it has.
    pub fn close_reason(&self) -> Option<String> {
        self.handle.shared.lock().closed.clone()
    }

    /// Resolves when the connection dies. Does not keep it alive.
    pub fn closed(&self) -> impl Future<Output = ()> + Send + 'static {
        let mut rx = self.handle.shared.closed_tx.subscribe();
        async move {
            // An error means the sender is gone, i.e. closed as well.
            let _ = rx.wait_for(|closed| *closed).await;
        }
    }

    /// Whether two handles share one connection.
    pub fn ptr_eq(&self, other: &Connection) -> bool {
        Arc::ptr_eq(&self.handle, &other.handle)
    }

    /// Closes the connection: in-flight calls fail with `reason`.
    pub fn close(&self, reason: &str) {
        self.handle.shared.close(reason.to_owned());
    }

    /// Calls method `M` and decodes its response.
    pub async fn call<M: RpcMethod>(
        &self,
        request: &M::Request,
        opts: &CallOptions,
    ) -> Result<Response<M::Response>> {
        let raw = self.call_raw(M::SERVICE, M::METHOD, request, opts).await?;
        let body = M::Response::decode(raw.body).map_err(|e| Error::Protocol {
            addr: self.addr().to_owned(),
            message: format!("undecodable {}.{} response: {e}", M::SERVICE, M::METHOD),
        })?;
        Ok(Response {
            body,
            sidecars: raw.sidecars,
        })
    }

    /// Calls `service.method` with an encoded-on-the-fly request and returns
    /// the raw response body. An `ErrorStatusPB` answer becomes
    /// [`Error::Rpc`]; no answer by the deadline becomes [`Error::TimedOut`].
    pub async fn call_raw(
        &self,
        service: &str,
        method: &str,
        request: &impl Message,
        opts: &CallOptions,
    ) -> Result<Response<Bytes>> {
        let shared = &self.handle.shared;
        let started = Instant::now();
        let full_method = || format!("{service}.{method}");
        let timed_out = |last: &str| Error::TimedOut {
            operation: format!("{} on {}", full_method(), shared.addr),
            attempts: 1,
            elapsed: started.elapsed(),
            last: last.to_owned(),
        };
        let remaining = opts.deadline.saturating_duration_since(started);
        if remaining.is_zero() {
            return Err(timed_out("deadline passed before the call was sent"));
        }

        let call_id = shared.next_call_id()?;
        let header = RequestHeader {
            call_id,
            remote_method: Some(RemoteMethodPb {
                service_name: service.to_owned(),
                method_name: method.to_owned(),
            }),
            timeout_millis: Some(u32::try_from(remaining.as_millis()).unwrap_or(u32::MAX)),
            required_feature_flags: opts.required_feature_flags.clone(),
            request_id: opts.request_id.clone(),
            sidecar_offsets: Vec::new(),
        };
        let mut buf = BytesMut::new();
        frame::encode_message(&header, request, &mut buf)
            .map_err(|e| Error::InvalidArgument(format!("cannot send {}: {e}", full_method())))?;

        let (tx, rx) = oneshot::channel();
        {
            let mut state = shared.lock();
            if let Some(reason) = &state.closed {
                return Err(shared.closed_error(reason));
            }
            state.calls.insert(call_id, tx);
        }
        // Forget the call if we stop waiting (deadline or caller dropped).
        let _guard = CallGuard { shared, call_id };

        let exchange = async {
            if self.handle.tx.send(buf.freeze()).await.is_err() {
                return Err(shared.closed_error_now());
            }
            match rx.await {
                Ok(result) => result,
                Err(_) => Err(shared.closed_error_now()),
            }
        };
        let frame = match tokio::time::timeout_at(opts.deadline, exchange).await {
            Ok(result) => result?,
            Err(_) => return Err(timed_out("no response before the deadline")),
        };

        if frame.header.is_error() {
            return Err(rpc_error(&frame, &shared.addr, &full_method()));
        }
        Ok(Response {
            body: frame.body,
            sidecars: frame.sidecars,
        })
    }
}

/// Turns an `ErrorStatusPB` body into [`Error::Rpc`].
fn rpc_error(frame: &ResponseFrame, addr: &str, method: &str) -> Error {
    match ErrorStatusPb::decode(frame.body.clone()) {
        Ok(status) => {
            let mut message = status.message;
            if !status.unsupported_feature_flags.is_empty() {
                message.push_str(&format!(
                    " (unsupported feature flags: {:?})",
                    status.unsupported_feature_flags
                ));
            }
            Error::Rpc {
                addr: addr.to_owned(),
                method: method.to_owned(),
                code: RpcErrorCode::from_i32(status.code.unwrap_or(0)),
                message,
            }
        }
        Err(e) => Error::Protocol {
            addr: addr.to_owned(),
            message: format!("undecodable error status for {method}: {e}"),
        },
    }
}

/// Removes a call's entry when its caller stops waiting.
struct CallGuard<'a> {
    shared: &'a Shared,
    call_id: i32,
}

impl Drop for CallGuard<'_> {
    fn drop(&mut self) {
        self.shared.lock().calls.remove(&self.call_id);
    }
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding this lock cannot leave the map inconsistent
        // (single inserts/removes), so a poisoned lock is still usable.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Call ids must increase; running out closes the connection so the
    /// pool opens a fresh one.
    fn next_call_id(&self) -> Result<i32> {
        self.next_call_id
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |id| id.checked_add(1))
            .map_err(|_| {
                self.close("call id space exhausted".to_owned());
                self.closed_error_now()
            })
    }

    fn closed_error(&self, reason: &str) -> Error {
        Error::ConnectionClosed {
            addr: self.addr.clone(),
            reason: reason.to_owned(),
        }
    }

    fn closed_error_now(&self) -> Error {
        let reason = self
            .lock()
            .closed
            .clone()
            .unwrap_or_else(|| "connection is shutting down".to_owned());
        self.closed_error(&reason)
    }

    /// Marks the connection dead (first reason wins), fails every waiting
    /// call with that reason and fires the closed signal.
    fn close(&self, reason: String) {
        let calls = {
            let mut state = self.lock();
            if state.closed.is_some() {
                return;
            }
            tracing::debug!(addr = %self.addr, %reason, "connection closed");
            state.closed = Some(reason.clone());
            std::mem::take(&mut state.calls)
        };
        for (_, tx) in calls {
            let _ = tx.send(Err(self.closed_error(&reason)));
        }
        self.closed_tx.send_replace(true);
    }

    /// Hands a response to its caller. Returns a reason to close the
    /// connection if the frame is a fatal error nobody is waiting for.
    fn dispatch(&self, frame: ResponseFrame) -> Option<String> {
        let call_id = frame.header.call_id;
        let waiter = self.lock().calls.remove(&call_id);
        match waiter {
            // The caller may have given up in between; that is fine.
            Some(tx) => {
                let _ = tx.send(Ok(frame));
                None
            }
            None if frame.header.is_error() => {
                let err = rpc_error(&frame, &self.addr, "connection");
                match &err {
                    Error::Rpc { code, .. } if code.is_fatal() => Some(err.to_string()),
                    _ => {
                        tracing::debug!(addr = %self.addr, call_id, %err, "error for an unknown call");
                        None
                    }
                }
            }
            None => {
                tracing::debug!(addr = %self.addr, call_id, "response for a call nobody awaits");
                None
            }
        }
    }
}

async fn write_loop<W>(wr: W, mut rx: mpsc::Receiver<Bytes>, shared: Arc<Shared>)
where
    W: AsyncWrite + Unpin,
{
    let mut wr = BufWriter::new(wr);
    let mut closed = shared.closed_tx.subscribe();
    loop {
        let next = tokio::select! {
            next = rx.recv() => next,
            _ = closed.wait_for(|c| *c) => return,
        };
        let Some(first) = next else {
            // Every handle is gone: nobody can call any more.
            shared.close("connection dropped by the client".to_owned());
            let _ = wr.shutdown().await;
            return;
        };
        // Write everything already queued, then flush once.
        let result = async {
            wr.write_all(&first).await?;
            while let Ok(more) = rx.try_recv() {
                wr.write_all(&more).await?;
            }
            wr.flush().await
        }
        .await;
        if let Err(e) = result {
            shared.close(format!("write failed: {e}"));
            return;
        }
    }
}

async fn read_loop<R>(mut rd: R, mut buf: BytesMut, max_frame_len: usize, shared: Arc<Shared>)
where
    R: AsyncRead + Unpin,
{
    let mut closed = shared.closed_tx.subscribe();
    let reason = 'conn: loop {
        loop {
            match frame::decode_with_limit::<ResponseHeader>(&mut buf, max_frame_len) {
                Ok(Some(frame)) => {
                    if let Some(reason) = shared.dispatch(frame) {
                        break 'conn reason;
                    }
                }
                Ok(None) => break,
                Err(e) => break 'conn format!("server sent a bad frame: {e}"),
            }
        }
        let read = tokio::select! {
            read = rd.read_buf(&mut buf) => read,
            _ = closed.wait_for(|c| *c) => return,
        };
        match read {
            Ok(0) => break "server closed the connection".to_owned(),
            Ok(_) => {}
            Err(e) => break format!("read failed: {e}"),
        }
    };
    shared.close(reason);
}
