//! Shards: a job cut into a fixed number of parts when it is created
//! (`job.shards`), each run as its own HA job (docs/scale-out.md, "What a
//! shard is").
//!
//! Shard `k` of `N` is the job's configuration with its own cluster id
//! (`<cluster-id or job.name>-shard-<k>`, so its own job id, checkpoint
//! chain, savepoints and lease; [`crate::config::JobConfig::for_shard`]) and
//! a [`ShardSpec`]. Which shard owns what is decided here, by rules that
//! never change while a job lives, so every shard decides alone and all of
//! them agree:
//!
//! - a table belongs to shard `stable_hash(table id) mod N`
//!   ([`ShardSpec::owns_table`]): the id, not the name, so a renamed table
//!   stays in its shard and no other shard picks it up under its new name;
//! - a table split by parts (for Kudu: a table with more hash buckets than
//!   `job.shardTabletsOver`, divided by bucket) gives part `i` to shard
//!   `(stable_hash(table id) + i) mod N` ([`ShardSpec::owns_part`]); the
//!   connector says what a part is and which tables are split.
//!
//! A shard's checkpoints record its [`ShardState`] (its spec, the split
//! threshold and the tables it owns), so a restore with another shard
//! count is refused before anything is written.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::connector::TableRef;
use crate::identity::TableId;

/// Shard `index` of `count` (`0 <= index < count`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ShardSpec {
    /// This shard's number, from 0.
    pub index: u32,
    /// How many shards the job has (`job.shards`).
    pub count: u32,
}

impl ShardSpec {
    /// Shard `index` of `count`; `None` when `index >= count`.
    pub fn new(index: u32, count: u32) -> Option<Self> {
        (index < count).then_some(ShardSpec { index, count })
    }

    /// The shard's number as a metrics label value (`"3"`).
    pub fn label(&self) -> String {
        self.index.to_string()
    }

    /// The shard that owns a table with this id when it is not split.
    pub fn table_owner(count: u32, table: &TableId) -> u32 {
        part_owner(count, table, 0)
    }

    /// Whether this shard replicates `table` as a whole (a table that is
    /// not split by parts).
    pub fn owns_table(&self, table: &TableRef) -> bool {
        Self::table_owner(self.count, &table.id) == self.index
    }

    /// Whether this shard owns part `part` (for Kudu: a hash bucket) of a
    /// table split by parts.
    pub fn owns_part(&self, table: &TableId, part: u64) -> bool {
        part_owner(self.count, table, part) == self.index
    }

    /// Whether this shard owns any of the `parts` parts (numbered from 0)
    /// of a table split by parts: always with at least `count` parts.
    pub fn owns_any_part(&self, table: &TableId, parts: u64) -> bool {
        parts >= u64::from(self.count) || (0..parts).any(|p| self.owns_part(table, p))
    }
}

impl fmt::Display for ShardSpec {
    /// `shard 3 of 6`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "shard {} of {}", self.index, self.count)
    }
}

/// The shard owning part `part` of `table`: `(stable_hash(id) + part) mod
/// count` (part 0 is the whole table's owner).
fn part_owner(count: u32, table: &TableId, part: u64) -> u32 {
    let count = u64::from(count.max(1));
    let owner = (stable_hash(table.as_str().as_bytes()) % count + part % count) % count;
    // Below `count`, which is a u32.
    u32::try_from(owner).unwrap_or(0)
}

/// 64-bit FNV-1a of `bytes`: the same on every build and platform (never
/// std's randomized hasher), so every shard computes the same owners.
pub fn stable_hash(bytes: &[u8]) -> u64 {
    const OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
    const PRIME: u64 = 0x0000_0100_0000_01b3;
    bytes.iter().fold(OFFSET, |hash, byte| {
        (hash ^ u64::from(*byte)).wrapping_mul(PRIME)
    })
}

