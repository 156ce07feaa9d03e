//! [`Session`]: applies write operations and reports every failed row.
//!
//! Three flush modes (as in the Java client; the default is the first):
//!
//! - [`FlushMode::AutoFlushSync`]: `apply` sends the operation at once and
//!   returns its outcome — a row error as `Error::RowErrors` with one entry,
//!   or the typed error of a request that failed as a whole.
//! - [`FlushMode::AutoFlushBackground`]: `apply` hands the operation to a
//!   flusher task over a bounded channel and returns; when the flusher is
//!   behind, `apply` waits (backpressure). The flusher closes a buffer when
//!   it holds `mutation_buffer_max_ops` operations or
//!   `mutation_buffer_max_bytes` bytes, or `flush_interval` after its first
//!   operation, and sends it while it fills the next one (at most
//!   [`BUFFERS_IN_FLIGHT`] buffers are being sent at once). With
//!   [`SessionOptions::adaptive_batching`], a buffer that is due while
//!   both sends are still running keeps taking operations (up to a byte
//!   limit) instead of making `apply` wait: a server that answers slowly
//!   then gets fewer, larger requests.
//! - [`FlushMode::ManualFlush`]: `apply` only buffers; a full buffer is an
//!   error, and nothing is sent before [`Session::flush`].
//!
//! In the buffering modes [`Session::flush`] sends what is buffered, waits
//! for it and for everything sent before, and returns every row that failed
//! since the previous flush as `Error::RowErrors` — rows the server refused
//! (key, op name, status) and rows of requests given up after retries (the
//! status then says why: timed out, network error, ...). Nothing is
//! swallowed. [`Session::close`] flushes and stops the flusher.
//!
//! Routing, batching, retries and ordering guarantees are described in
//! [`crate::write::batcher`].

use std::sync::atomic::Ordering;
use std::sync::Arc;

use tokio::sync::{mpsc, oneshot, Semaphore};
use tokio::task::JoinHandle;

use crate::client::KuduClient;
use crate::error::{Error, KuduStatus, Result, StatusCode};
use crate::row_ops::OpType;
use crate::scan::RowBatch;
use crate::schema::Row;
use crate::table::KuduTable;
use crate::write::batcher::{BatchConfig, Dispatcher};
use crate::write::buffered::BufferedOp;
use crate::write::copy::{encode_rows, AppliedRows, RequestSize, RowCopy};
use crate::write::flusher::{Flusher, Msg};
use crate::write::metrics::SessionMetrics;
use crate::write::options::{FlushMode, SessionOptions, BUFFERS_IN_FLIGHT};
use crate::write::outcome::{FlushOutcome, MetricsInner};

/// One write: an operation type, the table and the row.
#[derive(Debug, Clone)]
pub struct Operation {
    table: KuduTable,
    op: OpType,
    row: Row,
}

impl Operation {
    /// An operation of type `op` on `row` of `table` (validated when
    /// applied).
    pub fn new(table: &KuduTable, op: OpType, row: Row) -> Operation {
        Operation {
            table: table.clone(),
            op,
            row,
        }
    }

    /// INSERT: fails with ALREADY_PRESENT if the key exists.
    pub fn insert(table: &KuduTable, row: Row) -> Operation {
        Operation::new(table, OpType::Insert, row)
    }

    /// INSERT_IGNORE: an insert that skips existing keys.
    pub fn insert_ignore(table: &KuduTable, row: Row) -> Operation {
        Operation::new(table, OpType::InsertIgnore, row)
    }

    /// UPSERT: insert, or overwrite the supplied columns.
    pub fn upsert(table: &KuduTable, row: Row) -> Operation {
        Operation::new(table, OpType::Upsert, row)
    }

    /// UPSERT_IGNORE: an upsert that ignores writes to immutable columns.
    pub fn upsert_ignore(table: &KuduTable, row: Row) -> Operation {
        Operation::new(table, OpType::UpsertIgnore, row)
    }

    /// UPDATE: fails with NOT_FOUND if the key is missing.
    pub fn update(table: &KuduTable, row: Row) -> Operation {
        Operation::new(table, OpType::Update, row)
    }

    /// UPDATE_IGNORE: an update that skips missing keys.
    pub fn update_ignore(table: &KuduTable, row: Row) -> Operation {
        Operation::new(table, OpType::UpdateIgnore, row)
    }

    /// DELETE (only the key columns are sent): NOT_FOUND if missing.
    pub fn delete(table: &KuduTable, row: Row) -> Operation {
        Operation::new(table, OpType::Delete, row)
    }

