//! A table chain's phase: how far its open window is on the way from
//! "opened" to "its splits may be handed out", and whether the table's
//! sink may be written at all. Each variant carries only what is valid in
//! it, the data of the phases that order writes has private fields, and
//! each transition consumes the phase it leaves, so the chain's ordering
//! rules (docs/architecture.md, "The job's state machine") are in the
//! types:
//!
//! - a split is handed out only in [`Phase::HandingOut`], which only
//!   [`Durable::position_recorded`] makes, of a [`Durable`] window, which
//!   only a completed checkpoint makes of an [`Opened`] one (or a restart
//!   or restore, of a window already in a complete checkpoint): window
//!   durable → position recorded → splits handed out;
//! - a chain leaves [`Preparing`] only through [`Preparing::prepared`],
//!   which sends a transactional sink to [`Recovering`] first, and only
//!   [`Recovering::recovered`] / [`Recovering::continued_from_commit`]
//!   lead on from there: no write (rows or a commit) before the sink
//!   recovered;
//! - a window is fresh (none of its rows can be in the sink, so a sink
//!   time read now is valid for its start) only from [`Between::opened`]
//!   until its position is recorded; a window a chain continues
//!   ([`Resumed`]) never is.
//!
//! Pure: no I/O, no clock, no enumerator; the coordinator does the work
//! and reports it here.

use crate::checkpoint::{TableState, WindowState};

/// Where one table's chain stands.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Phase {
    /// The sink is not prepared yet.
    Preparing(Preparing),
    /// A transactional sink undoes what it did not commit before any write.
    Recovering(Recovering),
    /// No window is open: before the snapshot, or between windows.
    Between(Between),
    /// A window is open; its boundaries are in no complete checkpoint yet.
    Opened(Opened),
    /// The open window's boundaries are durable; the sink position does
    /// not record it yet.
    Durable(Durable),
    /// Durable and recorded as the sink position: its splits may be
    /// handed out.
    HandingOut(HandingOut),
    /// A failure of the table's own stopped it until the job is started
    /// again; the other tables go on.
    Paused { why: String },
    /// The source table is gone: the chain is retired once no split of it
    /// is out.
    Retiring(Retiring),
}

/// The sink is not prepared yet (created or checked).
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Preparing {
    restored: Option<Box<TableState>>,
}

/// A transactional sink has to undo what it did not commit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Recovering {
    from_commit: bool,
    then: Resumed,
}

/// No window is open.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Between(());

/// A window whose boundaries are in no complete checkpoint yet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Opened {
    window: WindowState,
    fresh: bool,
}

/// A window whose boundaries are durable, not yet the sink position.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Durable {
    window: WindowState,
    fresh: bool,
}

/// A durable window recorded as the sink position.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct HandingOut {
    window: WindowState,
}

/// A dropped table waiting for its splits in flight.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Retiring {
    /// Why it was paused, if it was.
    paused: Option<String>,
    /// Whether its sink was prepared and recovered, so the writes still in
    /// flight may be committed.
    sink_ready: bool,
}

/// Where a chain continues after a restore, a restart or a recovery: its
/// window, if one is open, and whether that window is in the state a
/// restart continues from. Never fresh: rows of it may be in the sink.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Resumed {
    window: Option<WindowState>,
    durable: bool,
}

impl Resumed {
    /// The window (if any) of a state that is complete already: a restore
    /// point, or the newest complete checkpoint on a restart.
    pub(super) fn restored(window: Option<WindowState>) -> Self {
        Resumed {
            window,
            durable: true,
        }
    }

    /// A window planned again from another record (the sink position, a
    /// transactional sink's last commit): no checkpoint holds it yet.
    pub(super) fn replanned(window: Option<WindowState>) -> Self {
        Resumed {
            window,
            durable: false,
        }
    }

    fn phase(self) -> Phase {
        match self.window {
            None => Phase::Between(Between(())),
            Some(window) if self.durable => Phase::Durable(Durable {
                window,
                fresh: false,
            }),
            Some(window) => Phase::Opened(Opened {
                window,
                fresh: false,
            }),
        }
    }

    fn checkpointed(self, window_completed: bool) -> Self {
        match self.window {
            Some(_) if window_completed => Resumed::restored(None),
            window => Resumed::restored(window),
        }
    }
}

impl Preparing {
    /// A chain about to prepare its sink; `restored`: the table's state
    /// from a restore point, to be compared with the sink position.
    pub(super) fn new(restored: Option<TableState>) -> Self {
        Preparing {
            restored: restored.map(Box::new),
        }
    }

    /// The restored state awaiting the comparison with the sink position.
    pub(super) fn restored(&self) -> Option<&TableState> {
        self.restored.as_deref()
    }

