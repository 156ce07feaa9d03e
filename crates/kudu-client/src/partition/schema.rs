//! [`PartitionSchema`]: how a table's rows map to partition keys, and
//! [`Partition`]: the partition-key range one tablet covers.
//!
//! A row's partition key
//! (docs/kudu-protocol.md#hash-buckets-and-partition-keys) is one 4-byte
//! big-endian bucket per hash dimension followed by the range key
//! (docs/kudu-protocol.md#key-encoding). Since 1.17 a range may carry its own
//! hash dimensions (docs/kudu-protocol.md#range-specific-hash-schemas); the
//! range key picks which.
//!
//! Column references are stored as indexes into the table [`Schema`] the
//! partition schema was built for; protobuf conversion maps them to column
//! ids (what the master sends) or names (what CreateTable takes).

use super::bounds::{BoundaryConvention, Partition};
use super::builder::PartitionSchemaBuilder;
use super::key::{encode_columns, encode_range_bound};
use super::murmur::murmur2_64;
use crate::pb;
use crate::pb::partition_schema_pb::{HashBucketSchemaPb, RangeSchemaPb, RangeWithHashSchemaPb};
use crate::row_ops::{self as ops, OpType};
use crate::schema::{Row, Schema};
use crate::{Error, Result};

/// Width of one encoded hash bucket in a partition key.
pub(crate) const BUCKET_SIZE: usize = 4;

/// One hash dimension: columns (indexes into the table schema), bucket
/// count and seed. The hash is always MurmurHash64A.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HashDimension {
    columns: Vec<usize>,
    num_buckets: u32,
    seed: u32,
}

impl HashDimension {
    /// A dimension over `columns` (table-schema indexes). Validated when
    /// it becomes part of a [`PartitionSchema`].
    pub fn new(columns: Vec<usize>, num_buckets: u32, seed: u32) -> Self {
        HashDimension {
            columns,
            num_buckets,
            seed,
        }
    }
    /// Column indexes, in hashing order.
    pub fn columns(&self) -> &[usize] {
        &self.columns
    }
    /// Number of buckets (≥ 2).
    pub fn num_buckets(&self) -> u32 {
        self.num_buckets
    }
    /// Hash seed.
    pub fn seed(&self) -> u32 {
        self.seed
    }

    /// The bucket of `row`: murmur2-64 of the key-encoded columns modulo
    /// the bucket count, both unsigned 64-bit. `scratch` is reused for the
    /// encoded input.
    fn bucket_with(&self, row: &Row, scratch: &mut Vec<u8>) -> Result<u32> {
        let start = scratch.len();
        encode_columns(row, &self.columns, scratch)?;
        let h = murmur2_64(&scratch[start..], u64::from(self.seed));
        scratch.truncate(start);
        // num_buckets > 0 is a PartitionSchema invariant; the result is
        // < num_buckets, so it fits u32.
        Ok((h % u64::from(self.num_buckets.max(1))) as u32)
    }

    /// The bucket `row` falls into for this dimension.
    pub fn bucket(&self, row: &Row) -> Result<u32> {
        self.bucket_with(row, &mut Vec::new())
    }
}

/// A range with its own hash schema (1.17+). Bounds are kept as rows (to
/// send back in protobuf) and as normalized encoded range keys: inclusive
/// lower, exclusive upper, empty = unbounded.
#[derive(Debug, Clone)]
pub struct RangeWithHashSchema {
    lower: Row,
    lower_type: OpType,
    upper: Row,
    upper_type: OpType,
    lower_key: Vec<u8>,
    upper_key: Vec<u8>,
    hash_schema: Vec<HashDimension>,
}

impl RangeWithHashSchema {
    /// The range bounds as rows with their op types (one of the lower-bound
    /// types and one of the upper-bound types).
    pub fn bounds(&self) -> ((OpType, &Row), (OpType, &Row)) {
        (
            (self.lower_type, &self.lower),
            (self.upper_type, &self.upper),
        )
    }
    /// Inclusive encoded lower range key (empty = unbounded).
    pub fn lower_key(&self) -> &[u8] {
        &self.lower_key
    }
    /// Exclusive encoded upper range key (empty = unbounded).
    pub fn upper_key(&self) -> &[u8] {
        &self.upper_key
    }
    /// The range's hash dimensions.
    pub fn hash_schema(&self) -> &[HashDimension] {
        &self.hash_schema
    }
    /// Whether `range_key` lies in [lower, upper).
    pub fn contains(&self, range_key: &[u8]) -> bool {
        range_key >= self.lower_key.as_slice()
            && (self.upper_key.is_empty() || range_key < self.upper_key.as_slice())
    }
}

