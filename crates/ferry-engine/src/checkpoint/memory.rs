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

/// Objects kept in a map; every operation is atomic under one lock.
#[derive(Debug, Default)]
pub struct MemoryStateStore {
    objects: Mutex<BTreeMap<StateKey, Bytes>>,
}

impl MemoryStateStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    /// Writes `bytes` at `key` unconditionally, bypassing the create-only
    /// rule: for tests that simulate damaged or foreign files.
    pub fn overwrite(&self, key: &StateKey, bytes: impl Into<Bytes>) {
        self.lock().insert(key.clone(), bytes.into());
    }

    /// Number of objects stored.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// Whether the store holds no objects.
    pub fn is_empty(&self) -> bool {
        self.lock().is_empty()
    }

    fn lock(&self) -> MutexGuard<'_, BTreeMap<StateKey, Bytes>> {
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
            objects.insert(key.clone(), bytes);
            Ok(())
        })
    }

    fn put<'a>(&'a self, key: &'a StateKey, bytes: Bytes) -> StoreFuture<'a, ()> {
        Box::pin(async move {
            self.lock().insert(key.clone(), bytes);
            Ok(())
        })
    }

    fn get<'a>(&'a self, key: &'a StateKey) -> StoreFuture<'a, Option<Bytes>> {
        Box::pin(async move { Ok(self.lock().get(key).cloned()) })
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

    fn delete<'a>(&'a self, key: &'a StateKey) -> StoreFuture<'a, ()> {
        Box::pin(async move {
            self.lock().remove(key);
            Ok(())
        })
    }
}
