//! The Kudu source: plans a window as fault-tolerant (ORDERED) snapshot or
//! diff scan splits, one per tablet (or per `reader.splitSizeBytes` key
//! range), and reads a split from its resume key (prefetching the next
//! batch with `reader.prefetching`). A diff window leaves out the tablets
//! [`QuietTablets`] proves unchanged in it; when that is every tablet, the
//! window is planned (and its schema answered) without asking the masters:
//! a job of many idle tables costs them nothing per table per window.

use crate::prefetch::ScanBatches;
use crate::quiet_tablets::{QuietTablets, Selection, TabletProbe};
use crate::recopy::{Recopy, SinkKeys};
use crate::scan_budget::ScanBudget;
use crate::shard::ShardTablets;
use crate::tserver_metrics::EndpointChoice;
use ferry_engine::checkpoint::{SplitState, WindowState};
use ferry_engine::config::{
    ReaderConfig, ReplicaSelection, TabletMetricsEndpoint, TABLET_METRICS_ENDPOINT,
};
use ferry_engine::connector::{
    Batch, ReadBatch, SchemaRecord, Source, SplitReader, TableRef, WindowPlan,
};
use ferry_engine::identity::SplitId;
use ferry_engine::time::{SourceClock, SourceTime};
use ferry_engine::EngineError;
use kudu_client::scan::RowBatch;
use kudu_client::scan::Split;
use kudu_client::scan::{ReplicaSelection as ClientReplicaSelection, ScanSpec};
use kudu_client::{HybridTime, KuduClient};
use std::sync::Arc;

/// Reads the source table.
#[derive(Debug, Clone)]
pub struct KuduSource {
    client: KuduClient,
    table_name: String,
    /// The table's id when known: the table is then opened by id, so a
    /// rename does not matter.
    table_id: Option<String>,
    reader: ReaderConfig,
    /// Every column name seen by `schema()` → its column id, to read
    /// splits planned before a rename.
    names: std::sync::Arc<std::sync::RwLock<std::collections::HashMap<String, u32>>>,
    /// Readings of the tablets' write counters, to skip quiet tablets.
    quiet: Arc<QuietTablets>,
    /// What the last window's opening learnt: reused by the next call
    /// for the same window, and when a window copies nothing.
    known: Arc<std::sync::Mutex<Known>>,
    /// In a job cut into shards: the tablets this shard reads (`None`:
    /// every tablet).
    shard: Option<ShardTablets>,
    /// The sink a diff split whose history ran out is re-copied into
    /// (`reader.recopyExpiredTablets`; `None`: such a split fails).
    recopy: Option<SinkKeys>,
    /// What diff scans may cost each source tablet server
    /// (`reader.diffScanBudget`; `None`: no budget).
    budget: Option<Arc<ScanBudget>>,
}

/// The table and schema read last, and the selection of the window being
/// opened.
#[derive(Debug, Default)]
struct Known {
    table: Option<kudu_client::KuduTable>,
    schema: Option<SchemaRecord>,
    selection: Option<(WindowState, Selection)>,
}

impl KuduSource {
    /// A source for `table_name` on the cluster of `client`.
    pub fn new(client: KuduClient, table_name: impl Into<String>, reader: ReaderConfig) -> Self {
        let budget = ScanBudget::from_reader(&reader).map(Arc::new);
        KuduSource {
            client,
            table_name: table_name.into(),
            table_id: None,
            quiet: Arc::new(quiet_tablets(&reader)),
            reader,
            names: Default::default(),
            known: Default::default(),
            shard: None,
            recopy: None,
            budget,
        }
    }

    /// Reads only the tablets `shard` owns (`None`: every tablet): windows
    /// are planned, and quiet tablets proven, over them alone.
    pub fn with_shard(mut self, shard: Option<ShardTablets>) -> Self {
        self.shard = shard;
        self
    }

    /// Re-copies the range of a diff split whose history ran out into
    /// `sink` instead of failing (`None`: fails).
    pub fn with_recopy(mut self, sink: Option<SinkKeys>) -> Self {
        self.recopy = sink;
        self
    }

    /// Charges its diff scans to `budget`, shared with the job's other
    /// tables on the same cluster (`None`: no budget).
    pub fn with_budget(mut self, budget: Option<Arc<ScanBudget>>) -> Self {
        self.budget = budget;
        self
    }

    /// Reads the tablet servers through `probe`, shared with the job's
    /// other tables on the same cluster (one sweep per server per window
    /// for all of them).
    pub fn with_probe(mut self, probe: Arc<TabletProbe>) -> Self {
        self.quiet =
            Arc::new(QuietTablets::new(self.reader.quiet_tablet_max_skips).with_probe(probe));
        self
    }