/// Normalizes bound rows to an inclusive lower and exclusive upper key.
///
/// Why the `00` suffix works: keys are compared as byte strings, and the
/// smallest byte string greater than `x` is `x ‖ 00`. So "> x" equals
/// "≥ x‖00" and "≤ x" equals "< x‖00", without incrementing typed values.
fn normalized_bounds(
    lower: &Row,
    lower_type: OpType,
    upper: &Row,
    upper_type: OpType,
    range_columns: &[usize],
) -> Result<(Vec<u8>, Vec<u8>)> {
    let mut lower_key = encode_range_bound(lower, range_columns)?;
    let mut upper_key = encode_range_bound(upper, range_columns)?;
    match lower_type {
        OpType::RangeLowerBound => {}
        OpType::ExclusiveRangeLowerBound if !lower_key.is_empty() => lower_key.push(0),
        OpType::ExclusiveRangeLowerBound => {}
        other => {
            return Err(Error::InvalidArgument(format!(
                "{other} is not a range lower bound"
            )))
        }
    }
    match upper_type {
        OpType::RangeUpperBound => {}
        OpType::InclusiveRangeUpperBound if !upper_key.is_empty() => upper_key.push(0),
        OpType::InclusiveRangeUpperBound => {}
        other => {
            return Err(Error::InvalidArgument(format!(
                "{other} is not a range upper bound"
            )))
        }
    }
    if !upper_key.is_empty() && lower_key >= upper_key {
        return Err(Error::InvalidArgument(format!(
            "range lower bound {} is not below upper bound {}",
            lower, upper
        )));
    }
    Ok((lower_key, upper_key))
}

/// How a table is partitioned: table-wide hash dimensions, range columns
/// and (1.17+) ranges with their own hash dimensions.
#[derive(Debug, Clone)]
pub struct PartitionSchema {
    schema: Schema,
    hash_schema: Vec<HashDimension>,
    range_columns: Vec<usize>,
    custom_ranges: Vec<RangeWithHashSchema>,
}

/// How protobuf column references are written by
/// [`PartitionSchema::to_pb`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ColumnRefs {
    /// By name: what CreateTable / AlterTable take.
    Name,
    /// By master-assigned id (needs a schema read from the master); the
    /// client only writes names, the tests check both round-trip.
    #[cfg_attr(not(test), allow(dead_code))]
    Id,
}

impl PartitionSchema {
    /// A partition schema over `schema` with table-wide `hash_schema` and
    /// `range_columns` (indexes). Checks that every referenced column is a
    /// key column, that no column is in two hash dimensions, and that each
    /// dimension has ≥ 2 buckets.
    pub fn new(
        schema: &Schema,
        hash_schema: Vec<HashDimension>,
        range_columns: Vec<usize>,
    ) -> Result<PartitionSchema> {
        check_hash_schema(schema, &hash_schema)?;
        for &i in &range_columns {
            check_key_column(schema, i, "range")?;
        }
        Ok(PartitionSchema {
            schema: schema.clone(),
            hash_schema,
            range_columns,
            custom_ranges: Vec::new(),
        })
    }

    /// Starts a partition schema described by column names.
    pub fn builder(schema: &Schema) -> PartitionSchemaBuilder {
        PartitionSchemaBuilder {
            schema: schema.clone(),
            hash: Vec::new(),
            range: None,
            custom: Vec::new(),
        }
    }

    /// Adds a range with its own hash schema (1.17+). `lower_type` is
    /// RANGE_LOWER_BOUND or EXCLUSIVE_RANGE_LOWER_BOUND, `upper_type`
    /// RANGE_UPPER_BOUND or INCLUSIVE_RANGE_UPPER_BOUND; bound rows set only
    /// range columns (none set = unbounded). Ranges must not overlap.
    pub fn add_range_with_hash_schema(
        &mut self,
        (lower_type, lower): (OpType, Row),
        (upper_type, upper): (OpType, Row),
        hash_schema: Vec<HashDimension>,
    ) -> Result<()> {
        for r in [&lower, &upper] {
            if r.schema() != &self.schema {
                return Err(Error::InvalidArgument(
                    "range bound row uses a different schema".into(),
                ));
            }
        }
        check_hash_schema(&self.schema, &hash_schema)?;
        let (lower_key, upper_key) =
            normalized_bounds(&lower, lower_type, &upper, upper_type, &self.range_columns)?;
        let new = RangeWithHashSchema {
            lower,
            lower_type,
            upper,
            upper_type,
            lower_key,
            upper_key,
            hash_schema,
        };
        let overlaps = |a: &RangeWithHashSchema, b: &RangeWithHashSchema| {
            (b.upper_key.is_empty() || a.lower_key < b.upper_key)
                && (a.upper_key.is_empty() || b.lower_key < a.upper_key)
        };
        if self.custom_ranges.iter().any(|r| overlaps(r, &new)) {
            return Err(Error::InvalidArgument(format!(
                "range [{}, {}) overlaps another range with a custom hash schema",
                new.lower, new.upper
            )));
        }
        self.custom_ranges.push(new);
        Ok(())
    }

