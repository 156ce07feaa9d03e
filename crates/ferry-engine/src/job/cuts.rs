//! Consistent cuts (docs/dr.md, "Consistent reads on the standby"). When
//! the sink publishes them ([`crate::connector::SinkCuts`]), the tables'
//! windows open together: a round opens only once every table that takes
//! part is between windows, and every table's window of the round ends at
//! one instant of the source clock. So after each round every table holds
//! exactly the windows up to one source instant; the job then takes one
//! sink time ([`crate::connector::SinkPositions::sink_time`]: after every
//! write acknowledged so far, before any later one) and publishes the cut
//! before a row of the next round is written.
//!
//! The price: a slow table holds the next window of the others (their lag
//! follows the slowest table's). A table still copying its snapshot takes
//! no part (it joins the round after its snapshot), so a new table's first
//! copy never holds the others. A sink without cuts keeps every table's
//! windows independent.

use super::coordinator::{Coordinator, TableChain};
use crate::connector::{Sink, Tables};
use crate::sink_position::Cut;
use crate::time::SourceTime;
use tokio::time::Instant;

/// What the job knows of its cuts.
#[derive(Debug, Default)]
pub(super) struct Cuts {
    /// The source instant of the last cut published.
    last: Option<SourceTime>,
}

/// One pass of window openings over the chains.
#[derive(Debug, Default)]
pub(super) struct Round {
    /// The windows open together (the sink publishes cuts).
    pub(super) together: bool,
    /// Together: the round is due, so every chain opens now, due or not.
    pub(super) due: bool,
    /// Together: the end every chain's window of the round takes.
    pub(super) now: Option<SourceTime>,
}

impl<T: Tables> Coordinator<T> {
    /// Whether the tables' windows open together: the sink publishes cuts.
    pub(super) fn windows_together(&self) -> bool {
        self.chains.iter().any(|c| c.sink.cuts().is_some())
    }

    /// Whether windows may open now: always when they open apart;
    /// together, only when every table taking part (past its snapshot) is
    /// between windows.
    pub(super) fn round_open(&self) -> bool {
        !self.windows_together()
            || self
                .chains
                .iter()
                .filter(|c| c.in_cuts())
                .all(|c| c.phase.may_open())
    }

    /// The round of openings to run now (`None`: none may open). Publishes
    /// the cut the chains stand at first, if it is new.
    pub(super) async fn start_round(&mut self) -> Option<Round> {
        if !self.windows_together() {
            return Some(Round::default());
        }
        if !self.round_open() {
            return None;
        }
        self.publish_cut().await;
        let now = Instant::now();
        let due = self
            .chains
            .iter()
            .filter(|c| c.phase.may_open() && self.mode.may_open_window(c.enumerator.last_end()))
            .any(|c| now >= c.next_window_at);
        Some(Round {
            together: true,
            due,
            now: None,
        })
    }

    /// Publishes the cut the tables stand at, when every table taking part
    /// is between windows at one last end not published yet. A failure is
    /// logged; the next round tries its own cut.
    async fn publish_cut(&mut self) {
        let active: Vec<&TableChain<T>> = self.chains.iter().filter(|c| c.in_cuts()).collect();
        let Some(source_time) = active.first().and_then(|c| c.enumerator.last_end()) else {
            return;
        };
        let at_one_instant = active
            .iter()
            .all(|c| c.between_windows() && c.enumerator.last_end() == Some(source_time));
        if !at_one_instant || self.cuts.last.is_some_and(|last| last >= source_time) {
            return;
        }
        let tables: Vec<String> = active.iter().map(|c| c.sink.name()).collect();
        let sink = active[0].sink.clone();
        let fence = self.options.fence.clone();
        // A fenced instance writes nothing to the sink (lease module).
        if fence.check().is_err() {
            return;
        }
        let (Some(cuts), Some(positions)) = (sink.cuts(), sink.positions()) else {
            return;
        };
        let sink_time = match positions.sink_time().await {
            Ok(Some(t)) => t,
            Ok(None) => return,
            Err(e) => {
                tracing::warn!(error = %e, "no sink time for the consistent cut; the next window's is tried");
                return;
            }
        };
        let cut = Cut {
            job_id: self.options.job_id.to_string(),
            generation: fence.generation(),
            source_time,
            sink_time,
            tables,
        };
        match cuts.record_cut(&cut).await {
            Ok(()) => {
                self.cuts.last = Some(source_time);
                tracing::debug!(source_time = %source_time, sink_time = %sink_time, tables = cut.tables.len(), "consistent cut published");
            }
            Err(e) => {
                tracing::warn!(error = %e, source_time = %source_time, "publishing the consistent cut failed; the next window's is tried");
            }
        }
    }
}
