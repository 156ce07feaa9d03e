//! One table's window chain inside a job: the table's connectors, its
//! [`Enumerator`] (windows and split queues), and what the coordinator
//! knows of its sink position and schema. A job of many tables has one
//! chain per table; the pipelines and the checkpoint are shared, so every
//! checkpoint holds every chain's state ([`TableState`]).

use crate::checkpoint::{TableState, WindowState};
use crate::connector::{SchemaRecord, Source, TableRef};
use crate::enumerator::{CheckpointCapture, Enumerator};
use crate::identity::TableKey;
use crate::metrics::TableMetrics;
use crate::time::{SinkTime, SourceTime};
use std::sync::Arc;
use tokio::time::Instant;

/// One table's chain.
pub(super) struct Chain<S, K> {
    /// Key of the chain within the job (pipeline events carry it).
    pub(super) key: TableKey,
    /// The source table, by id, with its current name.
    pub(super) table: TableRef,
    pub(super) source: Arc<S>,
    pub(super) sink: Arc<K>,
    pub(super) enumerator: Enumerator,
    pub(super) metrics: Arc<TableMetrics>,
    /// When the open window (re)started.
    pub(super) window_opened: Option<Instant>,
    pub(super) next_window_at: Instant,
    /// Whether the open window's boundaries are in a completed checkpoint.
    pub(super) window_durable: bool,
    /// The window this job last recorded as the sink position.
    pub(super) position_for: Option<WindowState>,
    /// The window this job opened and has not handed a split of out yet
    /// (nor restarted since): the sink holds none of its rows, so a sink
    /// time taken now is valid for its `last_end`.
    pub(super) fresh_window: Option<WindowState>,
    /// The sink time known for a `last_end`: (last_end, sink time).
    pub(super) sink_time: Option<(SourceTime, SinkTime)>,
    /// The state the table was restored from, until the sink position was
    /// compared with it.
    pub(super) restored: Option<TableState>,
    /// Whether the sink was prepared (created or checked).
    pub(super) prepared: bool,
    /// The source schema last applied to the sink.
    pub(super) schema: Option<SchemaRecord>,
    /// Why the table is paused (no split of it is handed out), if it is.
    pub(super) paused: Option<String>,
    /// The source table is gone; the chain is retired once no split of it
    /// is out.
    pub(super) dropped: bool,
    /// A transactional sink waits for [`crate::connector::Sink::recover`]
    /// before any write: `Some(true)` continues from its last commit if
    /// that is further (a restore or a restart), `Some(false)` only undoes
    /// what was not committed (a fresh start).
    pub(super) recover_sink: Option<bool>,
    /// Whether the transactional sink's last commit continues this chain
    /// (it was restored, or this run committed since): only then may a
    /// restart continue from it.
    pub(super) own_commit: bool,
    /// The source's cursor after its last planned window
    /// ([`crate::connector::Source::cursor`]).
    pub(super) cursor: Option<serde_json::Value>,
}

impl<S: Source, K> Chain<S, K> {
    /// A chain for `table`, continuing `state` if given (else from a
    /// snapshot).
    pub(super) fn new(
        key: TableKey,
        table: TableRef,
        (source, sink): (S, K),
        state: Option<&TableState>,
    ) -> Self {
        let metrics = Arc::new(TableMetrics::new(table.id.clone(), &table.name));
        let mut chain = Chain {
            key,
            table,
            source: Arc::new(source),
            sink: Arc::new(sink),
            enumerator: Enumerator::new(),
            metrics,
            window_opened: None,
            next_window_at: Instant::now(),
            window_durable: false,
            position_for: None,
            fresh_window: None,
            sink_time: None,
            restored: None,
            prepared: false,
            schema: None,
            paused: None,
            dropped: false,
            recover_sink: None,
            own_commit: false,
            cursor: None,
        };
        chain.reset_to(state);
        chain
    }

    /// Resets the chain to `state` (a restart from the newest complete
    /// checkpoint; `None`: the table is not in it, so from a snapshot).
    pub(super) fn reset_to(&mut self, state: Option<&TableState>) {
        self.enumerator = match state {
            Some(t) => Enumerator::restore_table(t),
            None => Enumerator::new(),
        };
        self.schema = state.and_then(|t| t.schema.clone()).map(SchemaRecord);
        self.cursor = state.and_then(|t| t.source_cursor.clone());
        self.source.resume_from(self.cursor.as_ref());
        // Dropped pipelines may have rows of any window in flight.
        self.fresh_window = None;
        // A restored window is in a completed checkpoint already.
        self.window_durable = self.enumerator.window().is_some();
        self.window_opened = self.enumerator.window().map(|_| Instant::now());
        self.publish();
    }

    /// Whether splits of this chain may be handed out or windows opened.
    pub(super) fn active(&self) -> bool {
        self.paused.is_none() && !self.dropped
    }

    /// No window is open and the snapshot is done.
    pub(super) fn between_windows(&self) -> bool {
        self.enumerator.window().is_none() && self.enumerator.last_end().is_some()
    }

    /// The open window's splits are all finished.
    pub(super) fn window_drained(&self) -> bool {
        let c = self.enumerator.counts();
        self.enumerator.window().is_some() && c.unassigned == 0 && c.pending == 0
    }

    /// The table's state in a checkpoint captured as `capture`.
    pub(super) fn state(&self, capture: &CheckpointCapture) -> TableState {
        TableState {
            last_end_timestamp: capture.last_end_timestamp,
            window: capture.window,
            unassigned: capture.unassigned.clone(),
            pending: capture.pending.clone(),
            schema: self.schema.as_ref().map(|s| s.0.clone()),
            paused: self.paused.clone(),
            source_cursor: self.cursor.clone(),
            ..TableState::new(self.table.id.clone(), self.table.name.clone())
        }
    }

    /// Pauses the table: no more of its splits are handed out.
    pub(super) fn pause(&mut self, why: String) {
        self.metrics.set_paused(Some(why.clone()));
        self.paused = Some(why);
    }

    /// Updates the table's gauges.
    pub(super) fn publish(&self) {
        self.metrics.set_chain(
            self.enumerator.counts(),
            self.enumerator.window().is_some(),
            S::CLOCK,
            self.enumerator.last_end(),
        );
    }
}

/// The state of `table` in `states`: by id, or (a state of an older build,
/// which has no ids) by name.
pub(super) fn find_table<'a>(states: &'a [TableState], table: &TableRef) -> Option<&'a TableState> {
    states
        .iter()
        .find(|t| !t.table_id.is_unknown() && t.table_id == table.id)
        .or_else(|| {
            states
                .iter()
                .find(|t| t.table_id.is_unknown() && t.table_name == table.name)
        })
}
