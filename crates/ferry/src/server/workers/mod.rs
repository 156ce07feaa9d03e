//! Workers of a sharded job (`job.shards` > 1 with a high-availability
//! type): any number of `ferry run` processes (1 … shards) share one
//! job's shards.
//!
//! - [`slots`]: membership. Each worker holds one worker slot (a lease of
//!   its own); the live slots divide the shards round-robin ([`owned`]).
//! - [`ShardBoard`]: the whole job as any worker sees it
//!   (`GET /ferry/shards`).
//! - [`shard`]: one shard's life in a worker — its own lease (fenced by
//!   generation, as a single job's), its own checkpoint chain; handed
//!   over with a savepoint and an immediate release.
//!
//! A worker re-reads the slots every half renew interval. When the live
//! set grows (a worker joined) it hands over the shards no longer its
//! own; when it shrinks (a worker died: its slot unchanged for a lease
//! duration, or released) it claims the shards that became its own, each
//! resuming from the shard's newest complete state. SIGTERM stops every
//! shard with a savepoint and releases their leases and the slot. A
//! worker whose slot lease is lost stops its shards and joins again;
//! nothing about coordination makes it exit.

mod board;
mod shard;
pub mod slots;

pub use board::{split_owner, ShardBoard};

use super::run::{App, Listeners, Signals};
use crate::run_args::RunArgs;
use anyhow::{bail, Result};
use ferry_engine::lease::{Holding, Watcher};
use ferry_engine::JobStatus;
use futures::stream::{FuturesUnordered, StreamExt};
use shard::{ShardEnd, ShardWatch};
pub use slots::owned;
use slots::Slots;
use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use tokio_util::sync::CancellationToken;

/// The shard count of `run`'s job when it runs as workers: more than one
/// shard, a lease to share them by, and the whole job (not one shard's
/// configuration).
pub fn sharded(run: &RunArgs) -> Option<u32> {
    let shards = run.config.shards;
    (shards > 1 && run.config.shard.is_none() && run.config.ha.kind.holds_lease()).then_some(shards)
}

/// `ferry run` as a worker of a job of `shards` shards.
pub async fn run_worker(run: RunArgs, shards: u32) -> Result<JobStatus> {
    if run.from_savepoint.is_some() || run.from_cutover.is_some() {
        bail!(
            "-s/--fromSavepoint and --fromCutover start one job; with job.shards = {shards} each shard resumes from its own newest state"
        );
    }
    let listeners = Listeners::open_waiting(&run.process).await?;
    let app = App::start(Some(listeners), &run.process).await?;
    let rest_url = app.rest_url().map(|url| advertised(&url));
    let owner = match &rest_url {
        Some(url) => format!("{} {url}", super::lease::owner()),
        None => super::lease::owner(),
    };
    let status = match Slots::new(&run, shards, &owner).and_then(|slots| {
        let board = ShardBoard::new(&run, shards, slots.leases(), rest_url.clone())?;
        let _ = app.registry.shards.set(std::sync::Arc::new(board));
        Ok(slots)
    }) {
        Ok(mut slots) => {
            let worker = Worker {
                app: &app,
                run: &run,
                shards,
                owner,
            };
            worker.serve(&mut slots).await
        }
        Err(e) => Err(e),
    };
    app.finish().await;
    status
}

/// The REST URL other workers reach this one at: a wildcard bind address
/// (`rest.address: 0.0.0.0`, as in a pod) becomes `POD_IP`, else the host
/// name.
fn advertised(url: &str) -> String {
    for wildcard in ["0.0.0.0", "[::]"] {
        if url.contains(&format!("//{wildcard}:")) {
            let host = std::env::var("POD_IP")
                .ok()
                .filter(|ip| !ip.trim().is_empty())
                .or_else(|| std::fs::read_to_string("/proc/sys/kernel/hostname").ok())
                .map(|h| h.trim().to_string());
            if let Some(host) = host {
                return url.replacen(wildcard, &host, 1);
            }
        }
    }
    url.to_string()
}

/// What a worker's shards share.
struct Worker<'a> {
    app: &'a App,
    run: &'a RunArgs,
    shards: u32,
    owner: String,
}

/// Why a worker stopped working its slot.
enum Left {
    /// For good (a signal, or a shard's job ended on its own).
    Done(JobStatus),
    /// Its slot lease was lost: join again.
    SlotLost,
    /// Another job's worker renews a slot of this cluster id.
    OtherJob(ferry_engine::lease::LeaseError),
}

type ShardFuture<'a> = Pin<Box<dyn Future<Output = (u32, Result<ShardEnd>)> + 'a>>;

