//! Periodic savepoints and state replication, as the coordinator sees them:
//!
//! - a periodic savepoint is a user savepoint taken on a timer
//!   (`job.periodicSavepointInterval`) into the job's savepoint directory,
//!   else `<job.checkpointsDirectory>/savepoints`, marked `periodic` in its
//!   `_metadata`; afterwards a background task deletes this replication's
//!   periodic savepoints beyond `job.periodicSavepointsRetained`. A failure
//!   is logged and counted; it never fails the job.
//! - after every completed checkpoint and savepoint the coordinator hands a
//!   [`StateNotice`] to the [`Replication`] (a channel send, never a wait).

use std::time::Duration;

use bytes::Bytes;
use tokio::time::Interval;

use super::coordinator::Coordinator;
use crate::checkpoint::{CheckpointStore, JobState, StorageLocation};
use crate::config::JobConfig;
use crate::connector::Tables;
use crate::replication::{
    prune_periodic_savepoints, ReplicaSettings, ReplicaTarget, Replication, StateDir, StateNotice,
    SAVEPOINTS_DIR,
};

/// How long a job that ended waits for its replicas to take the last
/// states (the final savepoint of a stop).
pub(super) const REPLICA_FINISH_TIMEOUT: Duration = Duration::from_secs(10);

/// The replica tasks of a job, if it names replicas. Their stores come
/// from the checkpoint store's resolver (the binary's knows S3 settings).
pub(super) fn start_replication(
    config: &JobConfig,
    store: &CheckpointStore,
    fence: &crate::lease::Fence,
) -> Option<Replication> {
    if config.state_replicas.is_empty() {
        return None;
    }
    let targets = config
        .state_replicas
        .iter()
        .map(|location| ReplicaTarget {
            location: location.clone(),
            store: store
                .store_for(location)
                .map_err(|e| crate::replication::chain(&e)),
        })
        .collect();
    let settings = ReplicaSettings::new(
        config.checkpoints_retained,
        config.periodic_savepoints_retained,
    );
    Some(Replication::start_fenced(targets, settings, fence.clone()))
}

/// A tick of the periodic savepoint timer; never, without one.
pub(super) async fn periodic_tick(timer: &mut Option<Interval>) {
    match timer {
        Some(timer) => {
            timer.tick().await;
        }
        None => std::future::pending().await,
    }
}

/// The periodic savepoint timer (`None`: off). Its first tick is one
/// interval away.
pub(super) fn periodic_timer(config: &JobConfig) -> Option<Interval> {
    let every = config.periodic_savepoint_interval?;
    let mut timer = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
    timer.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    Some(timer)
}

impl<T: Tables> Coordinator<T> {
    /// Where periodic savepoints go.
    fn periodic_savepoint_dir(&self) -> Result<StorageLocation, String> {
        if let Some(dir) = &self.options.default_savepoint_dir {
            return Ok(dir.clone());
        }
        self.config
            .checkpoints_directory
            .join(SAVEPOINTS_DIR)
            .map_err(|e| e.to_string())
    }

    /// Takes a periodic savepoint; a failure is logged and counted only.
    pub(super) async fn periodic_savepoint(
        &mut self,
        workers: &mut super::coordinator::JobWorkers<T>,
    ) {
        if self.mode.is_stopping() {
            return;
        }
        let dir = match self.periodic_savepoint_dir() {
            Ok(dir) => dir,
            Err(error) => {
                self.publisher.metrics.periodic_savepoint_failed();
                tracing::warn!(%error, "periodic savepoint skipped");
                return;
            }
        };
        match self.savepoint_as(Some(dir.clone()), true, workers).await {
            Ok((path, state)) => {
                self.publisher.periodic_savepoint(path);
                let keep = self.config.periodic_savepoints_retained.get();
                let store = match self.checkpoints.store.store_for(&dir) {
                    Ok(store) => store,
                    Err(e) => {
                        let error = crate::replication::chain(&e);
                        tracing::warn!(%error, "periodic savepoint retention");
                        return;
                    }
                };
                // Retention lists and reads the directory: off the
                // coordinator's loop.
                tokio::spawn(async move {
                    let report =
                        prune_periodic_savepoints(store.as_ref(), &dir.key(), &state, keep).await;
                    for error in &report.errors {
                        tracing::warn!(%error, "periodic savepoint retention");
                    }
                    if !report.deleted.is_empty() {
                        tracing::info!(
                            deleted = report.deleted.len(),
                            kept = report.kept.len(),
                            "periodic savepoints pruned"
                        );
                    }
                });
            }
            Err(error) => {
                self.publisher.metrics.periodic_savepoint_failed();
                tracing::warn!(error = %crate::replication::chain(&error), "periodic savepoint failed; the job goes on");
            }
        }
    }

    /// Tells the replicas that `state` is complete at `location`.
    pub(super) fn notify_replicas(
        &self,
        state: &JobState,
        location: &StorageLocation,
        metadata: Bytes,
        completed_at_ms: u64,
    ) {
        let Some(replication) = &self.checkpoints.replication else {
            return;
        };
        let dir = match state.kind {
            crate::checkpoint::SnapshotKind::Checkpoint => StateDir::Checkpoint {
                job: state.job_id,
                id: state.checkpoint_id,
            },
            crate::checkpoint::SnapshotKind::Savepoint => {
                let key = location.key();
                let Some(name) = key.file_name() else {
                    return;
                };
                StateDir::Savepoint {
                    name: name.to_string(),
                }
            }
        };
        replication.notify(&StateNotice {
            dir,
            periodic: state.periodic,
            completed_at_ms,
            metadata,
        });
    }
}
