//! Pipelines: each is a worker task with its own sink writer that executes
//! the splits the coordinator hands it. Inside a split, a reader task
//! streams scan batches into a bounded channel (backpressure: at most
//! `READ_AHEAD` batches in memory) and the writer applies each batch; only
//! after a batch is durably written does the pipeline report the batch's
//! resume key, so recorded progress never runs ahead of the sink.
//!
//! The [`CommitGate`]: a pipeline holds it (shared) from writing a batch
//! until the batch's progress is reported, so when the coordinator holds
//! it (exclusively) every write done is reported and none is under way:
//! what it then captures covers exactly what the sink holds, which a
//! transactional sink commits with it (exactly-once).
//!
//! Throttling ([`crate::throttle`]): the reader task pays for each batch
//! after handing it on (so the next read waits), the writer before each
//! write; a stop request interrupts the writer's wait.

use crate::checkpoint::SplitState;
use crate::connector::{Batch, ReadBatch, Sink, SinkWriter, Source, SplitReader};
use crate::error::EngineError;
use crate::identity::{SplitId, TableKey};
use crate::lease::Fence;
use crate::metrics::{JobMetrics, TableMetrics};
use crate::throttle::SplitThrottle;
use std::sync::Arc;
use tokio::sync::{mpsc, watch, OwnedRwLockReadGuard, RwLock};
use tokio::task::JoinHandle;

/// Between a batch's write and its progress report (module doc).
pub(crate) type CommitGate = Arc<RwLock<()>>;

/// A pipeline's hold on the gate.
type GateHold = OwnedRwLockReadGuard<()>;

/// Batches queued between reader and writer, per pipeline; the reader
/// fetches a batch only once it has a place here. One keeps both busy;
/// each more costs a scan batch (up to 8 MiB) of memory and gained no
/// throughput (docs/benchmarks.md, finding 3).
const READ_AHEAD: usize = 1;

/// What a pipeline tells the coordinator; `table` is the key of the
/// table (window chain) the split belongs to.
#[derive(Debug)]
pub(crate) enum PipelineEvent {
    /// Every row of the split up to `resume_key` is written.
    Progress {
        table: TableKey,
        split_id: SplitId,
        resume_key: Vec<u8>,
    },
    /// Every row of the split is written.
    Finished {
        worker: usize,
        table: TableKey,
        split_id: SplitId,
    },
    /// Stopped on request after a whole batch; the split stays pending.
    Stopped {
        worker: usize,
        table: TableKey,
        split_id: SplitId,
    },
    /// The split failed; the pipeline is idle again.
    Failed {
        worker: usize,
        table: TableKey,
        split_id: SplitId,
        error: EngineError,
    },
}

/// A split handed to a pipeline, with its table's connectors.
pub(crate) struct Assignment<S, K> {
    /// The table's key in the coordinator.
    pub table: TableKey,
    pub split: SplitState,
    pub source: Arc<S>,
    pub sink: Arc<K>,
    pub metrics: Arc<TableMetrics>,
    /// The limits the split is read and written under.
    pub throttle: SplitThrottle,
}

/// A running pipeline worker.
pub(crate) struct Worker<S, K> {
    pub splits: mpsc::Sender<Assignment<S, K>>,
    pub task: JoinHandle<()>,
}

/// Starts pipeline `worker`: it waits for splits on its channel. Pipelines
/// are shared by every table of the job; a pipeline keeps one writer, for
/// the table of its last split.
pub(crate) fn spawn_worker<S: Source, K: Sink<S::Batch>>(
    worker: usize,
    events: mpsc::UnboundedSender<PipelineEvent>,
    stop: watch::Receiver<bool>,
    metrics: Arc<JobMetrics>,
    fence: Fence,
    gate: CommitGate,
) -> Worker<S, K> {
    let (tx, mut rx) = mpsc::channel::<Assignment<S, K>>(1);
    let task = tokio::spawn(async move {
        let mut writer: Option<(TableKey, K::Writer)> = None;
        while let Some(a) = rx.recv().await {
            let (table, split_id) = (a.table, a.split.split_id.clone());
            if writer.as_ref().is_some_and(|(t, _)| *t != table) {
                writer = None;
            }
            if writer.is_none() {
                match a.sink.writer().await {
                    Ok(w) => writer = Some((table, w)),
                    Err(error) => {
                        let _ = events.send(PipelineEvent::Failed {
                            worker,
                            table,
                            split_id,
                            error,
                        });
                        continue;
                    }
                }
            }
            let Some((_, w)) = writer.as_mut() else {
                continue;
            };
            let run = SplitRun {
                table,
                events: &events,
                job_metrics: &metrics,
                table_metrics: &a.metrics,
                fence: &fence,
                gate: &gate,
                throttle: &a.throttle,
            };
            // Held past the event when the split's last batch had no
            // resume key: its write is reported by `Finished`.
            let (outcome, _hold) = run.run(&*a.source, w, a.split, stop.clone()).await;
            let event = match outcome {
                Ok(true) => PipelineEvent::Finished {
                    worker,
                    table,
                    split_id,
                },
                Ok(false) => PipelineEvent::Stopped {
                    worker,
                    table,
                    split_id,
                },
                Err(error) => {
                    // A writer that failed may hold half-sent buffers.
                    writer = None;
                    PipelineEvent::Failed {
                        worker,
                        table,
                        split_id,
                        error,
                    }
                }
            };
            if events.send(event).is_err() {
                return;
            }
        }
    });
    Worker { splits: tx, task }
}

