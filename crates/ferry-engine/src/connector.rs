//! The small traits connectors implement; the engine owns the control loop
//! (assigning splits, checkpoints, retries, stop/savepoint) once.
//!
//! A [`Source`] plans the splits of a window and opens a [`SplitReader`]
//! for one split; the reader yields batches with the resume key of their
//! last row. A [`Sink`] is prepared once before the job starts (created or
//! checked) and then makes [`SinkWriter`]s that apply a batch and return
//! only when it is durably written, so "progress" can follow the flush.
//! A sink's core is `prepare` / `writer` / `name`; what more it can do it
//! opts into as a capability the engine asks for: two-phase commit
//! ([`TwoPhaseCommit`]), position records ([`SinkPositions`]: which window
//! its rows may come from, so that a restore from an older state resumes
//! where the sink is) and schema following ([`SchemaFollower`]).
//!
//! The batch type is the source's choice ([`Source::Batch`]); a job pairs a
//! source with a sink that accepts that type (`K: Sink<S::Batch>`), so
//! batches pass from reader to writer as they are, with no conversion, and
//! no trait here names a Kudu type.

use crate::checkpoint::{SplitState, TableState, WindowState};
use crate::error::EngineError;
use crate::identity::TableId;
use crate::sink_position::{Cut, SinkPosition};
use crate::time::{SinkTime, SourceClock, SourceTime};
use serde::{Deserialize, Serialize};
use std::future::Future;

/// What the engine needs to know of a batch, for its metrics.
pub trait Batch: Send + Sync + 'static {
    /// Rows in the batch.
    fn len(&self) -> usize;

    /// Whether the batch has no rows.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Bytes the batch carried from the source.
    fn byte_size(&self) -> usize;

    /// Parts of the source (for Kudu: tablets) whose copy this batch
    /// starts again from scratch because the history a diff window needed
    /// ran out; for metrics.
    fn recopies(&self) -> u64 {
        0
    }
}

/// A batch read from a split: rows (for the Kudu source, with IS_DELETED in
/// diff windows) and the resume key of the last row, where the split resumes.
#[derive(Debug)]
pub struct ReadBatch<B> {
    /// The rows.
    pub rows: B,
    /// Where the split resumes after this batch (`None`: from its start).
    pub resume_key: Option<Vec<u8>>,
}

/// What one written batch did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct WriteStats {
    /// Rows upserted.
    pub upserts: u64,
    /// Rows deleted.
    pub deletes: u64,
    /// Bytes written.
    pub bytes: u64,
    /// Upserted rows the sink had to delete first (a Kudu row re-created
    /// on the source with new immutable cells); also in `upserts`.
    pub recreated: u64,
}

/// A table a job replicates: its id, stable across renames, and its name
/// now.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct TableRef {
    /// The source table's id (for Kudu, the master's 32-hex-digit id).
    pub id: TableId,
    /// The source table's current name.
    pub name: String,
}

/// A source table's schema as its connector describes it, for
/// `job.schemaEvolution`: opaque to the engine, which compares it with the
/// one it applied last and stores it in checkpoints.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct SchemaRecord(pub serde_json::Value);

/// What [`Source::plan`] makes of a window.
#[derive(Debug, Default)]
pub struct WindowPlan {
    /// The splits that cover the window.
    pub splits: Vec<SplitState>,
    /// Where the next window starts, when that does not follow from this
    /// window's end time alone (a Kafka source: each partition's next
    /// offset). Opaque to the engine, which stores it with the window and
    /// passes it to the next `plan`; `None` for sources whose windows
    /// follow from their end times.
    pub cursor: Option<serde_json::Value>,
    /// Parts of the source (for Kudu: tablets) left out because they are
    /// proven to have no change in the window: they need no read, and the
    /// window's end holds for them as for the rest. For metrics.
    pub skipped: u64,
    /// How long after this window opened the source asks the next one to
    /// open, at the soonest: what reading costs the source, paced to a
    /// budget (`reader.diffScanBudget`). The engine waits at least
    /// `job.discoveryIntervalSeconds` and never past what `reader.maxLag`
    /// allows. `None`: no pace.
    pub pace: Option<std::time::Duration>,
}

