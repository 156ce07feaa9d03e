//! [`CutsTable`]: the cuts table of one sink cluster. A small table of
//! ferry's own (one tablet, the sink table's replication factor), created
//! when a job prepares its sink, like the position table. One row per
//! cut, written with UPSERT; rows older than `job.cutsRetention` (in
//! source time, from the newest cut) are deleted at most every
//! [`PRUNE_EVERY`]. Readers never create anything: a missing table reads
//! as no cut.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::CutsError;
use ferry_engine::sink_position::Cut;
use ferry_engine::time::{SinkTime, SourceTime};
use kudu_client::error::StatusCode;
use kudu_client::scan::{ComparisonOp, Predicate, ReadMode, ReplicaSelection, RowView};
use kudu_client::write::{FlushMode, Operation, SessionOptions};
use kudu_client::{ColumnSchema, DataType, Error as KuduError};
use kudu_client::{KuduClient, KuduTable, Schema, TableBuilder};

/// `job.cutsTable`'s default.
pub const DEFAULT_CUTS_TABLE: &str = "ferry_cuts";

/// How often old cuts are pruned (one scan of the job's old keys).
const PRUNE_EVERY: Duration = Duration::from_secs(600);

/// The columns: (name, type, key). None is nullable.
const COLUMNS: &[(&str, DataType, bool)] = &[
    ("job_id", DataType::String, true),
    ("source_time", DataType::Int64, true),
    ("sink_time", DataType::Int64, false),
    ("tables", DataType::String, false),
    ("generation", DataType::Int64, false),
    ("written_at", DataType::UnixtimeMicros, false),
];

/// Deletes sent per flush while pruning.
const DELETE_BATCH: usize = 1000;

/// A hybrid time's physical part is microseconds shifted by this.
const LOGICAL_BITS: u32 = 12;

/// One published cut, as read back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CutRecord {
    /// The job that published it.
    pub job_id: String,
    /// The source instant every listed table reflects.
    pub source_time: SourceTime,
    /// The sink hybrid time at which they reflect it.
    pub sink_time: SinkTime,
    /// The sink tables the cut covers.
    pub tables: Vec<String>,
    /// The writer's generation.
    pub generation: u64,
    /// When it was written (epoch microseconds, the writer's clock).
    pub written_at_micros: i64,
}

/// The cuts table of one sink cluster.
#[derive(Debug, Clone)]
pub struct CutsTable {
    client: KuduClient,
    name: String,
    retention: Duration,
    /// Set by [`CutsTable::prepare`] (writers) or [`CutsTable::open`].
    table: Option<KuduTable>,
    /// When this writer last pruned.
    pruned: Arc<Mutex<Option<Instant>>>,
}

impl CutsTable {
    /// The table `name` on the cluster of `client`, keeping cuts for
    /// `retention` (not opened yet).
    pub fn new(client: KuduClient, name: impl Into<String>, retention: Duration) -> Self {
        CutsTable {
            client,
            name: name.into(),
            retention,
            table: None,
            pruned: Arc::default(),
        }
    }

    /// Its name.
    pub fn name(&self) -> &str {
        &self.name
    }

