//! Engine errors: where it went wrong (source, sink, checkpoint storage)
//! and whether the job can retry or must stop and tell the operator.

use crate::checkpoint::CheckpointError;
use crate::enumerator::EnumeratorError;
use crate::sink_position::PositionError;
use crate::sink_table::SinkTableError;
use std::time::Duration;

/// Everything that can stop or disturb a job.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum EngineError {
    /// Reading the source table failed.
    #[error("reading source table '{table}': {source}")]
    Source {
        table: String,
        #[source]
        source: kudu_client::Error,
    },
    /// Writing the sink table failed.
    #[error("writing sink table '{table}': {source}")]
    Sink {
        table: String,
        #[source]
        source: kudu_client::Error,
    },
    /// Checkpoint or savepoint storage failed.
    #[error(transparent)]
    Checkpoint(#[from] CheckpointError),
    /// The sink table is missing or cannot receive the source rows.
    #[error(transparent)]
    SinkTable(Box<SinkTableError>),
    /// A restored state does not fit this job.
    #[error(transparent)]
    Restore(#[from] RestoreError),
    /// The sink position could not be read or written.
    #[error(transparent)]
    Position(Box<PositionError>),
    /// An internal protocol error (a bug).
    #[error("internal error: {0}")]
    Internal(#[from] EnumeratorError),
    /// The job was cancelled.
    #[error("the job was cancelled")]
    Cancelled,
    /// This instance lost its lease (high availability): it must not write.
    #[error(transparent)]
    Fenced(#[from] crate::lease::Fenced),
    /// A source schema change cannot be applied to the sink safely
    /// (`job.schemaEvolution`); the table is paused.
    #[error(transparent)]
    SchemaChange(Box<crate::sink_table::SchemaChangeError>),
    /// A restored table is not the table of that name now.
    #[error("{0}")]
    TableMismatch(String),
    /// A connector that is not Kudu's (e.g. Kafka) failed: `context` says
    /// what it was doing, `source` why; `transient` whether a restart of
    /// the job may help.
    #[error("{context}")]
    Connector {
        context: String,
        transient: bool,
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// A checkpoint or savepoint was not taken because a pipeline failed
    /// while the job prepared it: a transactional sink must not commit a
    /// failed write. The failure itself is handled next (a restart).
    #[error("checkpoint skipped: a pipeline failed while it was prepared")]
    CheckpointSkipped,
    /// A key read where it is used does not parse (every key is checked
    /// when the job's configuration is built, so this is a bug).
    #[error(transparent)]
    Config(#[from] crate::config::ConfigError),
}

impl From<crate::sink_table::SchemaChangeError> for EngineError {
    fn from(e: crate::sink_table::SchemaChangeError) -> Self {
        EngineError::SchemaChange(Box::new(e))
    }
}

impl From<SinkTableError> for EngineError {
    fn from(e: SinkTableError) -> Self {
        EngineError::SinkTable(Box::new(e))
    }
}

impl From<PositionError> for EngineError {
    fn from(e: PositionError) -> Self {
        EngineError::Position(Box::new(e))
    }
}

impl EngineError {
    /// Whether retrying (re-reading the split from its resume key) may
    /// succeed. Fatal errors stop the job with a message saying what to do.
    pub fn is_transient(&self) -> bool {
        match self {
            EngineError::Source { source, .. } | EngineError::Sink { source, .. } => {
                source.is_transient()
            }
            EngineError::Checkpoint(e) => e.is_retryable(),
            EngineError::SinkTable(e) => e.is_retryable(),
            EngineError::Position(e) => e.is_transient(),
            EngineError::Connector { transient, .. } => *transient,
            EngineError::CheckpointSkipped => true,
            _ => false,
        }
    }

    /// Whether the error concerns one table only, so that a job
    /// replicating several pauses that table and goes on with the others:
    /// a schema change it cannot apply, a source table that is gone, a
    /// window older than the source's history. (A job of one table fails.)
    pub fn is_table_fault(&self) -> bool {
        match self {
            EngineError::SchemaChange(_) => true,
            EngineError::Source { source, .. } => matches!(
                source,
                kudu_client::Error::SnapshotTooOld { .. } | kudu_client::Error::TableNotFound(_)
            ),
            EngineError::SinkTable(e) => !e.is_retryable(),
            _ => false,
        }
    }

    /// A short name of what failed, for exception histories.
    pub fn kind_name(&self) -> &'static str {
        match self {
            EngineError::Source { .. } => "SourceRead",
            EngineError::Sink { .. } => "SinkWrite",
            EngineError::Checkpoint(_) => "Checkpoint",
            EngineError::SinkTable(_) => "SinkTable",
            EngineError::Restore(_) => "Restore",
            EngineError::Position(e) => e.kind_name(),
            EngineError::Internal(_) => "Internal",
            EngineError::Cancelled => "Cancelled",
            EngineError::Fenced(_) => "Fenced",
            EngineError::SchemaChange(_) => "SchemaChange",
            EngineError::TableMismatch(_) => "TableMismatch",
            EngineError::Connector { .. } => "Connector",
            EngineError::CheckpointSkipped => "CheckpointSkipped",
            EngineError::Config(_) => "Config",
        }
    }

    /// What an operator should do about a fatal error.
    pub fn advice(&self) -> Option<&'static str> {
        match self {
            EngineError::Source {
                source: kudu_client::Error::SnapshotTooOld { .. },
                ..
            } => Some(
                "the job was down longer than the source's history retention (--tablet_history_max_age_sec); \
                 start a fresh job without -s to take a new full snapshot",
            ),
            EngineError::Source {
                source: kudu_client::Error::TableNotFound(_),
                ..
            } => Some("check --job.tableName and that the source table exists"),
            EngineError::Sink {
                source: kudu_client::Error::TableNotFound(_),
                ..
            } => Some("create the sink table or pass --job.createTable true"),
            EngineError::Position(e) if e.is_not_authorized() => Some(
                "the job's user needs SELECT, INSERT and UPDATE on the position table \
                 (job.positionTable) on the sink cluster, and CREATE once if it does not exist yet",
            ),
            _ => None,
        }
    }
}

/// Why a checkpoint or savepoint cannot restore a job.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RestoreError {
    /// Its splits in progress belong to another table; re-reading them
    /// would copy that table's rows.
    #[error("the savepoint at '{location}' was taken from table '{saved_table}' with splits in progress; it cannot resume table '{table}'")]
    OtherTable {
        location: String,
        saved_table: String,
        table: String,
    },
}

/// Why a job did not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StartError {
    /// The restore point does not fit this job.
    #[error(transparent)]
    Restore(#[from] RestoreError),
    /// Both a restore point and a start time were given (one chain start).
    #[error(
        "a job starts either from a restore point or from a hybrid time (a cutover), not both"
    )]
    RestoreAndStartTime,
}

