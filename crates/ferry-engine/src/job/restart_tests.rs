//! Restarts with in-memory connectors: a sink that times out a given
//! number of times, and each restart strategy's verdict on it.

use super::tests::{config_with, GatedSource, Numbers};
use super::*;
use crate::checkpoint::MemoryStateStore;
use crate::connector::{SinkWriter, WriteStats};
use crate::error::{ControlError, EngineError};
use std::num::NonZeroUsize;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;

/// Fails the first `failures` writes with a (transient) timeout, and the
/// first `prepare_failures` preparations likewise.
struct FlakySink {
    failures_left: Arc<AtomicU64>,
    written: Arc<AtomicU64>,
    prepare_failures: u64,
    /// A write failure asks for this pause before a retry.
    pause: Option<Duration>,
}

fn timed_out() -> EngineError {
    super::tests::timed_out("t", "Write")
}

struct FlakyWriter {
    failures_left: Arc<AtomicU64>,
    written: Arc<AtomicU64>,
    pause: Option<Duration>,
}

impl Sink<Numbers> for FlakySink {
    type Writer = FlakyWriter;

    async fn prepare(&mut self) -> Result<(), EngineError> {
        if self.prepare_failures > 0 {
            self.prepare_failures -= 1;
            return Err(timed_out());
        }
        Ok(())
    }

    async fn writer(&self) -> Result<FlakyWriter, EngineError> {
        Ok(FlakyWriter {
            failures_left: self.failures_left.clone(),
            written: self.written.clone(),
            pause: self.pause,
        })
    }
}

impl SinkWriter<Numbers> for FlakyWriter {
    async fn write(&mut self, batch: &Numbers) -> Result<WriteStats, EngineError> {
        let failing = self
            .failures_left
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_ok();
        if failing {
            return Err(match self.pause {
                Some(pause) => crate::error::ConnectorError::new(
                    crate::error::Domain::Sink,
                    "SinkWrite",
                    "the server asked to back off",
                )
                .retry(crate::error::RetryHint::After(pause))
                .into(),
                None => timed_out(),
            });
        }
        self.written
            .fetch_add(batch.0.len() as u64, Ordering::SeqCst);
        Ok(WriteStats {
            upserts: batch.0.len() as u64,
            ..WriteStats::default()
        })
    }
}

struct Run {
    job: JobHandle,
    written: Arc<AtomicU64>,
}

async fn run(failures: u64, restart: &[(&str, &str)]) -> Run {
    let config = config_with(restart);
    let store = CheckpointStore::new(
        Arc::new(MemoryStateStore::new()),
        &config.checkpoints_directory,
        NonZeroUsize::MIN,
    );
    let written = Arc::new(AtomicU64::new(0));
    let sink = FlakySink {
        failures_left: Arc::new(AtomicU64::new(failures)),
        written: written.clone(),
        prepare_failures: 0,
        pause: None,
    };
    let job = start(&config, sink, store, 2).await.expect("starts");
    Run { job, written }
}

/// Starts a job on an always-open gated source.
async fn start(
    config: &JobConfig,
    sink: FlakySink,
    store: CheckpointStore,
    parallelism: usize,
) -> Result<JobHandle, StartError> {
    let (_gate, gate_rx) = watch::channel(true);
    let source = GatedSource {
        clock: AtomicU64::new(100),
        gate: gate_rx,
    };
    Job::start(
        config,
        None,
        source,
        sink,
        store,
        JobOptions::new(parallelism),
    )
    .await
}

