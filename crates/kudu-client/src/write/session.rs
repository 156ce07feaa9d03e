//! [`Session`]: applies write operations and reports every failed row.
//!
//! Three flush modes (as in the Java client; the default is the first):
//!
//! - [`FlushMode::AutoFlushSync`]: `apply` sends the operation at once and
//!   returns its outcome — a row error as `Error::RowErrors` with one entry,
//!   or the typed error of a request that failed as a whole.
//! - [`FlushMode::AutoFlushBackground`]: `apply` buffers the operation and
//!   returns; when the buffer is due and cannot be sent yet, `apply` waits
//!   (backpressure). A flusher task sends a buffer when it holds
//!   `mutation_buffer_max_ops` operations or `mutation_buffer_max_bytes`
//!   bytes, or `flush_interval` after its first operation, while the next
//!   one fills (at most [`BUFFERS_IN_FLIGHT`](crate::write::BUFFERS_IN_FLIGHT)
//!   buffers are being sent at once). With [`SessionOptions::adaptive_batching`], a buffer that is
//!   due while both sends are still running keeps taking operations (up to
//!   a byte limit) instead of making `apply` wait: a server that answers
//!   slowly then gets fewer, larger requests.
//! - [`FlushMode::ManualFlush`]: `apply` only buffers; a full buffer is an
//!   error, and nothing is sent before [`Session::flush`].
//!
//! [`Session::apply_batch`] and [`Session::apply_rows`] apply a whole batch
//! in one call. In the buffering modes [`Session::flush`] sends what is
//! buffered, waits for it and for everything sent before, and returns every
//! row that failed since the previous flush as `Error::RowErrors` — rows
//! the server refused (key, op name, status) and rows of requests given up
//! after retries (the status then says why: timed out, network error, ...).
//! Nothing is swallowed. [`Session::close`] flushes and stops the flusher.
//!
//! Every mode writes through one request builder (`write::request`):
//! routing, per-tablet requests, retries and ordering are described in
//! `write::request` and `write::send`.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use crate::client::KuduClient;
use crate::error::{Error, KuduStatus, Result, StatusCode};
use crate::scan::RowBatch;
use crate::write::background::{Background, Flusher};
use crate::write::buffer::{BufferedOp, OpBuffer};
use crate::write::copy::{AppliedRows, RowCopy};
use crate::write::metrics::SessionMetrics;
use crate::write::operation::Operation;
use crate::write::options::{FlushMode, SessionOptions, Settings};
use crate::write::outcome::{FlushOutcome, MetricsInner};
use crate::write::request::{feed_ops, Outlet, RequestBuilder};
use crate::write::send::SendCtx;

impl KuduClient {
    /// A write session with default options ([`FlushMode::AutoFlushSync`]).
    pub fn new_session(&self) -> Session {
        let settings = Settings::new(&SessionOptions::default(), self.operation_timeout());
        Session::new(self.clone(), settings, None)
    }

    /// A write session with `options`. Background mode starts its flusher
    /// task here, so it must be called inside a Tokio runtime.
    pub fn new_session_with(&self, options: SessionOptions) -> Result<Session> {
        options.validate()?;
        let runtime = match options.flush_mode {
            FlushMode::AutoFlushBackground => {
                Some(tokio::runtime::Handle::try_current().map_err(|_| {
                    Error::InvalidArgument(
                        "a background-flush session must be created inside a Tokio runtime".into(),
                    )
                })?)
            }
            _ => None,
        };
        let settings = Settings::new(&options, self.operation_timeout());
        Ok(Session::new(self.clone(), settings, runtime))
    }
}

/// A write session. See the module docs for the flush modes.
///
/// Methods take `&mut self`: a session has one owner, which keeps "the order
/// of `apply` calls" well defined. Use one session per writer task.
#[derive(Debug)]
pub struct Session {
    settings: Settings,
    ctx: Arc<SendCtx>,
    metrics: Arc<MetricsInner>,
    mode: Mode,
    closed: bool,
}

#[derive(Debug)]
enum Mode {
    Sync,
    Manual(OpBuffer),
    Background {
        shared: Arc<Background>,
        /// `None` once closed.
        flusher: Option<Flusher>,
    },
}

impl Session {
    fn new(
        client: KuduClient,
        settings: Settings,
        runtime: Option<tokio::runtime::Handle>,
    ) -> Session {
        let metrics = Arc::new(MetricsInner::default());
        let ctx = Arc::new(SendCtx::new(client, &settings, metrics.clone()));
        let mode = match (settings.flush_mode, runtime) {
            (FlushMode::AutoFlushBackground, Some(rt)) => {
                let (shared, flusher) = Background::start(ctx.clone(), settings.clone(), rt);
                Mode::Background {
                    shared,
                    flusher: Some(flusher),
                }
            }
            (FlushMode::ManualFlush, _) => Mode::Manual(OpBuffer::default()),
            _ => Mode::Sync,
        };
        Session {
            settings,
            ctx,
            metrics,
            mode,
            closed: false,
        }
    }

