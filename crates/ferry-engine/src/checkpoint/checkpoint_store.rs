//! [`CheckpointStore`]: the checkpoint protocol over a [`StateStore`].
//!
//! Crash safety comes from one rule: a checkpoint or savepoint directory
//! counts only once its `_metadata` exists, and `_metadata` is published
//! last, atomically and create-only. Whatever instant a writer dies at, the
//! directory either has no `_metadata` (ignored) or a whole one; a damaged
//! one (disk fault, hand edit) fails its checksum and is skipped with a
//! warning. Deletion runs the other way round: `_metadata` first, so a
//! half-deleted checkpoint is merely incomplete, never mistaken for whole.
//!
//! The checkpoints directory lives in one store (opened once); savepoint
//! targets and restore pointers may name other stores and are opened through
//! the [`StoreResolver`]. Every location handed back is built from the
//! location it was found under ([`StorageLocation::with_key`]), so an S3 key
//! comes back as an `s3://` URI, never as a local path.

use std::collections::BTreeMap;
use std::num::NonZeroUsize;
use std::sync::Arc;

use bytes::Bytes;

use super::error::CheckpointError;
use super::key::StateKey;
use super::location::StorageLocation;
use super::metadata::{self, MetadataError};
use super::paths::{self, CheckpointPaths, METADATA_FILE};
use super::state::{JobId, JobState, SnapshotKind, StateInvariant};
use super::store::{
    LocalResolver, SingleStoreResolver, StateStore, StoreError, StoreResolver, UnavailableStore,
};

mod retention;

pub use retention::RetentionReport;

/// How many random names to try when a savepoint name is taken.
const SAVEPOINT_NAME_ATTEMPTS: usize = 5;

/// Writes, finds, prunes and loads checkpoints and savepoints.
#[derive(Debug, Clone)]
pub struct CheckpointStore {
    /// The store of the checkpoints directory.
    store: Arc<dyn StateStore>,
    /// Opens the stores of other locations (savepoint targets, pointers).
    resolver: Arc<dyn StoreResolver>,
    /// `job.checkpointsDirectory`.
    dir: StorageLocation,
    paths: CheckpointPaths,
    retained: NonZeroUsize,
}

/// A checkpoint that was just written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WrittenCheckpoint {
    /// Its number.
    pub id: u64,
    /// Its `chk-<N>` directory.
    pub location: StorageLocation,
    /// What retention did afterwards.
    pub retention: RetentionReport,
}

/// A complete, valid checkpoint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompletedCheckpoint {
    /// Its number.
    pub id: u64,
    /// Its `chk-<N>` directory.
    pub location: StorageLocation,
    /// The decoded state.
    pub state: JobState,
}

/// Why a checkpoint directory was passed over.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SkipReason {
    /// The directory has files but no `_metadata` (in progress or crashed).
    MissingMetadata,
    /// `_metadata` exists but is damaged or inconsistent.
    Invalid(MetadataError),
}

/// A checkpoint directory newer than the chosen one that could not be used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkippedCheckpoint {
    /// Its number.
    pub id: u64,
    /// Its `chk-<N>` directory.
    pub location: StorageLocation,
    /// Why it was skipped.
    pub reason: SkipReason,
}

/// The answer to "which checkpoint do we restore?".
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LatestCheckpoint {
    /// The newest complete, valid checkpoint; `None` means start fresh.
    pub checkpoint: Option<CompletedCheckpoint>,
    /// Newer directories passed over, newest first (also logged as warnings
    /// when damaged).
    pub skipped: Vec<SkippedCheckpoint>,
}

/// A state loaded from a checkpoint or savepoint pointer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoadedState {
    /// The checkpoint or savepoint directory.
    pub location: StorageLocation,
    /// The decoded state.
    pub state: JobState,
}

/// What a listing says about one `chk-<N>` directory.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct CheckpointDir {
    has_metadata: bool,
}

impl CheckpointStore {
    /// Keeps checkpoints under `checkpoints_dir`, in the store `resolver`
    /// opens for it, retaining the newest `retained` completed ones. Fails
    /// only if the resolver cannot open that store (no I/O happens here; a
    /// caller that wants to know the store answers lists it).
    pub fn open(
        checkpoints_dir: &StorageLocation,
        retained: NonZeroUsize,
        resolver: Arc<dyn StoreResolver>,
    ) -> Result<Self, CheckpointError> {
        let store = resolver
            .open(checkpoints_dir)
            .map_err(|source| CheckpointError::Store {
                path: checkpoints_dir.to_string(),
                source,
            })?;
        Ok(Self::with_parts(store, resolver, checkpoints_dir, retained))
    }

