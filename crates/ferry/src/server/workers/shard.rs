//! One shard's life in a worker: claim the shard's own lease (at once if
//! nobody held it, when its holder released it, or once it lapsed), find
//! the shard's newest complete state, run the shard's job under the
//! lease's fence; when the fence closes, stop and claim again; when the
//! worker hands the shard over (or stops), stop the job with a savepoint
//! (a cancel when no savepoint directory is set: checkpoints are kept) and
//! release the lease at once, so the next owner need not wait a lease
//! duration.

use super::super::lease::{chain, standby_owned_by};
use super::super::rto::Rto;
use super::super::run::App;
use super::super::submit::StartExtras;
use crate::run_args::RunArgs;
use crate::server::registry::JobEntry;
use anyhow::Result;
use ferry_engine::lease::{FailureLog, Held, Holding, Lease, Standby, Watcher};
use ferry_engine::JobStatus;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

/// How a shard's run in this worker ended.
pub(super) enum ShardEnd {
    /// Handed over or stopped on the worker's request.
    Stopped,
    /// The shard's job ended on its own (finished, cancelled or stopped
    /// over REST, failed for good).
    Ended(JobStatus),
}

/// A claimed shard lease and when its previous holder was last seen.
struct Claimed {
    held: Held,
    /// The last renewal seen of the previous holder: where the takeover
    /// began.
    began: Instant,
    silent: Duration,
    detected: Instant,
    /// Whether the previous holder released it.
    released: bool,
}

/// Runs shard `shard` of `run`'s job in `app` until `stop` is cancelled
/// or its job ends on its own; `owner` names this worker in the lease.
// Long on purpose: the shard's whole life (claim, find, run, stop) reads best in one place.
pub(super) async fn run_shard(
    app: &App,
    run: &RunArgs,
    shard: u32,
    owner: String,
    watcher: Watcher,
    stop: CancellationToken,
) -> Result<ShardEnd> {
    let mut run = run.clone();
    run.config = run.config.for_shard(shard)?;
    let job = run.config.ha_job_id();
    let from = [run.config.checkpoints_directory.clone()];
    let mut standby = standby_owned_by(&run, &from, Some(job), owner)?;
    let lease = standby.lease().clone();
    let mut warm = Some(watcher);
    loop {
        let watcher = warm.take().unwrap_or_default();
        let claimed = tokio::select! {
            c = claim(&lease, shard, watcher) => c,
            _ = stop.cancelled() => return Ok(ShardEnd::Stopped),
        };
        let generation = claimed.held.generation;
        let mut rto = Rto::printed_for(format!("shard {shard}"));
        if generation > 1 {
            rto.step(
                if claimed.released {
                    "lease released"
                } else {
                    "lease silent"
                },
                claimed.silent,
            );
        }
        rto.step("claim", claimed.detected.elapsed());
        let holding = Holding::new(lease.clone(), claimed.held);
        eprintln!("ferry: shard {shard}: holding generation {generation} of its lease");
        let t = Instant::now();
        let restore = tokio::select! {
            found = newest_state(&mut standby, &holding) => found,
            _ = stop.cancelled() => {
                hand_back(holding, shard).await;
                return Ok(ShardEnd::Stopped);
            }
        };
        let Some(restore) = restore else {
            holding.release();
            continue;
        };
        rto.step("find", t.elapsed());
        let extras = StartExtras {
            restore,
            fence: holding.fence.clone(),
            job_id: Some(job),
            ..StartExtras::default()
        };
        let entry = match app.start_job(run.clone(), extras).await {
            Ok(entry) => entry,
            Err(e) if holding.fence.check().is_err() => {
                eprintln!(
                    "ferry: shard {shard}: generation {generation} could not start ({})",
                    crate::error_line(&e)
                );
                holding.release();
                continue;
            }
            Err(e) => {
                holding.release();
                return Err(e);
            }
        };
        if generation > 1 {
            rto.report_when_first_window_completes(&entry, claimed.began, false);
        }
        tokio::select! {
            status = entry.handle.wait() => {
                let fenced = holding.fence.check().err();
                holding.release();
                app.settle(&entry).await;
                match fenced {
                    Some(f) if !matches!(status, JobStatus::Finished { .. }) => {
                        entry.suspend();
                        eprintln!("ferry: shard {shard}: {f}; the shard's job stopped");
                    }
                    _ => return Ok(ShardEnd::Ended(status)),
                }
            }
            fenced = holding.fenced() => {
                entry.handle.cancel().await;
                entry.handle.wait().await;
                entry.suspend();
                holding.release();
                eprintln!("ferry: shard {shard}: {fenced}; the shard's job stopped: no further checkpoint or row from generation {generation}");
            }
            _ = stop.cancelled() => {
                stop_job(&entry, shard).await;
                entry.suspend();
                hand_back(holding, shard).await;
                return Ok(ShardEnd::Stopped);
            }
        }
    }
}

