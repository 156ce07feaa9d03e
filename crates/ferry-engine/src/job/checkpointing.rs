//! Checkpoints and savepoints: capture the enumerator's state, write it,
//! record it in the history and the metrics, and complete the window when
//! the checkpoint covers its last split. [`Checkpoints`] is the
//! coordinator's part for them.

use super::coordinator::{Coordinator, JobWorkers};
use crate::checkpoint::{CheckpointStore, JobId, JobState, SnapshotKind, StorageLocation};
use crate::config::JobConfig;
use crate::connector::{Source, Tables};
use crate::enumerator::{AfterCheckpoint, CheckpointCapture};
use crate::error::{ControlError, EngineError};
use crate::identity::TableKey;
use crate::replication::{ReplicaMetrics, Replication};
use crate::status::CheckpointRecord;
use std::sync::Arc;
use tokio::time::{Instant, Interval};

/// The coordinator's checkpoints: where they go, how they are numbered,
/// the newest complete one, the timers that take them, and the replicas
/// that copy them.
pub(super) struct Checkpoints {
    pub(super) store: CheckpointStore,
    /// The id of the next checkpoint.
    next_id: u64,
    /// The state of the newest complete checkpoint (or the restored one):
    /// what a restart continues from.
    pub(super) last_complete: Option<JobState>,
    /// Checkpoints failed in a row (`tolerable-failed-checkpoints`).
    failed_in_a_row: u32,
    /// Copies completed states to `job.stateReplicas`, if any.
    pub(super) replication: Option<Replication>,
    /// The periodic checkpoint timer (`checkpointing.interval`).
    pub(super) tick: Interval,
    /// The periodic savepoint timer, if one is configured.
    pub(super) periodic: Option<Interval>,
}

impl Checkpoints {
    /// Checkpoints of a job that continues `initial` (restored, or a start
    /// time), if given.
    pub(super) fn new(
        store: CheckpointStore,
        initial: Option<JobState>,
        config: &JobConfig,
        fence: &crate::lease::Fence,
    ) -> Self {
        let every = config.checkpointing_interval;
        let mut tick = tokio::time::interval_at(Instant::now() + every, every);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        Checkpoints {
            replication: super::replicas::start_replication(config, &store, fence),
            store,
            next_id: 1,
            last_complete: initial,
            failed_in_a_row: 0,
            tick,
            periodic: super::replicas::periodic_timer(config),
        }
    }

    /// A job that keeps its id across a takeover (or a restore) numbers its
    /// checkpoints above every `chk-<N>` already there and above the
    /// restored one, so "highest number" stays "newest".
    pub(super) async fn number_above_existing(&mut self, job_id: &JobId) {
        let restored = self.last_complete.as_ref().map_or(0, |s| s.checkpoint_id);
        let existing = match self.store.next_checkpoint_id(job_id).await {
            Ok(n) => n,
            Err(e) => {
                tracing::warn!(error = %e, "cannot list earlier checkpoints of this job id");
                1
            }
        };
        self.next_id = existing.max(restored.saturating_add(1));
    }

    /// The tables are ready: periodic savepoints are due one interval
    /// from now.
    pub(super) fn tables_ready(&mut self) {
        if let Some(timer) = &mut self.periodic {
            timer.reset();
        }
    }

    /// New pipelines started: the next periodic checkpoint is one interval
    /// away.
    pub(super) fn pipelines_started(&mut self) {
        self.tick.reset();
    }

    /// One more checkpoint failed; how many in a row.
    pub(super) fn failed(&mut self) -> u32 {
        self.failed_in_a_row = self.failed_in_a_row.saturating_add(1);
        self.failed_in_a_row
    }

    /// The failures so far are acted on: count afresh.
    pub(super) fn forgive_failures(&mut self) {
        self.failed_in_a_row = 0;
    }

    /// Each replica's metrics, in order.
    pub(super) fn replica_metrics(&self) -> Vec<Arc<ReplicaMetrics>> {
        self.replication
            .as_ref()
            .map(|r| r.metrics().to_vec())
            .unwrap_or_default()
    }

    /// The job ended: the replicas take the last states (bounded wait).
    pub(super) async fn finish_replication(&mut self) {
        if let Some(replication) = self.replication.take() {
            replication
                .finish(super::replicas::REPLICA_FINISH_TIMEOUT)
                .await;
        }
    }
}

impl<T: Tables> Coordinator<T> {
    /// Every chain's capture, by chain key.
    pub(super) fn capture(&self) -> Vec<(TableKey, CheckpointCapture)> {
        self.chains
            .iter()
            .map(|c| (c.key, c.enumerator.capture()))
            .collect()
    }

    fn state(
        &self,
        captures: &[(TableKey, CheckpointCapture)],
        kind: SnapshotKind,
        id: u64,
    ) -> JobState {
        let mut state = JobState::new(
            self.options.job_id,
            kind,
            id,
            self.config.table_name.clone(),
            self.config.source_master_addresses.clone(),
            self.config.sink_master_addresses.clone(),
        );
        let mut tables: Vec<_> = self
            .chains
            .iter()
            .zip(captures)
            .map(|(chain, (_, capture))| chain.state(capture))
            .collect();
        if tables.is_empty() {
            // Before the tables were found (a stop during the first
            // discovery): keep what the job was started from.
            if let Some(s) = &self.checkpoints.last_complete {
                tables = s.table_states();
            }
        }
        state.shard = self.config.shard.map(|spec| crate::shard::ShardState {
            spec,
            tablets_over: self.config.shard_tablets_over,
            tables: tables.iter().map(|t| t.table_id.clone()).collect(),
        });
        state.set_tables(tables);
        state.generation = self.options.fence.generation();
        state
    }

