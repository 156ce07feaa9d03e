//! Write sessions: operations, flush modes, per-tablet requests and row
//! errors returned to the caller.
//!
//! Every write takes one path: a session's rows — single operations,
//! batches of them, or scan rows copied through a [`RowCopy`] — are fed to
//! one per-tablet request builder, which routes each row to its tablet,
//! appends it to that tablet's encoded request and seals the request at
//! the session's byte/row budget; sealed requests are sent in order per
//! tablet, with retries under one exactly-once request id.
//!
//! - `operation`: [`Operation`]; `options`, `metrics`: what a session is
//!   configured with (resolved once) and counts.
//! - `session`: [`Session`] and its flush modes; `background`: the
//!   AUTO_FLUSH_BACKGROUND buffer, flusher task and byte budget;
//!   `buffer`: checked operations and the buffer of the buffering modes.
//! - `request`: the per-tablet request builder (route, append, seal);
//!   `copy`: [`RowCopy`], scan rows fed to it without a `Row` per row.
//! - `send`: sending a request (retries, exactly-once, row errors);
//!   `order`: write order per tablet; `inflight`: background sends and
//!   their outcomes until a flush; `outcome`: row errors and counters.
//!
//! ```no_run
//! # async fn demo(client: kudu_client::KuduClient) -> kudu_client::Result<()> {
//! use kudu_client::write::{FlushMode, Operation, SessionOptions};
//! let table = client.open_table("metrics").await?;
//! let mut session = client.new_session_with(
//!     SessionOptions::default().flush_mode(FlushMode::AutoFlushBackground),
//! )?;
//! for i in 0..10_000i64 {
//!     let mut row = table.new_row();
//!     row.set_i64("id", i)?.set_str("name", "x")?;
//!     session.apply(Operation::upsert(&table, row)).await?;
//! }
//! // Every failed row since the last flush comes back here.
//! session.close().await?;
//! # Ok(()) }
//! ```
//!
//! A whole batch of operations in one call (checked first, then fed
//! straight to the per-tablet requests):
//!
//! ```no_run
//! # async fn demo(client: kudu_client::KuduClient) -> kudu_client::Result<()> {
//! use kudu_client::write::{FlushMode, Operation, SessionOptions};
//! let table = client.open_table("metrics").await?;
//! let mut session = client.new_session_with(
//!     SessionOptions::default().flush_mode(FlushMode::AutoFlushBackground),
//! )?;
//! let mut ops = Vec::new();
//! for i in 0..10_000i64 {
//!     let mut row = table.new_row();
//!     row.set_i64("id", i)?;
//!     ops.push(Operation::delete_ignore(&table, row));
//! }
//! session.apply_batch(ops).await?;
//! session.flush().await?;
//! # Ok(()) }
//! ```
//!
//! Copying scan rows — a snapshot or a diff scan — into another table, a
//! whole batch per call (deleted rows of a diff scan become deletes):
//!
//! ```no_run
//! # async fn demo(src: kudu_client::KuduClient, dst: kudu_client::KuduClient) -> kudu_client::Result<()> {
//! use kudu_client::write::{FlushMode, OpType, RowCopy, SessionOptions};
//! let (from, to) = (src.open_table("metrics").await?, dst.open_table("metrics").await?);
//! let mut scanner = src.scan_builder(&from).build()?;
//! let mut session = dst.new_session_with(
//!     SessionOptions::default().flush_mode(FlushMode::AutoFlushBackground),
//! )?;
//! // Same column order on both sides here: column i feeds column i.
//! let columns: Vec<(usize, usize)> = (0..to.schema().len()).map(|i| (i, i)).collect();
//! let copy = RowCopy::new(
//!     &to,
//!     scanner.projection_schema(),
//!     &columns,
//!     OpType::UpsertIgnore,
//!     OpType::DeleteIgnore,
//! )?;
//! while let Some(batch) = scanner.next_batch().await? {
//!     session.apply_rows(&copy, &batch).await?;
//! }
//! session.close().await?;
//! # Ok(()) }
//! ```

// Dependencies run one way: session → background → (copy, request) →
// send → (order, outcome, options, metrics) → crate::row_ops; `request`
// and `send` meet in one place: a request whose tablet moved is fed to a
// new builder by `send`.
pub(crate) mod background;
pub(crate) mod buffer;
pub(crate) mod copy;
pub(crate) mod inflight;
pub(crate) mod metrics;
pub(crate) mod operation;
pub(crate) mod options;
pub(crate) mod order;
pub(crate) mod outcome;
pub(crate) mod request;
pub(crate) mod send;
pub(crate) mod session;
#[cfg(test)]
mod testutil;

pub use crate::row_ops::OpType;
pub use copy::{AppliedRows, RowCopy};
pub use metrics::{ServerWriteMetrics, SessionMetrics};
pub use operation::Operation;
pub use options::{ExternalConsistencyMode, FlushMode, SessionOptions, BUFFERS_IN_FLIGHT};
pub use session::Session;
