//! A table's range partitions, derived from its tablets, and the rows that
//! describe their bounds: what it takes to describe an existing table as
//! the [`TableBuilder`](crate::TableBuilder) that would create it.
//!
//! The master does not list a table's range partitions, so they are
//! derived from its tablets: each tablet's partition key is one 4-byte
//! bucket per hash dimension of its range's hash schema followed by the
//! encoded range key, and the tablets of one range share its range keys.
//! The bounds come out normalized (inclusive lower, exclusive upper), which
//! is how the tablets store them, so a table created from them covers
//! exactly the same keys whatever bound types the original was created
//! with.

use std::collections::BTreeMap;

use super::bounds::{split_partition_key, BoundaryConvention, Partition};
use super::key::{decode_columns, encode_range_bound};
use super::schema::HashDimension;
use super::PartitionSchema;
use crate::schema::{Row, Schema};
use crate::write::OpType;

/// One range partition of a table, derived from its tablets
/// ([`KuduClient::range_partitions`](crate::KuduClient::range_partitions)).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
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

impl RangePartition {
    /// The range `[lower_key, upper_key)` (encoded range keys, empty =
    /// unbounded) hashed by `hash_schema`: one tablet per bucket
    /// combination.
    pub fn new(lower_key: Vec<u8>, upper_key: Vec<u8>, hash_schema: Vec<HashDimension>) -> Self {
        let tablets = hash_schema
            .iter()
            .map(|d| d.num_buckets() as usize)
            .product();
        RangePartition {
            lower_key,
            upper_key,
            hash_schema,
            tablets,
        }
    }
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
    check_complete(&ranges)?;
    Ok(ranges)
}

/// Every range has one tablet per bucket combination, and no two overlap.
fn check_complete(ranges: &[RangePartition]) -> Result<(), String> {
    for r in ranges {
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
    Ok(())
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

pub(crate) fn hex(b: &[u8]) -> String {
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
pub(crate) type RangeSpec = (
    (OpType, Row),
    (OpType, Row),
    Option<Vec<(Vec<String>, u32, u32)>>,
);

/// The bound rows (of `schema`) and own hash schema of `r`, a range of a
/// table partitioned by `ps`.
pub(crate) fn range_spec(
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

/// The names of columns `cols` of `schema`.
pub(crate) fn column_names(schema: &Schema, cols: &[usize]) -> Vec<String> {
    cols.iter()
        .map(|&i| schema.columns()[i].name().to_owned())
        .collect()
}

/// `(columns, buckets, seed)` borrowed the way the builders take them.
pub(crate) fn dims_ref(dims: &[(Vec<String>, u32, u32)]) -> Vec<(&[String], u32, u32)> {
    dims.iter()
        .map(|(c, n, seed)| (c.as_slice(), *n, *seed))
        .collect()
}

#[cfg(test)]
mod tests;