/// Why a request to a job (savepoint, checkpoint, stop) was not done.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ControlError {
    /// The job has ended; nothing answers requests any more.
    #[error("the job is not running")]
    NotRunning,
    /// The job ended while the request was queued.
    #[error("the job ended before answering")]
    EndedBeforeAnswering,
    /// The job ended (failed or was cancelled) before a requested stop
    /// could write its savepoint.
    #[error("the job ended ({status}) while {}", if *.drain { "draining" } else { "stopping" })]
    EndedWhileStopping { status: &'static str, drain: bool },
    /// A savepoint needs a directory: the request named none and the job
    /// has no default.
    #[error("no savepoint directory given and none configured")]
    NoSavepointDirectory,
    /// The job is restarting after a failure (and a stop under way was
    /// abandoned); ask again once it runs.
    #[error("the job is restarting after a failure; try again once it is RUNNING")]
    Restarting,
    /// A stop was requested already; the first one is under way.
    #[error("the job is already stopping")]
    AlreadyStopping,
    /// A stop without drain was requested while draining; the job stops
    /// now, with that request's savepoint.
    #[error("drain: a stop without drain was requested meanwhile")]
    DrainOverridden,
    /// Stop with drain gave up: the open window did not finish in time.
    /// The job keeps running.
    #[error("drain: the open window did not finish within {}s", .0.as_secs())]
    DrainTimeout(Duration),
    /// Writing the checkpoint or savepoint failed.
    #[error(transparent)]
    Failed(#[from] EngineError),
}

/// `error` and its sources as one line, `a: b: c`, each cause once (for
/// logs and status fields; some errors already print their source).
pub fn display_chain(error: &(dyn std::error::Error + 'static)) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(e) = source {
        let part = e.to_string();
        if !text.contains(&part) {
            text.push_str(": ");
            text.push_str(&part);
        }
        source = e.source();
    }
    text
}
