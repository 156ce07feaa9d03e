//! The sink position in the coordinator: record it before a window's
//! splits are handed out, and on a start from a restore point continue from
//! the later of the restored state and the position
//! ([`crate::sink_position`], docs/semantics.md "Restoring an older state").

use super::coordinator::Coordinator;
use crate::checkpoint::{JobState, WindowState};
use crate::connector::{Sink, Source};
use crate::enumerator::Enumerator;
use crate::error::EngineError;
use crate::sink_position::{choose, state_end, Resume, SinkPosition};

impl<S: Source, K: Sink<S::Batch>> Coordinator<S, K> {
    /// Whether the sink position covers the open window (or none is open),
    /// so its splits may be handed out.
    pub(super) fn position_recorded(&self) -> bool {
        let window = self.enumerator.window();
        window.is_none() || self.position_for == window
    }

    /// Records the open window as the sink position. Called once its
    /// boundaries are in a completed checkpoint and before any of its
    /// splits is handed out; a failure counts as a failed checkpoint.
    pub(super) async fn record_position(&mut self) -> Result<(), EngineError> {
        let Some(window) = self.enumerator.window() else {
            return Ok(());
        };
        // A fenced instance writes nothing to the sink (lease module).
        self.options.fence.check()?;
        let last_end = self.enumerator.last_end();
        let position = SinkPosition {
            source_table: self.config.table_name.clone(),
            job_id: self.options.job_id.to_string(),
            generation: self.options.fence.generation(),
            last_end,
            window,
            last_end_sink_time: self.sink_time_for(window, last_end).await?,
        };
        self.sink.record_position(&position).await?;
        tracing::debug!(start = ?window.start_timestamp, end = window.end_timestamp, "sink position recorded");
        self.position_for = Some(window);
        Ok(())
    }

    /// The sink time of `last_end` for the position of `window`: taken now
    /// if this coordinator opened the window and the sink holds none of
    /// its rows yet, else the one known for that `last_end` (from the
    /// opening, or from the position record a restored job read), else
    /// unknown.
    async fn sink_time_for(
        &mut self,
        window: WindowState,
        last_end: Option<u64>,
    ) -> Result<Option<u64>, EngineError> {
        let Some(last_end) = last_end else {
            return Ok(None);
        };
        if self.fresh_window == Some(window) {
            let time = self.sink.sink_time().await?;
            self.sink_time = time.map(|t| (last_end, t));
            return Ok(time);
        }
        Ok(self
            .sink_time
            .filter(|&(end, _)| end == last_end)
            .map(|(_, t)| t))
    }

    /// On a start from a restore point (only then): reads the sink
    /// position and, if the sink is further than the restored state,
    /// continues from the position instead — its `last_end`, then exactly
    /// its window with freshly planned splits. Done once, after the sink
    /// was prepared.
    pub(super) async fn merge_position(&mut self) -> Result<(), EngineError> {
        let Some(state) = self.restored.as_ref() else {
            return Ok(());
        };
        let position = self.sink.read_position().await?;
        // A window resumed below keeps the sink time of its opening.
        self.sink_time = position
            .as_ref()
            .filter(|p| p.source_table == self.config.table_name)
            .and_then(|p| Some((p.last_end?, p.last_end_sink_time?)));
        match choose(state, position.as_ref(), &self.config.table_name) {
            Resume::State { why } => {
                tracing::info!(
                    state_end = ?state_end(state),
                    position_end = ?position.as_ref().map(SinkPosition::end),
                    position_table = ?position.as_ref().map(|p| &p.source_table),
                    "continuing from the restored state: {why}"
                );
            }
            Resume::Position { position } => {
                let window = position.window;
                let splits = self.source.plan(window).await?;
                tracing::warn!(
                    state_end = ?state_end(state),
                    last_end = ?position.last_end,
                    window_start = ?window.start_timestamp,
                    window_end = window.end_timestamp,
                    written_by = %position.job_id,
                    splits = splits.len(),
                    "the sink is further than the restored state: continuing from the sink position (its window again, re-planned)"
                );
                let mut resumed: JobState = state.clone();
                resumed.last_end_timestamp = position.last_end;
                resumed.window = Some(window);
                resumed.unassigned = splits;
                resumed.pending = Vec::new();
                self.enumerator = Enumerator::restore(&resumed);
                if let Some(end) = position.last_end {
                    self.metrics.set_last_end(end);
                }
                // A restart before the next checkpoint comes back here,
                // not to the older state.
                self.last_complete = Some(resumed);
                self.window_durable = false;
            }
        }
        self.restored = None;
        Ok(())
    }
}