    fn kudu(&self, what: &'static str) -> impl FnOnce(KuduError) -> CutsError + '_ {
        move |cause| CutsError::Kudu {
            table: self.name.clone(),
            what,
            cause: Box::new(cause),
        }
    }

    /// Opens the table, creating it (one tablet, `replicas` replicas) if
    /// it does not exist, and checks its columns.
    pub async fn prepare(&mut self, replicas: i32) -> Result<(), CutsError> {
        let table = match self.client.open_table(&self.name).await {
            Ok(t) => t,
            Err(KuduError::TableNotFound(_)) => self.create(replicas).await?,
            Err(e) => return Err(self.kudu("opening")(e)),
        };
        check_schema(&self.name, table.schema())?;
        self.table = Some(table);
        Ok(())
    }

    /// The cuts table `name` on the cluster of `client`, for readers:
    /// `None` when it does not exist. Never creates anything.
    pub async fn open(client: &KuduClient, name: &str) -> Result<Option<CutsTable>, CutsError> {
        let mut cuts = CutsTable::new(client.clone(), name, Duration::MAX);
        match client.open_table(name).await {
            Ok(t) => {
                check_schema(name, t.schema())?;
                cuts.table = Some(t);
                Ok(Some(cuts))
            }
            Err(KuduError::TableNotFound(_)) => Ok(None),
            Err(e) => Err(cuts.kudu("opening")(e)),
        }
    }

    async fn create(&self, replicas: i32) -> Result<KuduTable, CutsError> {
        let columns = COLUMNS
            .iter()
            .map(|&(name, kind, key)| ColumnSchema::builder(name, kind).key(key).build())
            .collect::<Result<Vec<_>, _>>()
            .and_then(Schema::new)
            .map_err(self.kudu("creating"))?;
        let builder = TableBuilder::new(&self.name, columns)
            .set_range_partition_columns(&["job_id", "source_time"])
            .num_replicas(replicas)
            .comment("ferry: consistent cuts of each job's sink tables (docs/dr.md)");
        tracing::info!(table = %self.name, replicas, "creating the cuts table on the sink cluster");
        match self.client.create_table(&builder).await {
            Ok(_) => {}
            // Another job created it meanwhile.
            Err(KuduError::Status { status, .. }) if status.code == StatusCode::AlreadyPresent => {}
            Err(e) => return Err(self.kudu("creating")(e)),
        }
        self.client
            .open_table(&self.name)
            .await
            .map_err(self.kudu("opening"))
    }

    fn opened(&self) -> Result<&KuduTable, CutsError> {
        // Only reachable if a sink skipped `prepare` (a bug): a missing
        // table, not a panic.
        self.table.as_ref().ok_or_else(|| CutsError::Kudu {
            table: self.name.clone(),
            what: "using",
            cause: Box::new(KuduError::TableNotFound(self.name.clone())),
        })
    }

    /// Publishes `cut` (UPSERT, durable when this returns), then prunes
    /// the job's cuts past the retention if it is time to. A failed prune
    /// is logged: the cut is written.
    pub async fn write(&self, cut: &Cut) -> Result<(), CutsError> {
        let table = self.opened()?;
        let int = |what: &'static str, v: u64| {
            i64::try_from(v).map_err(|_| CutsError::OutOfRange {
                table: self.name.clone(),
                what,
                value: v,
            })
        };
        let source_time = int("source_time", cut.source_time.raw())?;
        let sink_time = int("sink_time", cut.sink_time.raw())?;
        let generation = int("generation", cut.generation)?;
        // A list of strings always serializes.
        let tables = serde_json::to_string(&cut.tables).unwrap_or_else(|_| "[]".to_owned());
        let mut row = table.new_row();
        let filled: Result<(), KuduError> = (|| {
            row.set_str("job_id", &cut.job_id)?
                .set_i64("source_time", source_time)?
                .set_i64("sink_time", sink_time)?
                .set_str("tables", &tables)?
                .set_i64("generation", generation)?
                .set_timestamp_micros("written_at", ferry_engine::time::now_micros())?;
            Ok(())
        })();
        filled.map_err(self.kudu("writing to"))?;
        let mut session = self
            .client
            .new_session_with(SessionOptions::default().flush_mode(FlushMode::AutoFlushSync))
            .map_err(self.kudu("writing to"))?;
        session
            .apply(Operation::upsert(table, row))
            .await
            .map_err(self.kudu("writing to"))?;
        session.flush().await.map_err(self.kudu("writing to"))?;
        if self.prune_due() {
            if let Err(e) = self.prune(&cut.job_id, cut.source_time).await {
                tracing::warn!(error = %e, "pruning old cuts failed; tried again later");
            }
        }
        Ok(())
    }

    /// Whether this writer should prune now (and notes that it does).
    fn prune_due(&self) -> bool {
        let Ok(mut last) = self.pruned.lock() else {
            return false;
        };
        let due = last.is_none_or(|at| at.elapsed() >= PRUNE_EVERY);
        if due {
            *last = Some(Instant::now());
        }
        due
    }

