//! [`follow`]: apply the source's schema changes to the sink table.
//!
//! Columns are matched by source column id between the applied record and
//! the source now; the sink (whose columns carry the source's names) is
//! then read to see what is already done, so the same call after a crash
//! adopts what a previous run changed. Column definitions (defaults,
//! storage attributes) come from the live source table, opened by id.

use super::{parse, ColumnDoc, SchemaChangeError, SchemaDoc};
use ferry_engine::connector::SchemaRecord;
use ferry_engine::EngineError;
use kudu_client::partition::RangePartition;
use kudu_client::{AlterTableBuilder, ColumnDelta, ColumnSchema, KuduClient, KuduTable, Schema};
use std::collections::HashSet;

/// Where the sink is and what may be done to it.
pub struct FollowTarget<'a> {
    /// The sink cluster.
    pub sink: &'a KuduClient,
    /// The source cluster (column definitions and ranges are read there).
    pub source: &'a KuduClient,
    /// The sink table's name (used when `sink_id` is unknown).
    pub sink_name: &'a str,
    /// The sink table's id, when known (it is followed across renames).
    pub sink_id: Option<&'a str>,
    /// `job.renameSinkTable`: the suffix kept when the sink table follows
    /// a source rename (`None`: the sink keeps its name).
    pub rename_with_suffix: Option<&'a str>,
}

/// What [`follow`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FollowOutcome {
    /// Whether the sink table changed.
    pub changed: bool,
    /// The sink table's name afterwards.
    pub sink_name: String,
}

fn sink_err(table: &str) -> impl Fn(kudu_client::Error) -> EngineError + '_ {
    move |source| crate::error::sink_error(table, source)
}

fn source_err(table: &str) -> impl Fn(kudu_client::Error) -> EngineError + '_ {
    move |source| crate::error::source_error(table, source)
}

fn key_ids(doc: &SchemaDoc) -> Vec<u32> {
    doc.columns.iter().filter(|c| c.key).map(|c| c.id).collect()
}

/// The attribute changes that make sink column `sink` like source column
/// `src` (named `name` on the sink after renames); `None`: nothing to do.
fn delta(name: &str, src: &ColumnSchema, sink: &ColumnSchema) -> Option<ColumnDelta> {
    let mut d = ColumnDelta::new(name);
    if src.default_value() != sink.default_value() {
        d = match src.default_value() {
            Some(v) => d.default_value(v.clone()),
            None => d.remove_default(),
        };
    }
    if src.encoding() != sink.encoding() {
        d = d.encoding(src.encoding());
    }
    if src.compression() != sink.compression() {
        d = d.compression(src.compression());
    }
    if let Some(size) = src.block_size().filter(|s| Some(*s) != sink.block_size()) {
        d = d.block_size(size);
    }
    if src.comment().unwrap_or("") != sink.comment().unwrap_or("") {
        d = d.comment(src.comment().unwrap_or(""));
    }
    if src.is_immutable() != sink.is_immutable() {
        d = d.immutable(src.is_immutable());
    }
    (!d.is_empty()).then_some(d)
}

fn same_shape(doc: &ColumnDoc, sink: &ColumnSchema) -> bool {
    doc.type_name == sink.type_display() && doc.nullable == sink.is_nullable()
}

fn shape(doc_type: &str, nullable: bool) -> String {
    format!("{doc_type}{}", if nullable { " NULL" } else { " NOT NULL" })
}

/// The names a [`SchemaChangeError`] gives: the source table and the sink
/// table.
struct Names<'a> {
    table: &'a str,
    sink: &'a str,
}

/// The column changes the sink needs.
#[derive(Default)]
struct ColumnPlan {
    drops: Vec<String>,
    renames: Vec<(String, String)>,
    adds: Vec<ColumnSchema>,
    deltas: Vec<ColumnDelta>,
    /// Sink column names some source column maps to now.
    claimed: HashSet<String>,
}

