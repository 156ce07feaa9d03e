//! The write guard's detector: rows written to the sink table by anyone
//! but ferry. Each poll of the sink tablet servers gives the table's write
//! counters (inserted + upserted + updated + deleted rows, each tablet
//! once); the job counts the rows it wrote (upserts + deletes). Rows the
//! servers counted beyond ferry's own are foreign writes.
//!
//! Kept conservative, so ferry's own writes never raise it:
//! - the servers' side is taken one poll *earlier* than ferry's count, so
//!   a batch the servers applied but whose flush had not returned to ferry
//!   yet is counted by ferry by then;
//! - ferry counts every row of a batch before it sends any (so a batch cut
//!   short by a restart counts whole), and the servers count fewer, never
//!   more (a `DELETE_IGNORE` of an absent row is not in `rows_deleted`; a
//!   retried write is applied once);
//! - the servers' sum is taken against its highest value so far: a sum
//!   that went down (a tablet server restarted or did not answer) adds
//!   nothing until it is above that again.
//!
//! So the figure can miss foreign rows (hidden by ferry's ignored deletes in
//! the same span), never invent them. It starts at the first poll of the
//! job's process; `ferry verify` finds what it cannot (a foreign write
//! that ferry's next window overwrote, or one made while no job ran).

use serde::{Deserialize, Serialize};

/// Polls for which a rise keeps `suspected` set.
pub const SUSPECT_POLLS: u64 = 30;

/// What the guard says (REST `kudu.foreignWrites`, Prometheus).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ForeignWrites {
    /// Rows written to the sink table beyond ferry's own since the job's
    /// process started watching (only rises).
    pub total: u64,
    /// A rise within the last [`SUSPECT_POLLS`] polls.
    pub suspected: bool,
    /// Polls compared so far (0: nothing known yet).
    pub polls: u64,
}

/// The detector's state.
#[derive(Debug, Default)]
pub struct WriteGuard {
    /// Ferry's row count at the first poll.
    ferry_base: Option<u64>,
    /// The highest sum of the servers' counters seen.
    sink_prev: Option<u64>,
    /// Rows the servers counted from the first poll to the previous one
    /// (increases only).
    sink_counted: u64,
    /// Rows the servers counted at the latest poll, not compared yet.
    sink_latest: u64,
    polls: u64,
    total: u64,
    last_rise_poll: Option<u64>,
}

impl WriteGuard {
    /// One poll: `sink` = the sink table's counters summed (`None` when the
    /// poll failed), `ferry` = the rows the job has written so far.
    pub fn observe(&mut self, sink: Option<u64>, ferry: u64) {
        let Some(sink) = sink else { return };
        let Some(base) = self.ferry_base else {
            self.ferry_base = Some(ferry);
            self.sink_prev = Some(sink);
            return;
        };
        self.polls += 1;
        // The servers' rows up to the previous poll against ferry's now.
        self.sink_counted += self.sink_latest;
        let excess = self.sink_counted.saturating_sub(ferry.saturating_sub(base));
        if excess > self.total {
            self.total = excess;
            self.last_rise_poll = Some(self.polls);
        }
        // Against the highest sum seen: a sum that went down (a tablet
        // server restarted, or did not answer) adds nothing until it is
        // above that again.
        let high = self.sink_prev.unwrap_or(sink);
        self.sink_latest = sink.saturating_sub(high);
        self.sink_prev = Some(high.max(sink));
    }

    /// The figures now.
    pub fn view(&self) -> ForeignWrites {
        ForeignWrites {
            total: self.total,
            suspected: self
                .last_rise_poll
                .is_some_and(|p| self.polls.saturating_sub(p) < SUSPECT_POLLS),
            polls: self.polls,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ferrys_own_writes_never_count_even_when_the_servers_are_ahead() {
        let mut g = WriteGuard::default();
        g.observe(Some(1_000), 0);
        // The servers applied 500 rows whose flush returns to ferry later.
        g.observe(Some(1_500), 0);
        g.observe(Some(2_000), 500);
        // Ignored deletes: ferry sent more than the servers counted.
        g.observe(Some(2_000), 1_200);
        g.observe(Some(2_000), 1_200);
        assert_eq!(g.view().total, 0);
        assert!(!g.view().suspected);
    }

    #[test]
    fn rows_beyond_ferrys_are_counted_once_and_suspected_for_a_while() {
        let mut g = WriteGuard::default();
        g.observe(Some(0), 0);
        g.observe(Some(100), 100); // ferry's
        g.observe(Some(103), 100); // 3 foreign rows
        g.observe(Some(103), 100);
        assert_eq!(g.view().total, 3);
        assert!(g.view().suspected);
        for _ in 0..SUSPECT_POLLS {
            g.observe(Some(103), 100);
        }
        let v = g.view();
        assert_eq!(v.total, 3);
        assert!(!v.suspected, "{v:?}");
        // A failed poll changes nothing; a restarted or silent server
        // (counters down, then back) adds nothing.
        g.observe(None, 100);
        g.observe(Some(10), 100);
        g.observe(Some(10), 100);
        g.observe(Some(103), 100);
        g.observe(Some(103), 100);
        assert_eq!(g.view().total, 3);
    }
}
