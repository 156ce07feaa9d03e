//! The [`StateStore`] conformance suite: one set of checks of the trait's
//! consistency requirements, run against every implementation (here: memory,
//! local disk, object_store in-memory; in ferry's tests: a real S3 server).
//! The checks panic on a violation: this is test code.

// A test suite for other crates' tests (feature `conformance`): it expects.
#![allow(clippy::expect_used)]

use std::sync::Arc;

use bytes::Bytes;

use super::key::StateKey;
use super::store::{StateStore, StoreError};
#[cfg(test)]
use super::{location::StorageLocation, memory::MemoryStateStore, object::ObjectStateStore};

fn key(root: &StateKey, rest: &str) -> StateKey {
    let mut k = root.clone();
    for segment in rest.split('/') {
        k = k.child(segment).expect("valid test segment");
    }
    k
}

async fn sorted_list(store: &dyn StateStore, prefix: &StateKey) -> Vec<StateKey> {
    let mut keys = store.list(prefix).await.expect("list");
    keys.sort();
    keys
}

/// Runs every check under `root`, which must be empty. The checks build on
/// each other's objects, so they run in this order.
pub async fn run(store: Arc<dyn StateStore>, root: StateKey) {
    run_without_races(store.clone(), root.clone()).await;
    one_concurrent_creator_wins(&store, &root.child("racing").expect("valid"), LARGE).await;
}

/// Every check except "of concurrent creators of one key exactly one
/// wins", for servers whose conditional create is not atomic against a
/// racing writer (s3s-fs; AWS S3 is).
pub async fn run_without_races(store: Arc<dyn StateStore>, root: StateKey) {
    run_small_objects_without_races(store.clone(), root.clone(), LARGE).await;
    large_objects_round_trip(store.as_ref(), &root).await;
}

/// Every check except the 1 MiB object, for stores of small records only
/// (a lease table on the sink cluster: Kudu cells hold 64 KiB).
pub async fn run_small_objects(store: Arc<dyn StateStore>, root: StateKey) {
    run_small_objects_without_races(store.clone(), root.clone(), SMALL).await;
    one_concurrent_creator_wins(&store, &root.child("racing").expect("valid"), SMALL).await;
}

/// The racing writers' object size: large enough to tear if a store
/// wrote in pieces; small stores get objects that fit a Kudu cell.
const LARGE: usize = 64 * 1024;
const SMALL: usize = 16 * 1024;

async fn run_small_objects_without_races(store: Arc<dyn StateStore>, root: StateKey, size: usize) {
    let s = store.as_ref();
    absent_reads_none(s, &root).await;
    create_then_read(s, &root).await;
    second_create_fails(s, &root).await;
    listing_is_recursive(s, &root).await;
    below_an_object_is_absent(s, &root).await;
    empty_objects_are_objects(s, &root).await;
    delete_is_visible_and_idempotent(s, &root).await;
    put_replaces_whole(s, &root).await;
    concurrent_puts_leave_one_whole_object(&store, &root, size).await;
}

/// Absent key reads as None; listing an absent prefix is empty.
async fn absent_reads_none(s: &dyn StateStore, root: &StateKey) {
    let a = key(root, "job/chk-1/_metadata");
    assert_eq!(s.get(&a).await.expect("get"), None);
    assert!(s.list(&key(root, "job")).await.expect("list").is_empty());
    assert!(s
        .list(&key(root, "no/such/prefix"))
        .await
        .expect("list")
        .is_empty());
}

/// Create, then read back (read-after-write).
async fn create_then_read(s: &dyn StateStore, root: &StateKey) {
    let a = key(root, "job/chk-1/_metadata");
    s.put_if_absent(&a, Bytes::from_static(b"first"))
        .await
        .expect("create");
    assert_eq!(
        s.get(&a).await.expect("get"),
        Some(Bytes::from_static(b"first"))
    );
}

