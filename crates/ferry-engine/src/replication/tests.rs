//! Unit tests of the replicator, retention and mirror over in-memory
//! stores (the end-to-end test with real Kudu is
//! crates/ferry/tests/state_replication.rs).

use std::num::NonZeroUsize;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;

use super::*;
use crate::checkpoint::{
    encode_metadata, JobState, MemoryStateStore, SnapshotKind, StoreError, StoreFuture,
};

fn loc(path: &str) -> StorageLocation {
    StorageLocation::parse(path).expect("valid")
}

fn key(s: &str) -> StateKey {
    StateKey::parse(s).expect("valid key")
}

fn state(job: JobId, kind: SnapshotKind, id: u64, periodic: bool) -> JobState {
    let mut s = JobState::new(
        job,
        kind,
        id,
        "t",
        vec!["src:7051".into()],
        vec!["dst:7051".into()],
    );
    s.periodic = periodic;
    s
}

fn bytes_of(s: &JobState) -> Bytes {
    Bytes::from(encode_metadata(s).expect("encode"))
}

fn checkpoint(job: JobId, id: u64, at: u64) -> StateNotice {
    StateNotice {
        dir: StateDir::Checkpoint { job, id },
        periodic: false,
        completed_at_ms: at,
        metadata: bytes_of(&state(job, SnapshotKind::Checkpoint, id, false)),
    }
}

fn savepoint(job: JobId, name: &str, periodic: bool, at: u64) -> StateNotice {
    let mut s = state(job, SnapshotKind::Savepoint, 1, periodic);
    s.created_at_ms = at;
    StateNotice {
        dir: StateDir::Savepoint { name: name.into() },
        periodic,
        completed_at_ms: at,
        metadata: bytes_of(&s),
    }
}

fn settings(retained: usize, periodic: usize) -> ReplicaSettings {
    ReplicaSettings {
        retained_checkpoints: NonZeroUsize::new(retained).expect("positive"),
        retained_periodic: NonZeroUsize::new(periodic).expect("positive"),
        min_backoff: Duration::from_millis(10),
        max_backoff: Duration::from_millis(40),
    }
}

/// A memory store that can be taken down (every call fails) and back up.
#[derive(Debug, Default)]
struct Flaky {
    inner: MemoryStateStore,
    down: AtomicBool,
}

impl Flaky {
    fn check(&self, op: &'static str, key: &StateKey) -> Result<(), StoreError> {
        if self.down.load(Ordering::SeqCst) {
            return Err(StoreError::backend(op, key, "connection refused"));
        }
        Ok(())
    }
}

impl StateStore for Flaky {
    fn put_if_absent<'a>(&'a self, key: &'a StateKey, bytes: Bytes) -> StoreFuture<'a, ()> {
        Box::pin(async move {
            self.check("create", key)?;
            self.inner.put_if_absent(key, bytes).await
        })
    }
    fn put<'a>(&'a self, key: &'a StateKey, bytes: Bytes) -> StoreFuture<'a, ()> {
        Box::pin(async move {
            self.check("write", key)?;
            self.inner.put(key, bytes).await
        })
    }
    fn get<'a>(&'a self, key: &'a StateKey) -> StoreFuture<'a, Option<Bytes>> {
        Box::pin(async move {
            self.check("read", key)?;
            self.inner.get(key).await
        })
    }
    fn list<'a>(&'a self, prefix: &'a StateKey) -> StoreFuture<'a, Vec<StateKey>> {
        Box::pin(async move {
            self.check("list", prefix)?;
            self.inner.list(prefix).await
        })
    }
    fn delete<'a>(&'a self, key: &'a StateKey) -> StoreFuture<'a, ()> {
        Box::pin(async move {
            self.check("delete", key)?;
            self.inner.delete(key).await
        })
    }
}

fn start(store: Arc<Flaky>, s: ReplicaSettings) -> Replication {
    Replication::start(
        vec![ReplicaTarget {
            location: loc("/dr"),
            store: Ok(store),
        }],
        s,
    )
}