    /// Deletes the cuts of `job_id` older than the retention before
    /// `newest`. Returns how many.
    pub async fn prune(&self, job_id: &str, newest: SourceTime) -> Result<usize, CutsError> {
        let table = self.opened()?;
        let micros = u64::try_from(self.retention.as_micros()).unwrap_or(u64::MAX);
        let Some(cutoff) = newest
            .raw()
            .checked_sub(micros.saturating_mul(1 << LOGICAL_BITS))
        else {
            return Ok(0);
        };
        let cutoff = i64::try_from(cutoff).unwrap_or(i64::MAX);
        let keys = self
            .scan(
                job_id,
                &[(ComparisonOp::Less, cutoff)],
                &["job_id", "source_time"],
            )
            .await?;
        let mut session = self
            .client
            .new_session_with(SessionOptions::default().flush_mode(FlushMode::ManualFlush))
            .map_err(self.kudu("pruning"))?;
        for chunk in keys.chunks(DELETE_BATCH) {
            for &source_time in chunk {
                let mut row = table.new_row();
                row.set_str("job_id", job_id)
                    .and_then(|r| r.set_i64("source_time", source_time))
                    .map_err(self.kudu("pruning"))?;
                session
                    .apply(Operation::delete(table, row))
                    .await
                    .map_err(self.kudu("pruning"))?;
            }
            session.flush().await.map_err(self.kudu("pruning"))?;
        }
        if !keys.is_empty() {
            tracing::debug!(table = %self.name, job_id, deleted = keys.len(), "old cuts pruned");
        }
        Ok(keys.len())
    }

    /// The `source_time` of every cut of `job_id` within `bounds`.
    async fn scan(
        &self,
        job_id: &str,
        bounds: &[(ComparisonOp, i64)],
        columns: &[&str],
    ) -> Result<Vec<i64>, CutsError> {
        Ok(self
            .rows(job_id, bounds, columns)
            .await?
            .into_iter()
            .map(|r| r.0)
            .collect())
    }

    /// Rows of `job_id` within `bounds` on `source_time`: (source_time,
    /// the row decoded if every column was read).
    async fn rows(
        &self,
        job_id: &str,
        bounds: &[(ComparisonOp, i64)],
        columns: &[&str],
    ) -> Result<Vec<(i64, Option<CutRecord>)>, CutsError> {
        let table = self.opened()?;
        let mut builder = self
            .client
            .scan_builder(table)
            .projection(columns)
            .predicate(Predicate::comparison(
                "job_id",
                ComparisonOp::Equal,
                job_id.to_owned(),
            ))
            .read_mode(ReadMode::Latest)
            .replica_selection(ReplicaSelection::LeaderOnly);
        for &(op, value) in bounds {
            builder = builder.predicate(Predicate::comparison("source_time", op, value));
        }
        let mut scanner = builder.build().map_err(self.kudu("reading"))?;
        let whole = columns.len() == COLUMNS.len();
        let mut out = Vec::new();
        while let Some(batch) = scanner.next_batch().await.map_err(self.kudu("reading"))? {
            for row in batch.rows() {
                let t = row
                    .get_i64("source_time")
                    .map_err(|e| self.bad(job_id, e.to_string()))?;
                let record = whole.then(|| self.decode(job_id, &row)).transpose()?;
                out.push((t, record));
            }
        }
        Ok(out)
    }

    fn bad(&self, job_id: &str, reason: String) -> CutsError {
        CutsError::Record {
            table: self.name.clone(),
            job_id: job_id.to_owned(),
            reason,
        }
    }

    fn decode(&self, job_id: &str, row: &RowView<'_>) -> Result<CutRecord, CutsError> {
        let bad = |r: String| self.bad(job_id, r);
        let uint = |c: &str| -> Result<u64, CutsError> {
            let v = row.get_i64(c).map_err(|e| bad(e.to_string()))?;
            u64::try_from(v).map_err(|_| bad(format!("{c} is negative ({v})")))
        };
        let tables = row.get_str("tables").map_err(|e| bad(e.to_string()))?;
        let tables: Vec<String> = serde_json::from_str(tables)
            .map_err(|e| bad(format!("tables is not a JSON list of names: {e}")))?;
        Ok(CutRecord {
            job_id: row
                .get_str("job_id")
                .map_err(|e| bad(e.to_string()))?
                .to_owned(),
            source_time: SourceTime::from_raw(uint("source_time")?),
            sink_time: SinkTime::from_raw(uint("sink_time")?),
            tables,
            generation: uint("generation")?,
            written_at_micros: row
                .get_timestamp_micros("written_at")
                .map_err(|e| bad(e.to_string()))?,
        })
    }

