//! Engine errors: where it went wrong (source, sink, checkpoint storage)
//! and whether the job can retry or must stop and tell the operator.

use crate::checkpoint::CheckpointError;
use crate::enumerator::EnumeratorError;
use crate::sink_table::SinkTableError;

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
    #[error("cannot restore: {0}")]
    Restore(String),
    /// An internal protocol error (a bug).
    #[error("internal error: {0}")]
    Internal(#[from] EnumeratorError),
    /// The job was cancelled.
    #[error("the job was cancelled")]
    Cancelled,
}

impl From<SinkTableError> for EngineError {
    fn from(e: SinkTableError) -> Self {
        EngineError::SinkTable(Box::new(e))
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
            _ => false,
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
            _ => None,
        }
    }
}
