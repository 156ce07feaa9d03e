//! Retention: after each checkpoint, the newest `retained` valid ones
//! stay and the other `chk-<N>` directories below it go.

use super::{group_checkpoint_dirs, CheckpointStore};
use crate::checkpoint::error::CheckpointError;
use crate::checkpoint::key::StateKey;
use crate::checkpoint::state::JobId;

/// The outcome of a retention pass.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RetentionReport {
    /// Completed checkpoints kept, newest first.
    pub kept: Vec<u64>,
    /// Checkpoint directories deleted (old, incomplete or corrupt).
    pub deleted: Vec<u64>,
    /// Problems met; retention never fails a checkpoint write.
    pub errors: Vec<String>,
}

impl CheckpointStore {
    /// Keeps checkpoint `just_written` and the newest `retained - 1` valid
    /// checkpoints below it; deletes every other `chk-<N>` directory below
    /// `just_written` (older, incomplete or damaged). Directories numbered
    /// above `just_written`, intact ones in a newer format, and savepoints
    /// are never touched.
    ///
    /// Assumes one writer per job taking checkpoints one at a time with
    /// increasing numbers (the coordinator's rule), so an incomplete
    /// directory below `just_written` is crash debris, not work in progress.
    pub async fn apply_retention(&self, job_id: &JobId, just_written: u64) -> RetentionReport {
        let mut report = RetentionReport {
            kept: vec![just_written],
            ..RetentionReport::default()
        };
        let listing = match self.list_job(job_id).await {
            Ok(listing) => listing,
            Err(e) => {
                report.errors.push(e.to_string());
                return report;
            }
        };
        let dirs = group_checkpoint_dirs(&self.paths, job_id, &listing);
        for (&id, dir) in dirs.range(..just_written).rev() {
            let keep = if report.kept.len() >= self.retained.get() || !dir.has_metadata {
                false
            } else {
                match self.read_checkpoint(job_id, id).await {
                    Ok(Some(Ok(_))) => true,
                    Ok(Some(Err(e))) if !e.is_corruption() => {
                        // Unreadable by this build, but not ours to destroy.
                        report.errors.push(format!("kept chk-{id}: {e}"));
                        continue;
                    }
                    Ok(Some(Err(_)) | None) => false,
                    Err(e) => {
                        report.errors.push(e.to_string());
                        continue;
                    }
                }
            };
            if keep {
                report.kept.push(id);
            } else {
                match self.delete_checkpoint_dir(job_id, id, &listing).await {
                    Ok(()) => report.deleted.push(id),
                    Err(e) => report.errors.push(e.to_string()),
                }
            }
        }
        for error in &report.errors {
            tracing::warn!(job = %job_id, %error, "checkpoint retention");
        }
        report
    }

    /// Deletes `_metadata` first (the directory stops counting at once),
    /// then the rest.
    async fn delete_checkpoint_dir(
        &self,
        job_id: &JobId,
        id: u64,
        listing: &[StateKey],
    ) -> Result<(), CheckpointError> {
        let meta = self.paths.checkpoint_metadata(job_id, id);
        let rest = listing.iter().filter(|key| {
            **key != meta
                && self
                    .paths
                    .parse_checkpoint_key(job_id, key)
                    .is_some_and(|(n, _)| n == id)
        });
        for key in std::iter::once(&meta).chain(rest) {
            self.store
                .delete(key)
                .await
                .map_err(|source| CheckpointError::Store {
                    path: self.display(key),
                    source,
                })?;
        }
        tracing::debug!(job = %job_id, checkpoint = id, "checkpoint deleted by retention");
        Ok(())
    }
}
