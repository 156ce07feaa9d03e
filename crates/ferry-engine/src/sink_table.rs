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
//! lists every problem at once.
//!
//! Creating copies, from the source table: every column (type, type
//! attributes, nullability, default, encoding, compression, block size,
//! comment), the table-wide hash dimensions (columns, buckets, seed), the
//! range columns, every range partition with its hash schema (non-covered
//! ranges stay non-covered), the replication factor, comment, extra configs,
//! and the owner when `job.restoreOwner` is set. Everything goes in one
//! CreateTable when the sink master allows that many tablets at once
//! (`--max_create_tablets_per_ts`); otherwise the table is created with the
//! first range and the others are added by ALTER TABLE, as the reference
//! job always does.
//!
//! The master does not list a table's range partitions, so they are derived
//! from its tablets ([`range_partitions`]): each tablet's partition key is
//! one 4-byte bucket per hash dimension of its range's hash schema followed
//! by the encoded range key, and the tablets of one range share its range
//! keys. The bounds come out normalized (inclusive lower, exclusive upper),
//! which is how the source's own tablets store them, so the copy covers
//! exactly the same keys whatever bound types the source was created with.

use std::collections::BTreeMap;
use std::fmt;
use std::time::Instant;

use kudu_client::error::StatusCode;
use kudu_client::partition::key::{decode_columns, encode_range_bound};
use kudu_client::partition::schema::split_partition_key;
use kudu_client::partition::{BoundaryConvention, HashDimension, Partition, PartitionSchema};
use kudu_client::write::ops::OpType;
use kudu_client::{
    AlterTableBuilder, ColumnSchema, Error as KuduError, KuduClient, KuduTable, Row, Schema,
    TableBuilder,
};

/// What [`prepare_sink_table`] is asked to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SinkTableOptions {
    /// The sink table: `job.tableName` + `job.tableSuffix`.
    pub sink_table_name: String,
    /// `job.createTable`: create the sink table if it does not exist.
    pub create_table: bool,
    /// `job.restoreOwner`: give a created sink table the source's owner.
    pub restore_owner: bool,
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
    Source,
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

/// Why a sink table cannot be used or created. Each message says what to do.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SinkTableError {
    /// The source table does not exist.
    #[error("source table '{table}' does not exist on the source cluster; check job.tableName and job.sourceMasterAddresses")]
    SourceNotFound { table: String },

    /// The sink table does not exist and creating it was not asked for.
    #[error("sink table '{sink}' does not exist on the sink cluster; create it, or pass --job.createTable true to create it as a copy of source table '{source_table}'")]
    SinkNotFound { sink: String, source_table: String },

    /// Source and sink are the same table (same cluster, same name).
    #[error("sink table '{table}' is the source table itself (table id {id}); give the sink another name with --job.tableSuffix or point job.sinkMasterAddresses at another cluster")]
    SameTable { table: String, id: String },

    /// The existing sink table cannot receive the source's rows.
    #[error(
        "sink table '{sink}' cannot receive the rows of source table '{source_table}':\n{}\nalter the sink table, or let ferry create a new one (--job.tableSuffix with --job.createTable true)",
        problem_list(.problems)
    )]
    Incompatible {
        sink: String,
        source_table: String,
        problems: Vec<ColumnProblem>,
    },

    /// The sink cluster refused the source's replication factor.
    #[error("the sink cluster refused to create '{sink}' with the source's {replicas} replicas: {message}; add tablet servers to the sink cluster, or create the sink table yourself with fewer replicas and run without --job.createTable")]
    ReplicationFactor {
        sink: String,
        replicas: i32,
        message: String,
    },

    /// The sink cluster refused to create even one range's tablets at once.
    #[error("the sink cluster refused to create '{sink}': {message}; raise --max_create_tablets_per_ts on the sink masters, or create the sink table yourself and run without --job.createTable")]
    TooManyTablets { sink: String, message: String },

    /// The sink table was created, but adding its other range partitions
    /// failed; ferry then drops it again (`dropped`) so that a half-made
    /// table never passes for a copy.
    #[error(
        "sink table '{sink}' was created, but adding its range partitions failed after {added} of {total}: {source}; {}",
        if *.dropped { "the incomplete table was dropped again, so the next run starts over" } else { "dropping the incomplete table failed too: drop it yourself before running again, or it will pass for a complete copy" }
    )]
    RangesNotAdded {
        sink: String,
        added: usize,
        total: usize,
        dropped: bool,
        #[source]
        source: KuduError,
    },

    /// The source's partitioning could not be read or copied.
    #[error("cannot copy the partitioning of source table '{table}': {reason}")]
    Partitioning { table: String, reason: String },

    /// A call to one of the clusters failed.
    #[error("{action} on the {side} cluster failed: {source}")]
    Kudu {
        side: Side,
        action: String,
        #[source]
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
            } => source.is_retryable() || matches!(source, KuduError::TimedOut { .. }),
            _ => false,
        }
    }

    fn kudu(side: Side, action: impl Into<String>) -> impl FnOnce(KuduError) -> SinkTableError {
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

/// One reason an existing sink table cannot receive the source's rows.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ColumnProblem {
    /// The primary keys differ (names, types or order); both listed as
    /// `name TYPE`.
    KeyMismatch {
        source: Vec<String>,
        sink: Vec<String>,
    },
    /// A source column the sink does not have.
    Missing { column: String, source_type: String },
    /// A source column whose sink column has another type or attributes.
    TypeMismatch {
        column: String,
        source_type: String,
        sink_type: String,
    },
    /// A nullable source column whose sink column is NOT NULL.
    NotNullable { column: String },
    /// A sink-only column that is NOT NULL without a default.
    SinkOnlyRequired { column: String, sink_type: String },
}

