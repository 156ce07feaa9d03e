//! State replication: every completed checkpoint and savepoint of a job is
//! copied, in the background, to one or more replica locations
//! (`job.stateReplicas`, e.g. a bucket in another region).
//!
//! A replica `R` mirrors the checkpoints directory:
//!
//! ```text
//! <checkpoints-dir>/<job-id>/chk-<N>/_metadata  ->  R/<job-id>/chk-<N>/_metadata
//! <any savepoint dir>/savepoint-<job6>-<rand12>  ->  R/savepoints/savepoint-<job6>-<rand12>/_metadata
//! ```
//!
//! Guarantees, as on the primary: `_metadata` is written create-only and
//! last, then read back and decoded (checksum) before the copy counts.
//! Retention runs on the replica too (the primary's
//! `job.checkpointsRetained`; periodic savepoints by
//! `job.periodicSavepointsRetained`; user savepoints are never deleted).
//!
//! The coordinator only sends a [`StateNotice`] on an unbounded channel
//! per replica, so a slow or unreachable replica never stops or slows the
//! replication to the sink. Each replica's task retries with backoff and,
//! when the replica is back, catches up newest state first; checkpoints
//! that a newer one superseded meanwhile are not copied.
//!
//! Lag (per replica): while a state that completed on the primary is not
//! yet complete on the replica, `now - (completion time of the oldest such
//! state)`, so it grows during an outage; once caught up, how long the last
//! copy took after its state completed.
//!
//! # Layout
//!
//! - this file: [`Replication`] (start, notify, finish), [`StateNotice`];
//! - `copy`: the create-only, verified copy of one `_metadata`;
//! - `replica`: one replica's task (pending states, backoff, retention);
//! - `metrics`: [`ReplicaMetrics`], [`ReplicaSnapshot`];
//! - `retention`: periodic-savepoint retention (primary and replicas);
//! - `mirror`: [`mirror`], one pass of `ferry state mirror SRC DST`.

mod copy;
mod metrics;
mod mirror;
mod replica;
mod retention;
#[cfg(test)]
mod tests;

pub use copy::CopyError;
pub use metrics::{ReplicaMetrics, ReplicaSnapshot};
pub use mirror::{mirror, MirrorError, MirrorReport, SkippedState};
pub use retention::{prune_periodic_savepoints, PruneReport};

use std::num::NonZeroUsize;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use crate::checkpoint::{JobId, StateKey, StateStore, StorageLocation};
use crate::lease::Fence;

/// Where savepoints go under a replica (and, by default, under the
/// checkpoints directory): `<root>/savepoints`.
pub const SAVEPOINTS_DIR: &str = "savepoints";

/// Which state completed on the primary.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StateDir {
    /// `chk-<id>` of `job`.
    Checkpoint {
        /// The job.
        job: JobId,
        /// The checkpoint number.
        id: u64,
    },
    /// A savepoint directory `savepoint-<job6>-<rand12>`.
    Savepoint {
        /// The directory's name.
        name: String,
    },
}

impl StateDir {
    /// Its directory under a replica's `root`.
    pub fn under(&self, root: &StateKey) -> StateKey {
        match self {
            StateDir::Checkpoint { job, id } => root
                .join_valid(&job.to_string())
                .join_valid(&crate::checkpoint::checkpoint_dir_name(*id)),
            StateDir::Savepoint { name } => root.join_valid(SAVEPOINTS_DIR).join_valid(name),
        }
    }

    fn is_checkpoint(&self) -> bool {
        matches!(self, StateDir::Checkpoint { .. })
    }
}

/// A checkpoint or savepoint that completed on the primary: what the
/// coordinator sends each replica.
#[derive(Debug, Clone)]
pub struct StateNotice {
    /// Which state.
    pub dir: StateDir,
    /// Taken by the periodic savepoint schedule.
    pub periodic: bool,
    /// When it completed on the primary (epoch ms).
    pub completed_at_ms: u64,
    /// Its `_metadata`, exactly as written on the primary.
    pub metadata: Bytes,
}

