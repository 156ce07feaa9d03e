//! [`PositionError`]: why the sink position could not be read or written.

use kudu_client::error::StatusCode;
use kudu_client::Error as KuduError;

/// Why the sink position could not be read or written. A failed call to
/// the sink cluster is transient when the client says so; a record or a
/// table ferry cannot understand is not.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PositionError {
    /// A call to the sink cluster failed. The Kudu error is part of this
    /// message (not a separate cause), so it is printed once.
    #[error("{action} (position table '{table}' on the sink cluster): {cause}")]
    Kudu {
        table: String,
        action: &'static str,
        cause: KuduError,
    },
    /// The position table exists but lacks a column ferry writes.
    #[error("position table '{table}' on the sink cluster has no {column} column of type {kind}; drop it (ferry creates it again) or name another table with job.positionTable")]
    Schema {
        table: String,
        column: &'static str,
        kind: &'static str,
    },
    /// The record of a sink table cannot be decoded.
    #[error("the position of sink table '{sink_table}' in position table '{table}' cannot be read ({reason}); delete that row and restore from the newest checkpoint")]
    Record {
        table: String,
        sink_table: String,
        reason: String,
    },
    /// A value does not fit the table's INT64 columns.
    #[error("cannot record {what} {value} in position table '{table}': it does not fit an INT64")]
    OutOfRange {
        table: String,
        what: &'static str,
        value: u64,
    },
}

impl PositionError {
    /// Whether trying again later may succeed.
    pub fn is_transient(&self) -> bool {
        match self {
            PositionError::Kudu { cause, .. } => cause.is_transient(),
            _ => false,
        }
    }

    /// Whether the sink cluster refused the job's user.
    pub fn is_not_authorized(&self) -> bool {
        matches!(
            self,
            PositionError::Kudu {
                cause: KuduError::Status { status, .. },
                ..
            } if status.code == StatusCode::NotAuthorized
        )
    }
}
