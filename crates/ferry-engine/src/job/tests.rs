//! The coordinator's stop modes with in-memory connectors and checkpoint
//! storage (no Kudu): a connector whose batch type is not Kudu's, readers
//! held at a gate so a window stays open exactly as long as a test wants.

use super::*;
use crate::checkpoint::{MemoryStateStore, SplitState, WindowState};
use crate::connector::{Batch, ReadBatch, SinkWriter, SplitReader, WriteStats};
use crate::error::{ControlError, EngineError};
use std::num::NonZeroUsize;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;

/// A batch of plain numbers.
pub(super) struct Numbers(pub(super) Vec<u32>);

impl Batch for Numbers {
    fn len(&self) -> usize {
        self.0.len()
    }

    fn byte_size(&self) -> usize {
        self.0.len() * 4
    }
}

/// Two splits per window; each split yields one batch of three numbers
/// once the gate is open.
pub(super) struct GatedSource {
    pub(super) clock: AtomicU64,
    pub(super) gate: watch::Receiver<bool>,
}

impl Source for GatedSource {
    type Batch = Numbers;
    type Reader = GatedReader;

    const NAME: &'static str = "TestSource";

    const CLOCK: crate::time::SourceClock = crate::time::SourceClock::EPOCH_MILLIS;

    async fn now(&self) -> Result<crate::time::SourceTime, EngineError> {
        Ok(crate::time::SourceTime::from_raw(
            self.clock.fetch_add(10, Ordering::SeqCst) + 10,
        ))
    }

    async fn plan(
        &self,
        window: WindowState,
        _cursor: Option<&serde_json::Value>,
    ) -> Result<crate::connector::WindowPlan, EngineError> {
        Ok(crate::connector::WindowPlan::of(two_splits(window)))
    }

    async fn open(&self, _split: &SplitState) -> Result<GatedReader, EngineError> {
        Ok(GatedReader {
            gate: self.gate.clone(),
            done: false,
        })
    }
}

/// The two splits of `window` (ids `<end>-0`, `<end>-1`).
fn two_splits(window: WindowState) -> Vec<SplitState> {
    (0..2u8)
        .map(|i| SplitState {
            split_id: format!("{}-{i}", window.end_timestamp).into(),
            descriptor: vec![i],
            resume_key: None,
        })
        .collect()
}

pub(super) struct GatedReader {
    gate: watch::Receiver<bool>,
    done: bool,
}

impl SplitReader for GatedReader {
    type Batch = Numbers;

    async fn next(&mut self) -> Result<Option<ReadBatch<Numbers>>, EngineError> {
        if self.done {
            return Ok(None);
        }
        let _ = self.gate.wait_for(|open| *open).await;
        self.done = true;
        Ok(Some(ReadBatch {
            rows: Numbers(vec![1, 2, 3]),
            resume_key: Some(vec![9]),
        }))
    }
}

/// Counts the numbers written.
#[derive(Default)]
struct CountingSink {
    written: Arc<AtomicU64>,
}

struct CountingWriter(Arc<AtomicU64>);

impl Sink<Numbers> for CountingSink {
    type Writer = CountingWriter;

    async fn writer(&self) -> Result<CountingWriter, EngineError> {
        Ok(CountingWriter(self.written.clone()))
    }
}

impl SinkWriter<Numbers> for CountingWriter {
    async fn write(&mut self, batch: &Numbers) -> Result<WriteStats, EngineError> {
        self.0.fetch_add(batch.0.len() as u64, Ordering::SeqCst);
        Ok(WriteStats {
            upserts: batch.0.len() as u64,
            ..WriteStats::default()
        })
    }
}

struct Fixture {
    job: JobHandle,
    store: CheckpointStore,
    gate: watch::Sender<bool>,
    written: Arc<AtomicU64>,
}

/// A test job's configuration: 1 s windows, 100 ms checkpoints, plus
/// `extra` key/value pairs.
pub(super) fn config_with(extra: &[(&str, &str)]) -> JobConfig {
    let base = [
        ("job.sourceMasterAddresses", "a:7051"),
        ("job.sinkMasterAddresses", "b:7051"),
        ("job.tableName", "t"),
        ("job.checkpointsDirectory", "/mem/chk"),
        ("job.discoveryIntervalSeconds", "1"),
        ("job.checkpointingIntervalMillis", "100"),
    ];
    JobConfig::from_named_pairs(base.iter().chain(extra).copied()).expect("config")
}

/// A job whose snapshot window is open with both splits assigned.
async fn started() -> Fixture {
    started_with(&[]).await
}

