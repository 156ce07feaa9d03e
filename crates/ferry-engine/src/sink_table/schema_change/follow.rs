//! [`follow`]: apply the source's schema changes to the sink table.
//!
//! Columns are matched by source column id between the applied record and
//! the source now; the sink (whose columns carry the source's names) is
//! then read to see what is already done, so the same call after a crash
//! adopts what a previous run changed. Column definitions (defaults,
//! storage attributes) come from the live source table, opened by id.

use super::{parse, ColumnDoc, SchemaChangeError, SchemaDoc};
use crate::connector::SchemaRecord;
use crate::error::EngineError;
use kudu_client::partition::RangePartition;
use kudu_client::{AlterTableBuilder, ColumnDelta, ColumnSchema, KuduClient};
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
    move |source| EngineError::Sink {
        table: table.to_owned(),
        source,
    }
}

fn source_err(table: &str) -> impl Fn(kudu_client::Error) -> EngineError + '_ {
    move |source| EngineError::Source {
        table: table.to_owned(),
        source,
    }
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

    if let Some(a) = &applied {
        if key_ids(a) != key_ids(&now) {
            let key: Vec<&str> = now
                .columns
                .iter()
                .filter(|c| c.key)
                .map(|c| c.name.as_str())
                .collect();
            return Err(SchemaChangeError::KeyChange {
                table,
                sink: sink_name,
                key: key.join(", "),
            }
            .into());
        }
    }

    let sink_schema = sink_table.schema();
    let src_schema = source_table.schema();
    let mut drops: Vec<String> = Vec::new();
    let mut renames: Vec<(String, String)> = Vec::new();
    let mut adds: Vec<ColumnSchema> = Vec::new();
    let mut deltas: Vec<ColumnDelta> = Vec::new();
    // Sink column names some source column maps to now.
    let mut claimed: HashSet<String> = HashSet::new();

    for col in &now.columns {
        let Some(src) = src_schema.columns().iter().find(|c| c.id() == Some(col.id)) else {
            // Dropped on the source since `now` was read: the next
            // follow sees it.
            continue;
        };
        let before = applied
            .as_ref()
            .and_then(|a| a.columns.iter().find(|c| c.id == col.id));
        match before {
            Some(prev) => {
                let on_sink = sink_schema
                    .column_by_name(&prev.name)
                    .filter(|_| {
                        prev.name == col.name || sink_schema.column_by_name(&col.name).is_none()
                    })
                    .or_else(|| sink_schema.column_by_name(&col.name));
                let Some(sink_col) = on_sink else {
                    return Err(SchemaChangeError::SinkColumnChanged {
                        table,
                        sink: sink_name,
                        column: prev.name.clone(),
                        what: "it is missing".into(),
                    }
                    .into());
                };
                if !same_shape(prev, sink_col) {
                    return Err(SchemaChangeError::SinkColumnChanged {
                        table,
                        sink: sink_name,
                        column: sink_col.name().to_owned(),
                        what: format!(
                            "it is {}, the source column was {}",
                            shape(&sink_col.type_display(), sink_col.is_nullable()),
                            shape(&prev.type_name, prev.nullable)
                        ),
                    }
                    .into());
                }
                if sink_col.name() != col.name {
                    renames.push((sink_col.name().to_owned(), col.name.clone()));
                }
                claimed.insert(sink_col.name().to_owned());
                deltas.extend(delta(&col.name, src, sink_col));
            }
            None => match sink_schema.column_by_name(&col.name) {
                Some(sink_col) if same_shape(col, sink_col) => {
                    // Added by an earlier run (or matched by name on a
                    // first start): adopt it.
                    claimed.insert(col.name.clone());
                    deltas.extend(delta(&col.name, src, sink_col));
                }
                Some(sink_col) => {
                    let earlier = applied
                        .as_ref()
                        .and_then(|a| a.columns.iter().find(|c| c.name == col.name));
                    let from =
                        earlier.map_or_else(|| sink_col.type_display(), |e| e.type_name.clone());
                    return Err(if from != col.type_name || applied.is_none() {
                        SchemaChangeError::TypeChange {
                            table,
                            sink: sink_name,
                            column: col.name.clone(),
                            from: shape(&from, sink_col.is_nullable()),
                            to: shape(&col.type_name, col.nullable),
                        }
                    } else {
                        SchemaChangeError::SinkColumnChanged {
                            table,
                            sink: sink_name,
                            column: col.name.clone(),
                            what: format!(
                                "it is {}, the source column is {}",
                                shape(&sink_col.type_display(), sink_col.is_nullable()),
                                shape(&col.type_name, col.nullable)
                            ),
                        }
                    }
                    .into());
                }
                None => {
                    claimed.insert(col.name.clone());
                    adds.push(src.to_non_key());
                }
            },
        }
    }
    if let Some(a) = &applied {
        for prev in &a.columns {
            let gone = !now.columns.iter().any(|c| c.id == prev.id);
            if gone
                && !claimed.contains(&prev.name)
                && sink_schema.column_by_name(&prev.name).is_some()
            {
                drops.push(prev.name.clone());
            }
        }
    }

    // Ranges: add what the source has and the sink lacks; drop what the
    // sink has, the applied source had and the source no longer has.
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
    let keys = |r: &RangePartition| (super::hex(&r.lower_key), super::hex(&r.upper_key));
    let on_sink: HashSet<(String, String)> = sink_ranges.iter().map(keys).collect();
    let in_now: HashSet<(String, String)> = now
        .ranges
        .iter()
        .map(|r| (r.lower.clone(), r.upper.clone()))
        .collect();
    let add_ranges: Vec<&RangePartition> = src_ranges
        .iter()
        .filter(|r| in_now.contains(&keys(r)) && !on_sink.contains(&keys(r)))
        .collect();
    let drop_ranges: Vec<&RangePartition> = match &applied {
        Some(a) => sink_ranges
            .iter()
            .filter(|r| {
                let k = keys(r);
                !in_now.contains(&k) && a.ranges.iter().any(|x| x.lower == k.0 && x.upper == k.1)
            })
            .collect(),
        None => Vec::new(),
    };
    let new_name = target
        .rename_with_suffix
        .map(|suffix| format!("{}{suffix}", now.table))
        .filter(|n| *n != sink_name);

    let columns_change =
        !(drops.is_empty() && renames.is_empty() && adds.is_empty() && deltas.is_empty());
    let ranges_change = !(add_ranges.is_empty() && drop_ranges.is_empty());
    if !columns_change && !ranges_change && new_name.is_none() {
        return Ok(FollowOutcome {
            changed: false,
            sink_name,
        });
    }
    crate::failpoint::hit("schema.before-sink-alter");

    if columns_change {
        let mut alter = AlterTableBuilder::new();
        for name in &drops {
            alter = alter.drop_column(name.clone());
        }
        for (old, new) in &renames {
            alter = alter.rename_column(old.clone(), new.clone());
        }
        for col in adds {
            alter = alter.add_column(col);
        }
        for d in deltas {
            alter = alter.alter_column(d);
        }
        tracing::info!(table = %table, sink = %sink_name, ?drops, ?renames, "following source schema change on the sink");
        target
            .sink
            .alter_table(&sink_table, &alter)
            .await
            .map_err(sink_err(&sink_name))?;
    }
    if ranges_change {
        let mut alter = AlterTableBuilder::new();
        for r in &drop_ranges {
            alter = alter
                .drop_range_like(&sink_table, r)
                .map_err(sink_err(&sink_name))?;
        }
        for r in &add_ranges {
            alter = alter
                .add_range_like(&sink_table, r)
                .map_err(sink_err(&sink_name))?;
        }
        tracing::info!(table = %table, sink = %sink_name, added = add_ranges.len(), dropped = drop_ranges.len(), "following source range partitions on the sink");
        target
            .sink
            .alter_table(&sink_table, &alter)
            .await
            .map_err(sink_err(&sink_name))?;
    }
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
