//! Loading a restore pointer (`ferry run -s PATH`, `-s s3://…`): the state in
//! a checkpoint or savepoint directory, in whichever store it lives, and the
//! most helpful error when there is none.

use super::checkpoint_store::{get, CheckpointStore, LoadedState};
use super::error::CheckpointError;
use super::key::StateKey;
use super::location::StorageLocation;
use super::metadata;
use super::paths::{self, METADATA_FILE};
use super::state::JobId;
use super::store::StateStore;

impl CheckpointStore {
    /// Loads a checkpoint or savepoint for `ferry run -s PATH`. `pointer` is
    /// its directory or its `_metadata` file, as a path or a URI (`file://`,
    /// `s3://`, …); other stores are opened through the resolver.
    pub async fn load(&self, pointer: &str) -> Result<LoadedState, CheckpointError> {
        let loc = StorageLocation::parse(pointer).map_err(|e| CheckpointError::InvalidPointer {
            pointer: e.input,
            reason: e.reason,
        })?;
        self.load_location(&loc).await
    }

    /// [`load`](Self::load) for a parsed location.
    pub async fn load_location(
        &self,
        pointer: &StorageLocation,
    ) -> Result<LoadedState, CheckpointError> {
        let store = self.store_for(pointer)?;
        let key = pointer.key();
        let (dir, meta) = if key.file_name() == Some(METADATA_FILE) {
            (key.parent().unwrap_or_default(), key)
        } else {
            (key.clone(), paths::metadata_key(&key))
        };
        let dir = pointer.with_key(dir);
        let meta = pointer.with_key(meta);
        let bytes = match get(store.as_ref(), &meta).await? {
            Some(bytes) => bytes,
            None => {
                let shown = pointer.to_string();
                return Err(explain_missing_metadata(store.as_ref(), &shown, &dir).await);
            }
        };
        let state = metadata::decode(&bytes).map_err(|error| CheckpointError::InvalidMetadata {
            path: meta.to_string(),
            error,
        })?;
        Ok(LoadedState {
            location: dir,
            state,
        })
    }
}

/// The most helpful error for a pointer whose `_metadata` is missing.
///
/// Only directories whose names bound their size (a job directory, a
/// `chk-<N>` or `savepoint-…` directory) are listed: listing is recursive,
/// and `ferry run -s /` must not walk the whole disk (or bucket) just to
/// word an error.
async fn explain_missing_metadata(
    store: &dyn StateStore,
    pointer: &str,
    dir: &StorageLocation,
) -> CheckpointError {
    let key = dir.key();
    let name = key.file_name().unwrap_or_default();
    let is_job_dir = name.parse::<JobId>().is_ok();
    let is_snapshot_dir =
        paths::parse_checkpoint_dir_name(name).is_some() || paths::is_savepoint_dir_name(name);
    if !is_job_dir && !is_snapshot_dir {
        return CheckpointError::NotFound {
            path: dir.to_string(),
        };
    }
    let listing = match store.list(&key).await {
        Ok(listing) => listing,
        Err(source) => {
            return CheckpointError::Store {
                path: dir.to_string(),
                source,
            }
        }
    };
    if is_job_dir {
        if let Some(n) = newest_complete_checkpoint(&listing, &key) {
            return CheckpointError::InvalidPointer {
                pointer: pointer.to_string(),
                reason: format!(
                    "this is a job's checkpoint directory; restore from one of its checkpoints, e.g. {}",
                    dir.with_key(key.join_valid(&paths::checkpoint_dir_name(n)))
                ),
            };
        }
    }
    if listing.is_empty() {
        CheckpointError::NotFound {
            path: dir.to_string(),
        }
    } else {
        CheckpointError::Incomplete {
            path: dir.to_string(),
        }
    }
}

/// The highest `N` with `<dir>/chk-<N>/_metadata` in `listing`.
fn newest_complete_checkpoint(listing: &[StateKey], dir: &StateKey) -> Option<u64> {
    listing
        .iter()
        .filter_map(|key| match key.strip_prefix(dir)?.as_slice() {
            [chk, file] if *file == METADATA_FILE => paths::parse_checkpoint_dir_name(chk),
            _ => None,
        })
        .max()
}
