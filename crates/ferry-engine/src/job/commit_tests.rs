//! Exactly-once delivery through a transactional sink, with in-memory
//! connectors (no Kudu): a source whose splits yield many small batches of
//! numbers unique across the table, and a sink that stages every write
//! until `commit` and drops what it staged on `recover`. The tests prove
//! that every commit makes visible exactly the rows its state covers (the
//! commit gate lets no write slip in between a capture and its commit, nor
//! a split's last batch before its end is reported), and that a job killed
//! mid-window and restored from an older checkpoint — or restarted inside
//! the job after a failed write — continues from the sink's last commit,
//! so every number reaches the sink exactly once.

use super::tests::{config_with, Numbers};
use super::*;
use crate::checkpoint::{MemoryStateStore, SplitState, TableState, WindowState};
use crate::connector::{ReadBatch, SinkWriter, SplitReader, WriteStats};
use crate::error::EngineError;
use crate::identity::SplitId;
use crate::time::{SourceClock, SourceTime};
use std::collections::{BTreeMap, BTreeSet};
use std::num::NonZeroUsize;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

/// Splits per window (more than the 2 pipelines, so states also hold
/// unassigned splits).
const SPLITS: u8 = 3;
/// Batches per split.
const BATCHES: u32 = 50;
/// Numbers per batch.
const PER_BATCH: u32 = 3;
/// The batch before which split 0 of a diff window hangs in the job that
/// is killed.
const STALL: u32 = 30;

/// The numbers of batch `batch` of split `split` of the window ending at
/// `end`: unique across the table, since window ends are.
fn batch_numbers(end: SourceTime, split: u8, batch: u32) -> std::ops::Range<u32> {
    let end = u32::try_from(end.raw()).expect("a small clock");
    let first = end * 1_000 + u32::from(split) * 200 + batch * PER_BATCH;
    first..first + PER_BATCH
}

/// Every number of the window ending at `end`.
fn window_numbers(end: SourceTime) -> impl Iterator<Item = u32> {
    (0..SPLITS).flat_map(move |s| (0..BATCHES).flat_map(move |b| batch_numbers(end, s, b)))
}

fn split_id(end: SourceTime, split: u8) -> SplitId {
    SplitId::new(format!("{end}-{split}"))
}

/// The batch a resume key names.
fn batch_of(key: &[u8]) -> Option<u32> {
    key.try_into().ok().map(u32::from_be_bytes)
}

/// The table's history, shared by every job of a test: the source clock,
/// and every window planned (end → start), so that the windows a state
/// completed can be walked back from its `last_end`.
struct Table {
    clock: AtomicU64,
    windows: Mutex<BTreeMap<SourceTime, Option<SourceTime>>>,
}

impl Table {
    fn new() -> Arc<Self> {
        Arc::new(Table {
            clock: AtomicU64::new(100),
            windows: Mutex::default(),
        })
    }

    /// The ends of the windows `state` completed, newest first.
    fn completed(&self, state: &TableState) -> Result<Vec<SourceTime>, String> {
        let windows = self.windows.lock().expect("lock");
        let mut ends = Vec::new();
        let mut end = state.last_end_timestamp;
        while let Some(e) = end {
            ends.push(e);
            end = *windows
                .get(&e)
                .ok_or_else(|| format!("no window was planned to end at {e}"))?;
        }
        Ok(ends)
    }

    /// Every number `state` covers: all of each window it completed, and
    /// of its open window each split up to its resume key (a split listed
    /// without one: nothing; a split not listed finished: all of it).
    fn covered(&self, state: &TableState) -> Result<BTreeSet<u32>, String> {
        let mut numbers: BTreeSet<u32> = self
            .completed(state)?
            .into_iter()
            .flat_map(window_numbers)
            .collect();
        if let Some(window) = state.window {
            let end = window.end_timestamp;
            for split in 0..SPLITS {
                let id = split_id(end, split);
                let listed = state
                    .pending
                    .iter()
                    .chain(&state.unassigned)
                    .find(|s| s.split_id == id);
                let written = match listed.map(|s| s.resume_key.as_deref()) {
                    None => BATCHES,
                    Some(None) => 0,
                    Some(Some(key)) => {
                        batch_of(key).ok_or_else(|| format!("bad resume key {key:?}"))? + 1
                    }
                };
                for batch in 0..written {
                    numbers.extend(batch_numbers(end, split, batch));
                }
            }
        }
        Ok(numbers)
    }
}

