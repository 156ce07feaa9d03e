//! The split enumerator: the one owner of the window chain and the split
//! queues, as a plain state machine driven by method calls from the job's
//! coordinator task (no locks, no I/O, tested without Kudu).
//!
//! Queues, with the reference job's names:
//! - `unassigned`: splits of the current window not yet handed to a pipeline;
//! - `pending`: handed out and not finished, each with the resume key of the
//!   last row known to be flushed to the sink;
//! - `pending_removal`: finished (every row flushed) but not yet covered by a
//!   completed checkpoint.
//!
//! The invariant that loses nothing: a window completes — `last_end` moves
//! to its end and the next window may open — only when no split is
//! unassigned or pending and a checkpoint taken after the last split
//! finished has completed. Because a split is reported finished only after
//! its final flush, a finished split can be left out of later checkpoints.

use crate::checkpoint::{JobState, SplitState, TableState, WindowState};
use crate::identity::SplitId;
use crate::time::SourceTime;
use std::collections::{BTreeMap, BTreeSet, VecDeque};

/// Split counts, as the reference job's metrics report them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SplitCounts {
    /// Splits of the open window not handed out yet.
    pub unassigned: usize,
    /// Splits handed out and not finished.
    pub pending: usize,
    /// Finished splits waiting for a checkpoint to cover them.
    pub pending_removal: usize,
}

/// What a checkpoint captured: the state to store, plus which finished
/// splits it covers (cleared when that checkpoint completes).
#[derive(Debug, Clone)]
pub struct CheckpointCapture {
    /// `last_end_timestamp`, `window`, `unassigned` and `pending` to store.
    pub last_end_timestamp: Option<SourceTime>,
    /// The open window, if any.
    pub window: Option<WindowState>,
    /// Splits not handed out yet.
    pub unassigned: Vec<SplitState>,
    /// Splits handed out and not finished, with their resume keys.
    pub pending: Vec<SplitState>,
    covered: BTreeSet<SplitId>,
}

/// The result of a completed checkpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AfterCheckpoint {
    /// The window is still running.
    Running,
    /// The window completed; its end is the new `last_end`.
    WindowCompleted {
        /// The window's end.
        end: SourceTime,
        /// Whether it was the snapshot window.
        was_snapshot: bool,
    },
    /// No window was open.
    Idle,
}

/// Errors from calls that break the protocol (bugs in the caller).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EnumeratorError {
    #[error("a window is already open ({0:?})")]
    /// A window was opened while one is open.
    WindowOpen(WindowState),
    #[error("window [{start:?}, {end}) does not start at the last completed end {last_end:?}")]
    /// A window does not start where the last one ended.
    NotChained {
        /// The window's start.
        start: Option<SourceTime>,
        /// The window's end.
        end: SourceTime,
        /// The last completed end.
        last_end: Option<SourceTime>,
    },
    #[error("split '{0}' is not pending")]
    /// A split finished that was not handed out.
    NotPending(SplitId),
}

/// Window chain and split queues.
#[derive(Debug, Default)]
pub struct Enumerator {
    last_end: Option<SourceTime>,
    window: Option<WindowState>,
    unassigned: VecDeque<SplitState>,
    pending: BTreeMap<SplitId, SplitState>,
    pending_removal: BTreeSet<SplitId>,
}

impl Enumerator {
    /// A fresh job: no snapshot taken yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Restores from a checkpoint or savepoint: every pending split goes
    /// back to the front of `unassigned` with its resume key, so it is
    /// re-read from where its flushed rows end (replays are idempotent).
    pub fn restore(state: &JobState) -> Self {
        Self::resume(
            state.last_end_timestamp,
            state.window,
            &state.pending,
            &state.unassigned,
        )
    }

    /// Restores one table's chain of a job of several tables (as
    /// [`Enumerator::restore`]).
    pub fn restore_table(state: &TableState) -> Self {
        Self::resume(
            state.last_end_timestamp,
            state.window,
            &state.pending,
            &state.unassigned,
        )
    }

    fn resume(
        last_end: Option<SourceTime>,
        window: Option<WindowState>,
        pending: &[SplitState],
        unassigned: &[SplitState],
    ) -> Self {
        let mut queue: VecDeque<SplitState> = pending.iter().cloned().collect();
        queue.extend(unassigned.iter().cloned());
        Enumerator {
            last_end,
            window,
            unassigned: queue,
            pending: BTreeMap::new(),
            pending_removal: BTreeSet::new(),
        }
    }

    /// End of the last completed window (`None` until the snapshot is done).
    pub fn last_end(&self) -> Option<SourceTime> {
        self.last_end
    }

