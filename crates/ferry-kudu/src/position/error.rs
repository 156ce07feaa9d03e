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
    /// message (not a separate cause), so it is printed once. A failed
    /// write reads like any failed write to the sink ("writing sink table
    /// …"): to an operator a frozen sink looks the same whichever write
    /// met it first.
    #[error("{}: {cause}", describe(*.call, .table, .sink_table.as_deref()))]
    Kudu {
        /// The table concerned.
        table: String,
        /// The sink table whose position was read or written, if any.
        sink_table: Option<String>,
        /// The call that failed.
        call: Call,
        /// The Kudu error.
        cause: Box<KuduError>,
    },
    /// The position table exists but lacks a column ferry writes.
    #[error("position table '{table}' on the sink cluster has no {column} column of type {kind}; drop it (ferry creates it again) or name another table with job.positionTable")]
    Schema {
        /// The table concerned.
        table: String,
        /// The column.
        column: &'static str,
        /// The type ferry needs.
        kind: &'static str,
    },
    /// The record of a sink table cannot be decoded.
    #[error("the position of sink table '{sink_table}' in position table '{table}' cannot be read ({reason}); delete that row and restore from the newest checkpoint")]
    Record {
        /// The table concerned.
        table: String,
        /// The sink table.
        sink_table: String,
        /// Why.
        reason: String,
    },
    /// A value does not fit the table's INT64 columns.
    #[error("cannot record {what} {value} in position table '{table}': it does not fit an INT64")]
    OutOfRange {
        /// The table concerned.
        table: String,
        /// What is wrong or was recorded.
        what: &'static str,
        /// The value.
        value: u64,
    },
}

/// Which call to the sink cluster failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Call {
    /// Opening the position table.
    Open,
    /// Creating the position table.
    Create,
    /// Altering the position table.
    Alter,
    /// Writing a record.
    Write,
    /// Reading a record.
    Read,
}

fn describe(call: Call, table: &str, sink_table: Option<&str>) -> String {
    let sink = sink_table.unwrap_or("?");
    match call {
        Call::Open => format!("opening position table '{table}' on the sink cluster"),
        Call::Create => format!("creating position table '{table}' on the sink cluster"),
        Call::Alter => format!("adding columns to position table '{table}' on the sink cluster"),
        Call::Write => format!("writing sink table '{sink}' (its position, in table '{table}')"),
        Call::Read => format!("reading the position of sink table '{sink}' from table '{table}'"),
    }
}

impl PositionError {
    /// Whether trying again later may succeed.
    pub fn is_transient(&self) -> bool {
        match self {
            PositionError::Kudu { cause, .. } => cause.is_transient(),
            _ => false,
        }
    }

    /// Where it failed, for exception histories: a failed call to the
    /// sink cluster is a sink write failure like any other.
    pub fn kind_name(&self) -> &'static str {
        match self {
            PositionError::Kudu { .. } => "SinkWrite",
            _ => "SinkPosition",
        }
    }

    /// Whether the sink cluster refused the job's user.
    pub fn is_not_authorized(&self) -> bool {
        match self {
            PositionError::Kudu { cause, .. } => matches!(
                &**cause,
                KuduError::Status { status, .. } if status.code == StatusCode::NotAuthorized
            ),
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kudu_client::error::KuduStatus;

    fn kudu(call: Call, code: StatusCode) -> PositionError {
        PositionError::Kudu {
            table: "ferry_positions".into(),
            sink_table: Some("orders_copy".into()),
            call,
            cause: Box::new(KuduError::Status {
                context: "Write".into(),
                status: KuduStatus::new(code, "no"),
            }),
        }
    }

    #[test]
    fn a_failed_write_reads_like_any_sink_write() {
        let e = kudu(Call::Write, StatusCode::ServiceUnavailable);
        assert!(
            e.to_string().starts_with(
                "writing sink table 'orders_copy' (its position, in table 'ferry_positions'): "
            ),
            "{e}"
        );
        assert_eq!(e.kind_name(), "SinkWrite");
        assert!(e.is_transient() && !e.is_not_authorized());
        let refused =
            ferry_engine::EngineError::from(kudu(Call::Create, StatusCode::NotAuthorized));
        assert!(!refused.is_transient());
        assert!(refused
            .advice()
            .is_some_and(|a| a.contains("job.positionTable")));
        let bad = PositionError::Schema {
            table: "p".into(),
            column: "window_end",
            kind: "INT64",
        };
        assert_eq!(bad.kind_name(), "SinkPosition");
    }
}
