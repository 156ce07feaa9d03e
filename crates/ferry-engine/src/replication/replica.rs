//! One replica's task: receives [`StateNotice`]s, copies the newest pending
//! state first, retries with backoff while the replica fails, applies
//! retention after each copy, and keeps the replica's metrics.
//!
//! Pending work is bounded whatever the outage's length: one checkpoint
//! (a newer one supersedes it — the primary's retention deletes the older
//! anyway) and the savepoints, of which at most the retained count of
//! periodic ones.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;
use tokio::time::Instant;

use super::copy::{copy_metadata, CopyError};
use super::metrics::ReplicaMetrics;
use super::{ReplicaSettings, ReplicaTarget, StateDir, StateNotice, SAVEPOINTS_DIR};
use crate::checkpoint::{CheckpointStore, StateKey, StateStore, StorageLocation};
use crate::lease::Fence;

/// States completed on the primary, not yet on the replica.
#[derive(Default)]
struct Pending {
    checkpoint: Option<StateNotice>,
    savepoints: VecDeque<StateNotice>,
}

impl Pending {
    fn add(&mut self, notice: StateNotice, retained_periodic: usize) {
        if notice.dir.is_checkpoint() {
            let newer = self
                .checkpoint
                .as_ref()
                .is_none_or(|c| c.completed_at_ms <= notice.completed_at_ms);
            if newer {
                self.checkpoint = Some(notice);
            }
            return;
        }
        self.savepoints.push_back(notice);
        // Periodic ones beyond the retained count would be deleted on
        // arrival: drop the oldest.
        let periodic = self.savepoints.iter().filter(|s| s.periodic).count();
        if periodic > retained_periodic {
            if let Some(i) = self.savepoints.iter().position(|s| s.periodic) {
                self.savepoints.remove(i);
            }
        }
    }

    /// The newest pending state.
    fn newest(&self) -> Option<StateNotice> {
        self.checkpoint
            .iter()
            .chain(&self.savepoints)
            .max_by_key(|n| n.completed_at_ms)
            .cloned()
    }

    fn remove(&mut self, done: &StateNotice) {
        if self.checkpoint.as_ref().is_some_and(|c| c.dir == done.dir) {
            self.checkpoint = None;
        }
        self.savepoints.retain(|s| s.dir != done.dir);
    }

    fn oldest_completed_at(&self) -> Option<u64> {
        self.checkpoint
            .iter()
            .chain(&self.savepoints)
            .map(|n| n.completed_at_ms)
            .min()
    }
}

pub(super) struct Replica {
    location: StorageLocation,
    store: Result<Arc<dyn StateStore>, String>,
    settings: ReplicaSettings,
    metrics: Arc<ReplicaMetrics>,
    /// The job's lease fence: closed, the task touches the replica no more.
    fence: Fence,
    pending: Pending,
    /// Completion time of the newest state on the replica.
    newest_copied_ms: u64,
    /// Completion time of the oldest state not yet on the replica,
    /// superseded checkpoints included (the lag's origin).
    behind_since: Option<u64>,
}

/// Why one attempt failed.
enum AttemptError {
    Store(String),
    Copy(CopyError),
}

impl Replica {
    pub(super) fn new(
        target: ReplicaTarget,
        settings: ReplicaSettings,
        metrics: Arc<ReplicaMetrics>,
        fence: Fence,
    ) -> Self {
        Replica {
            location: target.location,
            store: target.store,
            settings,
            metrics,
            fence,
            pending: Pending::default(),
            newest_copied_ms: 0,
            behind_since: None,
        }
    }

    fn receive(&mut self, notice: StateNotice) {
        let at = notice.completed_at_ms;
        self.behind_since = Some(self.behind_since.map_or(at, |since| since.min(at)));
        self.pending
            .add(notice, self.settings.retained_periodic.get());
        self.metrics.set_behind_since(self.behind_since);
    }

    /// After a state left the pending set: what is still missing is what
    /// is pending (a superseded checkpoint is covered by the newer one,
    /// which is copied first).
    fn settle(&mut self) {
        self.behind_since = self.pending.oldest_completed_at();
        self.metrics.set_behind_since(self.behind_since);
    }

