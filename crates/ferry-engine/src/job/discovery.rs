//! Which tables the job replicates: at start, the tables of the restore
//! point (followed by id) and those the selection finds; then every
//! `job.tableDiscoveryIntervalSeconds`, new matching tables (a snapshot,
//! then diffs), renamed ones (the new name shows; nothing else changes)
//! and dropped ones (retired once no split of theirs is out).

use super::chain::{find_table, Chain};
use super::coordinator::{Coordinator, Flow};
use super::handle::{Control, JobStatus};
use crate::checkpoint::TableState;
use crate::connector::{Sink, TableRef, Tables};

use crate::error::EngineError;
use std::sync::Arc;
use tokio::sync::mpsc;
use tokio::time::Instant;

impl<T: Tables> Coordinator<T> {
    /// Finds the tables, builds their chains and prepares their sinks
    /// before the first pipeline starts; then (on a start from a restore
    /// point) compares each table's sink position with the restored state.
    /// A cluster that cannot be reached yet — a restart during an outage —
    /// is a failure like any other: the job is visible, RESTARTING, and
    /// tries again on the restart strategy's schedule. `Some` if the job
    /// ended instead.
    pub(super) async fn prepare_tables(
        &mut self,
        control: &mut mpsc::Receiver<Control>,
    ) -> Option<JobStatus> {
        loop {
            let error = match self.build_chains().await {
                Ok(()) => match self.prepare_sinks().await {
                    Ok(()) => return None,
                    Err(e) => e,
                },
                Err(e) => e,
            };
            match self.on_error(error) {
                Flow::Continue => return None,
                Flow::End(status) => return Some(status),
                Flow::Restart(delay) => {
                    if let Some(status) = self.restart(delay, control).await {
                        return Some(status);
                    }
                }
            }
        }
    }

    /// The first discovery: a chain for every table of the restore point
    /// that still exists (by id), and for every other table the selection
    /// finds. A restored table whose id is gone while a table of its name
    /// exists is refused: that is another table, and the sink holds the
    /// old one's rows.
    async fn build_chains(&mut self) -> Result<(), EngineError> {
        if self.built {
            return Ok(());
        }
        let initial = self.initial.clone().unwrap_or_default();
        let known: Vec<TableRef> = initial
            .iter()
            .filter(|t| !t.table_id.is_unknown())
            .map(|t| TableRef {
                id: t.table_id.clone(),
                name: t.table_name.clone(),
            })
            .collect();
        let found = self.tables.discover(&known).await?;
        for state in &initial {
            if found
                .iter()
                .any(|t| find_table(std::slice::from_ref(state), t).is_some())
            {
                continue;
            }
            if let Some(other) = found.iter().find(|t| t.name == state.table_name) {
                return Err(EngineError::TableMismatch(format!(
                    "the savepoint or checkpoint the job resumes from was taken from table '{}' (id {}), but the table of that name now has id {}: it was dropped and created again, and the sink holds the old table's rows; this savepoint cannot resume it: start the job without -s (drop or empty the sink table first) to copy the new table afresh",
                    state.table_name, state.table_id, other.id
                )));
            }
            tracing::warn!(table = %state.table_name, id = %state.table_id, "a table of the restored state no longer exists on the source; it is not replicated any more");
        }
        for table in found {
            let state = find_table(&initial, &table).cloned();
            self.add_chain(table, state)?;
        }
        self.built = true;
        self.initial = None;
        Ok(())
    }

    /// Adds a chain for `table`, continuing `state` if given.
    fn add_chain(&mut self, table: TableRef, state: Option<TableState>) -> Result<(), EngineError> {
        let connectors = self.tables.connect(&table)?;
        let key = self.next_key_value();
        tracing::info!(table = %table.name, id = %table.id, resumed = state.is_some(), "table added to the job");
        let mut chain = Chain::new(key, table, connectors, state.as_ref());
        if self.from_restore_point {
            chain.restored = state;
        }
        self.register(&chain);
        self.chains.push(chain);
        Ok(())
    }

    fn next_key_value(&mut self) -> crate::identity::TableKey {
        let key = self.next_key;
        self.next_key = key.next();
        key
    }

