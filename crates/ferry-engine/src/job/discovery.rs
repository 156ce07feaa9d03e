//! Which tables the job replicates: at start, the tables of the restore
//! point (followed by id) and those the selection finds; then every
//! `job.tableDiscoveryIntervalSeconds`, new matching tables (a snapshot,
//! then diffs), renamed ones (the new name shows; nothing else changes)
//! and dropped ones (retired once no split of theirs is out).

use super::chain::{find_table, Chain};
use super::coordinator::Coordinator;
use super::phase::{Phase, Resumed};
use crate::checkpoint::{JobState, TableState};
use crate::config::JobConfig;
use crate::connector::{Sink, TableRef, Tables};
use crate::error::EngineError;
use crate::identity::TableKey;
use std::sync::Arc;
use tokio::time::Instant;

/// The coordinator's part for finding tables: the source's tables, what
/// the first discovery continues, when the next one is due, the key of the
/// next chain.
pub(super) struct Discovery<T> {
    pub(super) tables: Arc<T>,
    /// Until the first discovery built the chains: the tables to continue
    /// (restore point or start time), and whether they came from a
    /// restore point (then each table's sink position is compared).
    first: Option<FirstDiscovery>,
    /// When the next discovery is due.
    pub(super) next_at: Instant,
    next_key: TableKey,
}

struct FirstDiscovery {
    initial: Vec<TableState>,
    from_restore_point: bool,
}

impl<T> Discovery<T> {
    /// Finding the tables of `tables`, continuing `initial` if given.
    pub(super) fn new(
        tables: T,
        initial: Option<&JobState>,
        from_restore_point: bool,
        config: &JobConfig,
    ) -> Self {
        Discovery {
            tables: Arc::new(tables),
            first: Some(FirstDiscovery {
                initial: initial.map(JobState::table_states).unwrap_or_default(),
                from_restore_point,
            }),
            next_at: Instant::now() + config.table_discovery_interval,
            next_key: TableKey::FIRST,
        }
    }

    /// Whether the first discovery built the chains.
    pub(super) fn built(&self) -> bool {
        self.first.is_none()
    }

    /// The next discovery is one interval from now.
    pub(super) fn schedule(&mut self, config: &JobConfig) {
        self.next_at = Instant::now() + config.table_discovery_interval;
    }

    fn next_key(&mut self) -> TableKey {
        let key = self.next_key;
        self.next_key = key.next();
        key
    }
}

impl<T: Tables> Coordinator<T> {
    /// Whether every table was found and prepared (or paused).
    pub(super) fn tables_ready(&self) -> bool {
        self.discovery.built() && !self.chains.iter().any(|c| c.phase.is_preparing())
    }

    /// Finds the tables, builds their chains and prepares their sinks
    /// before the first pipeline starts; then (on a start from a restore
    /// point) compares each table's sink position with the restored state.
    /// A cluster that cannot be reached yet — a restart during an outage —
    /// is a failure like any other: the job is visible, RESTARTING, and
    /// the loop tries again on the restart strategy's schedule.
    pub(super) async fn prepare_tables(&mut self) -> Result<(), EngineError> {
        self.build_chains().await?;
        self.prepare_sinks().await
    }