    /// The sink is prepared and its position compared: the chain continues
    /// as `resumed`. A transactional sink recovers first, continuing from
    /// its own last commit only on a restore (a fresh start only undoes
    /// what was not committed).
    pub(super) fn prepared(self, resumed: Resumed, transactional: bool) -> Phase {
        if !transactional {
            return resumed.phase();
        }
        Phase::Recovering(Recovering {
            from_commit: self.restored.is_some(),
            then: resumed,
        })
    }
}

impl Recovering {
    /// Whether the chain may continue from the sink's last commit when it
    /// is further (a restore, or a restart of a chain that committed).
    pub(super) fn may_continue_from_commit(self) -> bool {
        self.from_commit
    }

    /// The sink undid what it did not commit; the chain goes on where it
    /// was (its position is recorded again before any write).
    pub(super) fn recovered(self) -> Phase {
        self.then.phase()
    }

    /// The sink undid what it did not commit, and the chain continues from
    /// the state of its last commit instead, whose `window` is in no
    /// checkpoint yet.
    pub(super) fn continued_from_commit(self, window: Option<WindowState>) -> Phase {
        Resumed::replanned(window).phase()
    }
}

impl Between {
    /// A window opened: its boundaries are checkpointed next.
    pub(super) fn opened(self, window: WindowState) -> Opened {
        Opened {
            window,
            fresh: true,
        }
    }
}

impl Opened {
    /// A checkpoint holding the window's boundaries completed.
    pub(super) fn made_durable(self) -> Durable {
        Durable {
            window: self.window,
            fresh: self.fresh,
        }
    }
}

impl Durable {
    /// The window to record as the sink position.
    pub(super) fn window(self) -> WindowState {
        self.window
    }

    /// Whether none of the window's rows can be in the sink yet (so a sink
    /// time read now is valid for the window's start).
    pub(super) fn fresh(self) -> bool {
        self.fresh
    }

    /// The sink position records the window: its splits may go out.
    pub(super) fn position_recorded(self) -> HandingOut {
        HandingOut {
            window: self.window,
        }
    }
}

impl Retiring {
    fn of(paused: Option<String>, sink_ready: bool) -> Phase {
        Phase::Retiring(Retiring { paused, sink_ready })
    }
}

impl Phase {
    /// A new chain: its sink is prepared first.
    pub(super) fn preparing(restored: Option<TableState>) -> Self {
        Phase::Preparing(Preparing::new(restored))
    }

    /// A checkpoint completed (every window open now is in it);
    /// `window_completed`: it completed the open window.
    pub(super) fn checkpointed(self, window_completed: bool) -> Phase {
        match self {
            Phase::Opened(_) | Phase::Durable(_) | Phase::HandingOut(_) if window_completed => {
                Phase::Between(Between(()))
            }
            Phase::Opened(opened) => Phase::Durable(opened.made_durable()),
            Phase::Recovering(r) => Phase::Recovering(Recovering {
                then: r.then.checkpointed(window_completed),
                ..r
            }),
            other => other,
        }
    }

    /// The job restarts from its newest complete checkpoint, where the
    /// chain continues as `resumed`. `recover`: the sink is transactional
    /// and recovers first, from its own last commit if `Some(true)`. A
    /// window whose position this run recorded already goes on handing out
    /// its splits; paused, retiring and unprepared chains stay as they are.
    pub(super) fn restarted(self, resumed: Resumed, recover: Option<bool>) -> Phase {
        match (self, recover) {
            (Phase::Retiring(r), Some(_)) => Retiring::of(r.paused, false),
            (kept @ (Phase::Preparing(_) | Phase::Paused { .. } | Phase::Retiring(_)), _) => kept,
            (_, Some(from_commit)) => Phase::Recovering(Recovering {
                from_commit,
                then: resumed,
            }),
            (Phase::HandingOut(h), None) if resumed == Resumed::restored(Some(h.window)) => {
                Phase::HandingOut(h)
            }
            (_, None) => resumed.phase(),
        }
    }

    /// A failure of the table's own: no more of its splits go out.
    pub(super) fn pause(self, why: String) -> Phase {
        match self {
            Phase::Retiring(r) => Retiring::of(Some(why), r.sink_ready),
            _ => Phase::Paused { why },
        }
    }

    /// The source table is gone: retired once no split of it is out.
    pub(super) fn retire(self) -> Phase {
        match self {
            Phase::Paused { why } => Retiring::of(Some(why), false),
            Phase::Retiring(r) => Phase::Retiring(r),
            other => {
                let ready = other.sink_writable();
                Retiring::of(None, ready)
            }
        }
    }

    /// Whether the sink is still to be prepared.
    pub(super) fn is_preparing(&self) -> bool {
        matches!(self, Phase::Preparing(_))
    }

