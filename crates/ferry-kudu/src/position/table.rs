//! The position table on the sink cluster: one row per sink table, keyed by
//! its name, written with UPSERT once per window and read once when a job
//! starts from a restore point. A sink table split over the shards of a
//! job (`job.shardTabletsOver`) has one row per shard, keyed
//! `<sink table>#shard-<k>`: each shard's windows are its own.
//!
//! It is a small table of ferry's own (one tablet, the sink table's
//! replication factor), created when missing — like the checkpoints
//! directory, it is the job's bookkeeping, so it does not depend on
//! `job.createTable`. Reads go to the tablet leader with READ_LATEST, so a
//! job sees the last position written by whichever process wrote it.
//!
//! Columns added after the first release (`last_end_sink_time`) are added
//! with ALTER TABLE when a job prepares an older table; [`PositionTable::
//! lookup`] (for readers such as `ferry verify`) never creates or alters
//! anything and reads such a column as NULL when it is missing.

use super::{Call, PositionError};
use ferry_engine::checkpoint::WindowState;
use ferry_engine::sink_position::SinkPosition;
use ferry_engine::time::{SinkTime, SourceTime};
use kudu_client::error::StatusCode;
use kudu_client::scan::{ComparisonOp, Predicate, ReadMode, ReplicaSelection, RowView};
use kudu_client::write::{FlushMode, Operation, SessionOptions};
use kudu_client::{AlterTableBuilder, ColumnSchema, DataType, Error as KuduError};
use kudu_client::{KuduClient, KuduTable, Row, Schema, TableBuilder};

/// `job.positionTable`'s default.
pub const DEFAULT_POSITION_TABLE: &str = "ferry_positions";

/// The columns: (name, type, nullable). The first is the key.
const COLUMNS: &[(&str, DataType, bool)] = &[
    ("sink_table", DataType::String, false),
    ("sink_table_id", DataType::String, true),
    ("source_table", DataType::String, false),
    ("job_id", DataType::String, false),
    ("generation", DataType::Int64, false),
    ("last_end", DataType::Int64, true),
    ("window_start", DataType::Int64, true),
    ("window_end", DataType::Int64, false),
    ("snapshot", DataType::Bool, false),
    ("updated_at", DataType::UnixtimeMicros, false),
    ("last_end_sink_time", DataType::Int64, true),
];

/// Columns an older position table may lack (nullable; added by ALTER).
const ADDED_LATER: &[&str] = &["last_end_sink_time"];

/// The position table's schema: [`COLUMNS`], keyed by the first.
fn position_schema() -> Result<Schema, KuduError> {
    let columns = COLUMNS
        .iter()
        .enumerate()
        .map(|(i, &(name, kind, nullable))| column(name, kind, i == 0, nullable))
        .collect::<Result<Vec<_>, _>>()?;
    Schema::new(columns)
}

fn column(
    name: &str,
    kind: DataType,
    key: bool,
    nullable: bool,
) -> Result<ColumnSchema, KuduError> {
    ColumnSchema::builder(name, kind)
        .key(key)
        .nullable(nullable)
        .build()
}

/// The position table of one sink cluster.
#[derive(Debug, Clone)]
pub struct PositionTable {
    client: KuduClient,
    name: String,
    /// Set by [`PositionTable::prepare`].
    table: Option<KuduTable>,
    /// Appended to the sink table's name to key its record (a shard's
    /// part of a split table: `#shard-<k>`); empty otherwise.
    key_suffix: String,
}

impl PositionTable {
    /// The table `name` on the cluster of `client` (not opened yet).
    pub fn new(client: KuduClient, name: impl Into<String>) -> Self {
        PositionTable {
            client,
            name: name.into(),
            table: None,
            key_suffix: String::new(),
        }
    }

    /// Keys the records as shard `index`'s part of a sink table split over
    /// shards (`<sink table>#shard-<index>`).
    pub fn for_shard_part(&mut self, index: u32) {
        self.key_suffix = format!("#shard-{index}");
    }

    /// The key of `sink`'s record.
    fn key(&self, sink: &KuduTable) -> String {
        format!("{}{}", sink.name(), self.key_suffix)
    }