/// Plans `SPLITS` splits per window; each yields `BATCHES` batches, the
/// last without a resume key. With `stall`, split 0 of a diff window
/// hangs before that batch (a job stuck mid-window until it is killed).
struct NumberSource {
    table: Arc<Table>,
    stall: Option<u32>,
}

impl Source for NumberSource {
    type Batch = Numbers;
    type Reader = NumberReader;

    const NAME: &'static str = "TestSource";

    const CLOCK: SourceClock = SourceClock::EPOCH_MILLIS;

    async fn now(&self) -> Result<SourceTime, EngineError> {
        let now = self.table.clock.fetch_add(10, Ordering::SeqCst) + 10;
        Ok(SourceTime::from_raw(now))
    }

    async fn plan(
        &self,
        window: WindowState,
        _cursor: Option<&serde_json::Value>,
    ) -> Result<crate::connector::WindowPlan, EngineError> {
        self.table
            .windows
            .lock()
            .expect("lock")
            .insert(window.end_timestamp, window.start_timestamp);
        Ok(crate::connector::WindowPlan::of(
            (0..SPLITS)
                .map(|split| {
                    let mut descriptor = window.end_timestamp.raw().to_be_bytes().to_vec();
                    descriptor.push(split);
                    descriptor.push(u8::from(!window.is_snapshot()));
                    SplitState {
                        split_id: split_id(window.end_timestamp, split),
                        descriptor,
                        resume_key: None,
                    }
                })
                .collect(),
        ))
    }

    async fn open(&self, split: &SplitState) -> Result<NumberReader, EngineError> {
        let d = &split.descriptor;
        let end = SourceTime::from_raw(u64::from_be_bytes(d[..8].try_into().expect("descriptor")));
        let (index, diff) = (d[8], d[9] == 1);
        // Continue after the batch the resume key names.
        let next = split
            .resume_key
            .as_deref()
            .map_or(0, |k| batch_of(k).expect("resume key") + 1);
        Ok(NumberReader {
            end,
            split: index,
            next,
            stall: self.stall.filter(|_| diff && index == 0),
        })
    }
}

struct NumberReader {
    end: SourceTime,
    split: u8,
    next: u32,
    stall: Option<u32>,
}

impl SplitReader for NumberReader {
    type Batch = Numbers;

    async fn next(&mut self) -> Result<Option<ReadBatch<Numbers>>, EngineError> {
        if self.next == BATCHES {
            // Finding the end takes a round trip of its own: the last
            // batch is written well before the split is reported finished.
            tokio::time::sleep(Duration::from_millis(5)).await;
            return Ok(None);
        }
        if self.stall == Some(self.next) {
            std::future::pending::<()>().await;
        }
        // A reader that takes turns, so checkpoints come between batches.
        tokio::task::yield_now().await;
        let batch = self.next;
        self.next += 1;
        Ok(Some(ReadBatch {
            rows: Numbers(batch_numbers(self.end, self.split, batch).collect()),
            // The last batch has none: the split's end reports its write.
            resume_key: (batch + 1 < BATCHES).then(|| batch.to_be_bytes().to_vec()),
        }))
    }
}

/// What the sink holds; shared by every job of a test.
#[derive(Default)]
struct Ledger {
    /// Written since the last commit (invisible).
    staged: Vec<u32>,
    /// Every committed number, in commit order (duplicates kept).
    committed: Vec<u32>,
    /// The state of every commit, in order.
    commits: Vec<TableState>,
    /// Commits whose visible numbers were not exactly their state's.
    violations: Vec<String>,
    /// Commits taken while a split was part-way (pending with a key).
    mid_split: usize,
}

