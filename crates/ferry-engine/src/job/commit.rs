//! Exactly-once through transactional sinks ([`Sink::transactional`]):
//! every checkpoint and savepoint first holds the commit gate (no pipeline
//! between a write and its report), takes in the pipelines' reports,
//! captures the state and has each table's sink commit its writes together
//! with that table's state; only then is the state written. A restart or
//! a restore asks each sink to undo what it did not commit
//! ([`Sink::recover`]) and continues from the state of its last commit
//! when that is further than the one restored: the sink then holds
//! exactly the rows that state covers, so no row is written twice. Until
//! it has recovered, the chain's phase ([`super::phase::Recovering`])
//! allows no write and no commit.

use super::coordinator::{Coordinator, Flow, JobWorkers};
use crate::checkpoint::TableState;
use crate::connector::{Sink, Source, Tables};
use crate::enumerator::CheckpointCapture;
use crate::error::EngineError;
use tokio::sync::OwnedRwLockWriteGuard;

/// How far a table's state is: its open window's end, else its last
/// completed one's.
fn table_end(t: &TableState) -> Option<crate::time::SourceTime> {
    t.window.map(|w| w.end_timestamp).or(t.last_end_timestamp)
}

impl<T: Tables> Coordinator<T> {
    /// With a transactional sink: holds the commit gate and takes in every
    /// report the pipelines sent, so a capture now covers exactly what the
    /// sinks hold. A pipeline failure among them is kept for the loop to
    /// act on (`deferred`), and nothing is committed. `None` when no sink
    /// commits.
    pub(super) async fn quiesce(
        &mut self,
        workers: &mut JobWorkers<T>,
    ) -> Result<Option<OwnedRwLockWriteGuard<()>>, EngineError> {
        if !self
            .chains
            .iter()
            .any(|c| c.sink.two_phase_commit().is_some())
        {
            return Ok(None);
        }
        let guard = self.gate.clone().write_owned().await;
        while let Ok(event) = workers.events.try_recv() {
            match self.on_event(event, &mut workers.idle) {
                Flow::Continue => {}
                flow => self.recovery.defer(flow),
            }
        }
        if self.recovery.deferred.is_some() {
            return Err(EngineError::CheckpointSkipped);
        }
        Ok(Some(guard))
    }

    /// Commits every transactional sink with its table's state in
    /// `captures` (taken under the gate). A failed commit leaves the sink
    /// committed or not; the job restarts and asks it which.
    pub(super) async fn commit_sinks(
        &mut self,
        captures: &[(crate::identity::TableKey, CheckpointCapture)],
    ) -> Result<(), EngineError> {
        let commits: Vec<(usize, TableState)> = self
            .chains
            .iter()
            .zip(captures)
            .enumerate()
            .filter(|(_, (chain, _))| {
                chain.sink.two_phase_commit().is_some() && chain.phase.sink_writable()
            })
            .map(|(i, (chain, (_, capture)))| (i, chain.state(capture)))
            .collect();
        for (i, state) in commits {
            // A fenced instance commits nothing (lease module).
            self.options.fence.check()?;
            let sink = &self.chains[i].sink;
            let Some(committer) = sink.two_phase_commit() else {
                continue;
            };
            if let Err(e) = committer.commit(&state).await {
                let flow = self.on_error(e);
                self.recovery.defer(flow);
                return Err(EngineError::CheckpointSkipped);
            }
            self.chains[i].own_commit = true;
        }
        Ok(())
    }

    /// Has chain `i`'s transactional sink undo what it did not commit and,
    /// if its phase says so ([`super::phase::Recovering::may_continue_from_commit`]), continues from
    /// the state of its last commit when that is at least as far as the
    /// chain's.
    pub(super) async fn recover_sink(&mut self, i: usize) -> Result<(), EngineError> {
        let Some(recovering) = self.chains[i].phase.recovering() else {
            return Ok(());
        };
        // A fenced instance touches nothing on the sink (lease module).
        self.options.fence.check()?;
        let chain = &mut self.chains[i];
        let committed = match chain.sink.two_phase_commit() {
            Some(committer) => committer.recover().await?,
            None => None,
        };
        let further = committed
            .filter(|_| recovering.may_continue_from_commit())
            .filter(|c| chain.commit_is_further(c));
        let Some(committed) = further else {
            // The sink learns the open window again before any write.
            chain.phase = recovering.recovered();
            return Ok(());
        };
        tracing::info!(
            table = %chain.table.name,
            last_end = ?committed.last_end_timestamp,
            window_end = ?committed.window.map(|w| w.end_timestamp),
            "continuing from the sink's last commit (exactly-once): it is further than the restored state"
        );
        chain.load(Some(&committed));
        // Written by the next checkpoint before any split is handed out.
        chain.phase = recovering.continued_from_commit(chain.enumerator.window());
        self.continue_from(committed);
        Ok(())
    }

    /// Makes `resumed` the table's state a restart comes back to (until
    /// the next checkpoint).
    pub(super) fn continue_from(&mut self, resumed: TableState) {
        let Some(state) = self.checkpoints.last_complete.as_mut() else {
            return;
        };
        let mut tables = state.table_states();
        let same = |t: &TableState| {
            t.table_id == resumed.table_id
                || (t.table_id.is_unknown() && t.table_name == resumed.table_name)
        };
        match tables.iter_mut().find(|t| same(t)) {
            Some(t) => *t = resumed,
            None => tables.push(resumed),
        }
        state.set_tables(tables);
    }
}

impl<S: Source, K: Sink<S::Batch>> super::chain::Chain<S, K> {
    /// Whether the sink's last commit `committed` is further than the
    /// chain's state (and not the same): then the chain continues from it.
    fn commit_is_further(&self, committed: &TableState) -> bool {
        let now = self.state(&self.enumerator.capture());
        if table_end(committed) < table_end(&now) {
            tracing::warn!(
                table = %self.table.name,
                committed_end = ?table_end(committed),
                state_end = ?table_end(&now),
                "the sink's last commit is older than the state the job continues from (another job's, or a state restored from elsewhere): records of the windows in between may be written twice"
            );
            return false;
        }
        !(committed.window == now.window
            && committed.last_end_timestamp == now.last_end_timestamp
            && committed.unassigned == now.unassigned
            && committed.pending == now.pending)
    }
}
