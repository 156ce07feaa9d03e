//! The sink position with in-memory connectors: it is recorded before any
//! row of its window is written, a failed record holds the window back,
//! and a start from an older restore point continues from the position.

use super::tests::{config_with, Numbers};
use super::*;
use crate::checkpoint::{MemoryStateStore, SnapshotKind, SplitState, WindowState};
use crate::connector::{ReadBatch, SinkWriter, SplitReader, WriteStats};
use crate::error::EngineError;
use crate::sink_position::SinkPosition;
use crate::time::{SinkTime, SourceClock, SourceTime};
use std::num::NonZeroUsize;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Two splits per window; each yields one batch holding its window's end,
/// so the sink knows which window a row belongs to.
struct WindowSource {
    clock: AtomicU64,
}

impl Source for WindowSource {
    type Batch = Numbers;
    type Reader = WindowReader;

    const NAME: &'static str = "TestSource";

    const CLOCK: SourceClock = SourceClock::EPOCH_MILLIS;

    async fn now(&self) -> Result<SourceTime, EngineError> {
        Ok(SourceTime::from_raw(
            self.clock.fetch_add(10, Ordering::SeqCst) + 10,
        ))
    }

    async fn plan(
        &self,
        window: WindowState,
        _cursor: Option<&serde_json::Value>,
    ) -> Result<crate::connector::WindowPlan, EngineError> {
        Ok(crate::connector::WindowPlan::of(
            (0..2u8)
                .map(|i| SplitState {
                    split_id: format!("{}-{i}", window.end_timestamp).into(),
                    descriptor: window.end_timestamp.raw().to_be_bytes().to_vec(),
                    resume_key: None,
                })
                .collect(),
        ))
    }

    async fn open(&self, split: &SplitState) -> Result<WindowReader, EngineError> {
        let end = split
            .descriptor
            .as_slice()
            .try_into()
            .map(u64::from_be_bytes)
            .unwrap_or(0);
        Ok(WindowReader { end: Some(end) })
    }
}

struct WindowReader {
    end: Option<u64>,
}

impl SplitReader for WindowReader {
    type Batch = Numbers;

    async fn next(&mut self) -> Result<Option<ReadBatch<Numbers>>, EngineError> {
        Ok(self.end.take().map(|end| ReadBatch {
            rows: Numbers(vec![end as u32]),
            resume_key: Some(vec![1]),
        }))
    }
}

/// What reached the sink, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Event {
    Position(WindowState),
    Rows(u64),
}

/// Keeps the position in memory and logs every position and row write;
/// the first `fail_records` position writes and `fail_reads` position
/// reads fail with a timeout.
#[derive(Clone, Default)]
struct PositionSink {
    position: Arc<Mutex<Option<SinkPosition>>>,
    log: Arc<Mutex<Vec<Event>>>,
    fail_records: Arc<AtomicU32>,
    fail_reads: Arc<AtomicU32>,
    /// Rows written before their window's position.
    early: Arc<AtomicU32>,
    /// Sink times handed out so far (the sink's clock reads 1000 + n).
    clock: Arc<AtomicU64>,
    /// Every position recorded, in order.
    recorded: Arc<Mutex<Vec<SinkPosition>>>,
}

impl PositionSink {
    fn with(position: SinkPosition) -> Self {
        let sink = PositionSink::default();
        *sink.position.lock().expect("lock") = Some(position);
        sink
    }

    fn log(&self) -> Vec<Event> {
        self.log.lock().expect("lock").clone()
    }

    fn rows(&self) -> Vec<u64> {
        self.log()
            .into_iter()
            .filter_map(|e| match e {
                Event::Rows(end) => Some(end),
                Event::Position(_) => None,
            })
            .collect()
    }
}

struct LogWriter(PositionSink);

impl Sink<Numbers> for PositionSink {
    type Writer = LogWriter;

    async fn writer(&self) -> Result<LogWriter, EngineError> {
        Ok(LogWriter(self.clone()))
    }

    fn positions(&self) -> Option<&dyn crate::connector::SinkPositions> {
        Some(self)
    }
}

