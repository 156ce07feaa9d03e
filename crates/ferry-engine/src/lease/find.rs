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
//!
//! [`find_latest`] makes the same choice without reading every state (what
//! a failover and a takeover use): most recently written first, stopping
//! once the rest are older than the newest valid one.

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
    /// States not read ([`find_latest`]): written well before the newest
    /// valid state was created, so none of them is newer.
    pub unread: usize,
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
    /// When its `_metadata` was written, if the store says.
    modified: Option<u64>,
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
    let listing = store
        .list_modified(&root)
        .await
        .map_err(|source| FindError {
            path: location.to_string(),
            source,
        })?;
    let dirs = group(&root, &listing, job);
    let mut search = Search {
        listed_in: started.elapsed(),
        ..Search::default()
    };
    let read = read_metadata(store, location, &dirs, known).await;
    for ((dir_key, dir), fetched) in dirs.into_iter().zip(read) {
        let verdict = judge(location, job, known, dir_key, &dir, fetched)?;
        search.note(verdict);
    }
    Ok(search.finish())
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

/// What one candidate directory turned out to be.
enum Verdict {
    Valid(FoundState),
    /// Taken from the states an earlier search verified.
    Reused(FoundState),
    Skipped(SkippedState),
}

impl Search {
    fn note(&mut self, verdict: Verdict) {
        match verdict {
            Verdict::Valid(found) => self.valid.push(found),
            Verdict::Reused(found) => {
                self.valid.push(found);
                self.reused += 1;
            }
            Verdict::Skipped(skipped) => self.skipped.push(skipped),
        }
    }

    /// Warns about each skipped directory, sorts the valid states and
    /// names the newest.
    fn finish(mut self) -> Self {
        for s in &self.skipped {
            tracing::warn!(path = %s.location, reason = %s.reason, "skipping state");
        }
        sort_newest_first(&mut self.valid);
        self.newest = self.valid.first().cloned();
        self
    }
}

/// Judges one candidate: reused from `known`, or its `_metadata` (`fetched`:
/// `None` when it was not read) decoded and checked.
fn judge(
    location: &StorageLocation,
    job: Option<JobId>,
    known: &[FoundState],
    dir_key: StateKey,
    dir: &Dir,
    fetched: Option<Result<Option<bytes::Bytes>, StoreError>>,
) -> Result<Verdict, FindError> {
    let dir_location = location.with_key(dir_key.clone());
    let skip = |reason: &str| {
        Ok(Verdict::Skipped(SkippedState {
            location: dir_location.clone(),
            reason: reason.to_string(),
        }))
    };
    if !dir.has_metadata {
        return skip("incomplete: it has no _metadata");
    }
    if let Some(found) = known.iter().find(|f| f.location == dir_location) {
        return Ok(Verdict::Reused(found.clone()));
    }
    let bytes = match fetched {
        Some(Ok(Some(bytes))) => bytes,
        Some(Ok(None)) | None => return skip("its _metadata vanished while searching"),
        Some(Err(source)) => {
            let meta = dir_key.join_valid(METADATA_FILE);
            return Err(FindError {
                path: location.with_key(meta).to_string(),
                source,
            });
        }
    };
    match decode_metadata(&bytes)
        .map_err(|e| e.to_string())
        .and_then(|state| check(dir, job, state))
    {
        Ok(state) => Ok(Verdict::Valid(FoundState {
            location: dir_location,
            state,
        })),
        Err(reason) => skip(&reason),
    }
}

/// How far the clock of a machine that writes states may be ahead of the
/// store's (plus the whole second some stores round last-modified times
/// to): [`find_latest`] reads every state written up to this long before
/// the newest valid one was created.
pub const CLOCK_SLACK: Duration = Duration::from_secs(10);

