//! Periodic-savepoint retention: in a savepoint directory, keep the newest
//! `keep` periodic savepoints of one replication (same source table, source
//! and sink clusters) and delete the older ones. User savepoints (no
//! `periodic` flag in their `_metadata`), other jobs' savepoints and
//! anything that does not decode are never touched.

use std::collections::BTreeMap;

use crate::checkpoint::{
    decode_metadata, is_savepoint_dir_name, JobState, StateKey, StateStore, METADATA_FILE,
};

/// What a pruning pass did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PruneReport {
    /// Periodic savepoints kept, newest first (directory keys).
    pub kept: Vec<StateKey>,
    /// Periodic savepoints deleted.
    pub deleted: Vec<StateKey>,
    /// Problems met (the pass goes on; nothing fails because of them).
    pub errors: Vec<String>,
}

/// Whether `a` and `b` are states of the same replication.
fn same_replication(a: &JobState, b: &JobState) -> bool {
    a.table_name == b.table_name
        && a.source_masters == b.source_masters
        && a.sink_masters == b.sink_masters
}

/// Keeps the newest `keep` periodic savepoints like `like` under `dir` (by
/// creation time) and deletes the others: `_metadata` first, so a
/// half-deleted savepoint is merely incomplete.
pub async fn prune_periodic_savepoints(
    store: &dyn StateStore,
    dir: &StateKey,
    like: &JobState,
    keep: usize,
) -> PruneReport {
    let mut report = PruneReport::default();
    let listing = match store.list(dir).await {
        Ok(listing) => listing,
        Err(e) => {
            report.errors.push(super::chain(&e));
            return report;
        }
    };
    // savepoint directory -> every key in it.
    let mut dirs: BTreeMap<StateKey, Vec<StateKey>> = BTreeMap::new();
    for key in &listing {
        let Some(rest) = key.strip_prefix(dir) else {
            continue;
        };
        if let Some(name) = rest.first().filter(|n| is_savepoint_dir_name(n)) {
            dirs.entry(dir.join_valid(name))
                .or_default()
                .push(key.clone());
        }
    }
    let mut periodic: Vec<(u64, StateKey)> = Vec::new();
    for (sp_dir, keys) in &dirs {
        let meta = sp_dir.join_valid(METADATA_FILE);
        if !keys.contains(&meta) {
            continue;
        }
        match store.get(&meta).await {
            Ok(Some(bytes)) => match decode_metadata(&bytes) {
                Ok(state) if state.periodic && same_replication(&state, like) => {
                    periodic.push((state.created_at_ms, sp_dir.clone()));
                }
                _ => {}
            },
            Ok(None) => {}
            Err(e) => report.errors.push(super::chain(&e)),
        }
    }
    periodic.sort_by(|a, b| b.cmp(a));
    for (i, (_, sp_dir)) in periodic.into_iter().enumerate() {
        if i < keep {
            report.kept.push(sp_dir);
            continue;
        }
        let meta = sp_dir.join_valid(METADATA_FILE);
        let rest = dirs
            .get(&sp_dir)
            .into_iter()
            .flatten()
            .filter(|k| **k != meta);
        let mut ok = true;
        for key in std::iter::once(&meta).chain(rest) {
            if let Err(e) = store.delete(key).await {
                report.errors.push(super::chain(&e));
                ok = false;
                break;
            }
        }
        if ok {
            report.deleted.push(sp_dir);
        }
    }
    report
}
