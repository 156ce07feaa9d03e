//! [`StateStore`]: the four storage operations checkpointing needs.
//!
//! Kept this small so that any object store (local disk today, S3 later) and
//! an in-memory fake can implement it, and one conformance suite checks them
//! all. The checkpoint protocol on top ([`super::CheckpointStore`]) relies
//! only on the guarantees written on the trait.

use std::fmt;
use std::future::Future;
use std::pin::Pin;

use bytes::Bytes;

use super::key::StateKey;

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
///
/// There is no overwrite: checkpoint files are immutable, so a completed
/// checkpoint can never be replaced by a torn one.
pub trait StateStore: Send + Sync + fmt::Debug {
    /// Creates `key` with `bytes` unless it exists (see requirement 1).
    fn put_if_absent<'a>(&'a self, key: &'a StateKey, bytes: Bytes) -> StoreFuture<'a, ()>;

    /// The object's bytes, or `None` if there is no object at `key`.
    fn get<'a>(&'a self, key: &'a StateKey) -> StoreFuture<'a, Option<Bytes>>;

    /// Every object key under `prefix` (see requirement 4).
    fn list<'a>(&'a self, prefix: &'a StateKey) -> StoreFuture<'a, Vec<StateKey>>;

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
    /// The backend failed (I/O error, permission, network…).
    #[error("cannot {op} '{key}': {source}")]
    Backend {
        /// The operation: "create", "read", "list" or "delete".
        op: &'static str,
        /// The key or prefix.
        key: StateKey,
        /// The backend's error.
        source: Box<dyn std::error::Error + Send + Sync>,
    },
}

impl StoreError {
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