    /// The first discovery: a chain for every table of the restore point
    /// that still exists (by id), and for every other table the selection
    /// finds. A restored table whose id is gone while a table of its name
    /// exists is refused: that is another table, and the sink holds the
    /// old one's rows.
    async fn build_chains(&mut self) -> Result<(), EngineError> {
        let Some(first) = &self.discovery.first else {
            return Ok(());
        };
        let known: Vec<TableRef> = first
            .initial
            .iter()
            .filter(|t| !t.table_id.is_unknown())
            .map(|t| TableRef {
                id: t.table_id.clone(),
                name: t.table_name.clone(),
            })
            .collect();
        let found = self.discovery.tables.discover(&known).await?;
        for state in &first.initial {
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
        // Every table connected before any chain is added, so a failure
        // leaves nothing half built for the next attempt.
        let mut connected = Vec::with_capacity(found.len());
        for table in found {
            let state = find_table(&first.initial, &table).cloned();
            let connectors = self.discovery.tables.connect(&table)?;
            connected.push((table, connectors, state));
        }
        let from_restore_point = first.from_restore_point;
        self.discovery.first = None;
        for (table, connectors, state) in connected {
            self.add_chain(table, connectors, state, from_restore_point);
        }
        Ok(())
    }

    /// Adds a chain for `table`, continuing `state` if given (`restored`:
    /// from a restore point).
    fn add_chain(
        &mut self,
        table: TableRef,
        connectors: (super::coordinator::Src<T>, super::coordinator::Snk<T>),
        state: Option<TableState>,
        restored: bool,
    ) {
        let key = self.discovery.next_key();
        tracing::info!(table = %table.name, id = %table.id, resumed = state.is_some(), "table added to the job");
        let chain = Chain::new(key, table, connectors, state, restored);
        self.publisher.table(chain.shown());
        self.chains.push(chain);
    }

    /// Prepares every chain's sink that is not prepared yet, then compares
    /// its position with the restored state.
    async fn prepare_sinks(&mut self) -> Result<(), EngineError> {
        for i in 0..self.chains.len() {
            if !self.chains[i].phase.is_preparing() {
                continue;
            }
            if let Err(e) = self.prepare_chain(i).await {
                self.pause_on_table_fault(i, e)?;
            }
        }
        Ok(())
    }

    /// Prepares chain `i`'s sink, compares its position with the restored
    /// state (if any) and has a transactional sink recover. The chain
    /// leaves its preparing phase only once all of this before recovery
    /// succeeded, so a failure tries it all again.
    async fn prepare_chain(&mut self, i: usize) -> Result<(), EngineError> {
        let chain = &mut self.chains[i];
        let Phase::Preparing(preparing) = &chain.phase else {
            return Ok(());
        };
        let restored = preparing.restored().cloned();
        // No pipeline has the sink yet, so the chain holds the only
        // reference to it.
        if let Some(sink) = Arc::get_mut(&mut chain.sink) {
            sink.prepare().await?;
        }
        let moved = chain.merge_position(restored.as_ref()).await?;
        let window = chain.enumerator.window();
        let resumed = match moved {
            Some(_) => Resumed::replanned(window),
            None => Resumed::restored(window),
        };
        let transactional = chain.sink.two_phase_commit().is_some();
        if transactional {
            chain.own_commit = restored.is_some();
        }
        chain.advance(|phase| match phase {
            Phase::Preparing(p) => p.prepared(resumed, transactional),
            other => other,
        });
        self.show_table(i);
        if let Some(resumed) = moved {
            // A restart before the next checkpoint comes back here, not to
            // the older state.
            self.continue_from(resumed);
        }
        self.recover_sink(i).await
    }

    /// A later discovery: adds new tables, follows renames, retires
    /// dropped tables. A failure is logged and tried again at the next
    /// discovery; it never fails the job.
    pub(super) async fn rediscover(&mut self) {
        self.discovery.schedule(&self.config);
        let known: Vec<TableRef> = self.chains.iter().map(|c| c.table.clone()).collect();
        let found = match self.discovery.tables.discover(&known).await {
            Ok(found) => found,
            Err(e) => {
                tracing::warn!(error = %e, "looking for source tables failed; trying again later");
                return;
            }
        };
        for i in 0..self.chains.len() {
            let chain = &mut self.chains[i];
            match found.iter().find(|t| t.id == chain.table.id) {
                Some(now) if now.name != chain.table.name => {
                    tracing::info!(table = %now.name, was = %chain.table.name, "source table renamed; replication goes on");
                    chain.table.name = now.name.clone();
                    self.show_table(i);
                }
                Some(_) => {}
                None if self.config.tables.is_single() => {}
                None => {
                    if !chain.phase.is_retiring() {
                        tracing::warn!(table = %chain.table.name, "source table dropped; it is retired from the job");
                    }
                    chain.advance(Phase::retire);
                }
            }
        }
        self.retire_dropped();
        for table in found {
            if self.chains.iter().any(|c| c.table.id == table.id) {
                continue;
            }
            self.add_found(table).await;
        }
    }

    /// Removes the dropped tables no split of which is out any more.
    fn retire_dropped(&mut self) {
        let publisher = &self.publisher;
        self.chains.retain(|c| {
            let retired = c.phase.is_retiring() && c.enumerator.counts().pending == 0;
            if retired {
                publisher.table_gone(c.key);
            }
            !retired
        });
    }

    /// Adds a table a later discovery found, and prepares its sink.
    async fn add_found(&mut self, table: TableRef) {
        let name = table.name.clone();
        let connectors = match self.discovery.tables.connect(&table) {
            Ok(connectors) => connectors,
            Err(e) => {
                tracing::warn!(table = %name, error = %e, "cannot add the new table; trying again later");
                return;
            }
        };
        self.add_chain(table, connectors, None, false);
        let i = self.chains.len() - 1;
        if let Err(e) = self.prepare_chain(i).await {
            if e.is_transient() {
                tracing::warn!(table = %name, error = %e, "preparing the new table's sink failed; trying again later");
                let key = self.chains[i].key;
                self.publisher.table_gone(key);
                self.chains.pop();
            } else if let Err(e) = self.pause_on_table_fault(i, e) {
                let why = e.to_string();
                self.chains[i].pause(why);
                self.show_table(i);
            }
        }
    }
}
