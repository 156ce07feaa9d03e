//! Periodic savepoints and state replicas of a running job, with in-memory
//! connectors and storage (no Kudu): the schedule takes savepoints, their
//! retention spares user savepoints, and every completed state reaches the
//! replica.

use super::tests::{config_with, GatedSource, Numbers};
use super::*;
use crate::checkpoint::{decode_metadata, MemoryStateStore, StateKey, StateStore};
use crate::connector::{SinkWriter, WriteStats};
use crate::error::EngineError;
use std::num::NonZeroUsize;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;

struct NullSink;
struct NullWriter;

impl Sink<Numbers> for NullSink {
    type Writer = NullWriter;

    async fn writer(&self) -> Result<NullWriter, EngineError> {
        Ok(NullWriter)
    }
}

impl SinkWriter<Numbers> for NullWriter {
    async fn write(&mut self, _batch: &Numbers) -> Result<WriteStats, EngineError> {
        Ok(WriteStats::default())
    }
}

fn key(s: &str) -> StateKey {
    StateKey::parse(s).expect("key")
}

/// Savepoint directories (with `_metadata`) under `dir`, and which of them
/// are periodic.
async fn savepoints(store: &dyn StateStore, dir: &str) -> Vec<(String, bool)> {
    let mut out = Vec::new();
    for k in store.list(&key(dir)).await.expect("list") {
        if k.file_name() == Some("_metadata") {
            let bytes = store.get(&k).await.expect("get").expect("there");
            let state = decode_metadata(&bytes).expect("valid");
            let parent = k.parent().expect("dir");
            out.push((parent.file_name().unwrap_or("").to_string(), state.periodic));
        }
    }
    out.sort();
    out
}

async fn until(what: &str, mut f: impl AsyncFnMut() -> bool) {
    for _ in 0..300 {
        if f().await {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("timed out waiting until {what}");
}

#[tokio::test]
async fn periodic_savepoints_are_taken_pruned_and_replicated() {
    let config = config_with(&[
        ("kubernetes.operator.periodic.savepoint.interval", "150 ms"),
        ("job.periodicSavepointsRetained", "2"),
        ("job.stateReplicas", "/mem/dr"),
        ("job.checkpointsRetained", "2"),
    ]);
    let memory = Arc::new(MemoryStateStore::new());
    let store = CheckpointStore::new(
        memory.clone(),
        &config.checkpoints_directory,
        NonZeroUsize::new(2).expect("2"),
    );
    let (_gate, gate_rx) = watch::channel(false);
    let source = GatedSource {
        clock: AtomicU64::new(100),
        gate: gate_rx,
    };
    let job = Job::start(&config, None, source, NullSink, store, JobOptions::new(1))
        .await
        .expect("starts");
    let user = job
        .savepoint(Some(
            StorageLocation::parse("/mem/chk/savepoints").expect("dir"),
        ))
        .await
        .expect("user savepoint");
    until("periodic savepoints", async || {
        job.metrics().snapshot().periodic_savepoints_completed >= 5
    })
    .await;
    let m = job.metrics().snapshot();
    assert_eq!(m.periodic_savepoints_failed, 0);
    assert!(m.last_periodic_savepoint_ms > 0);
    let last = job.snapshot().last_periodic_savepoint.expect("a path");
    assert!(
        last.starts_with("file:///mem/chk/savepoints/savepoint-"),
        "{last}"
    );
    assert!(
        job.checkpoint_history()
            .iter()
            .filter(|r| r.savepoint)
            .count()
            >= 6
    );

    // Retention (in the background): two periodic ones and the user's.
    let user_name = user.rsplit('/').next().expect("name").to_string();
    until("pruned on the primary", async || {
        let sps = savepoints(memory.as_ref(), "mem/chk/savepoints").await;
        sps.iter().filter(|s| s.1).count() == 2 && sps.contains(&(user_name.clone(), false))
    })
    .await;

    // The replica: the user savepoint, two periodic ones, the newest
    // checkpoints, all copied from the primary.
    until("replicated", async || {
        let sps = savepoints(memory.as_ref(), "mem/dr/savepoints").await;
        let r = &job.replicas()[0];
        sps.iter().filter(|s| s.1).count() == 2
            && sps.contains(&(user_name.clone(), false))
            && !r.behind
    })
    .await;
    let r = job.replicas()[0].clone();
    assert_eq!(r.location, "file:///mem/dr");
    assert_eq!(r.failures, 0);
    assert!(r.states_copied >= 8, "{r:?}");
    let job_dir = format!("mem/dr/{}", job.job_id());
    let replica_chk: Vec<_> = memory.list(&key(&job_dir)).await.expect("list");
    assert!(
        (1..=2).contains(&replica_chk.len()),
        "retention on the replica: {replica_chk:?}"
    );
    job.cancel().await;
    job.wait().await;
}