    /// Its name.
    pub fn name(&self) -> &str {
        &self.name
    }

    fn kudu(
        &self,
        call: Call,
        sink_table: Option<&str>,
    ) -> impl FnOnce(KuduError) -> PositionError + '_ {
        let sink_table = sink_table.map(str::to_owned);
        move |cause| PositionError::Kudu {
            table: self.name.clone(),
            sink_table,
            call,
            cause: Box::new(cause),
        }
    }

    /// Opens the table, creating it (one tablet, `replicas` replicas) if it
    /// does not exist, and checks its columns.
    pub async fn prepare(&mut self, replicas: i32) -> Result<(), PositionError> {
        let table = match self.client.open_table(&self.name).await {
            Ok(t) => t,
            Err(KuduError::TableNotFound(_)) => self.create(replicas).await?,
            Err(e) => return Err(self.kudu(Call::Open, None)(e)),
        };
        let table = self.add_missing_columns(table).await?;
        check_schema(&self.name, table.schema(), &[])?;
        self.table = Some(table);
        Ok(())
    }

    /// Adds the columns of [`ADDED_LATER`] an older table lacks (a table
    /// that is not a position table at all is refused by `check_schema`
    /// first, untouched).
    async fn add_missing_columns(&self, table: KuduTable) -> Result<KuduTable, PositionError> {
        check_schema(&self.name, table.schema(), ADDED_LATER)?;
        let missing: Vec<_> = COLUMNS
            .iter()
            .filter(|(name, ..)| {
                ADDED_LATER.contains(name) && table.schema().column_by_name(name).is_none()
            })
            .collect();
        if missing.is_empty() {
            return Ok(table);
        }
        let mut alter = AlterTableBuilder::new();
        for &&(name, kind, _) in &missing {
            alter = alter
                .add_column(column(name, kind, false, true).map_err(self.kudu(Call::Alter, None))?);
        }
        tracing::info!(table = %self.name, columns = ?missing.iter().map(|c| c.0).collect::<Vec<_>>(), "adding columns to an older position table");
        match self.client.alter_table(&table, &alter).await {
            Ok(()) => {}
            // Another job added them meanwhile.
            Err(KuduError::Status { status, .. }) if status.code == StatusCode::AlreadyPresent => {}
            Err(e) => return Err(self.kudu(Call::Alter, None)(e)),
        }
        self.client
            .open_table(&self.name)
            .await
            .map_err(self.kudu(Call::Open, None))
    }

    /// The position recorded for the sink table `sink_table` in the table
    /// `position_table` on the cluster of `client`, for readers that are not
    /// the job (`ferry verify`, `ferry failover --report`). Never creates or
    /// alters anything: `None` when the position table, the sink table or
    /// its record is missing (or the record is of a dropped table of that
    /// name).
    pub async fn lookup(
        client: &KuduClient,
        position_table: &str,
        sink_table: &str,
    ) -> Result<Option<SinkPosition>, PositionError> {
        let mut positions = PositionTable::new(client.clone(), position_table);
        let table = match client.open_table(position_table).await {
            Ok(t) => t,
            Err(KuduError::TableNotFound(_)) => return Ok(None),
            Err(e) => return Err(positions.kudu(Call::Open, None)(e)),
        };
        check_schema(position_table, table.schema(), ADDED_LATER)?;
        positions.table = Some(table);
        let sink = match client.open_table(sink_table).await {
            Ok(t) => t,
            Err(KuduError::TableNotFound(_)) => return Ok(None),
            Err(e) => return Err(positions.kudu(Call::Read, Some(sink_table))(e)),
        };
        positions.read(&sink).await
    }

    async fn create(&self, replicas: i32) -> Result<KuduTable, PositionError> {
        let schema = position_schema().map_err(self.kudu(Call::Create, None))?;
        let builder = TableBuilder::new(&self.name, schema)
            .set_range_partition_columns(&["sink_table"])
            .num_replicas(replicas)
            .comment("ferry: how far each sink table is (docs/semantics.md)");
        tracing::info!(table = %self.name, replicas, "creating the position table on the sink cluster");
        match self.client.create_table(&builder).await {
            Ok(_) => {}
            // Another job created it meanwhile.
            Err(KuduError::Status { status, .. }) if status.code == StatusCode::AlreadyPresent => {}
            Err(e) => return Err(self.kudu(Call::Create, None)(e)),
        }
        self.client
            .open_table(&self.name)
            .await
            .map_err(self.kudu(Call::Open, None))
    }

    fn opened(&self) -> Result<&KuduTable, PositionError> {
        // Only reachable if a sink skipped `prepare` (a bug); say so as a
        // missing table rather than panic.
        self.table.as_ref().ok_or_else(|| PositionError::Kudu {
            table: self.name.clone(),
            sink_table: None,
            call: Call::Open,
            cause: Box::new(KuduError::TableNotFound(self.name.clone())),
        })
    }

    /// Records `position` for `sink` (UPSERT, durable when this returns).
    pub async fn write(
        &self,
        sink: &KuduTable,
        position: &SinkPosition,
    ) -> Result<(), PositionError> {
        let table = self.opened()?;
        let row = self.encode(table, sink, position)?;
        let mut session = self
            .client
            .new_session_with(SessionOptions::default().flush_mode(FlushMode::AutoFlushSync))
            .map_err(self.kudu(Call::Write, Some(sink.name())))?;
        session
            .apply(Operation::upsert(table, row))
            .await
            .map_err(self.kudu(Call::Write, Some(sink.name())))?;
        session
            .flush()
            .await
            .map_err(self.kudu(Call::Write, Some(sink.name())))
    }

    fn encode(
        &self,
        table: &KuduTable,
        sink: &KuduTable,
        p: &SinkPosition,
    ) -> Result<Row, PositionError> {
        let int = |what: &'static str, v: u64| {
            i64::try_from(v).map_err(|_| PositionError::OutOfRange {
                table: self.name.clone(),
                what,
                value: v,
            })
        };
        let set = self.kudu(Call::Write, Some(sink.name()));
        let mut row = table.new_row();
        let filled: Result<(), KuduError> = (|| {
            row.set_str("sink_table", &self.key(sink))?
                .set_str("sink_table_id", sink.id())?
                .set_str("source_table", &p.source_table)?
                .set_str("job_id", &p.job_id)?
                .set_bool("snapshot", p.window.is_snapshot())?
                .set_timestamp_micros("updated_at", ferry_engine::time::now_micros())?;
            Ok(())
        })();
        filled.map_err(set)?;
        let ints = [
            ("generation", Some(int("generation", p.generation)?)),
            (
                "last_end",
                p.last_end.map(|t| int("last_end", t.raw())).transpose()?,
            ),
            (
                "window_start",
                p.window
                    .start_timestamp
                    .map(|t| int("window_start", t.raw()))
                    .transpose()?,
            ),
            (
                "window_end",
                Some(int("window_end", p.window.end_timestamp.raw())?),
            ),
            (
                "last_end_sink_time",
                p.last_end_sink_time
                    .map(|t| int("last_end_sink_time", t.raw()))
                    .transpose()?,
            ),
        ];
        for (column, value) in ints {
            let r = match value {
                Some(v) => row.set_i64(column, v).map(|_| ()),
                None => row.set_null(column).map(|_| ()),
            };
            r.map_err(self.kudu(Call::Write, Some(sink.name())))?;
        }
        Ok(row)
    }

    /// The position recorded for `sink`, if any. A record left by an
    /// earlier table of the same name (another table id) describes rows
    /// that are gone: it is ignored with a warning.
    pub async fn read(&self, sink: &KuduTable) -> Result<Option<SinkPosition>, PositionError> {
        let table = self.opened()?;
        let mut scanner = self
            .client
            .scan_builder(table)
            .predicate(Predicate::comparison(
                "sink_table",
                ComparisonOp::Equal,
                self.key(sink),
            ))
            .read_mode(ReadMode::Latest)
            .replica_selection(ReplicaSelection::LeaderOnly)
            .build()
            .map_err(self.kudu(Call::Read, Some(sink.name())))?;
        while let Some(batch) = scanner
            .next_batch()
            .await
            .map_err(self.kudu(Call::Read, Some(sink.name())))?
        {
            if let Some(row) = batch.rows().next() {
                let (id, position) = self.decode(table, sink.name(), &row)?;
                if id.as_deref().is_some_and(|id| id != sink.id()) {
                    tracing::warn!(
                        sink = sink.name(),
                        recorded_id = ?id,
                        id = sink.id(),
                        "ignoring the sink position of an earlier table of the same name"
                    );
                    return Ok(None);
                }
                return Ok(Some(position));
            }
        }
        Ok(None)
    }

    fn decode(
        &self,
        table: &KuduTable,
        sink_table: &str,
        row: &RowView<'_>,
    ) -> Result<(Option<String>, SinkPosition), PositionError> {
        let bad = |reason: String| PositionError::Record {
            table: self.name.clone(),
            sink_table: sink_table.to_owned(),
            reason,
        };
        let opt_int = |c: &str| -> Result<Option<u64>, PositionError> {
            if row.is_null(c).map_err(|e| bad(e.to_string()))? {
                return Ok(None);
            }
            let v = row.get_i64(c).map_err(|e| bad(e.to_string()))?;
            u64::try_from(v)
                .map(Some)
                .map_err(|_| bad(format!("{c} is negative ({v})")))
        };
        let int = |c: &str| opt_int(c)?.ok_or_else(|| bad(format!("{c} is NULL")));
        let text = |c: &str| {
            row.get_str(c)
                .map(str::to_owned)
                .map_err(|e| bad(e.to_string()))
        };
        let id = match row
            .is_null("sink_table_id")
            .map_err(|e| bad(e.to_string()))?
        {
            true => None,
            false => Some(text("sink_table_id")?),
        };
        let last_end = opt_int("last_end")?.map(SourceTime::from_raw);
        let window = WindowState {
            start_timestamp: opt_int("window_start")?.map(SourceTime::from_raw),
            end_timestamp: SourceTime::from_raw(int("window_end")?),
        };
        if window.start_timestamp != last_end
            || window
                .start_timestamp
                .is_some_and(|s| s >= window.end_timestamp)
        {
            return Err(bad(format!(
                "window [{:?}, {}) does not follow last_end {last_end:?}",
                window.start_timestamp, window.end_timestamp
            )));
        }
        // Missing in an older table that only a reader opened.
        let last_end_sink_time = match table.schema().column_by_name("last_end_sink_time") {
            Some(_) => opt_int("last_end_sink_time")?.map(SinkTime::from_raw),
            None => None,
        };
        let position = SinkPosition {
            source_table: text("source_table")?,
            job_id: text("job_id")?,
            generation: int("generation")?,
            last_end,
            window,
            last_end_sink_time,
        };
        Ok((id, position))
    }
}