    /// The session's flush mode.
    pub fn flush_mode(&self) -> FlushMode {
        self.settings.flush_mode
    }

    /// A snapshot of the session's counters.
    pub fn metrics(&self) -> SessionMetrics {
        self.metrics.snapshot()
    }

    fn applied(&self, n: usize) {
        self.metrics
            .ops_applied
            .fetch_add(n as u64, Ordering::Relaxed);
    }

    /// Applies one operation. Checks first that it is a data operation on
    /// a row of the table's schema with the key set (an
    /// `Error::InvalidArgument` naming the problem otherwise); then, per
    /// flush mode: sends it and returns its outcome (sync), buffers it and
    /// waits only if the buffer is due and cannot be sent yet (background),
    /// or buffers it and fails if the buffer is full (manual).
    pub async fn apply(&mut self, op: Operation) -> Result<()> {
        if self.closed {
            return Err(closed());
        }
        let op = BufferedOp::check(op)?;
        match &mut self.mode {
            Mode::Sync => {
                self.applied(1);
                let mut outcome = self.send_now(vec![op]).await;
                if outcome.causes.is_empty() {
                    outcome.into_result()
                } else {
                    // One row, failed as a whole: its cause is the answer.
                    Err(outcome.causes.swap_remove(0))
                }
            }
            Mode::Manual(buffer) => {
                if !buffer.has_room(1, op.size, &self.settings) {
                    return Err(buffer_full(buffer, 1, &self.settings));
                }
                buffer.push(op, &self.settings);
                self.applied(1);
                Ok(())
            }
            Mode::Background { shared, .. } => {
                shared.apply(op).await;
                self.applied(1);
                Ok(())
            }
        }
    }

    /// Applies `ops`, in order, as one call: checked first like `apply`
    /// (the first invalid one is the error, and none is applied), then fed
    /// straight to the session's per-tablet requests — no call or queue
    /// hop per operation. Per flush mode: sends them and returns their
    /// outcome, every failed row in one `Error::RowErrors` (sync); sends
    /// them after what is buffered, as requests cut at
    /// [`SessionOptions::rows_request_bytes`], waiting only while the
    /// session's unanswered whole-batch requests are over budget, with
    /// failed rows reported by the next [`flush`](Session::flush)
    /// (background); or buffers them all, or refuses them all if the buffer
    /// cannot hold them (manual).
    pub async fn apply_batch<I>(&mut self, ops: I) -> Result<()>
    where
        I: IntoIterator<Item = Operation>,
    {
        if self.closed {
            return Err(closed());
        }
        let ops = ops
            .into_iter()
            .map(BufferedOp::check)
            .collect::<Result<Vec<_>>>()?;
        if ops.is_empty() {
            return Ok(());
        }
        let n = ops.len();
        match &mut self.mode {
            Mode::Sync => {
                self.applied(n);
                self.send_now(ops).await.into_result()
            }
            Mode::Manual(buffer) => {
                let bytes = ops.iter().map(|op| op.size).sum();
                if !buffer.has_room(n, bytes, &self.settings) {
                    return Err(buffer_full(buffer, n, &self.settings));
                }
                for op in ops {
                    buffer.push(op, &self.settings);
                }
                self.applied(n);
                Ok(())
            }
            Mode::Background { shared, .. } => {
                // Counted first: the rows may be answered before the call
                // returns.
                self.metrics
                    .ops_applied
                    .fetch_add(n as u64, Ordering::Relaxed);
                shared.apply_batch(ops).await;
                Ok(())
            }
        }
    }

    /// Applies every row of a scan batch through `copy` (see
    /// [`RowCopy`]), in batch order, and returns how many rows got the live
    /// and the deleted-row operation.
    ///
    /// In background mode the rows are encoded straight into per-tablet
    /// requests, which are sent as soon as they are full: at
    /// [`SessionOptions::rows_request_bytes`] and `mutation_buffer_max_ops`
    /// rows, or at `max_batch_bytes` whatever the rows (a whole batch is
    /// one call, not one `apply` per row). The call waits only while the
    /// session's encoded-but-unanswered requests are over budget (a few
    /// requests' bytes). Rows that fail — before sending (a value
    /// the table refuses, no tablet for the key) or on the server — are
    /// reported by the next [`flush`](Session::flush), like those of
    /// `apply`. Only a table whose tablets cannot be located fails the
    /// call itself; rows encoded before that may have been handed on.
    ///
    /// In the other modes each row is applied as an [`Operation`], with
    /// those modes' rules.
    pub async fn apply_rows(&mut self, copy: &RowCopy, batch: &RowBatch) -> Result<AppliedRows> {
        if self.closed {
            return Err(closed());
        }
        if batch.schema() != copy.projection() {
            return Err(Error::InvalidArgument(format!(
                "rows of projection {} applied through a copy of projection {}",
                batch.schema(),
                copy.projection()
            )));
        }
        let Mode::Background { shared, .. } = &self.mode else {
            let mut applied = AppliedRows::default();
            for view in batch.rows() {
                let deleted = view.is_deleted();
                self.apply(copy.operation(&view)?).await?;
                if deleted {
                    applied.deleted += 1;
                } else {
                    applied.live += 1;
                }
            }
            return Ok(applied);
        };
        let applied = shared.apply_rows(copy, batch).await?;
        self.applied(applied.live + applied.deleted);
        Ok(applied)
    }

