//! Where a job's lease records live: the [`LeaseBackend`] trait, and its
//! implementation on a [`StateStore`] (create-only objects
//! `<dir>/seq-<k>`, k zero-padded so names sort).
//!
//! The protocol (generations, renewals, claims, fencing) is in
//! `protocol`; a backend only keeps an ordered sequence of records in which
//! each position can be written once, atomically. Coordination services
//! (ZooKeeper, a Kubernetes Lease) implement it in their own crates.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use bytes::Bytes;
use serde::{Deserialize, Serialize};

use crate::checkpoint::{StateKey, StateStore, StorageLocation, StoreError};

/// What a lease backend's operation returns.
pub type LeaseFuture<'a, T> = Pin<Box<dyn Future<Output = Result<T, LeaseError>> + Send + 'a>>;

/// What one lease record says.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LeaseRecord {
    /// Its position in the sequence (kept by the backend, not in the body).
    #[serde(skip)]
    pub seq: u64,
    /// The generation that wrote it.
    pub generation: u64,
    /// Who wrote it (host and pid), for messages.
    pub owner: String,
    /// Wall-clock time of writing, ms since the Unix epoch (informational:
    /// no decision uses another machine's clock).
    pub at_ms: u64,
    /// What the writer's job replicates ([`crate::config::JobConfig::identity`]):
    /// two jobs given one cluster id share one lease, and this tells them
    /// apart. Empty in records of older builds.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub job: String,
}

/// How a released record's owner starts: a holder that let the lease go
/// at once (a worker handing a shard over) writes its own generation once
/// more under this mark, so the next claimant need not wait a lease
/// duration. Kept in the owner text so every backend carries it as is.
pub const RELEASED_MARK: &str = "released:";

impl LeaseRecord {
    /// Whether its holder released the lease with it (see
    /// [`RELEASED_MARK`]): the lease is free now.
    pub fn is_released(&self) -> bool {
        self.owner.starts_with(RELEASED_MARK)
    }

    /// Who wrote it, without the release mark.
    pub fn holder(&self) -> &str {
        self.owner
            .strip_prefix(RELEASED_MARK)
            .unwrap_or(&self.owner)
    }

    /// The record's body as the state-store backend writes it (JSON).
    pub fn to_json(&self) -> Result<Vec<u8>, serde_json::Error> {
        serde_json::to_vec(self)
    }

    /// A record at position `seq` from a body [`LeaseRecord::to_json`] wrote.
    pub fn from_json(seq: u64, bytes: &[u8]) -> Result<Self, serde_json::Error> {
        let mut record: LeaseRecord = serde_json::from_slice(bytes)?;
        record.seq = seq;
        Ok(record)
    }
}

/// A failed lease operation.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LeaseError {
    /// The state store failed.
    #[error("cannot {op} the lease object '{path}'")]
    Store {
        /// What was tried.
        op: &'static str,
        /// The object or directory.
        path: String,
        /// The store's error.
        #[source]
        source: StoreError,
    },
    /// A coordination service (ZooKeeper, Kubernetes) failed.
    #[error("cannot {op} the lease at '{path}'")]
    Service {
        /// What was tried.
        op: &'static str,
        /// Where the lease is.
        path: String,
        /// The service's error.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// The lease is held, and renewed, by another job: two jobs were
    /// given one cluster id.
    #[error("the lease at '{path}' is held by another job: {owner} runs {other}, this instance runs {mine}; two jobs were given one high-availability.cluster-id (each job needs its own)")]
    OtherJob {
        /// Where the lease is.
        path: String,
        /// The other job's holder.
        owner: String,
        /// What the other job replicates.
        other: String,
        /// What this instance's job replicates.
        mine: String,
    },
    /// A lease record is not what ferry writes.
    #[error("the lease object '{path}' is damaged: {reason}")]
    Damaged {
        /// The record.
        path: String,
        /// What is wrong.
        reason: String,
    },
}

/// Where the lease records of one job live: an ordered sequence of records
/// at positions 1, 2, 3, …; each position can be written once.
pub trait LeaseBackend: Send + Sync + fmt::Debug {
    /// Where the lease is, for messages (`kudu:ferry_ha/<job>/_lease`,
    /// `s3://b/chk/<job>/_lease`).
    fn location(&self) -> String;

    /// The record at the highest position, or `None` if none was written.
    fn newest(&self) -> LeaseFuture<'_, Option<LeaseRecord>>;

    /// Writes `record` at position `record.seq` unless a record holds that
    /// position (or a later one): `Ok(None)` when this call wrote it, else
    /// `Ok(Some(winner))`, the record holding that position or a later one.
    /// Of racing writers for one position exactly one gets `Ok(None)`.
    fn write_next<'a>(&'a self, record: &'a LeaseRecord) -> LeaseFuture<'a, Option<LeaseRecord>>;

