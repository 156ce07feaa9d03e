//! The Kudu side of a job cut into shards (`job.shards`,
//! [`ferry_engine::shard`]): which tables and tablets a shard replicates.
//!
//! A table belongs to one shard ([`ShardSpec::owns_table`]) unless its
//! hash partitioning has more buckets than `job.shardTabletsOver`; such a
//! table is split by hash bucket: the tablets of bucket `b` (every range)
//! belong to part `b` ([`ShardSpec::owns_part`]). A tablet's bucket is the
//! head of its partition key, so it never changes: ranges added or
//! dropped, tablets moved or a restart leave every tablet where it was,
//! and every shard computes the same division alone. A table with range
//! partitions only is never split (its tablets come and go with its
//! ranges, with nothing fixed to divide them by).

use ferry_engine::config::JobConfig;
use ferry_engine::identity::TableId;
use ferry_engine::shard::ShardSpec;
use kudu_client::KuduTable;

/// The tablets one shard replicates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ShardTablets {
    /// Which shard.
    pub spec: ShardSpec,
    /// `job.shardTabletsOver`: a table with more hash buckets is split;
    /// 0: none is.
    pub tablets_over: u32,
}

impl ShardTablets {
    /// The shard `config` runs, if any ([`JobConfig::for_shard`]).
    pub fn of(config: &JobConfig) -> Option<Self> {
        config.shard.map(|spec| ShardTablets {
            spec,
            tablets_over: config.shard_tablets_over,
        })
    }

    /// Whether `table` is split over the shards (by hash bucket).
    pub fn is_split(&self, table: &KuduTable) -> bool {
        self.tablets_over > 0 && buckets(&dimensions(table)) > u64::from(self.tablets_over)
    }

    /// Whether this shard replicates any tablet of `table`.
    pub fn owns_any(&self, table: &KuduTable) -> bool {
        let id = TableId::new(table.id());
        if self.is_split(table) {
            self.spec.owns_any_part(&id, buckets(&dimensions(table)))
        } else {
            ShardSpec::table_owner(self.spec.count, &id) == self.spec.index
        }
    }

    /// Whether this shard replicates the tablet of `table` whose partition
    /// key starts with `partition_key_start`.
    pub fn owns_tablet(&self, table: &KuduTable, partition_key_start: &[u8]) -> bool {
        let id = TableId::new(table.id());
        if self.is_split(table) {
            let part = bucket_of(&dimensions(table), partition_key_start);
            self.spec.owns_part(&id, part)
        } else {
            ShardSpec::table_owner(self.spec.count, &id) == self.spec.index
        }
    }
}

/// The bucket counts of `table`'s table-wide hash dimensions, in order.
fn dimensions(table: &KuduTable) -> Vec<u32> {
    table
        .partition_schema()
        .hash_schema()
        .iter()
        .map(|d| d.num_buckets())
        .collect()
}

/// How many hash buckets (tablets per range) the dimensions make.
fn buckets(dims: &[u32]) -> u64 {
    dims.iter()
        .fold(1u64, |n, d| n.saturating_mul(u64::from(*d)))
}

/// A tablet's bucket number (mixed radix over the dimensions) from its
/// partition key, which starts with one big-endian `u32` bucket per hash
/// dimension; missing bytes (the table's first tablet may start at the
/// empty key) are zeros.
fn bucket_of(dims: &[u32], partition_key_start: &[u8]) -> u64 {
    dims.iter().enumerate().fold(0u64, |n, (i, d)| {
        let mut word = [0u8; 4];
        for (j, b) in word.iter_mut().enumerate() {
            *b = partition_key_start.get(i * 4 + j).copied().unwrap_or(0);
        }
        n.saturating_mul(u64::from(*d))
            .saturating_add(u64::from(u32::from_be_bytes(word)))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(buckets: &[u32], range: &[u8]) -> Vec<u8> {
        let mut k: Vec<u8> = buckets.iter().flat_map(|b| b.to_be_bytes()).collect();
        k.extend_from_slice(range);
        k
    }

    #[test]
    fn a_tablet_s_bucket_is_the_head_of_its_partition_key() {
        assert_eq!(bucket_of(&[], b"range"), 0);
        assert_eq!(bucket_of(&[8], &key(&[5], b"r")), 5);
        assert_eq!(bucket_of(&[8], b""), 0);
        // Two dimensions: bucket (2, 3) of 4 x 5 is 2 * 5 + 3.
        assert_eq!(bucket_of(&[4, 5], &key(&[2, 3], b"r")), 13);
        assert_eq!(bucket_of(&[4, 5], &key(&[0], b"")), 0);
        assert_eq!(buckets(&[4, 5]), 20);
        assert_eq!(buckets(&[]), 1);
    }

    #[test]
    fn every_tablet_of_a_split_table_has_one_owner_whatever_its_range() {
        let dims = [3u32, 4];
        let id = TableId::new("0123456789abcdef0123456789abcdef");
        for count in 1..=7u32 {
            let shards: Vec<ShardSpec> = (0..count)
                .map(|i| ShardSpec::new(i, count).expect("valid"))
                .collect();
            let mut seen = vec![0u32; count as usize];
            for a in 0..3u32 {
                for b in 0..4u32 {
                    // The same bucket in two ranges goes to one shard.
                    let owners = |range: &[u8]| -> Vec<u32> {
                        let part = bucket_of(&dims, &key(&[a, b], range));
                        shards
                            .iter()
                            .filter(|s| s.owns_part(&id, part))
                            .map(|s| s.index)
                            .collect()
                    };
                    let first = owners(b"2025");
                    assert_eq!(first.len(), 1);
                    assert_eq!(owners(b"2026"), first);
                    seen[first[0] as usize] += 1;
                }
            }
            // 12 buckets dealt round: every shard gets 12 / count or one more.
            let fair = 12 / count;
            assert!(
                seen.iter().all(|n| *n == fair || *n == fair + 1),
                "{count}: {seen:?}"
            );
        }
    }
}
