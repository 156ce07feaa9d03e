//! The [`LeaseBackend`] conformance suite: the checks the lease protocol
//! relies on, run against every backend (here: a state store in memory; in
//! other crates' tests: ZooKeeper, a Kubernetes API server). The checks
//! panic on a violation: this is test code.

// A test suite for other crates' tests (feature `conformance`): it expects.
#![allow(clippy::expect_used)]

use std::sync::Arc;

use super::backend::{LeaseBackend, LeaseRecord};

fn record(seq: u64, generation: u64, owner: &str) -> LeaseRecord {
    LeaseRecord {
        seq,
        generation,
        owner: owner.to_string(),
        at_ms: 1_700_000_000_000 + seq,
        job: format!("kudu m:7051 -> kudu n:7051, tables {owner}"),
    }
}

/// Runs every check on `backend`, which must hold no records. `racers`
/// more handles on the same lease (as other processes would open it) race
/// for one position.
pub async fn run(backend: Arc<dyn LeaseBackend>, racers: Vec<Arc<dyn LeaseBackend>>) {
    assert_eq!(
        backend.newest().await.expect("newest"),
        None,
        "starts empty"
    );

    // A write at a free position succeeds and becomes the newest (a record
    // of an older build names no job).
    let first = LeaseRecord {
        job: String::new(),
        ..record(1, 1, "a")
    };
    assert_eq!(backend.write_next(&first).await.expect("write"), None);
    assert_eq!(backend.newest().await.expect("newest"), Some(first.clone()));

    // A second write at a taken position loses to the record there.
    let loser = record(1, 2, "b");
    let winner = backend.write_next(&loser).await.expect("write");
    assert_eq!(
        winner,
        Some(first.clone()),
        "a taken position names its winner"
    );

    // Positions advance one at a time; each keeps its generation and job
    // (none again at 5).
    for seq in 2..=5 {
        let mut r = record(seq, 1, "a");
        if seq == 5 {
            r.job.clear();
        }
        assert_eq!(
            backend.write_next(&r).await.expect("write"),
            None,
            "seq {seq}"
        );
        assert_eq!(backend.newest().await.expect("newest"), Some(r));
    }

    // A write below the newest position loses to a record at or after it.
    let stale = record(3, 7, "late");
    let w = backend
        .write_next(&stale)
        .await
        .expect("write")
        .expect("a stale position is taken");
    assert!(w.seq >= 3 && w.generation == 1, "{w:?}");

    // Dropping old records keeps the newest.
    backend.forget_before(5).await.expect("forget");
    assert_eq!(
        backend.newest().await.expect("newest").map(|r| r.seq),
        Some(5)
    );

    race(backend, racers).await;
}

/// Of racers for position 6 exactly one wins, and all agree on it.
async fn race(backend: Arc<dyn LeaseBackend>, racers: Vec<Arc<dyn LeaseBackend>>) {
    let mut tasks = Vec::new();
    for (i, racer) in racers.into_iter().chain([backend.clone()]).enumerate() {
        let generation = 10 + i as u64;
        tasks.push(tokio::spawn(async move {
            let r = record(6, generation, &format!("racer-{i}"));
            (generation, racer.write_next(&r).await.expect("write"))
        }));
    }
    let mut won = Vec::new();
    let mut seen = Vec::new();
    for t in tasks {
        let (generation, outcome) = t.await.expect("joined");
        match outcome {
            None => won.push(generation),
            Some(w) => seen.push(w.generation),
        }
    }
    assert_eq!(won.len(), 1, "exactly one racer wins: {won:?}");
    assert!(
        seen.iter().all(|g| *g == won[0]),
        "losers see the winner: {seen:?} vs {won:?}"
    );
    let newest = backend.newest().await.expect("newest").expect("exists");
    assert_eq!((newest.seq, newest.generation), (6, won[0]));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checkpoint::{MemoryStateStore, StateKey};
    use crate::lease::StoreBackend;

    #[tokio::test]
    async fn a_state_store_backend_conforms() {
        let store = Arc::new(MemoryStateStore::new());
        let dir = StateKey::root().join_valid("job").join_valid("_lease");
        let handle = || -> Arc<dyn LeaseBackend> {
            Arc::new(StoreBackend::named(store.clone(), "memory", dir.clone()))
        };
        run(handle(), (0..4).map(|_| handle()).collect()).await;
    }
}
