//! The Kudu sink: live rows become UPSERT_IGNORE with every column, rows a
//! diff scan reports deleted become key-only DELETE_IGNORE, so replaying a
//! batch (after a crash or a retried split) is harmless. On a sink table
//! with immutable columns, rows the sink holds with other immutable cells
//! (re-created on the source) are deleted first (`immutable_cells`).
//! Before the job starts, [`Sink::prepare`] creates the sink table as a
//! copy of the source (`job.createTable`) or checks that the existing one
//! can take its rows, and opens (or creates) the position table
//! (`job.positionTable`) where the job records which window the sink may
//! hold rows of ([`crate::sink_position`]) and the cuts table
//! (`job.cutsTable`, [`crate::cuts`]).

use crate::immutable_cells::ImmutableCells;
use crate::position::PositionTable;
use crate::shard::ShardTablets;
use crate::sink_table::{prepare_sink_table, SinkTableAction, SinkTableError, SinkTableOptions};
use crate::source::KuduBatch;
use ferry_engine::config::{FlushMode, JobConfig, WriterConfig, REQUEST_SIZE_BYTES};
use ferry_engine::connector::{
    CapabilityFuture, SchemaFollower, SchemaRecord, Sink, SinkCuts, SinkPositions, SinkWriter,
    TableRef, WriteStats,
};
use ferry_engine::EngineError;
use kudu_client::write::{FlushMode as ClientFlushMode, OpType, RowCopy, Session, SessionOptions};
use kudu_client::{ColumnSchema, KuduClient, KuduTable, Schema};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Writes the sink table.
#[derive(Debug, Clone)]
pub struct KuduSink {
    pub(crate) client: KuduClient,
    /// The source cluster and table the sink copies (for `prepare`).
    source: KuduClient,
    source_table: String,
    pub(crate) options: SinkTableOptions,
    /// Set by `prepare`.
    pub(crate) table: Option<KuduTable>,
    writer: WriterConfig,
    /// Where the sink position is recorded; `None`: nowhere (unsafe for
    /// restores from older states).
    pub(crate) position: Option<PositionTable>,
    /// Where consistent cuts are published (`crate::cuts`); `None`: nowhere.
    pub(crate) cuts: Option<crate::cuts::CutsTable>,
    /// Rows handed to the writers' sessions, counted per batch before any
    /// is sent (the write guard compares them with the servers' counters).
    rows_sent: Arc<AtomicU64>,
    /// `job.renameSinkTable` and `job.tableSuffix`: rename the sink table
    /// when the source is renamed (`None`: keep its name).
    rename_with_suffix: Option<String>,
    /// Bumped by every schema change applied to the sink: writers re-open
    /// the sink table when it moved.
    generation: Arc<AtomicU64>,
    /// The sink table's name now (it changes with `job.renameSinkTable`).
    current_name: Arc<std::sync::RwLock<String>>,
    /// Column names across schema changes, shared with the writers.
    names: Arc<std::sync::RwLock<ColumnNames>>,
    /// In a job cut into shards: the shard writing this sink.
    shard: Option<ShardTablets>,
    /// Set by `prepare` when the table is split over shards: several
    /// shards write this sink table (and follow its schema).
    split: bool,
}

/// What the writers need to map a batch of an older projection: every
/// name a source column had (→ its id) and each id's name now.
#[derive(Debug, Default)]
struct ColumnNames {
    by_old_name: std::collections::HashMap<String, u32>,
    current: std::collections::HashMap<u32, String>,
    /// A schema change was followed: a projected column found nowhere was
    /// dropped on both sides and is skipped.
    followed: bool,
}