/// [`started`] with `extra` keys.
async fn started_with(extra: &[(&str, &str)]) -> Fixture {
    let config = config_with(extra);
    let memory = Arc::new(MemoryStateStore::new());
    let store = || {
        CheckpointStore::new(
            memory.clone(),
            &config.checkpoints_directory,
            NonZeroUsize::MIN,
        )
    };
    let (gate, gate_rx) = watch::channel(false);
    let sink = CountingSink::default();
    let written = sink.written.clone();
    let source = GatedSource {
        clock: AtomicU64::new(100),
        gate: gate_rx,
    };
    let job = Job::start(&config, None, source, sink, store(), JobOptions::new(2))
        .await
        .expect("starts");
    for _ in 0..500 {
        if job.metrics().snapshot().pending_count == 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(job.metrics().snapshot().pending_count, 2);
    Fixture {
        job,
        store: store(),
        gate,
        written,
    }
}

fn dir() -> Option<StorageLocation> {
    Some(StorageLocation::parse("/mem/sp").expect("location"))
}

/// Requests a stop with drain (60 s timeout) in the background.
fn spawn_drain(job: &JobHandle) -> tokio::task::JoinHandle<Result<String, ControlError>> {
    let job = job.clone();
    tokio::spawn(async move {
        job.stop(StopMode::drain(dir(), Duration::from_secs(60)))
            .await
    })
}

#[tokio::test]
async fn a_drain_lets_the_open_window_finish_and_opens_no_other() {
    let f = started().await;
    let drain = spawn_drain(&f.job);
    // Past the discovery interval: the next window is due once this one
    // completes, and must not open.
    tokio::time::sleep(Duration::from_millis(1_200)).await;
    assert!(!drain.is_finished(), "the window is still open");
    assert_eq!(f.job.status(), JobStatus::Stopping);
    let again = f
        .job
        .stop(StopMode::drain(dir(), Duration::from_secs(60)))
        .await;
    assert!(
        matches!(again, Err(ControlError::AlreadyStopping)),
        "{again:?}"
    );

    f.gate.send_replace(true);
    let path = drain.await.expect("join").expect("drained");
    assert_eq!(
        f.job.wait().await,
        JobStatus::Finished {
            savepoint: path.clone()
        }
    );
    let state = f.store.load(&path).await.expect("load").state;
    assert!(state.window.is_none() && state.pending.is_empty() && state.unassigned.is_empty());
    assert!(state.last_end_timestamp.is_some());
    // Both splits of the one window, nothing of a next one.
    assert_eq!(f.written.load(Ordering::SeqCst), 6);
}

#[tokio::test]
async fn a_plain_stop_overrides_a_drain() {
    let f = started().await;
    let drain = spawn_drain(&f.job);
    tokio::time::sleep(Duration::from_millis(100)).await;
    let path = f
        .job
        .stop(StopMode::savepoint(dir()))
        .await
        .expect("stopped");
    let drained = drain.await.expect("join");
    assert!(
        matches!(drained, Err(ControlError::DrainOverridden)),
        "{drained:?}"
    );
    assert_eq!(
        f.job.wait().await,
        JobStatus::Finished {
            savepoint: path.clone()
        }
    );
    // Stopped inside the window: its splits are in the savepoint.
    let state = f.store.load(&path).await.expect("load").state;
    assert!(state.window.is_some());
    assert_eq!(state.pending.len() + state.unassigned.len(), 2);
    assert_eq!(f.written.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn a_drain_that_times_out_leaves_the_job_running() {
    let f = started().await;
    let err = f
        .job
        .stop(StopMode::drain(dir(), Duration::from_millis(50)))
        .await
        .expect_err("times out");
    assert!(matches!(err, ControlError::DrainTimeout(_)), "{err:?}");
    assert_eq!(f.job.status(), JobStatus::Running);
    let none = f.job.stop(StopMode::savepoint(None)).await;
    assert!(
        matches!(none, Err(ControlError::NoSavepointDirectory)),
        "{none:?}"
    );
    f.job.cancel().await;
    assert_eq!(f.job.wait().await, JobStatus::Canceled);
    let late = f.job.checkpoint().await;
    assert!(matches!(late, Err(ControlError::NotRunning)), "{late:?}");
}

/// Plans `windows` windows of two open splits each, then is exhausted;
/// its cursor is the number of windows planned, and it records the
/// cursors it was told are committed.
struct BoundedSource {
    clock: AtomicU64,
    windows: u64,
    planned: AtomicU64,
    committed: Arc<std::sync::Mutex<Vec<serde_json::Value>>>,
}

impl Source for BoundedSource {
    type Batch = Numbers;
    type Reader = GatedReader;

    const NAME: &'static str = "TestSource";

    const CLOCK: crate::time::SourceClock = crate::time::SourceClock::EPOCH_MILLIS;

    async fn now(&self) -> Result<crate::time::SourceTime, EngineError> {
        Ok(crate::time::SourceTime::from_raw(
            self.clock.fetch_add(10, Ordering::SeqCst) + 10,
        ))
    }

    async fn plan(
        &self,
        window: WindowState,
        cursor: Option<&serde_json::Value>,
    ) -> Result<crate::connector::WindowPlan, EngineError> {
        let n = self.planned.fetch_add(1, Ordering::SeqCst) + 1;
        assert!(n <= self.windows, "no window is planned once exhausted");
        // The engine hands back the cursor of the plan before.
        assert_eq!(cursor.and_then(|c| c.as_u64()).unwrap_or(0), n - 1);
        Ok(crate::connector::WindowPlan {
            splits: two_splits(window),
            cursor: Some(serde_json::json!(n)),
            ..crate::connector::WindowPlan::default()
        })
    }

    async fn open(&self, _split: &SplitState) -> Result<GatedReader, EngineError> {
        Ok(GatedReader {
            gate: watch::channel(true).1,
            done: false,
        })
    }

    fn exhausted(&self, cursor: Option<&serde_json::Value>) -> bool {
        cursor.and_then(|c| c.as_u64()).unwrap_or(0) >= self.windows
    }

    fn window_committed(&self, cursor: Option<&serde_json::Value>) {
        if let Some(c) = cursor {
            self.committed.lock().expect("lock").push(c.clone());
        }
    }
}

#[tokio::test]
async fn a_job_whose_source_is_exhausted_finishes_with_a_final_checkpoint() {
    // A window a second.
    let config = config_with(&[]);
    let memory = Arc::new(MemoryStateStore::new());
    let store = CheckpointStore::new(
        memory.clone(),
        &config.checkpoints_directory,
        NonZeroUsize::MIN,
    );
    let committed = Arc::new(std::sync::Mutex::new(Vec::new()));
    let source = BoundedSource {
        clock: AtomicU64::new(100),
        windows: 3,
        planned: AtomicU64::new(0),
        committed: committed.clone(),
    };
    let sink = CountingSink::default();
    let written = sink.written.clone();
    let job = Job::start(&config, None, source, sink, store, JobOptions::new(2))
        .await
        .expect("starts");
    let status = tokio::time::timeout(Duration::from_secs(30), job.wait())
        .await
        .expect("the job ends by itself");
    let JobStatus::Finished { savepoint: path } = status else {
        panic!("finished, not {status:?}");
    };
    assert!(path.contains("/chk-"), "a final checkpoint: {path}");
    let store = CheckpointStore::new(memory, &config.checkpoints_directory, NonZeroUsize::MIN);
    let state = store.load(&path).await.expect("load").state;
    assert!(state.window.is_none() && state.pending.is_empty() && state.unassigned.is_empty());
    let table = state.table_states();
    assert_eq!(table[0].source_cursor, Some(serde_json::json!(3)));
    // Three windows of two splits of three numbers, each once.
    assert_eq!(written.load(Ordering::SeqCst), 18);
    assert_eq!(
        *committed.lock().expect("lock"),
        vec![
            serde_json::json!(1),
            serde_json::json!(2),
            serde_json::json!(3)
        ],
        "each window's cursor, once it is in a completed checkpoint"
    );
}

/// A source whose clock is epoch microseconds, with splits held at a gate
/// like [`GatedSource`]'s: its window ends reach the metrics as wall-clock
/// milliseconds only if they are read through its own clock.
struct MicrosSource {
    gate: watch::Receiver<bool>,
}

impl Source for MicrosSource {
    type Batch = Numbers;
    type Reader = GatedReader;

    const NAME: &'static str = "MicrosSource";

    const CLOCK: crate::time::SourceClock =
        crate::time::SourceClock::new("epoch microseconds", |t| t.raw() / 1_000);

    async fn now(&self) -> Result<crate::time::SourceTime, EngineError> {
        let micros = crate::time::now_ms() * 1_000 + 7;
        Ok(crate::time::SourceTime::from_raw(micros))
    }

    async fn plan(
        &self,
        window: WindowState,
        _cursor: Option<&serde_json::Value>,
    ) -> Result<crate::connector::WindowPlan, EngineError> {
        Ok(crate::connector::WindowPlan::of(two_splits(window)))
    }

    async fn open(&self, _split: &SplitState) -> Result<GatedReader, EngineError> {
        Ok(GatedReader {
            gate: self.gate.clone(),
            done: false,
        })
    }
}

#[tokio::test]
async fn window_ends_reach_the_metrics_through_the_sources_clock() {
    let config = config_with(&[]);
    let memory = Arc::new(MemoryStateStore::new());
    let store = || {
        CheckpointStore::new(
            memory.clone(),
            &config.checkpoints_directory,
            NonZeroUsize::MIN,
        )
    };
    let before = crate::time::now_ms();
    let source = MicrosSource {
        gate: watch::channel(true).1,
    };
    let job = Job::start(
        &config,
        None,
        source,
        CountingSink::default(),
        store(),
        JobOptions::new(2),
    )
    .await
    .expect("starts");
    for _ in 0..500 {
        if job.metrics().snapshot().last_end_timestamp_ms > 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let after = crate::time::now_ms();
    let job_end = job.metrics().snapshot().last_end_timestamp_ms;
    let table_end = job.snapshot().tables[0].last_end_timestamp_ms;
    job.cancel().await;
    assert!(
        (before..=after).contains(&job_end),
        "lastEndTimestamp {job_end} is wall-clock ms between {before} and {after}"
    );
    assert!(
        (before..=after).contains(&table_end),
        "the table's last end {table_end} is wall-clock ms between {before} and {after}"
    );

    // A job restored from a state shows its last end at once (its window
    // held at the gate), read on the source's clock too.
    let mut state = JobState::new(
        JobId::random(),
        crate::checkpoint::SnapshotKind::Savepoint,
        1,
        "t",
        vec![],
        vec![],
    );
    state.last_end_timestamp = Some(crate::time::SourceTime::from_raw(1_700_000_000_123_456));
    let restore = RestorePoint {
        location: "/mem/sp/savepoint-micros".into(),
        state,
    };
    let (_gate, closed) = watch::channel(false);
    let job = Job::start(
        &config,
        Some(restore),
        MicrosSource { gate: closed },
        CountingSink::default(),
        store(),
        JobOptions::new(2),
    )
    .await
    .expect("starts");
    let restored_end = job.metrics().snapshot().last_end_timestamp_ms;
    job.cancel().await;
    assert_eq!(restored_end, 1_700_000_000_123);
}

/// A retryable sink failure like a Kudu write timeout: `operation` on
/// table `table` had no answer.
pub(super) fn timed_out(table: &str, operation: &str) -> EngineError {
    crate::error::ConnectorError::new(
        crate::error::Domain::Sink,
        "SinkWrite",
        format!("{operation} timed out after 3 attempts in 1s: no answer"),
    )
    .context(format!("writing sink table '{table}'"))
    .table(table)
    .retry(crate::error::RetryHint::Retryable)
    .into()
}

/// Each writer's first batch (3 rows) under 1 row/s: one waits 3 s, the
/// other 6 s (the bucket is shared) before it is written.
const SLOW_WRITES: (&str, &str) = ("throttle.write.snapshot.rowsPerSecond", "1");

#[tokio::test]
async fn a_write_limit_holds_writes_back_until_it_is_lifted_live() {
    let f = started_with(&[SLOW_WRITES]).await;
    f.gate.send_replace(true);
    tokio::time::sleep(Duration::from_millis(1_000)).await;
    assert_eq!(
        f.written.load(Ordering::SeqCst),
        0,
        "written under the limit"
    );
    let shown = f.job.throttle();
    assert_eq!(shown.job.write.snapshot.rows_per_second, 1);
    assert!(shown.job.read.snapshot.is_unlimited());

    let mut lift = crate::throttle::LimitsUpdate::default();
    lift.write.snapshot.rows_per_second = Some(0);
    let unknown = f.job.set_throttle(Some("nope"), &lift);
    assert!(
        matches!(unknown, Err(ControlError::UnknownTable(_))),
        "{unknown:?}"
    );
    let now = f.job.set_throttle(None, &lift).expect("set");
    assert!(now.job.is_unlimited());
    for _ in 0..100 {
        if f.written.load(Ordering::SeqCst) >= 6 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // Both batches within 1 s of the lift (then diff windows follow).
    let written = f.written.load(Ordering::SeqCst);
    assert!(written >= 6, "{written} rows written");
    // Both writers waited about a second.
    let slept = f.job.throttle().throttled_write_seconds;
    assert!((1.5..3.0).contains(&slept), "{slept}");
    f.job.cancel().await;
}

#[tokio::test]
async fn a_stop_does_not_wait_for_a_throttled_write() {
    let f = started_with(&[SLOW_WRITES]).await;
    f.gate.send_replace(true);
    tokio::time::sleep(Duration::from_millis(300)).await;
    let asked = std::time::Instant::now();
    let path = f
        .job
        .stop(StopMode::savepoint(dir()))
        .await
        .expect("stopped");
    assert!(
        asked.elapsed() < Duration::from_secs(2),
        "{:?}",
        asked.elapsed()
    );
    assert_eq!(f.written.load(Ordering::SeqCst), 0);
    // Nothing was written: both splits go on from their start.
    let state = f.store.load(&path).await.expect("load").state;
    let splits: Vec<_> = state.pending.iter().chain(&state.unassigned).collect();
    assert_eq!(splits.len(), 2, "{state:?}");
    assert!(splits.iter().all(|s| s.resume_key.is_none()), "{state:?}");
}