    /// Shows the table's metrics in the job's snapshot.
    fn register(&self, chain: &super::coordinator::TableChain<T>) {
        if let Ok(mut list) = self.table_list.lock() {
            list.push(chain.metrics.clone());
        }
    }

    fn unregister(&self, key_metrics: &Arc<crate::metrics::TableMetrics>) {
        if let Ok(mut list) = self.table_list.lock() {
            list.retain(|m| !Arc::ptr_eq(m, key_metrics));
        }
    }

    /// Prepares every chain's sink that is not prepared yet, then compares
    /// its position with the restored state.
    async fn prepare_sinks(&mut self) -> Result<(), EngineError> {
        for i in 0..self.chains.len() {
            if self.chains[i].prepared || self.chains[i].paused.is_some() {
                continue;
            }
            if let Err(e) = self.prepare_chain(i).await {
                self.pause_on_table_fault(i, e)?;
            }
        }
        Ok(())
    }

    async fn prepare_chain(&mut self, i: usize) -> Result<(), EngineError> {
        let chain = &mut self.chains[i];
        // No pipeline has the sink yet, so the chain holds the only
        // reference to it.
        if let Some(sink) = Arc::get_mut(&mut chain.sink) {
            sink.prepare().await?;
        }
        chain.metrics.set_sink_name(chain.sink.name());
        chain.prepared = true;
        let restoring = chain.restored.is_some();
        if let Some(resumed) = chain.merge_position().await? {
            // A restart before the next checkpoint comes back here, not to
            // the older state.
            self.continue_from(resumed);
        }
        if self.chains[i].sink.transactional() {
            self.chains[i].recover_sink = Some(restoring);
            self.chains[i].own_commit = restoring;
            self.recover_sink(i).await?;
        }
        Ok(())
    }

    /// A later discovery: adds new tables, follows renames, retires
    /// dropped tables. A failure is logged and tried again at the next
    /// discovery; it never fails the job.
    pub(super) async fn rediscover(&mut self) {
        self.next_discovery_at = Instant::now() + self.config.table_discovery_interval;
        let known: Vec<TableRef> = self.chains.iter().map(|c| c.table.clone()).collect();
        let found = match self.tables.discover(&known).await {
            Ok(found) => found,
            Err(e) => {
                tracing::warn!(error = %e, "looking for source tables failed; trying again later");
                return;
            }
        };
        for chain in &mut self.chains {
            match found.iter().find(|t| t.id == chain.table.id) {
                Some(now) if now.name != chain.table.name => {
                    tracing::info!(table = %now.name, was = %chain.table.name, "source table renamed; replication goes on");
                    chain.table.name = now.name.clone();
                    chain.metrics.set_name(&now.name);
                }
                Some(_) => {}
                None if self.config.tables.is_single() => {}
                None => {
                    if !chain.dropped {
                        tracing::warn!(table = %chain.table.name, "source table dropped; it is retired from the job");
                    }
                    chain.dropped = true;
                }
            }
        }
        let retired: Vec<_> = self
            .chains
            .iter()
            .filter(|c| c.dropped && c.enumerator.counts().pending == 0)
            .map(|c| c.metrics.clone())
            .collect();
        for m in &retired {
            self.unregister(m);
        }
        self.chains
            .retain(|c| !(c.dropped && c.enumerator.counts().pending == 0));
        if self.next_chain >= self.chains.len() {
            self.next_chain = 0;
        }
        for table in found {
            if self.chains.iter().any(|c| c.table.id == table.id) {
                continue;
            }
            let name = table.name.clone();
            if let Err(e) = self.add_chain(table, None) {
                tracing::warn!(table = %name, error = %e, "cannot add the new table; trying again later");
                continue;
            }
            let i = self.chains.len() - 1;
            if let Err(e) = self.prepare_chain(i).await {
                if e.is_transient() {
                    tracing::warn!(table = %name, error = %e, "preparing the new table's sink failed; trying again later");
                    let metrics = self.chains[i].metrics.clone();
                    self.unregister(&metrics);
                    self.chains.pop();
                } else if let Err(e) = self.pause_on_table_fault(i, e) {
                    let why = e.to_string();
                    self.chains[i].pause(why);
                }
            }
        }
    }
}