/// A second create fails and leaves the object untouched.
async fn second_create_fails(s: &dyn StateStore, root: &StateKey) {
    let a = key(root, "job/chk-1/_metadata");
    match s.put_if_absent(&a, Bytes::from_static(b"second")).await {
        Err(StoreError::AlreadyExists { key }) => assert_eq!(key, a),
        other => panic!("expected AlreadyExists, got {other:?}"),
    }
    assert_eq!(
        s.get(&a).await.expect("get"),
        Some(Bytes::from_static(b"first"))
    );
}

/// Listing is recursive and segment-aware.
async fn listing_is_recursive(s: &dyn StateStore, root: &StateKey) {
    let a = key(root, "job/chk-1/_metadata");
    let b = key(root, "job/chk-2/_metadata");
    let c = key(root, "job/chk-2/extra/file");
    let d = key(root, "jobs/chk-1/_metadata");
    for k in [&b, &c, &d] {
        s.put_if_absent(k, Bytes::from_static(b"x"))
            .await
            .expect("create");
    }
    assert_eq!(
        sorted_list(s, &key(root, "job")).await,
        vec![a.clone(), b.clone(), c.clone()]
    );
    assert_eq!(
        sorted_list(s, &key(root, "job/chk-2")).await,
        vec![b.clone(), c.clone()]
    );
    assert_eq!(
        sorted_list(s, root).await,
        vec![a.clone(), b.clone(), c.clone(), d.clone()]
    );
}

/// A key "below" an object is simply absent (on disk the object is a
/// file, so the path goes through a non-directory).
async fn below_an_object_is_absent(s: &dyn StateStore, root: &StateKey) {
    assert_eq!(
        s.get(&key(root, "job/chk-1/_metadata/below"))
            .await
            .expect("get"),
        None
    );
}

/// Empty objects are objects.
async fn empty_objects_are_objects(s: &dyn StateStore, root: &StateKey) {
    let empty = key(root, "empty");
    s.put_if_absent(&empty, Bytes::new()).await.expect("create");
    assert_eq!(s.get(&empty).await.expect("get"), Some(Bytes::new()));
}

/// Large objects round-trip.
async fn large_objects_round_trip(s: &dyn StateStore, root: &StateKey) {
    let big_key = key(root, "big");
    let big: Bytes = (0..(1 << 20)).map(|i: u32| (i % 251) as u8).collect();
    s.put_if_absent(&big_key, big.clone())
        .await
        .expect("create");
    assert_eq!(s.get(&big_key).await.expect("get"), Some(big));
}

/// Delete is visible at once and idempotent; the key can be created again.
async fn delete_is_visible_and_idempotent(s: &dyn StateStore, root: &StateKey) {
    let a = key(root, "job/chk-1/_metadata");
    let b = key(root, "job/chk-2/_metadata");
    let c = key(root, "job/chk-2/extra/file");
    s.delete(&a).await.expect("delete");
    assert_eq!(s.get(&a).await.expect("get"), None);
    s.delete(&a).await.expect("second delete");
    s.delete(&key(root, "never/existed"))
        .await
        .expect("delete absent");
    assert_eq!(
        sorted_list(s, &key(root, "job")).await,
        vec![b.clone(), c.clone()]
    );
    s.put_if_absent(&a, Bytes::from_static(b"again"))
        .await
        .expect("re-create");
    assert_eq!(
        s.get(&a).await.expect("get"),
        Some(Bytes::from_static(b"again"))
    );
}

/// `put` creates or replaces, whole; the object is then create-protected
/// like any other.
async fn put_replaces_whole(s: &dyn StateStore, root: &StateKey) {
    let lease = key(root, "lease/current");
    s.put(&lease, Bytes::from_static(b"generation-1"))
        .await
        .expect("put creates");
    assert_eq!(
        s.get(&lease).await.expect("get"),
        Some(Bytes::from_static(b"generation-1"))
    );
    s.put(&lease, Bytes::from_static(b"g2"))
        .await
        .expect("put replaces");
    assert_eq!(
        s.get(&lease).await.expect("get"),
        Some(Bytes::from_static(b"g2"))
    );
    assert!(matches!(
        s.put_if_absent(&lease, Bytes::from_static(b"x")).await,
        Err(StoreError::AlreadyExists { .. })
    ));
    assert_eq!(
        sorted_list(s, &key(root, "lease")).await,
        vec![lease.clone()]
    );
    s.delete(&lease).await.expect("delete");
    assert_eq!(s.get(&lease).await.expect("get"), None);
}

