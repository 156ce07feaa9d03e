//! `kill -9` of one worker and the takeover of its shards by the others.

use super::workers::{takeovers_since, Group, ShardTakeover};
use anyhow::{bail, Result};
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

/// One kill and what followed.
#[derive(Debug, Clone, Serialize)]
pub struct TakeoverRun {
    pub killed: String,
    /// The shards the killed worker ran.
    pub killed_shards: Vec<u32>,
    /// Kill → every shard running on a live worker with a window completed
    /// after the kill (and the lease generations then stable for 3 s).
    pub all_running_s: f64,
    /// Every takeover line after the kill: the dead worker's shards
    /// (`lease silent`) and the survivors' hand-overs as the shards are
    /// shared out again (`lease released`).
    pub takeovers: Vec<ShardTakeover>,
    /// `ferry_ha_takeover_ms` of the survivors, by `shard` label.
    pub takeover_metric_ms: BTreeMap<String, f64>,
}

/// Kills the worker that runs the most shards and waits until every shard
/// runs again.
pub async fn kill_one(group: &mut Group, tables: &[String]) -> Result<TakeoverRun> {
    let running = group.running().await;
    let mut per_worker = vec![0usize; group.workers.len()];
    for r in &running {
        per_worker[r.worker] += 1;
    }
    let victim = (0..per_worker.len())
        .max_by_key(|&i| (per_worker[i], std::cmp::Reverse(i)))
        .unwrap_or(0);
    let mut killed_shards: Vec<u32> = running
        .iter()
        .filter(|r| r.worker == victim)
        .map(|r| r.view.index)
        .collect();
    killed_shards.sort_unstable();
    let worker = group.workers.remove(victim);
    let killed = worker.name.clone();
    let killed_at = Instant::now();
    let kill_ms = ferry_engine::time::now_ms();
    worker.ferry.kill().await?;
    println!("    killed {killed} (kill -9), which ran shards {killed_shards:?}");
    wait_taken(group, &killed_shards, killed_at).await?;
    let all_running_s = wait_stable(group, tables, kill_ms, killed_at).await?;
    let takeovers = takeovers_since(&group.rto_lines(), killed_at, Some(killed_at));
    let mut takeover_metric_ms = BTreeMap::new();
    for w in &group.workers {
        if let Some(addr) = &w.ferry.metrics_addr {
            if let Ok(body) = crate::kudu::http_get(addr, "/metrics").await {
                takeover_metric_ms.extend(takeover_series(&body));
            }
        }
    }
    Ok(TakeoverRun {
        killed,
        killed_shards,
        all_running_s,
        takeovers,
        takeover_metric_ms,
    })
}

/// Waits until a survivor printed a takeover line for each of `shards`.
async fn wait_taken(group: &Group, shards: &[u32], killed_at: Instant) -> Result<()> {
    let deadline = killed_at + Duration::from_secs(180);
    loop {
        let taken: BTreeSet<u32> = takeovers_since(&group.rto_lines(), killed_at, None)
            .iter()
            .map(|t| t.shard)
            .collect();
        if shards.iter().all(|s| taken.contains(s)) {
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!(
                "the killed worker's shards {shards:?} were not all taken over (taken: {taken:?})"
            );
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Waits until every shard runs with a window after `kill_ms` and no lease
/// generation changes for 3 s (hand-overs between the survivors done);
/// seconds from the kill to the first such moment.
async fn wait_stable(
    group: &Group,
    tables: &[String],
    kill_ms: u64,
    killed_at: Instant,
) -> Result<f64> {
    for _ in 0..20 {
        let at = group
            .wait_caught_up(tables, kill_ms, Duration::from_secs(120))
            .await?;
        let before = generations(group).await;
        tokio::time::sleep(Duration::from_secs(3)).await;
        let after = generations(group).await;
        if before == after && after.len() == group.shards as usize {
            return Ok(at.saturating_duration_since(killed_at).as_secs_f64());
        }
    }
    bail!("the shards kept moving between the workers after the kill")
}

/// Each running shard's lease generation.
async fn generations(group: &Group) -> BTreeMap<u32, u64> {
    group
        .running()
        .await
        .into_iter()
        .map(|r| (r.view.index, r.view.generation))
        .collect()
}

/// `ferry_ha_takeover_ms` series of a Prometheus text, by `shard` label.
fn takeover_series(body: &str) -> Vec<(String, f64)> {
    body.lines()
        .filter(|l| l.starts_with("ferry_ha_takeover_ms{"))
        .filter_map(|l| {
            let shard = l.split("shard=\"").nth(1)?.split('"').next()?.to_string();
            let v = l.rsplit(' ').next()?.parse().ok()?;
            Some((shard, v))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_takeover_metric() {
        let body = "# TYPE ferry_ha_takeover_ms gauge\n\
                    ferry_ha_takeover_ms{job_id=\"a\",job_name=\"j\",shard=\"4\"} 5210\n\
                    ferry_ha_takeover_ms_other{shard=\"1\"} 3\n";
        assert_eq!(takeover_series(body), vec![("4".to_string(), 5210.0)]);
    }
}
