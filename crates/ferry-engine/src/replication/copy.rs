//! The copy of one state: `_metadata` written create-only (it is the last
//! and, today, only file of a state directory), then read back and decoded
//! so the checksum proves the replica holds the state whole.

use bytes::Bytes;

use crate::checkpoint::{
    decode_metadata, metadata_key, JobState, MetadataError, StateKey, StateStore, StoreError,
};

/// Why a state could not be copied.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CopyError {
    /// The bytes to copy do not decode (the source is damaged).
    #[error("the source of '{path}' is damaged")]
    Source {
        /// The destination `_metadata`.
        path: String,
        /// What is wrong with it.
        #[source]
        source: MetadataError,
    },
    /// Writing failed.
    #[error("cannot write '{path}'")]
    Write {
        /// The destination `_metadata`.
        path: String,
        /// The store's error.
        #[source]
        source: StoreError,
    },
    /// Reading the copy back failed.
    #[error("cannot read back '{path}'")]
    ReadBack {
        /// The destination `_metadata`.
        path: String,
        /// The store's error.
        #[source]
        source: StoreError,
    },
    /// The copy is missing right after it was written.
    #[error("'{path}' is missing right after it was written")]
    Vanished {
        /// The destination `_metadata`.
        path: String,
    },
    /// The copy read back does not decode.
    #[error("'{path}' is damaged")]
    Damaged {
        /// The destination `_metadata`.
        path: String,
        /// What is wrong with it.
        #[source]
        source: MetadataError,
    },
    /// A different state already has this name at the destination.
    #[error("'{path}' already exists with other content")]
    Conflict {
        /// The destination `_metadata`.
        path: String,
    },
}

/// How a copy ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Copied {
    /// Written now.
    Written,
    /// The same bytes were there already (an earlier copy, or a retry
    /// after an answer was lost).
    AlreadyThere,
}

/// Copies `metadata` to `<dir>/_metadata` in `dst` and verifies it; returns
/// the decoded state. `show` turns a key into a path for messages.
pub(crate) async fn copy_metadata(
    dst: &dyn StateStore,
    dir: &StateKey,
    metadata: &Bytes,
    show: impl Fn(&StateKey) -> String,
) -> Result<(Copied, JobState), CopyError> {
    let key = metadata_key(dir);
    let path = || show(&key);
    // Never spread a damaged state.
    decode_metadata(metadata).map_err(|source| CopyError::Source {
        path: path(),
        source,
    })?;
    let copied = match dst.put_if_absent(&key, metadata.clone()).await {
        Ok(()) => Copied::Written,
        Err(StoreError::AlreadyExists { .. }) => Copied::AlreadyThere,
        Err(source) => {
            return Err(CopyError::Write {
                path: path(),
                source,
            })
        }
    };
    let back = dst
        .get(&key)
        .await
        .map_err(|source| CopyError::ReadBack {
            path: path(),
            source,
        })?
        .ok_or_else(|| CopyError::Vanished { path: path() })?;
    let state = decode_metadata(&back).map_err(|source| CopyError::Damaged {
        path: path(),
        source,
    })?;
    if back != *metadata {
        return Err(CopyError::Conflict { path: path() });
    }
    Ok((copied, state))
}

impl CopyError {
    /// Whether trying again cannot help (the source is damaged, or the
    /// destination holds something else under the name).
    pub fn is_permanent(&self) -> bool {
        matches!(
            self,
            CopyError::Source { .. } | CopyError::Damaged { .. } | CopyError::Conflict { .. }
        )
    }
}