/// What a split's run reports to and checks: its table, the coordinator's
/// events, the job's and the table's counters, the lease fence.
struct SplitRun<'a> {
    table: TableKey,
    events: &'a mpsc::UnboundedSender<PipelineEvent>,
    job_metrics: &'a JobMetrics,
    table_metrics: &'a TableMetrics,
    fence: &'a Fence,
    gate: &'a CommitGate,
    throttle: &'a SplitThrottle,
}

impl SplitRun<'_> {
    /// Runs one split; `Ok(true)` when done, `Ok(false)` when stopped
    /// early; with the gate still held if the last batch written had no
    /// resume key (its progress is the split's end, reported by the
    /// caller).
    async fn run<S: Source, W: SinkWriter<S::Batch>>(
        &self,
        source: &S,
        writer: &mut W,
        split: SplitState,
        mut stop: watch::Receiver<bool>,
    ) -> (Result<bool, EngineError>, Option<GateHold>) {
        let mut hold = None;
        let result = self
            .run_held(source, writer, split, &mut stop, &mut hold)
            .await;
        (result, hold)
    }

    async fn run_held<S: Source, W: SinkWriter<S::Batch>>(
        &self,
        source: &S,
        writer: &mut W,
        split: SplitState,
        stop: &mut watch::Receiver<bool>,
        hold: &mut Option<GateHold>,
    ) -> Result<bool, EngineError> {
        let reader = source.open(&split).await?;
        let (tx, mut rx) = mpsc::channel::<Result<ReadBatch<S::Batch>, EngineError>>(READ_AHEAD);
        let read_task = tokio::spawn(read_all(reader, tx, self.throttle.clone()));
        let _abort_reader = AbortOnDrop(read_task);
        loop {
            // A batch written without a resume key is reported only by the
            // split's end (or a later key): no stop in between.
            if hold.is_none() && *stop.borrow() {
                return Ok(false);
            }
            let next = tokio::select! {
                next = rx.recv() => next,
                changed = stop.changed(), if hold.is_none() => {
                    if changed.is_err() {
                        return Ok(false);
                    }
                    continue;
                }
            };
            let Some(batch) = next else { return Ok(true) };
            let batch = batch?;
            let (rows, bytes) = (batch.rows.len() as u64, batch.rows.byte_size() as u64);
            self.job_metrics.add_read(rows, bytes);
            self.table_metrics.add_read(rows);
            self.table_metrics.add_recopied(batch.rows.recopies());
            if !self.throttled_write(rows, bytes, hold, stop).await {
                return Ok(false);
            }
            let held = match hold.take() {
                Some(h) => h,
                None => self.gate.clone().read_owned().await,
            };
            // A fenced instance writes no further row (lease module).
            self.fence.check()?;
            let stats = match writer.write(&batch.rows).await {
                Ok(stats) => stats,
                Err(e) => {
                    // Held until the failure is reported: a half-written
                    // batch must not be committed before the coordinator
                    // knows of it.
                    *hold = Some(held);
                    return Err(e);
                }
            };
            self.job_metrics.add_written(stats.upserts, stats.deletes);
            self.table_metrics.add_written(stats.upserts, stats.deletes);
            self.table_metrics.add_recreated(stats.recreated);
            match batch.resume_key {
                Some(key) => {
                    let _ = self.events.send(PipelineEvent::Progress {
                        table: self.table,
                        split_id: split.split_id.clone(),
                        resume_key: key,
                    });
                    drop(held);
                }
                None => *hold = Some(held),
            }
        }
    }
}

impl SplitRun<'_> {
    /// Waits as the write limits say before a batch of `rows` and `bytes`
    /// is written; `false` when a stop came first (only while no write
    /// waits for its report: `hold` empty).
    async fn throttled_write(
        &self,
        rows: u64,
        bytes: u64,
        hold: &Option<GateHold>,
        stop: &mut watch::Receiver<bool>,
    ) -> bool {
        if hold.is_some() {
            self.throttle.write(rows, bytes).await;
            return true;
        }
        tokio::select! {
            () = self.throttle.write(rows, bytes) => true,
            _ = stop.wait_for(|stop| *stop) => false,
        }
    }
}

async fn read_all<R: SplitReader>(
    mut reader: R,
    tx: mpsc::Sender<Result<ReadBatch<R::Batch>, EngineError>>,
    throttle: SplitThrottle,
) {
    loop {
        // The queue's slot first, then the read: a batch is only fetched
        // when it can be queued, so a pipeline holds at most the batch
        // being written and the one after it, never a third in hand.
        let Ok(slot) = tx.reserve().await else { return };
        let (item, last) = match reader.next().await {
            Ok(Some(batch)) => (Ok(batch), false),
            Ok(None) => return,
            Err(e) => (Err(e), true),
        };
        let size = match &item {
            Ok(b) => (b.rows.len() as u64, b.rows.byte_size() as u64),
            Err(_) => (0, 0),
        };
        slot.send(item);
        if last {
            return;
        }
        // Paid after the batch is on its way: the next read waits.
        throttle.read(size.0, size.1).await;
    }
}

struct AbortOnDrop(JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}