    /// The transactional sink's recovery, if it is due.
    pub(super) fn recovering(&self) -> Option<Recovering> {
        match self {
            Phase::Recovering(r) => Some(*r),
            _ => None,
        }
    }

    /// The open window, if its boundaries wait for a checkpoint.
    pub(super) fn needs_checkpoint(&self) -> bool {
        matches!(self, Phase::Opened(_))
    }

    /// The durable window whose sink position is due, if one is.
    pub(super) fn needs_position(&self) -> Option<Durable> {
        match self {
            Phase::Durable(d) => Some(*d),
            _ => None,
        }
    }

    /// Whether splits of the open window may be handed out.
    pub(super) fn may_hand_out(&self) -> bool {
        matches!(self, Phase::HandingOut(_))
    }

    /// Whether a window may open (none is, and the sink is ready).
    pub(super) fn may_open(&self) -> bool {
        matches!(self, Phase::Between(_))
    }

    /// Whether the chain takes part in replication (not paused, not
    /// retiring): its windows hold a drain and a bounded end up.
    pub(super) fn active(&self) -> bool {
        !matches!(self, Phase::Paused { .. } | Phase::Retiring(_))
    }

    /// Whether the sink is prepared, recovered and not paused, so what the
    /// pipelines wrote to it may be committed.
    pub(super) fn sink_writable(&self) -> bool {
        match self {
            Phase::Between(_) | Phase::Opened(_) | Phase::Durable(_) | Phase::HandingOut(_) => true,
            Phase::Retiring(r) => r.sink_ready && r.paused.is_none(),
            Phase::Preparing(_) | Phase::Recovering(_) | Phase::Paused { .. } => false,
        }
    }

    /// Why the table is paused, if it is.
    pub(super) fn paused(&self) -> Option<&str> {
        match self {
            Phase::Paused { why } => Some(why),
            Phase::Retiring(r) => r.paused.as_deref(),
            _ => None,
        }
    }

