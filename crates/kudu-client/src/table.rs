//! [`KuduTable`]: an opened table (schema, partitioning, metadata), and the
//! builders for creating ([`TableBuilder`]) and altering
//! ([`AlterTableBuilder`]) tables.

use crate::partition::ranges::{column_names, dims_ref, range_spec};
use crate::partition::PartitionSchemaBuilder;
use crate::partition::{PartitionSchema, RangePartition};
use crate::pb;
use crate::row_ops::OpType;
use crate::schema::{ColumnSchema, Compression, Encoding, Row, Schema, Value};
use crate::{Error, Result};
use std::collections::BTreeMap;
use std::sync::Arc;

/// A table as the master describes it. Cheap to clone.
#[derive(Debug, Clone)]
pub struct KuduTable {
    inner: Arc<TableInner>,
}

#[derive(Debug)]
struct TableInner {
    name: String,
    id: String,
    schema: Schema,
    partition_schema: PartitionSchema,
    num_replicas: i32,
    owner: Option<String>,
    comment: Option<String>,
    extra_configs: BTreeMap<String, String>,
    authz_token: Option<pb::security::SignedTokenPb>,
}

impl KuduTable {
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        name: String,
        id: String,
        schema: Schema,
        partition_schema: PartitionSchema,
        num_replicas: i32,
        owner: Option<String>,
        comment: Option<String>,
        extra_configs: BTreeMap<String, String>,
        authz_token: Option<pb::security::SignedTokenPb>,
    ) -> Self {
        KuduTable {
            inner: Arc::new(TableInner {
                name,
                id,
                schema,
                partition_schema,
                num_replicas,
                owner,
                comment,
                extra_configs,
                authz_token,
            }),
        }
    }

    /// The table's name.
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// The table's id (32 hex characters).
    pub fn id(&self) -> &str {
        &self.inner.id
    }

    /// Whether `other` is a clone of this very handle (a pointer compare;
    /// handles opened separately are different even for one table).
    pub(crate) fn same_handle(&self, other: &KuduTable) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }

    /// The table's schema (columns carry master-assigned ids).
    pub fn schema(&self) -> &Schema {
        &self.inner.schema
    }

    /// How rows map to tablets.
    pub fn partition_schema(&self) -> &PartitionSchema {
        &self.inner.partition_schema
    }

    /// Replication factor.
    pub fn num_replicas(&self) -> i32 {
        self.inner.num_replicas
    }

    /// The owner, if the master reports one.
    pub fn owner(&self) -> Option<&str> {
        self.inner.owner.as_deref()
    }

    /// The table comment, if any.
    pub fn comment(&self) -> Option<&str> {
        self.inner.comment.as_deref()
    }

    /// Extra configuration (e.g. `kudu.table.history_max_age_sec`).
    pub fn extra_configs(&self) -> &BTreeMap<String, String> {
        &self.inner.extra_configs
    }

    /// An empty row of this table's schema.
    pub fn new_row(&self) -> Row {
        Row::new(&self.inner.schema)
    }

    pub(crate) fn authz_token(&self) -> Option<&pb::security::SignedTokenPb> {
        self.inner.authz_token.as_ref()
    }

    /// This table described as the [`TableBuilder`] that creates a copy of
    /// it named `name`, with the range partitions `ranges` (all of them, from
    /// [`KuduClient::range_partitions`](crate::KuduClient::range_partitions),
    /// or some): every column with its attributes, the table-wide hash
    /// dimensions, the range columns, each range with its own hash schema if
    /// it has one, the replication factor, comment and extra configs. The
    /// owner is left for the caller to set.
    pub fn to_builder(&self, name: &str, ranges: &[RangePartition]) -> Result<TableBuilder> {
        let schema = self.schema();
        let ps = self.partition_schema();
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
                b = match range_spec(schema, ps, r).map_err(|e| self.partitioning(e))? {
                    (lower, upper, None) => b.add_range_partition_with_bounds(lower, upper),
                    (lower, upper, Some(dims)) => {
                        b.add_range_with_hash_schema(lower, upper, &dims_ref(&dims))
                    }
                };
            }
        }
        if self.num_replicas() > 0 {
            b = b.num_replicas(self.num_replicas());
        }
        if let Some(c) = self.comment() {
            b = b.comment(c);
        }
        for (k, v) in self.extra_configs() {
            b = b.extra_config(k, v);
        }
        Ok(b)
    }

    pub(crate) fn partitioning(&self, reason: String) -> Error {
        Error::Partitioning {
            table: self.name().to_owned(),
            reason,
        }
    }
}

