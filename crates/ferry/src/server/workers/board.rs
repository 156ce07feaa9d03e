//! [`ShardBoard`]: a sharded job as any worker sees it, for
//! `GET /ferry/shards` — each slot's and each shard's lease record (who
//! holds it, with the REST address a worker writes into its records), and
//! for the shards this worker runs, their state and lag from its
//! registry.

use crate::api::shards::{ShardOverview, ShardTable, ShardsOverview, SlotOverview};
use crate::run_args::RunArgs;
use crate::server::registry::Registry;
use anyhow::Result;
use ferry_engine::checkpoint::JobId;
use ferry_engine::lease::{Lease, LeaseRecord};
use std::sync::Arc;

/// Every slot's and every shard's lease of one sharded job.
#[derive(Debug)]
pub struct ShardBoard {
    cluster_id: String,
    count: u32,
    slots: Vec<Arc<Lease>>,
    shards: Vec<(JobId, Arc<Lease>)>,
    rest_url: Option<String>,
}

/// A worker's name in lease records: `host/pid`, then its REST URL.
pub fn split_owner(owner: &str) -> (String, Option<String>) {
    match owner.split_once(' ') {
        Some((who, url)) => (who.to_string(), Some(url.to_string())),
        None => (owner.to_string(), None),
    }
}

impl ShardBoard {
    /// The board of `run`'s job of `count` shards; `slots` are its worker
    /// slots' leases; `rest_url` this worker's REST API.
    pub fn new(
        run: &RunArgs,
        count: u32,
        slots: Vec<Arc<Lease>>,
        rest_url: Option<String>,
    ) -> Result<Self> {
        let mut shards = Vec::new();
        for k in 0..count {
            let mut shard = run.clone();
            shard.config = run.config.for_shard(k)?;
            let job = shard.config.ha_job_id();
            let standby = super::super::lease::standby_owned_by(
                &shard,
                &[],
                Some(job),
                super::super::lease::owner(),
            )?;
            shards.push((job, standby.lease().clone()));
        }
        let cluster_id = run
            .config
            .ha
            .cluster_id
            .clone()
            .unwrap_or_else(|| run.config.job_name.clone());
        Ok(ShardBoard {
            cluster_id,
            count,
            slots,
            shards,
            rest_url,
        })
    }

    /// Reads every lease once (an unreadable one shows no owner) and adds
    /// what `registry` knows of the shards running here.
    pub async fn overview(&self, registry: &Registry) -> ShardsOverview {
        let now = ferry_engine::time::now_ms();
        let mut workers = Vec::new();
        for (j, lease) in self.slots.iter().enumerate() {
            let record = lease.newest().await.ok().flatten();
            let (owner, rest_url) = owner_of(record.as_ref());
            workers.push(SlotOverview {
                slot: j as u32,
                owner,
                rest_url,
                generation: record.as_ref().map_or(0, |r| r.generation),
                released: record.as_ref().is_some_and(|r| r.is_released()),
                renewed_ms_ago: record.as_ref().map(|r| now.saturating_sub(r.at_ms)),
            });
        }
        let mut shards = Vec::new();
        for (k, (job, lease)) in self.shards.iter().enumerate() {
            let record = lease.newest().await.ok().flatten();
            let (owner, rest_url) = owner_of(record.as_ref());
            // The newest generation run here, if it still runs.
            let entry = registry
                .jobs()
                .into_iter()
                .rev()
                .find(|e| e.id == *job && !e.status().is_terminal());
            let view = entry.as_ref().map(|e| e.view());
            shards.push(ShardOverview {
                index: k as u32,
                job_id: job.to_string(),
                owner,
                rest_url,
                generation: record.as_ref().map_or(0, |r| r.generation),
                released: record.as_ref().is_some_and(|r| r.is_released()),
                here: view.is_some(),
                state: view.as_ref().map(|v| v.state().to_string()),
                lag_ms: view.as_ref().and_then(|v| v.lag_ms()),
                tables: view
                    .as_ref()
                    .map(|v| {
                        v.tables
                            .iter()
                            .map(|t| ShardTable {
                                name: t.table_name.clone(),
                                lag_ms: (t.last_end_timestamp_ms > 0)
                                    .then(|| v.now_ms.saturating_sub(t.last_end_timestamp_ms)),
                            })
                            .collect()
                    })
                    .unwrap_or_default(),
            });
        }
        ShardsOverview {
            cluster_id: self.cluster_id.clone(),
            count: self.count,
            worker: self.rest_url.clone(),
            workers,
            shards,
        }
    }
}

fn owner_of(record: Option<&LeaseRecord>) -> (Option<String>, Option<String>) {
    match record {
        Some(r) => {
            let (who, url) = split_owner(r.holder());
            (Some(who), url)
        }
        None => (None, None),
    }
}
