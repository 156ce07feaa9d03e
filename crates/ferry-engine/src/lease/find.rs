//! [`find_newest`]: the newest complete, valid savepoint or checkpoint of a
//! job in a store — what `ferry failover` and `ferry standby` start from.
//!
//! It looks in the three places state lands (see HELPERS' layout):
//! `L/<job-id>/chk-<N>/`, `L/savepoints/savepoint-*/` and `L/savepoint-*/`.
//! Every candidate's `_metadata` is read and checked (magic, length,
//! CRC32C, invariants, and that it is where it claims to be); the newest is
//! chosen by what the state records — its last completed window end, then
//! the open window's end — never by names or listing order, which say
//! nothing about a copy made by a replicator or by hand. Directories
//! without `_metadata` (in progress, torn copies) and damaged ones are
//! listed as skipped, each with a warning naming it.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use futures::StreamExt;

use crate::checkpoint::{
    decode_metadata, is_savepoint_dir_name, parse_checkpoint_dir_name, JobId, JobState,
    SnapshotKind, StateKey, StateStore, StorageLocation, StoreError, METADATA_FILE,
};
use crate::time::SourceTime;

/// `_metadata` reads in flight at once during a search.
const READ_AHEAD: usize = 16;

/// A usable state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FoundState {
    /// Its directory (what `ferry run -s` takes).
    pub location: StorageLocation,
    /// The decoded state.
    pub state: JobState,
}

impl FoundState {
    /// The end of the newest window the state covers: the open window's
    /// end, else the last completed one's (on the source's clock).
    pub fn window_end(&self) -> Option<SourceTime> {
        self.state
            .window
            .map(|w| w.end_timestamp)
            .or(self.state.last_end_timestamp)
    }

    /// Ordering: last completed window end, then the open window's end,
    /// then (same windows) the later checkpoint number and creation time.
    fn order_key(&self) -> (Option<SourceTime>, Option<SourceTime>, u64, u64) {
        let s = &self.state;
        (
            s.last_end_timestamp,
            s.window.map(|w| w.end_timestamp),
            s.checkpoint_id,
            s.created_at_ms,
        )
    }
}

/// A directory that was passed over, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkippedState {
    /// The directory.
    pub location: StorageLocation,
    /// Why (no `_metadata`, damaged, belongs elsewhere, newer format …).
    pub reason: String,
}

/// What a search found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Search {
    /// The newest valid state, if any.
    pub newest: Option<FoundState>,
    /// Every valid state, newest first.
    pub valid: Vec<FoundState>,
    /// Directories passed over.
    pub skipped: Vec<SkippedState>,
    /// How long the listing took (the rest is reading and verifying).
    pub listed_in: Duration,
    /// States taken from `known` instead of being read again.
    pub reused: usize,
}

/// The listing or a read failed.
#[derive(Debug, thiserror::Error)]
#[error("cannot search '{path}' for state")]
pub struct FindError {
    /// What was being read.
    pub path: String,
    /// The store's error.
    #[source]
    pub source: StoreError,
}

/// One candidate directory from the listing.
#[derive(Debug, Default)]
struct Dir {
    kind: Option<SnapshotKind>,
    /// The job id the path names (checkpoints only).
    job: Option<JobId>,
    checkpoint_id: Option<u64>,
    has_metadata: bool,
}

/// Searches `location` (in `store`) for the newest complete, valid state of
/// `job` (any job if `None`: then the location must hold one job's state).
pub async fn find_newest(
    store: &dyn StateStore,
    location: &StorageLocation,
    job: Option<JobId>,
) -> Result<Search, FindError> {
    find_newest_reusing(store, location, job, &[]).await
}

