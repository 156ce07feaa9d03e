//! [`KuduTables`]: the [`Tables`] of a Kudu-to-Kudu job. Lists the source
//! cluster's tables and keeps those `job.tableName` names or
//! `job.tablePattern` matches, plus every table the job already replicates
//! (followed by id, so a renamed table stays); makes each table's
//! [`KuduSource`] and [`KuduSink`].
//!
//! The choice itself is [`select_tables`], a pure function, so its rules
//! (position table and sink copies never picked, named tables that are
//! missing refused) are unit-tested without a cluster.

use std::sync::atomic::AtomicU64;
use std::sync::Arc;

use kudu_client::{KuduClient, TableSummary};

use crate::quiet_tablets::TabletProbe;
use crate::scan_budget::ScanBudget;
use crate::shard::ShardTablets;
use crate::sink::KuduSink;
use crate::source::KuduSource;
use ferry_engine::config::{JobConfig, RECOPY_EXPIRED_TABLETS};
use ferry_engine::connector::{TableRef, Tables};
use ferry_engine::identity::TableId;
use ferry_engine::EngineError;

/// The source tables of one job, on Kudu.
pub struct KuduTables {
    source: KuduClient,
    sink: KuduClient,
    config: JobConfig,
    rows_sent: Arc<AtomicU64>,
    /// The source's tablet servers as quiet tablets read them, shared by
    /// every table (one sweep per server per window for all of them).
    probe: Arc<TabletProbe>,
    /// What every table's diff scans may cost each source tablet server,
    /// together (`reader.diffScanBudget`).
    budget: Option<Arc<ScanBudget>>,
}

impl KuduTables {
    /// Tables of `config`'s selection, read from `source`, written to `sink`.
    pub fn new(source: KuduClient, sink: KuduClient, config: JobConfig) -> Self {
        KuduTables {
            probe: Arc::new(TabletProbe::new(crate::source::endpoint_choice(
                &config.reader,
            ))),
            budget: ScanBudget::from_reader(&config.reader).map(Arc::new),
            source,
            sink,
            config,
            rows_sent: Arc::new(AtomicU64::new(0)),
        }
    }

    /// Counts the rows sent into `counter` (shared with the caller).
    pub fn with_rows_sent(mut self, counter: Arc<AtomicU64>) -> Self {
        self.rows_sent = counter;
        self
    }

    /// The rows every table's sink handed to Kudu so far (one count shared
    /// by all of them, for the sink write guard).
    pub fn rows_sent(&self) -> Arc<AtomicU64> {
        self.rows_sent.clone()
    }
}

/// Which listed source tables (`listed`: id, current name) the job
/// replicates: every known table (by id) still listed, under its current
/// name; every listed table named in `job.tableName` or matching
/// `job.tablePattern`; never the position or cuts table nor, when source
/// and sink are one cluster, a sink copy (`<selected name><job.tableSuffix>`). A
/// table named in `job.tableName` that is neither listed nor known (by
/// name) is an error naming it.
pub fn select_tables(
    config: &JobConfig,
    listed: &[TableRef],
    known: &[TableRef],
) -> Result<Vec<TableRef>, EngineError> {
    let pattern = config
        .tables
        .pattern_regex()
        .map_err(|e| EngineError::TableMismatch(format!("job.tablePattern: {e}")))?;
    let same_cluster = same_cluster(config);
    let selected_name = |name: &str| config.tables.selects(name, pattern.as_ref());
    let excluded = |name: &str| {
        // The position and cuts tables are ferry's own bookkeeping.
        if config.position_table.as_deref() == Some(name)
            || config.cuts_table.as_deref() == Some(name)
        {
            return true;
        }
        same_cluster
            && !config.table_suffix.is_empty()
            && name
                .strip_suffix(config.table_suffix.as_str())
                .is_some_and(|base| selected_name(base) || listed_known(known, base))
    };
    let mut chosen: Vec<TableRef> = Vec::new();
    for table in listed {
        let known_id = known.iter().any(|k| !k.id.is_unknown() && k.id == table.id);
        let wanted = known_id || (selected_name(&table.name) && !excluded(&table.name));
        if wanted && !chosen.iter().any(|c| c.id == table.id) {
            chosen.push(table.clone());
        }
    }
    for name in &config.tables.names {
        let found = chosen.iter().any(|c| &c.name == name);
        let known_by_name = known.iter().any(|k| &k.name == name);
        if !found && !known_by_name {
            return Err(EngineError::TableMismatch(format!(
                "source table '{name}' named in job.tableName does not exist on the source \
                 cluster: create it, or remove it from job.tableName"
            )));
        }
    }
    Ok(chosen)
}

