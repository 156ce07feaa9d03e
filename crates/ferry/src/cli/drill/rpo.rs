//! The drill's RPO section: per sink table, how far behind the source it
//! is now — the source cluster's clock now minus the end of the table's
//! last replicated window (its sink position's `last_end`). That is what
//! an unplanned failover right now would lose of that table.

use super::report::mark;
use super::Ctx;
use crate::cli::failover::report::utc;
use crate::cli::failover::to::{Cut, TablePosition};
use ferry_engine::config::JobConfig;
use ferry_engine::{SinkTime, SourceTime};
use ferry_kudu::position::PositionTable;
use std::fmt;
use std::time::Duration;

/// How long a cluster may take to answer one of the drill's reads.
pub(super) const CLUSTER_TIMEOUT: Duration = Duration::from_secs(30);

/// A source table and its sink table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TablePair {
    /// The source table.
    pub source: String,
    /// The sink table.
    pub sink: String,
}

/// The job's tables: `job.tableName`'s names with `job.tableSuffix` (or
/// `job.sinkTableName` for one table). A `job.tablePattern` is refused:
/// name the tables.
pub fn table_pairs(cfg: &JobConfig) -> Result<Vec<TablePair>, String> {
    if let Some(p) = &cfg.tables.pattern {
        return Err(format!(
            "the job selects its tables by job.tablePattern '{p}': name the tables to drill with --job.tableName a,b,c"
        ));
    }
    if cfg.tables.is_single() {
        return Ok(vec![TablePair {
            source: cfg.table_name.clone(),
            sink: cfg.sink_table_name(),
        }]);
    }
    Ok(cfg
        .tables
        .names
        .iter()
        .map(|n| TablePair {
            source: n.clone(),
            sink: format!("{n}{}", cfg.table_suffix),
        })
        .collect())
}

/// One table's RPO.
#[derive(Debug, Clone, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TableRpo {
    /// The sink table.
    pub table: String,
    /// The job that wrote its position.
    pub job_id: Option<String>,
    /// The end of its last replicated window (source hybrid time, raw).
    pub last_end: Option<SourceTime>,
    /// The same in UTC.
    pub last_end_utc: Option<String>,
    /// The sink time at which it held exactly the windows up to
    /// `last_end`.
    pub last_end_sink_time: Option<SinkTime>,
    /// The source's clock now minus `last_end`, in seconds.
    pub rpo_seconds: Option<f64>,
    /// Whether it is within `--max-rpo`.
    pub ok: bool,
    /// Why not (no position, no completed window, over the limit).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub problem: Option<String>,
}

/// The RPO section.
#[derive(Debug, Clone, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RpoSection {
    /// Every table within `--max-rpo`.
    pub ok: bool,
    /// `--max-rpo`, in seconds.
    pub max_rpo_seconds: f64,
    /// The source cluster's clock when measured (raw hybrid time).
    pub source_now: Option<u64>,
    /// The same in UTC.
    pub source_now_utc: Option<String>,
    /// Per sink table.
    pub tables: Vec<TableRpo>,
    /// Why the section could not be measured at all.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl RpoSection {
    fn failed(max: Duration, error: String) -> Self {
        RpoSection {
            ok: false,
            max_rpo_seconds: max.as_secs_f64(),
            source_now: None,
            source_now_utc: None,
            tables: Vec::new(),
            error: Some(error),
        }
    }
}

/// The positions the other sections use: each table's cut, and the job
/// that wrote them.
#[derive(Debug, Clone, Default)]
pub struct Positions {
    /// Tables with a completed window and a sink time.
    pub tables: Vec<TablePosition>,
    /// The job id in the records (the cuts table's key).
    pub job_id: Option<String>,
}

/// Measures the section; also hands back the positions read.
pub(super) async fn section(ctx: &Ctx<'_>) -> (RpoSection, Positions) {
    let max = ctx.args.max_rpo;
    let Some(position_table) = ctx.cfg().position_table.clone() else {
        let why =
            "job.positionTable is off: without sink positions the sink cannot say how far it is";
        return (RpoSection::failed(max, why.into()), Positions::default());
    };
    let now = match tokio::time::timeout(CLUSTER_TIMEOUT, ctx.source.server_clock()).await {
        Ok(Ok(now)) => now,
        Ok(Err(e)) => {
            let why = format!("cannot read the source cluster's clock: {e}");
            return (RpoSection::failed(max, why), Positions::default());
        }
        Err(_) => {
            let why = format!(
                "the source cluster did not answer within {} s",
                CLUSTER_TIMEOUT.as_secs()
            );
            return (RpoSection::failed(max, why), Positions::default());
        }
    };
    let now_ms = now.epoch_millis();
    let mut tables = Vec::new();
    let mut positions = Positions::default();
    for pair in &ctx.tables {
        let (row, position) = table_rpo(ctx, &position_table, &pair.sink, now_ms).await;
        if let Some((job_id, position)) = position {
            positions.job_id.get_or_insert(job_id);
            positions.tables.push(position);
        }
        tables.push(row);
    }
    let section = RpoSection {
        ok: tables.iter().all(|t| t.ok),
        max_rpo_seconds: max.as_secs_f64(),
        source_now: Some(now.raw()),
        source_now_utc: Some(crate::cli::failover::report::utc_ms(now_ms)),
        tables,
        error: None,
    };
    (section, positions)
}

