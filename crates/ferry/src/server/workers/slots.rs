//! Worker slots: who is a live worker of a sharded job. Slot j
//! (0 ≤ j < shards) is a lease of its own, named like the job's but for
//! the cluster id `<cluster-id>-worker-<j>`, on the job's lease backend. A
//! worker claims the lowest free slot and renews it; the live workers are
//! the slots held now, and [`owned`] divides the shards among them.
//!
//! What another worker's slot looks like is measured as the lease
//! protocol measures a holder ([`Watcher`]): a slot is live while its
//! record changes within a lease duration, dead once it stayed unchanged
//! for a lease duration of successful reads (an unreadable slot keeps its
//! last verdict), free at once when its worker released it.

use crate::run_args::RunArgs;
use anyhow::Result;
use ferry_engine::config::JobConfig;
use ferry_engine::lease::{FailureLog, Holding, Lease, LeaseError, Watcher};
use std::sync::Arc;
use std::time::Duration;

/// The cluster id of slot `j` of the job `cfg` describes.
pub fn slot_cluster_id(cfg: &JobConfig, j: u32) -> String {
    let base = cfg.ha.cluster_id.as_deref().unwrap_or(&cfg.job_name);
    format!("{base}-worker-{j}")
}

/// The shards slot `me` runs when `live` (ascending, containing `me`) are
/// the live slots: shard k belongs to `live[k mod live.len()]`.
pub fn owned(live: &[u32], shards: u32, me: u32) -> Vec<u32> {
    let Some(position) = live.iter().position(|s| *s == me) else {
        return Vec::new();
    };
    let m = live.len() as u32;
    (0..shards).filter(|k| k % m == position as u32).collect()
}

/// Every slot's lease and what this worker has seen of it.
pub struct Slots {
    leases: Vec<Arc<Lease>>,
    watchers: Vec<Watcher>,
    /// Whether the slot was read since its watch began.
    read: Vec<bool>,
    failures: FailureLog,
}

impl Slots {
    /// The `count` slots of `run`'s job; this worker writes `owner` in the
    /// records of the slot it claims.
    pub fn new(run: &RunArgs, count: u32, owner: &str) -> Result<Slots> {
        let mut leases = Vec::new();
        for j in 0..count {
            let mut slot = run.clone();
            slot.config.ha.cluster_id = Some(slot_cluster_id(&run.config, j));
            let job = slot.config.ha_job_id();
            let standby =
                super::super::lease::standby_owned_by(&slot, &[], Some(job), owner.to_string())?;
            leases.push(standby.lease().clone());
        }
        Ok(Slots {
            watchers: leases.iter().map(|_| Watcher::new()).collect(),
            read: vec![false; leases.len()],
            leases,
            failures: FailureLog::default(),
        })
    }

    /// Every slot's lease, by slot.
    pub fn leases(&self) -> Vec<Arc<Lease>> {
        self.leases.clone()
    }

    /// How often the slots are read: half a renew interval.
    pub fn poll_every(&self) -> Duration {
        self.leases.first().map_or(Duration::from_millis(500), |l| {
            (l.renew_interval / 2).max(Duration::from_millis(50))
        })
    }

    /// Where slot `j`'s lease is, for messages.
    pub fn location(&self, j: u32) -> String {
        self.leases
            .get(j as usize)
            .map(|l| l.location())
            .unwrap_or_default()
    }

    /// Reads every slot once. A slot that cannot be read keeps what was
    /// known of it (unknown time is not silence). Fails only when another
    /// job's worker renews a slot: two jobs were given one cluster id.
    pub async fn poll(&mut self) -> Result<(), LeaseError> {
        for (j, lease) in self.leases.iter().enumerate() {
            match self.watchers[j].poll(lease).await {
                Ok(_) => self.read[j] = true,
                Err(e @ LeaseError::OtherJob { .. }) => return Err(e),
                Err(e) => {
                    let text = super::super::lease::chain(&e);
                    if let Some(repeats) = self.failures.due(&text) {
                        tracing::warn!(error = %text, repeats, slot = j, "cannot read a worker slot; retrying");
                    }
                }
            }
        }
        Ok(())
    }

