//! [`PartitionSchemaBuilder`]: a partition schema described by column
//! names, checked when built.

use super::schema::{HashDimension, PartitionSchema};
use crate::row_ops::OpType;
use crate::schema::{Row, Schema};
use crate::{Error, Result};

/// Builds a [`PartitionSchema`] from column names; errors surface in
/// [`build`](Self::build).
#[derive(Debug, Clone)]
pub struct PartitionSchemaBuilder {
    pub(super) schema: Schema,
    pub(super) hash: Vec<NamedHashDimension>,
    pub(super) range: Option<Vec<String>>,
    pub(super) custom: Vec<CustomRangeSpec>,
}

/// A hash dimension by column names: (columns, buckets, seed).
pub(super) type NamedHashDimension = (Vec<String>, u32, u32);

/// A custom-hash-schema range as given to the builder.
pub(super) type CustomRangeSpec = ((OpType, Row), (OpType, Row), Vec<NamedHashDimension>);

impl PartitionSchemaBuilder {
    /// Adds a table-wide hash dimension over `columns`.
    pub fn add_hash_partitions<S: AsRef<str>>(
        mut self,
        columns: &[S],
        num_buckets: u32,
        seed: u32,
    ) -> Self {
        self.hash.push((names(columns), num_buckets, seed));
        self
    }

    /// Sets the range columns (default: all key columns except an
    /// auto-incrementing one; an empty list means no range partitioning).
    pub fn set_range_partition_columns<S: AsRef<str>>(mut self, columns: &[S]) -> Self {
        self.range = Some(names(columns));
        self
    }

    /// Adds a range [lower, upper) with its own hash dimensions given as
    /// (columns, buckets, seed).
    pub fn add_range_with_hash_schema<S: AsRef<str>>(
        mut self,
        lower: (OpType, Row),
        upper: (OpType, Row),
        hash: &[(&[S], u32, u32)],
    ) -> Self {
        let hash = hash.iter().map(|(c, n, s)| (names(c), *n, *s)).collect();
        self.custom.push((lower, upper, hash));
        self
    }

    /// Validates and builds.
    pub fn build(self) -> Result<PartitionSchema> {
        let schema = &self.schema;
        let idx = |cols: &[String]| -> Result<Vec<usize>> {
            cols.iter()
                .map(|n| {
                    schema
                        .index_of(n)
                        .ok_or_else(|| Error::InvalidArgument(format!("unknown column '{n}'")))
                })
                .collect()
        };
        let dims = |h: &[NamedHashDimension]| -> Result<Vec<HashDimension>> {
            h.iter()
                .map(|(c, n, s)| Ok(HashDimension::new(idx(c)?, *n, *s)))
                .collect()
        };
        let range = match &self.range {
            Some(r) => idx(r)?,
            None => (0..schema.num_key_columns())
                .filter(|&i| !schema.columns()[i].is_auto_incrementing())
                .collect(),
        };
        let mut ps = PartitionSchema::new(schema, dims(&self.hash)?, range)?;
        for (lower, upper, hash) in self.custom {
            ps.add_range_with_hash_schema(lower, upper, dims(&hash)?)?;
        }
        Ok(ps)
    }
}

fn names<S: AsRef<str>>(cols: &[S]) -> Vec<String> {
    cols.iter().map(|c| c.as_ref().to_owned()).collect()
}