    /// Writes a checkpoint; returns its id and where it went.
    pub(super) async fn checkpoint(
        &mut self,
        workers: &mut JobWorkers<T>,
    ) -> Result<(u64, String), EngineError> {
        // A fenced instance writes no further checkpoint (lease module).
        self.options.fence.check()?;
        let started = Instant::now();
        let gate = self.quiesce(workers).await?;
        let captures = self.capture();
        let id = self.checkpoints.next_id;
        // A failed attempt uses up its id too (as in Flink): a write that
        // failed late may have left chk-<id>/_metadata behind, and metadata
        // is never overwritten.
        self.checkpoints.next_id += 1;
        let state = self.state(&captures, SnapshotKind::Checkpoint, id);
        self.commit_sinks(&captures).await?;
        if gate.is_some() {
            // Committed on the sink, not yet in a checkpoint: a restore
            // must continue from the sink's commit.
            crate::failpoint::hit("checkpoint.after-sink-commit");
        }
        drop(gate);
        let written = self
            .checkpoints
            .store
            .write_checkpoint(&self.options.job_id, id, &state)
            .await?;
        self.checkpoints.forgive_failures();
        let duration = started.elapsed().as_millis() as u64;
        let metadata = encoded(&state);
        let size = metadata.len() as u64;
        self.publisher.metrics.checkpoint_completed(duration, size);
        let path = written.location.to_string();
        let completed_at = self.record(id, path.clone(), duration, size, false);
        self.notify_replicas(&state, &written.location, metadata, completed_at);
        self.checkpoints.last_complete = Some(state);
        for (chain, (_, capture)) in self.chains.iter_mut().zip(&captures) {
            // Every window open now was in this checkpoint.
            if let AfterCheckpoint::WindowCompleted { end, was_snapshot } =
                chain.checkpointed(capture)
            {
                let took = chain
                    .window_opened
                    .take()
                    .map_or(std::time::Duration::ZERO, |t| t.elapsed());
                chain.last_took = took;
                let took = took.as_millis() as u64;
                self.publisher.metrics.window_completed(took, was_snapshot);
                chain.metrics.window_completed();
                chain.source.window_committed(chain.cursor.as_ref());
                tracing::info!(
                    table = %chain.table.name,
                    %end,
                    snapshot = was_snapshot,
                    took_ms = took,
                    checkpoint = id,
                    "window completed"
                );
            }
        }
        self.publish_metrics();
        Ok((id, path))
    }

    /// Writes a savepoint into `dir` (or the default directory); returns
    /// its path.
    pub(super) async fn savepoint(
        &mut self,
        dir: Option<StorageLocation>,
        workers: &mut JobWorkers<T>,
    ) -> Result<String, ControlError> {
        self.savepoint_as(dir, false, workers)
            .await
            .map(|(path, _)| path)
    }

    /// Writes a savepoint (`periodic`: by the schedule) and tells the
    /// replicas; returns its path and state.
    pub(super) async fn savepoint_as(
        &mut self,
        dir: Option<StorageLocation>,
        periodic: bool,
        workers: &mut JobWorkers<T>,
    ) -> Result<(String, JobState), ControlError> {
        let started = Instant::now();
        let dir = dir
            .or_else(|| self.options.default_savepoint_dir.clone())
            .ok_or(ControlError::NoSavepointDirectory)?;
        self.options.fence.check().map_err(EngineError::from)?;
        let gate = self.quiesce(workers).await?;
        let captures = self.capture();
        let mut state = self.state(&captures, SnapshotKind::Savepoint, self.checkpoints.next_id);
        state.periodic = periodic;
        self.commit_sinks(&captures).await?;
        drop(gate);
        let location = self
            .checkpoints
            .store
            .write_savepoint(&dir, &state)
            .await
            .map_err(EngineError::from)?;
        let duration = started.elapsed().as_millis() as u64;
        let metadata = encoded(&state);
        let size = metadata.len() as u64;
        let path = location.to_uri();
        let completed_at =
            self.record(self.checkpoints.next_id, path.clone(), duration, size, true);
        self.notify_replicas(&state, &location, metadata, completed_at);
        tracing::info!(%path, periodic, "savepoint written");
        Ok((path, state))
    }

    /// Adds a completed checkpoint or savepoint to the history; returns
    /// its completion time (epoch ms).
    fn record(
        &self,
        id: u64,
        path: String,
        duration_ms: u64,
        size_bytes: u64,
        savepoint: bool,
    ) -> u64 {
        let completed_at_ms = crate::time::now_ms();
        self.publisher.checkpoint(CheckpointRecord {
            id,
            path,
            completed_at_ms,
            duration_ms,
            size_bytes,
            savepoint,
        });
        completed_at_ms
    }
}

/// The `_metadata` bytes of a state just written (same encoding, so the
/// same bytes as on the primary); empty if it cannot be encoded, which the
/// write before would have refused.
fn encoded(state: &JobState) -> bytes::Bytes {
    crate::checkpoint::encode_metadata(state)
        .map(bytes::Bytes::from)
        .unwrap_or_default()
}
