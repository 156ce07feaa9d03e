//! One pass of `ferry state mirror SRC DST`: copy every complete, valid
//! checkpoint and savepoint under `SRC` to the same relative place under
//! `DST`, with the replicas' guarantees (create-only `_metadata`, read
//! back and decoded). Recognised directories:
//!
//! ```text
//! SRC/<job-id>/chk-<N>/_metadata
//! SRC/savepoints/savepoint-<job6>-<rand12>/_metadata
//! SRC/savepoint-<job6>-<rand12>/_metadata
//! ```
//!
//! Anything else (leases, stray files) is ignored. A directory without
//! `_metadata` (torn or in progress) or with a damaged one is skipped and
//! reported. Nothing is ever deleted at `DST`.

use std::collections::BTreeMap;

use crate::checkpoint::{
    decode_metadata, is_savepoint_dir_name, parse_checkpoint_dir_name, JobId, MetadataError,
    StateKey, StateStore, StorageLocation, StoreError, METADATA_FILE,
};

use super::copy::{copy_metadata, Copied, CopyError};

/// A source directory that was not copied, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkippedState {
    /// The source directory (URI).
    pub path: String,
    /// Why (incomplete, damaged).
    pub reason: String,
}

/// What a mirror pass did.
#[derive(Debug, Default)]
pub struct MirrorReport {
    /// Directories copied now (destination URIs), newest first.
    pub copied: Vec<String>,
    /// Valid source states already present at the destination.
    pub present: usize,
    /// Torn or damaged source states, not copied.
    pub skipped: Vec<SkippedState>,
    /// States that could not be copied (the pass goes on).
    pub failed: Vec<(String, CopyError)>,
}

/// Why a pass could not run at all.
#[derive(Debug, thiserror::Error)]
#[error("cannot list '{path}'")]
pub struct MirrorError {
    /// The source location.
    pub path: String,
    /// The store's error.
    #[source]
    pub source: StoreError,
}

/// The relative directory of a state under the source root, if `rest`
/// (a key's segments below the root) is inside one.
fn state_dir<'a>(rest: &[&'a str]) -> Option<Vec<&'a str>> {
    match rest {
        [job, chk, ..]
            if job.parse::<JobId>().is_ok() && parse_checkpoint_dir_name(chk).is_some() =>
        {
            Some(vec![job, chk])
        }
        [sps, sp, ..] if *sps == super::SAVEPOINTS_DIR && is_savepoint_dir_name(sp) => {
            Some(vec![sps, sp])
        }
        [sp, ..] if is_savepoint_dir_name(sp) => Some(vec![sp]),
        _ => None,
    }
}

fn join(root: &StateKey, rel: &[String]) -> StateKey {
    rel.iter().fold(root.clone(), |k, s| k.join_valid(s))
}

/// Checks a decoded `_metadata` against where it was found: a checkpoint
/// must carry its directory's job and number.
fn check_place(rel: &[String], bytes: &[u8]) -> Result<u64, MetadataError> {
    let state = decode_metadata(bytes)?;
    if let [job, chk] = rel {
        let Some(id) = parse_checkpoint_dir_name(chk) else {
            return Ok(state.created_at_ms);
        };
        if state.job_id.to_string() != *job || state.checkpoint_id != id {
            return Err(MetadataError::InvalidState {
                reason: crate::checkpoint::StateInvariant::Misplaced {
                    checkpoint_id: state.checkpoint_id,
                    job_id: state.job_id,
                    found_id: id,
                    found_job: job.parse().unwrap_or(state.job_id),
                },
            });
        }
    }
    Ok(state.created_at_ms)
}

/// Copies every complete, valid state under `src` to `dst`, newest first.
pub async fn mirror(
    src_store: &dyn StateStore,
    src: &StorageLocation,
    dst_store: &dyn StateStore,
    dst: &StorageLocation,
) -> Result<MirrorReport, MirrorError> {
    let src_root = src.key();
    let listing = src_store
        .list(&src_root)
        .await
        .map_err(|source| MirrorError {
            path: src.to_uri(),
            source,
        })?;
    // relative state directory -> whether it has `_metadata`.
    let mut dirs: BTreeMap<Vec<String>, bool> = BTreeMap::new();
    for key in &listing {
        let Some(rest) = key.strip_prefix(&src_root) else {
            continue;
        };
        if let Some(rel) = state_dir(&rest) {
            let complete = rest.len() == rel.len() + 1 && rest[rel.len()] == METADATA_FILE;
            let entry = dirs
                .entry(rel.iter().map(|s| s.to_string()).collect())
                .or_default();
            *entry |= complete;
        }
    }
    let mut report = MirrorReport::default();
    let mut valid = Vec::new();
    for (rel, complete) in dirs {
        let dir = join(&src_root, &rel);
        let path = super::uri(src, &dir);
        if !complete {
            report.skipped.push(SkippedState {
                path,
                reason: "incomplete: no _metadata".into(),
            });
            continue;
        }
        let bytes = match src_store.get(&dir.join_valid(METADATA_FILE)).await {
            Ok(Some(bytes)) => bytes,
            // Deleted by retention since the listing.
            Ok(None) => continue,
            Err(e) => {
                report.skipped.push(SkippedState {
                    path,
                    reason: super::chain(&e),
                });
                continue;
            }
        };
        match check_place(&rel, &bytes) {
            Ok(created) => valid.push((created, rel, bytes)),
            Err(e) => report.skipped.push(SkippedState {
                path,
                reason: format!("damaged _metadata: {}", super::chain(&e)),
            }),
        }
    }
    valid.sort_by_key(|v| std::cmp::Reverse(v.0));
    let dst_root = dst.key();
    for (_, rel, bytes) in valid {
        let dir = join(&dst_root, &rel);
        match copy_metadata(dst_store, &dir, &bytes, |k| super::uri(dst, k)).await {
            Ok((Copied::Written, _)) => report.copied.push(super::uri(dst, &dir)),
            Ok((Copied::AlreadyThere, _)) => report.present += 1,
            Err(e) => report.failed.push((super::uri(dst, &dir), e)),
        }
    }
    Ok(report)
}
