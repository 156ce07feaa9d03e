//! [`Partition`]: the partition-key range one tablet covers, and the two
//! [`BoundaryConvention`]s servers lay tablet boundaries out by
//! (docs/kudu-protocol.md#tablet-boundaries).

use super::schema::{HashDimension, BUCKET_SIZE};
#[cfg(test)]
use crate::pb;
use crate::{Error, Result};

/// How a server lays out tablet boundaries
/// (docs/kudu-protocol.md#tablet-boundaries). Tables keep the convention they
/// were created under, so a client must accept both; it only matters when
/// computing boundaries (tests, mock servers) — routing and lookups just
/// compare byte strings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BoundaryConvention {
    /// Kudu ≤ 1.16: a continuous key space. A start key with an unbounded
    /// range drops trailing zero buckets (so the first tablet starts at
    /// the empty key); an unbounded range end becomes "next bucket" with
    /// carry into earlier dimensions, and empty after the last bucket.
    Legacy,
    /// Kudu ≥ 1.17 (range-specific hash schemas): start keys keep the full
    /// bucket prefix; an unbounded range end increments only the last
    /// dimension's bucket, with no carry (so 2×2 buckets (0,1) ends at
    /// (0,2)). The key space has holes.
    RangeSpecific,
}

/// The partition-key range of one tablet (from `PartitionPB`).
///
/// `partition_key_start` is inclusive, `partition_key_end` exclusive; empty
/// start is −∞ and empty end is +∞. The range-key parts are what follows
/// the bucket prefix (empty when the key is no longer than the prefix),
/// which reads correctly under both [`BoundaryConvention`]s: a truncated
/// or "next bucket" key has no range part and means an unbounded range.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Partition {
    partition_key_start: Vec<u8>,
    partition_key_end: Vec<u8>,
    hash_buckets: Vec<u32>,
    range_key_start: Vec<u8>,
    range_key_end: Vec<u8>,
}

impl Partition {
    /// A partition from its raw boundaries and bucket numbers.
    pub fn new(
        partition_key_start: Vec<u8>,
        partition_key_end: Vec<u8>,
        hash_buckets: Vec<u32>,
    ) -> Self {
        let prefix = BUCKET_SIZE * hash_buckets.len();
        let range = |k: &[u8]| k.get(prefix..).map(<[u8]>::to_vec).unwrap_or_default();
        Partition {
            range_key_start: range(&partition_key_start),
            range_key_end: range(&partition_key_end),
            partition_key_start,
            partition_key_end,
            hash_buckets,
        }
    }

    /// Reads a `PartitionPB`.
    #[cfg(test)]
    pub(crate) fn from_pb(pb: &pb::PartitionPb) -> Result<Partition> {
        let buckets = pb
            .hash_buckets
            .iter()
            .map(|&b| {
                u32::try_from(b).map_err(|_| Error::Protocol {
                    addr: "unknown peer".into(),
                    message: format!("negative hash bucket {b} in PartitionPB"),
                })
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Partition::new(
            pb.partition_key_start.clone().unwrap_or_default(),
            pb.partition_key_end.clone().unwrap_or_default(),
            buckets,
        ))
    }

    /// Writes a `PartitionPB` (empty keys are left out, as servers do).
    #[cfg(test)]
    pub(crate) fn to_pb(&self) -> pb::PartitionPb {
        let opt = |k: &Vec<u8>| (!k.is_empty()).then(|| k.clone());
        pb::PartitionPb {
            // Bucket numbers are < num_buckets ≤ i32::MAX.
            hash_buckets: self.hash_buckets.iter().map(|&b| b as i32).collect(),
            partition_key_start: opt(&self.partition_key_start),
            partition_key_end: opt(&self.partition_key_end),
        }
    }

    /// Computes a tablet's boundaries from its buckets (one per dimension
    /// in `dims`) and range [`range_start`, `range_end`) under
    /// `convention`.
    pub fn with_boundaries(
        dims: &[HashDimension],
        hash_buckets: &[u32],
        range_start: &[u8],
        range_end: &[u8],
        convention: BoundaryConvention,
    ) -> Result<Partition> {
        if dims.len() != hash_buckets.len()
            || dims
                .iter()
                .zip(hash_buckets)
                .any(|(d, &b)| b >= d.num_buckets())
        {
            return Err(Error::InvalidArgument(format!(
                "hash buckets {hash_buckets:?} do not fit the hash schema"
            )));
        }
        let prefix =
            |buckets: &[u32]| -> Vec<u8> { buckets.iter().flat_map(|b| b.to_be_bytes()).collect() };
        let mut start = prefix(hash_buckets);
        if range_start.is_empty() && convention == BoundaryConvention::Legacy {
            // Drop trailing zero buckets.
            let keep = hash_buckets
                .iter()
                .rposition(|&b| b != 0)
                .map_or(0, |p| p + 1);
            start.truncate(BUCKET_SIZE * keep);
        } else {
            start.extend_from_slice(range_start);
        }
        let end = if !range_end.is_empty() {
            let mut e = prefix(hash_buckets);
            e.extend_from_slice(range_end);
            e
        } else {
            match convention {
                BoundaryConvention::RangeSpecific => match hash_buckets.split_last() {
                    Some((last, rest)) => {
                        let mut next = rest.to_vec();
                        next.push(last + 1);
                        prefix(&next)
                    }
                    None => Vec::new(),
                },
                BoundaryConvention::Legacy => {
                    // Increment the bucket number as a mixed-radix counter;
                    // overflowing every dimension means +∞.
                    let mut next = hash_buckets.to_vec();
                    loop {
                        match next.pop() {
                            None => break Vec::new(),
                            Some(b) if b + 1 < dims[next.len()].num_buckets() => {
                                next.push(b + 1);
                                break prefix(&next);
                            }
                            Some(_) => {}
                        }
                    }
                }
            }
        };
        Ok(Partition::new(start, end, hash_buckets.to_vec()))
    }

    /// Inclusive start partition key (empty = −∞).
    pub fn partition_key_start(&self) -> &[u8] {
        &self.partition_key_start
    }
    /// Exclusive end partition key (empty = +∞).
    pub fn partition_key_end(&self) -> &[u8] {
        &self.partition_key_end
    }
    /// The tablet's bucket per hash dimension.
    pub fn hash_buckets(&self) -> &[u32] {
        &self.hash_buckets
    }
    /// Range part of the start key (empty = unbounded).
    pub fn range_key_start(&self) -> &[u8] {
        &self.range_key_start
    }
    /// Range part of the end key (empty = unbounded).
    pub fn range_key_end(&self) -> &[u8] {
        &self.range_key_end
    }
    /// Whether `partition_key` falls in [start, end).
    pub fn contains_partition_key(&self, partition_key: &[u8]) -> bool {
        partition_key >= self.partition_key_start.as_slice()
            && (self.partition_key_end.is_empty()
                || partition_key < self.partition_key_end.as_slice())
    }
}

/// Splits a partition key into its bucket prefix and range key, given the
/// number of hash dimensions that apply (for `PartitionKeyPB`). A key no
/// longer than the prefix has an empty range part.
pub(crate) fn split_partition_key(key: &[u8], num_hash_dimensions: usize) -> (&[u8], &[u8]) {
    let n = (BUCKET_SIZE * num_hash_dimensions).min(key.len());
    key.split_at(n)
}