    /// The newest cut of `job_id`, if any.
    pub async fn newest(&self, job_id: &str) -> Result<Option<CutRecord>, CutsError> {
        let now = ferry_engine::time::now_micros().max(0).unsigned_abs() << LOGICAL_BITS;
        self.newest_below(job_id, None, now).await
    }

    /// The newest cut of `job_id` whose source instant is at or before
    /// `source_time`, if any (for a read "as of" an earlier time).
    pub async fn at_or_before(
        &self,
        job_id: &str,
        source_time: SourceTime,
    ) -> Result<Option<CutRecord>, CutsError> {
        let upper = i64::try_from(source_time.raw()).unwrap_or(i64::MAX);
        self.newest_below(job_id, Some(upper), source_time.raw())
            .await
    }

    /// Every cut of `job_id`, oldest first.
    pub async fn all(&self, job_id: &str) -> Result<Vec<CutRecord>, CutsError> {
        let mut rows: Vec<CutRecord> = self
            .rows(job_id, &[], &column_names())
            .await?
            .into_iter()
            .filter_map(|r| r.1)
            .collect();
        rows.sort_by_key(|r| r.source_time);
        Ok(rows)
    }

    /// The newest cut at or below `upper`, looked for in ever wider spans
    /// back from `near` (a hybrid time close to the answer), so the usual
    /// case reads a minute's rows, not the whole retention.
    async fn newest_below(
        &self,
        job_id: &str,
        upper: Option<i64>,
        near: u64,
    ) -> Result<Option<CutRecord>, CutsError> {
        let spans = [Some(60u64), Some(3_600), Some(86_400), None];
        for span in spans {
            let mut bounds: Vec<(ComparisonOp, i64)> = Vec::new();
            if let Some(u) = upper {
                bounds.push((ComparisonOp::LessEqual, u));
            }
            if let Some(s) = span {
                let back = (s * 1_000_000) << LOGICAL_BITS;
                let lower = near.saturating_sub(back);
                bounds.push((
                    ComparisonOp::GreaterEqual,
                    i64::try_from(lower).unwrap_or(i64::MAX),
                ));
            }
            let newest = self
                .rows(job_id, &bounds, &column_names())
                .await?
                .into_iter()
                .filter_map(|r| r.1)
                .max_by_key(|r| r.source_time);
            if newest.is_some() {
                return Ok(newest);
            }
        }
        Ok(None)
    }
}

fn column_names() -> Vec<&'static str> {
    COLUMNS.iter().map(|c| c.0).collect()
}

/// Refuses a cuts table without the columns ferry writes.
fn check_schema(name: &str, schema: &Schema) -> Result<(), CutsError> {
    for &(column, kind, _) in COLUMNS {
        if schema.column_by_name(column).map(|c| c.data_type()) != Some(kind) {
            return Err(CutsError::Schema {
                table: name.to_owned(),
                column,
                kind: match kind {
                    DataType::String => "STRING",
                    DataType::Int64 => "INT64",
                    _ => "UNIXTIME_MICROS",
                },
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_created_schema_passes_its_own_check() {
        let columns = COLUMNS
            .iter()
            .map(|&(name, kind, key)| ColumnSchema::builder(name, kind).key(key).build())
            .collect::<Result<Vec<_>, _>>()
            .expect("columns");
        let schema = Schema::new(columns).expect("schema");
        assert!(check_schema("c", &schema).is_ok());
        let short = Schema::new(vec![ColumnSchema::builder("job_id", DataType::String)
            .key(true)
            .build()
            .expect("key")])
        .expect("schema");
        let e = check_schema("c", &short).expect_err("missing columns");
        assert!(e.to_string().contains("source_time"), "{e}");
        assert!(e.to_string().contains("job.cutsTable"), "{e}");
    }
}