impl ColumnProblem {
    /// The column concerned (`None` for a key mismatch).
    pub fn column(&self) -> Option<&str> {
        match self {
            ColumnProblem::KeyMismatch { .. } => None,
            ColumnProblem::Missing { column, .. }
            | ColumnProblem::TypeMismatch { column, .. }
            | ColumnProblem::NotNullable { column }
            | ColumnProblem::SinkOnlyRequired { column, .. } => Some(column),
        }
    }
}

impl fmt::Display for ColumnProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ColumnProblem::KeyMismatch { source, sink } => write!(
                f,
                "primary key: the source's is ({}) but the sink's is ({}); names, types and order must match",
                source.join(", "),
                sink.join(", ")
            ),
            ColumnProblem::Missing { column, source_type } => {
                write!(f, "column '{column}' ({source_type}) is missing in the sink")
            }
            ColumnProblem::TypeMismatch {
                column,
                source_type,
                sink_type,
            } => write!(
                f,
                "column '{column}' is {source_type} in the source but {sink_type} in the sink"
            ),
            ColumnProblem::NotNullable { column } => write!(
                f,
                "column '{column}' is nullable in the source but NOT NULL in the sink"
            ),
            ColumnProblem::SinkOnlyRequired { column, sink_type } => write!(
                f,
                "column '{column}' ({sink_type} NOT NULL) exists only in the sink and has no default, so no source row can fill it"
            ),
        }
    }
}

fn typed(c: &ColumnSchema) -> String {
    format!("{} {}", c.name(), c.type_display())
}

fn same_type(a: &ColumnSchema, b: &ColumnSchema) -> bool {
    a.data_type() == b.data_type() && a.type_attributes() == b.type_attributes()
}

/// Every reason rows of `source` cannot be written to `sink`, key first,
/// then source columns in order, then sink-only columns. Empty = compatible.
pub fn check_compatible(source: &Schema, sink: &Schema) -> Vec<ColumnProblem> {
    let mut problems = Vec::new();
    let (src_keys, sink_keys) = (source.key_columns(), sink.key_columns());
    let keys_match = src_keys.len() == sink_keys.len()
        && src_keys
            .iter()
            .zip(sink_keys)
            .all(|(a, b)| a.name() == b.name() && same_type(a, b));
    if !keys_match {
        problems.push(ColumnProblem::KeyMismatch {
            source: src_keys.iter().map(typed).collect(),
            sink: sink_keys.iter().map(typed).collect(),
        });
    }
    for col in source.columns() {
        let Some(dst) = sink.column_by_name(col.name()) else {
            problems.push(ColumnProblem::Missing {
                column: col.name().to_owned(),
                source_type: col.type_display(),
            });
            continue;
        };
        // A key column's type is already part of a reported key mismatch.
        let in_key_problem = col.is_key() && dst.is_key() && !keys_match;
        let differs = !same_type(col, dst);
        if differs && !in_key_problem {
            problems.push(ColumnProblem::TypeMismatch {
                column: col.name().to_owned(),
                source_type: col.type_display(),
                sink_type: dst.type_display(),
            });
        }
        if col.is_nullable() && !dst.is_nullable() {
            problems.push(ColumnProblem::NotNullable {
                column: col.name().to_owned(),
            });
        }
    }
    for dst in sink.columns() {
        let required = !dst.is_nullable()
            && dst.default_value().is_none_or(|v| v.is_null())
            && !dst.is_auto_incrementing();
        if source.column_by_name(dst.name()).is_none() && required && !dst.is_key() {
            problems.push(ColumnProblem::SinkOnlyRequired {
                column: dst.name().to_owned(),
                sink_type: dst.type_display(),
            });
        }
    }
    problems
}