/// A range partition bound pair: (lower type, lower row), (upper type,
/// upper row). Bound rows set only range columns; none set = unbounded.
pub type RangeBounds = ((OpType, Row), (OpType, Row));

/// Builds a `CreateTable` request.
#[derive(Debug, Clone)]
pub struct TableBuilder {
    pub(crate) name: String,
    pub(crate) schema: Schema,
    pub(crate) partition: PartitionSchemaBuilder,
    pub(crate) range_partitions: Vec<RangeBounds>,
    pub(crate) split_rows: Vec<Row>,
    pub(crate) num_replicas: Option<i32>,
    pub(crate) owner: Option<String>,
    pub(crate) comment: Option<String>,
    pub(crate) extra_configs: BTreeMap<String, String>,
    pub(crate) has_custom_hash_ranges: bool,
    pub(crate) wait: bool,
}

impl TableBuilder {
    /// A table `name` with `schema` (key columns first). Without any
    /// partitioning call the master's default applies (range over the key,
    /// one unbounded range).
    pub fn new(name: impl Into<String>, schema: Schema) -> Self {
        let partition = PartitionSchema::builder(&schema);
        TableBuilder {
            name: name.into(),
            schema,
            partition,
            range_partitions: Vec::new(),
            split_rows: Vec::new(),
            num_replicas: None,
            owner: None,
            comment: None,
            extra_configs: BTreeMap::new(),
            has_custom_hash_ranges: false,
            wait: true,
        }
    }

    /// The schema rows for bounds and splits must use.
    pub fn schema(&self) -> &Schema {
        &self.schema
    }

    /// Adds a table-wide hash dimension over `columns`.
    pub fn add_hash_partitions<S: AsRef<str>>(
        mut self,
        columns: &[S],
        num_buckets: u32,
        seed: u32,
    ) -> Self {
        self.partition = self
            .partition
            .add_hash_partitions(columns, num_buckets, seed);
        self
    }

    /// Sets the range partition columns (an empty list: no range
    /// partitioning).
    pub fn set_range_partition_columns<S: AsRef<str>>(mut self, columns: &[S]) -> Self {
        self.partition = self.partition.set_range_partition_columns(columns);
        self
    }

    /// Adds the range partition [lower, upper) using the table-wide hash
    /// schema.
    pub fn add_range_partition(self, lower: Row, upper: Row) -> Self {
        self.add_range_partition_with_bounds(
            (OpType::RangeLowerBound, lower),
            (OpType::RangeUpperBound, upper),
        )
    }

    /// Adds a range partition with explicit bound types (inclusive or
    /// exclusive lower, exclusive or inclusive upper).
    pub fn add_range_partition_with_bounds(
        mut self,
        lower: (OpType, Row),
        upper: (OpType, Row),
    ) -> Self {
        self.range_partitions.push((lower, upper));
        self
    }

    /// Adds the range [lower, upper) with its own hash dimensions given as
    /// (columns, buckets, seed) — Kudu 1.17+.
    pub fn add_range_with_hash_schema<S: AsRef<str>>(
        mut self,
        lower: (OpType, Row),
        upper: (OpType, Row),
        hash: &[(&[S], u32, u32)],
    ) -> Self {
        self.partition = self
            .partition
            .add_range_with_hash_schema(lower, upper, hash);
        self.has_custom_hash_ranges = true;
        self
    }

    /// Adds a split row (cuts a range partition in two).
    pub fn add_split_row(mut self, row: Row) -> Self {
        self.split_rows.push(row);
        self
    }

