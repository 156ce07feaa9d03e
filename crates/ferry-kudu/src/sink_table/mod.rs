//! Preparing the sink table before a job starts: create it as a copy of the
//! source table (`job.createTable`), or check that an existing one can take
//! the source's rows.
//!
//! Why a module of its own: this is the one place where ferry changes the
//! sink cluster's catalog, and the one place that decides whether a sink
//! table is fit to receive rows. The reference job copies the table on
//! request but never looks at an existing sink table, so a wrong one only
//! shows up as row errors after the job has started; `kudu table copy`
//! refuses a mismatched destination up front. ferry does the latter, and
//! lists every problem at once ([`compat`]).
//!
//! Creating copies, from the source table: every column (type, type
//! attributes, nullability, default, encoding, compression, block size,
//! comment, immutability), the table-wide hash dimensions (columns, buckets, seed), the
//! range columns, every range partition with its hash schema (non-covered
//! ranges stay non-covered), the replication factor, comment, extra configs,
//! and the owner when `job.restoreOwner` is set. Everything goes in one
//! CreateTable when the sink master allows that many tablets at once
//! (`--max_create_tablets_per_ts`); otherwise the table is created with the
//! first range and the others are added by ALTER TABLE, as the reference
//! job always does.
//!
//! Before either, [`features`] refuses a sink cluster whose tablet servers
//! lack a feature the source table needs (immutable columns, a non-unique
//! primary key), naming the feature, the release and each server.
//!
//! How a table is described as the request that creates it — its range
//! partitions derived from its tablets, their bounds as rows — is the
//! client's knowledge: [`KuduClient::range_partitions`] and
//! [`KuduTable::to_builder`].

mod compat;
mod error;
pub mod features;
pub mod schema_change;

use std::fmt;

use kudu_client::error::StatusCode;
use kudu_client::{AlterTableBuilder, Error as KuduError, KuduClient, KuduTable, TableBuilder};

pub use compat::{check_compatible, ColumnProblem};
pub use error::SinkTableError;
pub use features::{check_sink_features, required_features, MissingFeature};
pub use schema_change::SchemaChangeError;

/// What [`prepare_sink_table`] is asked to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SinkTableOptions {
    /// The sink table: `job.tableName` + `job.tableSuffix`.
    pub sink_table_name: String,
    /// `job.createTable`: create the sink table if it does not exist.
    pub create_table: bool,
    /// `job.restoreOwner`: give a created sink table the source's owner.
    pub restore_owner: bool,
    /// `job.schemaEvolution`: source columns an existing sink lacks are
    /// not a problem here (the job adds them, or follows a rename, before
    /// its next window writes a row).
    pub follow_schema: bool,
}

/// Whether the sink table was created or found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SinkTableAction {
    /// Created now, as a copy of the source table.
    Created,
    /// It existed and passed the compatibility check.
    Existing,
}

/// The sink table a job writes to.
#[derive(Debug, Clone)]
pub struct SinkTablePlan {
    /// Created or found.
    pub action: SinkTableAction,
    /// The opened sink table.
    pub table: KuduTable,
}

/// Which cluster a failed call went to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    /// The source cluster.
    Source,
    /// The sink cluster.
    Sink,
}

impl fmt::Display for Side {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Side::Source => "source",
            Side::Sink => "sink",
        })
    }
}

/// One range partition of a table, derived from its tablets.
pub use kudu_client::partition::RangePartition;

/// The range partitions of `table`, in key order, derived from its
/// tablets. Gaps between them are non-covered ranges.
/// `side` names the cluster in errors.
pub async fn range_partitions(
    client: &KuduClient,
    table: &KuduTable,
    side: Side,
) -> Result<Vec<RangePartition>, SinkTableError> {
    client.range_partitions(table).await.map_err(|e| match e {
        KuduError::Partitioning { .. } => partitioning_error(table, e),
        e => SinkTableError::kudu(side, format!("listing the tablets of '{}'", table.name()))(e),
    })
}

/// The CreateTable request that copies `source` as `name`, with `ranges`.
fn copy_table_builder(
    source: &KuduTable,
    ranges: &[RangePartition],
    name: &str,
    restore_owner: bool,
) -> Result<TableBuilder, SinkTableError> {
    let mut b = source
        .to_builder(name, ranges)
        .map_err(|e| partitioning_error(source, e))?;
    if restore_owner {
        if let Some(o) = source.owner() {
            b = b.owner(o);
        }
    }
    Ok(b)
}

/// The partitioning of `table` cannot be copied.
fn partitioning_error(table: &KuduTable, e: KuduError) -> SinkTableError {
    let reason = match e {
        KuduError::Partitioning { reason, .. } => reason,
        e => e.to_string(),
    };
    SinkTableError::Partitioning {
        table: table.name().to_owned(),
        reason,
    }
}