/// A transactional sink over a [`Ledger`]; write number `fail_at` (from
/// 1; 0: none) stages half its batch and fails with a timeout.
#[derive(Clone)]
struct TxSink {
    table: Arc<Table>,
    ledger: Arc<Mutex<Ledger>>,
    writes: Arc<AtomicU64>,
    fail_at: u64,
}

impl TxSink {
    fn new(table: &Arc<Table>) -> Self {
        TxSink {
            table: table.clone(),
            ledger: Arc::default(),
            writes: Arc::default(),
            fail_at: 0,
        }
    }

    fn ledger(&self) -> MutexGuard<'_, Ledger> {
        self.ledger.lock().expect("lock")
    }
}

struct TxWriter(TxSink);

fn timed_out() -> EngineError {
    super::tests::timed_out("t", "Write")
}

impl Sink<Numbers> for TxSink {
    type Writer = TxWriter;

    async fn writer(&self) -> Result<TxWriter, EngineError> {
        Ok(TxWriter(self.clone()))
    }

    fn two_phase_commit(&self) -> Option<&dyn crate::connector::TwoPhaseCommit> {
        Some(self)
    }
}

impl crate::connector::TwoPhaseCommit for TxSink {
    fn commit<'a>(&'a self, state: &'a TableState) -> crate::connector::CapabilityFuture<'a, ()> {
        Box::pin(async move {
            let covered = self.table.covered(state);
            let mut ledger = self.ledger();
            let staged = std::mem::take(&mut ledger.staged);
            ledger.committed.extend(staged);
            ledger.commits.push(state.clone());
            if state.pending.iter().any(|s| s.resume_key.is_some()) {
                ledger.mid_split += 1;
            }
            // The invariant, checked here and asserted by the test at the end
            // (a panic would only end the coordinator task).
            let problem = match covered {
                Ok(covered) => mismatch(&ledger.committed, &covered),
                Err(e) => Some(e),
            };
            if let Some(problem) = problem {
                let n = ledger.commits.len();
                ledger.violations.push(format!(
                    "commit {n}: {problem}; state: last_end {:?}, window {:?}, pending {:?}, unassigned {:?}",
                    state.last_end_timestamp, state.window, state.pending, state.unassigned
                ));
            }
            Ok(())
        })
    }

    fn recover(&self) -> crate::connector::CapabilityFuture<'_, Option<TableState>> {
        Box::pin(async move {
            let mut ledger = self.ledger();
            ledger.staged.clear();
            Ok(ledger.commits.last().cloned())
        })
    }
}

impl SinkWriter<Numbers> for TxWriter {
    async fn write(&mut self, batch: &Numbers) -> Result<WriteStats, EngineError> {
        let sink = &self.0;
        let failing = sink.writes.fetch_add(1, Ordering::SeqCst) + 1 == sink.fail_at;
        let rows = if failing {
            &batch.0[..batch.0.len() / 2]
        } else {
            &batch.0[..]
        };
        sink.ledger().staged.extend_from_slice(rows);
        // Staged in the transaction, acknowledged a little later: a commit
        // in between would take in a write whose progress is not reported.
        tokio::time::sleep(Duration::from_millis(1)).await;
        if failing {
            return Err(timed_out());
        }
        Ok(WriteStats {
            upserts: rows.len() as u64,
            ..WriteStats::default()
        })
    }
}

/// How `visible` differs from exactly `covered`, once each, if it does.
fn mismatch(visible: &[u32], covered: &BTreeSet<u32>) -> Option<String> {
    let seen: BTreeSet<u32> = visible.iter().copied().collect();
    let twice = visible.len() - seen.len();
    let missing = covered.difference(&seen).count();
    let extra: Vec<u32> = seen.difference(covered).copied().collect();
    (twice > 0 || missing > 0 || !extra.is_empty()).then(|| {
        format!(
            "{twice} number(s) visible twice, {missing} covered but not visible, {} visible but not covered (first: {:?})",
            extra.len(),
            extra.first()
        )
    })
}

