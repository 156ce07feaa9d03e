//! Write sessions: operations, flush modes, per-tablet batching and row
//! errors returned to the caller.
//!
//! - `ops`: operation types and the `RowOperationsPB` codec.
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

pub(crate) mod batcher;
pub(crate) mod ops;
pub(crate) mod session;

pub use ops::OpType;
pub use session::{
    ExternalConsistencyMode, FlushMode, Operation, ServerWriteMetrics, Session, SessionMetrics,
    SessionOptions, BUFFERS_IN_FLIGHT,
};
