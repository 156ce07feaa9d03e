//! [`CutsError`]: why the cuts table could not be read or written.

use kudu_client::Error as KuduError;

/// Why the cuts table could not be read or written.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CutsError {
    /// A call to the sink cluster failed (the Kudu error is part of this
    /// message, so it is printed once).
    #[error("{what} cuts table '{table}' on the sink cluster: {cause}")]
    Kudu {
        /// The cuts table.
        table: String,
        /// What was being done ("writing to", "reading", …).
        what: &'static str,
        /// The Kudu error.
        cause: Box<KuduError>,
    },
    /// The table exists but is not a cuts table ferry can use.
    #[error("cuts table '{table}' on the sink cluster has no {column} column of type {kind}; drop it (ferry creates it again) or name another table with job.cutsTable")]
    Schema {
        /// The cuts table.
        table: String,
        /// The column.
        column: &'static str,
        /// The type ferry needs.
        kind: &'static str,
    },
    /// A row cannot be decoded.
    #[error("a cut of job '{job_id}' in cuts table '{table}' cannot be read ({reason}); delete that row")]
    Record {
        /// The cuts table.
        table: String,
        /// The job of the row.
        job_id: String,
        /// Why.
        reason: String,
    },
    /// A value does not fit the table's INT64 columns.
    #[error("cannot record {what} {value} in cuts table '{table}': it does not fit an INT64")]
    OutOfRange {
        /// The cuts table.
        table: String,
        /// What was recorded.
        what: &'static str,
        /// The value.
        value: u64,
    },
}

impl CutsError {
    /// Whether trying again later may succeed.
    pub fn is_transient(&self) -> bool {
        match self {
            CutsError::Kudu { cause, .. } => cause.is_transient(),
            _ => false,
        }
    }
}