impl crate::connector::SinkPositions for PositionSink {
    fn record_position<'a>(
        &'a self,
        position: &'a SinkPosition,
    ) -> crate::connector::CapabilityFuture<'a, ()> {
        Box::pin(async move {
            let failing = self
                .fail_records
                .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
                .is_ok();
            if failing {
                return Err(super::tests::timed_out("positions", "Write"));
            }
            *self.position.lock().expect("lock") = Some(position.clone());
            self.recorded.lock().expect("lock").push(position.clone());
            self.log
                .lock()
                .expect("lock")
                .push(Event::Position(position.window));
            Ok(())
        })
    }

    fn read_position(&self) -> crate::connector::CapabilityFuture<'_, Option<SinkPosition>> {
        Box::pin(async move {
            let failing = self
                .fail_reads
                .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
                .is_ok();
            if failing {
                return Err(super::tests::timed_out("positions", "Scan"));
            }
            Ok(self.position.lock().expect("lock").clone())
        })
    }

    fn sink_time(&self) -> crate::connector::CapabilityFuture<'_, Option<SinkTime>> {
        Box::pin(async move {
            let now = 1_000 + self.clock.fetch_add(1, Ordering::SeqCst);
            Ok(Some(SinkTime::from_raw(now)))
        })
    }
}

impl SinkWriter<Numbers> for LogWriter {
    async fn write(&mut self, batch: &Numbers) -> Result<WriteStats, EngineError> {
        let end = u64::from(batch.0[0]);
        // The invariant: a row of window W only once the position is W or later.
        let covered = self
            .0
            .position
            .lock()
            .expect("lock")
            .as_ref()
            .is_some_and(|p| p.window.end_timestamp.raw() >= end);
        if !covered {
            self.0.early.fetch_add(1, Ordering::SeqCst);
        }
        self.0.log.lock().expect("lock").push(Event::Rows(end));
        Ok(WriteStats::default())
    }
}

fn position(last_end: Option<u64>, end: u64) -> SinkPosition {
    SinkPosition {
        source_table: "t".into(),
        job_id: "other".into(),
        generation: 0,
        last_end: last_end.map(SourceTime::from_raw),
        window: window(last_end, end),
        last_end_sink_time: None,
    }
}

fn restore_point(last_end: Option<u64>, window: Option<(u64, u64)>) -> RestorePoint {
    let mut state = JobState::new(
        JobId::random(),
        SnapshotKind::Savepoint,
        7,
        "t",
        vec![],
        vec![],
    );
    state.last_end_timestamp = last_end.map(SourceTime::from_raw);
    if let Some((start, end)) = window {
        state.window = Some(self::window(Some(start), end));
        state.pending = vec![SplitState {
            split_id: "restored".into(),
            descriptor: end.to_be_bytes().to_vec(),
            resume_key: Some(vec![1]),
        }];
    }
    RestorePoint {
        location: "/mem/sp/savepoint-1".into(),
        state,
    }
}