impl ColumnPlan {
    fn is_empty(&self) -> bool {
        self.drops.is_empty()
            && self.renames.is_empty()
            && self.adds.is_empty()
            && self.deltas.is_empty()
    }

    /// Source column `col`, known as `prev` in the applied record: find it
    /// on the sink (renamed or not) and follow its rename and attributes.
    fn keep(
        &mut self,
        names: &Names<'_>,
        prev: &ColumnDoc,
        col: &ColumnDoc,
        src: &ColumnSchema,
        sink_schema: &Schema,
    ) -> Result<(), SchemaChangeError> {
        let on_sink = sink_schema
            .column_by_name(&prev.name)
            .filter(|_| prev.name == col.name || sink_schema.column_by_name(&col.name).is_none())
            .or_else(|| sink_schema.column_by_name(&col.name));
        let Some(sink_col) = on_sink else {
            return Err(SchemaChangeError::SinkColumnChanged {
                table: names.table.to_owned(),
                sink: names.sink.to_owned(),
                column: prev.name.clone(),
                what: "it is missing".into(),
            });
        };
        if !same_shape(prev, sink_col) {
            return Err(SchemaChangeError::SinkColumnChanged {
                table: names.table.to_owned(),
                sink: names.sink.to_owned(),
                column: sink_col.name().to_owned(),
                what: format!(
                    "it is {}, the source column was {}",
                    shape(&sink_col.type_display(), sink_col.is_nullable()),
                    shape(&prev.type_name, prev.nullable)
                ),
            });
        }
        if sink_col.name() != col.name {
            self.renames
                .push((sink_col.name().to_owned(), col.name.clone()));
        }
        self.claimed.insert(sink_col.name().to_owned());
        self.deltas.extend(delta(&col.name, src, sink_col));
        Ok(())
    }

    /// Source column `col`, not in the applied record: adopt a sink
    /// column of that name and shape (added by an earlier run, or matched
    /// by name on a first start), or add it.
    fn add(
        &mut self,
        names: &Names<'_>,
        applied: Option<&SchemaDoc>,
        col: &ColumnDoc,
        src: &ColumnSchema,
        sink_schema: &Schema,
    ) -> Result<(), SchemaChangeError> {
        let Some(sink_col) = sink_schema.column_by_name(&col.name) else {
            self.claimed.insert(col.name.clone());
            self.adds.push(src.to_non_key());
            return Ok(());
        };
        if same_shape(col, sink_col) {
            self.claimed.insert(col.name.clone());
            self.deltas.extend(delta(&col.name, src, sink_col));
            return Ok(());
        }
        let earlier = applied.and_then(|a| a.columns.iter().find(|c| c.name == col.name));
        let from = earlier.map_or_else(|| sink_col.type_display(), |e| e.type_name.clone());
        Err(if from != col.type_name || applied.is_none() {
            SchemaChangeError::TypeChange {
                table: names.table.to_owned(),
                sink: names.sink.to_owned(),
                column: col.name.clone(),
                from: shape(&from, sink_col.is_nullable()),
                to: shape(&col.type_name, col.nullable),
            }
        } else {
            SchemaChangeError::SinkColumnChanged {
                table: names.table.to_owned(),
                sink: names.sink.to_owned(),
                column: col.name.clone(),
                what: format!(
                    "it is {}, the source column is {}",
                    shape(&sink_col.type_display(), sink_col.is_nullable()),
                    shape(&col.type_name, col.nullable)
                ),
            }
        })
    }
}

/// A key change cannot be followed.
fn check_key(
    names: &Names<'_>,
    applied: Option<&SchemaDoc>,
    now: &SchemaDoc,
) -> Result<(), SchemaChangeError> {
    match applied {
        Some(a) if key_ids(a) != key_ids(now) => {
            let key: Vec<&str> = now
                .columns
                .iter()
                .filter(|c| c.key)
                .map(|c| c.name.as_str())
                .collect();
            Err(SchemaChangeError::KeyChange {
                table: names.table.to_owned(),
                sink: names.sink.to_owned(),
                key: key.join(", "),
            })
        }
        _ => Ok(()),
    }
}