    /// Whether a row gets the same partition key under `other` as under
    /// this schema: the same key column types, hash dimensions, range
    /// columns and ranges with their own hash dimensions. (Two tables
    /// partitioned alike then hold a key range in the same order, whatever
    /// their other columns or range bounds.)
    pub fn partitions_like(&self, other: &PartitionSchema) -> bool {
        let key_types = |s: &Schema| {
            s.columns()[..s.num_key_columns()]
                .iter()
                .map(|c| c.data_type())
                .collect::<Vec<_>>()
        };
        let custom = |p: &PartitionSchema| {
            p.custom_ranges
                .iter()
                .map(|r| {
                    (
                        r.lower_key().to_vec(),
                        r.upper_key().to_vec(),
                        r.hash_schema().to_vec(),
                    )
                })
                .collect::<Vec<_>>()
        };
        key_types(&self.schema) == key_types(&other.schema)
            && self.hash_schema == other.hash_schema
            && self.range_columns == other.range_columns
            && custom(self) == custom(other)
    }

    /// The table schema the column indexes refer to.
    pub fn schema(&self) -> &Schema {
        &self.schema
    }
    /// Table-wide hash dimensions.
    pub fn hash_schema(&self) -> &[HashDimension] {
        &self.hash_schema
    }
    /// Range column indexes, in range-key order (empty = no range
    /// partitioning).
    pub fn range_columns(&self) -> &[usize] {
        &self.range_columns
    }
    /// Ranges with their own hash schema (1.17+).
    pub fn custom_hash_schema_ranges(&self) -> &[RangeWithHashSchema] {
        &self.custom_ranges
    }

    /// The hash dimensions that apply to rows whose range key is
    /// `range_key` (docs/kudu-protocol.md#range-specific-hash-schemas).
    pub fn hash_schema_for_range_key(&self, range_key: &[u8]) -> &[HashDimension] {
        self.custom_ranges
            .iter()
            .find(|r| r.contains(range_key))
            .map_or(&self.hash_schema, |r| &r.hash_schema)
    }

    fn check_row(&self, row: &Row) -> Result<()> {
        if row.schema() == &self.schema {
            Ok(())
        } else {
            Err(Error::InvalidArgument(format!(
                "row schema {} does not match the table schema {}",
                row.schema(),
                self.schema
            )))
        }
    }

    /// The encoded range key of a data row (all range columns set).
    pub fn range_key(&self, row: &Row) -> Result<Vec<u8>> {
        self.check_row(row)?;
        let mut out = Vec::new();
        encode_columns(row, &self.range_columns, &mut out)?;
        Ok(out)
    }

    /// The hash buckets of `row`, one per applicable dimension.
    pub fn hash_buckets(&self, row: &Row) -> Result<Vec<u32>> {
        let range_key = self.range_key(row)?;
        let mut scratch = Vec::new();
        self.hash_schema_for_range_key(&range_key)
            .iter()
            .map(|d| d.bucket_with(row, &mut scratch))
            .collect()
    }

    /// The partition key a writer routes `row` by
    /// (docs/kudu-protocol.md#hash-buckets-and-partition-keys): 4-byte BE
    /// bucket per hash dimension, then the range key. Hash and range columns
    /// must be set.
    pub fn partition_key(&self, row: &Row) -> Result<Vec<u8>> {
        let mut out = Vec::with_capacity(32);
        self.partition_key_into(row, &mut out, &mut Vec::new())?;
        Ok(out)
    }