    /// Sends everything buffered, waits until it and everything sent
    /// before is answered, and returns every row that failed since the
    /// previous flush as `Error::RowErrors` (in no particular order). In
    /// sync mode there is nothing to flush (apply already returned each
    /// outcome).
    ///
    /// In manual mode, dropping the returned future part-way abandons the
    /// rows it was sending: they may or may not have been written.
    pub async fn flush(&mut self) -> Result<()> {
        match &mut self.mode {
            Mode::Sync => Ok(()),
            Mode::Manual(buffer) => {
                let ops = buffer.take();
                self.send_now(ops).await.into_result()
            }
            Mode::Background { shared, .. } => shared.flush().await,
        }
    }

    /// Flushes, then stops the session (and its flusher task). Later
    /// `apply` calls fail. Returns the flush's result.
    pub async fn close(&mut self) -> Result<()> {
        if self.closed {
            return Ok(());
        }
        let flushed = self.flush().await;
        self.closed = true;
        if let Mode::Background { flusher, .. } = &mut self.mode {
            if let Some(Flusher { stop, task }) = flusher.take() {
                // The task may be gone already (its runtime shut down).
                let _ = stop.send(());
                // Anything the flusher still held (nothing after the flush
                // above, unless that flush failed to reach it).
                let rest = task.await.map_err(|e| {
                    Error::InvalidArgument(format!("write flusher task failed: {e}"))
                })?;
                if let Err(e) = rest.into_result() {
                    return flushed.and(Err(e));
                }
            }
        }
        flushed
    }

    /// Operations buffered and not yet handed to a flush (manual mode; in
    /// background mode see [`SessionMetrics::ops_pending`]).
    pub fn buffered_ops(&self) -> usize {
        match &self.mode {
            Mode::Manual(buffer) => buffer.len(),
            _ => 0,
        }
    }

    /// Routes and sends `ops` now, waiting for every answer (sync and
    /// manual modes).
    async fn send_now(&self, ops: Vec<BufferedOp>) -> FlushOutcome {
        if ops.is_empty() {
            return FlushOutcome::default();
        }
        let expected = ops.iter().map(|op| op.size).sum();
        let builder = RequestBuilder::new(
            self.ctx.client(),
            self.settings.buffered,
            expected,
            self.ctx.deadline(),
        );
        let mut outlet = Outlet::Keep(Vec::new());
        let failed = feed_ops(builder, ops, &mut outlet).await;
        self.ctx.dispatch_all(outlet.into_kept(), failed).await
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        if self.closed {
            return;
        }
        match &mut self.mode {
            Mode::Background { flusher, .. } if flusher.is_some() => {
                // Dropping the stop signal lets the flusher send what is
                // buffered and exit; its errors can only be logged now.
                drop(flusher.take());
                tracing::debug!(
                    "write session dropped without close(); its flusher finishes in the background"
                );
            }
            Mode::Manual(buffer) if buffer.len() > 0 => {
                tracing::warn!(
                    ops = buffer.len(),
                    "write session in MANUAL_FLUSH mode dropped with unflushed operations; they are discarded"
                );
            }
            _ => {}
        }
    }
}

/// MANUAL_FLUSH: `more` operations do not fit the buffer.
fn buffer_full(buffer: &OpBuffer, more: usize, s: &Settings) -> Error {
    Error::Status {
        context: "write session in MANUAL_FLUSH mode".into(),
        status: KuduStatus {
            code: StatusCode::IllegalState,
            message: format!(
                "mutation buffer is full ({} operations, {} bytes; limits {} operations, {} bytes; {more} more do not fit): call flush() first",
                buffer.len(),
                buffer.bytes(),
                s.max_ops,
                s.max_bytes
            ),
            posix_code: None,
        },
    }
}

fn closed() -> Error {
    Error::InvalidArgument("write session is closed".into())
}