/// Waits until `done` holds for the job's snapshot, or fails after 10 s.
async fn until(job: &JobHandle, what: &str, done: impl Fn(&crate::status::JobSnapshot) -> bool) {
    for _ in 0..1000 {
        if done(&job.snapshot()) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let s = job.snapshot();
    panic!("{what}: {:?} {:?} {:?}", s.state, s.metrics, s.exceptions);
}

#[tokio::test]
async fn a_timed_out_sink_restarts_the_job_until_it_gets_through() {
    let r = run(
        1,
        &[
            (
                "restart-strategy.exponential-delay.initial-backoff",
                "300 ms",
            ),
            ("restart-strategy.exponential-delay.jitter-factor", "0"),
        ],
    )
    .await;
    until(&r.job, "restarting", |s| {
        s.state == crate::status::FlinkState::Restarting
    })
    .await;
    let snap = r.job.snapshot();
    assert!(
        snap.failure
            .as_deref()
            .unwrap_or_default()
            .contains("timed out"),
        "{snap:?}"
    );
    assert_eq!(snap.metrics.uptime_ms, 0);
    until(&r.job, "snapshot window completed", |s| {
        s.metrics.windows_completed > 0
    })
    .await;
    let snap = r.job.snapshot();
    assert_eq!(r.job.status(), JobStatus::Running);
    assert_eq!(snap.metrics.restarts, 1, "{:?}", snap.metrics);
    assert_eq!(snap.metrics.downtime_ms, 0);
    assert_eq!(snap.exceptions.len(), 1);
    assert!(snap
        .exceptions
        .iter()
        .all(|e| e.restarted && e.exception_name == "SinkWrite"));
    // Both splits' rows arrived (a restart may write some twice).
    assert!(r.written.load(Ordering::SeqCst) >= 6);
    r.job.cancel().await;
}

#[tokio::test]
async fn a_retry_hint_with_a_delay_holds_the_restart_back_at_least_that_long() {
    let config = config_with(&[
        (
            "restart-strategy.exponential-delay.initial-backoff",
            "10 ms",
        ),
        ("restart-strategy.exponential-delay.jitter-factor", "0"),
    ]);
    let store = CheckpointStore::new(
        Arc::new(MemoryStateStore::new()),
        &config.checkpoints_directory,
        NonZeroUsize::MIN,
    );
    let sink = FlakySink {
        failures_left: Arc::new(AtomicU64::new(1)),
        written: Arc::default(),
        prepare_failures: 0,
        pause: Some(Duration::from_millis(1500)),
    };
    let job = start(&config, sink, store, 2).await.expect("starts");
    until(&job, "restarting", |s| {
        s.state == crate::status::FlinkState::Restarting
    })
    .await;
    let restarting = std::time::Instant::now();
    until(&job, "running again", |s| {
        s.state == crate::status::FlinkState::Running
    })
    .await;
    // The strategy alone would wait 10 ms.
    assert!(
        restarting.elapsed() >= Duration::from_millis(1400),
        "restarted after {:?}",
        restarting.elapsed()
    );
    assert_eq!(job.snapshot().metrics.restarts, 1);
    job.cancel().await;
}

#[tokio::test]
async fn without_a_restart_strategy_a_transient_failure_fails_the_job() {
    let r = run(1, &[("restart-strategy.type", "none")]).await;
    match r.job.wait().await {
        JobStatus::Failed { error } => assert!(
            error.starts_with("restart strategy exhausted after 0 restart(s) (restart-strategy.type is none); last failure: writing sink table 't'"),
            "{error}"
        ),
        other => panic!("{other:?}"),
    }
    let exceptions = r.job.exceptions();
    assert_eq!(exceptions.len(), 1);
    assert!(!exceptions[0].restarted);
}

#[tokio::test]
async fn fixed_delay_gives_up_after_its_attempts() {
    let r = run(
        5,
        &[
            ("restart-strategy.type", "fixed-delay"),
            ("restart-strategy.fixed-delay.attempts", "2"),
            ("restart-strategy.fixed-delay.delay", "20 ms"),
        ],
    )
    .await;
    match r.job.wait().await {
        JobStatus::Failed { error } => {
            assert!(error.contains("after 2 restart(s)"), "{error}");
            assert!(error.contains("allows 2 restart(s)"), "{error}");
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(r.job.snapshot().metrics.restarts, 2);
    assert_eq!(r.job.exceptions().len(), 3);
}

#[tokio::test]
async fn requests_during_a_restart_are_refused_and_cancel_works() {
    let r = run(
        1,
        &[
            (
                "restart-strategy.exponential-delay.initial-backoff",
                "1 min",
            ),
            ("restart-strategy.exponential-delay.max-backoff", "1 min"),
        ],
    )
    .await;
    until(&r.job, "restarting", |s| {
        s.state == crate::status::FlinkState::Restarting
    })
    .await;
    let refused = r
        .job
        .savepoint(Some(StorageLocation::parse("/mem/sp").expect("dir")))
        .await;
    assert!(
        matches!(refused, Err(ControlError::Restarting)),
        "{refused:?}"
    );
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(r.job.snapshot().metrics.downtime_ms >= 50);
    r.job.cancel().await;
    assert_eq!(r.job.wait().await, JobStatus::Canceled);
}

/// A memory store whose writes fail while `down` is set.
#[derive(Debug)]
struct FlakyStore {
    inner: MemoryStateStore,
    down: Arc<std::sync::atomic::AtomicBool>,
}

impl crate::checkpoint::StateStore for FlakyStore {
    fn put_if_absent<'a>(
        &'a self,
        key: &'a crate::checkpoint::StateKey,
        bytes: bytes::Bytes,
    ) -> crate::checkpoint::StoreFuture<'a, ()> {
        if self.down.load(Ordering::SeqCst) {
            return Box::pin(async move {
                Err(crate::checkpoint::StoreError::backend(
                    "create",
                    key,
                    std::io::Error::new(std::io::ErrorKind::ReadOnlyFilesystem, "read-only"),
                ))
            });
        }
        self.inner.put_if_absent(key, bytes)
    }

    fn put<'a>(
        &'a self,
        key: &'a crate::checkpoint::StateKey,
        bytes: bytes::Bytes,
    ) -> crate::checkpoint::StoreFuture<'a, ()> {
        self.inner.put(key, bytes)
    }

    fn get<'a>(
        &'a self,
        key: &'a crate::checkpoint::StateKey,
    ) -> crate::checkpoint::StoreFuture<'a, Option<bytes::Bytes>> {
        self.inner.get(key)
    }

    fn list<'a>(
        &'a self,
        prefix: &'a crate::checkpoint::StateKey,
    ) -> crate::checkpoint::StoreFuture<'a, Vec<crate::checkpoint::StateKey>> {
        self.inner.list(prefix)
    }

    fn delete<'a>(
        &'a self,
        key: &'a crate::checkpoint::StateKey,
    ) -> crate::checkpoint::StoreFuture<'a, ()> {
        self.inner.delete(key)
    }
}