    /// [`partition_key`](Self::partition_key) into `out` (cleared first),
    /// with `scratch` for the hash input: no allocation once both have
    /// grown, for writers that route many rows.
    pub(crate) fn partition_key_into(
        &self,
        row: &Row,
        out: &mut Vec<u8>,
        scratch: &mut Vec<u8>,
    ) -> Result<()> {
        self.check_row(row)?;
        out.clear();
        scratch.clear();
        // Encode the range key first (it selects the hash schema), append
        // the buckets, then rotate the range key to the end.
        encode_columns(row, &self.range_columns, out)?;
        let range_len = out.len();
        let dims = self.hash_schema_for_range_key(&out[..range_len]);
        for d in dims {
            let bucket = d.bucket_with(row, scratch)?;
            out.extend_from_slice(&bucket.to_be_bytes());
        }
        out.rotate_left(range_len);
        Ok(())
    }

    /// The partition key split into hash and range parts, as the 1.16+
    /// `PartitionKeyPB{hash_key, range_key}` carries them.
    pub fn partition_key_parts(&self, row: &Row) -> Result<(Vec<u8>, Vec<u8>)> {
        let range_key = self.range_key(row)?;
        let dims = self.hash_schema_for_range_key(&range_key);
        let mut hash_key = Vec::with_capacity(BUCKET_SIZE * dims.len());
        let mut scratch = Vec::new();
        for d in dims {
            hash_key.extend_from_slice(&d.bucket_with(row, &mut scratch)?.to_be_bytes());
        }
        Ok((hash_key, range_key))
    }

    /// The partition key a range-bound row starts at, for a given bucket
    /// prefix: unset range columns count as minimum values, no range column
    /// set means unbounded (empty range key).
    pub fn range_bound_key(&self, row: &Row) -> Result<Vec<u8>> {
        self.check_row(row)?;
        encode_range_bound(row, &self.range_columns)
    }

    /// The boundaries of the tablet with `hash_buckets` over the range
    /// [`range_start`, `range_end`) (encoded range keys, empty =
    /// unbounded), as a server following `convention` reports them
    /// (docs/kudu-protocol.md#tablet-boundaries). The hash dimensions are those
    /// that apply to `range_start`.
    pub fn partition(
        &self,
        hash_buckets: &[u32],
        range_start: &[u8],
        range_end: &[u8],
        convention: BoundaryConvention,
    ) -> Result<Partition> {
        let dims = self.hash_schema_for_range_key(range_start);
        Partition::with_boundaries(dims, hash_buckets, range_start, range_end, convention)
    }

    /// Reads a `PartitionSchemaPB` whose columns refer to `schema` by id or
    /// name. An absent `range_schema` means the master's default: all key
    /// columns except an auto-incrementing one.
    pub(crate) fn from_pb(pb: &pb::PartitionSchemaPb, schema: &Schema) -> Result<PartitionSchema> {
        let hash = pb
            .hash_schema
            .iter()
            .map(|h| hash_from_pb(h, schema))
            .collect::<Result<Vec<_>>>()?;
        let range = match &pb.range_schema {
            Some(r) => resolve_columns(&r.columns, schema)?,
            None => (0..schema.num_key_columns())
                .filter(|&i| !schema.columns()[i].is_auto_incrementing())
                .collect(),
        };
        let mut ps = PartitionSchema::new(schema, hash, range)?;
        for r in &pb.custom_hash_schema_ranges {
            let bounds = r.range_bounds.as_ref().ok_or_else(|| {
                Error::InvalidArgument("custom hash schema range without bounds".into())
            })?;
            let mut rows = ops::decode(schema, bounds)?.into_iter();
            let (Some(lower), Some(upper), None) = (rows.next(), rows.next(), rows.next()) else {
                return Err(Error::InvalidArgument(
                    "custom hash schema range must have exactly two bound rows".into(),
                ));
            };
            let hash = r
                .hash_schema
                .iter()
                .map(|h| hash_from_pb(h, schema))
                .collect::<Result<Vec<_>>>()?;
            ps.add_range_with_hash_schema(lower, upper, hash)?;
        }
        Ok(ps)
    }

