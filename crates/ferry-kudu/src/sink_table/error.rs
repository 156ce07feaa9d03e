//! [`SinkTableError`]: why a sink table cannot be used or created, each
//! message saying what to do.

use kudu_client::Error as KuduError;

use super::compat::ColumnProblem;
use super::features::MissingFeature;
use super::Side;

/// Why a sink table cannot be used or created. Each message says what to do.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SinkTableError {
    /// The source table does not exist.
    #[error("source table '{table}' does not exist on the source cluster; check job.tableName and job.sourceMasterAddresses")]
    SourceNotFound {
        /// The table concerned.
        table: String,
    },

    /// The sink table does not exist and creating it was not asked for.
    #[error("sink table '{sink}' does not exist on the sink cluster; create it, or pass --job.createTable true to create it as a copy of source table '{source_table}'")]
    SinkNotFound {
        /// The sink table.
        sink: String,
        /// The source table.
        source_table: String,
    },

    /// Source and sink are the same table (same cluster, same name).
    #[error("sink table '{table}' is the source table itself (table id {id}); give the sink another name with --job.tableSuffix or point job.sinkMasterAddresses at another cluster")]
    SameTable {
        /// The table concerned.
        table: String,
        /// The id.
        id: String,
    },

    /// The existing sink table cannot receive the source's rows.
    #[error(
        "sink table '{sink}' cannot receive the rows of source table '{source_table}':\n{}\nalter the sink table, or let ferry create a new one (--job.tableSuffix with --job.createTable true)",
        problem_list(.problems)
    )]
    Incompatible {
        /// The sink table.
        sink: String,
        /// The source table.
        source_table: String,
        /// What does not fit, column by column.
        problems: Vec<ColumnProblem>,
    },

    /// The sink cluster refused the source's replication factor.
    #[error("the sink cluster refused to create '{sink}' with the source's {replicas} replicas: {message}; add tablet servers to the sink cluster, or create the sink table yourself with fewer replicas and run without --job.createTable")]
    ReplicationFactor {
        /// The sink table.
        sink: String,
        /// The replication factor asked for.
        replicas: i32,
        /// The message.
        message: String,
    },

    /// The sink cluster refused to create even one range's tablets at once.
    #[error("the sink cluster refused to create '{sink}': {message}; raise --max_create_tablets_per_ts on the sink masters, or create the sink table yourself and run without --job.createTable")]
    TooManyTablets {
        /// The sink table.
        sink: String,
        /// The message.
        message: String,
    },

    /// The sink table was created, but adding its other range partitions
    /// failed; ferry then drops it again (`dropped`) so that a half-made
    /// table never passes for a copy.
    #[error(
        "sink table '{sink}' was created, but adding its range partitions failed after {added} of {total}: {source}; {}",
        if *.dropped { "the incomplete table was dropped again, so the next run starts over" } else { "dropping the incomplete table failed too: drop it yourself before running again, or it will pass for a complete copy" }
    )]
    RangesNotAdded {
        /// The sink table.
        sink: String,
        /// Ranges added.
        added: usize,
        /// How many in all.
        total: usize,
        /// Ranges dropped.
        dropped: bool,
        #[source]
        /// The Kudu error.
        source: KuduError,
    },

    /// The source's partitioning could not be read or copied.
    #[error("cannot copy the partitioning of source table '{table}': {reason}")]
    Partitioning {
        /// The table concerned.
        table: String,
        /// Why.
        reason: String,
    },

    /// The source sends a column the sink table does not have (found while
    /// writing, after the sink table changed).
    #[error("sink table '{sink}' has no column '{column}' that the source sends; add it to the sink or recreate the sink table")]
    ColumnNotInSink {
        /// The sink table.
        sink: String,
        /// The column.
        column: String,
    },

    /// The source rows lack a key column of the sink table.
    #[error("the source rows do not carry every key column of sink table '{sink}'")]
    KeyColumnsNotSent {
        /// The sink table.
        sink: String,
    },

    /// A batch was written before its column mapping was made (a bug).
    #[error("no column mapping")]
    NoColumnMapping,

    /// The sink cluster's tablet servers lack a feature the source table
    /// needs (checked before anything is written).
    #[error(transparent)]
    MissingFeature(#[from] MissingFeature),

    /// The sink cluster has no registered tablet server to ask what it
    /// runs (it may be starting).
    #[error("the sink cluster has no registered tablet server, so it cannot take the rows of sink table '{sink}' yet; start its tablet servers")]
    NoTabletServers {
        /// The sink table.
        sink: String,
    },

    /// A call to one of the clusters failed.
    #[error("{action} on the {side} cluster failed: {source}")]
    Kudu {
        /// Which cluster.
        side: Side,
        /// What was being done.
        action: String,
        #[source]
        /// The Kudu error.
        source: KuduError,
    },
}

impl SinkTableError {
    /// Whether running the job again later may succeed without changing
    /// anything (a cluster was unreachable or busy).
    pub fn is_retryable(&self) -> bool {
        match self {
            SinkTableError::Kudu { source, .. }
            | SinkTableError::RangesNotAdded {
                dropped: true,
                source,
                ..
            } => source.is_transient(),
            SinkTableError::NoTabletServers { .. } => true,
            _ => false,
        }
    }

    pub(super) fn kudu(
        side: Side,
        action: impl Into<String>,
    ) -> impl FnOnce(KuduError) -> SinkTableError {
        let action = action.into();
        move |source| SinkTableError::Kudu {
            side,
            action,
            source,
        }
    }
}

fn problem_list(problems: &[ColumnProblem]) -> String {
    problems
        .iter()
        .map(|p| format!("  - {p}"))
        .collect::<Vec<_>>()
        .join("\n")
}
