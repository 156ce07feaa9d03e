//! [`StateStore`]: the five storage operations checkpointing needs, and
//! [`StoreResolver`]: which store a [`StorageLocation`] lives in.
//!
//! Kept this small so that any object store (local disk, S3, GCS, Azure) and
//! an in-memory fake can implement it, and one conformance suite checks them
//! all. The checkpoint protocol on top ([`super::CheckpointStore`]) relies
//! only on the guarantees written on the trait.
//!
//! The engine knows only the local filesystem ([`LocalResolver`]); the
//! binary passes a resolver that also knows object stores and their
//! credentials (crate `ferry-objstore`), so no secret passes through here.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use bytes::Bytes;

use super::key::StateKey;
use super::location::StorageLocation;
use super::object::ObjectStateStore;

/// The future returned by [`StateStore`] methods (boxed so the trait can be
/// used as `dyn StateStore`).
pub type StoreFuture<'a, T> = Pin<Box<dyn Future<Output = Result<T, StoreError>> + Send + 'a>>;

/// Object storage for checkpoint files.
///
/// # Consistency requirements
///
/// Every implementation must provide:
///
/// 1. **Atomic create.** [`put_if_absent`](Self::put_if_absent) either makes
///    the whole object visible at once or not at all; a reader never sees a
///    partial object, even if the writer crashes midway. If the key exists,
///    it fails with [`StoreError::AlreadyExists`] and leaves the object
///    untouched; of several concurrent creators of one key exactly one
///    succeeds.
/// 2. **Durability.** Once `put_if_absent` returns `Ok`, the object survives
///    a process or machine crash (local disk: file and directory entries
///    fsynced).
/// 3. **Read-after-write.** After `put_if_absent` or `delete` returns, `get`
///    and `list` (from any handle on the same store) see the change.
/// 4. **Listing.** [`list`](Self::list) returns every object whose key has
///    the prefix as a whole-segment prefix (`a/b` matches `a/b/c`, not
///    `a/bc`), at any depth, in no particular order; objects created or
///    deleted concurrently may or may not appear.
/// 5. **Idempotent delete.** Deleting a missing key succeeds.
/// 6. **Atomic replace.** [`put`](Self::put) makes the new bytes visible at
///    once, replacing any old object whole; a reader sees the old or the new
///    object, never a mix or a partial one.
///
/// Checkpoint files are immutable and only ever created with
/// `put_if_absent`, so a completed checkpoint can never be replaced by a
/// torn one; `put` is for small mutable records (a lease).
pub trait StateStore: Send + Sync + fmt::Debug {
    /// Creates `key` with `bytes` unless it exists (see requirement 1).
    fn put_if_absent<'a>(&'a self, key: &'a StateKey, bytes: Bytes) -> StoreFuture<'a, ()>;

    /// Writes `bytes` at `key`, replacing any object there (requirement 6).
    fn put<'a>(&'a self, key: &'a StateKey, bytes: Bytes) -> StoreFuture<'a, ()>;

    /// The object's bytes, or `None` if there is no object at `key`.
    fn get<'a>(&'a self, key: &'a StateKey) -> StoreFuture<'a, Option<Bytes>>;

    /// Every object key under `prefix` (see requirement 4).
    fn list<'a>(&'a self, prefix: &'a StateKey) -> StoreFuture<'a, Vec<StateKey>>;

    /// [`list`](Self::list), with each object's last-modified time (ms
    /// since the epoch, the store's clock) where the store reports one
    /// (`None` otherwise): lets a search read the most recently written
    /// states first. The default knows no times.
    fn list_modified<'a>(
        &'a self,
        prefix: &'a StateKey,
    ) -> StoreFuture<'a, Vec<(StateKey, Option<u64>)>> {
        Box::pin(async move {
            let keys = self.list(prefix).await?;
            Ok(keys.into_iter().map(|k| (k, None)).collect())
        })
    }

    /// Removes the object at `key`, if any.
    fn delete<'a>(&'a self, key: &'a StateKey) -> StoreFuture<'a, ()>;
}