    /// Whether the table was dropped.
    pub(super) fn is_retiring(&self) -> bool {
        matches!(self, Phase::Retiring(_))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::time::SourceTime;

    fn window(start: Option<u64>, end: u64) -> WindowState {
        WindowState {
            start_timestamp: start.map(SourceTime::from_raw),
            end_timestamp: SourceTime::from_raw(end),
        }
    }

    fn between() -> Phase {
        Phase::preparing(None).prepared_plain(Resumed::restored(None))
    }

    impl Phase {
        /// Test shorthand: prepared, not transactional.
        fn prepared_plain(self, resumed: Resumed) -> Phase {
            match self {
                Phase::Preparing(p) => p.prepared(resumed, false),
                other => other,
            }
        }

        fn opened(self, w: WindowState) -> Phase {
            match self {
                Phase::Between(b) => Phase::Opened(b.opened(w)),
                other => panic!("opened in {other:?}"),
            }
        }

        fn recorded(self) -> Phase {
            match self.needs_position() {
                Some(d) => Phase::HandingOut(d.position_recorded()),
                None => panic!("no position due in {self:?}"),
            }
        }
    }

    #[test]
    fn a_window_goes_out_only_once_durable_and_recorded() {
        let w = window(Some(10), 20);
        let opened = between().opened(w);
        assert!(opened.needs_checkpoint());
        assert!(!opened.may_hand_out());
        assert_eq!(opened.needs_position(), None, "not before it is durable");
        let durable = opened.checkpointed(false);
        assert!(!durable.needs_checkpoint());
        assert!(!durable.may_hand_out(), "not before its position");
        let d = durable.needs_position().expect("position due");
        assert_eq!((d.window(), d.fresh()), (w, true));
        let out = durable.recorded();
        assert!(out.may_hand_out());
        assert_eq!(out.needs_position(), None);
        // A later checkpoint changes nothing until the window completes.
        assert!(out.clone().checkpointed(false).may_hand_out());
        let done = out.checkpointed(true);
        assert!(done.may_open());
        assert!(!done.may_hand_out());
    }

    #[test]
    fn an_empty_window_completes_in_its_opening_checkpoint() {
        let opened = between().opened(window(None, 20));
        assert!(opened.checkpointed(true).may_open());
    }

    #[test]
    fn a_restored_window_is_durable_but_not_fresh() {
        let w = window(Some(10), 20);
        let phase = Phase::preparing(None).prepared_plain(Resumed::restored(Some(w)));
        let d = phase.needs_position().expect("recorded before its splits");
        assert_eq!((d.window(), d.fresh()), (w, false));
    }

    #[test]
    fn a_window_taken_from_the_sink_position_is_checkpointed_first() {
        let w = window(Some(50), 60);
        let phase = Phase::preparing(None).prepared_plain(Resumed::replanned(Some(w)));
        assert!(phase.needs_checkpoint());
        let d = phase.checkpointed(false).needs_position().expect("due");
        assert!(!d.fresh(), "rows of it may be in the sink already");
    }

    #[test]
    fn a_transactional_sink_recovers_before_anything_is_written() {
        let w = window(Some(10), 20);
        let restored = TableState::new("id", "t");
        let Phase::Preparing(p) = Phase::preparing(Some(restored)) else {
            unreachable!()
        };
        let phase = p.prepared(Resumed::restored(Some(w)), true);
        let r = phase.recovering().expect("recovery due");
        assert!(
            r.may_continue_from_commit(),
            "a restore continues from the sink's commit"
        );
        assert!(!phase.sink_writable());
        assert!(!phase.may_hand_out() && !phase.may_open());
        assert_eq!(phase.needs_position(), None);
        // Recovered where it was: the window's position is recorded again.
        let on = r.recovered();
        assert_eq!(on.needs_position().map(Durable::window), Some(w));
        assert!(on.sink_writable());
        // Or from the sink's commit, whose window no checkpoint holds yet.
        let moved = r.continued_from_commit(Some(window(Some(20), 30)));
        assert!(moved.needs_checkpoint());
        assert!(r.continued_from_commit(None).may_open());
        // A fresh start only undoes what was not committed.
        let Phase::Preparing(fresh) = Phase::preparing(None) else {
            unreachable!()
        };
        let r = fresh.prepared(Resumed::restored(None), true).recovering();
        assert_eq!(r.map(Recovering::may_continue_from_commit), Some(false));
    }

    #[test]
    fn a_checkpoint_while_recovering_makes_the_window_to_come_back_to_durable() {
        let w = window(Some(50), 60);
        let r = Phase::Recovering(Recovering {
            from_commit: true,
            then: Resumed::replanned(Some(w)),
        });
        let r = r
            .checkpointed(false)
            .recovering()
            .expect("still recovering");
        assert_eq!(r.recovered().needs_position().map(Durable::window), Some(w));
    }

    #[test]
    fn a_restart_resets_the_window_and_recovers_a_transactional_sink() {
        let w = window(Some(10), 20);
        let out = between().opened(w).checkpointed(false).recorded();
        // The same window again, position already recorded by this run.
        let again = out.clone().restarted(Resumed::restored(Some(w)), None);
        assert!(again.may_hand_out());
        // An older state: back to durable, recorded again before splits.
        let older = out.clone().restarted(Resumed::restored(None), None);
        assert!(older.may_open());
        let opened = between().opened(w);
        let back = opened.restarted(Resumed::restored(Some(w)), None);
        assert_eq!(back.needs_position().map(Durable::fresh), Some(false));
        // A transactional sink recovers first, from its commit if asked.
        let r = out.restarted(Resumed::restored(Some(w)), Some(true));
        assert_eq!(
            r.recovering().map(Recovering::may_continue_from_commit),
            Some(true)
        );
        assert_eq!(
            r.recovering()
                .map(|r| r.recovered().needs_position().is_some()),
            Some(true),
            "the sink learns the window again"
        );
    }

    #[test]
    fn paused_retiring_and_unprepared_chains_stay_through_a_restart() {
        let w = Resumed::restored(Some(window(Some(10), 20)));
        let paused = between().pause("refused".into());
        assert_eq!(paused.clone().restarted(w, Some(true)), paused);
        let preparing = Phase::preparing(None);
        assert_eq!(preparing.clone().restarted(w, Some(false)), preparing);
        let retiring = between().retire();
        assert!(retiring.sink_writable());
        let restarted = retiring.restarted(w, Some(false));
        assert!(restarted.is_retiring());
        assert!(!restarted.sink_writable(), "its sink did not recover");
    }

    #[test]
    fn pausing_and_retiring() {
        let w = window(Some(10), 20);
        let out = between().opened(w).checkpointed(false).recorded();
        let paused = out.clone().pause("schema refused".into());
        assert_eq!(paused.paused(), Some("schema refused"));
        assert!(!paused.active() && !paused.may_hand_out() && !paused.sink_writable());
        // Paused and then dropped: still shows why, commits nothing.
        let gone = paused.retire();
        assert!(gone.is_retiring() && !gone.active());
        assert_eq!(gone.paused(), Some("schema refused"));
        assert!(!gone.sink_writable());
        // Dropped mid-window: what is in flight is still committed.
        let dropped = out.retire();
        assert!(dropped.sink_writable() && !dropped.may_hand_out());
        let failed = dropped.pause("split failed".into());
        assert!(failed.is_retiring());
        assert_eq!(failed.paused(), Some("split failed"));
        assert!(!failed.sink_writable());
        // Dropped before its sink recovered: nothing may be committed.
        let r = Phase::Recovering(Recovering {
            from_commit: false,
            then: Resumed::restored(None),
        });
        assert!(!r.retire().sink_writable());
    }
}