/// At most this many tablets are added by one ALTER TABLE when ranges are
/// added after creation. The master caps what one CreateTable may make
/// (`--max_create_tablets_per_ts`, 60 replicas per tablet server by
/// default) to spread the load of starting new tablets; ALTER TABLE has no
/// such cap, so each step is kept well below it.
const TABLETS_PER_ALTER: usize = 20;

/// Groups `ranges` into ALTER TABLE batches of at most
/// [`TABLETS_PER_ALTER`] tablets (a bigger range gets a batch of its own).
fn alter_batches(ranges: &[RangePartition]) -> Vec<&[RangePartition]> {
    let mut batches = Vec::new();
    let (mut start, mut tablets) = (0, 0);
    for (i, r) in ranges.iter().enumerate() {
        if i > start && tablets + r.tablets > TABLETS_PER_ALTER {
            batches.push(&ranges[start..i]);
            (start, tablets) = (i, 0);
        }
        tablets += r.tablets;
    }
    if start < ranges.len() {
        batches.push(&ranges[start..]);
    }
    batches
}

/// Makes sure the sink table exists and can receive the rows of
/// `source_table`: refuses a sink cluster that lacks a feature the source
/// table needs ([`check_sink_features`]), then checks an existing sink
/// table, or (with `create_table`) creates it as a copy of the source
/// table.
pub async fn prepare_sink_table(
    source: &KuduClient,
    sink: &KuduClient,
    source_table: &str,
    opts: &SinkTableOptions,
) -> Result<SinkTablePlan, SinkTableError> {
    let src = source.open_table(source_table).await.map_err(|e| match e {
        KuduError::TableNotFound(_) => SinkTableError::SourceNotFound {
            table: source_table.to_owned(),
        },
        e => SinkTableError::kudu(Side::Source, format!("opening table '{source_table}'"))(e),
    })?;
    let name = opts.sink_table_name.as_str();
    check_sink_features(sink, source_table, src.schema(), name).await?;
    match open_sink(sink, name).await? {
        Some(existing) => check_existing(&src, existing, opts.follow_schema),
        None if !opts.create_table => Err(SinkTableError::SinkNotFound {
            sink: name.to_owned(),
            source_table: source_table.to_owned(),
        }),
        None => create_copy(sink, &src, source, opts).await,
    }
}

async fn open_sink(sink: &KuduClient, name: &str) -> Result<Option<KuduTable>, SinkTableError> {
    match sink.open_table(name).await {
        Ok(t) => Ok(Some(t)),
        Err(KuduError::TableNotFound(_)) => Ok(None),
        Err(e) => Err(SinkTableError::kudu(
            Side::Sink,
            format!("opening table '{name}'"),
        )(e)),
    }
}

fn check_existing(
    src: &KuduTable,
    sink: KuduTable,
    follow_schema: bool,
) -> Result<SinkTablePlan, SinkTableError> {
    if sink.id() == src.id() {
        return Err(SinkTableError::SameTable {
            table: sink.name().to_owned(),
            id: sink.id().to_owned(),
        });
    }
    let mut problems = check_compatible(src.schema(), sink.schema());
    if follow_schema {
        problems.retain(|p| !matches!(p, ColumnProblem::Missing { .. }));
    }
    if !problems.is_empty() {
        return Err(SinkTableError::Incompatible {
            sink: sink.name().to_owned(),
            source_table: src.name().to_owned(),
            problems,
        });
    }
    Ok(SinkTablePlan {
        action: SinkTableAction::Existing,
        table: sink,
    })
}