async fn until(what: &str, mut f: impl FnMut() -> bool) {
    for _ in 0..500 {
        if f() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("timed out waiting until {what}");
}

async fn keys(store: &Flaky) -> Vec<String> {
    let mut keys: Vec<String> = store
        .inner
        .list(&key("dr"))
        .await
        .expect("list")
        .iter()
        .map(|k| k.as_str().trim_start_matches("dr/").to_string())
        .collect();
    keys.sort();
    keys
}

#[tokio::test]
async fn a_checkpoint_is_copied_verified_and_measured() {
    let store = Arc::new(Flaky::default());
    let r = start(store.clone(), settings(3, 3));
    let job = JobId::random();
    let notice = checkpoint(job, 1, crate::time::now_ms());
    r.notify(&notice);
    let m = r.metrics()[0].clone();
    until("copied", || m.snapshot().states_copied == 1).await;
    let meta = key(&format!("dr/{job}/chk-1/_metadata"));
    assert_eq!(
        store.inner.get(&meta).await.expect("get"),
        Some(notice.metadata)
    );
    let snap = m.snapshot();
    assert_eq!(snap.location, "file:///dr");
    assert!(!snap.behind);
    assert!(snap.lag_ms < 5_000, "{snap:?}");
    assert!(snap.last_success_ms > 0);
    assert_eq!(snap.failures, 0);
    assert_eq!(
        snap.newest.as_deref(),
        Some(&*format!("file:///dr/{job}/chk-1"))
    );
    r.finish(Duration::from_secs(1)).await;
}

#[tokio::test]
async fn an_outage_counts_failures_grows_the_lag_then_catches_up_newest_first() {
    let store = Arc::new(Flaky::default());
    store.down.store(true, Ordering::SeqCst);
    let r = start(store.clone(), settings(2, 2));
    let m = r.metrics()[0].clone();
    let job = JobId::random();
    let t0 = crate::time::now_ms();
    for id in 1..=5 {
        r.notify(&checkpoint(job, id, t0 + id));
    }
    until("failures", || m.snapshot().failures >= 3).await;
    let first = m.snapshot();
    assert!(first.behind);
    assert!(
        first
            .last_error
            .as_deref()
            .is_some_and(|e| e.contains("connection refused")),
        "{first:?}"
    );
    // Newer checkpoints keep completing: the lag still counts from the
    // first state the replica missed.
    let mut last = t0;
    for id in 6..=9 {
        tokio::time::sleep(Duration::from_millis(50)).await;
        last = crate::time::now_ms();
        r.notify(&checkpoint(job, id, last));
    }
    // The savepoint completes after chk-9, strictly (the clock may not
    // have ticked between the two notices).
    r.notify(&savepoint(
        job,
        "savepoint-aaaaaa-000000000001",
        false,
        last + 1,
    ));
    let later = m.snapshot();
    assert!(later.lag_ms >= 200, "lag grows while down: {later:?}");
    assert!(
        later.lag_ms > first.lag_ms,
        "lag grows while down: {first:?} {later:?}"
    );
    assert_eq!(later.states_copied, 0);

    store.down.store(false, Ordering::SeqCst);
    until("caught up", || !m.snapshot().behind).await;
    // The newest checkpoint and the savepoint; superseded checkpoints
    // were never copied.
    assert_eq!(
        keys(&store).await,
        [
            format!("{job}/chk-9/_metadata"),
            "savepoints/savepoint-aaaaaa-000000000001/_metadata".to_string()
        ]
    );
    let snap = m.snapshot();
    assert_eq!(snap.states_copied, 2);
    assert!(snap.last_error.is_none());
    assert_eq!(
        snap.newest.as_deref(),
        Some("file:///dr/savepoints/savepoint-aaaaaa-000000000001")
    );
    r.finish(Duration::from_secs(1)).await;
}

#[tokio::test]
async fn retention_runs_on_the_replica() {
    let store = Arc::new(Flaky::default());
    let r = start(store.clone(), settings(2, 2));
    let m = r.metrics()[0].clone();
    let job = JobId::random();
    let t0 = crate::time::now_ms();
    for id in 1..=4u64 {
        r.notify(&checkpoint(job, id, t0 + id));
        until("copied", || m.snapshot().states_copied == id).await;
    }
    for (i, periodic) in [true, false, true, true].into_iter().enumerate() {
        let name = format!("savepoint-aaaaaa-00000000000{i}");
        r.notify(&savepoint(job, &name, periodic, t0 + 10 + i as u64));
        until("copied", || m.snapshot().states_copied == 5 + i as u64).await;
    }
    r.finish(Duration::from_secs(1)).await;
    assert_eq!(
        keys(&store).await,
        [
            format!("{job}/chk-3/_metadata"),
            format!("{job}/chk-4/_metadata"),
            // The user savepoint stays; the oldest periodic one went.
            "savepoints/savepoint-aaaaaa-000000000001/_metadata".to_string(),
            "savepoints/savepoint-aaaaaa-000000000002/_metadata".to_string(),
            "savepoints/savepoint-aaaaaa-000000000003/_metadata".to_string(),
        ]
    );
}

#[tokio::test]
async fn a_conflicting_replica_file_is_reported_not_retried_forever() {
    let store = Arc::new(Flaky::default());
    let job = JobId::random();
    // Someone else's bytes under the name.
    store.inner.overwrite(
        &key(&format!("dr/{job}/chk-1/_metadata")),
        bytes_of(&state(JobId::random(), SnapshotKind::Checkpoint, 1, false)),
    );
    let r = start(store.clone(), settings(3, 3));
    let m = r.metrics()[0].clone();
    r.notify(&checkpoint(job, 1, 1));
    until("failed", || m.snapshot().failures == 1).await;
    until("given up", || !m.snapshot().behind).await;
    let snap = m.snapshot();
    assert!(
        snap.last_error
            .as_deref()
            .is_some_and(|e| e.contains("other content")),
        "{snap:?}"
    );
    // A later state still goes through.
    r.notify(&checkpoint(job, 2, 2));
    until("copied", || m.snapshot().states_copied == 1).await;
    assert_eq!(m.snapshot().failures, 1);
    r.finish(Duration::from_secs(1)).await;
}

#[tokio::test]
async fn an_unopenable_store_counts_failures() {
    let r = Replication::start(
        vec![ReplicaTarget {
            location: loc("/dr"),
            store: Err("no credentials for 'file:///dr'".into()),
        }],
        settings(1, 1),
    );
    let m = r.metrics()[0].clone();
    r.notify(&checkpoint(JobId::random(), 1, 1));
    until("failures", || m.snapshot().failures >= 2).await;
    assert_eq!(
        m.snapshot().last_error.as_deref(),
        Some("no credentials for 'file:///dr'")
    );
    r.finish(Duration::from_millis(50)).await;
}

#[tokio::test]
async fn finish_copies_what_is_pending() {
    let store = Arc::new(Flaky::default());
    let r = start(store.clone(), settings(1, 1));
    let job = JobId::random();
    r.notify(&savepoint(job, "savepoint-aaaaaa-00000000000f", false, 5));
    r.finish(Duration::from_secs(2)).await;
    assert_eq!(
        keys(&store).await,
        ["savepoints/savepoint-aaaaaa-00000000000f/_metadata"]
    );
}

#[tokio::test]
async fn pruning_keeps_user_savepoints_and_other_replications() {
    let store = MemoryStateStore::new();
    let job = JobId::random();
    let mine = state(job, SnapshotKind::Savepoint, 1, true);
    let put = |name: &str, s: &JobState, at: u64| {
        let mut s = s.clone();
        s.created_at_ms = at;
        store.overwrite(&key(&format!("sp/{name}/_metadata")), bytes_of(&s));
    };
    put("savepoint-aaaaaa-000000000001", &mine, 1);
    put("savepoint-aaaaaa-000000000002", &mine, 2);
    put("savepoint-aaaaaa-000000000003", &mine, 3);
    put(
        "savepoint-aaaaaa-000000000004",
        &state(job, SnapshotKind::Savepoint, 1, false),
        0,
    );
    let mut other = mine.clone();
    other.table_name = "other".into();
    put("savepoint-bbbbbb-000000000001", &other, 0);
    store.overwrite(&key("sp/savepoint-aaaaaa-000000000001/extra"), "x");
    store.overwrite(&key("sp/savepoint-aaaaaa-000000000009/_metadata"), "torn");
    let report = prune_periodic_savepoints(&store, &key("sp"), &mine, 1).await;
    assert!(report.errors.is_empty(), "{report:?}");
    assert_eq!(report.kept, [key("sp/savepoint-aaaaaa-000000000003")]);
    assert_eq!(report.deleted.len(), 2);
    let left: Vec<String> = store
        .list(&key("sp"))
        .await
        .expect("list")
        .iter()
        .map(|k| k.as_str().to_string())
        .collect();
    assert_eq!(
        left,
        [
            "sp/savepoint-aaaaaa-000000000003/_metadata",
            "sp/savepoint-aaaaaa-000000000004/_metadata",
            "sp/savepoint-aaaaaa-000000000009/_metadata",
            "sp/savepoint-bbbbbb-000000000001/_metadata",
        ]
    );
}

#[tokio::test]
async fn mirror_copies_valid_states_and_names_the_bad_ones() {
    let src = MemoryStateStore::new();
    let dst = MemoryStateStore::new();
    let job = JobId::random();
    let good = state(job, SnapshotKind::Checkpoint, 1, false);
    src.overwrite(&key(&format!("a/{job}/chk-1/_metadata")), bytes_of(&good));
    // Torn: files but no _metadata.
    src.overwrite(&key(&format!("a/{job}/chk-2/part")), "x");
    // A flipped byte.
    let mut bad = bytes_of(&state(job, SnapshotKind::Checkpoint, 3, false)).to_vec();
    let mid = bad.len() / 2;
    bad[mid] ^= 0x01;
    src.overwrite(&key(&format!("a/{job}/chk-3/_metadata")), bad);
    // Truncated.
    let cut = bytes_of(&state(job, SnapshotKind::Checkpoint, 4, false));
    src.overwrite(
        &key(&format!("a/{job}/chk-4/_metadata")),
        cut.slice(..cut.len() - 3),
    );
    // Misplaced: checkpoint 1's metadata under chk-5.
    src.overwrite(&key(&format!("a/{job}/chk-5/_metadata")), bytes_of(&good));
    let sp = bytes_of(&state(job, SnapshotKind::Savepoint, 1, false));
    src.overwrite(
        &key("a/savepoints/savepoint-aaaaaa-000000000001/_metadata"),
        sp.clone(),
    );
    src.overwrite(
        &key("a/savepoint-aaaaaa-000000000002/_metadata"),
        sp.clone(),
    );
    src.overwrite(&key(&format!("a/{job}/_lease/x")), "lease");
    src.overwrite(&key("a/notes.txt"), "hi");

    let report = mirror(&src, &loc("/a"), &dst, &loc("/b"))
        .await
        .expect("mirror");
    assert_eq!(report.copied.len(), 3, "{report:?}");
    assert!(report.failed.is_empty());
    let mut skipped: Vec<String> = report.skipped.iter().map(|s| s.path.clone()).collect();
    skipped.sort();
    assert_eq!(
        skipped,
        [2, 3, 4, 5].map(|n| format!("file:///a/{job}/chk-{n}"))
    );
    assert!(report
        .skipped
        .iter()
        .any(|s| s.reason.contains("no _metadata")));
    assert_eq!(dst.len(), 3);
    assert_eq!(
        dst.get(&key(&format!("b/{job}/chk-1/_metadata")))
            .await
            .expect("get"),
        Some(bytes_of(&good))
    );
    assert!(dst
        .get(&key("b/savepoint-aaaaaa-000000000002/_metadata"))
        .await
        .expect("get")
        .is_some());

    // Again: nothing new, nothing rewritten.
    let again = mirror(&src, &loc("/a"), &dst, &loc("/b"))
        .await
        .expect("mirror");
    assert!(again.copied.is_empty());
    assert_eq!(again.present, 3);
}

#[test]
fn chains_name_each_cause_once() {
    let e = CopyError::Write {
        path: "file:///dr/x/_metadata".into(),
        source: StoreError::backend("create", &key("dr/x/_metadata"), "disk full"),
    };
    assert_eq!(
        chain(&e),
        "cannot write 'file:///dr/x/_metadata': cannot create 'dr/x/_metadata': disk full"
    );
}

/// A fenced instance does nothing but stop: once its lease is lost, a
/// state it is told about is neither copied nor followed by retention, so
/// the new holder's states on the replica stay (issue 33: three deletes
/// were seen on the DR store after a takeover).
#[tokio::test]
async fn a_fenced_instance_neither_copies_nor_deletes_on_the_replica() {
    let store = Arc::new(Flaky::default());
    let fence = crate::lease::Fence::new(1, std::time::Instant::now() + Duration::from_secs(600));
    let r = Replication::start_fenced(
        vec![ReplicaTarget {
            location: loc("/dr"),
            store: Ok(store.clone()),
        }],
        settings(1, 1),
        fence.clone(),
    );
    let m = r.metrics()[0].clone();
    let job = JobId::random();
    r.notify(&checkpoint(job, 1, 1));
    until("copied", || m.snapshot().states_copied == 1).await;
    // The new generation's checkpoint, written to the replica meanwhile.
    store
        .inner
        .put_if_absent(
            &key(&format!("dr/{job}/chk-7/_metadata")),
            bytes_of(&state(job, SnapshotKind::Checkpoint, 7, false)),
        )
        .await
        .expect("new holder's checkpoint");
    fence.taken_over(2);
    r.notify(&checkpoint(job, 2, 2));
    r.finish(Duration::from_secs(1)).await;
    assert_eq!(m.snapshot().states_copied, 1, "nothing copied once fenced");
    assert_eq!(
        keys(&store).await,
        vec![
            format!("{job}/chk-1/_metadata"),
            format!("{job}/chk-7/_metadata")
        ],
        "nothing deleted once fenced"
    );
}
