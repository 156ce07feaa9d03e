//! Durable checkpoints and savepoints, in Flink's on-disk layout.
//!
//! The layout matches what DR scripts written for the reference Flink job
//! look for:
//!
//! ```text
//! <job.checkpointsDirectory>/<job-id>/chk-<N>/_metadata
//! <savepoint-dir>/savepoint-<first 6 hex of job id>-<12 random hex>/_metadata
//! ```
//!
//! A directory counts only once its `_metadata` exists; `_metadata` is
//! written last, atomically and never overwritten, and carries a checksum,
//! so a crash at any instant leaves either the previous state or the new one,
//! each detectably whole.
//!
//! # Layout
//!
//! - [`state`](JobState): what is stored — the window chain position and the
//!   outstanding splits, as opaque bytes filled in by the engine.
//! - `metadata`: the `_metadata` envelope (magic, version, length, JSON,
//!   CRC32C) — [`encode_metadata`], [`decode_metadata`].
//! - `paths`: every object name ([`CheckpointPaths`]); pure.
//! - `key` / `location`: object keys ([`StateKey`]) and user-facing
//!   locations ([`StorageLocation`]: a path, `file://` URI, or an object
//!   store URI `s3://bucket/prefix`, `gs://…`, `az://…`).
//! - `store`: the small [`StateStore`] trait and its consistency contract,
//!   implemented by [`ObjectStateStore`] (object_store; local disk with
//!   fsync, or any object_store backend) and [`MemoryStateStore`] (tests);
//!   [`StoreResolver`] opens the store a location lives in
//!   ([`LocalResolver`] here; the binary's also knows object stores).
//! - `checkpoint_store`: [`CheckpointStore`] — write a checkpoint or
//!   savepoint, find the latest complete checkpoint, retention;
//!   `pointer`: load a restore pointer.

mod checkpoint_store;
mod error;
mod key;
mod location;
mod memory;
mod metadata;
mod object;
mod paths;
mod pointer;
mod state;
mod store;

/// The [`StateStore`] conformance suite, for backends outside this crate
/// (feature `conformance`).
#[cfg(any(test, feature = "conformance"))]
pub mod conformance;
#[cfg(test)]
mod tests;

pub use checkpoint_store::{
    CheckpointStore, CompletedCheckpoint, LatestCheckpoint, LoadedState, RetentionReport,
    SkipReason, SkippedCheckpoint, WrittenCheckpoint,
};
pub use error::CheckpointError;
pub use key::{InvalidKey, StateKey};
pub use location::{LocationError, ObjectLocation, ObjectScheme, StorageLocation};
pub use memory::MemoryStateStore;
pub use metadata::{
    decode as decode_metadata, encode as encode_metadata, MetadataError, HEADER_LEN, MAGIC,
    TRAILER_LEN,
};
pub use object::ObjectStateStore;
pub use paths::{
    checkpoint_dir_name, is_savepoint_dir_name, metadata_key, parse_checkpoint_dir_name,
    savepoint_dir, savepoint_dir_name, CheckpointPaths, METADATA_FILE,
};
pub use state::{
    InvalidJobId, JobId, JobState, SnapshotKind, SplitState, StateInvariant, TableState,
    WindowState, FORMAT_VERSION,
};
pub use store::{
    LocalResolver, SingleStoreResolver, StateStore, StoreError, StoreFuture, StoreResolver,
};
