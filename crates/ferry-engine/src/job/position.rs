//! The sink position of each table: recorded before a window's splits are
//! handed out (the chain's phase goes from [`Durable`] to handing out only
//! here), and on a start from a restore point the table continues from
//! the later of the restored state and the position
//! ([`crate::sink_position`], docs/semantics.md "Restoring an older
//! state").

use super::chain::Chain;
use super::phase::{Durable, Phase};
use crate::checkpoint::{JobState, SnapshotKind, TableState};
use crate::connector::{Sink, Source};
use crate::enumerator::Enumerator;
use crate::error::EngineError;
use crate::lease::Fence;
use crate::sink_position::{choose, state_end, Resume, SinkPosition};
use crate::time::{SinkTime, SourceTime};

impl<S: Source, K: Sink<S::Batch>> Chain<S, K> {
    /// Records the durable open window as the sink position, before any
    /// of its splits is handed out; then they may go. Nothing to do in
    /// another phase. A failure counts as a failed checkpoint.
    pub(super) async fn record_position(
        &mut self,
        job_id: &str,
        fence: &Fence,
    ) -> Result<(), EngineError> {
        let Some(durable) = self.phase.needs_position() else {
            return Ok(());
        };
        let window = durable.window();
        // A fenced instance writes nothing to the sink (lease module).
        fence.check()?;
        let last_end = self.enumerator.last_end();
        let position = SinkPosition {
            source_table: self.table.name.clone(),
            job_id: job_id.to_owned(),
            generation: fence.generation(),
            last_end,
            window,
            last_end_sink_time: self.sink_time_for(durable, last_end).await?,
        };
        if let Some(positions) = self.sink.positions() {
            positions.record_position(&position).await?;
        }
        tracing::debug!(table = %self.table.name, start = ?window.start_timestamp, end = %window.end_timestamp, "sink position recorded");
        self.phase = Phase::HandingOut(durable.position_recorded());
        Ok(())
    }

    /// The sink time of `last_end` for the position of the `durable`
    /// window: taken now if this job opened the window and the sink holds
    /// none of its rows yet (it is fresh), else the one known for that
    /// `last_end` (from the opening, or from the position record a
    /// restored job read), else unknown.
    async fn sink_time_for(
        &mut self,
        durable: Durable,
        last_end: Option<SourceTime>,
    ) -> Result<Option<SinkTime>, EngineError> {
        let Some(last_end) = last_end else {
            return Ok(None);
        };
        if durable.fresh() {
            let time = match self.sink.positions() {
                Some(positions) => positions.sink_time().await?,
                None => None,
            };
            self.sink_time = time.map(|t| (last_end, t));
            return Ok(time);
        }
        Ok(self
            .sink_time
            .filter(|&(end, _)| end == last_end)
            .map(|(_, t)| t))
    }

    /// On a start from a restore point (only then: `restored`, the state
    /// the preparing phase holds): reads the sink position and, if the
    /// sink is further than the restored state, continues from the
    /// position instead — its `last_end`, then exactly its window with
    /// freshly planned splits (in no checkpoint yet). Done once, after the
    /// sink was prepared. Returns the table state to continue from when it
    /// changed (a restart before the next checkpoint comes back to it).
    pub(super) async fn merge_position(
        &mut self,
        restored: Option<&TableState>,
    ) -> Result<Option<TableState>, EngineError> {
        let Some(table_state) = restored.cloned() else {
            return Ok(None);
        };
        // `choose` compares a stored state; this table's, alone.
        let mut state = JobState::new(
            crate::checkpoint::JobId::from_bytes([0; 16]),
            SnapshotKind::Checkpoint,
            0,
            table_state.table_name.clone(),
            Vec::new(),
            Vec::new(),
        );
        state.set_tables(vec![table_state.clone()]);
        let position = match self.sink.positions() {
            Some(positions) => positions.read_position().await?,
            None => None,
        };
        // A window resumed below keeps the sink time of its opening.
        let names = [table_state.table_name.as_str(), self.table.name.as_str()];
        let position = position.filter(|p| names.contains(&p.source_table.as_str()));
        self.sink_time = position
            .as_ref()
            .and_then(|p| Some((p.last_end?, p.last_end_sink_time?)));
        let source_table = position
            .as_ref()
            .map_or(self.table.name.clone(), |p| p.source_table.clone());
        let resumed = match choose(&state, position.as_ref(), &source_table) {
            Resume::State { why } => {
                tracing::info!(
                    table = %self.table.name,
                    state_end = ?state_end(&state),
                    position_end = ?position.as_ref().map(SinkPosition::end),
                    "continuing from the restored state: {why}"
                );
                None
            }
            Resume::Position { position } => {
                let window = position.window;
                let plan = self.source.plan(window, self.cursor.as_ref()).await?;
                let splits = plan.splits;
                // The window is open again: the next one follows its plan.
                self.cursor = plan.cursor;
                tracing::warn!(
                    table = %self.table.name,
                    state_end = ?state_end(&state),
                    last_end = ?position.last_end,
                    window_start = ?window.start_timestamp,
                    window_end = %window.end_timestamp,
                    written_by = %position.job_id,
                    splits = splits.len(),
                    "the sink is further than the restored state: continuing from the sink position (its window again, re-planned)"
                );
                let mut resumed = table_state.clone();
                resumed.last_end_timestamp = position.last_end;
                resumed.window = Some(window);
                resumed.unassigned = splits;
                resumed.source_cursor = self.cursor.clone();
                resumed.pending = Vec::new();
                self.enumerator = Enumerator::restore_table(&resumed);
                Some(resumed)
            }
        };
        Ok(resumed)
    }
}