    /// Runs until the coordinator is gone and nothing is pending.
    pub(super) async fn run(mut self, mut rx: mpsc::UnboundedReceiver<StateNotice>) {
        let mut backoff = self.settings.min_backoff;
        let mut open = true;
        let mut failing = false;
        loop {
            while let Ok(notice) = rx.try_recv() {
                self.receive(notice);
            }
            let Some(next) = self.pending.newest() else {
                if !open {
                    return;
                }
                match rx.recv().await {
                    Some(notice) => self.receive(notice),
                    None => open = false,
                }
                continue;
            };
            if self.fenced() {
                return;
            }
            match self.attempt(&next).await {
                Ok(()) => {
                    if failing {
                        tracing::info!(replica = %self.location.to_uri(), "state replica is back; caught up with the newest state");
                        failing = false;
                    }
                    backoff = self.settings.min_backoff;
                }
                Err(error) => {
                    let text = match &error {
                        AttemptError::Store(text) => text.clone(),
                        AttemptError::Copy(e) => super::chain(e),
                    };
                    self.metrics.failed(text.clone());
                    if let AttemptError::Copy(e) = &error {
                        if e.is_permanent() {
                            // Retrying cannot help; the next state may.
                            tracing::error!(replica = %self.location.to_uri(), error = %text, "state not replicated");
                            self.pending.remove(&next);
                            self.settle();
                            continue;
                        }
                    }
                    if !failing {
                        tracing::warn!(replica = %self.location.to_uri(), error = %text, "state replica failing; retrying with backoff (replication to the sink goes on)");
                        failing = true;
                    } else {
                        tracing::debug!(replica = %self.location.to_uri(), error = %text, "state replica still failing");
                    }
                    open = self.wait(&mut rx, backoff, open).await;
                    backoff = (backoff * 2).min(self.settings.max_backoff);
                }
            }
        }
    }

    /// Whether this instance lost its lease: then it stops (a fenced
    /// instance does nothing but stop; the new holder's replication owns
    /// the replica now, and retention here would delete its states).
    fn fenced(&self) -> bool {
        match self.fence.check() {
            Ok(()) => false,
            Err(fenced) => {
                tracing::info!(replica = %self.location.to_uri(), reason = %fenced, "state replication stops: this instance lost its lease");
                true
            }
        }
    }

    /// Sleeps `delay`, still taking notices; returns whether the channel
    /// is still open.
    async fn wait(
        &mut self,
        rx: &mut mpsc::UnboundedReceiver<StateNotice>,
        delay: Duration,
        mut open: bool,
    ) -> bool {
        let deadline = Instant::now() + delay;
        while open {
            tokio::select! {
                notice = rx.recv() => match notice {
                    Some(notice) => self.receive(notice),
                    None => open = false,
                },
                _ = tokio::time::sleep_until(deadline) => return open,
            }
        }
        tokio::time::sleep_until(deadline).await;
        open
    }

    /// Copies one state, then applies retention.
    async fn attempt(&mut self, notice: &StateNotice) -> Result<(), AttemptError> {
        let store = self.store.clone().map_err(AttemptError::Store)?;
        let root = self.location.key();
        let dir = notice.dir.under(&root);
        let location = self.location.clone();
        let (_, state) = copy_metadata(store.as_ref(), &dir, &notice.metadata, |k| {
            super::uri(&location, k)
        })
        .await
        .map_err(AttemptError::Copy)?;
        let newest = notice.completed_at_ms >= self.newest_copied_ms;
        if newest {
            self.newest_copied_ms = notice.completed_at_ms;
        }
        self.pending.remove(notice);
        self.settle();
        self.metrics
            .copied(notice.completed_at_ms, super::uri(&location, &dir), newest);
        tracing::debug!(replica = %location.to_uri(), dir = %dir, "state replicated");
        // The copy may have outlived the lease: no deletes after it.
        if self.fenced() {
            return Ok(());
        }
        self.retention(store, &root, notice, &state).await;
        Ok(())
    }

    /// The primary's retention, applied to the replica. Problems are logged;
    /// they never count as a failed copy.
    async fn retention(
        &self,
        store: Arc<dyn StateStore>,
        root: &StateKey,
        notice: &StateNotice,
        state: &crate::checkpoint::JobState,
    ) {
        match &notice.dir {
            StateDir::Checkpoint { job, id } => {
                let checkpoints =
                    CheckpointStore::new(store, &self.location, self.settings.retained_checkpoints);
                // Logs its own problems.
                checkpoints.apply_retention(job, *id).await;
            }
            StateDir::Savepoint { .. } if notice.periodic => {
                let dir = root.join_valid(SAVEPOINTS_DIR);
                let report = super::prune_periodic_savepoints(
                    store.as_ref(),
                    &dir,
                    state,
                    self.settings.retained_periodic.get(),
                )
                .await;
                for error in &report.errors {
                    tracing::warn!(replica = %self.location.to_uri(), %error, "periodic savepoint retention on the replica");
                }
            }
            StateDir::Savepoint { .. } => {}
        }
    }
}
