//! `GET /ferry/shards`: a sharded job (`job.shards` > 1) as one worker
//! sees it — every worker slot and every shard with the worker that holds
//! its lease; the shards this worker runs carry their state and lag.
//! `ferry list` asks each owner for its own shards' numbers.

use serde::{Deserialize, Serialize};

/// The whole sharded job.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ShardsOverview {
    /// `high-availability.cluster-id` (or the job name): the base of the
    /// shard and slot names.
    pub cluster_id: String,
    /// `job.shards`.
    pub count: u32,
    /// The REST API of the worker that answered.
    pub worker: Option<String>,
    /// Every worker slot.
    pub workers: Vec<SlotOverview>,
    /// Every shard, by index.
    pub shards: Vec<ShardOverview>,
}

/// One worker slot, from its lease's newest record.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct SlotOverview {
    /// The slot number.
    pub slot: u32,
    /// Its newest record's writer (`host/pid`), if any.
    pub owner: Option<String>,
    /// That worker's REST API.
    pub rest_url: Option<String>,
    /// The slot lease's generation.
    pub generation: u64,
    /// Whether its worker released it (left).
    pub released: bool,
    /// How long ago the record was written, by the writer's clock.
    pub renewed_ms_ago: Option<u64>,
}

/// One shard.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ShardOverview {
    /// The shard's index.
    pub index: u32,
    /// Its own job id.
    pub job_id: String,
    /// Who holds its lease (`host/pid`), from the newest record.
    pub owner: Option<String>,
    /// That worker's REST API.
    pub rest_url: Option<String>,
    /// The shard lease's generation.
    pub generation: u64,
    /// Whether its last holder released it (handed over, not yet taken).
    pub released: bool,
    /// Whether the worker that answered runs it.
    pub here: bool,
    /// Its job's state, where it runs here (`RUNNING`, ...).
    pub state: Option<String>,
    /// now − its last window end, where it runs here.
    pub lag_ms: Option<u64>,
    /// Each table's lag, where it runs here.
    pub tables: Vec<ShardTable>,
}

/// One table of a shard.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ShardTable {
    /// The source table.
    pub name: String,
    /// now − its last window end.
    pub lag_ms: Option<u64>,
}