/// What the sink's columns need to match `now`, given `applied`.
fn plan_columns(
    names: &Names<'_>,
    applied: Option<&SchemaDoc>,
    now: &SchemaDoc,
    src_schema: &Schema,
    sink_schema: &Schema,
) -> Result<ColumnPlan, SchemaChangeError> {
    let mut plan = ColumnPlan::default();
    for col in &now.columns {
        let Some(src) = src_schema.columns().iter().find(|c| c.id() == Some(col.id)) else {
            // Dropped on the source since `now` was read: the next
            // follow sees it.
            continue;
        };
        match applied.and_then(|a| a.columns.iter().find(|c| c.id == col.id)) {
            Some(prev) => plan.keep(names, prev, col, src, sink_schema)?,
            None => plan.add(names, applied, col, src, sink_schema)?,
        }
    }
    if let Some(a) = applied {
        for prev in &a.columns {
            let gone = !now.columns.iter().any(|c| c.id == prev.id);
            if gone
                && !plan.claimed.contains(&prev.name)
                && sink_schema.column_by_name(&prev.name).is_some()
            {
                plan.drops.push(prev.name.clone());
            }
        }
    }
    Ok(plan)
}

/// The range partitions to add to the sink and to drop from it.
struct RangePlan<'r> {
    add: Vec<&'r RangePartition>,
    drop: Vec<&'r RangePartition>,
}

/// Ranges: add what the source has and the sink lacks; drop what the sink
/// has, the applied source had and the source no longer has.
fn plan_ranges<'r>(
    applied: Option<&SchemaDoc>,
    now: &SchemaDoc,
    sink_ranges: &'r [RangePartition],
    src_ranges: &'r [RangePartition],
) -> RangePlan<'r> {
    let keys = |r: &RangePartition| (super::hex(&r.lower_key), super::hex(&r.upper_key));
    let on_sink: HashSet<(String, String)> = sink_ranges.iter().map(keys).collect();
    let in_now: HashSet<(String, String)> = now
        .ranges
        .iter()
        .map(|r| (r.lower.clone(), r.upper.clone()))
        .collect();
    let add = src_ranges
        .iter()
        .filter(|r| in_now.contains(&keys(r)) && !on_sink.contains(&keys(r)))
        .collect();
    let drop = match applied {
        Some(a) => sink_ranges
            .iter()
            .filter(|r| {
                let k = keys(r);
                !in_now.contains(&k) && a.ranges.iter().any(|x| x.lower == k.0 && x.upper == k.1)
            })
            .collect(),
        None => Vec::new(),
    };
    RangePlan { add, drop }
}

