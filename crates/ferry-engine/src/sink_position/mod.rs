//! The sink position: how far the sink itself says it is, kept on the sink
//! cluster next to the data, so that a restore from an *older* checkpoint
//! or savepoint cannot make the job replay a window wider than the ones
//! whose rows the sink already holds (docs/semantics.md, "Restoring an
//! older state").
//!
//! One record per sink table: the source table, the job, its generation,
//! the end of the last completed window and the boundaries of the window
//! whose rows the sink may hold. The job writes it after a window's opening
//! checkpoint completed and before any split of that window is handed out,
//! so: *if the sink holds a row of window W, the position is W or later*.
//! On a start from a restore point, [`choose`] picks the later of the
//! restored state and the position.
//!
//! - this file: [`SinkPosition`], [`choose`] (pure, unit-tested). Where a
//!   sink keeps the record is its own business
//!   ([`crate::connector::SinkPositions`]; the Kudu sink's is in
//!   `ferry-kudu`'s `position` module).
//! - `cut`: [`Cut`], one source instant every table of a job reflects at
//!   one sink time, published per window for consistent reads.

mod cut;

pub use cut::Cut;

use crate::checkpoint::{JobState, WindowState};
use crate::time::{SinkTime, SourceTime};

/// What the sink position records for one sink table (the sink table
/// itself is the record's key; the sink adds it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SinkPosition {
    /// The source table the sink table copies.
    pub source_table: String,
    /// The job that wrote the record.
    pub job_id: String,
    /// The writer's generation (a takeover fence number; 0 without one).
    pub generation: u64,
    /// End of the last completed window (`None` until the snapshot is done).
    pub last_end: Option<SourceTime>,
    /// The window whose rows the sink may hold: opened after `last_end`.
    pub window: WindowState,
    /// A hybrid time of the *sink* cluster at which the sink table held
    /// exactly the windows up to `last_end`: a snapshot scan of the sink
    /// at it equals the source at `last_end` (docs/semantics.md, "The sink
    /// time"). Taken when the window opened, after every write of the
    /// windows before it was acknowledged and before any write of this
    /// one. `None` before the snapshot completed, when the window was
    /// resumed by a job that did not know it, or in a record written by an
    /// older ferry.
    pub last_end_sink_time: Option<SinkTime>,
}

impl SinkPosition {
    /// How far the position is: its window's end.
    pub fn end(&self) -> SourceTime {
        self.window.end_timestamp
    }
}

/// How far a stored state is: the end of its open window, or (between
/// windows) the end of its last completed one. `None`: nothing done yet.
pub fn state_end(state: &JobState) -> Option<SourceTime> {
    match state.window {
        Some(w) => Some(w.end_timestamp),
        None => state.last_end_timestamp,
    }
}

/// Where a job started from a restore point continues.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Resume {
    /// From the restored state (it is as far as the sink, or further, and
    /// has the finer split progress).
    State {
        /// Why the state wins.
        why: &'static str,
    },
    /// From the sink position: `last_end`, then exactly its window with
    /// freshly planned splits.
    Position {
        /// The position to continue from.
        position: SinkPosition,
    },
}

/// Picks where a job restored from `state` continues, given the sink's
/// `position` (if any) and the job's source table.
pub fn choose(state: &JobState, position: Option<&SinkPosition>, source_table: &str) -> Resume {
    let Some(position) = position else {
        return Resume::State {
            why: "the sink has no position record",
        };
    };
    if position.source_table != source_table {
        return Resume::State {
            why: "the sink position belongs to another source table",
        };
    }
    if state_end(state).is_some_and(|end| end >= position.end()) {
        return Resume::State {
            why: "the restored state is as far as the sink position or further",
        };
    }
    Resume::Position {
        position: position.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checkpoint::{JobId, SnapshotKind};

    fn t(raw: u64) -> SourceTime {
        SourceTime::from_raw(raw)
    }

    fn state(last_end: Option<u64>, window: Option<(Option<u64>, u64)>) -> JobState {
        let mut s = JobState::new(
            JobId::random(),
            SnapshotKind::Savepoint,
            1,
            "t",
            vec![],
            vec![],
        );
        s.last_end_timestamp = last_end.map(t);
        s.window = window.map(|(start, end)| WindowState {
            start_timestamp: start.map(t),
            end_timestamp: t(end),
        });
        s
    }

    fn position(table: &str, last_end: Option<u64>, end: u64) -> SinkPosition {
        SinkPosition {
            source_table: table.into(),
            job_id: "j".into(),
            generation: 0,
            last_end: last_end.map(t),
            window: WindowState {
                start_timestamp: last_end.map(t),
                end_timestamp: t(end),
            },
            last_end_sink_time: None,
        }
    }

    fn uses_position(r: &Resume) -> bool {
        matches!(r, Resume::Position { .. })
    }

    #[test]
    fn a_later_position_wins() {
        let p = position("t", Some(50), 60);
        // Between windows, in a diff window, in the snapshot, nothing done.
        for s in [
            state(Some(10), None),
            state(Some(10), Some((Some(10), 20))),
            state(None, Some((None, 5))),
            state(None, None),
        ] {
            assert!(uses_position(&choose(&s, Some(&p), "t")), "{s:?}");
        }
        // A later snapshot of another job on the same sink table, too.
        let snap = position("t", None, 90);
        assert!(uses_position(&choose(
            &state(Some(60), None),
            Some(&snap),
            "t"
        )));
    }

    #[test]
    fn an_equal_or_older_position_keeps_the_state() {
        let p = position("t", Some(10), 20);
        // The same window in progress: the state knows its split progress.
        assert!(!uses_position(&choose(
            &state(Some(10), Some((Some(10), 20))),
            Some(&p),
            "t"
        )));
        // The state completed the position's window.
        assert!(!uses_position(&choose(
            &state(Some(20), None),
            Some(&p),
            "t"
        )));
        // The position write of the state's window never happened.
        assert!(!uses_position(&choose(
            &state(Some(20), Some((Some(20), 30))),
            Some(&p),
            "t"
        )));
        assert!(!uses_position(&choose(&state(None, None), None, "t")));
    }

    #[test]
    fn another_tables_position_is_ignored() {
        let p = position("other", Some(50), 60);
        let r = choose(&state(Some(10), None), Some(&p), "t");
        assert_eq!(
            r,
            Resume::State {
                why: "the sink position belongs to another source table"
            }
        );
    }
}