    /// Sets the replication factor (odd, at most the live tablet servers).
    pub fn num_replicas(mut self, n: i32) -> Self {
        self.num_replicas = Some(n);
        self
    }

    /// Sets the owner.
    pub fn owner(mut self, owner: impl Into<String>) -> Self {
        self.owner = Some(owner.into());
        self
    }

    /// Sets the comment.
    pub fn comment(mut self, comment: impl Into<String>) -> Self {
        self.comment = Some(comment.into());
        self
    }

    /// Sets one extra configuration entry.
    pub fn extra_config(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.extra_configs.insert(key.into(), value.into());
        self
    }

    /// Whether `create_table` waits until every tablet is running
    /// (default true).
    pub fn wait(mut self, wait: bool) -> Self {
        self.wait = wait;
        self
    }
}

/// One step of an alteration.
#[derive(Debug, Clone)]
pub(crate) enum AlterStep {
    AddColumn(ColumnSchema),
    DropColumn(String),
    RenameColumn(String, String),
    AddRange(RangeBounds, Option<Vec<(Vec<String>, u32, u32)>>),
    DropRange(RangeBounds),
    AlterColumn(ColumnDelta),
}

/// Changes to one column's attributes (an ALTER_COLUMN step): only what
/// is set is sent.
#[derive(Debug, Clone, PartialEq)]
pub struct ColumnDelta {
    pub(crate) name: String,
    pub(crate) new_name: Option<String>,
    /// `Some(None)`: remove the default.
    pub(crate) default: Option<Option<Value>>,
    pub(crate) encoding: Option<Encoding>,
    pub(crate) compression: Option<Compression>,
    pub(crate) block_size: Option<i32>,
    pub(crate) comment: Option<String>,
    pub(crate) immutable: Option<bool>,
}

impl ColumnDelta {
    /// No change yet to column `name`.
    pub fn new(name: impl Into<String>) -> Self {
        ColumnDelta {
            name: name.into(),
            new_name: None,
            default: None,
            encoding: None,
            compression: None,
            block_size: None,
            comment: None,
            immutable: None,
        }
    }

    /// Renames the column.
    pub fn rename_to(mut self, name: impl Into<String>) -> Self {
        self.new_name = Some(name.into());
        self
    }

    /// Sets the default value (a NULL value removes it).
    pub fn default_value(mut self, value: impl Into<Value>) -> Self {
        let value = value.into();
        self.default = Some((!value.is_null()).then_some(value));
        self
    }

    /// Removes the default value.
    pub fn remove_default(mut self) -> Self {
        self.default = Some(None);
        self
    }

    /// Sets the encoding.
    pub fn encoding(mut self, encoding: Encoding) -> Self {
        self.encoding = Some(encoding);
        self
    }

    /// Sets the compression.
    pub fn compression(mut self, compression: Compression) -> Self {
        self.compression = Some(compression);
        self
    }

    /// Sets the block size (bytes).
    pub fn block_size(mut self, block_size: i32) -> Self {
        self.block_size = Some(block_size);
        self
    }

    /// Sets the comment (empty: none).
    pub fn comment(mut self, comment: impl Into<String>) -> Self {
        self.comment = Some(comment.into());
        self
    }

    /// Sets whether the column is immutable.
    pub fn immutable(mut self, immutable: bool) -> Self {
        self.immutable = Some(immutable);
        self
    }

    /// Whether nothing is changed.
    pub fn is_empty(&self) -> bool {
        *self == ColumnDelta::new(self.name.clone())
    }
}

/// Builds an `AlterTable` request.
#[derive(Debug, Clone, Default)]
pub struct AlterTableBuilder {
    pub(crate) steps: Vec<AlterStep>,
    pub(crate) new_name: Option<String>,
    pub(crate) new_owner: Option<String>,
    pub(crate) new_comment: Option<String>,
    pub(crate) new_extra_configs: BTreeMap<String, String>,
}

