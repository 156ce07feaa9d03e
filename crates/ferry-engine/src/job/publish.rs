//! What a job shows, published whole: the coordinator keeps one [`Board`]
//! in a `watch` channel (status, checkpoint history, failures, each
//! table's identity), and a [`JobHandle`](super::JobHandle) reads it in one
//! borrow, adding the live counters the pipelines update (atomics in
//! [`JobMetrics`] and each [`TableMetrics`]) at read time.

use crate::identity::{TableId, TableKey};
use crate::metrics::{JobMetrics, TableMetrics};
use crate::status::{CheckpointRecord, ExceptionRecord, JobStatus, TableSnapshot};
use crate::throttle::{Limits, Throttles};
use std::collections::VecDeque;
use std::sync::Arc;
use tokio::sync::watch;

/// How many failures a job remembers.
pub const MAX_EXCEPTIONS: usize = 100;

/// How many checkpoints the history keeps.
const HISTORY_LEN: usize = 100;

/// One table of the job as shown: its identity and pause, with its
/// counters.
#[derive(Debug, Clone)]
pub(super) struct ShownTable {
    /// The chain's key in the coordinator.
    pub(super) key: TableKey,
    pub(super) table_id: TableId,
    pub(super) table_name: String,
    pub(super) sink_table: String,
    pub(super) paused: Option<String>,
    pub(super) metrics: Arc<TableMetrics>,
}

impl ShownTable {
    /// The table's view: this identity with its counters now.
    fn snapshot(&self) -> TableSnapshot {
        let mut t = TableSnapshot {
            table_id: self.table_id.clone(),
            table_name: self.table_name.clone(),
            sink_table: self.sink_table.clone(),
            paused: self.paused.clone(),
            ..TableSnapshot::default()
        };
        self.metrics.fill(&mut t);
        t
    }

    fn same(&self, other: &ShownTable) -> bool {
        self.table_id == other.table_id
            && self.table_name == other.table_name
            && self.sink_table == other.sink_table
            && self.paused == other.paused
            && Arc::ptr_eq(&self.metrics, &other.metrics)
    }
}

/// Everything a job shows but its live counters.
#[derive(Debug, Clone)]
pub(super) struct Board {
    pub(super) status: JobStatus,
    /// Completed checkpoints and savepoints, oldest first (the last 100).
    pub(super) checkpoints: Vec<CheckpointRecord>,
    /// Failures, newest first (at most [`MAX_EXCEPTIONS`]).
    pub(super) exceptions: VecDeque<ExceptionRecord>,
    /// Where the last periodic savepoint went.
    pub(super) last_periodic_savepoint: Option<String>,
    /// Each table, in the order it was found.
    pub(super) tables: Vec<ShownTable>,
}

impl Board {
    /// Each table's identity, chain and counters, by current name.
    pub(super) fn tables(&self) -> Vec<TableSnapshot> {
        let mut tables: Vec<_> = self.tables.iter().map(ShownTable::snapshot).collect();
        tables.sort_by(|a, b| a.table_name.cmp(&b.table_name));
        tables
    }
}

/// The coordinator's side of what the job shows: the board's sender and
/// the job's live metrics.
pub(super) struct Publisher {
    board: watch::Sender<Board>,
    pub(super) metrics: Arc<JobMetrics>,
    /// The limits, changed live through the handle; their sleep counters.
    pub(super) throttles: Arc<Throttles>,
}

impl Publisher {
    /// A RUNNING job with nothing done yet, throttled by `limits`.
    pub(super) fn new(limits: Limits) -> Self {
        let board = Board {
            status: JobStatus::Running,
            checkpoints: Vec::new(),
            exceptions: VecDeque::new(),
            last_periodic_savepoint: None,
            tables: Vec::new(),
        };
        Publisher {
            board: watch::channel(board).0,
            metrics: Arc::new(JobMetrics::default()),
            throttles: Arc::new(Throttles::new(limits)),
        }
    }

    /// A reader of the board (for a handle).
    pub(super) fn subscribe(&self) -> watch::Receiver<Board> {
        self.board.subscribe()
    }

    /// Shows `status` (readers waiting for a change wake only if it is one).
    pub(super) fn status(&self, status: JobStatus) {
        self.board.send_if_modified(|b| {
            let changed = b.status != status;
            b.status = status;
            changed
        });
    }

    /// Adds a completed checkpoint or savepoint to the history.
    pub(super) fn checkpoint(&self, record: CheckpointRecord) {
        self.board.send_modify(|b| {
            b.checkpoints.push(record);
            let excess = b.checkpoints.len().saturating_sub(HISTORY_LEN);
            b.checkpoints.drain(..excess);
        });
    }

    /// Adds a failure (newest first).
    pub(super) fn exception(&self, record: ExceptionRecord) {
        self.board.send_modify(|b| {
            b.exceptions.push_front(record);
            b.exceptions.truncate(MAX_EXCEPTIONS);
        });
    }

    /// Where the last periodic savepoint went.
    pub(super) fn periodic_savepoint(&self, path: String) {
        self.metrics.periodic_savepoint_completed();
        self.board
            .send_modify(|b| b.last_periodic_savepoint = Some(path));
    }

    /// Shows `table` (a new one, or what changed of a known one).
    pub(super) fn table(&self, table: ShownTable) {
        self.board.send_if_modified(|b| {
            match b.tables.iter_mut().find(|t| t.key == table.key) {
                Some(t) if t.same(&table) => return false,
                Some(t) => *t = table,
                None => b.tables.push(table),
            }
            true
        });
    }

    /// The table of chain `key` is no longer replicated.
    pub(super) fn table_gone(&self, key: TableKey) {
        self.board.send_if_modified(|b| {
            let before = b.tables.len();
            b.tables.retain(|t| t.key != key);
            b.tables.len() != before
        });
    }
}