/// Runs a job (source clock from 100, +10 per window) until the sink saw
/// `rows` row writes, then cancels it.
async fn run(sink: &PositionSink, restore: Option<RestorePoint>, rows: usize) {
    let config = config_with(&[]);
    let store = CheckpointStore::new(
        Arc::new(MemoryStateStore::new()),
        &config.checkpoints_directory,
        NonZeroUsize::MIN,
    );
    let source = WindowSource {
        clock: AtomicU64::new(100),
    };
    let job = Job::start(
        &config,
        restore,
        source,
        sink.clone(),
        store,
        JobOptions::new(2),
    )
    .await
    .expect("starts");
    for _ in 0..1_000 {
        if sink.rows().len() >= rows {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    job.cancel().await;
    assert_eq!(job.wait().await, JobStatus::Canceled);
    assert!(sink.rows().len() >= rows, "{:?}", sink.log());
    assert_eq!(
        sink.early.load(Ordering::SeqCst),
        0,
        "rows written before their window's position: {:?}",
        sink.log()
    );
}

fn window(start: Option<u64>, end: u64) -> WindowState {
    WindowState {
        start_timestamp: start.map(SourceTime::from_raw),
        end_timestamp: SourceTime::from_raw(end),
    }
}

#[tokio::test]
async fn every_window_is_recorded_before_its_rows() {
    let sink = PositionSink::default();
    run(&sink, None, 6).await;
    let log = sink.log();
    // Snapshot at 110, then [110, 120), [120, 130): each position first.
    assert_eq!(
        log[..9],
        [
            Event::Position(window(None, 110)),
            Event::Rows(110),
            Event::Rows(110),
            Event::Position(window(Some(110), 120)),
            Event::Rows(120),
            Event::Rows(120),
            Event::Position(window(Some(120), 130)),
            Event::Rows(130),
            Event::Rows(130),
        ],
        "{log:?}"
    );
}

#[tokio::test]
async fn a_fresh_job_overwrites_a_position_it_does_not_read() {
    let sink = PositionSink::with(position(Some(500), 600));
    run(&sink, None, 2).await;
    assert_eq!(sink.log()[0], Event::Position(window(None, 110)));
}

#[tokio::test]
async fn a_failed_position_write_holds_the_window_back() {
    let sink = PositionSink::default();
    sink.fail_records.store(3, Ordering::SeqCst);
    run(&sink, None, 2).await;
    // The write assertion in LogWriter proves no row went first; the
    // window went through once the position could be recorded.
    assert_eq!(sink.fail_records.load(Ordering::SeqCst), 0);
    assert!(matches!(sink.log()[0], Event::Position(_)));
}

#[tokio::test]
async fn an_older_restore_point_continues_at_the_sink_position() {
    // The sink holds rows of [50, 60); the savepoint is at 10, mid-window.
    let sink = PositionSink::with(position(Some(50), 60));
    run(&sink, Some(restore_point(Some(0), Some((0, 10)))), 4).await;
    let log = sink.log();
    // Exactly the position's window again, re-planned (2 splits, not the
    // savepoint's one), then the chain goes on from its end: no window
    // starting before 60 is ever written.
    assert_eq!(
        log[..6],
        [
            Event::Position(window(Some(50), 60)),
            Event::Rows(60),
            Event::Rows(60),
            Event::Position(window(Some(60), 110)),
            Event::Rows(110),
            Event::Rows(110),
        ],
        "{log:?}"
    );
}

#[tokio::test]
async fn a_position_that_could_not_be_read_at_start_is_read_again_before_any_row() {
    // The first read times out: the job restarts and compares again.
    let sink = PositionSink::with(position(Some(50), 60));
    sink.fail_reads.store(1, Ordering::SeqCst);
    run(&sink, Some(restore_point(Some(0), Some((0, 10)))), 2).await;
    assert_eq!(sink.fail_reads.load(Ordering::SeqCst), 0);
    let log = sink.log();
    assert_eq!(
        log[..3],
        [
            Event::Position(window(Some(50), 60)),
            Event::Rows(60),
            Event::Rows(60),
        ],
        "{log:?}"
    );
}

#[tokio::test]
async fn a_restore_point_between_windows_continues_at_a_later_position() {
    let sink = PositionSink::with(position(Some(50), 60));
    run(&sink, Some(restore_point(Some(40), None)), 2).await;
    assert_eq!(sink.log()[0], Event::Position(window(Some(50), 60)));
}

#[tokio::test]
async fn an_equal_or_older_position_keeps_the_restored_state() {
    // Same window: the state's split progress is used (one pending split).
    let sink = PositionSink::with(position(Some(50), 60));
    run(&sink, Some(restore_point(Some(50), Some((50, 60)))), 3).await;
    let log = sink.log();
    assert_eq!(
        log[..3],
        [
            Event::Position(window(Some(50), 60)),
            Event::Rows(60),
            Event::Position(window(Some(60), 110)),
        ],
        "{log:?}"
    );
    // The position's write for the state's window never happened.
    let sink = PositionSink::with(position(Some(40), 50));
    run(&sink, Some(restore_point(Some(50), Some((50, 60)))), 1).await;
    assert_eq!(sink.log()[0], Event::Position(window(Some(50), 60)));
}

#[tokio::test]
async fn another_source_tables_position_is_ignored() {
    let mut other = position(Some(50), 60);
    other.source_table = "other".into();
    let sink = PositionSink::with(other);
    run(&sink, Some(restore_point(Some(20), None)), 2).await;
    assert_eq!(sink.log()[0], Event::Position(window(Some(20), 110)));
}

/// (last_end, last_end_sink_time) of every recorded position.
fn sink_times(sink: &PositionSink) -> Vec<(Option<u64>, Option<u64>)> {
    sink.recorded
        .lock()
        .expect("lock")
        .iter()
        .map(|p| {
            (
                p.last_end.map(SourceTime::raw),
                p.last_end_sink_time.map(SinkTime::raw),
            )
        })
        .collect()
}

#[tokio::test]
async fn each_opened_window_records_a_sink_time_taken_before_its_rows() {
    let sink = PositionSink::default();
    run(&sink, None, 6).await;
    let times = sink_times(&sink);
    // The snapshot has no last end; each diff window asks the sink's
    // clock once, when it opens.
    assert_eq!(times[0], (None, None), "{times:?}");
    let asked = sink.clock.load(Ordering::SeqCst);
    let diffs: Vec<_> = times[1..].iter().map(|t| t.1).collect();
    assert!(diffs.iter().all(Option::is_some), "{times:?}");
    assert!(diffs.windows(2).all(|w| w[0] < w[1]), "{times:?}");
    assert_eq!(asked as usize, diffs.len(), "{times:?}");
}

#[tokio::test]
async fn a_resumed_window_keeps_the_sink_time_of_its_opening() {
    // Continued from the sink position: its sink time, not a new one.
    let mut p = position(Some(50), 60);
    p.last_end_sink_time = Some(SinkTime::from_raw(777));
    let sink = PositionSink::with(p.clone());
    run(&sink, Some(restore_point(Some(0), Some((0, 10)))), 4).await;
    let times = sink_times(&sink);
    assert_eq!(times[0], (Some(50), Some(777)), "{times:?}");
    assert_eq!(times[1], (Some(60), Some(1_000)), "{times:?}");

    // Continued from the state's own window (equal to the position's).
    let sink = PositionSink::with(p);
    run(&sink, Some(restore_point(Some(50), Some((50, 60)))), 3).await;
    assert_eq!(sink_times(&sink)[0], (Some(50), Some(777)));

    // A window in progress nobody knows the sink time of: none.
    let sink = PositionSink::default();
    run(&sink, Some(restore_point(Some(50), Some((50, 60)))), 3).await;
    let times = sink_times(&sink);
    assert_eq!(times[0], (Some(50), None), "{times:?}");
    assert_eq!(times[1], (Some(60), Some(1_000)), "{times:?}");
}

#[tokio::test]
async fn a_start_from_a_hybrid_time_diffs_from_it_without_a_snapshot() {
    // Another chain's position on the sink is not compared with it.
    let sink = PositionSink::with(position(Some(500), 600));
    let config = config_with(&[]);
    let store = CheckpointStore::new(
        Arc::new(MemoryStateStore::new()),
        &config.checkpoints_directory,
        NonZeroUsize::MIN,
    );
    let source = WindowSource {
        clock: AtomicU64::new(100),
    };
    let job = Job::start(
        &config,
        None,
        source,
        sink.clone(),
        store,
        JobOptions::new(2).start_at(Some(SourceTime::from_raw(50))),
    )
    .await
    .expect("starts");
    for _ in 0..1_000 {
        if job.metrics().snapshot().windows_completed >= 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let m = job.metrics().snapshot();
    job.cancel().await;
    assert_eq!(job.wait().await, JobStatus::Canceled);
    let log = sink.log();
    assert_eq!(log[0], Event::Position(window(Some(50), 110)), "{log:?}");
    assert!(m.windows_completed >= 2, "{m:?}");
    assert_eq!(m.snapshot_windows, 0, "{m:?}");
    // Its first window knows the sink's time (the sink equals the source
    // at 50 when the job starts).
    assert_eq!(sink_times(&sink)[0], (Some(50), Some(1_000)));

    // Not together with a restore point.
    let store = CheckpointStore::new(
        Arc::new(MemoryStateStore::new()),
        &config.checkpoints_directory,
        NonZeroUsize::MIN,
    );
    let e = Job::start(
        &config,
        Some(restore_point(Some(0), None)),
        WindowSource {
            clock: AtomicU64::new(100),
        },
        PositionSink::default(),
        store,
        JobOptions::new(1).start_at(Some(SourceTime::from_raw(50))),
    )
    .await
    .expect_err("both");
    assert!(
        matches!(e, crate::error::StartError::RestoreAndStartTime),
        "{e}"
    );
}
