//! One table's window chain inside a job: the table's connectors, its
//! [`Enumerator`] (windows and split queues), its [`Phase`] (how far the
//! open window is towards its splits going out, and whether the sink may
//! be written), and what the coordinator knows of its sink and schema. A
//! job of many tables has one chain per table; the pipelines and the
//! checkpoint are shared, so every checkpoint holds every chain's state
//! ([`TableState`]).
//!
//! The enumerator's window and the phase's change together, only here
//! and in `position` / `commit` (restore, restart, recovery), so they
//! always agree.

use super::phase::{Phase, Resumed};
use super::publish::ShownTable;
use crate::checkpoint::{SplitState, TableState, WindowState};
use crate::connector::{SchemaRecord, Sink, Source, TableRef};
use crate::enumerator::{AfterCheckpoint, CheckpointCapture, Enumerator, EnumeratorError};
use crate::identity::TableKey;
use crate::metrics::TableMetrics;
use crate::throttle::{SplitThrottle, Throttles, WindowKind};
use crate::time::{SinkTime, SourceTime};
use std::sync::Arc;
use std::time::Duration;
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
    /// Where the chain stands (`phase`): every decision about its window
    /// and its sink asks it.
    pub(super) phase: Phase,
    /// When the open window (re)started.
    pub(super) window_opened: Option<Instant>,
    /// How long the last completed window took, from its opening to the
    /// checkpoint that completed it.
    pub(super) last_took: Duration,
    pub(super) next_window_at: Instant,
    /// The sink time known for a `last_end`: (last_end, sink time).
    pub(super) sink_time: Option<(SourceTime, SinkTime)>,
    /// The source schema last applied to the sink.
    pub(super) schema: Option<SchemaRecord>,
    /// Whether the transactional sink's last commit continues this chain
    /// (it was restored, or this run committed since): only then may a
    /// restart continue from it.
    pub(super) own_commit: bool,
    /// The source's cursor after its last planned window
    /// ([`crate::connector::WindowPlan::cursor`]), given to its next
    /// `plan`.
    pub(super) cursor: Option<serde_json::Value>,
}

impl<S: Source, K> Chain<S, K> {
    /// A chain for `table`, continuing `state` if given (else from a
    /// snapshot); `restored`: `state` came from a restore point, so the
    /// sink position is compared with it once the sink is prepared.
    pub(super) fn new(
        key: TableKey,
        table: TableRef,
        (source, sink): (S, K),
        state: Option<TableState>,
        restored: bool,
    ) -> Self {
        let mut chain = Chain {
            key,
            table,
            source: Arc::new(source),
            sink: Arc::new(sink),
            enumerator: Enumerator::new(),
            metrics: Arc::new(TableMetrics::new()),
            phase: Phase::preparing(None),
            window_opened: None,
            last_took: Duration::ZERO,
            next_window_at: Instant::now(),
            sink_time: None,
            schema: None,
            own_commit: false,
            cursor: None,
        };
        chain.load(state.as_ref());
        chain.phase = Phase::preparing(state.filter(|_| restored));
        chain
    }

    /// Loads `state` (`None`: from a snapshot) into the enumerator, the
    /// schema and the source's cursor; the caller sets the phase.
    pub(super) fn load(&mut self, state: Option<&TableState>) {
        self.enumerator = match state {
            Some(t) => Enumerator::restore_table(t),
            None => Enumerator::new(),
        };
        self.schema = state.and_then(|t| t.schema.clone()).map(SchemaRecord);
        self.cursor = state.and_then(|t| t.source_cursor.clone());
        self.window_opened = self.enumerator.window().map(|_| Instant::now());
        self.publish();
    }

    /// A restart: back to `state` (the table's in the newest complete
    /// checkpoint; `None`: the table is not in it, so from a snapshot).
    /// A transactional sink undoes what it did not commit first, and may
    /// be further than the checkpoint (committed, then the checkpoint
    /// failed).
    pub(super) fn restart(&mut self, state: Option<&TableState>)
    where
        K: Sink<S::Batch>,
    {
        self.load(state);
        let recover = self
            .sink
            .two_phase_commit()
            .is_some()
            .then_some(self.own_commit);
        let resumed = Resumed::restored(self.enumerator.window());
        self.advance(|phase| phase.restarted(resumed, recover));
    }