    /// A source for `table`, opened by its id (renames do not matter; an
    /// empty id falls back to the name).
    pub fn for_table(client: KuduClient, table: &TableRef, reader: ReaderConfig) -> Self {
        let budget = ScanBudget::from_reader(&reader).map(Arc::new);
        KuduSource {
            client,
            table_name: table.name.clone(),
            table_id: (!table.id.is_unknown()).then(|| table.id.as_str().to_owned()),
            quiet: Arc::new(quiet_tablets(&reader)),
            reader,
            names: Default::default(),
            known: Default::default(),
            shard: None,
            recopy: None,
            budget,
        }
    }

    /// `planned` (column names of a split's projection) as the source table
    /// `schema` has them now: renamed columns under their new names (found
    /// through the column ids recorded by `schema()`), dropped ones left
    /// out.
    fn projection_now(&self, planned: &[String], schema: &kudu_client::Schema) -> Vec<String> {
        let ids = self.names.read().ok();
        planned
            .iter()
            .filter_map(|name| {
                if schema.column_by_name(name).is_some() {
                    return Some(name.clone());
                }
                let id = ids.as_ref().and_then(|m| m.get(name).copied())?;
                schema
                    .columns()
                    .iter()
                    .find(|c| c.id() == Some(id))
                    .map(|c| c.name().to_owned())
            })
            .collect()
    }

    fn remember_names(&self, schema: &kudu_client::Schema) {
        if let Ok(mut names) = self.names.write() {
            for c in schema.columns() {
                if let Some(id) = c.id() {
                    names.insert(c.name().to_owned(), id);
                }
            }
        }
    }

    /// The source table now, by id when known.
    async fn open_table(&self) -> Result<kudu_client::KuduTable, EngineError> {
        let table = match &self.table_id {
            Some(id) => self.client.open_table_by_id(id).await,
            None => self.client.open_table(&self.table_name).await,
        }
        .map_err(|e| self.err(e))?;
        if let Ok(mut k) = self.known.lock() {
            k.table = Some(table.clone());
        }
        Ok(table)
    }

    /// The quiet tablets of diff `window` (empty for a snapshot), computed
    /// once per window: `schema_for` and `plan` both ask.
    async fn selection(&self, window: WindowState) -> Result<Selection, EngineError> {
        if window.start_timestamp.is_none() {
            return Ok(Selection::default());
        }
        let (known_table, known_selection) = match self.known.lock() {
            Ok(k) => (k.table.clone(), k.selection.clone()),
            Err(_) => (None, None),
        };
        if let Some((_, s)) = known_selection.filter(|(w, _)| *w == window) {
            return Ok(s);
        }
        let table = match known_table {
            Some(t) => t,
            None => self.open_table().await?,
        };
        let shard = self.shard;
        let owned = |key: &[u8]| shard.is_none_or(|s| s.owns_tablet(&table, key));
        let selection = self
            .quiet
            .select(&self.client, &table, window, &owned)
            .await;
        if let Ok(mut k) = self.known.lock() {
            k.selection = Some((window, selection.clone()));
        }
        Ok(selection)
    }

    fn err(&self, source: kudu_client::Error) -> EngineError {
        crate::error::source_error(&self.table_name, source)
    }

    fn spec(&self, window: WindowState) -> ScanSpec {
        let mut spec = ScanSpec::new()
            .fault_tolerant(true)
            .batch_size_bytes(self.reader.batch_size_bytes)
            .timeout(self.reader.scan_request_timeout)
            .keep_alive_interval(self.reader.keep_alive_period)
            .replica_selection(match self.reader.replica_selection {
                ReplicaSelection::ClosestReplica => ClientReplicaSelection::ClosestReplica,
                ReplicaSelection::LeaderOnly => ClientReplicaSelection::LeaderOnly,
            });
        let end = hybrid_time(window.end_timestamp);
        spec = match window.start_timestamp {
            None => spec.snapshot(end),
            Some(start) => spec.diff(hybrid_time(start), end),
        };
        if let Some(size) = self.reader.split_size_bytes {
            spec = spec.split_size_bytes(size.get());
        }
        spec
    }
}

/// A scan batch as the Kudu source yields it: a projection's rows in
/// Kudu's row-wise wire layout, which go to the sink as they are.
pub struct KuduBatch {
    rows: RowBatch,
    /// Whether the batch is the first of a split's re-copy.
    starts_recopy: bool,
}

impl KuduBatch {
    /// `rows` as a batch of the Kudu source.
    pub fn new(rows: RowBatch) -> Self {
        KuduBatch {
            rows,
            starts_recopy: false,
        }
    }
}

impl std::ops::Deref for KuduBatch {
    type Target = RowBatch;

    fn deref(&self) -> &RowBatch {
        &self.rows
    }
}

