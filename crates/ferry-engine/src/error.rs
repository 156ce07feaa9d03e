//! Engine errors: where it went wrong (source, sink, checkpoint storage)
//! and whether the job can retry or must stop and tell the operator.

use crate::checkpoint::CheckpointError;
use crate::enumerator::EnumeratorError;
use std::time::Duration;

/// Everything that can stop or disturb a job.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum EngineError {
    /// A connector (source or sink, or the sink's state such as its
    /// position record) failed; the error says whether to retry.
    #[error(transparent)]
    Connector(Box<ConnectorError>),
    /// Checkpoint or savepoint storage failed.
    #[error(transparent)]
    Checkpoint(#[from] CheckpointError),
    /// A restored state does not fit this job.
    #[error(transparent)]
    Restore(#[from] RestoreError),
    /// An internal protocol error (a bug).
    #[error("internal error: {0}")]
    Internal(#[from] EnumeratorError),
    /// The job was cancelled.
    #[error("the job was cancelled")]
    Cancelled,
    /// This instance lost its lease (high availability): it must not write.
    #[error(transparent)]
    Fenced(#[from] crate::lease::Fenced),
    /// A restored table is not the table of that name now.
    #[error("{0}")]
    TableMismatch(String),
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

impl From<ConnectorError> for EngineError {
    fn from(e: ConnectorError) -> Self {
        EngineError::Connector(Box::new(e))
    }
}

impl EngineError {
    /// What retrying may do: the restart logic reads this, never the
    /// connector's own error types.
    pub fn retry_hint(&self) -> RetryHint {
        match self {
            EngineError::Connector(e) => e.retry,
            EngineError::Checkpoint(e) if e.is_retryable() => RetryHint::Retryable,
            EngineError::CheckpointSkipped => RetryHint::Retryable,
            _ => RetryHint::Fatal,
        }
    }

    /// Whether retrying (re-reading the split from its resume key) may
    /// succeed. Fatal errors stop the job with a message saying what to do.
    pub fn is_transient(&self) -> bool {
        self.retry_hint() != RetryHint::Fatal
    }

    /// Whether the error concerns one table only, so that a job
    /// replicating several pauses that table and goes on with the others
    /// (e.g. a schema change the sink will not apply, a source table that
    /// is gone). A job of one table fails.
    pub fn is_table_fault(&self) -> bool {
        matches!(self, EngineError::Connector(e) if e.table_fault)
    }

    /// The connector's error, if a connector failed.
    pub fn connector(&self) -> Option<&ConnectorError> {
        match self {
            EngineError::Connector(e) => Some(e),
            _ => None,
        }
    }

    /// A short name of what failed, for exception histories.
    pub fn kind_name(&self) -> &'static str {
        match self {
            EngineError::Connector(e) => e.kind,
            EngineError::Checkpoint(_) => "Checkpoint",
            EngineError::Restore(_) => "Restore",
            EngineError::Internal(_) => "Internal",
            EngineError::Cancelled => "Cancelled",
            EngineError::Fenced(_) => "Fenced",
            EngineError::TableMismatch(_) => "TableMismatch",
            EngineError::CheckpointSkipped => "CheckpointSkipped",
            EngineError::Config(_) => "Config",
        }
    }

    /// What an operator should do about a fatal error.
    pub fn advice(&self) -> Option<&str> {
        match self {
            EngineError::Connector(e) => e.advice.as_deref(),
            _ => None,
        }
    }
}

/// What retrying may do about a failure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RetryHint {
    /// A retry (the job's restart strategy) may succeed.
    Retryable,
    /// A retry may succeed, but not before this delay (e.g. a server
    /// asked to back off): the restart waits at least this long.
    After(Duration),
    /// A retry cannot help: the job (or, for a table fault, the table)
    /// stops and tells the operator.
    Fatal,
}

/// Which part of the job a connector's error comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Domain {
    /// Reading the source (planning, scanning, its schema).
    Source,
    /// Writing the sink (or preparing it, following a schema).
    Sink,
    /// State a connector keeps beside the data (e.g. the sink position
    /// record, a transaction's stored state).
    State,
}

/// A connector's failure as the engine handles it: what it concerns (a
/// domain and a table), whether retrying may help, and what the operator
/// can do. The connector's own error is its cause.
///
/// Its text is the context (what the connector was doing) followed by the
/// cause, each once: [`std::error::Error::source`] continues with the
/// cause's own sources.
#[derive(Debug)]
pub struct ConnectorError {
    domain: Domain,
    kind: &'static str,
    retry: RetryHint,
    table: Option<String>,
    table_fault: bool,
    advice: Option<String>,
    context: Option<String>,
    cause: Box<dyn std::error::Error + Send + Sync>,
}

impl ConnectorError {
    /// A failure in `domain`, named `kind` in exception histories (e.g.
    /// `SourceRead`), caused by `cause`; fatal until [`Self::retry`] says
    /// otherwise.
    pub fn new(
        domain: Domain,
        kind: &'static str,
        cause: impl Into<Box<dyn std::error::Error + Send + Sync>>,
    ) -> Self {
        ConnectorError {
            domain,
            kind,
            retry: RetryHint::Fatal,
            table: None,
            table_fault: false,
            advice: None,
            context: None,
            cause: cause.into(),
        }
    }

    /// Whether and when retrying may help.
    pub fn retry(mut self, hint: RetryHint) -> Self {
        self.retry = hint;
        self
    }

    /// Retryable if `transient`, else fatal.
    pub fn transient(self, transient: bool) -> Self {
        self.retry(if transient {
            RetryHint::Retryable
        } else {
            RetryHint::Fatal
        })
    }

    /// The table the failure concerns.
    pub fn table(mut self, table: impl Into<String>) -> Self {
        self.table = Some(table.into());
        self
    }

    /// The failure is the table's own (a multi-table job pauses the table
    /// and goes on with the others).
    pub fn table_fault(mut self) -> Self {
        self.table_fault = true;
        self
    }

    /// What the operator should do.
    pub fn advice(mut self, advice: impl Into<String>) -> Self {
        self.advice = Some(advice.into());
        self
    }

    /// What the connector was doing (said before the cause).
    pub fn context(mut self, context: impl Into<String>) -> Self {
        self.context = Some(context.into());
        self
    }

    /// Which part of the job failed.
    pub fn domain(&self) -> Domain {
        self.domain
    }

    /// The retry hint.
    pub fn retry_hint(&self) -> RetryHint {
        self.retry
    }

    /// The table the failure concerns, if known.
    pub fn table_name(&self) -> Option<&str> {
        self.table.as_deref()
    }

    /// The connector's own error.
    pub fn cause(&self) -> &(dyn std::error::Error + Send + Sync + 'static) {
        &*self.cause
    }
}

impl std::fmt::Display for ConnectorError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.context {
            Some(context) => write!(f, "{context}: {}", self.cause),
            None => write!(f, "{}", self.cause),
        }
    }
}