/// [`find_newest_reusing`] without reading every state: what `ferry
/// failover` and a standby's takeover use.
///
/// The listing says when each `_metadata` was written (`_metadata` is
/// written last, create-only); candidates are read most recently written
/// first (unknown times first, then the higher checkpoint number), one at
/// a time until one is valid (a damaged newest falls back to the next).
/// A copy is written no earlier than its state was created, so a state
/// whose `_metadata` was written more than [`CLOCK_SLACK`] before the
/// newest valid state read so far was created is older than that state
/// and is not read (counted in [`Search::unread`]); the others are read
/// at once. Among the states read, the newest is chosen as
/// [`find_newest`] chooses (recorded window ends). The choice equals
/// `find_newest`'s when window ends grow with creation, as they do in one
/// job's run; after a restore from an older state it is the restored
/// run's newest state once the earlier run's states are older than the
/// slack.
pub async fn find_latest(
    store: &dyn StateStore,
    location: &StorageLocation,
    job: Option<JobId>,
    known: &[FoundState],
) -> Result<Search, FindError> {
    let started = Instant::now();
    let root = location.key();
    let listing = store
        .list_modified(&root)
        .await
        .map_err(|source| FindError {
            path: location.to_string(),
            source,
        })?;
    let mut search = Search {
        listed_in: started.elapsed(),
        ..Search::default()
    };
    let mut candidates = Vec::new();
    for (dir_key, dir) in group(&root, &listing, job) {
        if dir.has_metadata {
            candidates.push((dir_key, dir));
        } else {
            search.note(judge(location, job, known, dir_key, &dir, None)?);
        }
    }
    candidates
        .sort_by_key(|(_, d)| std::cmp::Reverse((d.modified.unwrap_or(u64::MAX), d.checkpoint_id)));
    let mut rest = candidates.into_iter();
    let mut newest_created = None;
    for (dir_key, dir) in rest.by_ref() {
        let fetched = read_one(store, location, known, &dir_key).await;
        let verdict = judge(location, job, known, dir_key, &dir, fetched)?;
        if let Verdict::Valid(f) | Verdict::Reused(f) = &verdict {
            newest_created = Some(f.state.created_at_ms);
        }
        search.note(verdict);
        if newest_created.is_some() {
            break;
        }
    }
    let rest: Vec<(StateKey, Dir)> = rest.collect();
    let slack = u64::try_from(CLOCK_SLACK.as_millis()).unwrap_or(u64::MAX);
    // Sorted newest written first, so the ones that may be newer lead.
    let may_be_newer = newest_created.map_or(rest.len(), |created| {
        rest.iter()
            .take_while(|(_, d)| d.modified.is_none_or(|m| m.saturating_add(slack) > created))
            .count()
    });
    search.unread = rest.len() - may_be_newer;
    let read: BTreeMap<StateKey, Dir> = rest.into_iter().take(may_be_newer).collect();
    let fetched = read_metadata(store, location, &read, known).await;
    for ((dir_key, dir), fetched) in read.into_iter().zip(fetched) {
        search.note(judge(location, job, known, dir_key, &dir, fetched)?);
    }
    Ok(search.finish())
}

