//! Write sessions: operations, flush modes, per-tablet batching and row
//! errors returned to the caller.
//!
//! - `options`, `metrics`: what a session is configured with and counts.
//! - `session`: [`Session`] (flush modes, buffers, backpressure, row
//!   errors, metrics) and [`Operation`].
//! - `batcher`: routing rows to tablets, per-tablet requests, retries
//!   with exactly-once request ids, write ordering.
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

// Dependencies run one way: session → batcher → (buffered, outcome,
// options, metrics) → crate::row_ops.
pub(crate) mod batcher;
pub(crate) mod buffered;
pub(crate) mod metrics;
pub(crate) mod options;
pub(crate) mod outcome;
pub(crate) mod session;

pub use crate::row_ops::OpType;
pub use metrics::{ServerWriteMetrics, SessionMetrics};
pub use options::{ExternalConsistencyMode, FlushMode, SessionOptions, BUFFERS_IN_FLIGHT};
pub use session::{Operation, Session};