    /// Best effort: drops the records below `seq`, so a listing stays short.
    fn forget_before(&self, _seq: u64) -> LeaseFuture<'_, ()> {
        Box::pin(async { Ok(()) })
    }
}

/// Lease records as create-only objects of a [`StateStore`].
#[derive(Debug, Clone)]
pub struct StoreBackend {
    store: Arc<dyn StateStore>,
    dir: StateKey,
    place: Place,
}

/// Where the lease objects are, for messages.
#[derive(Debug, Clone)]
enum Place {
    /// A directory of a state store.
    Location(StorageLocation),
    /// A store known by a name (`kudu:ferry_ha`), its keys appended.
    Named(String),
}

impl StoreBackend {
    /// Records under `dir` of the store at `location` (its directory).
    pub fn at_location(store: Arc<dyn StateStore>, location: StorageLocation) -> Self {
        let dir = location.key().clone();
        StoreBackend {
            store,
            dir,
            place: Place::Location(location),
        }
    }

    /// Records under `dir` of a store known by `name`, for messages.
    pub fn named(store: Arc<dyn StateStore>, name: impl Into<String>, dir: StateKey) -> Self {
        StoreBackend {
            store,
            dir,
            place: Place::Named(name.into()),
        }
    }

    fn key(&self, seq: u64) -> StateKey {
        self.dir.join_valid(&format!("seq-{seq:020}"))
    }

    fn path(&self, key: &StateKey) -> String {
        match &self.place {
            Place::Location(location) => location.with_key(key.clone()).to_string(),
            Place::Named(name) => format!("{name}/{key}"),
        }
    }

    async fn read(&self, seq: u64) -> Result<Option<LeaseRecord>, LeaseError> {
        let key = self.key(seq);
        let bytes = self
            .store
            .get(&key)
            .await
            .map_err(|source| LeaseError::Store {
                op: "read",
                path: self.path(&key),
                source,
            })?;
        let Some(bytes) = bytes else { return Ok(None) };
        LeaseRecord::from_json(seq, &bytes)
            .map(Some)
            .map_err(|e| LeaseError::Damaged {
                path: self.path(&key),
                reason: e.to_string(),
            })
    }

    async fn create(&self, record: &LeaseRecord) -> Result<Option<LeaseRecord>, LeaseError> {
        let key = self.key(record.seq);
        let bytes = record.to_json().map_err(|e| LeaseError::Damaged {
            path: self.path(&key),
            reason: e.to_string(),
        })?;
        match self.store.put_if_absent(&key, Bytes::from(bytes)).await {
            Ok(()) => Ok(None),
            Err(StoreError::AlreadyExists { .. }) => match self.read(record.seq).await? {
                Some(winner) => Ok(Some(winner)),
                None => Err(LeaseError::Damaged {
                    path: self.path(&key),
                    reason: "it existed and then vanished".to_string(),
                }),
            },
            Err(source) => Err(LeaseError::Store {
                op: "create",
                path: self.path(&key),
                source,
            }),
        }
    }

    async fn newest_record(&self) -> Result<Option<LeaseRecord>, LeaseError> {
        let listing = self
            .store
            .list(&self.dir)
            .await
            .map_err(|source| LeaseError::Store {
                op: "list",
                path: self.location(),
                source,
            })?;
        let newest = listing
            .iter()
            .filter_map(|k| k.file_name()?.strip_prefix("seq-")?.parse::<u64>().ok())
            .max();
        match newest {
            None => Ok(None),
            // Deleted since the listing (retention): list again next time.
            Some(seq) => self.read(seq).await,
        }
    }
}

impl LeaseBackend for StoreBackend {
    fn location(&self) -> String {
        self.path(&self.dir)
    }

    fn newest(&self) -> LeaseFuture<'_, Option<LeaseRecord>> {
        Box::pin(self.newest_record())
    }

    fn write_next<'a>(&'a self, record: &'a LeaseRecord) -> LeaseFuture<'a, Option<LeaseRecord>> {
        Box::pin(self.create(record))
    }

    fn forget_before(&self, seq: u64) -> LeaseFuture<'_, ()> {
        Box::pin(async move {
            // One object per renewal, so the one just behind the window is
            // all there is to delete.
            if seq > 1 {
                let old = self.key(seq - 1);
                if let Err(e) = self.store.delete(&old).await {
                    tracing::debug!(error = %e, "lease cleanup");
                }
            }
            Ok(())
        })
    }
}