    fn duration(&self, j: usize) -> Duration {
        self.leases[j].duration
    }

    /// The slots held now, ascending; `mine` (held by this worker) always
    /// counts.
    pub fn live(&self, mine: u32) -> Vec<u32> {
        (0..self.leases.len())
            .filter(|&j| {
                j == mine as usize
                    || (self.read[j]
                        && self.watchers[j].newest.as_ref().is_some_and(|r| {
                            !r.is_released() && self.watchers[j].silent_for() < self.duration(j)
                        }))
            })
            .map(|j| j as u32)
            .collect()
    }

    /// The lowest slot free to claim: never written, released, or
    /// unchanged for a lease duration.
    fn free(&self) -> Option<usize> {
        (0..self.leases.len()).find(|&j| {
            self.read[j]
                && match &self.watchers[j].newest {
                    None => true,
                    Some(r) => r.is_released() || self.watchers[j].silent_for() >= self.duration(j),
                }
        })
    }

    /// Waits for a free slot and claims it; never gives up on coordination
    /// (every slot held: this worker waits as a spare), only on a slot
    /// another job renews.
    pub async fn join(&mut self) -> Result<(u32, Holding), LeaseError> {
        let mut said_full = false;
        loop {
            self.poll().await?;
            if let Some(j) = self.free() {
                let lease = self.leases[j].clone();
                match lease.claim(self.watchers[j].newest.as_ref()).await {
                    Ok(Some(held)) => return Ok((j as u32, Holding::new(lease, held))),
                    Ok(None) => {}
                    Err(e) => {
                        let text = super::super::lease::chain(&e);
                        if let Some(repeats) = self.failures.due(&text) {
                            tracing::warn!(error = %text, repeats, slot = j, "cannot claim a worker slot; retrying");
                        }
                    }
                }
                // Someone else's record now, or unknown: watch it afresh.
                self.watchers[j] = Watcher::new();
                self.read[j] = false;
            } else if !said_full && (0..self.leases.len()).all(|j| self.read[j]) {
                said_full = true;
                eprintln!(
                    "ferry: every worker slot ({}) is held; waiting as a spare worker",
                    self.leases.len()
                );
            }
            tokio::time::sleep(self.poll_every()).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shards_go_round_robin_over_the_live_slots() {
        assert_eq!(owned(&[0], 6, 0), vec![0, 1, 2, 3, 4, 5]);
        assert_eq!(owned(&[0, 2], 6, 0), vec![0, 2, 4]);
        assert_eq!(owned(&[0, 2], 6, 2), vec![1, 3, 5]);
        assert_eq!(owned(&[0, 1, 2], 6, 1), vec![1, 4]);
        // Every shard has exactly one owner, whatever the live set.
        for live in [vec![0], vec![1, 3], vec![0, 1, 2], vec![0, 1, 2, 3, 4, 5]] {
            let mut all: Vec<u32> = live.iter().flat_map(|&s| owned(&live, 6, s)).collect();
            all.sort();
            assert_eq!(all, (0..6).collect::<Vec<_>>(), "{live:?}");
        }
        assert!(owned(&[0, 1], 6, 4).is_empty());
    }

    #[test]
    fn slot_names_derive_from_the_cluster_id() {
        let pairs = [
            ("job.sourceMasterAddresses", "a:7051"),
            ("job.sinkMasterAddresses", "b:7051"),
            ("job.tableName", "t"),
            ("job.checkpointsDirectory", "/chk"),
            ("high-availability.type", "lease"),
            ("high-availability.cluster-id", "prod"),
        ];
        let cfg = JobConfig::from_named_pairs(pairs).expect("config");
        assert_eq!(slot_cluster_id(&cfg, 2), "prod-worker-2");
    }
}