#[tokio::test]
async fn unwritable_checkpoints_hold_the_job_at_its_durable_window_until_storage_returns() {
    let config = config_with(&[
        ("execution.checkpointing.tolerable-failed-checkpoints", "3"),
        (
            "restart-strategy.exponential-delay.initial-backoff",
            "50 ms",
        ),
        ("restart-strategy.exponential-delay.max-backoff", "200 ms"),
    ]);
    let down = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let store = CheckpointStore::new(
        Arc::new(FlakyStore {
            inner: MemoryStateStore::new(),
            down: down.clone(),
        }),
        &config.checkpoints_directory,
        NonZeroUsize::MIN,
    );
    let sink = FlakySink {
        failures_left: Arc::new(AtomicU64::new(0)),
        written: Arc::new(AtomicU64::new(0)),
        prepare_failures: 0,
        pause: None,
    };
    let job = start(&config, sink, store, 2).await.expect("starts");
    until(&job, "first window", |s| s.metrics.windows_completed >= 1).await;
    down.store(true, Ordering::SeqCst);
    // The open window may still complete in memory, but no window opens
    // or completes durably while storage is down.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let held = job.snapshot().metrics.windows_completed;
    tokio::time::sleep(Duration::from_millis(2_500)).await;
    let snap = job.snapshot();
    assert_eq!(snap.metrics.windows_completed, held, "no window completed");
    assert!(snap.metrics.checkpoints_failed > 3, "{:?}", snap.metrics);
    // Past the tolerable count the job restarts (and keeps trying).
    assert!(snap.metrics.restarts >= 1, "{:?}", snap.metrics);
    assert!(
        snap.exceptions
            .iter()
            .all(|e| e.exception_name == "Checkpoint" && e.restarted),
        "{:?}",
        snap.exceptions
    );
    assert!(!job.status().is_terminal());
    down.store(false, Ordering::SeqCst);
    until(&job, "windows again", |s| {
        s.metrics.windows_completed > held + 1
    })
    .await;
    job.cancel().await;
}