impl WindowPlan {
    /// A plan of `splits` with no cursor and nothing left out.
    pub fn of(splits: Vec<SplitState>) -> Self {
        WindowPlan {
            splits,
            ..WindowPlan::default()
        }
    }
}

/// Where changes come from.
pub trait Source: Send + Sync + 'static {
    /// The batches its readers yield.
    type Batch: Batch;
    /// Reader of one split.
    type Reader: SplitReader<Batch = Self::Batch>;

    /// The source's name as an operator of the job (Flink's source class:
    /// `KuduSource`, `KafkaSource`): metrics and the REST API show the job's
    /// source operator as `Source: <NAME>`.
    const NAME: &'static str;

    /// How this source's times ([`Source::now`], window ends) read as
    /// wall-clock time: `lastEndTimestamp`, the lag and every other
    /// wall-clock view of a source time go through it.
    const CLOCK: SourceClock;

    /// The source's clock now (for Kudu, hybrid time): window ends come
    /// from here, never from the local clock.
    fn now(&self) -> impl Future<Output = Result<SourceTime, EngineError>> + Send;

    /// The plan of `window` (snapshot or diff): its splits, where the
    /// window after it starts and what it left out. `cursor` is the one
    /// the engine kept from the plan before (`None` on a first window, or
    /// from a state that has none): where this window starts when that
    /// does not follow from its start time alone.
    ///
    /// The engine keeps the returned cursor with the window (in its chain
    /// and in checkpoints) and gives it back to the next `plan` and to
    /// [`Source::window_committed`]: a source holds no per-window state,
    /// and there is no call order for it to get right.
    fn plan(
        &self,
        window: WindowState,
        cursor: Option<&serde_json::Value>,
    ) -> impl Future<Output = Result<WindowPlan, EngineError>> + Send;

    /// Opens `split`, continuing after its resume key if it has one.
    fn open(
        &self,
        split: &SplitState,
    ) -> impl Future<Output = Result<Self::Reader, EngineError>> + Send;

    /// Whether the source has nothing after the window whose plan returned
    /// `cursor` (a bounded source read up to its end). Once every table's
    /// source is exhausted and its last window completed, the job takes a
    /// final checkpoint and ends FINISHED. Unbounded sources keep the
    /// default.
    fn exhausted(&self, cursor: Option<&serde_json::Value>) -> bool {
        let _ = cursor;
        false
    }

    /// The window planned with `cursor` ([`WindowPlan::cursor`]) is
    /// complete and in a completed checkpoint: everything before it is in
    /// the sink for good. A notification (for monitoring, e.g. a Kafka
    /// consumer group's offsets); it must not block, and nothing depends
    /// on it succeeding.
    fn window_committed(&self, cursor: Option<&serde_json::Value>) {
        let _ = cursor;
    }

    /// The source table's schema now (`job.schemaEvolution`), asked before
    /// each window opens; `None`: the source does not describe schemas
    /// (the engine then never asks the sink to follow one).
    fn schema(&self) -> impl Future<Output = Result<Option<SchemaRecord>, EngineError>> + Send {
        async { Ok(None) }
    }

    /// The source table's schema for `window`, asked after its end was
    /// chosen and before it is planned; by default [`Source::schema`]. A
    /// source may answer with the schema it read before when it proves the
    /// window copies nothing (no row of it can hold a new column), so a
    /// job of many idle tables asks no catalog per table per window.
    fn schema_for(
        &self,
        window: WindowState,
    ) -> impl Future<Output = Result<Option<SchemaRecord>, EngineError>> + Send {
        let _ = window;
        self.schema()
    }
}

/// Streams the batches of one split.
pub trait SplitReader: Send + 'static {
    /// The batches it yields.
    type Batch: Batch;

    /// The next batch, or `None` when the split is done.
    fn next(
        &mut self,
    ) -> impl Future<Output = Result<Option<ReadBatch<Self::Batch>>, EngineError>> + Send;
}