impl ColumnNames {
    /// The sink column projected column `col` goes to now: by its source
    /// column id first — a batch read after a source rename the sink has
    /// not followed yet carries the new name, but the sink knows the id —
    /// then by a name the column had (a batch planned before a rename the
    /// sink followed).
    fn sink_name_of<'a>(&'a self, col: &'a ColumnSchema) -> Option<&'a str> {
        col.id()
            .and_then(|id| self.current.get(&id))
            .or_else(|| {
                self.by_old_name
                    .get(col.name())
                    .and_then(|id| self.current.get(id))
            })
            .map(String::as_str)
    }
}

impl KuduSink {
    /// A sink for the copy of `source_table` (on the cluster of `source`)
    /// on the cluster of `client`, named and created as `options` say.
    pub fn new(
        client: KuduClient,
        source: KuduClient,
        source_table: impl Into<String>,
        options: SinkTableOptions,
        writer: WriterConfig,
    ) -> Self {
        KuduSink {
            client,
            source,
            source_table: source_table.into(),
            options,
            table: None,
            writer,
            position: None,
            cuts: None,
            rows_sent: Arc::new(AtomicU64::new(0)),
            rename_with_suffix: None,
            generation: Arc::new(AtomicU64::new(0)),
            current_name: Arc::new(std::sync::RwLock::new(String::new())),
            names: Arc::default(),
            shard: None,
            split: false,
        }
    }

    /// The sink of source table `table` in a job configured by `config`:
    /// named `job.sinkTableName` if set, else the source's current name +
    /// `job.tableSuffix`; position table as in [`KuduSink::from_config`];
    /// with `job.renameSinkTable`, [`Sink::follow_schema`] renames the sink
    /// table when the source is renamed.
    pub fn for_table(
        sink: KuduClient,
        source: KuduClient,
        table: &TableRef,
        config: &JobConfig,
    ) -> Self {
        let sink_table_name = match &config.sink_table {
            Some(name) => name.clone(),
            None => format!("{}{}", table.name, config.table_suffix),
        };
        let options = SinkTableOptions {
            sink_table_name,
            create_table: config.create_table,
            restore_owner: config.restore_owner,
            follow_schema: config.schema_evolution,
        };
        let mut this = Self::new(
            sink,
            source,
            table.name.clone(),
            options,
            config.writer.clone(),
        )
        .with_position_table(config.position_table.clone())
        .with_cuts_table(config.cuts_table.clone(), config.cuts_retention);
        this.rename_with_suffix = (config.rename_sink_table && config.sink_table.is_none())
            .then(|| config.table_suffix.clone());
        this.shard = ShardTablets::of(config);
        this
    }

    /// The count of rows this sink's writers handed to Kudu so far (each
    /// batch counted whole before its first row is sent), shared with them.
    pub fn rows_sent(&self) -> Arc<AtomicU64> {
        self.rows_sent.clone()
    }

    /// Counts the rows sent in `counter` (shared with other sinks) instead
    /// of a count of its own.
    pub fn with_rows_sent(mut self, counter: Arc<AtomicU64>) -> Self {
        self.rows_sent = counter;
        self
    }

    /// Records the sink position in `table` on the sink cluster (`None`:
    /// nowhere).
    pub fn with_position_table(mut self, table: Option<String>) -> Self {
        self.position = table.map(|name| PositionTable::new(self.client.clone(), name));
        self
    }

    /// The sink of a job configured by `config`: table `job.tableName` +
    /// `job.tableSuffix`, created when `job.createTable` is set.
    pub fn from_config(client: KuduClient, source: KuduClient, config: &JobConfig) -> Self {
        let options = SinkTableOptions {
            sink_table_name: config.sink_table_name(),
            create_table: config.create_table,
            restore_owner: config.restore_owner,
            follow_schema: config.schema_evolution,
        };
        Self::new(
            client,
            source,
            config.table_name.clone(),
            options,
            config.writer.clone(),
        )
        .with_position_table(config.position_table.clone())
        .with_cuts_table(config.cuts_table.clone(), config.cuts_retention)
    }