/// Lists the tables of `source` and keeps those `config` selects (see
/// [`select_tables`]) and, in a job cut into shards, that its shard
/// replicates whole or in part ([`crate::shard`]; tables it knows already
/// are kept: they are its by id): the discovery of every job whose source
/// is Kudu, whatever its sink.
pub async fn discover_tables(
    source: &KuduClient,
    config: &JobConfig,
    known: &[TableRef],
) -> Result<Vec<TableRef>, EngineError> {
    let listed: Vec<TableSummary> = source
        .list_tables("")
        .await
        .map_err(|source| crate::error::source_error(&config.table_name, source))?;
    let listed: Vec<TableRef> = listed
        .into_iter()
        .map(|t| TableRef {
            id: TableId::new(t.id),
            name: t.name,
        })
        .collect();
    let chosen = select_tables(config, &listed, known)?;
    match ShardTablets::of(config) {
        Some(shard) => shard_tables(source, config, shard, chosen, known).await,
        None => Ok(chosen),
    }
}

/// The tables of `chosen` the shard replicates: those it owns whole, and
/// with `job.shardTabletsOver` the split ones it has tablets of (their
/// partitioning read from the source, for the tables it does not own).
async fn shard_tables(
    source: &KuduClient,
    config: &JobConfig,
    shard: ShardTablets,
    chosen: Vec<TableRef>,
    known: &[TableRef],
) -> Result<Vec<TableRef>, EngineError> {
    let mut mine = Vec::with_capacity(chosen.len());
    for table in chosen {
        let known_id = known.iter().any(|k| !k.id.is_unknown() && k.id == table.id);
        if known_id || shard.spec.owns_table(&table) {
            mine.push(table);
            continue;
        }
        if shard.tablets_over == 0 {
            continue;
        }
        let opened = match source.open_table_by_id(table.id.as_str()).await {
            Ok(t) => t,
            // Dropped since it was listed: nothing to replicate.
            Err(kudu_client::Error::TableNotFound(_)) => continue,
            Err(e) => return Err(crate::error::source_error(&config.table_name, e)),
        };
        if shard.owns_any(&opened) {
            mine.push(table);
        }
    }
    Ok(mine)
}

fn listed_known(known: &[TableRef], name: &str) -> bool {
    known.iter().any(|k| k.name == name)
}

/// Whether source and sink are one Kudu cluster (same set of masters).
fn same_cluster(config: &JobConfig) -> bool {
    let mut a = config.source_master_addresses.clone();
    let mut b = config.sink_master_addresses.clone();
    a.sort();
    b.sort();
    a == b
}

impl Tables for KuduTables {
    type Source = KuduSource;
    type Sink = KuduSink;

    async fn discover(&self, known: &[TableRef]) -> Result<Vec<TableRef>, EngineError> {
        discover_tables(&self.source, &self.config, known).await
    }