/// Brings the sink table in line with the source schema `now`, given the
/// one applied last (`None`: columns are matched by name). Idempotent.
pub async fn follow(
    target: FollowTarget<'_>,
    applied: Option<&SchemaRecord>,
    now: &SchemaRecord,
) -> Result<FollowOutcome, EngineError> {
    let now = parse(now, target.sink_name)?;
    let applied = applied.map(|a| parse(a, &now.table)).transpose()?;
    let source_table = if now.id.is_empty() {
        target.source.open_table(&now.table).await
    } else {
        target.source.open_table_by_id(&now.id).await
    }
    .map_err(source_err(&now.table))?;
    let sink_table = match target.sink_id {
        Some(id) => target.sink.open_table_by_id(id).await,
        None => target.sink.open_table(target.sink_name).await,
    }
    .map_err(sink_err(target.sink_name))?;
    let sink_name = sink_table.name().to_owned();
    let table = now.table.clone();
    let names = Names {
        table: &table,
        sink: &sink_name,
    };
    check_key(&names, applied.as_ref(), &now)?;
    let columns = plan_columns(
        &names,
        applied.as_ref(),
        &now,
        source_table.schema(),
        sink_table.schema(),
    )?;
    let sink_ranges = target
        .sink
        .range_partitions(&sink_table)
        .await
        .map_err(sink_err(&sink_name))?;
    let src_ranges = target
        .source
        .range_partitions(&source_table)
        .await
        .map_err(source_err(&table))?;
    let ranges = plan_ranges(applied.as_ref(), &now, &sink_ranges, &src_ranges);
    let new_name = target
        .rename_with_suffix
        .map(|suffix| format!("{}{suffix}", now.table))
        .filter(|n| *n != sink_name);
    if columns.is_empty() && ranges.add.is_empty() && ranges.drop.is_empty() && new_name.is_none() {
        return Ok(FollowOutcome {
            changed: false,
            sink_name,
        });
    }
    check_features(&target, &names, &source_table, &columns).await?;
    ferry_engine::failpoint::hit("schema.before-sink-alter");
    apply(&target, &sink_table, &names, columns, &ranges).await?;
    let mut final_name = sink_name.clone();
    if let Some(name) = new_name {
        tracing::info!(table = %table, sink = %sink_name, new = %name, "renaming the sink table after the source (job.renameSinkTable)");
        target
            .sink
            .rename_table(&sink_table, &name)
            .await
            .map_err(sink_err(&sink_name))?;
        final_name = name;
    }
    Ok(FollowOutcome {
        changed: true,
        sink_name: final_name,
    })
}

/// A column change can give the table its first immutable column: the
/// sink servers must have what the source table needs now, before the
/// ALTER.
async fn check_features(
    target: &FollowTarget<'_>,
    names: &Names<'_>,
    source_table: &KuduTable,
    columns: &ColumnPlan,
) -> Result<(), EngineError> {
    if columns.adds.is_empty() && columns.deltas.is_empty() {
        return Ok(());
    }
    let schema = source_table.schema();
    crate::sink_table::check_sink_features(target.sink, names.table, schema, names.sink).await?;
    Ok(())
}

/// Alters the sink table: its columns, then its ranges.
async fn apply(
    target: &FollowTarget<'_>,
    sink_table: &KuduTable,
    names: &Names<'_>,
    columns: ColumnPlan,
    ranges: &RangePlan<'_>,
) -> Result<(), EngineError> {
    let (table, sink_name) = (names.table, names.sink);
    if !columns.is_empty() {
        let mut alter = AlterTableBuilder::new();
        for name in &columns.drops {
            alter = alter.drop_column(name.clone());
        }
        for (old, new) in &columns.renames {
            alter = alter.rename_column(old.clone(), new.clone());
        }
        for col in columns.adds {
            alter = alter.add_column(col);
        }
        for d in columns.deltas {
            alter = alter.alter_column(d);
        }
        let (drops, renames) = (&columns.drops, &columns.renames);
        tracing::info!(table = %table, sink = %sink_name, ?drops, ?renames, "following source schema change on the sink");
        target
            .sink
            .alter_table(sink_table, &alter)
            .await
            .map_err(sink_err(sink_name))?;
    }
    if !(ranges.add.is_empty() && ranges.drop.is_empty()) {
        let mut alter = AlterTableBuilder::new();
        for r in &ranges.drop {
            alter = alter
                .drop_range_like(sink_table, r)
                .map_err(sink_err(sink_name))?;
        }
        for r in &ranges.add {
            alter = alter
                .add_range_like(sink_table, r)
                .map_err(sink_err(sink_name))?;
        }
        tracing::info!(table = %table, sink = %sink_name, added = ranges.add.len(), dropped = ranges.drop.len(), "following source range partitions on the sink");
        target
            .sink
            .alter_table(sink_table, &alter)
            .await
            .map_err(sink_err(sink_name))?;
    }
    Ok(())
}