    /// The sink table's name now.
    pub fn sink_name(&self) -> String {
        name_now(&self.current_name, &self.options.sink_table_name)
    }

    /// The sink table's keys, for re-copying a source range whose history
    /// ran out (`reader.recopyExpiredTablets`).
    pub fn keys(&self) -> crate::recopy::SinkKeys {
        crate::recopy::SinkKeys::new(
            self.client.clone(),
            self.current_name.clone(),
            self.options.sink_table_name.clone(),
        )
    }

    /// The sink table, once prepared.
    pub fn table(&self) -> Option<&KuduTable> {
        self.table.as_ref()
    }

    /// Whether the source table is split over the job's shards (by its
    /// partitioning, which never changes): then each shard keeps its own
    /// position record for this sink table.
    async fn split_over_shards(&self) -> Result<bool, EngineError> {
        let Some(shard) = self.shard.filter(|s| s.tablets_over > 0) else {
            return Ok(false);
        };
        let source = self
            .source
            .open_table(&self.source_table)
            .await
            .map_err(|e| crate::error::source_error(&self.source_table, e))?;
        Ok(shard.is_split(&source))
    }

    pub(crate) fn err(&self, source: kudu_client::Error) -> EngineError {
        crate::error::sink_error(&self.options.sink_table_name, source)
    }
}

impl Sink<KuduBatch> for KuduSink {
    type Writer = KuduSinkWriter;

    async fn prepare(&mut self) -> Result<(), EngineError> {
        let name = &self.options.sink_table_name;
        let plan = prepare_sink_table(
            &self.source,
            &self.client,
            &self.source_table,
            &self.options,
        )
        .await
        .map_err(EngineError::from)?;
        match plan.action {
            SinkTableAction::Created => {
                tracing::info!(table = %name, "created the sink table as a copy of the source")
            }
            _ => tracing::info!(table = %name, "sink table found and compatible"),
        }
        self.split = self.split_over_shards().await?;
        if let Some(position) = &mut self.position {
            if let (true, Some(shard)) = (self.split, self.shard) {
                position.for_shard_part(shard.spec.index);
            }
            position.prepare(plan.table.num_replicas()).await?;
        } else {
            tracing::warn!(
                table = %name,
                "job.positionTable is empty: no sink position is recorded, so a restore from an older checkpoint or savepoint may bring back rows the source deleted"
            );
        }
        if let Some(cuts) = &mut self.cuts {
            cuts.prepare(plan.table.num_replicas()).await?;
        }
        self.table = Some(plan.table);
        Ok(())
    }

    fn name(&self) -> String {
        self.sink_name()
    }

    async fn writer(&self) -> Result<KuduSinkWriter, EngineError> {
        // Every mode flushes at the end of a batch, before progress is
        // reported; MANUAL_FLUSH also flushes every maxBufferSize rows
        // (`write`), since its session refuses rows past a full buffer.
        let mode = match self.writer.flush_mode {
            FlushMode::AutoFlushSync => ClientFlushMode::AutoFlushSync,
            FlushMode::AutoFlushBackground => ClientFlushMode::AutoFlushBackground,
            FlushMode::ManualFlush => ClientFlushMode::ManualFlush,
        };
        let options = SessionOptions::default()
            .flush_mode(mode)
            .mutation_buffer_max_ops(self.writer.max_buffer_size.get())
            // A snapshot hands over scan batches of ~80 000 rows; 1 000-op
            // requests cost the sink a third more CPU than table copy's
            // (docs/benchmarks.md, finding 1). Buffers that wait for a
            // send grow instead, so a busy sink gets larger requests.
            .adaptive_batching(Some(self.writer.keys.get(&REQUEST_SIZE_BYTES)?))
            .flush_interval(self.writer.flush_interval)
            .operation_timeout(self.writer.operation_timeout);
        // MANUAL_FLUSH sends at maxBufferSize rows; a byte limit would
        // refuse a row first (whatever its size, a request is split by
        // the session's batch byte limit).
        let options = match mode {
            ClientFlushMode::ManualFlush => options.mutation_buffer_max_bytes(usize::MAX),
            _ => options,
        };
        let session = self
            .client
            .new_session_with(options)
            .map_err(|e| self.err(e))?;
        let (table, seen_generation) = match &self.table {
            // As prepared, before any schema change was followed: a writer
            // made after one re-opens the table at its first batch.
            Some(t) => (t.clone(), 0),
            // Not prepared: write to the table as it is.
            None => (
                self.client
                    .open_table(&self.options.sink_table_name)
                    .await
                    .map_err(|e| self.err(e))?,
                self.generation.load(Ordering::SeqCst),
            ),
        };
        Ok(KuduSinkWriter {
            session,
            table,
            client: self.client.clone(),
            generation: self.generation.clone(),
            seen_generation,
            names: self.names.clone(),
            mapping: None,
            manual_flush_at: (mode == ClientFlushMode::ManualFlush)
                .then_some(self.writer.max_buffer_size.get()),
            rows_sent: self.rows_sent.clone(),
            lookup_timeout: self.writer.operation_timeout,
        })
    }