/// Every number of the windows the last commit covers reached the sink
/// exactly once, and nothing else did; no commit broke the invariant.
fn assert_exactly_once(sink: &TxSink) {
    let ledger = sink.ledger();
    assert!(
        ledger.violations.is_empty(),
        "{} of {} commits broke the invariant, first: {}",
        ledger.violations.len(),
        ledger.commits.len(),
        ledger.violations[0]
    );
    let last = ledger.commits.last().expect("a commit");
    let covered = sink.table.covered(last).expect("the chain");
    assert_eq!(mismatch(&ledger.committed, &covered), None);
}

/// Windows of 3 × 50 batches that open 50 ms apart, a checkpoint every
/// 5 ms; `extra` pairs added.
fn config(extra: &[(&str, &str)]) -> JobConfig {
    let mut c = config_with(extra);
    c.discovery_interval = Duration::from_millis(50);
    c.checkpointing_interval = Duration::from_millis(5);
    c
}

fn store(memory: &Arc<MemoryStateStore>, config: &JobConfig) -> CheckpointStore {
    CheckpointStore::new(
        memory.clone(),
        &config.checkpoints_directory,
        NonZeroUsize::MIN,
    )
}

async fn start(
    config: &JobConfig,
    restore: Option<RestorePoint>,
    source: NumberSource,
    sink: &TxSink,
    memory: &Arc<MemoryStateStore>,
) -> JobHandle {
    Job::start(
        config,
        restore,
        source,
        sink.clone(),
        store(memory, config),
        JobOptions::new(2),
    )
    .await
    .expect("starts")
}