impl Batch for KuduBatch {
    fn len(&self) -> usize {
        self.rows.len()
    }

    fn byte_size(&self) -> usize {
        self.rows.byte_size()
    }

    fn recopies(&self) -> u64 {
        u64::from(self.starts_recopy)
    }
}

/// A Kudu source's time is a raw hybrid time of the source cluster.
fn hybrid_time(t: SourceTime) -> HybridTime {
    HybridTime::from_raw(t.raw())
}

impl Source for KuduSource {
    type Batch = KuduBatch;
    type Reader = KuduSplitReader;

    const NAME: &'static str = "KuduSource";

    /// Hybrid times: their physical part is the wall clock.
    const CLOCK: SourceClock = SourceClock::new("hybrid time", |t| hybrid_time(t).epoch_millis());

    async fn now(&self) -> Result<SourceTime, EngineError> {
        let now = self.client.server_clock().await.map_err(|e| self.err(e))?;
        Ok(SourceTime::from_raw(now.raw()))
    }

    async fn plan(
        &self,
        window: WindowState,
        _cursor: Option<&serde_json::Value>,
    ) -> Result<WindowPlan, EngineError> {
        let quiet = self.selection(window).await?;
        if quiet.every_tablet {
            // Nothing to copy: no catalog call, no split.
            tracing::debug!(table = %self.table_name, skipped = quiet.skip.len(), "every tablet proven unchanged in the window");
            return Ok(WindowPlan {
                splits: Vec::new(),
                skipped: quiet.skip.len() as u64,
                ..WindowPlan::default()
            });
        }
        // Re-opened so a source schema change is picked up.
        let table = self.open_table().await?;
        self.remember_names(table.schema());
        let mut splits = self
            .client
            .scan_splits(&table, &self.spec(window))
            .await
            .map_err(|e| self.err(e))?;
        let shard = self.shard;
        splits.retain(|s| shard.is_none_or(|sh| sh.owns_tablet(&table, s.partition_key_start())));
        if !quiet.skip.is_empty() {
            splits.retain(|s| !quiet.skip.contains(s.tablet_id()));
            tracing::debug!(table = %self.table_name, skipped = quiet.skip.len(), "tablets proven unchanged in the window are not scanned");
        }
        let pace = match (&self.budget, window.start_timestamp) {
            (Some(budget), Some(_)) => {
                let leaders = self.quiet.leaders(&self.client, &table).await;
                // A tablet not located is charged to one server of its own.
                let servers = splits
                    .iter()
                    .map(|s| leaders.get(s.tablet_id()).map_or("", String::as_str));
                Some(budget.charge(servers))
            }
            _ => None,
        };
        let splits = splits
            .iter()
            .enumerate()
            .map(|(i, split)| SplitState {
                split_id: SplitId::new(format!("{}-{i:05}", split.tablet_id())),
                descriptor: split.to_bytes(),
                resume_key: None,
            })
            .collect();
        Ok(WindowPlan {
            splits,
            // A diff window starts where the one before ended.
            cursor: None,
            skipped: quiet.skip.len() as u64,
            pace,
        })
    }

    async fn schema_for(&self, window: WindowState) -> Result<Option<SchemaRecord>, EngineError> {
        if self.selection(window).await?.every_tablet {
            // The window copies no row, so none can hold a column the
            // schema read before lacks; the next window that copies one
            // reads the schema again, after its end was chosen.
            if let Some(schema) = self.known.lock().ok().and_then(|k| k.schema.clone()) {
                return Ok(Some(schema));
            }
        }
        self.schema().await
    }

    async fn schema(&self) -> Result<Option<SchemaRecord>, EngineError> {
        let table = self.open_table().await?;
        let ranges = self
            .client
            .range_partitions(&table)
            .await
            .map_err(|e| self.err(e))?;
        self.remember_names(table.schema());
        let record = crate::sink_table::schema_change::record_of(&table, &ranges)
            .map_err(EngineError::from)?;
        if let Ok(mut k) = self.known.lock() {
            k.schema = Some(record.clone());
        }
        Ok(Some(record))
    }

