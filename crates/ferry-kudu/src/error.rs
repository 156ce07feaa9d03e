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
pub fn source_error(table: &str, error: kudu_client::Error) -> EngineError {
    let transient = error.is_transient();
    let advice = match &error {
        kudu_client::Error::SnapshotTooOld { .. } => Some(
            "the job was down longer than the source's history retention (--tablet_history_max_age_sec); \
             start a fresh job without -s to take a new full snapshot",
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

/// A source schema change the sink will not take (`job.schemaEvolution`):
/// the table is paused.
impl From<SchemaChangeError> for EngineError {
    fn from(error: SchemaChangeError) -> Self {
        ConnectorError::new(Domain::Sink, "SchemaChange", error)
            .table_fault()
            .into()
    }
}