/// Where changes go: a sink that accepts batches of type `B`.
pub trait Sink<B: Batch>: Send + Sync + 'static {
    /// One pipeline's writer.
    type Writer: SinkWriter<B>;

    /// Makes the sink ready before the job starts (create what is missing,
    /// check that what exists can take the source's rows). The job does not
    /// start when this fails. Sinks with nothing to prepare keep the default.
    fn prepare(&mut self) -> impl Future<Output = Result<(), EngineError>> + Send {
        async { Ok(()) }
    }

    /// A new writer.
    fn writer(&self) -> impl Future<Output = Result<Self::Writer, EngineError>> + Send;

    /// The sink's name now, for status and metrics (a Kudu sink: its
    /// table's name, which a followed rename may change). Sinks without a
    /// name keep the default, empty.
    fn name(&self) -> String {
        String::new()
    }

    /// Two-phase commit, for a sink whose writes stay invisible until
    /// committed (exactly-once delivery through transactions). The engine
    /// then commits at every checkpoint and savepoint, with no write in
    /// flight, before it writes the state; and recovers after `prepare`
    /// and after every restart, before any write. `None` (the default):
    /// writes are visible when [`SinkWriter::write`] returns.
    fn two_phase_commit(&self) -> Option<&dyn TwoPhaseCommit> {
        None
    }

    /// The sink's position records (docs/semantics.md, "Restoring an older
    /// state"), so a restore from an older state resumes where the sink
    /// is. `None` (the default): the sink keeps none.
    fn positions(&self) -> Option<&dyn SinkPositions> {
        None
    }

    /// Schema following (`job.schemaEvolution`). `None` (the default): the
    /// sink does not follow source schemas, and the engine never asks.
    fn schema_follower(&self) -> Option<&dyn SchemaFollower> {
        None
    }

    /// Publishing consistent cuts ([`SinkCuts`]). With it the job opens
    /// its tables' windows together, so that every window yields a cut.
    /// `None` (the default): the sink publishes none.
    fn cuts(&self) -> Option<&dyn SinkCuts> {
        None
    }
}

/// The future of a sink capability's call. Capabilities are called a few
/// times per window or checkpoint, so they are boxed (and dyn); the hot
/// path, [`SinkWriter::write`], stays static.
pub type CapabilityFuture<'a, T> =
    std::pin::Pin<Box<dyn Future<Output = Result<T, EngineError>> + Send + 'a>>;

/// A sink capability: two-phase commit ([`Sink::two_phase_commit`]).
pub trait TwoPhaseCommit: Send + Sync {
    /// Makes every write since the last commit visible, atomically with
    /// `state`: the table's state as the checkpoint about to be written
    /// records it, which covers exactly those writes. A failure leaves
    /// the writes undone or done with `state` (the engine restarts and
    /// asks [`TwoPhaseCommit::recover`] which).
    fn commit<'a>(&'a self, state: &'a TableState) -> CapabilityFuture<'a, ()>;

    /// Discards every write not committed (this process's, or an earlier
    /// one's with the same identity, which it also fences off) and returns
    /// the state stored with the last commit, if any: the writes visible
    /// on the sink are exactly the ones it covers.
    fn recover(&self) -> CapabilityFuture<'_, Option<TableState>>;
}

/// A sink capability: position records ([`Sink::positions`]).
pub trait SinkPositions: Send + Sync {
    /// Records on the sink how far it may be: `position`'s window may have
    /// rows in the sink from now on. Durable when it returns.
    fn record_position<'a>(&'a self, position: &'a SinkPosition) -> CapabilityFuture<'a, ()>;

    /// The position last recorded on the sink, if any (after `prepare`).
    fn read_position(&self) -> CapabilityFuture<'_, Option<SinkPosition>>;

    /// A time of the sink's own clock that is after every write
    /// acknowledged so far and before every later write of the job (for
    /// Kudu, a hybrid time of the sink cluster; docs/semantics.md, "The
    /// sink time"). Asked when a window opens, before the position write
    /// and any row of the window, and recorded as the position's
    /// `last_end_sink_time`. `None`: the sink has no such clock.
    fn sink_time(&self) -> CapabilityFuture<'_, Option<SinkTime>>;
}