    async fn open(&self, state: &SplitState) -> Result<KuduSplitReader, EngineError> {
        let mut split = Split::from_bytes(&state.descriptor).map_err(|e| self.err(e))?;
        if let Some(key) = &state.resume_key {
            split = split.with_resume_key(key.clone());
        }
        // Opened by id (renames do not matter); the projection planned
        // may name columns dropped or renamed since: read what exists now.
        let table = match split.table_id() {
            "" => self.client.open_table(split.table_name()).await,
            id => self.client.open_table_by_id(id).await,
        }
        .map_err(|e| self.err(e))?;
        let projection = self.projection_now(split.projection(), table.schema());
        if projection.as_slice() != split.projection() {
            tracing::info!(table = %table.name(), planned = ?split.projection(), now = ?projection, "the source schema changed since the split was planned: reading the columns that exist now");
            split = split.with_projection(projection);
        }
        let scanner = self
            .client
            .scanner_for_split_on(&table, &split)
            .map_err(|e| self.err(e))?;
        let recopy = match (&self.recopy, split.diff_start()) {
            (Some(sink), Some(_)) => Some(RecopyPlan {
                client: self.client.clone(),
                table,
                sink: sink.clone(),
                reader: self.reader.clone(),
                split: split.clone(),
            }),
            _ => None,
        };
        Ok(KuduSplitReader {
            batches: Reading::Scan(ScanBatches::new(scanner, self.reader.prefetching)),
            table_name: self.table_name.clone(),
            resume: split.resume_key().map(<[u8]>::to_vec),
            recopy,
            recopy_started: false,
        })
    }
}

/// Streams one split's batches.
pub struct KuduSplitReader {
    batches: Reading,
    table_name: String,
    /// The resume key of the last batch handed on.
    resume: Option<Vec<u8>>,
    /// What re-copying this diff split needs, if its history runs out.
    recopy: Option<RecopyPlan>,
    /// Set when the re-copy started, until its first batch is handed on.
    recopy_started: bool,
}

enum Reading {
    /// The split's own scan.
    Scan(ScanBatches),
    /// Its range copied again at the window end (history ran out).
    Recopy(Box<Recopy>),
}

struct RecopyPlan {
    client: KuduClient,
    table: kudu_client::KuduTable,
    sink: SinkKeys,
    reader: ReaderConfig,
    split: Split,
}

impl KuduSplitReader {
    /// Switches to re-copying the split's range after `error` (its history
    /// ran out), or returns the error when that cannot be done.
    async fn recopy(&mut self, error: kudu_client::Error) -> Result<(), EngineError> {
        let fail = |e| crate::error::source_error(&self.table_name, e);
        let Some(plan) = self.recopy.take() else {
            return Err(fail(error));
        };
        let mut split = plan.split;
        if let Some(key) = &self.resume {
            split = split.with_resume_key(key.clone());
        }
        let tablet = split.tablet_id().to_owned();
        match Recopy::start(&plan.client, &plan.table, &split, &plan.sink, &plan.reader).await {
            Ok(Some(recopy)) => {
                tracing::warn!(table = %self.table_name, %tablet, "the tablet's history no longer reaches the window start: re-copying its rows at the window end and deleting the sink rows the source no longer has");
                self.batches = Reading::Recopy(Box::new(recopy));
                self.recopy_started = true;
                Ok(())
            }
            Ok(None) => {
                tracing::warn!(table = %self.table_name, %tablet, "the tablet's history no longer reaches the window start and it cannot be re-copied: the sink is not partitioned as the source");
                Err(fail(error))
            }
            Err(e) => Err(fail(e)),
        }
    }
}

impl SplitReader for KuduSplitReader {
    type Batch = KuduBatch;

    async fn next(&mut self) -> Result<Option<ReadBatch<KuduBatch>>, EngineError> {
        let batch = loop {
            let fetched = match &mut self.batches {
                Reading::Scan(batches) => batches.next().await,
                Reading::Recopy(recopy) => recopy.next().await,
            };
            match fetched {
                Err(e @ kudu_client::Error::SnapshotTooOld { .. }) => self.recopy(e).await?,
                Err(e) => return Err(crate::error::source_error(&self.table_name, e)),
                Ok(batch) => break batch,
            }
        };
        Ok(batch.map(|(rows, resume_key)| {
            if resume_key.is_some() {
                self.resume.clone_from(&resume_key);
            }
            ReadBatch {
                rows: KuduBatch {
                    rows,
                    starts_recopy: std::mem::take(&mut self.recopy_started),
                },
                resume_key,
            }
        }))
    }
}

/// Quiet tablets as `reader.*` configures them.
fn quiet_tablets(reader: &ReaderConfig) -> QuietTablets {
    QuietTablets::new(reader.quiet_tablet_max_skips).with_endpoints(endpoint_choice(reader))
}

/// `reader.tabletMetricsEndpoint` as the metrics reader's choice (the
/// value was checked when the job's configuration was parsed).
pub fn endpoint_choice(reader: &ReaderConfig) -> EndpointChoice {
    match reader
        .keys
        .get(&TABLET_METRICS_ENDPOINT)
        .unwrap_or_default()
    {
        TabletMetricsEndpoint::Json => EndpointChoice::Json,
        TabletMetricsEndpoint::Prometheus => EndpointChoice::PrometheusWhereAvailable,
    }
}