    /// The open window, if any.
    pub fn window(&self) -> Option<WindowState> {
        self.window
    }

    /// Queue sizes.
    pub fn counts(&self) -> SplitCounts {
        SplitCounts {
            unassigned: self.unassigned.len(),
            pending: self.pending.len(),
            pending_removal: self.pending_removal.len(),
        }
    }

    /// The window that must come next: the snapshot at `now` if none was
    /// completed, else the diff window [last_end, now).
    pub fn next_window(&self, now: SourceTime) -> WindowState {
        WindowState {
            start_timestamp: self.last_end,
            end_timestamp: now,
        }
    }

    /// Opens `window` with its splits. Diff windows must start exactly at
    /// the last completed end (no gap, no overlap).
    pub fn open_window(
        &mut self,
        window: WindowState,
        splits: Vec<SplitState>,
    ) -> Result<(), EnumeratorError> {
        if let Some(open) = self.window {
            return Err(EnumeratorError::WindowOpen(open));
        }
        if window.start_timestamp != self.last_end
            || window
                .start_timestamp
                .is_some_and(|s| s >= window.end_timestamp)
        {
            return Err(EnumeratorError::NotChained {
                start: window.start_timestamp,
                end: window.end_timestamp,
                last_end: self.last_end,
            });
        }
        self.window = Some(window);
        self.unassigned = splits.into();
        self.pending.clear();
        self.pending_removal.clear();
        Ok(())
    }

    /// Hands the next split to a pipeline.
    pub fn assign(&mut self) -> Option<SplitState> {
        let split = self.unassigned.pop_front()?;
        self.pending.insert(split.split_id.clone(), split.clone());
        Some(split)
    }

    /// Records that every row of `split_id` up to `resume_key` is flushed.
    pub fn progress(
        &mut self,
        split_id: &SplitId,
        resume_key: Vec<u8>,
    ) -> Result<(), EnumeratorError> {
        let split = self
            .pending
            .get_mut(split_id)
            .ok_or_else(|| EnumeratorError::NotPending(split_id.clone()))?;
        split.resume_key = Some(resume_key);
        Ok(())
    }

    /// Records that every row of `split_id` is flushed.
    pub fn finished(&mut self, split_id: &SplitId) -> Result<(), EnumeratorError> {
        self.pending
            .remove(split_id)
            .ok_or_else(|| EnumeratorError::NotPending(split_id.clone()))?;
        self.pending_removal.insert(split_id.clone());
        Ok(())
    }

    /// Puts a pending split back (its pipeline failed); it keeps its resume
    /// key and goes first.
    pub fn give_back(&mut self, split_id: &SplitId) -> Result<(), EnumeratorError> {
        let split = self
            .pending
            .remove(split_id)
            .ok_or_else(|| EnumeratorError::NotPending(split_id.clone()))?;
        self.unassigned.push_front(split);
        Ok(())
    }

    /// Captures the state a checkpoint stores now.
    pub fn capture(&self) -> CheckpointCapture {
        CheckpointCapture {
            last_end_timestamp: self.last_end,
            window: self.window,
            unassigned: self.unassigned.iter().cloned().collect(),
            pending: self.pending.values().cloned().collect(),
            covered: self.pending_removal.clone(),
        }
    }