/// One range partition of a table, derived from its tablets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RangePartition {
    /// Inclusive encoded lower range key (empty = unbounded).
    pub lower_key: Vec<u8>,
    /// Exclusive encoded upper range key (empty = unbounded).
    pub upper_key: Vec<u8>,
    /// The hash dimensions of this range (the table-wide ones unless the
    /// range has its own).
    pub hash_schema: Vec<HashDimension>,
    /// How many tablets the range has (the product of its bucket counts).
    pub tablets: usize,
}

/// The range partitions of `table`, in key order, derived from its
/// tablets. Gaps between them are non-covered ranges.
/// `side` names the cluster in errors.
pub async fn range_partitions(
    client: &KuduClient,
    table: &KuduTable,
    side: Side,
) -> Result<Vec<RangePartition>, SinkTableError> {
    let deadline = Instant::now() + client.admin_timeout();
    let tablets = client
        .tablets_in_range(table, &[], &[], deadline)
        .await
        .map_err(SinkTableError::kudu(
            side,
            format!("listing the tablets of '{}'", table.name()),
        ))?;
    let keys: Vec<(&[u8], &[u8])> = tablets
        .iter()
        .map(|t| {
            (
                t.partition_key_start.as_slice(),
                t.partition_key_end.as_slice(),
            )
        })
        .collect();
    derive_range_partitions(table.partition_schema(), &keys).map_err(|reason| {
        SinkTableError::Partitioning {
            table: table.name().to_owned(),
            reason,
        }
    })
}

/// Groups tablets (partition key start, end) into range partitions.
///
/// Which hash schema — and so how many bucket bytes — a tablet's key starts
/// with depends on its range, which is what we are looking for. So each
/// candidate prefix length is tried, and kept only if the hash schema that
/// applies to the range key it leaves is of that length, the bucket
/// numbers fit that schema, the range keys decode as range-column values,
/// and the tablet's boundaries rebuild exactly from (buckets, range) under
/// one of the two server conventions. Each range must end up with one
/// tablet per bucket combination, and ranges must not overlap.
pub(crate) fn derive_range_partitions(
    ps: &PartitionSchema,
    tablets: &[(&[u8], &[u8])],
) -> Result<Vec<RangePartition>, String> {
    // Candidate hash-dimension counts: per-range ones first (they are the
    // exceptions), then the table-wide one.
    let mut counts: Vec<usize> = Vec::new();
    for n in ps
        .custom_hash_schema_ranges()
        .iter()
        .map(|r| r.hash_schema().len())
        .chain([ps.hash_schema().len()])
    {
        if !counts.contains(&n) {
            counts.push(n);
        }
    }
    let mut ranges: BTreeMap<(Vec<u8>, Vec<u8>), RangePartition> = BTreeMap::new();
    for &(start, end) in tablets {
        let (lower, upper, dims) = counts
            .iter()
            .find_map(|&n| classify(ps, start, end, n))
            .ok_or_else(|| {
                format!(
                    "tablet [{}, {}) does not match the table's hash schemas",
                    hex(start),
                    hex(end)
                )
            })?;
        let entry = ranges
            .entry((lower.clone(), upper.clone()))
            .or_insert_with(|| RangePartition {
                lower_key: lower,
                upper_key: upper,
                hash_schema: dims.clone(),
                tablets: 0,
            });
        if entry.hash_schema != dims {
            return Err(format!(
                "range [{}, {}) has tablets with different hash schemas",
                hex(&entry.lower_key),
                hex(&entry.upper_key)
            ));
        }
        entry.tablets += 1;
    }
    let ranges: Vec<RangePartition> = ranges.into_values().collect();
    for r in &ranges {
        let expected: usize = r
            .hash_schema
            .iter()
            .map(|d| d.num_buckets() as usize)
            .product();
        if r.tablets != expected {
            return Err(format!(
                "range [{}, {}) has {} tablets, but its hash schema makes {expected}",
                hex(&r.lower_key),
                hex(&r.upper_key),
                r.tablets
            ));
        }
    }
    for w in ranges.windows(2) {
        if w[0].upper_key.is_empty() || w[0].upper_key > w[1].lower_key {
            return Err(format!(
                "ranges [{}, {}) and [{}, {}) overlap",
                hex(&w[0].lower_key),
                hex(&w[0].upper_key),
                hex(&w[1].lower_key),
                hex(&w[1].upper_key)
            ));
        }
    }
    Ok(ranges)
}