impl Worker<'_> {
    /// Joins, works the slot, joins again after losing it, until done.
    async fn serve(&self, slots: &mut Slots) -> Result<JobStatus> {
        let mut signals = Signals::new();
        let mut watch = ShardWatch::new(self.run, self.shards, &self.owner)?;
        loop {
            let (slot, holding) = tokio::select! {
                joined = slots.join() => joined?,
                _ = signals.recv() => return Ok(JobStatus::Canceled),
            };
            eprintln!(
                "ferry: worker slot {slot} of {} (generation {}) held at {}",
                self.shards,
                holding.generation,
                slots.location(slot)
            );
            self.app.registry.ha.holding(holding.generation);
            match self
                .work(slots, &mut watch, slot, &holding, &mut signals)
                .await
            {
                Left::Done(status) => {
                    if let Err(e) = holding.hand_back().await {
                        tracing::warn!(error = %super::lease::chain(&e), "cannot release the worker slot; it lapses after its duration");
                    }
                    return Ok(status);
                }
                Left::SlotLost => {
                    holding.release();
                    self.app.registry.ha.standing_by();
                }
                Left::OtherJob(e) => {
                    if let Err(e) = holding.hand_back().await {
                        tracing::warn!(error = %super::lease::chain(&e), "cannot release the worker slot; it lapses after its duration");
                    }
                    return Err(e.into());
                }
            }
        }
    }

    /// Runs the shards `slot` owns, following the live set, until the
    /// slot is lost, a signal comes or a shard's job ends on its own.
    async fn work(
        &self,
        slots: &mut Slots,
        watch: &mut ShardWatch,
        slot: u32,
        holding: &Holding,
        signals: &mut Signals,
    ) -> Left {
        let mut running: BTreeMap<u32, CancellationToken> = BTreeMap::new();
        let mut tasks: FuturesUnordered<ShardFuture<'_>> = FuturesUnordered::new();
        let mut tick = tokio::time::interval(slots.poll_every());
        let mut leaving: Option<Left> = None;
        let mut said: Vec<u32> = Vec::new();
        // Workers started together see each other's slots within a poll
        // or two: starting shards before would hand them over at once.
        let settled = tokio::time::Instant::now() + 2 * slots.poll_every();
        loop {
            if leaving.is_some() && running.is_empty() {
                return leaving.unwrap_or(Left::SlotLost);
            }
            tokio::select! {
                _ = tick.tick(), if leaving.is_none() => {
                    if let Err(e) = slots.poll().await {
                        eprintln!("ferry: worker slot {slot}: stopping this worker's shards: {e}");
                        leaving = Some(Left::OtherJob(e));
                        stop_all(&running);
                        continue;
                    }
                    watch.poll(|k| running.contains_key(&k)).await;
                    if tokio::time::Instant::now() < settled {
                        continue;
                    }
                    let live = slots.live(slot);
                    let mine = owned(&live, self.shards, slot);
                    if mine != said {
                        eprintln!("ferry: worker slot {slot}: live slots {live:?}; running shards {mine:?}");
                        said = mine.clone();
                    }
                    for (shard, stop) in &running {
                        if !mine.contains(shard) && !stop.is_cancelled() {
                            eprintln!("ferry: shard {shard}: handing over");
                            stop.cancel();
                        }
                    }
                    for shard in mine {
                        if running.contains_key(&shard) {
                            continue;
                        }
                        let stop = CancellationToken::new();
                        running.insert(shard, stop.clone());
                        tasks.push(Box::pin(self.shard(shard, watch.take(shard), stop)));
                    }
                }
                Some((shard, end)) = tasks.next() => {
                    running.remove(&shard);
                    let status = match end {
                        Ok(ShardEnd::Stopped) => continue,
                        Ok(ShardEnd::Ended(status)) => status,
                        Err(e) => JobStatus::Failed { error: format!("shard {shard}: {}", crate::error_line(&e)) },
                    };
                    eprintln!("ferry: shard {shard}: its job ended ({status:?}); stopping the other shards of this worker");
                    if leaving.is_none() {
                        leaving = Some(Left::Done(status));
                    }
                    stop_all(&running);
                }
                fenced = holding.fenced(), if leaving.is_none() => {
                    eprintln!("ferry: worker slot {slot}: {fenced}; stopping this worker's shards and joining again");
                    leaving = Some(Left::SlotLost);
                    stop_all(&running);
                }
                _ = signals.recv(), if leaving.is_none() => {
                    eprintln!("ferry: stopping this worker's shards (with savepoints where a directory is set)");
                    leaving = Some(Left::Done(JobStatus::Canceled));
                    stop_all(&running);
                }
            }
        }
    }

    fn shard(&self, shard: u32, watcher: Watcher, stop: CancellationToken) -> ShardFuture<'_> {
        let owner = self.owner.clone();
        Box::pin(async move {
            let end = shard::run_shard(self.app, self.run, shard, owner, watcher, stop).await;
            (shard, end)
        })
    }
}

fn stop_all(running: &BTreeMap<u32, CancellationToken>) {
    for stop in running.values() {
        stop.cancel();
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_loopback_url_is_advertised_as_is() {
        assert_eq!(
            super::advertised("http://127.0.0.1:8081"),
            "http://127.0.0.1:8081"
        );
        assert!(!super::advertised("http://0.0.0.0:8081").contains("0.0.0.0"));
    }
}