    /// DELETE_IGNORE: a delete that skips missing keys.
    pub fn delete_ignore(table: &KuduTable, row: Row) -> Operation {
        Operation::new(table, OpType::DeleteIgnore, row)
    }

    /// The operation type.
    pub fn op_type(&self) -> OpType {
        self.op
    }

    /// The table written to.
    pub fn table(&self) -> &KuduTable {
        &self.table
    }

    /// The row.
    pub fn row(&self) -> &Row {
        &self.row
    }

    /// The row, to set columns.
    pub fn row_mut(&mut self) -> &mut Row {
        &mut self.row
    }
}

impl KuduClient {
    /// A write session with default options ([`FlushMode::AutoFlushSync`]).
    pub fn new_session(&self) -> Session {
        Session::new(self.clone(), SessionOptions::default(), None)
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
        Ok(Session::new(self.clone(), options, runtime))
    }
}

/// A write session. See the module docs for the flush modes.
///
/// Methods take `&mut self`: a session has one owner, which keeps "the order
/// of `apply` calls" well defined. Use one session per writer task.
#[derive(Debug)]
pub struct Session {
    options: SessionOptions,
    metrics: Arc<MetricsInner>,
    mode: Mode,
    closed: bool,
}

#[derive(Debug)]
enum Mode {
    Sync(Dispatcher),
    Manual {
        dispatcher: Dispatcher,
        buffer: Vec<BufferedOp>,
        bytes: usize,
    },
    Background {
        tx: Option<mpsc::Sender<Msg>>,
        task: Option<JoinHandle<FlushOutcome>>,
        /// `apply_rows`: bytes of encoded requests not sent yet.
        budget: Arc<Semaphore>,
        client: KuduClient,
    },
}

/// Requests `apply_rows` may have encoded and not yet answered, per
/// session, on top of the one being filled per tablet: one being sent and
/// one ready (a tablet's requests go one after the other anyway).
const ROW_REQUESTS_WAITING: usize = BUFFERS_IN_FLIGHT;

impl Session {
    fn new(
        client: KuduClient,
        options: SessionOptions,
        runtime: Option<tokio::runtime::Handle>,
    ) -> Session {
        let metrics = Arc::new(MetricsInner::default());
        let cfg = BatchConfig {
            timeout: options
                .timeout
                .unwrap_or_else(|| client.operation_timeout()),
            consistency: options.consistency,
            max_batch_bytes: options.max_batch_bytes,
            max_batches_in_flight: options.max_batches_in_flight,
        };
        let dispatcher = Dispatcher::new(client.clone(), cfg, metrics.clone());
        let mode = match (options.flush_mode, runtime) {
            (FlushMode::AutoFlushBackground, Some(rt)) => {
                let (tx, rx) = mpsc::channel(options.max_ops);
                let flusher = Flusher::new(rx, dispatcher, &options);
                let budget = Semaphore::new(rows_request_size(&options).budget);
                Mode::Background {
                    tx: Some(tx),
                    task: Some(rt.spawn(flusher.run())),
                    budget: Arc::new(budget),
                    client,
                }
            }
            (FlushMode::ManualFlush, _) => Mode::Manual {
                dispatcher,
                buffer: Vec::new(),
                bytes: 0,
            },
            _ => Mode::Sync(dispatcher),
        };
        Session {
            options,
            metrics,
            mode,
            closed: false,
        }
    }

    /// The session's flush mode.
    pub fn flush_mode(&self) -> FlushMode {
        self.options.flush_mode
    }

    /// A snapshot of the session's counters.
    pub fn metrics(&self) -> SessionMetrics {
        self.metrics.snapshot()
    }