/// (lower range key, upper range key, hash schema) of a tablet, if its
/// keys start with `n` hash buckets.
fn classify(
    ps: &PartitionSchema,
    start: &[u8],
    end: &[u8],
    n: usize,
) -> Option<(Vec<u8>, Vec<u8>, Vec<HashDimension>)> {
    let (prefix, lower) = split_partition_key(start, n);
    let (_, upper) = split_partition_key(end, n);
    let dims = ps.hash_schema_for_range_key(lower);
    if dims.len() != n || prefix.len() % 4 != 0 {
        return None;
    }
    // A legacy start key of an unbounded range drops trailing zero buckets.
    let mut buckets: Vec<u32> = prefix
        .chunks_exact(4)
        .map(|c| u32::from_be_bytes([c[0], c[1], c[2], c[3]]))
        .collect();
    buckets.resize(n, 0);
    let decodes =
        |k: &[u8]| k.is_empty() || decode_columns(ps.schema(), ps.range_columns(), k).is_ok();
    if !decodes(lower) || !decodes(upper) {
        return None;
    }
    let rebuilt = [
        BoundaryConvention::RangeSpecific,
        BoundaryConvention::Legacy,
    ]
    .into_iter()
    .filter_map(|c| Partition::with_boundaries(dims, &buckets, lower, upper, c).ok())
    .any(|p| p.partition_key_start() == start && p.partition_key_end() == end);
    rebuilt.then(|| (lower.to_vec(), upper.to_vec(), dims.to_vec()))
}