/// Waits until `done` holds for the sink's ledger (at most 4 s).
async fn until(sink: &TxSink, what: &str, done: impl Fn(&Ledger) -> bool) {
    for _ in 0..800 {
        if done(&sink.ledger()) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let ledger = sink.ledger();
    panic!(
        "timed out waiting for {what}: {} commits, last {:?}",
        ledger.commits.len(),
        ledger.commits.last()
    );
}

/// Whether the last commit completed at least `n` windows.
fn windows_committed(sink: &TxSink, ledger: &Ledger, n: usize) -> bool {
    ledger
        .commits
        .last()
        .is_some_and(|s| sink.table.completed(s).map_or(0, |c| c.len()) >= n)
}

/// The resume key of split 0 of `state`'s diff window, if it is part-way.
fn split0_of_diff(state: &TableState) -> Option<u32> {
    let window = state.window.filter(|w| !w.is_snapshot())?;
    let id = split_id(window.end_timestamp, 0);
    let split = state.pending.iter().find(|s| s.split_id == id)?;
    batch_of(split.resume_key.as_deref()?)
}

async fn cancel(job: &JobHandle) {
    job.cancel().await;
    assert_eq!(job.wait().await, JobStatus::Canceled);
}

#[tokio::test]
async fn every_commit_makes_visible_exactly_what_its_state_covers() {
    let table = Table::new();
    let sink = TxSink::new(&table);
    let memory = Arc::new(MemoryStateStore::new());
    let source = NumberSource {
        table: table.clone(),
        stall: None,
    };
    let job = start(&config(&[]), None, source, &sink, &memory).await;
    // The snapshot and two diff windows, each across many checkpoints.
    until(&sink, "three windows committed", |l| {
        windows_committed(&sink, l, 3)
    })
    .await;
    cancel(&job).await;
    let mid_split = sink.ledger().mid_split;
    // Not only between windows: the gate is what these commits test.
    assert!(mid_split >= 5, "only {mid_split} commits mid-split");
    assert_exactly_once(&sink);
}

#[tokio::test]
async fn a_job_killed_mid_window_and_restored_from_an_older_checkpoint_writes_every_number_once() {
    let table = Table::new();
    let sink = TxSink::new(&table);
    let memory = Arc::new(MemoryStateStore::new());
    let mut config = config(&[]);
    // Only the checkpoints asked for here (and those that open or
    // complete a window): the test decides what is committed at the kill.
    config.checkpointing_interval = Duration::from_secs(3_600);
    let source = NumberSource {
        table: table.clone(),
        stall: Some(STALL),
    };
    let first = start(&config, None, source, &sink, &memory).await;
    let checkpoints = store(&memory, &config);
    let mut older = None;
    let mut killed_at = None;
    for _ in 0..1_000 {
        first.checkpoint().await.expect("checkpoint");
        if older.is_none() {
            let latest = checkpoints
                .latest_complete(&first.job_id())
                .await
                .expect("latest")
                .checkpoint
                .expect("one");
            let s = &latest.state;
            if s.window.is_some_and(|w| w.is_snapshot())
                && s.pending.iter().any(|p| p.resume_key.is_some())
            {
                // Mid-snapshot: far behind the sink's last commit to come.
                older = Some(RestorePoint {
                    location: latest.location.to_uri(),
                    state: latest.state,
                });
            }
        }
        let last = sink.ledger().commits.last().cloned();
        if let Some(last) = last.filter(|s| older.is_some() && split0_of_diff(s) >= Some(5)) {
            killed_at = Some(last);
            break;
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    let older = older.expect("a checkpoint mid-snapshot");
    let killed_at = killed_at.expect("a commit mid-way through a diff window's split");
    let window = killed_at.window.expect("a window");
    // Split 0 runs on to its stall: those writes are staged, never
    // committed (no checkpoint is due, and the window cannot drain).
    let staged_last = batch_numbers(window.end_timestamp, 0, STALL - 1).end - 1;
    until(&sink, "split 0 at its stall", |l| {
        l.staged.contains(&staged_last)
    })
    .await;
    // The crash: the pipelines are dropped mid-window, nothing more is
    // committed, the staged writes stay behind.
    cancel(&first).await;
    let commits_before = {
        let ledger = sink.ledger();
        assert_eq!(ledger.commits.last(), Some(&killed_at));
        assert!(!ledger.staged.is_empty());
        ledger.commits.len()
    };

    config.checkpointing_interval = Duration::from_millis(5);
    let source = NumberSource {
        table: table.clone(),
        stall: None,
    };
    let second = start(&config, Some(older), source, &sink, &memory).await;
    until(&sink, "the killed window committed whole", |l| {
        l.commits
            .last()
            .is_some_and(|s| s.last_end_timestamp >= Some(window.end_timestamp))
    })
    .await;
    cancel(&second).await;
    {
        let ledger = sink.ledger();
        // The new job continued from the sink's commit, not from the
        // older checkpoint it was given.
        let resumed = &ledger.commits[commits_before];
        assert_eq!(
            (resumed.last_end_timestamp, resumed.window),
            (killed_at.last_end_timestamp, killed_at.window)
        );
    }
    assert_exactly_once(&sink);
    // None missing: the snapshot and the killed window, whole.
    let snapshot_end = killed_at.last_end_timestamp.expect("snapshot done");
    let visible: BTreeSet<u32> = sink.ledger().committed.iter().copied().collect();
    let missing = window_numbers(snapshot_end)
        .chain(window_numbers(window.end_timestamp))
        .filter(|n| !visible.contains(n))
        .count();
    assert_eq!(missing, 0);
}

#[tokio::test]
async fn a_restart_after_a_failed_write_drops_what_was_not_committed() {
    let table = Table::new();
    let mut sink = TxSink::new(&table);
    // Mid-snapshot; the failed write leaves half its batch staged.
    sink.fail_at = 40;
    let memory = Arc::new(MemoryStateStore::new());
    let config = config(&[(
        "restart-strategy.exponential-delay.initial-backoff",
        "20 ms",
    )]);
    let source = NumberSource {
        table: table.clone(),
        stall: None,
    };
    let job = start(&config, None, source, &sink, &memory).await;
    until(&sink, "two windows committed", |l| {
        windows_committed(&sink, l, 2)
    })
    .await;
    let restarts = job.snapshot().metrics.restarts;
    cancel(&job).await;
    assert_eq!(restarts, 1);
    assert_exactly_once(&sink);
}