/// How replicas keep and retry.
#[derive(Debug, Clone, Copy)]
pub struct ReplicaSettings {
    /// Complete checkpoints kept per job (the primary's count).
    pub retained_checkpoints: NonZeroUsize,
    /// Periodic savepoints kept (user savepoints are never deleted).
    pub retained_periodic: NonZeroUsize,
    /// First wait after a failed copy; doubles up to `max_backoff`.
    pub min_backoff: Duration,
    /// Longest wait between attempts while a replica is down.
    pub max_backoff: Duration,
}

impl ReplicaSettings {
    /// The given retention with the default backoff (0.5 s up to 5 s: a
    /// replica that comes back is caught up within seconds).
    pub fn new(retained_checkpoints: NonZeroUsize, retained_periodic: NonZeroUsize) -> Self {
        ReplicaSettings {
            retained_checkpoints,
            retained_periodic,
            min_backoff: Duration::from_millis(500),
            max_backoff: Duration::from_secs(5),
        }
    }
}

/// One replica to start: its location and its store (or why the store
/// could not be opened; then every copy fails with that reason).
pub struct ReplicaTarget {
    /// Where the replica is.
    pub location: StorageLocation,
    /// The store it lives in.
    pub store: Result<Arc<dyn StateStore>, String>,
}

/// The replica tasks of one job.
#[derive(Debug)]
pub struct Replication {
    senders: Vec<mpsc::UnboundedSender<StateNotice>>,
    metrics: Vec<Arc<ReplicaMetrics>>,
    tasks: Vec<JoinHandle<()>>,
}

impl Replication {
    /// Starts one task per target (no lease).
    pub fn start(targets: Vec<ReplicaTarget>, settings: ReplicaSettings) -> Self {
        Self::start_fenced(targets, settings, Fence::none())
    }

    /// Starts one task per target for the holder of `fence`: once it
    /// closes (the lease was lost), the tasks copy and delete nothing more
    /// on the replicas — a new generation may already write there.
    pub fn start_fenced(
        targets: Vec<ReplicaTarget>,
        settings: ReplicaSettings,
        fence: Fence,
    ) -> Self {
        let mut replication = Replication {
            senders: Vec::new(),
            metrics: Vec::new(),
            tasks: Vec::new(),
        };
        for target in targets {
            let (tx, rx) = mpsc::unbounded_channel();
            let metrics = Arc::new(ReplicaMetrics::new(target.location.to_uri()));
            let task = replica::Replica::new(target, settings, metrics.clone(), fence.clone());
            replication.tasks.push(tokio::spawn(task.run(rx)));
            replication.senders.push(tx);
            replication.metrics.push(metrics);
        }
        replication
    }

    /// Hands a completed state to every replica; never waits.
    pub fn notify(&self, notice: &StateNotice) {
        for tx in &self.senders {
            // A closed channel means the task ended (it only ends once
            // every sender is gone), so there is nothing to tell.
            let _ = tx.send(notice.clone());
        }
    }

    /// Each replica's live metrics.
    pub fn metrics(&self) -> &[Arc<ReplicaMetrics>] {
        &self.metrics
    }

    /// No more notices: lets each task copy what is pending (e.g. the final
    /// savepoint of a stop) for up to `timeout`, then stops it.
    pub async fn finish(self, timeout: Duration) {
        drop(self.senders);
        let deadline = tokio::time::Instant::now() + timeout;
        for mut task in self.tasks {
            if tokio::time::timeout_at(deadline, &mut task).await.is_err() {
                tracing::warn!("state replication stopped before every replica caught up");
                task.abort();
            }
        }
    }
}

/// A key of a location's store, as a URI for messages and metrics.
pub(crate) fn uri(base: &StorageLocation, key: &StateKey) -> String {
    base.with_key(key.clone()).to_uri()
}

pub(crate) use crate::error::display_chain as chain;