    fn positions(&self) -> Option<&dyn SinkPositions> {
        // Only with a position table (`job.positionTable` not empty).
        self.position.as_ref().map(|_| self as &dyn SinkPositions)
    }

    fn schema_follower(&self) -> Option<&dyn SchemaFollower> {
        Some(self)
    }

    fn cuts(&self) -> Option<&dyn SinkCuts> {
        // A cut needs the position table's sink time (`sink_time`).
        self.cuts.as_ref().filter(|_| self.position.is_some())?;
        Some(self)
    }
}

impl SchemaFollower for KuduSink {
    fn follow_schema<'a>(
        &'a self,
        applied: Option<&'a SchemaRecord>,
        now: &'a SchemaRecord,
    ) -> CapabilityFuture<'a, ()> {
        Box::pin(async move {
            use crate::sink_table::schema_change::{follow, parse, FollowTarget};
            let sink_name = self.sink_name();
            let target = || FollowTarget {
                sink: &self.client,
                source: &self.source,
                sink_name: &sink_name,
                sink_id: self.table.as_ref().map(|t| t.id()),
                rename_with_suffix: self.rename_with_suffix.as_deref(),
            };
            // Every shard of a split table follows its schema (its rows need
            // the sink in line first): an ALTER may race another shard's, and
            // planned again the change is found done.
            let mut raced = 0;
            let outcome = loop {
                match follow(target(), applied, now).await {
                    Err(e) if self.split && raced < 3 => {
                        raced += 1;
                        tracing::info!(sink = %sink_name, error = %e, "following the schema change again: another shard may have applied it");
                        tokio::time::sleep(std::time::Duration::from_millis(300 * raced)).await;
                    }
                    done => break done?,
                }
            };
            // Batches planned before the change still name columns as they
            // were: remember every name a column id had, for the writers.
            if let Ok(mut names) = self.names.write() {
                for record in applied.into_iter().chain(Some(now)) {
                    if let Ok(doc) = parse(record, &sink_name) {
                        for c in &doc.columns {
                            names.by_old_name.insert(c.name.clone(), c.id);
                        }
                        if std::ptr::eq(record, now) {
                            names.current =
                                doc.columns.iter().map(|c| (c.id, c.name.clone())).collect();
                        }
                    }
                }
                names.followed = true;
            }
            if let Ok(mut name) = self.current_name.write() {
                *name = outcome.sink_name;
            }
            self.generation.fetch_add(1, Ordering::SeqCst);
            Ok(())
        })
    }
}

/// Column mapping from a projection schema to the sink schema.
struct Mapping {
    projection: Schema,
    /// Which projection column feeds which sink column, and the
    /// operations (UPSERT_IGNORE, key-only DELETE_IGNORE).
    copy: RowCopy,
    /// The sink's immutable columns the projection feeds (`None`: none).
    immutable: Option<Arc<ImmutableCells>>,
}