    /// Writes a `PartitionSchemaPB`, referring to columns by name (for
    /// CreateTable) or id. `range_schema` is always present so an empty
    /// range-column list keeps meaning "no range partitioning".
    pub(crate) fn to_pb(&self, refs: ColumnRefs) -> Result<pb::PartitionSchemaPb> {
        let ids = |cols: &[usize]| -> Result<Vec<pb::ColumnIdentifierPb>> {
            cols.iter()
                .map(|&i| column_ref(&self.schema, i, refs))
                .collect()
        };
        let hash = |dims: &[HashDimension]| -> Result<Vec<HashBucketSchemaPb>> {
            dims.iter()
                .map(|d| {
                    Ok(HashBucketSchemaPb {
                        columns: ids(&d.columns)?,
                        num_buckets: i32::try_from(d.num_buckets).map_err(|_| {
                            Error::InvalidArgument(format!("{} buckets is too many", d.num_buckets))
                        })?,
                        // Optional with default 0: only sent when it matters.
                        seed: (d.seed != 0).then_some(d.seed),
                        hash_algorithm: None,
                    })
                })
                .collect()
        };
        let custom = self
            .custom_ranges
            .iter()
            .map(|r| {
                Ok(RangeWithHashSchemaPb {
                    range_bounds: Some(ops::encode(
                        &self.schema,
                        &[(r.lower_type, &r.lower), (r.upper_type, &r.upper)],
                    )?),
                    hash_schema: hash(&r.hash_schema)?,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(pb::PartitionSchemaPb {
            hash_schema: hash(&self.hash_schema)?,
            range_schema: Some(RangeSchemaPb {
                columns: ids(&self.range_columns)?,
            }),
            custom_hash_schema_ranges: custom,
        })
    }
}

fn check_key_column(schema: &Schema, i: usize, what: &str) -> Result<()> {
    match schema.column(i) {
        Some(c) if c.is_key() => Ok(()),
        Some(c) => Err(Error::InvalidArgument(format!(
            "{what} partition column '{}' is not a primary-key column",
            c.name()
        ))),
        None => Err(Error::InvalidArgument(format!(
            "{what} partition column index {i} out of range"
        ))),
    }
}

fn check_hash_schema(schema: &Schema, dims: &[HashDimension]) -> Result<()> {
    let mut seen = vec![false; schema.len()];
    for d in dims {
        if d.num_buckets < 2 {
            return Err(Error::InvalidArgument(format!(
                "a hash dimension needs at least 2 buckets, got {}",
                d.num_buckets
            )));
        }
        if d.columns.is_empty() {
            return Err(Error::InvalidArgument(
                "a hash dimension needs at least one column".into(),
            ));
        }
        for &i in &d.columns {
            check_key_column(schema, i, "hash")?;
            if std::mem::replace(&mut seen[i], true) {
                return Err(Error::InvalidArgument(format!(
                    "column '{}' is used by more than one hash dimension",
                    schema.columns()[i].name()
                )));
            }
        }
    }
    Ok(())
}

fn resolve_columns(ids: &[pb::ColumnIdentifierPb], schema: &Schema) -> Result<Vec<usize>> {
    use pb::column_identifier_pb::Identifier;
    ids.iter()
        .map(|c| match &c.identifier {
            Some(Identifier::Id(id)) => u32::try_from(*id)
                .ok()
                .and_then(|id| schema.index_of_id(id))
                .ok_or_else(|| {
                    Error::InvalidArgument(format!(
                        "partition schema refers to unknown column id {id}"
                    ))
                }),
            Some(Identifier::Name(name)) => schema.index_of(name).ok_or_else(|| {
                Error::InvalidArgument(format!(
                    "partition schema refers to unknown column '{name}'"
                ))
            }),
            None => Err(Error::InvalidArgument(
                "partition schema column identifier is empty".into(),
            )),
        })
        .collect()
}

fn hash_from_pb(h: &HashBucketSchemaPb, schema: &Schema) -> Result<HashDimension> {
    let num_buckets = u32::try_from(h.num_buckets)
        .map_err(|_| Error::InvalidArgument(format!("negative bucket count {}", h.num_buckets)))?;
    Ok(HashDimension::new(
        resolve_columns(&h.columns, schema)?,
        num_buckets,
        h.seed.unwrap_or(0),
    ))
}

fn column_ref(schema: &Schema, i: usize, refs: ColumnRefs) -> Result<pb::ColumnIdentifierPb> {
    use pb::column_identifier_pb::Identifier;
    let col = schema
        .column(i)
        .ok_or_else(|| Error::InvalidArgument(format!("column index {i} out of range")))?;
    let identifier = match refs {
        ColumnRefs::Name => Identifier::Name(col.name().to_owned()),
        ColumnRefs::Id => Identifier::Id(
            col.id()
                .and_then(|id| i32::try_from(id).ok())
                .ok_or_else(|| {
                    Error::InvalidArgument(format!("column '{}' has no id", col.name()))
                })?,
        ),
    };
    Ok(pb::ColumnIdentifierPb {
        identifier: Some(identifier),
    })
}

#[cfg(test)]
mod tests;
