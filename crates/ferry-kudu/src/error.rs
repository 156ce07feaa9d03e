//! How Kudu errors reach the engine: as a
//! [`ConnectorError`](ferry_engine::error::ConnectorError) that says what
//! failed (source, sink or the position record), on which table, whether a
//! retry may help (the Kudu client's own classification) and what the
//! operator can do. The engine reads only that, never a Kudu type.

use crate::position::PositionError;
use crate::sink_table::{SchemaChangeError, SinkTableError};
use ferry_engine::error::{ConnectorError, Domain};
use ferry_engine::EngineError;

/// A failure reading source table `table` (planning, scanning, its
/// schema). A source table that is gone, or a window older than its
/// history, is the table's own fault: a job of several tables pauses it.
/// A scan refused because the table's schema changed under it is
/// transient: the restart reads the window with the schema as it is then.
pub fn source_error(table: &str, error: kudu_client::Error) -> EngineError {
    let transient = error.is_transient() || schema_changed_under_scan(&error);
    let advice = match &error {
        kudu_client::Error::SnapshotTooOld { .. } => Some(
            "the job was down longer than the source's history retention (--tablet_history_max_age_sec); \
             with reader.recopyExpiredTablets (the default) a Kudu sink partitioned as the source gets the tablets copied again, \
             otherwise start a fresh job without -s to take a new full snapshot",
        ),
        kudu_client::Error::TableNotFound(_) => {
            Some("check --job.tableName and that the source table exists")
        }
        _ => None,
    };
    let table_fault = matches!(
        error,
        kudu_client::Error::SnapshotTooOld { .. } | kudu_client::Error::TableNotFound(_)
    );
    let mut e = ConnectorError::new(Domain::Source, "SourceRead", error)
        .context(format!("reading source table '{table}'"))
        .table(table)
        .transient(transient);
    if table_fault {
        e = e.table_fault();
    }
    if let Some(advice) = advice {
        e = e.advice(advice);
    }
    e.into()
}

/// A tablet server refused a scan whose projection names a column its
/// schema no longer (or not yet) has: ferry builds every projection from
/// the table's own schema, so this is a column renamed or dropped between
/// the projection and the scan (the master and the tablet servers apply an
/// ALTER one after the other), never a wrong request.
fn schema_changed_under_scan(error: &kudu_client::Error) -> bool {
    matches!(
        error,
        kudu_client::Error::Status { context, status }
            if status.code == kudu_client::error::StatusCode::InvalidArgument
                && context.starts_with("MismatchedSchema")
    )
}

/// A failure writing sink table `table`.
pub fn sink_error(table: &str, error: kudu_client::Error) -> EngineError {
    let transient = error.is_transient();
    let missing = matches!(error, kudu_client::Error::TableNotFound(_));
    let mut e = ConnectorError::new(Domain::Sink, "SinkWrite", error)
        .context(format!("writing sink table '{table}'"))
        .table(table)
        .transient(transient);
    if missing {
        e = e.advice("create the sink table or pass --job.createTable true");
    }
    e.into()
}

/// The sink table is missing or cannot take the source's rows: fatal for
/// the table (a multi-table job pauses it) unless a retry may help.
impl From<SinkTableError> for EngineError {
    fn from(error: SinkTableError) -> Self {
        let retryable = error.is_retryable();
        let e = ConnectorError::new(Domain::Sink, "SinkTable", error).transient(retryable);
        if retryable { e } else { e.table_fault() }.into()
    }
}

/// The sink position could not be read or written.
impl From<PositionError> for EngineError {
    fn from(error: PositionError) -> Self {
        let kind = error.kind_name();
        let transient = error.is_transient();
        let unauthorized = error.is_not_authorized();
        let mut e = ConnectorError::new(Domain::State, kind, error).transient(transient);
        if unauthorized {
            e = e.advice(
                "the job's user needs SELECT, INSERT and UPDATE on the position table \
                 (job.positionTable) on the sink cluster, and CREATE once if it does not exist yet",
            );
        }
        e.into()
    }
}

/// A failed cut is logged by the engine, never fatal; a failure to
/// create the cuts table when the sink is prepared is one like the
/// position table's.
impl From<crate::cuts::CutsError> for EngineError {
    fn from(error: crate::cuts::CutsError) -> Self {
        let transient = error.is_transient();
        ConnectorError::new(Domain::State, "SinkCuts", error)
            .transient(transient)
            .advice(
                "the job's user needs SELECT, INSERT, UPDATE and DELETE on the cuts table \
                 (job.cutsTable) on the sink cluster, and CREATE once if it does not exist yet; \
                 an empty job.cutsTable publishes no cuts",
            )
            .into()
    }
}

/// A source schema change the sink will not take (`job.schemaEvolution`):
/// the table is paused.
impl From<SchemaChangeError> for EngineError {
    fn from(error: SchemaChangeError) -> Self {
        ConnectorError::new(Domain::Sink, "SchemaChange", error)
            .table_fault()
            .into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kudu_client::error::{KuduStatus, StatusCode};

    fn status(context: &str, code: StatusCode) -> kudu_client::Error {
        kudu_client::Error::Status {
            context: context.to_owned(),
            status: KuduStatus::new(
                code,
                "Some columns are not present in the current schema: s",
            ),
        }
    }

    #[test]
    fn a_scan_refused_for_a_changed_schema_is_retried() {
        let changed = status(
            "MismatchedSchema from tablet t1 on 127.0.0.1:7050",
            StatusCode::InvalidArgument,
        );
        assert!(schema_changed_under_scan(&changed));
        let other = status(
            "UnknownError from tablet t1 on 127.0.0.1:7050",
            StatusCode::InvalidArgument,
        );
        assert!(!schema_changed_under_scan(&other));
        assert!(source_error("orders", changed).is_transient());
        assert!(!source_error("orders", other).is_transient());
    }
}