/// The sink table's name as `current` records it once prepared (it
/// follows renames), else as `configured`.
pub(crate) fn name_now(current: &std::sync::RwLock<String>, configured: &str) -> String {
    current
        .read()
        .ok()
        .map(|n| n.clone())
        .filter(|n| !n.is_empty())
        .unwrap_or_else(|| configured.to_owned())
}

/// One pipeline's writer.
pub struct KuduSinkWriter {
    session: Session,
    table: KuduTable,
    client: KuduClient,
    /// [`KuduSink`]'s schema generation, and the one `table` is of.
    generation: Arc<AtomicU64>,
    seen_generation: u64,
    names: Arc<std::sync::RwLock<ColumnNames>>,
    mapping: Option<Mapping>,
    /// MANUAL_FLUSH: flush when this many rows are buffered.
    manual_flush_at: Option<usize>,
    /// [`KuduSink::rows_sent`].
    rows_sent: Arc<AtomicU64>,
    /// How long a read of the sink's immutable cells may take.
    lookup_timeout: std::time::Duration,
}

impl KuduSinkWriter {
    /// The write session's counters (requests sent, rows written, …).
    pub fn session_metrics(&self) -> kudu_client::write::SessionMetrics {
        self.session.metrics()
    }

    pub(crate) fn err(&self, source: kudu_client::Error) -> EngineError {
        crate::error::sink_error(self.table.name(), source)
    }

    fn mapping_for(&mut self, projection: &Schema) -> Result<&Mapping, EngineError> {
        let stale = self
            .mapping
            .as_ref()
            .is_none_or(|m| &m.projection != projection);
        if stale {
            let sink = self.table.schema();
            let mut columns = Vec::new();
            let mut keys = 0;
            let names = self.names.read().ok();
            for (pi, col) in projection.columns().iter().enumerate() {
                if Some(pi) == projection.is_deleted_index() {
                    continue;
                }
                // By id through the recorded names first (a rename on
                // either side of the batch), then by name.
                let renamed = names.as_ref().and_then(|n| n.sink_name_of(col));
                let si = renamed
                    .and_then(|n| sink.index_of(n))
                    .or_else(|| sink.index_of(col.name()));
                let si = match si {
                    Some(si) => si,
                    // Dropped on the source and the sink since the batch
                    // was planned.
                    None if names.as_ref().is_some_and(|n| n.followed) => continue,
                    None => {
                        return Err(SinkTableError::ColumnNotInSink {
                            sink: self.table.name().to_owned(),
                            column: col.name().to_owned(),
                        }
                        .into())
                    }
                };
                columns.push((pi, si));
                if si < sink.num_key_columns() {
                    keys += 1;
                }
            }
            drop(names);
            if keys != sink.num_key_columns() {
                return Err(SinkTableError::KeyColumnsNotSent {
                    sink: self.table.name().to_owned(),
                }
                .into());
            }
            let copy = RowCopy::new(
                &self.table,
                projection,
                &columns,
                OpType::UpsertIgnore,
                OpType::DeleteIgnore,
            )
            .map_err(|e| self.err(e))?;
            // MANUAL_FLUSH refuses more rows than maxBufferSize at once.
            let flush_every = self.manual_flush_at.unwrap_or(usize::MAX);
            let immutable = ImmutableCells::new(&self.table, projection, &columns)
                .map_err(|e| self.err(e))?
                .map(|c| Arc::new(c.limits(self.lookup_timeout, flush_every)));
            self.mapping = Some(Mapping {
                projection: projection.clone(),
                copy,
                immutable,
            });
        }
        self.mapping
            .as_ref()
            .ok_or_else(|| SinkTableError::NoColumnMapping.into())
    }
}

