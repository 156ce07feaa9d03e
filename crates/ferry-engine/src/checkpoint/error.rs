//! [`CheckpointError`]: what can go wrong writing, finding or loading a
//! checkpoint or savepoint. Every variant names the path involved.

use super::metadata::MetadataError;
use super::store::StoreError;

/// A failed checkpoint or savepoint operation.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CheckpointError {
    /// A `_metadata` file that cannot be used (torn, corrupt, foreign, or
    /// from a newer format), or a state that cannot be encoded.
    #[error("checkpoint metadata {path} is unusable: {error}")]
    InvalidMetadata {
        /// The `_metadata` file.
        path: String,
        /// What is wrong.
        #[source]
        error: MetadataError,
    },

    /// A directory with files but no `_metadata`: an incomplete checkpoint
    /// or savepoint (the writer died before publishing it).
    #[error("{path} has no _metadata: it is an incomplete checkpoint or savepoint and cannot be restored")]
    Incomplete {
        /// The directory.
        path: String,
    },

    /// No checkpoint or savepoint at the given location.
    #[error("no checkpoint or savepoint at {path}: {path}/_metadata does not exist")]
    NotFound {
        /// The location.
        path: String,
    },

    /// The `_metadata` to write exists already; metadata is never overwritten.
    #[error("{path} already exists; checkpoint metadata is never overwritten")]
    AlreadyExists {
        /// The `_metadata` file.
        path: String,
    },

    /// The state handed to a write does not match the write's arguments.
    #[error("refusing to write {path}: {reason}")]
    StateMismatch {
        /// Where it would have been written.
        path: String,
        /// What does not match.
        reason: String,
    },

    /// A restore pointer (`ferry run -s PATH`) that cannot be used.
    #[error("invalid checkpoint or savepoint path '{pointer}': {reason}")]
    InvalidPointer {
        /// The pointer as given.
        pointer: String,
        /// What is wrong with it.
        reason: String,
    },

    /// The storage backend failed. Shows the full location (`s3://…` or a
    /// path) once, then what failed.
    #[error("checkpoint storage failed at {path}: {}", source.cause())]
    Store {
        /// The object or directory involved, as a location.
        path: String,
        /// The backend error.
        source: StoreError,
    },
}

impl CheckpointError {
    /// Whether trying again later may succeed (storage hiccups), as opposed
    /// to a problem with the data or the request.
    pub fn is_retryable(&self) -> bool {
        matches!(
            self,
            CheckpointError::Store {
                source: StoreError::Backend { .. },
                ..
            }
        )
    }
}