/// What a shard's checkpoints and savepoints record of its place in the
/// job ([`crate::checkpoint::JobState::shard`]).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ShardState {
    /// Which shard of how many.
    pub spec: ShardSpec,
    /// `job.shardTabletsOver` when the state was taken (0: no table split).
    #[serde(default)]
    pub tablets_over: u32,
    /// The source tables the shard replicates (whole or in part), by id.
    #[serde(default)]
    pub tables: Vec<TableId>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(n: usize) -> TableId {
        TableId::new(format!("{n:032x}"))
    }

    #[test]
    fn labels_and_display() {
        let s = ShardSpec::new(3, 6).expect("valid");
        assert_eq!(s.label(), "3");
        assert_eq!(s.to_string(), "shard 3 of 6");
        assert_eq!(ShardSpec::new(6, 6), None);
    }

    #[test]
    fn the_hash_is_fnv1a_and_fixed() {
        // Published FNV-1a 64 values: a change here moves tables between
        // shards of running jobs.
        assert_eq!(stable_hash(b""), 0xcbf29ce484222325);
        assert_eq!(stable_hash(b"a"), 0xaf63dc4c8601ec8c);
        assert_eq!(stable_hash(b"foobar"), 0x85944171f73967e8);
    }

    #[test]
    fn every_table_has_exactly_one_owner() {
        for count in 1..=7 {
            let shards: Vec<ShardSpec> = (0..count)
                .map(|i| ShardSpec::new(i, count).expect("valid"))
                .collect();
            let mut per_shard = vec![0usize; count as usize];
            for n in 0..500 {
                let table = TableRef {
                    id: id(n),
                    name: format!("t{n}"),
                };
                let owners: Vec<u32> = shards
                    .iter()
                    .filter(|s| s.owns_table(&table))
                    .map(|s| s.index)
                    .collect();
                assert_eq!(owners.len(), 1, "{count} shards, table {n}: {owners:?}");
                assert_eq!(owners[0], ShardSpec::table_owner(count, &table.id));
                per_shard[owners[0] as usize] += 1;
                // The same answer every time (no per-process state).
                assert_eq!(ShardSpec::table_owner(count, &table.id), owners[0]);
            }
            // Spread over every shard, roughly evenly.
            let fair = 500 / count as usize;
            assert!(
                per_shard.iter().all(|n| *n > fair / 2),
                "{count} shards: {per_shard:?}"
            );
        }
    }

    #[test]
    fn the_owner_follows_the_id_not_the_name() {
        let before = TableRef {
            id: id(7),
            name: "orders".into(),
        };
        let renamed = TableRef {
            name: "orders_2026".into(),
            ..before.clone()
        };
        for s in (0..5).map(|i| ShardSpec::new(i, 5).expect("valid")) {
            assert_eq!(s.owns_table(&before), s.owns_table(&renamed));
        }
    }

    #[test]
    fn every_part_has_exactly_one_owner_and_parts_go_round() {
        for count in 1..=6u32 {
            let shards: Vec<ShardSpec> = (0..count)
                .map(|i| ShardSpec::new(i, count).expect("valid"))
                .collect();
            for n in 0..50 {
                let table = id(n);
                let first = ShardSpec::table_owner(count, &table);
                for part in 0..20u64 {
                    let owners: Vec<u32> = shards
                        .iter()
                        .filter(|s| s.owns_part(&table, part))
                        .map(|s| s.index)
                        .collect();
                    // Part i goes to the shard i after the table's owner.
                    let expected = (u64::from(first) + part) % u64::from(count);
                    assert_eq!(owners, [expected as u32], "table {n} part {part}");
                }
                for parts in 0..9u64 {
                    for s in &shards {
                        let any = (0..parts).any(|p| s.owns_part(&table, p));
                        assert_eq!(s.owns_any_part(&table, parts), any);
                    }
                }
            }
        }
    }

    #[test]
    fn shard_state_round_trips() {
        let state = ShardState {
            spec: ShardSpec::new(1, 3).expect("valid"),
            tablets_over: 4,
            tables: vec![id(1), id(2)],
        };
        let json = serde_json::to_string(&state).expect("serialize");
        assert_eq!(
            json,
            format!(
                r#"{{"spec":{{"index":1,"count":3}},"tablets_over":4,"tables":["{}","{}"]}}"#,
                id(1),
                id(2)
            )
        );
        let back: ShardState = serde_json::from_str(&json).expect("deserialize");
        assert_eq!(back, state);
    }
}