    /// A store keeping checkpoints under `checkpoints_dir` (its
    /// [`StorageLocation::key`] in `store`); every other location resolves
    /// to `store` too. For tests and single-store tools.
    pub fn new(
        store: Arc<dyn StateStore>,
        checkpoints_dir: &StorageLocation,
        retained: NonZeroUsize,
    ) -> Self {
        let resolver = Arc::new(SingleStoreResolver(store.clone()));
        Self::with_parts(store, resolver, checkpoints_dir, retained)
    }

    /// [`open`](Self::open) with the [`LocalResolver`] (fsynced local
    /// files). Given an object store location, every operation fails with
    /// a message saying object stores need the binary's resolver.
    pub fn open_local(checkpoints_dir: &StorageLocation, retained: NonZeroUsize) -> Self {
        let resolver: Arc<dyn StoreResolver> = Arc::new(LocalResolver);
        let store = resolver.open(checkpoints_dir).unwrap_or_else(|error| {
            Arc::new(UnavailableStore {
                reason: error.to_string(),
            })
        });
        Self::with_parts(store, resolver, checkpoints_dir, retained)
    }

    fn with_parts(
        store: Arc<dyn StateStore>,
        resolver: Arc<dyn StoreResolver>,
        checkpoints_dir: &StorageLocation,
        retained: NonZeroUsize,
    ) -> Self {
        CheckpointStore {
            store,
            resolver,
            dir: checkpoints_dir.clone(),
            paths: CheckpointPaths::new(checkpoints_dir.key()),
            retained,
        }
    }

    /// The path builder for this store's checkpoints directory.
    pub fn paths(&self) -> &CheckpointPaths {
        &self.paths
    }

    /// The store holding the checkpoints directory.
    pub fn store(&self) -> &Arc<dyn StateStore> {
        &self.store
    }

    /// The resolver other locations are opened with.
    pub fn resolver(&self) -> &Arc<dyn StoreResolver> {
        &self.resolver
    }

    /// The checkpoints directory (`job.checkpointsDirectory`).
    pub fn checkpoints_dir(&self) -> &StorageLocation {
        &self.dir
    }

    /// The location of `key` in the checkpoints directory's store.
    pub fn location_of(&self, key: &StateKey) -> StorageLocation {
        self.dir.with_key(key.clone())
    }

    /// The store holding `location`: the checkpoints store when it is the
    /// same one, else whatever the resolver opens.
    pub fn store_for(
        &self,
        location: &StorageLocation,
    ) -> Result<Arc<dyn StateStore>, CheckpointError> {
        if location.same_store(&self.dir) {
            return Ok(self.store.clone());
        }
        self.resolver
            .open(location)
            .map_err(|source| CheckpointError::Store {
                path: location.to_string(),
                source,
            })
    }

    /// How many completed checkpoints retention keeps.
    pub fn retained(&self) -> NonZeroUsize {
        self.retained
    }

    /// Writes `state` as checkpoint `n` of `job_id`
    /// (`<dir>/<job-id>/chk-<n>/_metadata`), then applies retention.
    ///
    /// Fails with [`CheckpointError::AlreadyExists`] if `chk-<n>` is already
    /// complete. `state` must be a checkpoint of `job_id` numbered `n`.
    /// Retention problems are reported in the result, not as an error: the
    /// checkpoint itself is durable by then.
    pub async fn write_checkpoint(
        &self,
        job_id: &JobId,
        n: u64,
        state: &JobState,
    ) -> Result<WrittenCheckpoint, CheckpointError> {
        let dir = self.paths.checkpoint_dir(job_id, n);
        let mismatch = if state.job_id != *job_id {
            Some(format!(
                "the state belongs to job {}, not {job_id}",
                state.job_id
            ))
        } else if state.checkpoint_id != n {
            Some(format!(
                "the state is checkpoint {}, not {n}",
                state.checkpoint_id
            ))
        } else if state.kind != SnapshotKind::Checkpoint {
            Some(format!("the state is a {}, not a checkpoint", state.kind))
        } else {
            None
        };
        if let Some(reason) = mismatch {
            return Err(CheckpointError::StateMismatch {
                path: self.display(&dir),
                reason,
            });
        }
        let at = self.location_of(&dir);
        publish(self.store.as_ref(), &at, state).await?;
        tracing::debug!(job = %job_id, checkpoint = n, path = %at, "checkpoint written");
        let retention = self.apply_retention(job_id, n).await;
        Ok(WrittenCheckpoint {
            id: n,
            location: at,
            retention,
        })
    }