/// A sink capability: publishing consistent cuts ([`Sink::cuts`]) for
/// readers of the sink (docs/dr.md, "Consistent reads on the standby").
pub trait SinkCuts: Send + Sync {
    /// Publishes `cut`: from now on readers may read every table it lists
    /// at its sink time. Called between windows, at most once per source
    /// instant, only with a sink time the sink gave
    /// ([`SinkPositions::sink_time`]) while every listed table held exactly
    /// the windows up to the cut's source instant. A failure is logged and
    /// the next window's cut is tried; replication goes on.
    fn record_cut<'a>(&'a self, cut: &'a Cut) -> CapabilityFuture<'a, ()>;
}

/// A sink capability: following the source's schema
/// ([`Sink::schema_follower`]).
pub trait SchemaFollower: Send + Sync {
    /// Brings the sink in line with the source schema `now`, given the one
    /// applied last (`applied`, from the checkpoint; `None` on a first
    /// start or with a state of an older build). Called between windows,
    /// after `prepare`, before any row of the next window and only when
    /// `now` differs from `applied`. Must be idempotent: a crash after the
    /// sink changed and before the checkpoint recorded it calls it again
    /// with the same `applied`. A change it will not apply is a table
    /// fault ([`crate::error::ConnectorError::table_fault`]: the table is
    /// paused, nothing more is written to it).
    fn follow_schema<'a>(
        &'a self,
        applied: Option<&'a SchemaRecord>,
        now: &'a SchemaRecord,
    ) -> CapabilityFuture<'a, ()>;
}

/// Applies batches of type `B` to the sink.
pub trait SinkWriter<B>: Send + 'static {
    /// Applies every row of `batch` (upsert live rows, delete deleted ones)
    /// and returns once all of them are durably written.
    fn write(&mut self, batch: &B) -> impl Future<Output = Result<WriteStats, EngineError>> + Send;
}

/// The tables of a job and their connectors: finds the source tables to
/// replicate (a list of names, a pattern, or one table) and makes each
/// one's source and sink. The engine calls `discover` at start and every
/// `job.tableDiscoveryIntervalSeconds`, and `connect` once per table.
pub trait Tables: Send + Sync + 'static {
    /// One table's source.
    type Source: Source;
    /// One table's sink.
    type Sink: Sink<<Self::Source as Source>::Batch>;

    /// The source tables the job replicates now: every table the job's
    /// selection matches, plus every table in `known` (followed by id:
    /// renamed or not) that still exists, each with its current name. A
    /// known table missing from the answer was dropped.
    fn discover(
        &self,
        known: &[TableRef],
    ) -> impl Future<Output = Result<Vec<TableRef>, EngineError>> + Send;

    /// The source and the (unprepared) sink of `table`.
    fn connect(&self, table: &TableRef) -> Result<(Self::Source, Self::Sink), EngineError>;
}

/// A job of one table whose source and sink are made already (tests, and
/// jobs whose connectors are not Kudu's).
pub struct SingleTable<S, K> {
    table: TableRef,
    connectors: std::sync::Mutex<Option<(S, K)>>,
}

impl<S, K> SingleTable<S, K> {
    /// The table `table` read by `source` and written by `sink`.
    pub fn new(table: TableRef, source: S, sink: K) -> Self {
        SingleTable {
            table,
            connectors: std::sync::Mutex::new(Some((source, sink))),
        }
    }
}

impl<S: Source, K: Sink<S::Batch>> Tables for SingleTable<S, K> {
    type Source = S;
    type Sink = K;

    async fn discover(&self, _known: &[TableRef]) -> Result<Vec<TableRef>, EngineError> {
        Ok(vec![self.table.clone()])
    }

    fn connect(&self, table: &TableRef) -> Result<(S, K), EngineError> {
        self.connectors
            .lock()
            .ok()
            .and_then(|mut c| c.take())
            .ok_or_else(|| {
                EngineError::TableMismatch(format!(
                    "table '{}' was connected twice (a single-table job has one source and one sink)",
                    table.name
                ))
            })
    }
}