impl AlterTableBuilder {
    /// An empty alteration.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a column (a NOT NULL column needs a default value).
    pub fn add_column(mut self, column: ColumnSchema) -> Self {
        self.steps.push(AlterStep::AddColumn(column));
        self
    }

    /// Changes a column's attributes (see [`ColumnDelta`]).
    pub fn alter_column(mut self, delta: ColumnDelta) -> Self {
        self.steps.push(AlterStep::AlterColumn(delta));
        self
    }

    /// Drops a column.
    pub fn drop_column(mut self, name: impl Into<String>) -> Self {
        self.steps.push(AlterStep::DropColumn(name.into()));
        self
    }

    /// Renames a column.
    pub fn rename_column(mut self, old: impl Into<String>, new: impl Into<String>) -> Self {
        self.steps
            .push(AlterStep::RenameColumn(old.into(), new.into()));
        self
    }

    /// Adds the range partition [lower, upper) (rows of the table's schema).
    pub fn add_range_partition(self, lower: Row, upper: Row) -> Self {
        self.add_range_partition_with_bounds(
            (OpType::RangeLowerBound, lower),
            (OpType::RangeUpperBound, upper),
        )
    }

    /// Adds a range partition with explicit bound types.
    pub fn add_range_partition_with_bounds(
        mut self,
        lower: (OpType, Row),
        upper: (OpType, Row),
    ) -> Self {
        self.steps.push(AlterStep::AddRange((lower, upper), None));
        self
    }

    /// Adds a range with its own hash dimensions (columns, buckets, seed).
    pub fn add_range_with_hash_schema<S: AsRef<str>>(
        mut self,
        lower: (OpType, Row),
        upper: (OpType, Row),
        hash: &[(&[S], u32, u32)],
    ) -> Self {
        let hash = hash
            .iter()
            .map(|(c, n, s)| (c.iter().map(|x| x.as_ref().to_owned()).collect(), *n, *s))
            .collect();
        self.steps
            .push(AlterStep::AddRange((lower, upper), Some(hash)));
        self
    }

    /// Adds `range` (of a table partitioned like `table`, e.g. one it was
    /// created as a copy of) to `table`, with its own hash schema if it has
    /// one.
    pub fn add_range_like(self, table: &KuduTable, range: &RangePartition) -> Result<Self> {
        let spec = range_spec(table.schema(), table.partition_schema(), range)
            .map_err(|e| table.partitioning(e))?;
        Ok(match spec {
            (lower, upper, None) => self.add_range_partition_with_bounds(lower, upper),
            (lower, upper, Some(dims)) => {
                self.add_range_with_hash_schema(lower, upper, &dims_ref(&dims))
            }
        })
    }

    /// Drops `range` (one of `table`'s, as [`crate::KuduClient::range_partitions`]
    /// lists it) from `table`.
    pub fn drop_range_like(mut self, table: &KuduTable, range: &RangePartition) -> Result<Self> {
        let (lower, upper, _) = range_spec(table.schema(), table.partition_schema(), range)
            .map_err(|e| table.partitioning(e))?;
        self.steps.push(AlterStep::DropRange((lower, upper)));
        Ok(self)
    }

    /// Drops the range partition [lower, upper).
    pub fn drop_range_partition(mut self, lower: Row, upper: Row) -> Self {
        self.steps.push(AlterStep::DropRange((
            (OpType::RangeLowerBound, lower),
            (OpType::RangeUpperBound, upper),
        )));
        self
    }

    /// Renames the table.
    pub fn rename_table(mut self, new_name: impl Into<String>) -> Self {
        self.new_name = Some(new_name.into());
        self
    }

    /// Changes the owner.
    pub fn set_owner(mut self, owner: impl Into<String>) -> Self {
        self.new_owner = Some(owner.into());
        self
    }

    /// Changes the comment.
    pub fn set_comment(mut self, comment: impl Into<String>) -> Self {
        self.new_comment = Some(comment.into());
        self
    }

    /// Sets one extra configuration entry (an empty value removes it).
    pub fn set_extra_config(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.new_extra_configs.insert(key.into(), value.into());
        self
    }
}