/// A failed storage operation.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// `put_if_absent` found an object at the key.
    #[error("'{key}' already exists")]
    AlreadyExists {
        /// The key.
        key: StateKey,
    },
    /// The store a location names cannot be opened (unsupported scheme,
    /// backend not built in, invalid settings).
    #[error("cannot open the store of {location}: {reason}")]
    Open {
        /// The location, as a URI.
        location: String,
        /// Why (never holds a credential).
        reason: String,
    },
    /// The backend failed (I/O error, permission, network…).
    #[error("cannot {op} '{key}': {source}")]
    Backend {
        /// The operation: "create", "write", "read", "list" or "delete".
        op: &'static str,
        /// The key or prefix.
        key: StateKey,
        /// The backend's error.
        source: Box<dyn std::error::Error + Send + Sync>,
    },
}

impl StoreError {
    /// What went wrong without the key (for a message that names the full
    /// location itself): `cannot create: <backend error>`.
    pub fn cause(&self) -> String {
        match self {
            StoreError::AlreadyExists { .. } => "it already exists".to_string(),
            StoreError::Open { reason, .. } => reason.clone(),
            StoreError::Backend { op, source, .. } => format!("cannot {op}: {source}"),
        }
    }

    /// Wraps a backend error.
    pub fn backend(
        op: &'static str,
        key: &StateKey,
        source: impl Into<Box<dyn std::error::Error + Send + Sync>>,
    ) -> Self {
        StoreError::Backend {
            op,
            key: key.clone(),
            source: source.into(),
        }
    }
}

/// Opens the store a [`StorageLocation`] lives in.
///
/// The engine resolves every location it is handed (checkpoints directory,
/// savepoint target, restore pointer) through one resolver, so a savepoint
/// on S3 is written with the S3 settings and a restore from disk reads disk.
pub trait StoreResolver: Send + Sync + fmt::Debug {
    /// The store holding `location` (the location's
    /// [`key`](StorageLocation::key) addresses it there). Implementations
    /// may cache: two locations in one store may share a handle.
    fn open(&self, location: &StorageLocation) -> Result<Arc<dyn StateStore>, StoreError>;
}

/// Knows the local filesystem only; object store locations are refused with
/// a message saying so.
#[derive(Debug, Default, Clone, Copy)]
pub struct LocalResolver;

impl StoreResolver for LocalResolver {
    fn open(&self, location: &StorageLocation) -> Result<Arc<dyn StateStore>, StoreError> {
        match location {
            StorageLocation::Local(_) => Ok(Arc::new(ObjectStateStore::local())),
            _ => Err(StoreError::Open {
                location: location.to_uri(),
                reason: "object stores are not available here (only local paths)".to_string(),
            }),
        }
    }
}

/// Resolves every location to one store: for tests and tools that work on
/// a single (often in-memory) store.
#[derive(Debug, Clone)]
pub struct SingleStoreResolver(pub Arc<dyn StateStore>);

impl StoreResolver for SingleStoreResolver {
    fn open(&self, _location: &StorageLocation) -> Result<Arc<dyn StateStore>, StoreError> {
        Ok(self.0.clone())
    }
}

/// Stands in for a store that could not be opened
/// ([`super::CheckpointStore::open_local`] given an object store location):
/// every operation fails with the reason.
#[derive(Debug)]
pub(crate) struct UnavailableStore {
    pub(crate) reason: String,
}

impl UnavailableStore {
    fn fail<'a, T: Send + 'a>(&'a self, op: &'static str, key: &'a StateKey) -> StoreFuture<'a, T> {
        Box::pin(async move { Err(StoreError::backend(op, key, self.reason.clone())) })
    }
}

impl StateStore for UnavailableStore {
    fn put_if_absent<'a>(&'a self, key: &'a StateKey, _bytes: Bytes) -> StoreFuture<'a, ()> {
        self.fail("create", key)
    }

    fn put<'a>(&'a self, key: &'a StateKey, _bytes: Bytes) -> StoreFuture<'a, ()> {
        self.fail("write", key)
    }

    fn get<'a>(&'a self, key: &'a StateKey) -> StoreFuture<'a, Option<Bytes>> {
        self.fail("read", key)
    }

    fn list<'a>(&'a self, prefix: &'a StateKey) -> StoreFuture<'a, Vec<StateKey>> {
        self.fail("list", prefix)
    }

    fn delete<'a>(&'a self, key: &'a StateKey) -> StoreFuture<'a, ()> {
        self.fail("delete", key)
    }
}
