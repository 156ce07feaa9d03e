//! [`MemoryStateStore`]: an in-memory [`StateStore`] for tests.
//!
//! Written independently of object_store (a map under a mutex) so the shared
//! conformance suite compares two real implementations, and so tests can
//! plant damaged files or count objects without touching a disk.

use std::collections::BTreeMap;
use std::sync::{Mutex, MutexGuard};

use bytes::Bytes;

use super::key::StateKey;
use super::store::{StateStore, StoreError, StoreFuture};
use crate::time::now_ms;

/// Objects kept in a map; every operation is atomic under one lock.
#[derive(Debug, Default)]
pub struct MemoryStateStore {
    /// Each object with its last-modified time (ms since the epoch).
    objects: Mutex<BTreeMap<StateKey, (Bytes, u64)>>,
}

impl MemoryStateStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    /// Writes `bytes` at `key` unconditionally, bypassing the create-only
    /// rule: for tests that simulate damaged or foreign files.
    pub fn overwrite(&self, key: &StateKey, bytes: impl Into<Bytes>) {
        self.lock().insert(key.clone(), (bytes.into(), now_ms()));
    }

    /// Sets the last-modified time [`StateStore::list_modified`] reports
    /// for `key` (if it exists): for tests of what a search reads first.
    pub fn set_modified(&self, key: &StateKey, ms: u64) {
        if let Some(object) = self.lock().get_mut(key) {
            object.1 = ms;
        }
    }

    /// Number of objects stored.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// Whether the store holds no objects.
    pub fn is_empty(&self) -> bool {
        self.lock().is_empty()
    }

    fn lock(&self) -> MutexGuard<'_, BTreeMap<StateKey, (Bytes, u64)>> {
        // A panic while holding the lock cannot leave the map half-updated
        // (each operation is a single map call), so poisoning is ignorable.
        self.objects
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

impl StateStore for MemoryStateStore {
    fn put_if_absent<'a>(&'a self, key: &'a StateKey, bytes: Bytes) -> StoreFuture<'a, ()> {
        Box::pin(async move {
            let mut objects = self.lock();
            if objects.contains_key(key) {
                return Err(StoreError::AlreadyExists { key: key.clone() });
            }
            objects.insert(key.clone(), (bytes, now_ms()));
            Ok(())
        })
    }

    fn put<'a>(&'a self, key: &'a StateKey, bytes: Bytes) -> StoreFuture<'a, ()> {
        Box::pin(async move {
            self.lock().insert(key.clone(), (bytes, now_ms()));
            Ok(())
        })
    }

    fn get<'a>(&'a self, key: &'a StateKey) -> StoreFuture<'a, Option<Bytes>> {
        Box::pin(async move { Ok(self.lock().get(key).map(|(b, _)| b.clone())) })
    }

    fn list<'a>(&'a self, prefix: &'a StateKey) -> StoreFuture<'a, Vec<StateKey>> {
        Box::pin(async move {
            Ok(self
                .lock()
                .keys()
                // A prefix matches itself only if it has more segments
                // after it; an object *at* the prefix is not "under" it.
                .filter(|k| k.strip_prefix(prefix).is_some_and(|rest| !rest.is_empty()))
                .cloned()
                .collect())
        })
    }

    fn list_modified<'a>(
        &'a self,
        prefix: &'a StateKey,
    ) -> StoreFuture<'a, Vec<(StateKey, Option<u64>)>> {
        Box::pin(async move {
            Ok(self
                .lock()
                .iter()
                .filter(|(k, _)| k.strip_prefix(prefix).is_some_and(|rest| !rest.is_empty()))
                .map(|(k, (_, at))| (k.clone(), Some(*at)))
                .collect())
        })
    }

    fn delete<'a>(&'a self, key: &'a StateKey) -> StoreFuture<'a, ()> {
        Box::pin(async move {
            self.lock().remove(key);
            Ok(())
        })
    }
}