impl SinkWriter<KuduBatch> for KuduSinkWriter {
    async fn write(&mut self, batch: &KuduBatch) -> Result<WriteStats, EngineError> {
        if batch.is_empty() {
            return Ok(WriteStats::default());
        }
        let generation = self.generation.load(Ordering::SeqCst);
        if generation != self.seen_generation {
            // The sink's schema changed: write with the new one.
            self.table = self
                .client
                .open_table_by_id(self.table.id())
                .await
                .map_err(|e| self.err(e))?;
            self.mapping = None;
            self.seen_generation = generation;
        }
        let mut stats = WriteStats::default();
        let mapping = self.mapping_for(batch.schema())?;
        let (copy, immutable) = (mapping.copy.clone(), mapping.immutable.clone());
        if let Some(cells) = immutable {
            let (table, sent) = (&self.table, &self.rows_sent);
            stats.recreated = cells
                .delete_recreated(&self.client, table, &mut self.session, batch, sent)
                .await
                .map_err(|e| self.err(e))?;
        }
        self.rows_sent
            .fetch_add(batch.len() as u64, Ordering::Relaxed);
        if self.session.flush_mode() == ClientFlushMode::AutoFlushBackground {
            // The whole batch in one call, encoded straight into requests
            // (docs/benchmarks.md, finding 2).
            let applied = self
                .session
                .apply_rows(&copy, batch)
                .await
                .map_err(|e| self.err(e))?;
            self.session.flush().await.map_err(|e| self.err(e))?;
            stats.upserts = applied.live as u64;
            stats.deletes = applied.deleted as u64;
            stats.bytes = batch.byte_size() as u64;
            return Ok(stats);
        }
        for view in batch.rows() {
            let op = copy.operation(&view).map_err(|e| self.err(e))?;
            if op.op_type().is_delete() {
                stats.deletes += 1;
            } else {
                stats.upserts += 1;
            }
            if self
                .manual_flush_at
                .is_some_and(|max| self.session.buffered_ops() >= max)
            {
                self.session.flush().await.map_err(|e| self.err(e))?;
            }
            self.session.apply(op).await.map_err(|e| self.err(e))?;
        }
        self.session.flush().await.map_err(|e| self.err(e))?;
        stats.bytes = batch.byte_size() as u64;
        Ok(stats)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kudu_client::DataType;

    fn column(name: &str, id: Option<u32>) -> ColumnSchema {
        let b = ColumnSchema::builder(name, DataType::String).nullable(true);
        match id {
            Some(id) => b.id(id),
            None => b,
        }
        .build()
        .unwrap()
    }

    /// The sink followed a schema where column 7 is `s`.
    fn followed() -> ColumnNames {
        ColumnNames {
            by_old_name: [("s".to_owned(), 7)].into(),
            current: [(7, "s".to_owned())].into(),
            followed: true,
        }
    }

    #[test]
    fn a_column_renamed_after_the_sink_followed_goes_to_its_old_sink_column() {
        // Read after `s` became `s_renamed` on the source, before the sink
        // followed the rename: the values belong in sink column `s`.
        let names = followed();
        assert_eq!(names.sink_name_of(&column("s_renamed", Some(7))), Some("s"));
        assert_eq!(names.sink_name_of(&column("s", Some(7))), Some("s"));
        // A column the sink never heard of is left to the name lookup.
        assert_eq!(names.sink_name_of(&column("new", Some(8))), None);
    }

    #[test]
    fn a_batch_planned_before_a_followed_rename_goes_to_the_new_name() {
        let mut names = followed();
        names.current.insert(7, "s_renamed".to_owned());
        names.by_old_name.insert("s_renamed".to_owned(), 7);
        assert_eq!(names.sink_name_of(&column("s", Some(7))), Some("s_renamed"));
        assert_eq!(names.sink_name_of(&column("s", None)), Some("s_renamed"));
    }
}