    /// Writes `state` as a savepoint in a new directory
    /// `<target_dir>/savepoint-<job6>-<rand12>` and returns that directory
    /// (what `ferry run -s` takes). Savepoints are never deleted by ferry.
    /// `target_dir` may be in another store than the checkpoints (it is
    /// opened through the resolver).
    pub async fn write_savepoint(
        &self,
        target_dir: &StorageLocation,
        state: &JobState,
    ) -> Result<StorageLocation, CheckpointError> {
        let root = target_dir.key();
        if state.kind != SnapshotKind::Savepoint {
            return Err(CheckpointError::StateMismatch {
                path: target_dir.to_string(),
                reason: format!("the state is a {}, not a savepoint", state.kind),
            });
        }
        let store = self.store_for(target_dir)?;
        let mut last = None;
        for _ in 0..SAVEPOINT_NAME_ATTEMPTS {
            let dir =
                target_dir.with_key(paths::savepoint_dir(&root, &state.job_id, rand::random()));
            match publish(store.as_ref(), &dir, state).await {
                Ok(()) => {
                    tracing::info!(job = %state.job_id, path = %dir, "savepoint written");
                    return Ok(dir);
                }
                // Random name taken (astronomically unlikely): draw again.
                Err(e @ CheckpointError::AlreadyExists { .. }) => last = Some(e),
                Err(e) => return Err(e),
            }
        }
        Err(last.unwrap_or_else(|| CheckpointError::AlreadyExists {
            path: target_dir.to_string(),
        }))
    }

    /// The newest complete, valid checkpoint of `job_id`, if any.
    ///
    /// Directories without `_metadata` and damaged `_metadata` files are
    /// passed over (damaged ones with a warning) and listed in
    /// [`LatestCheckpoint::skipped`]. An intact `_metadata` in a newer
    /// format is an error instead: falling back past it would silently
    /// rewind a job that a newer ferry has moved on.
    pub async fn latest_complete(
        &self,
        job_id: &JobId,
    ) -> Result<LatestCheckpoint, CheckpointError> {
        let dirs = self.checkpoint_dirs(job_id).await?;
        let mut skipped = Vec::new();
        for (&id, dir) in dirs.iter().rev() {
            let dir_key = self.paths.checkpoint_dir(job_id, id);
            let reason = if dir.has_metadata {
                match self.read_checkpoint(job_id, id).await? {
                    Some(Ok(state)) => {
                        return Ok(LatestCheckpoint {
                            checkpoint: Some(CompletedCheckpoint {
                                id,
                                location: self.location_of(&dir_key),
                                state,
                            }),
                            skipped,
                        });
                    }
                    Some(Err(error)) if !error.is_corruption() => {
                        return Err(CheckpointError::InvalidMetadata {
                            path: self.display(&paths::metadata_key(&dir_key)),
                            error,
                        });
                    }
                    Some(Err(error)) => {
                        tracing::warn!(
                            job = %job_id,
                            checkpoint = id,
                            path = %self.display(&paths::metadata_key(&dir_key)),
                            %error,
                            "skipping damaged checkpoint"
                        );
                        SkipReason::Invalid(error)
                    }
                    // Deleted since the listing.
                    None => SkipReason::MissingMetadata,
                }
            } else {
                tracing::warn!(
                    job = %job_id,
                    checkpoint = id,
                    path = %self.display(&dir_key),
                    "skipping incomplete checkpoint (no _metadata)"
                );
                SkipReason::MissingMetadata
            };
            skipped.push(SkippedCheckpoint {
                id,
                location: self.location_of(&dir_key),
                reason,
            });
        }
        Ok(LatestCheckpoint {
            checkpoint: None,
            skipped,
        })
    }

    /// The number to give the next checkpoint of `job_id`: one above every
    /// `chk-<N>` directory present, complete or not, so a new checkpoint
    /// never collides with debris of an earlier run.
    pub async fn next_checkpoint_id(&self, job_id: &JobId) -> Result<u64, CheckpointError> {
        let dirs = self.checkpoint_dirs(job_id).await?;
        Ok(dirs
            .keys()
            .next_back()
            .map_or(1, |&max| max.saturating_add(1)))
    }

    /// Reads and decodes `chk-<id>/_metadata`: `None` if absent, the decode
    /// outcome otherwise. A checkpoint must also belong to `job_id` and carry
    /// its directory's number — a copied-in directory does not count.
    async fn read_checkpoint(
        &self,
        job_id: &JobId,
        id: u64,
    ) -> Result<Option<Result<JobState, MetadataError>>, CheckpointError> {
        let meta = self.paths.checkpoint_metadata(job_id, id);
        let Some(bytes) = self.get(&meta).await? else {
            return Ok(None);
        };
        Ok(Some(metadata::decode(&bytes).and_then(|state| {
            if state.job_id != *job_id || state.checkpoint_id != id {
                Err(MetadataError::InvalidState {
                    reason: StateInvariant::Misplaced {
                        checkpoint_id: state.checkpoint_id,
                        job_id: state.job_id,
                        found_id: id,
                        found_job: *job_id,
                    },
                })
            } else {
                Ok(state)
            }
        })))
    }