/// Stops a shard's job for its next owner: with a savepoint where a
/// directory is set, else a cancel (its checkpoints are kept).
async fn stop_job(entry: &Arc<JobEntry>, shard: u32) {
    if entry.savepoint_dir.is_some() {
        match entry.handle.stop_with_savepoint(None).await {
            Ok(path) => crate::say!("shard {shard}: Savepoint completed. Path: {path}"),
            Err(e) => {
                eprintln!("ferry: shard {shard}: savepoint failed: {e}; cancelling (checkpoints are kept)");
                entry.handle.cancel().await;
            }
        }
    } else {
        entry.handle.cancel().await;
    }
    entry.handle.wait().await;
}

/// Releases the shard's lease (best effort: if the release cannot be
/// written, the lease lapses after its duration).
async fn hand_back(holding: Holding, shard: u32) {
    let generation = holding.generation;
    match holding.hand_back().await {
        Ok(true) => {
            eprintln!("ferry: shard {shard}: released generation {generation} of its lease")
        }
        Ok(false) => {}
        Err(e) => {
            tracing::warn!(error = %chain(&e), shard, "cannot release the shard's lease; it lapses after its duration")
        }
    }
}

/// Waits until the shard's lease is free (never held, released, or
/// unchanged for a lease duration, as `watcher` measures from what it saw
/// so far) and claims it; never gives up.
async fn claim(lease: &Arc<Lease>, shard: u32, mut watcher: Watcher) -> Claimed {
    let poll = (lease.renew_interval / 2).max(Duration::from_millis(50));
    let mut failures = FailureLog::default();
    loop {
        match watcher.poll(lease).await {
            Ok(_) => {
                let newest = watcher.newest.as_ref();
                let released = newest.is_some_and(|r| r.is_released());
                let free = newest.is_none_or(|r| r.is_released())
                    || watcher.silent_for() >= lease.duration;
                if free {
                    let detected = Instant::now();
                    match lease.claim(newest).await {
                        Ok(Some(held)) => {
                            return Claimed {
                                held,
                                began: watcher.seen_at(),
                                silent: watcher.silent_for(),
                                detected,
                                released,
                            }
                        }
                        Ok(None) => {}
                        Err(e) => {
                            let text = chain(&e);
                            if let Some(repeats) = failures.due(&text) {
                                tracing::warn!(error = %text, repeats, shard, "cannot claim the shard's lease; retrying");
                            }
                        }
                    }
                    watcher = Watcher::new();
                }
            }
            Err(e) => {
                let text = chain(&e);
                if let Some(repeats) = failures.due(&text) {
                    tracing::warn!(error = %text, repeats, shard, "cannot read the shard's lease; retrying");
                }
            }
        }
        tokio::time::sleep(poll).await;
    }
}

/// The shard's newest complete state (`Some(None)`: none yet, start with
/// a snapshot), searched until found; `None` when the lease was lost
/// meanwhile.
async fn newest_state(
    standby: &mut Standby,
    holding: &Holding,
) -> Option<Option<ferry_engine::checkpoint::LoadedState>> {
    let mut failures = FailureLog::default();
    loop {
        match standby.find_newest().await {
            Ok(search) => {
                if let Some(found) = &search.newest {
                    eprintln!("ferry: resuming from {}", found.location);
                }
                return Some(search.newest.map(|f| f.loaded()));
            }
            Err(_) if holding.fence.check().is_err() => return None,
            Err(e) => {
                let text = chain(&e);
                if let Some(repeats) = failures.due(&text) {
                    tracing::warn!(error = %text, repeats, "cannot search for the shard's state; retrying");
                }
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
        }
    }
}

/// Every shard's lease, watched by a worker while it does not run the
/// shard. When a shard becomes the worker's own (a dead worker's slot
/// lapsed), its last holder's silence is then measured already: the shard
/// is claimed at once rather than after another lease duration, and its
/// takeover time counts from the last renewal seen.
pub(super) struct ShardWatch {
    leases: Vec<Arc<Lease>>,
    watchers: Vec<Option<Watcher>>,
}

impl ShardWatch {
    /// The leases of the `shards` shards of `run`'s job.
    pub(super) fn new(run: &RunArgs, shards: u32, owner: &str) -> Result<ShardWatch> {
        let mut leases = Vec::new();
        for k in 0..shards {
            let mut shard = run.clone();
            shard.config = shard.config.for_shard(k)?;
            let job = shard.config.ha_job_id();
            let standby = standby_owned_by(&shard, &[], Some(job), owner.to_string())?;
            leases.push(standby.lease().clone());
        }
        Ok(ShardWatch {
            watchers: leases.iter().map(|_| None).collect(),
            leases,
        })
    }

    /// Reads, at once, the lease of every shard `running` says this worker
    /// does not run. A failed read only leaves its time unknown.
    pub(super) async fn poll(&mut self, running: impl Fn(u32) -> bool) {
        let reads = self
            .watchers
            .iter_mut()
            .zip(&self.leases)
            .enumerate()
            .filter(|(k, _)| !running(*k as u32))
            .map(|(_, (watcher, lease))| async move {
                let _ = watcher.get_or_insert_with(Watcher::new).poll(lease).await;
            });
        futures::future::join_all(reads).await;
    }

    /// What was seen of shard `k`'s lease, for its claim (a fresh watch
    /// when it was not watched).
    pub(super) fn take(&mut self, k: u32) -> Watcher {
        self.watchers
            .get_mut(k as usize)
            .and_then(Option::take)
            .unwrap_or_default()
    }
}