fn hex(b: &[u8]) -> String {
    if b.is_empty() {
        return "<unbounded>".into();
    }
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// A bound row of `schema` whose range key encodes as `key` (empty key =
/// unbounded = no column set).
fn bound_row(schema: &Schema, range_columns: &[usize], key: &[u8]) -> Result<Row, String> {
    let mut row = Row::new(schema);
    if key.is_empty() {
        return Ok(row);
    }
    let values = decode_columns(schema, range_columns, key).map_err(|e| e.to_string())?;
    for (&i, v) in range_columns.iter().zip(&values) {
        // An unset column of a bound encodes as its type's minimum, which
        // some types (DATE, DECIMAL) refuse as a value: leave those unset.
        let _ = row.set(i, v);
    }
    match encode_range_bound(&row, range_columns) {
        Ok(k) if k == key => Ok(row),
        _ => Err(format!(
            "range bound {} cannot be written as a row",
            hex(key)
        )),
    }
}

/// A range's bounds as rows of `schema`, and its own hash dimensions
/// (columns by name, buckets, seed) if they differ from the table-wide ones.
type RangeSpec = (
    (OpType, Row),
    (OpType, Row),
    Option<Vec<(Vec<String>, u32, u32)>>,
);

fn range_spec(
    schema: &Schema,
    ps: &PartitionSchema,
    r: &RangePartition,
) -> Result<RangeSpec, String> {
    let lower = bound_row(schema, ps.range_columns(), &r.lower_key)?;
    let upper = bound_row(schema, ps.range_columns(), &r.upper_key)?;
    let own_hash = (r.hash_schema != ps.hash_schema()).then(|| {
        r.hash_schema
            .iter()
            .map(|d| (column_names(schema, d.columns()), d.num_buckets(), d.seed()))
            .collect()
    });
    Ok((
        (OpType::RangeLowerBound, lower),
        (OpType::RangeUpperBound, upper),
        own_hash,
    ))
}

fn column_names(schema: &Schema, cols: &[usize]) -> Vec<String> {
    cols.iter()
        .map(|&i| schema.columns()[i].name().to_owned())
        .collect()
}

/// `(columns, buckets, seed)` borrowed the way the builders take them.
fn dims_ref(dims: &[(Vec<String>, u32, u32)]) -> Vec<(&[String], u32, u32)> {
    dims.iter()
        .map(|(c, n, seed)| (c.as_slice(), *n, *seed))
        .collect()
}

/// The CreateTable request that copies `source` as `name`, with `ranges`.
pub(crate) fn copy_table_builder(
    source: &KuduTable,
    ranges: &[RangePartition],
    name: &str,
    restore_owner: bool,
) -> Result<TableBuilder, String> {
    let schema = source.schema();
    let ps = source.partition_schema();
    let mut b = TableBuilder::new(name, schema.clone())
        .set_range_partition_columns(&column_names(schema, ps.range_columns()));
    for d in ps.hash_schema() {
        b = b.add_hash_partitions(
            &column_names(schema, d.columns()),
            d.num_buckets(),
            d.seed(),
        );
    }
    if !ps.range_columns().is_empty() {
        for r in ranges {
            b = match range_spec(schema, ps, r)? {
                (lower, upper, None) => b.add_range_partition_with_bounds(lower, upper),
                (lower, upper, Some(dims)) => {
                    b.add_range_with_hash_schema(lower, upper, &dims_ref(&dims))
                }
            };
        }
    }
    if source.num_replicas() > 0 {
        b = b.num_replicas(source.num_replicas());
    }
    if let Some(c) = source.comment() {
        b = b.comment(c);
    }
    for (k, v) in source.extra_configs() {
        b = b.extra_config(k, v);
    }
    if restore_owner {
        if let Some(o) = source.owner() {
            b = b.owner(o);
        }
    }
    Ok(b)
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
/// `source_table`: checks an existing one, or (with `create_table`)
/// creates it as a copy of the source table.
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
    match open_sink(sink, name).await? {
        Some(existing) => check_existing(&src, existing),
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

fn check_existing(src: &KuduTable, sink: KuduTable) -> Result<SinkTablePlan, SinkTableError> {
    if sink.id() == src.id() {
        return Err(SinkTableError::SameTable {
            table: sink.name().to_owned(),
            id: sink.id().to_owned(),
        });
    }
    let problems = check_compatible(src.schema(), sink.schema());
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
    let builder =
        copy_table_builder(src, &ranges, name, opts.restore_owner).map_err(partitioning)?;
    tracing::info!(
        source = src.name(),
        sink = name,
        ranges = ranges.len(),
        replicas = src.num_replicas(),
        "creating the sink table as a copy of the source table"
    );
    let later: Vec<RangePartition> = match create(sink, src, name, &builder).await {
        Ok(Created::Now) => Vec::new(),
        Ok(Created::ByOther(t)) => return check_existing(src, t),
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
            let builder =
                copy_table_builder(src, &first, name, opts.restore_owner).map_err(partitioning)?;
            tracing::info!(
                sink = name,
                ranges = later.len(),
                "too many tablets for one CreateTable: adding ranges by ALTER TABLE"
            );
            match create(sink, src, name, &builder).await? {
                Created::Now => later,
                Created::ByOther(t) => return check_existing(src, t),
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
    // Bound rows must be rows of the sink table's own schema (same columns
    // in the same order as the source's, so the same range-column indexes).
    let ps = src.partition_schema();
    let total = ranges.len();
    let mut added = 0;
    for batch in alter_batches(ranges) {
        let mut alter = AlterTableBuilder::new();
        for r in batch {
            alter = match range_spec(table.schema(), ps, r).map_err(|reason| {
                SinkTableError::Partitioning {
                    table: src.name().to_owned(),
                    reason,
                }
            })? {
                (lower, upper, None) => alter.add_range_partition_with_bounds(lower, upper),
                (lower, upper, Some(dims)) => {
                    alter.add_range_with_hash_schema(lower, upper, &dims_ref(&dims))
                }
            };
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
    use kudu_client::schema::ColumnSchemaBuilder;
    use kudu_client::{DataType, Value};

    fn col(name: &str, t: DataType) -> ColumnSchemaBuilder {
        ColumnSchema::builder(name, t)
    }

    fn schema(cols: Vec<ColumnSchemaBuilder>) -> Schema {
        Schema::new(cols.into_iter().map(|c| c.build().unwrap()).collect()).unwrap()
    }

    fn source_schema() -> Schema {
        schema(vec![
            col("id", DataType::Int64).key(true),
            col("name", DataType::String).nullable(true),
            ColumnSchemaBuilder::decimal("price", 10, 2),
            col("n", DataType::Int32),
        ])
    }

    #[test]
    fn compatible_schemas_pass() {
        let sink = schema(vec![
            col("id", DataType::Int64).key(true),
            // Columns in another order, a NOT NULL source column nullable in
            // the sink, sink-only columns that are nullable or defaulted.
            col("n", DataType::Int32).nullable(true),
            ColumnSchemaBuilder::decimal("price", 10, 2),
            col("name", DataType::String).nullable(true),
            col("extra", DataType::Bool).nullable(true),
            col("flag", DataType::Int8).default_value(Value::Int8(1)),
        ]);
        assert_eq!(check_compatible(&source_schema(), &sink), vec![]);
        assert_eq!(check_compatible(&source_schema(), &source_schema()), vec![]);
    }

    #[test]
    fn every_problem_is_listed() {
        let sink = schema(vec![
            col("id", DataType::Int32).key(true),
            col("name", DataType::String),
            ColumnSchemaBuilder::decimal("price", 12, 2),
            col("required", DataType::Int64),
        ]);
        let problems = check_compatible(&source_schema(), &sink);
        let text: Vec<String> = problems.iter().map(ToString::to_string).collect();
        assert_eq!(problems.len(), 5, "{text:#?}");
        assert!(
            matches!(problems[0], ColumnProblem::KeyMismatch { .. }),
            "{text:#?}"
        );
        assert!(
            text[0].contains("(id INT64)") && text[0].contains("(id INT32)"),
            "{}",
            text[0]
        );
        assert_eq!(
            problems[1],
            ColumnProblem::NotNullable {
                column: "name".into()
            }
        );
        assert_eq!(
            text[2],
            "column 'price' is DECIMAL(10, 2) in the source but DECIMAL(12, 2) in the sink"
        );
        assert_eq!(problems[3].column(), Some("n"));
        assert!(text[3].contains("missing"), "{}", text[3]);
        assert_eq!(problems[4].column(), Some("required"));
        let err = SinkTableError::Incompatible {
            sink: "t_copy".into(),
            source_table: "t".into(),
            problems,
        };
        let msg = err.to_string();
        for c in ["'name'", "'price'", "'n'", "'required'", "primary key"] {
            assert!(msg.contains(c), "{c} in {msg}");
        }
        assert!(!err.is_retryable());
    }

    fn ab() -> Schema {
        schema(vec![
            col("a", DataType::Int32).key(true),
            col("b", DataType::String).key(true),
            col("v", DataType::Int32),
        ])
    }

    fn key(a: i32) -> Vec<u8> {
        ((a as u32) ^ (1 << 31)).to_be_bytes().to_vec()
    }

    /// Tablets of `ranges` (lower, upper, dims) under `conv`.
    fn tablets(
        ranges: &[(Vec<u8>, Vec<u8>, Vec<HashDimension>)],
        conv: BoundaryConvention,
    ) -> Vec<(Vec<u8>, Vec<u8>)> {
        let mut out = Vec::new();
        for (lo, hi, dims) in ranges {
            let mut combos: Vec<Vec<u32>> = vec![vec![]];
            for d in dims {
                combos = combos
                    .into_iter()
                    .flat_map(|c| {
                        (0..d.num_buckets()).map(move |b| {
                            let mut c = c.clone();
                            c.push(b);
                            c
                        })
                    })
                    .collect();
            }
            for c in combos {
                let p = Partition::with_boundaries(dims, &c, lo, hi, conv).unwrap();
                out.push((
                    p.partition_key_start().to_vec(),
                    p.partition_key_end().to_vec(),
                ));
            }
        }
        out.sort();
        out
    }

    #[test]
    fn ranges_are_derived_from_tablets_under_both_conventions() {
        let s = ab();
        let bound = |a: Option<i32>| {
            let mut r = Row::new(&s);
            if let Some(a) = a {
                r.set_i32("a", a).unwrap();
            }
            r
        };
        let custom = vec![HashDimension::new(vec![0], 5, 123)];
        let table_wide = vec![
            HashDimension::new(vec![0], 2, 0),
            HashDimension::new(vec![1], 3, 42),
        ];
        let ps = PartitionSchema::builder(&s)
            .add_hash_partitions(&["a"], 2, 0)
            .add_hash_partitions(&["b"], 3, 42)
            .set_range_partition_columns(&["a"])
            .add_range_with_hash_schema(
                (OpType::RangeLowerBound, bound(Some(200))),
                (OpType::RangeUpperBound, bound(Some(300))),
                &[(&["a"][..], 5, 123)],
            )
            .build()
            .unwrap();
        let ranges = vec![
            (vec![], key(0), table_wide.clone()),
            (key(0), key(50), table_wide.clone()),
            // gap [50, 100)
            (key(100), key(200), table_wide.clone()),
            (key(200), key(300), custom.clone()),
            (key(500), vec![], table_wide.clone()),
        ];
        for conv in [
            BoundaryConvention::Legacy,
            BoundaryConvention::RangeSpecific,
        ] {
            let ts = tablets(&ranges, conv);
            let refs: Vec<(&[u8], &[u8])> = ts
                .iter()
                .map(|(a, b)| (a.as_slice(), b.as_slice()))
                .collect();
            let got = derive_range_partitions(&ps, &refs).unwrap();
            let want: Vec<RangePartition> = ranges
                .iter()
                .map(|(lo, hi, dims)| RangePartition {
                    lower_key: lo.clone(),
                    upper_key: hi.clone(),
                    hash_schema: dims.clone(),
                    tablets: dims.iter().map(|d| d.num_buckets() as usize).product(),
                })
                .collect();
            assert_eq!(got, want, "{conv:?}");
            // A missing tablet is noticed.
            assert!(derive_range_partitions(&ps, &refs[1..]).is_err());
        }
    }

    #[test]
    fn unpartitioned_and_hash_only() {
        let s = ab();
        let ps = PartitionSchema::builder(&s)
            .set_range_partition_columns::<&str>(&[])
            .build()
            .unwrap();
        let got = derive_range_partitions(&ps, &[(&[], &[])]).unwrap();
        assert_eq!(got.len(), 1);
        assert!(got[0].lower_key.is_empty() && got[0].upper_key.is_empty());
        let ps = PartitionSchema::builder(&s)
            .add_hash_partitions(&["a", "b"], 3, 7)
            .set_range_partition_columns::<&str>(&[])
            .build()
            .unwrap();
        let dims = ps.hash_schema().to_vec();
        for conv in [
            BoundaryConvention::Legacy,
            BoundaryConvention::RangeSpecific,
        ] {
            let ts = tablets(&[(vec![], vec![], dims.clone())], conv);
            let refs: Vec<(&[u8], &[u8])> = ts
                .iter()
                .map(|(a, b)| (a.as_slice(), b.as_slice()))
                .collect();
            let got = derive_range_partitions(&ps, &refs).unwrap();
            assert_eq!(got.len(), 1, "{conv:?}");
            assert_eq!(got[0].tablets, 3);
        }
    }

    #[test]
    fn alter_batches_stay_small() {
        let r = |tablets| RangePartition {
            lower_key: vec![],
            upper_key: vec![],
            hash_schema: vec![],
            tablets,
        };
        let ranges = [r(8), r(8), r(8), r(30), r(4), r(20), r(1)];
        let sizes: Vec<usize> = alter_batches(&ranges).iter().map(|b| b.len()).collect();
        assert_eq!(sizes, [2, 1, 1, 1, 1, 1]);
        assert!(alter_batches(&[]).is_empty());
    }

    #[test]
    fn bound_rows_round_trip() {
        let s = schema(vec![
            col("d", DataType::Date).key(true),
            col("s", DataType::String).key(true),
            ColumnSchemaBuilder::decimal("x", 5, 1).key(true),
        ]);
        let cols = [0, 1, 2];
        // A bound that set only `s`: `d` and `x` encode as their minimums,
        // which are not valid DATE / DECIMAL(5, 1) values.
        let mut r = Row::new(&s);
        r.set_str("s", "m\0n").unwrap();
        let k = encode_range_bound(&r, &cols).unwrap();
        let back = bound_row(&s, &cols, &k).unwrap();
        assert_eq!(encode_range_bound(&back, &cols).unwrap(), k);
        assert!(!back.is_set("d").unwrap());
        assert!(bound_row(&s, &cols, &[])
            .unwrap()
            .is_set("s")
            .is_ok_and(|set| !set));
        assert!(bound_row(&s, &cols, &[1, 2]).is_err());
    }
}
