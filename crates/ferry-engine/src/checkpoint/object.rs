//! [`ObjectStateStore`]: [`StateStore`] over the `object_store` crate.
//!
//! `put_if_absent` is `PutMode::Create`: on local disk object_store writes a
//! staging file and hard-links it into place (atomic, fails if the name
//! exists); on S3 it is a conditional PUT. The local store is opened with
//! fsync on, because object_store's default is off and a checkpoint that
//! vanishes in a power cut is worse than no checkpoint. `put` is a plain
//! PUT (local disk: staging file renamed into place), atomic on every
//! backend.

use std::sync::Arc;

use bytes::Bytes;
use futures::TryStreamExt;
use object_store::local::LocalFileSystem;
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt, PutMode, PutPayload};

use super::key::StateKey;
use super::store::{StateStore, StoreError, StoreFuture};

/// A [`StateStore`] backed by any `object_store` backend.
#[derive(Debug, Clone)]
pub struct ObjectStateStore {
    store: Arc<dyn ObjectStore>,
    /// Set for the local filesystem, to remove directories emptied by deletes.
    local: Option<Arc<LocalFileSystem>>,
}

impl ObjectStateStore {
    /// The local filesystem, rooted at `/`: the key `a/b/c` is the file
    /// `/a/b/c` (see [`super::StorageLocation::key`]). Writes are fsynced.
    pub fn local() -> Self {
        let fs = Arc::new(LocalFileSystem::new().with_fsync(true));
        ObjectStateStore {
            store: fs.clone(),
            local: Some(fs),
        }
    }

    /// Any other backend. It must support `PutMode::Create` (S3 with
    /// conditional puts, GCS, Azure, in-memory).
    pub fn new(store: Arc<dyn ObjectStore>) -> Self {
        ObjectStateStore { store, local: None }
    }

    /// The object store path of a key; valid keys are valid paths.
    fn path(op: &'static str, key: &StateKey) -> Result<Path, StoreError> {
        Path::parse(key.as_str()).map_err(|e| StoreError::backend(op, key, e))
    }

    /// Deleting a file leaves its directory behind on local disk; remove the
    /// directory if that was its last entry, so retention does not leave
    /// empty `chk-<N>/` shells. One level only: removing further ancestors
    /// could remove directories the user made.
    async fn remove_emptied_dir(&self, key: &StateKey) {
        let (Some(fs), Some(parent)) = (&self.local, key.parent()) else {
            return;
        };
        if parent.is_root() {
            return;
        }
        let Ok(path) = Path::parse(parent.as_str()) else {
            return;
        };
        let Ok(dir) = fs.path_to_filesystem(&path) else {
            return;
        };
        // Fails harmlessly when the directory still has entries.
        let _ = tokio::task::spawn_blocking(move || std::fs::remove_dir(dir)).await;
    }
}

impl ObjectStateStore {
    /// Every key under `prefix` with its last-modified time.
    async fn list_metas(
        &self,
        prefix: &StateKey,
    ) -> Result<Vec<(StateKey, Option<u64>)>, StoreError> {
        // Rooted at `/`, an empty prefix would walk the whole disk.
        if prefix.is_root() && self.local.is_some() {
            return Err(StoreError::backend(
                "list",
                prefix,
                "refusing to list the whole local filesystem",
            ));
        }
        let path = Self::path("list", prefix)?;
        let metas: Vec<_> = self
            .store
            .list(Some(&path))
            .try_collect()
            .await
            .map_err(|e| StoreError::backend("list", prefix, e))?;
        Ok(metas
            .into_iter()
            .filter_map(|meta| match StateKey::parse(meta.location.as_ref()) {
                Ok(key) => Some((
                    key,
                    u64::try_from(meta.last_modified.timestamp_millis()).ok(),
                )),
                Err(e) => {
                    // Not a name ferry writes (e.g. a file with '#' in
                    // it that an operator dropped there); skip it.
                    tracing::debug!(location = %meta.location, error = %e, "ignoring object");
                    None
                }
            })
            .collect())
    }
}

impl StateStore for ObjectStateStore {
    fn put_if_absent<'a>(&'a self, key: &'a StateKey, bytes: Bytes) -> StoreFuture<'a, ()> {
        Box::pin(async move {
            let path = Self::path("create", key)?;
            match self
                .store
                .put_opts(&path, PutPayload::from(bytes), PutMode::Create.into())
                .await
            {
                Ok(_) => Ok(()),
                Err(
                    object_store::Error::AlreadyExists { .. }
                    | object_store::Error::Precondition { .. },
                ) => Err(StoreError::AlreadyExists { key: key.clone() }),
                Err(e) => Err(StoreError::backend("create", key, e)),
            }
        })
    }

    fn put<'a>(&'a self, key: &'a StateKey, bytes: Bytes) -> StoreFuture<'a, ()> {
        Box::pin(async move {
            let path = Self::path("write", key)?;
            self.store
                .put_opts(&path, PutPayload::from(bytes), PutMode::Overwrite.into())
                .await
                .map(|_| ())
                .map_err(|e| StoreError::backend("write", key, e))
        })
    }

    fn get<'a>(&'a self, key: &'a StateKey) -> StoreFuture<'a, Option<Bytes>> {
        Box::pin(async move {
            let path = Self::path("read", key)?;
            let result = match self.store.get(&path).await {
                Ok(result) => result,
                Err(object_store::Error::NotFound { .. }) => return Ok(None),
                // `a/b/c` where `a/b` is a file: in object terms, no such key.
                Err(e) if caused_by_not_a_directory(&e) => return Ok(None),
                Err(e) => return Err(StoreError::backend("read", key, e)),
            };
            match result.bytes().await {
                Ok(bytes) => Ok(Some(bytes)),
                // Deleted between open and read.
                Err(object_store::Error::NotFound { .. }) => Ok(None),
                Err(e) => Err(StoreError::backend("read", key, e)),
            }
        })
    }

    fn list<'a>(&'a self, prefix: &'a StateKey) -> StoreFuture<'a, Vec<StateKey>> {
        Box::pin(async move {
            let listed = self.list_metas(prefix).await?;
            Ok(listed.into_iter().map(|(key, _)| key).collect())
        })
    }

    fn list_modified<'a>(
        &'a self,
        prefix: &'a StateKey,
    ) -> StoreFuture<'a, Vec<(StateKey, Option<u64>)>> {
        Box::pin(self.list_metas(prefix))
    }

    fn delete<'a>(&'a self, key: &'a StateKey) -> StoreFuture<'a, ()> {
        Box::pin(async move {
            let path = Self::path("delete", key)?;
            match self.store.delete(&path).await {
                Ok(()) => {}
                Err(object_store::Error::NotFound { .. }) => return Ok(()),
                Err(e) => return Err(StoreError::backend("delete", key, e)),
            }
            self.remove_emptied_dir(key).await;
            Ok(())
        })
    }
}

/// Whether an I/O "not a directory" error is anywhere in `error`'s chain.
fn caused_by_not_a_directory(error: &(dyn std::error::Error + 'static)) -> bool {
    let mut next = Some(error);
    while let Some(e) = next {
        if e.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::NotADirectory)
        {
            return true;
        }
        next = e.source();
    }
    false
}