/// [`find_newest`], taking states found by an earlier search from `known`
/// instead of reading them again: `_metadata` is create-only and never
/// rewritten, so a directory still listed with it still holds that state.
/// This is how a standby keeps the newest state pre-loaded.
pub async fn find_newest_reusing(
    store: &dyn StateStore,
    location: &StorageLocation,
    job: Option<JobId>,
    known: &[FoundState],
) -> Result<Search, FindError> {
    let started = Instant::now();
    let root = location.key();
    let listing = store.list(&root).await.map_err(|source| FindError {
        path: location.to_string(),
        source,
    })?;
    let dirs = group(&root, &listing, job);
    let mut search = Search {
        listed_in: started.elapsed(),
        ..Search::default()
    };
    let mut read = read_metadata(store, location, &dirs, known)
        .await
        .into_iter();
    for (dir_key, dir) in dirs {
        let fetched = read.next().flatten();
        let dir_location = location.with_key(dir_key.clone());
        if dir.has_metadata {
            if let Some(found) = known.iter().find(|f| f.location == dir_location) {
                search.valid.push(found.clone());
                search.reused += 1;
                continue;
            }
        }
        let skip = |reason: String| SkippedState {
            location: dir_location.clone(),
            reason,
        };
        if !dir.has_metadata {
            search
                .skipped
                .push(skip("incomplete: it has no _metadata".into()));
            continue;
        }
        let meta = dir_key.join_valid(METADATA_FILE);
        let Some(fetched) = fetched else {
            continue;
        };
        let bytes = match fetched {
            Ok(Some(bytes)) => bytes,
            Ok(None) => {
                search
                    .skipped
                    .push(skip("its _metadata vanished while searching".into()));
                continue;
            }
            Err(source) => {
                return Err(FindError {
                    path: location.with_key(meta.clone()).to_string(),
                    source,
                })
            }
        };
        match decode_metadata(&bytes)
            .map_err(|e| e.to_string())
            .and_then(|state| check(&dir, job, state))
        {
            Ok(state) => search.valid.push(FoundState {
                location: dir_location,
                state,
            }),
            Err(reason) => search.skipped.push(skip(reason)),
        }
    }
    for s in &search.skipped {
        tracing::warn!(path = %s.location, reason = %s.reason, "skipping state");
    }
    sort_newest_first(&mut search.valid);
    search.newest = search.valid.first().cloned();
    Ok(search)
}

/// Every candidate's `_metadata` (`None` for a directory without one or a
/// state `known` already), in `dirs` order. Each is still read and checked
/// (a torn or damaged state must never be chosen, and names or ids say
/// nothing about window ends: a restore from an older savepoint continues
/// the numbering), but up to READ_AHEAD at a time: a search costs a few
/// round trips to a remote bucket, not one per state.
async fn read_metadata(
    store: &dyn StateStore,
    location: &StorageLocation,
    dirs: &BTreeMap<StateKey, Dir>,
    known: &[FoundState],
) -> Vec<Option<Result<Option<bytes::Bytes>, StoreError>>> {
    let reads = dirs.iter().map(|(dir_key, dir)| {
        let location = location.with_key(dir_key.clone());
        let skip = !dir.has_metadata || known.iter().any(|f| f.location == location);
        let meta = dir_key.join_valid(METADATA_FILE);
        async move {
            if skip {
                None
            } else {
                Some(store.get(&meta).await)
            }
        }
    });
    futures::stream::iter(reads)
        .buffered(READ_AHEAD)
        .collect::<Vec<_>>()
        .await
}

/// Sorts states newest first by what they record (see [`find_newest`]).
pub fn sort_newest_first(states: &mut [FoundState]) {
    states.sort_by_key(|s| std::cmp::Reverse(s.order_key()));
}

/// A decoded state must be what its directory says it is.
fn check(dir: &Dir, job: Option<JobId>, state: JobState) -> Result<JobState, String> {
    if dir.kind != Some(state.kind) {
        return Err(format!(
            "it holds a {} in a {} directory",
            state.kind,
            dir.kind.map_or("?".into(), |k| k.to_string())
        ));
    }
    if let Some(path_job) = dir.job {
        if state.job_id != path_job {
            return Err(format!(
                "it belongs to job {}, not {path_job}",
                state.job_id
            ));
        }
    }
    if let Some(n) = dir.checkpoint_id {
        if state.checkpoint_id != n {
            return Err(format!("it is checkpoint {}, not {n}", state.checkpoint_id));
        }
    }
    match job {
        Some(job) if state.job_id != job => Err(format!("it belongs to job {}", state.job_id)),
        _ => Ok(state),
    }
}

