//! STAND-IN for part A (`shardplan`): how many shards a job has and its
//! config for one shard. Deleted when `JobConfig::shards` and
//! `JobConfig::for_shard` land.

use anyhow::Result;
use ferry_engine::config::JobConfig;

/// The job's shard count (`job.shards`).
pub(super) fn shard_count(cfg: &JobConfig) -> u32 {
    let _ = cfg;
    std::env::var("FERRY_STANDIN_SHARDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1)
}

/// The job's config for shard `k`: its own cluster id (so its own job id,
/// checkpoints and lease).
pub(super) fn for_shard(cfg: &JobConfig, k: u32) -> Result<JobConfig> {
    let mut shard = cfg.clone();
    let base = cfg.ha.cluster_id.as_deref().unwrap_or(&cfg.job_name);
    shard.ha.cluster_id = Some(format!("{base}-shard-{k}"));
    Ok(shard)
}