    /// Applies one operation. Checks first that it is a data operation on
    /// a row of the table's schema with the key set (an
    /// `Error::InvalidArgument` naming the problem otherwise); then, per
    /// flush mode: sends it and returns its outcome (sync), queues it and
    /// waits only if the flusher is behind (background), or buffers it and
    /// fails if the buffer is full (manual).
    pub async fn apply(&mut self, op: Operation) -> Result<()> {
        if self.closed {
            return Err(closed());
        }
        let op = BufferedOp::new(op.table, op.op, op.row)?;
        match &mut self.mode {
            Mode::Sync(dispatcher) => {
                self.metrics.ops_applied.fetch_add(1, Ordering::Relaxed);
                let mut outcome = dispatcher.send(vec![op]).await;
                if outcome.causes.is_empty() {
                    outcome.into_result()
                } else {
                    // One row, failed as a whole: its cause is the answer.
                    Err(outcome.causes.swap_remove(0))
                }
            }
            Mode::Manual { buffer, bytes, .. } => {
                let (max_ops, max_bytes) = (self.options.max_ops, self.options.max_bytes);
                if buffer.len() >= max_ops || (!buffer.is_empty() && *bytes + op.size > max_bytes) {
                    return Err(Error::Status {
                        context: "write session in MANUAL_FLUSH mode".into(),
                        status: KuduStatus {
                            code: StatusCode::IllegalState,
                            message: format!(
                                "mutation buffer is full ({} operations, {} bytes; limits {max_ops} operations, {max_bytes} bytes): call flush() first",
                                buffer.len(),
                                bytes
                            ),
                            posix_code: None,
                        },
                    });
                }
                self.metrics.ops_applied.fetch_add(1, Ordering::Relaxed);
                *bytes += op.size;
                buffer.push(op);
                Ok(())
            }
            Mode::Background { tx, .. } => {
                let tx = tx.as_ref().ok_or_else(closed)?;
                tx.send(Msg::Op(op)).await.map_err(|_| flusher_gone())?;
                self.metrics.ops_applied.fetch_add(1, Ordering::Relaxed);
                Ok(())
            }
        }
    }

    /// Applies every row of a scan batch through `copy` (see
    /// [`RowCopy`]), in batch order, and returns how many rows got the live
    /// and the deleted-row operation.
    ///
    /// In background mode the rows are encoded straight into per-tablet
    /// requests, which go to the flusher as soon as they are full: at
    /// [`SessionOptions::rows_request_bytes`] and `mutation_buffer_max_ops`
    /// rows, or at `max_batch_bytes` whatever the rows (a whole batch is
    /// one call, not one `apply` per row). The call waits only while the
    /// session's encoded-but-unsent requests are over budget (a few
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
        let Mode::Background {
            tx, budget, client, ..
        } = &self.mode
        else {
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
        let tx = tx.as_ref().ok_or_else(closed)?.clone();
        let size = rows_request_size(&self.options);
        let timeout = self
            .options
            .timeout
            .unwrap_or_else(|| client.operation_timeout());
        let applied = encode_rows(client, copy, batch, size, budget, timeout, |encoded| {
            let tx = tx.clone();
            async move {
                tx.send(Msg::Encoded(encoded))
                    .await
                    .map_err(|_| flusher_gone())
            }
        })
        .await?;
        self.metrics
            .ops_applied
            .fetch_add((applied.live + applied.deleted) as u64, Ordering::Relaxed);
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
            Mode::Sync(_) => Ok(()),
            Mode::Manual {
                dispatcher,
                buffer,
                bytes,
            } => {
                *bytes = 0;
                let ops = std::mem::take(buffer);
                dispatcher.send(ops).await.into_result()
            }
            Mode::Background { tx, .. } => {
                let Some(tx) = tx.as_ref() else {
                    return Ok(());
                };
                let (reply, answer) = oneshot::channel();
                tx.send(Msg::Flush(reply))
                    .await
                    .map_err(|_| flusher_gone())?;
                answer.await.map_err(|_| flusher_gone())?.into_result()
            }
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
        if let Mode::Background { tx, task, .. } = &mut self.mode {
            drop(tx.take());
            if let Some(task) = task.take() {
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
            Mode::Manual { buffer, .. } => buffer.len(),
            _ => 0,
        }
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        if self.closed {
            return;
        }
        match &mut self.mode {
            Mode::Background { tx, task, .. } if task.is_some() => {
                // Dropping the sender lets the flusher send what it holds
                // and exit; its errors can only be logged now.
                drop(tx.take());
                tracing::debug!(
                    "write session dropped without close(); its flusher finishes in the background"
                );
            }
            Mode::Manual { buffer, .. } if !buffer.is_empty() => {
                tracing::warn!(
                    ops = buffer.len(),
                    "write session in MANUAL_FLUSH mode dropped with unflushed operations; they are discarded"
                );
            }
            _ => {}
        }
    }
}

/// How `apply_rows` cuts requests (see there) and what may wait unsent.
fn rows_request_size(o: &SessionOptions) -> RequestSize {
    let bytes = o.rows_request_bytes();
    RequestSize {
        bytes,
        min_rows: o.max_ops,
        max_bytes: o.max_batch_bytes.max(bytes),
        // A larger request (min_rows) takes the whole budget.
        budget: bytes
            .saturating_mul(ROW_REQUESTS_WAITING)
            .min(Semaphore::MAX_PERMITS),
    }
}

fn closed() -> Error {
    Error::InvalidArgument("write session is closed".into())
}

fn flusher_gone() -> Error {
    Error::InvalidArgument(
        "the session's background flusher has stopped (its runtime shut down?)".into(),
    )
}