    async fn get(&self, key: &StateKey) -> Result<Option<Bytes>, CheckpointError> {
        get(self.store.as_ref(), &self.location_of(key)).await
    }

    async fn list_job(&self, job_id: &JobId) -> Result<Vec<StateKey>, CheckpointError> {
        let dir = self.paths.job_dir(job_id);
        self.store
            .list(&dir)
            .await
            .map_err(|source| CheckpointError::Store {
                path: self.display(&dir),
                source,
            })
    }

    async fn checkpoint_dirs(
        &self,
        job_id: &JobId,
    ) -> Result<BTreeMap<u64, CheckpointDir>, CheckpointError> {
        let listing = self.list_job(job_id).await?;
        Ok(group_checkpoint_dirs(&self.paths, job_id, &listing))
    }
}

/// Groups a listing of a job's directory by `chk-<N>` (pure, no I/O).
fn group_checkpoint_dirs(
    paths: &CheckpointPaths,
    job_id: &JobId,
    listing: &[StateKey],
) -> BTreeMap<u64, CheckpointDir> {
    let mut dirs: BTreeMap<u64, CheckpointDir> = BTreeMap::new();
    for key in listing {
        if let Some((id, rest)) = paths.parse_checkpoint_key(job_id, key) {
            let dir = dirs.entry(id).or_default();
            if rest == [METADATA_FILE] {
                dir.has_metadata = true;
            }
        }
    }
    dirs
}

impl CheckpointStore {
    /// A key of the checkpoints store, shown as an operator would type it.
    fn display(&self, key: &StateKey) -> String {
        self.location_of(key).to_string()
    }
}

/// Encodes and publishes `_metadata` in `dir` (a directory in `store`). Any
/// other files of a checkpoint would be written before this, so that
/// `_metadata` appearing means the directory is whole; today the state fits
/// in `_metadata`.
pub(super) async fn publish(
    store: &dyn StateStore,
    dir: &StorageLocation,
    state: &JobState,
) -> Result<(), CheckpointError> {
    let meta = paths::metadata_key(&dir.key());
    let shown = || dir.with_key(meta.clone()).to_string();
    let bytes = metadata::encode(state).map_err(|error| CheckpointError::InvalidMetadata {
        path: shown(),
        error,
    })?;
    match store.put_if_absent(&meta, Bytes::from(bytes)).await {
        Ok(()) => Ok(()),
        Err(StoreError::AlreadyExists { .. }) => {
            Err(CheckpointError::AlreadyExists { path: shown() })
        }
        Err(source) => Err(CheckpointError::Store {
            path: shown(),
            source,
        }),
    }
}

/// Reads the object at `at` (a location in `store`).
pub(super) async fn get(
    store: &dyn StateStore,
    at: &StorageLocation,
) -> Result<Option<Bytes>, CheckpointError> {
    store
        .get(&at.key())
        .await
        .map_err(|source| CheckpointError::Store {
            path: at.to_string(),
            source,
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grouping_a_listing() {
        let job: JobId = "00112233445566778899aabbccddeeff".parse().expect("valid");
        let paths = CheckpointPaths::new(StateKey::parse("ckpt").expect("valid"));
        let listing: Vec<StateKey> = [
            "ckpt/00112233445566778899aabbccddeeff/chk-1/_metadata",
            "ckpt/00112233445566778899aabbccddeeff/chk-2/state-file",
            "ckpt/00112233445566778899aabbccddeeff/chk-3/_metadata",
            "ckpt/00112233445566778899aabbccddeeff/chk-3/extra",
            "ckpt/00112233445566778899aabbccddeeff/chk-4/sub/_metadata",
            "ckpt/00112233445566778899aabbccddeeff/shared/blob",
            "ckpt/00112233445566778899aabbccddeeff/chk-007/_metadata",
        ]
        .iter()
        .map(|k| StateKey::parse(k).expect("valid"))
        .collect();
        let dirs = group_checkpoint_dirs(&paths, &job, &listing);
        let summary: Vec<(u64, bool)> = dirs.iter().map(|(id, d)| (*id, d.has_metadata)).collect();
        assert_eq!(summary, [(1, true), (2, false), (3, true), (4, false)]);
    }
}