    /// A checkpoint taken with `capture` completed durably.
    pub fn checkpoint_completed(&mut self, capture: &CheckpointCapture) -> AfterCheckpoint {
        for id in &capture.covered {
            self.pending_removal.remove(id);
        }
        let Some(window) = self.window else {
            return AfterCheckpoint::Idle;
        };
        // The capture must itself show the window drained: then the stored
        // state needs nothing re-read.
        let drained_at_capture = capture.window == Some(window)
            && capture.unassigned.is_empty()
            && capture.pending.is_empty();
        if drained_at_capture
            && self.unassigned.is_empty()
            && self.pending.is_empty()
            && self.pending_removal.is_empty()
        {
            self.last_end = Some(window.end_timestamp);
            self.window = None;
            return AfterCheckpoint::WindowCompleted {
                end: window.end_timestamp,
                was_snapshot: window.is_snapshot(),
            };
        }
        AfterCheckpoint::Running
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checkpoint::{JobId, SnapshotKind};

    fn split(id: &str) -> SplitState {
        SplitState {
            split_id: id.into(),
            descriptor: id.as_bytes().to_vec(),
            resume_key: None,
        }
    }

    fn snapshot(end: u64) -> WindowState {
        WindowState {
            start_timestamp: None,
            end_timestamp: t(end),
        }
    }

    fn t(raw: u64) -> SourceTime {
        SourceTime::from_raw(raw)
    }

    fn id(s: &str) -> SplitId {
        SplitId::new(s)
    }

    #[test]
    fn window_completes_only_after_a_checkpoint_covering_the_last_split() {
        let mut e = Enumerator::new();
        e.open_window(snapshot(100), vec![split("a"), split("b")])
            .expect("open");
        let a = e.assign().expect("a");
        let b = e.assign().expect("b");
        assert_eq!(
            e.counts(),
            SplitCounts {
                unassigned: 0,
                pending: 2,
                pending_removal: 0
            }
        );
        e.finished(&a.split_id).expect("a done");
        // A checkpoint while b runs does not complete the window.
        let cap = e.capture();
        assert_eq!(e.checkpoint_completed(&cap), AfterCheckpoint::Running);
        assert_eq!(
            e.counts().pending_removal,
            0,
            "a covered by that checkpoint"
        );
        e.finished(&b.split_id).expect("b done");
        assert_eq!(e.counts().pending_removal, 1);
        assert_eq!(e.last_end(), None);
        let cap = e.capture();
        assert_eq!(
            e.checkpoint_completed(&cap),
            AfterCheckpoint::WindowCompleted {
                end: t(100),
                was_snapshot: true
            }
        );
        assert_eq!(e.last_end(), Some(t(100)));
        assert_eq!(e.counts(), SplitCounts::default());
        assert_eq!(
            e.next_window(t(150)),
            WindowState {
                start_timestamp: Some(t(100)),
                end_timestamp: t(150)
            }
        );
    }

    #[test]
    fn a_checkpoint_captured_before_the_last_finish_does_not_complete() {
        let mut e = Enumerator::new();
        e.open_window(snapshot(10), vec![split("a")]).expect("open");
        e.assign().expect("a");
        let early = e.capture();
        e.finished(&id("a")).expect("done");
        assert_eq!(e.checkpoint_completed(&early), AfterCheckpoint::Running);
        let cap = e.capture();
        assert!(matches!(
            e.checkpoint_completed(&cap),
            AfterCheckpoint::WindowCompleted { .. }
        ));
    }

    #[test]
    fn windows_chain_without_gap_or_overlap() {
        let mut e = Enumerator::new();
        let err = e
            .open_window(
                WindowState {
                    start_timestamp: Some(t(5)),
                    end_timestamp: t(10),
                },
                vec![],
            )
            .expect_err("diff before snapshot");
        assert!(matches!(err, EnumeratorError::NotChained { .. }));
        e.open_window(snapshot(10), vec![]).expect("snapshot");
        assert!(matches!(
            e.open_window(snapshot(20), vec![]),
            Err(EnumeratorError::WindowOpen(_))
        ));
        let cap = e.capture();
        e.checkpoint_completed(&cap);
        assert!(e
            .open_window(
                WindowState {
                    start_timestamp: Some(t(9)),
                    end_timestamp: t(20)
                },
                vec![]
            )
            .is_err());
        e.open_window(
            WindowState {
                start_timestamp: Some(t(10)),
                end_timestamp: t(20),
            },
            vec![],
        )
        .expect("chained");
    }

    #[test]
    fn restore_rereads_pending_splits_from_their_resume_keys() {
        let mut e = Enumerator::new();
        e.open_window(snapshot(10), vec![split("a"), split("b"), split("c")])
            .expect("open");
        e.assign().expect("a");
        e.progress(&id("a"), vec![7]).expect("progress");
        let cap = e.capture();
        let mut state = JobState::new(
            JobId::random(),
            SnapshotKind::Checkpoint,
            1,
            "t",
            vec![],
            vec![],
        );
        state.window = cap.window;
        state.unassigned = cap.unassigned;
        state.pending = cap.pending;
        state.validate().expect("valid");
        let mut r = Enumerator::restore(&state);
        assert_eq!(
            r.counts(),
            SplitCounts {
                unassigned: 3,
                pending: 0,
                pending_removal: 0
            }
        );
        let first = r.assign().expect("a first");
        assert_eq!(first.split_id, id("a"));
        assert_eq!(first.resume_key, Some(vec![7]));
    }

    #[test]
    fn failed_pipeline_gives_its_split_back() {
        let mut e = Enumerator::new();
        e.open_window(snapshot(10), vec![split("a"), split("b")])
            .expect("open");
        e.assign().expect("a");
        e.progress(&id("a"), vec![1, 2]).expect("progress");
        e.give_back(&id("a")).expect("back");
        let again = e.assign().expect("a again");
        assert_eq!(again.split_id, id("a"));
        assert_eq!(again.resume_key, Some(vec![1, 2]));
        assert!(e.finished(&id("zzz")).is_err());
    }
}