/// Groups a listing into candidate directories (pure, no I/O).
fn group(root: &StateKey, listing: &[StateKey], job: Option<JobId>) -> BTreeMap<StateKey, Dir> {
    let mut dirs: BTreeMap<StateKey, Dir> = BTreeMap::new();
    let job_short = job.map(|j| j.short());
    let savepoint_of_job = |name: &str| {
        is_savepoint_dir_name(name)
            && job_short.as_deref().is_none_or(|s| {
                name.strip_prefix("savepoint-")
                    .is_some_and(|n| n.starts_with(s))
            })
    };
    for key in listing {
        let Some(rest) = key.strip_prefix(root) else {
            continue;
        };
        let (depth, dir) = match rest.as_slice() {
            [j, chk, _, ..] => match (j.parse::<JobId>(), parse_checkpoint_dir_name(chk)) {
                (Ok(path_job), Some(n)) if job.is_none_or(|j| j == path_job) => (
                    2,
                    Dir {
                        kind: Some(SnapshotKind::Checkpoint),
                        job: Some(path_job),
                        checkpoint_id: Some(n),
                        has_metadata: false,
                    },
                ),
                _ if *j == "savepoints" && savepoint_of_job(chk) => (
                    2,
                    Dir {
                        kind: Some(SnapshotKind::Savepoint),
                        ..Dir::default()
                    },
                ),
                _ if savepoint_of_job(j) => (
                    1,
                    Dir {
                        kind: Some(SnapshotKind::Savepoint),
                        ..Dir::default()
                    },
                ),
                _ => continue,
            },
            [sp, _] if savepoint_of_job(sp) => (
                1,
                Dir {
                    kind: Some(SnapshotKind::Savepoint),
                    ..Dir::default()
                },
            ),
            _ => continue,
        };
        let dir_key = rest[..depth]
            .iter()
            .fold(root.clone(), |k, seg| k.join_valid(seg));
        let is_metadata = rest.len() == depth + 1 && rest[depth] == METADATA_FILE;
        let entry = dirs.entry(dir_key).or_insert(dir);
        entry.has_metadata |= is_metadata;
    }
    dirs
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checkpoint::{encode_metadata, MemoryStateStore, WindowState};

    const JOB: &str = "00112233445566778899aabbccddeeff";

    fn state(kind: SnapshotKind, id: u64, last_end: u64, window_end: Option<u64>) -> JobState {
        let mut s = JobState::new(JOB.parse().expect("id"), kind, id, "t", vec![], vec![]);
        let t = crate::time::SourceTime::from_raw;
        s.last_end_timestamp = Some(t(last_end));
        s.window = window_end.map(|end| WindowState {
            start_timestamp: Some(t(last_end)),
            end_timestamp: t(end),
        });
        s
    }

    fn put(store: &MemoryStateStore, path: &str, bytes: Vec<u8>) {
        store.overwrite(&StateKey::parse(path).expect("key"), bytes);
    }

    fn meta(s: &JobState) -> Vec<u8> {
        encode_metadata(s).expect("encode")
    }

    fn names(search: &Search) -> Vec<String> {
        search
            .valid
            .iter()
            .map(|f| f.location.to_string())
            .collect()
    }

    #[tokio::test]
    async fn newest_by_recorded_window_end_not_by_name() {
        let store = MemoryStateStore::new();
        // chk-9 is the highest number but holds the oldest windows (a
        // copy from before a restore); the savepoint is the newest.
        put(
            &store,
            &format!("dr/{JOB}/chk-9/_metadata"),
            meta(&state(SnapshotKind::Checkpoint, 9, 100, None)),
        );
        put(
            &store,
            &format!("dr/{JOB}/chk-3/_metadata"),
            meta(&state(SnapshotKind::Checkpoint, 3, 300, Some(400))),
        );
        put(
            &store,
            "dr/savepoints/savepoint-001122-aaaaaaaaaaaa/_metadata",
            meta(&state(SnapshotKind::Savepoint, 2, 300, Some(500))),
        );
        put(
            &store,
            "dr/savepoint-001122-bbbbbbbbbbbb/_metadata",
            meta(&state(SnapshotKind::Savepoint, 1, 200, None)),
        );
        let loc = StorageLocation::parse("/dr").expect("loc");
        let job = Some(JOB.parse().expect("id"));
        let search = find_newest(&store, &loc, job).await.expect("search");
        assert_eq!(
            names(&search),
            [
                "/dr/savepoints/savepoint-001122-aaaaaaaaaaaa",
                format!("/dr/{JOB}/chk-3").as_str(),
                "/dr/savepoint-001122-bbbbbbbbbbbb",
                format!("/dr/{JOB}/chk-9").as_str(),
            ]
        );
        assert_eq!(
            search.newest.as_ref().and_then(FoundState::window_end),
            Some(SourceTime::from_raw(500))
        );
        assert!(search.skipped.is_empty());
        // A second search reuses what the first verified.
        let again = find_newest_reusing(&store, &loc, job, &search.valid)
            .await
            .expect("search");
        assert_eq!((again.reused, again.newest), (4, search.newest));
    }

    #[tokio::test]
    async fn torn_and_corrupt_states_are_skipped_with_a_reason() {
        let store = MemoryStateStore::new();
        put(
            &store,
            &format!("dr/{JOB}/chk-1/_metadata"),
            meta(&state(SnapshotKind::Checkpoint, 1, 100, None)),
        );
        // Newer, but truncated.
        let mut truncated = meta(&state(SnapshotKind::Checkpoint, 2, 900, None));
        truncated.truncate(truncated.len() / 2);
        put(&store, &format!("dr/{JOB}/chk-2/_metadata"), truncated);
        // Newer, but without _metadata.
        put(&store, &format!("dr/{JOB}/chk-3/part"), b"x".to_vec());
        // Newer, but one byte flipped.
        let mut flipped = meta(&state(SnapshotKind::Savepoint, 4, 950, None));
        let mid = flipped.len() / 2;
        flipped[mid] ^= 0x01;
        put(
            &store,
            "dr/savepoints/savepoint-001122-cccccccccccc/_metadata",
            flipped,
        );
        // A checkpoint copied into another number's directory.
        put(
            &store,
            &format!("dr/{JOB}/chk-7/_metadata"),
            meta(&state(SnapshotKind::Checkpoint, 5, 990, None)),
        );
        let loc = StorageLocation::parse("/dr").expect("loc");
        let search = find_newest(&store, &loc, None).await.expect("search");
        assert_eq!(names(&search), [format!("/dr/{JOB}/chk-1")]);
        let mut skipped: Vec<(String, String)> = search
            .skipped
            .iter()
            .map(|s| (s.location.to_string(), s.reason.clone()))
            .collect();
        skipped.sort();
        assert_eq!(skipped.len(), 4, "{skipped:?}");
        assert!(
            skipped[0].0.ends_with("chk-2") && skipped[0].1.contains("truncated"),
            "{skipped:?}"
        );
        assert!(
            skipped[1].0.ends_with("chk-3") && skipped[1].1.contains("no _metadata"),
            "{skipped:?}"
        );
        assert!(
            skipped[2].0.ends_with("chk-7") && skipped[2].1.contains("not 7"),
            "{skipped:?}"
        );
        assert!(
            skipped[3].0.ends_with("savepoint-001122-cccccccccccc")
                && skipped[3].1.contains("checksum"),
            "{skipped:?}"
        );
    }

    #[test]
    fn the_generation_round_trips_and_is_left_out_when_zero() {
        let mut s = state(SnapshotKind::Checkpoint, 1, 100, None);
        assert!(!String::from_utf8_lossy(&meta(&s)).contains("generation"));
        s.generation = 3;
        let back = decode_metadata(&meta(&s)).expect("decode");
        assert_eq!(back.generation, 3);
    }

    #[tokio::test]
    async fn other_jobs_and_an_empty_store() {
        let store = MemoryStateStore::new();
        let loc = StorageLocation::parse("/dr").expect("loc");
        let search = find_newest(&store, &loc, None).await.expect("search");
        assert!(search.newest.is_none() && search.skipped.is_empty());
        let other = "ffeeddccbbaa99887766554433221100";
        let mut s = state(SnapshotKind::Checkpoint, 1, 100, None);
        s.job_id = other.parse().expect("id");
        put(&store, &format!("dr/{other}/chk-1/_metadata"), meta(&s));
        let job = Some(JOB.parse().expect("id"));
        let search = find_newest(&store, &loc, job).await.expect("search");
        assert!(search.newest.is_none(), "{search:?}");
        let search = find_newest(&store, &loc, None).await.expect("search");
        assert_eq!(search.valid.len(), 1);
    }
}