    fn connect(&self, table: &TableRef) -> Result<(KuduSource, KuduSink), EngineError> {
        let sink = KuduSink::for_table(self.sink.clone(), self.source.clone(), table, &self.config)
            .with_rows_sent(self.rows_sent.clone());
        let recopy = self.config.reader.keys.get(&RECOPY_EXPIRED_TABLETS)?;
        let source = KuduSource::for_table(self.source.clone(), table, self.config.reader.clone())
            .with_probe(self.probe.clone())
            .with_budget(self.budget.clone())
            .with_shard(ShardTablets::of(&self.config))
            .with_recopy(recopy.then(|| sink.keys()));
        Ok((source, sink))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(pairs: &[(&str, &str)], same: bool) -> JobConfig {
        let sink = if same { "m1:7051" } else { "k1:7051" };
        let mut all = vec![
            ("job.sourceMasterAddresses", "m1:7051"),
            ("job.sinkMasterAddresses", sink),
            ("job.checkpointsDirectory", "/tmp/ferry-tables-test"),
        ];
        all.extend_from_slice(pairs);
        JobConfig::from_named_pairs(all).expect("valid config")
    }

    fn t(id: &str, name: &str) -> TableRef {
        TableRef {
            id: id.into(),
            name: name.to_owned(),
        }
    }

    fn names(tables: &[TableRef]) -> Vec<&str> {
        tables.iter().map(|t| t.name.as_str()).collect()
    }

    #[test]
    fn named_and_matching_tables_are_selected() {
        let c = config(
            &[
                ("job.tableName", "a,b"),
                ("job.tablePattern", "sales_[0-9]+"),
            ],
            false,
        );
        let listed = [
            t("1", "a"),
            t("2", "b"),
            t("3", "sales_1"),
            t("4", "old_sales_1"),
            t("5", "c"),
        ];
        let chosen = select_tables(&c, &listed, &[]).expect("selected");
        assert_eq!(names(&chosen), ["a", "b", "sales_1"]);
    }

    #[test]
    fn a_known_table_is_kept_under_its_new_name() {
        let c = config(&[("job.tableName", "a")], false);
        // "a" was renamed to "a2" (same id); the named table is followed.
        let chosen = select_tables(&c, &[t("1", "a2")], &[t("1", "a")]).expect("selected");
        assert_eq!(chosen, [t("1", "a2")]);
    }

    #[test]
    fn a_dropped_known_table_is_left_out() {
        let c = config(&[("job.tablePattern", "x.*")], false);
        let chosen = select_tables(&c, &[t("2", "x2")], &[t("1", "x1")]).expect("selected");
        assert_eq!(chosen, [t("2", "x2")]);
    }

    #[test]
    fn a_missing_named_table_is_an_error_naming_it() {
        let c = config(&[("job.tableName", "a,nope")], false);
        let err = select_tables(&c, &[t("1", "a")], &[]).expect_err("missing table");
        let msg = err.to_string();
        assert!(
            msg.contains("'nope'") && msg.contains("job.tableName"),
            "{msg}"
        );
        // Known by name (e.g. being dropped and re-created): no error.
        assert!(select_tables(&c, &[t("1", "a")], &[t("9", "nope")]).is_ok());
    }

    #[test]
    fn the_position_table_is_never_selected() {
        let c = config(&[("job.tablePattern", ".*")], false);
        let listed = [t("1", "a"), t("2", "ferry_positions")];
        let chosen = select_tables(&c, &listed, &[]).expect("selected");
        assert_eq!(names(&chosen), ["a"]);
    }

    #[test]
    fn sink_copies_on_the_same_cluster_are_not_selected() {
        let pairs = [
            ("job.tablePattern", "orders.*"),
            ("job.tableSuffix", "_copy"),
        ];
        let listed = [t("1", "orders"), t("2", "orders_copy"), t("3", "orders_x")];
        let same = select_tables(&config(&pairs, true), &listed, &[]).expect("selected");
        assert_eq!(names(&same), ["orders", "orders_x"]);
        // On another cluster a table with that name is the user's own.
        let other = select_tables(&config(&pairs, false), &listed, &[]).expect("selected");
        assert_eq!(names(&other), ["orders", "orders_copy", "orders_x"]);
    }
}