/// One table's RPO at the source's `now_ms`, and its cut (with the job
/// that wrote it) when its position has a completed window.
async fn table_rpo(
    ctx: &Ctx<'_>,
    position_table: &str,
    sink: &str,
    now_ms: u64,
) -> (TableRpo, Option<(String, TablePosition)>) {
    let (clock, max) = (ctx.clock(), ctx.args.max_rpo);
    let mut row = TableRpo {
        table: sink.to_string(),
        job_id: None,
        last_end: None,
        last_end_utc: None,
        last_end_sink_time: None,
        rpo_seconds: None,
        ok: false,
        problem: None,
    };
    let lookup = PositionTable::lookup(&ctx.sink, position_table, sink);
    let p = match tokio::time::timeout(CLUSTER_TIMEOUT, lookup).await {
        Ok(Ok(Some(p))) => p,
        Ok(Ok(None)) => {
            row.problem = Some(format!(
                "no sink position in '{position_table}' (the job has not written one, or the table was recreated)"
            ));
            return (row, None);
        }
        Ok(Err(e)) => {
            row.problem = Some(format!("cannot read its sink position: {e}"));
            return (row, None);
        }
        Err(_) => {
            row.problem = Some(format!(
                "the sink cluster did not answer within {} s",
                CLUSTER_TIMEOUT.as_secs()
            ));
            return (row, None);
        }
    };
    row.job_id = Some(p.job_id.clone());
    row.last_end = p.last_end;
    row.last_end_utc = p.last_end.map(|t| utc(clock, t));
    row.last_end_sink_time = p.last_end_sink_time;
    let Some(end) = p.last_end else {
        row.problem = Some("no window completed yet (the snapshot is in progress)".into());
        return (row, None);
    };
    let lag = now_ms.saturating_sub(clock.epoch_millis(end));
    row.rpo_seconds = Some(lag as f64 / 1000.0);
    row.ok = u128::from(lag) <= max.as_millis();
    if !row.ok {
        row.problem = Some(format!("over --max-rpo ({} s)", max.as_secs_f64()));
    }
    let cut = p.last_end_sink_time.map(|at| {
        let position = TablePosition {
            table: sink.to_string(),
            cut: Cut {
                source_time: end,
                sink_time: at,
            },
        };
        (p.job_id.clone(), position)
    });
    (row, cut)
}

impl fmt::Display for RpoSection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "[{}] RPO now, per table (limit {} s{})",
            mark(self.ok),
            self.max_rpo_seconds,
            self.source_now_utc
                .as_deref()
                .map(|t| format!("; source clock {t}"))
                .unwrap_or_default()
        )?;
        if let Some(e) = &self.error {
            writeln!(f, "  cannot measure: {e}")?;
        }
        for t in &self.tables {
            match (t.rpo_seconds, &t.last_end_utc) {
                (Some(rpo), Some(at)) => write!(
                    f,
                    "  {}: {rpo:.3} s (last replicated window end {at})",
                    t.table
                )?,
                _ => write!(f, "  {}: unknown", t.table)?,
            }
            match &t.problem {
                Some(p) => writeln!(f, " — {p}")?,
                None => writeln!(f)?,
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(pairs: &[(&str, &str)]) -> JobConfig {
        let mut all = vec![
            ("job.sourceMasterAddresses", "a:7051"),
            ("job.sinkMasterAddresses", "b:7051"),
            ("job.checkpointsDirectory", "/chk"),
        ];
        all.extend_from_slice(pairs);
        JobConfig::from_named_pairs(all).unwrap()
    }

    #[test]
    fn tables_come_from_the_names_and_a_pattern_is_refused() {
        let one = cfg(&[("job.tableName", "t"), ("job.sinkTableName", "copy")]);
        assert_eq!(
            table_pairs(&one).unwrap(),
            [TablePair {
                source: "t".into(),
                sink: "copy".into()
            }]
        );
        let many = cfg(&[("job.tableName", "a,b"), ("job.tableSuffix", "_dr")]);
        let sinks: Vec<String> = table_pairs(&many)
            .unwrap()
            .into_iter()
            .map(|p| p.sink)
            .collect();
        assert_eq!(sinks, ["a_dr", "b_dr"]);
        let pattern = cfg(&[("job.tablePattern", "o.*")]);
        assert!(table_pairs(&pattern)
            .unwrap_err()
            .contains("job.tablePattern 'o.*'"));
    }
}
