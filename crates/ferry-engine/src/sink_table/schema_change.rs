//! Following the source's schema on the sink (`job.schemaEvolution`):
//! at a window boundary, bring the sink table in line with the source
//! table's schema now, matching columns by the source's column ids.
//!
//! Contract (filled in by the schema-evolution work; see
//! docs/semantics.md "Schema changes"):
//! - [`SchemaChangeError`]: a change ferry will not apply (type change,
//!   primary key change, a sink column changed by someone else); the
//!   message names the table and column and says what to do.

/// A source schema change that ferry will not apply to the sink; the table
/// is paused and nothing of the next window is written.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SchemaChangeError {
    /// Placeholder until the full list lands: one message.
    #[error("{0}")]
    Refused(String),
}