async fn create_copy(
    sink: &KuduClient,
    src: &KuduTable,
    source: &KuduClient,
    opts: &SinkTableOptions,
) -> Result<SinkTablePlan, SinkTableError> {
    let name = opts.sink_table_name.as_str();
    let partitioning = |reason: String| SinkTableError::Partitioning {
        table: src.name().to_owned(),
        reason,
    };
    let ranges = range_partitions(source, src, Side::Source).await?;
    let has_ranges = !src.partition_schema().range_columns().is_empty();
    if ranges.is_empty() && has_ranges {
        // CreateTable without ranges means one unbounded range.
        return Err(partitioning(
            "it has no range partitions left, and Kudu cannot create a table without any; create the sink table yourself and run without --job.createTable".into(),
        ));
    }
    let builder = copy_table_builder(src, &ranges, name, opts.restore_owner)?;
    tracing::info!(
        source = src.name(),
        sink = name,
        ranges = ranges.len(),
        replicas = src.num_replicas(),
        "creating the sink table as a copy of the source table"
    );
    let later: Vec<RangePartition> = match create(sink, src, name, &builder).await {
        Ok(Created::Now) => Vec::new(),
        Ok(Created::ByOther(t)) => return check_existing(src, t, opts.follow_schema),
        // The master caps the tablets one CreateTable may make
        // (--max_create_tablets_per_ts): create with the first range and add
        // the others by ALTER TABLE, as the reference job always does.
        // Ranges with their own hash schema stay in the CreateTable: our
        // client cannot add them by ALTER TABLE yet (it sends
        // AddRangePartition.custom_hash_schema in a shape masters refuse).
        Err(e @ SinkTableError::TooManyTablets { .. }) if has_ranges => {
            let table_wide = src.partition_schema().hash_schema();
            let (first, later): (Vec<_>, Vec<_>) = ranges
                .iter()
                .enumerate()
                .partition(|(i, r)| *i == 0 || r.hash_schema != table_wide);
            let first: Vec<RangePartition> = first.into_iter().map(|(_, r)| r.clone()).collect();
            let later: Vec<RangePartition> = later.into_iter().map(|(_, r)| r.clone()).collect();
            if later.is_empty() {
                return Err(e);
            }
            let builder = copy_table_builder(src, &first, name, opts.restore_owner)?;
            tracing::info!(
                sink = name,
                ranges = later.len(),
                "too many tablets for one CreateTable: adding ranges by ALTER TABLE"
            );
            match create(sink, src, name, &builder).await? {
                Created::Now => later,
                Created::ByOther(t) => return check_existing(src, t, opts.follow_schema),
            }
        }
        Err(e) => return Err(e),
    };
    let mut table = sink.open_table(name).await.map_err(SinkTableError::kudu(
        Side::Sink,
        format!("opening the new table '{name}'"),
    ))?;
    if !later.is_empty() {
        add_ranges(sink, src, &table, &later).await?;
        table = sink.open_table(name).await.map_err(SinkTableError::kudu(
            Side::Sink,
            format!("opening the new table '{name}'"),
        ))?;
    }
    Ok(SinkTablePlan {
        action: SinkTableAction::Created,
        table,
    })
}

enum Created {
    Now,
    /// Someone else created the table between our look and our create.
    ByOther(KuduTable),
}

async fn create(
    sink: &KuduClient,
    src: &KuduTable,
    name: &str,
    builder: &TableBuilder,
) -> Result<Created, SinkTableError> {
    let err = match sink.create_table(builder).await {
        Ok(_) => return Ok(Created::Now),
        Err(e) => e,
    };
    if let KuduError::Status { status, .. } = &err {
        let message = status.message.to_lowercase();
        if status.code == StatusCode::AlreadyPresent {
            if let Some(t) = open_sink(sink, name).await? {
                return Ok(Created::ByOther(t));
            }
        } else if message.contains("replication factor") {
            return Err(SinkTableError::ReplicationFactor {
                sink: name.to_owned(),
                replicas: src.num_replicas(),
                message: status.message.clone(),
            });
        } else if message.contains("maximum permitted at creation time") {
            return Err(SinkTableError::TooManyTablets {
                sink: name.to_owned(),
                message: status.message.clone(),
            });
        }
    }
    Err(SinkTableError::kudu(
        Side::Sink,
        format!("creating table '{name}'"),
    )(err))
}

/// Adds `ranges` to the new sink table `table`, a batch per ALTER TABLE.
async fn add_ranges(
    sink: &KuduClient,
    src: &KuduTable,
    table: &KuduTable,
    ranges: &[RangePartition],
) -> Result<(), SinkTableError> {
    // Bound rows are rows of the sink table's own schema (same columns in
    // the same order as the source's, so the same range-column indexes).
    let total = ranges.len();
    let mut added = 0;
    for batch in alter_batches(ranges) {
        let mut alter = AlterTableBuilder::new();
        for r in batch {
            alter = alter
                .add_range_like(table, r)
                .map_err(|e| partitioning_error(src, e))?;
        }
        if let Err(source) = sink.alter_table(table, &alter).await {
            // Left as it is, the table would pass as a complete copy on the
            // next run; drop it so the next run starts over.
            let dropped = sink.delete_table(table.name()).await.is_ok();
            return Err(SinkTableError::RangesNotAdded {
                sink: table.name().to_owned(),
                added,
                total,
                dropped,
                source,
            });
        }
        added += batch.len();
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn alter_batches_stay_small() {
        let r = |tablets| {
            let mut r = RangePartition::new(vec![], vec![], vec![]);
            r.tablets = tablets;
            r
        };
        let ranges = [r(8), r(8), r(8), r(30), r(4), r(20), r(1)];
        let sizes: Vec<usize> = alter_batches(&ranges).iter().map(|b| b.len()).collect();
        assert_eq!(sizes, [2, 1, 1, 1, 1, 1]);
        assert!(alter_batches(&[]).is_empty());
    }
}