/// Refuses a position table without the columns ferry writes (`optional`
/// ones may be missing, but not of another type).
fn check_schema(name: &str, schema: &Schema, optional: &[&str]) -> Result<(), PositionError> {
    for &(column, kind, _) in COLUMNS {
        let ok = match schema.column_by_name(column) {
            Some(c) => c.data_type() == kind,
            None => optional.contains(&column),
        };
        if !ok {
            return Err(PositionError::Schema {
                table: name.to_owned(),
                column,
                kind: type_name(kind),
            });
        }
    }
    Ok(())
}

fn type_name(kind: DataType) -> &'static str {
    match kind {
        DataType::String => "STRING",
        DataType::Int64 => "INT64",
        DataType::Bool => "BOOL",
        DataType::UnixtimeMicros => "UNIXTIME_MICROS",
        _ => "?",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_created_schema_passes_its_own_check() {
        let schema = position_schema().expect("schema");
        assert!(check_schema("p", &schema, &[]).is_ok());
        let short = Schema::new(vec![ColumnSchema::builder("sink_table", DataType::String)
            .key(true)
            .build()
            .expect("key")])
        .expect("schema");
        let e = check_schema("p", &short, ADDED_LATER).expect_err("missing columns");
        assert!(e.to_string().contains("sink_table_id"), "{e}");
    }
}