    /// The throttles a split of the open window goes through.
    pub(super) fn throttle(&self, throttles: &Arc<Throttles>) -> SplitThrottle {
        let kind = match self.enumerator.window() {
            Some(w) if !w.is_snapshot() => WindowKind::Diff,
            _ => WindowKind::Snapshot,
        };
        SplitThrottle::new(throttles.clone(), &self.table.name, kind)
    }

    /// Moves the chain to the phase `next` makes of its current one.
    pub(super) fn advance(&mut self, next: impl FnOnce(Phase) -> Phase) {
        let now = std::mem::replace(&mut self.phase, Phase::preparing(None));
        self.phase = next(now);
    }

    /// Opens `window` with `splits` (the chain is between windows).
    pub(super) fn open(
        &mut self,
        window: WindowState,
        splits: Vec<SplitState>,
    ) -> Result<(), EnumeratorError> {
        let Phase::Between(between) = self.phase else {
            return Ok(());
        };
        self.enumerator.open_window(window, splits)?;
        self.phase = Phase::Opened(between.opened(window));
        self.window_opened = Some(Instant::now());
        Ok(())
    }

    /// The next split to hand out, if the phase allows one.
    pub(super) fn hand_out(&mut self) -> Option<SplitState> {
        if !self.phase.may_hand_out() {
            return None;
        }
        self.enumerator.assign()
    }

    /// A checkpoint taken as `capture` completed: every window open now
    /// is durable, and the open one may have completed with it.
    pub(super) fn checkpointed(&mut self, capture: &CheckpointCapture) -> AfterCheckpoint {
        let after = self.enumerator.checkpoint_completed(capture);
        let completed = matches!(after, AfterCheckpoint::WindowCompleted { .. });
        self.advance(|phase| phase.checkpointed(completed));
        after
    }

    /// Whether splits of this chain may be handed out or windows opened.
    pub(super) fn active(&self) -> bool {
        self.phase.active()
    }

    /// Takes part in the job's consistent cuts: active and past its
    /// snapshot. A table still copying its snapshot holds no cut, and must
    /// not hold the other tables' windows for the whole of its copy.
    pub(super) fn in_cuts(&self) -> bool {
        self.active() && self.enumerator.last_end().is_some()
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
            paused: self.phase.paused().map(str::to_owned),
            source_cursor: self.cursor.clone(),
            ..TableState::new(self.table.id.clone(), self.table.name.clone())
        }
    }

    /// Pauses the table: no more of its splits are handed out.
    pub(super) fn pause(&mut self, why: String) {
        self.advance(|phase| phase.pause(why));
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

    /// The table as the job shows it.
    pub(super) fn shown(&self) -> ShownTable
    where
        K: Sink<S::Batch>,
    {
        ShownTable {
            key: self.key,
            table_id: self.table.id.clone(),
            table_name: self.table.name.clone(),
            sink_table: self.sink.name(),
            paused: self.phase.paused().map(str::to_owned),
            metrics: self.metrics.clone(),
        }
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

/// How long after a window opens the chain's next one may open: the
/// discovery interval, or the source's `pace` when longer, but never so
/// long that the next window ends later than `max_lag` after this one
/// opened, judging by how long the last window took (`last_took`).
pub(super) fn window_interval(
    discovery: Duration,
    pace: Option<Duration>,
    max_lag: Duration,
    last_took: Duration,
) -> Duration {
    let Some(pace) = pace else {
        return discovery;
    };
    pace.min(max_lag.saturating_sub(last_took)).max(discovery)
}

#[cfg(test)]
mod tests {
    use super::window_interval;
    use std::time::Duration;

    fn s(x: u64) -> Duration {
        Duration::from_secs(x)
    }

    #[test]
    fn a_pace_stretches_the_interval_up_to_the_lag_bound() {
        // No pace: the discovery interval, whatever the bound.
        assert_eq!(window_interval(s(1), None, s(30), s(0)), s(1));
        // A pace shorter than discovery changes nothing.
        assert_eq!(window_interval(s(5), Some(s(2)), s(30), s(1)), s(5));
        // A longer pace wins...
        assert_eq!(window_interval(s(1), Some(s(4)), s(30), s(1)), s(4));
        // ...up to the bound, less what the last window took.
        assert_eq!(window_interval(s(1), Some(s(60)), s(30), s(5)), s(25));
        // The bound never makes the interval shorter than discovery.
        assert_eq!(window_interval(s(10), Some(s(60)), s(30), s(25)), s(10));
        assert_eq!(window_interval(s(1), Some(s(60)), s(3), s(9)), s(1));
    }
}
