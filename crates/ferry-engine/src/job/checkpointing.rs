//! Checkpoints and savepoints: capture the enumerator's state, write it,
//! record it in the history and the metrics, and complete the window when
//! the checkpoint covers its last split.

use super::coordinator::{Coordinator, JobWorkers};
use super::handle::CheckpointRecord;
use crate::checkpoint::{JobState, SnapshotKind, StorageLocation};
use crate::connector::{Source, Tables};
use crate::enumerator::{AfterCheckpoint, CheckpointCapture};
use crate::error::{ControlError, EngineError};
use crate::identity::TableKey;
use tokio::time::Instant;

/// How many checkpoints the history keeps.
const HISTORY_LEN: usize = 100;

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
            if let Some(s) = &self.last_complete {
                tables = s.table_states();
            }
        }
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
        let id = self.next_checkpoint_id;
        // A failed attempt uses up its id too (as in Flink): a write that
        // failed late may have left chk-<id>/_metadata behind, and metadata
        // is never overwritten.
        self.next_checkpoint_id += 1;
        let state = self.state(&captures, SnapshotKind::Checkpoint, id);
        self.commit_sinks(&captures).await?;
        if gate.is_some() {
            // Committed on the sink, not yet in a checkpoint: a restore
            // must continue from the sink's commit.
            crate::failpoint::hit("checkpoint.after-sink-commit");
        }
        drop(gate);
        let written = self
            .store
            .write_checkpoint(&self.options.job_id, id, &state)
            .await?;
        self.failed_checkpoints = 0;
        let duration = started.elapsed().as_millis() as u64;
        let metadata = encoded(&state);
        let size = metadata.len() as u64;
        self.metrics.checkpoint_completed(duration, size);
        let path = written.location.to_string();
        let completed_at = self.record(id, path.clone(), duration, size, false);
        self.notify_replicas(&state, &written.location, metadata, completed_at);
        self.last_complete = Some(state);
        for (chain, (_, capture)) in self.chains.iter_mut().zip(&captures) {
            // Every window open now was in this checkpoint.
            if chain.enumerator.window().is_some() {
                chain.window_durable = true;
            }
            if let AfterCheckpoint::WindowCompleted { end, was_snapshot } =
                chain.enumerator.checkpoint_completed(capture)
            {
                let took = chain
                    .window_opened
                    .take()
                    .map_or(0, |t| t.elapsed().as_millis() as u64);
                self.metrics.window_completed(took, was_snapshot);
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
        let mut state = self.state(&captures, SnapshotKind::Savepoint, self.next_checkpoint_id);
        state.periodic = periodic;
        self.commit_sinks(&captures).await?;
        drop(gate);
        let location = self
            .store
            .write_savepoint(&dir, &state)
            .await
            .map_err(EngineError::from)?;
        let duration = started.elapsed().as_millis() as u64;
        let metadata = encoded(&state);
        let size = metadata.len() as u64;
        let path = location.to_uri();
        let completed_at = self.record(self.next_checkpoint_id, path.clone(), duration, size, true);
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
        if let Ok(mut h) = self.history.lock() {
            h.push(CheckpointRecord {
                id,
                path,
                completed_at_ms,
                duration_ms,
                size_bytes,
                savepoint,
            });
            let excess = h.len().saturating_sub(HISTORY_LEN);
            h.drain(..excess);
        }
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