#[tokio::test]
async fn an_unreachable_sink_at_start_is_retried_with_the_job_visible() {
    let start = |prepare_failures, restart: &[(&str, &str)]| {
        let config = config_with(restart);
        let store = CheckpointStore::new(
            Arc::new(MemoryStateStore::new()),
            &config.checkpoints_directory,
            NonZeroUsize::MIN,
        );
        let sink = FlakySink {
            failures_left: Arc::new(AtomicU64::new(0)),
            written: Arc::new(AtomicU64::new(0)),
            prepare_failures,
            pause: None,
        };
        async move { start(&config, sink, store, 1).await }
    };
    let job = start(
        2,
        &[(
            "restart-strategy.exponential-delay.initial-backoff",
            "300 ms",
        )],
    )
    .await
    .expect("started");
    until(&job, "restarting before the sink is ready", |s| {
        s.state == crate::status::FlinkState::Restarting
    })
    .await;
    until(&job, "a window after the sink came back", |s| {
        s.metrics.windows_completed > 0
    })
    .await;
    assert_eq!(job.snapshot().metrics.restarts, 2);
    job.cancel().await;
    let job = start(1, &[("restart-strategy.type", "none")])
        .await
        .expect("started");
    match job.wait().await {
        JobStatus::Failed { error } => assert!(error.contains("timed out"), "{error}"),
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn a_drain_under_way_learns_of_a_restart_and_every_request_but_cancel_is_refused() {
    let config = config_with(&[
        (
            "restart-strategy.exponential-delay.initial-backoff",
            "1 min",
        ),
        ("restart-strategy.exponential-delay.max-backoff", "1 min"),
    ]);
    let store = CheckpointStore::new(
        Arc::new(MemoryStateStore::new()),
        &config.checkpoints_directory,
        NonZeroUsize::MIN,
    );
    let (gate, gate_rx) = watch::channel(false);
    let source = GatedSource {
        clock: AtomicU64::new(100),
        gate: gate_rx,
    };
    let sink = FlakySink {
        failures_left: Arc::new(AtomicU64::new(1)),
        written: Arc::new(AtomicU64::new(0)),
        prepare_failures: 0,
        pause: None,
    };
    let job = Job::start(&config, None, source, sink, store, JobOptions::new(2))
        .await
        .expect("starts");
    until(&job, "both splits out", |s| s.metrics.pending_count == 2).await;
    let dir = || Some(StorageLocation::parse("/mem/sp").expect("dir"));
    let drain = {
        let job = job.clone();
        tokio::spawn(async move {
            job.stop(StopMode::drain(dir(), Duration::from_secs(60)))
                .await
        })
    };
    until(&job, "draining", |_| job.status() == JobStatus::Stopping).await;
    // The first write fails: the job restarts before the window completes.
    gate.send_replace(true);
    let drained = drain.await.expect("join");
    assert!(
        matches!(drained, Err(ControlError::Restarting)),
        "{drained:?}"
    );
    until(&job, "restarting", |s| {
        s.state == crate::status::FlinkState::Restarting
    })
    .await;
    let checkpoint = job.checkpoint().await;
    assert!(
        matches!(checkpoint, Err(ControlError::Restarting)),
        "{checkpoint:?}"
    );
    // Refused as restarting, before the missing directory is looked at.
    for mode in [
        StopMode::savepoint(None),
        StopMode::savepoint(dir()),
        StopMode::drain(dir(), Duration::from_secs(1)),
    ] {
        let stop = job.stop(mode).await;
        assert!(matches!(stop, Err(ControlError::Restarting)), "{stop:?}");
    }
    assert!(matches!(job.status(), JobStatus::Restarting { .. }));
    job.cancel().await;
    assert_eq!(job.wait().await, JobStatus::Canceled);
}
