//! Write sessions: operations, flush modes, per-tablet batching and row
//! errors returned to the caller.
//!
//! - `options`, `metrics`: what a session is configured with and counts.
//! - `session`: [`Session`] (flush modes, buffers, backpressure, row
//!   errors, metrics) and [`Operation`]; `flusher`: the background
//!   mode's flusher task.
//! - `batcher`: routing rows to tablets, per-tablet requests, retries
//!   with exactly-once request ids, write ordering.
//! - `copy`: [`RowCopy`] and `Session::apply_rows` — scan rows encoded
//!   straight into per-tablet requests, a whole batch per call.
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

// Dependencies run one way: session → flusher → batcher → copy →
// (buffered, outcome, options, metrics) → crate::row_ops; the one
// exception is the plain `Operation` type, which copy builds.
pub(crate) mod batcher;
pub(crate) mod buffered;
pub(crate) mod copy;
pub(crate) mod flusher;
pub(crate) mod metrics;
pub(crate) mod options;
pub(crate) mod outcome;
pub(crate) mod session;

pub use crate::row_ops::OpType;
pub use copy::{AppliedRows, RowCopy};
pub use metrics::{ServerWriteMetrics, SessionMetrics};
pub use options::{ExternalConsistencyMode, FlushMode, SessionOptions, BUFFERS_IN_FLIGHT};
pub use session::{Operation, Session};