/// One candidate's `_metadata` (`None` for a state `known` already).
async fn read_one(
    store: &dyn StateStore,
    location: &StorageLocation,
    known: &[FoundState],
    dir_key: &StateKey,
) -> Option<Result<Option<bytes::Bytes>, StoreError>> {
    if known
        .iter()
        .any(|f| f.location == location.with_key(dir_key.clone()))
    {
        return None;
    }
    Some(store.get(&dir_key.join_valid(METADATA_FILE)).await)
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
fn group(
    root: &StateKey,
    listing: &[(StateKey, Option<u64>)],
    job: Option<JobId>,
) -> BTreeMap<StateKey, Dir> {
    let mut dirs: BTreeMap<StateKey, Dir> = BTreeMap::new();
    let job_short = job.map(|j| j.short());
    let savepoint_of_job = |name: &str| {
        is_savepoint_dir_name(name)
            && job_short.as_deref().is_none_or(|s| {
                name.strip_prefix("savepoint-")
                    .is_some_and(|n| n.starts_with(s))
            })
    };
    for (key, modified) in listing {
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
                        ..Dir::default()
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
        if is_metadata {
            entry.has_metadata = true;
            entry.modified = *modified;
        }
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

    /// Counts the `_metadata` reads of a search.
    #[derive(Debug, Default)]
    struct Counting {
        inner: MemoryStateStore,
        reads: std::sync::atomic::AtomicUsize,
    }

    impl Counting {
        fn reads(&self) -> usize {
            self.reads.swap(0, std::sync::atomic::Ordering::SeqCst)
        }

        /// Plants `s`'s `_metadata` at `path` (bytes `meta` if given),
        /// written at `modified`.
        fn plant(&self, path: &str, s: &JobState, modified: u64, bytes: Option<Vec<u8>>) {
            let key = StateKey::parse(path).expect("key");
            self.inner.overwrite(&key, bytes.unwrap_or_else(|| meta(s)));
            self.inner.set_modified(&key, modified);
        }
    }

    impl StateStore for Counting {
        fn put_if_absent<'a>(
            &'a self,
            key: &'a StateKey,
            bytes: bytes::Bytes,
        ) -> crate::checkpoint::StoreFuture<'a, ()> {
            self.inner.put_if_absent(key, bytes)
        }
        fn put<'a>(
            &'a self,
            key: &'a StateKey,
            bytes: bytes::Bytes,
        ) -> crate::checkpoint::StoreFuture<'a, ()> {
            self.inner.put(key, bytes)
        }
        fn get<'a>(
            &'a self,
            key: &'a StateKey,
        ) -> crate::checkpoint::StoreFuture<'a, Option<bytes::Bytes>> {
            if key.segments().last() == Some(METADATA_FILE) {
                self.reads.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            }
            self.inner.get(key)
        }
        fn list<'a>(
            &'a self,
            prefix: &'a StateKey,
        ) -> crate::checkpoint::StoreFuture<'a, Vec<StateKey>> {
            self.inner.list(prefix)
        }
        fn list_modified<'a>(
            &'a self,
            prefix: &'a StateKey,
        ) -> crate::checkpoint::StoreFuture<'a, Vec<(StateKey, Option<u64>)>> {
            self.inner.list_modified(prefix)
        }
        fn delete<'a>(&'a self, key: &'a StateKey) -> crate::checkpoint::StoreFuture<'a, ()> {
            self.inner.delete(key)
        }
    }

    const MINUTE: u64 = 60_000;
    const T0: u64 = 1_800_000_000_000;

    /// 30 checkpoints a minute apart (the newest written last) and 8
    /// savepoints among them, as a long-running job's DR store holds.
    fn long_history() -> Counting {
        let store = Counting::default();
        for id in 1..=30u64 {
            let mut s = state(SnapshotKind::Checkpoint, id, id * 100, None);
            s.created_at_ms = T0 + id * MINUTE;
            // The replica's copy lands a little after the state's creation.
            let written = s.created_at_ms + 700;
            store.plant(&format!("dr/{JOB}/chk-{id}/_metadata"), &s, written, None);
            if id % 4 == 0 && id < 30 {
                let mut sp = state(SnapshotKind::Savepoint, id, id * 100 + 50, None);
                sp.created_at_ms = T0 + id * MINUTE + 30_000;
                let path = format!("dr/savepoints/savepoint-001122-{id:012}/_metadata");
                store.plant(&path, &sp, sp.created_at_ms + 900, None);
            }
        }
        store
    }

    #[tokio::test]
    async fn find_latest_reads_only_the_newest_of_many_states() {
        let store = long_history();
        let loc = StorageLocation::parse("/dr").expect("loc");
        let job = Some(JOB.parse().expect("id"));
        let full = find_newest(&store, &loc, job).await.expect("search");
        assert_eq!(store.reads(), 37, "the full search reads every state");
        let latest = find_latest(&store, &loc, job, &[]).await.expect("search");
        assert_eq!(store.reads(), 1, "{latest:?}");
        assert_eq!(latest.newest, full.newest);
        assert_eq!(
            latest.newest.as_ref().map(|f| f.location.to_string()),
            Some(format!("/dr/{JOB}/chk-30"))
        );
        assert_eq!((latest.valid.len(), latest.unread), (1, 36));
        assert!(latest.skipped.is_empty());

        // Stopped with a savepoint after its last checkpoint: the
        // savepoint is written last and is the newest.
        let mut sp = state(SnapshotKind::Savepoint, 31, 3_050, None);
        sp.created_at_ms = T0 + 31 * MINUTE;
        let path = "dr/savepoints/savepoint-001122-ffffffffffff/_metadata";
        store.plant(path, &sp, sp.created_at_ms + 500, None);
        let latest = find_latest(&store, &loc, job, &[]).await.expect("search");
        assert_eq!(store.reads(), 1);
        assert_eq!(
            latest.newest.as_ref().map(|f| f.location.to_string()),
            Some("/dr/savepoints/savepoint-001122-ffffffffffff".to_string())
        );
        let full = find_newest(&store, &loc, job).await.expect("search");
        assert_eq!(latest.newest, full.newest);
    }

    #[tokio::test]
    async fn find_latest_falls_back_past_a_damaged_newest_state() {
        let store = long_history();
        let mut s = state(SnapshotKind::Checkpoint, 31, 3_100, None);
        s.created_at_ms = T0 + 31 * MINUTE;
        let mut flipped = meta(&s);
        let mid = flipped.len() / 2;
        flipped[mid] ^= 0x01;
        store.plant(
            &format!("dr/{JOB}/chk-31/_metadata"),
            &s,
            s.created_at_ms + 700,
            Some(flipped),
        );
        // And one without _metadata (in progress): never read.
        store.inner.overwrite(
            &StateKey::parse(&format!("dr/{JOB}/chk-32/part-0")).expect("key"),
            b"x".to_vec(),
        );
        let loc = StorageLocation::parse("/dr").expect("loc");
        let job = Some(JOB.parse().expect("id"));
        let latest = find_latest(&store, &loc, job, &[]).await.expect("search");
        assert_eq!(store.reads(), 2, "{latest:?}");
        assert_eq!(
            latest.newest.as_ref().map(|f| f.location.to_string()),
            Some(format!("/dr/{JOB}/chk-30"))
        );
        let mut skipped: Vec<(String, String)> = latest
            .skipped
            .iter()
            .map(|s| (s.location.to_string(), s.reason.clone()))
            .collect();
        skipped.sort();
        assert_eq!(skipped.len(), 2, "{skipped:?}");
        assert!(skipped[0].0.ends_with("chk-31") && skipped[0].1.contains("checksum"));
        assert!(skipped[1].0.ends_with("chk-32") && skipped[1].1.contains("no _metadata"));
        // A standby's next search reuses what it verified: no read at all.
        let again = find_latest(&store, &loc, job, &latest.valid)
            .await
            .expect("search");
        assert_eq!(store.reads(), 1, "only the damaged one is read again");
        assert_eq!((again.newest, again.reused), (latest.newest, 1));
    }

    #[tokio::test]
    async fn find_latest_reads_every_state_that_may_be_newer() {
        // A mirror copied the whole history at once: every copy was written
        // after every state was created, so each may be the newest and the
        // choice is by recorded window end, as the full search makes it.
        let store = long_history();
        let now = T0 + 40 * MINUTE;
        let listed = store
            .inner
            .list(&StateKey::parse("dr").expect("key"))
            .await
            .expect("list");
        for (n, key) in listed.iter().enumerate() {
            store.inner.set_modified(key, now + n as u64);
        }
        let loc = StorageLocation::parse("/dr").expect("loc");
        let job = Some(JOB.parse().expect("id"));
        let latest = find_latest(&store, &loc, job, &[]).await.expect("search");
        assert_eq!((store.reads(), latest.unread), (37, 0));
        let full = find_newest(&store, &loc, job).await.expect("search");
        assert_eq!(latest.newest, full.newest);
        assert_eq!(latest.valid, full.valid);
        // A store that reports no times: every state is read.
        let plain = MemoryStateStore::new();
        for (key, bytes) in &[
            (format!("dr/{JOB}/chk-1/_metadata"), 100),
            (format!("dr/{JOB}/chk-2/_metadata"), 200),
        ] {
            let id = if *bytes == 100 { 1 } else { 2 };
            put(
                &plain,
                key,
                meta(&state(SnapshotKind::Checkpoint, id, *bytes, None)),
            );
        }
        let untimed = Untimed(plain);
        let latest = find_latest(&untimed, &loc, job, &[]).await.expect("search");
        assert_eq!((latest.valid.len(), latest.unread), (2, 0));
        assert_eq!(latest.newest.map(|f| f.state.checkpoint_id), Some(2));
    }

    /// A store that knows no last-modified times (the trait's default).
    #[derive(Debug)]
    struct Untimed(MemoryStateStore);

    impl StateStore for Untimed {
        fn put_if_absent<'a>(
            &'a self,
            key: &'a StateKey,
            bytes: bytes::Bytes,
        ) -> crate::checkpoint::StoreFuture<'a, ()> {
            self.0.put_if_absent(key, bytes)
        }
        fn put<'a>(
            &'a self,
            key: &'a StateKey,
            bytes: bytes::Bytes,
        ) -> crate::checkpoint::StoreFuture<'a, ()> {
            self.0.put(key, bytes)
        }
        fn get<'a>(
            &'a self,
            key: &'a StateKey,
        ) -> crate::checkpoint::StoreFuture<'a, Option<bytes::Bytes>> {
            self.0.get(key)
        }
        fn list<'a>(
            &'a self,
            prefix: &'a StateKey,
        ) -> crate::checkpoint::StoreFuture<'a, Vec<StateKey>> {
            self.0.list(prefix)
        }
        fn delete<'a>(&'a self, key: &'a StateKey) -> crate::checkpoint::StoreFuture<'a, ()> {
            self.0.delete(key)
        }
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