impl std::error::Error for ConnectorError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        // The cause's text is in ours already.
        self.cause.source()
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
        /// Where the savepoint is.
        location: String,
        /// The table it was taken from.
        saved_table: String,
        /// The table of this job.
        table: String,
    },
    /// It was taken by a job cut into another number of shards (or with
    /// another split threshold, or by another shard): the tables would be
    /// divided differently, so some would be copied twice or not at all.
    #[error("the savepoint or checkpoint at '{location}' was taken by {saved} (job.shards = {saved_count}, job.shardTabletsOver = {saved_over}), but this job runs {given} (job.shards = {given_count}, job.shardTabletsOver = {given_over}): the shard count and split threshold are fixed when a job is created; restore it with the values it was taken with, or start a new job without it to change them")]
    ShardPlan {
        /// Where the state is.
        location: String,
        /// Which shard took it (`shard 1 of 3`, or `a job without shards`).
        saved: String,
        /// `job.shards` of the state.
        saved_count: u32,
        /// `job.shardTabletsOver` of the state.
        saved_over: u32,
        /// Which shard this job runs, as `saved`.
        given: String,
        /// `job.shards` given.
        given_count: u32,
        /// `job.shardTabletsOver` given.
        given_over: u32,
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
    EndedWhileStopping {
        /// How the job ended.
        status: &'static str,
        /// Whether the stop drained.
        drain: bool,
    },
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
    /// A request named a table the job does not replicate.
    #[error("the job has no table '{0}'")]
    UnknownTable(String),
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

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("the tablet server is busy")]
    struct Busy;

    #[derive(Debug, thiserror::Error)]
    #[error("write failed")]
    struct WriteFailed(#[source] Busy);

    #[test]
    fn a_connector_error_says_each_cause_once_and_carries_its_hint() {
        let e: EngineError = ConnectorError::new(Domain::Sink, "SinkWrite", WriteFailed(Busy))
            .context("writing sink table 't'")
            .table("t")
            .retry(RetryHint::After(Duration::from_secs(2)))
            .advice("wait")
            .into();
        assert_eq!(e.to_string(), "writing sink table 't': write failed");
        assert_eq!(
            display_chain(&e),
            "writing sink table 't': write failed: the tablet server is busy"
        );
        assert_eq!(e.retry_hint(), RetryHint::After(Duration::from_secs(2)));
        assert!(e.is_transient() && !e.is_table_fault());
        assert_eq!((e.kind_name(), e.advice()), ("SinkWrite", Some("wait")));
        let c = e.connector().expect("a connector's error");
        assert_eq!((c.domain(), c.table_name()), (Domain::Sink, Some("t")));

        let gone: EngineError = ConnectorError::new(Domain::Source, "SourceRead", "gone")
            .table_fault()
            .into();
        assert_eq!(gone.retry_hint(), RetryHint::Fatal);
        assert!(!gone.is_transient() && gone.is_table_fault());
        assert_eq!(gone.to_string(), "gone");
    }
}