/// Concurrent `put`s of one key leave exactly one writer's bytes, whole.
async fn concurrent_puts_leave_one_whole_object(
    store: &Arc<dyn StateStore>,
    root: &StateKey,
    size: usize,
) {
    let k = key(root, "lease/racy");
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..8u8 {
        let store = store.clone();
        let k = k.clone();
        tasks.spawn(async move { store.put(&k, Bytes::from(vec![i; size])).await });
    }
    while let Some(joined) = tasks.join_next().await {
        joined.expect("task").expect("put");
    }
    let stored = store.get(&k).await.expect("get").expect("present");
    assert_eq!(stored.len(), size);
    assert!(stored.iter().all(|&b| b == stored[0]));
}

/// Of many concurrent creators of one key, exactly one wins, and the
/// object holds the winner's bytes whole.
async fn one_concurrent_creator_wins(store: &Arc<dyn StateStore>, root: &StateKey, size: usize) {
    let s = store.as_ref();
    let race = key(root, "race/_metadata");
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..16u8 {
        let store = store.clone();
        let race = race.clone();
        tasks.spawn(async move {
            let bytes = Bytes::from(vec![i; size]);
            (i, store.put_if_absent(&race, bytes).await)
        });
    }
    let mut winners = Vec::new();
    while let Some(joined) = tasks.join_next().await {
        let (i, result) = joined.expect("task");
        match result {
            Ok(()) => winners.push(i),
            Err(StoreError::AlreadyExists { .. }) => {}
            Err(e) => panic!("unexpected error: {e}"),
        }
    }
    assert_eq!(winners.len(), 1, "winners: {winners:?}");
    let stored = s.get(&race).await.expect("get").expect("present");
    assert_eq!(stored.len(), size);
    assert!(stored.iter().all(|&b| b == winners[0]));
}

#[cfg(test)]
#[tokio::test]
async fn memory_store_conforms() {
    run(
        Arc::new(MemoryStateStore::new()),
        StateKey::parse("conformance").expect("valid"),
    )
    .await;
}

#[cfg(test)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn local_store_conforms() {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = StorageLocation::local(dir.path()).expect("location").key();
    run(Arc::new(ObjectStateStore::local()), root).await;
}

#[cfg(test)]
#[tokio::test]
async fn object_store_in_memory_backend_conforms() {
    // The generic adapter over another object_store backend (stand-in for S3).
    let backend = Arc::new(object_store::memory::InMemory::new());
    run(
        Arc::new(ObjectStateStore::new(backend)),
        StateKey::parse("conformance").expect("valid"),
    )
    .await;
}

#[cfg(test)]
#[tokio::test]
async fn local_delete_removes_the_emptied_directory_only() {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = StorageLocation::local(dir.path()).expect("location").key();
    let store = ObjectStateStore::local();
    let meta = key(&root, "job/chk-1/_metadata");
    let other = key(&root, "job/chk-2/_metadata");
    for k in [&meta, &other] {
        store
            .put_if_absent(k, Bytes::from_static(b"x"))
            .await
            .expect("create");
    }
    store.delete(&meta).await.expect("delete");
    assert!(!dir.path().join("job/chk-1").exists());
    assert!(dir.path().join("job/chk-2/_metadata").exists());
    store.delete(&other).await.expect("delete");
    // Only one level: the job directory stays even when empty.
    assert!(!dir.path().join("job/chk-2").exists());
    assert!(dir.path().join("job").is_dir());
}
