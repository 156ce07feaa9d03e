//! `ferry failover --to consistent | --to-time T`: with the source lost,
//! rewind every sink table of the job to one source instant, using the
//! sink's own history (`ferry_verify::rewind`).
//!
//! A *cut* is a pair (source time, sink time): at that sink hybrid time
//! every sink table of the job held exactly the source as of the source
//! time (the window chain is job-wide). Cuts come from the sink position
//! records (one per table: `last_end`, `last_end_sink_time`) and from the
//! cuts history table on the sink cluster (`ferry_cuts`: one row per
//! window opening), when it exists. `consistent` picks the smallest
//! `last_end` of the job's tables; `--to-time T` the newest cut at or
//! before T that is no later than that (a later one is not known to be
//! held by every table). Each table is then rewound to the cut's sink
//! time, `--dry-run` only counting.
//!
//! The job must be stopped (nothing else writing to the sink tables); the
//! applications are moved to the sink afterwards.

use super::DrArgs;
use crate::cli::failover::report::utc;
use anyhow::{bail, Context, Result};
use ferry_engine::config::JobConfig;
use ferry_engine::{SinkTime, SourceClock, SourceTime};
use ferry_kudu::position::PositionTable;
use ferry_verify::rewind::{rewind, RewindOptions, RewindReport};
use kudu_client::scan::{ComparisonOp, Predicate, ScanSpec};
use kudu_client::{HybridTime, KuduClient, Value};
use std::fmt;
use std::time::Duration;

/// The cuts history table's default name on the sink cluster.
pub const CUTS_TABLE: &str = "ferry_cuts";

/// Where `--to` rewinds to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    /// `--to consistent`: the smallest last window end of the job's tables.
    Consistent,
    /// `--to-time T`: the newest cut at or before this source time.
    Time(SourceTime),
}

impl Target {
    /// Parses `--to VALUE` (`consistent`).
    pub fn parse_to(value: &str) -> Result<Target, String> {
        match value {
            "consistent" => Ok(Target::Consistent),
            other => Err(format!(
                "invalid value '{other}' for --to: expected 'consistent' (or use --to-time T)"
            )),
        }
    }

    /// Parses `--to-time VALUE`: a raw hybrid time or an RFC 3339 UTC time
    /// (`2026-12-07T06:30:00Z`, fractions allowed).
    pub fn parse_time(value: &str) -> Result<Target, String> {
        if let Ok(raw) = value.parse::<u64>() {
            return Ok(Target::Time(SourceTime::from_raw(raw)));
        }
        parse_utc_micros(value)
            .map(|us| Target::Time(SourceTime::from_raw(HybridTime::from_micros(us).raw())))
            .ok_or_else(|| {
                format!("invalid value '{value}' for --to-time: expected a raw hybrid time or a UTC time like 2026-12-07T06:30:00Z")
            })
    }
}

/// `YYYY-MM-DDTHH:MM:SS[.fff]Z` as microseconds since the epoch.
fn parse_utc_micros(s: &str) -> Option<u64> {
    let s = s.strip_suffix('Z').or_else(|| s.strip_suffix("+00:00"))?;
    let (date, time) = s.split_once('T')?;
    let mut d = date.splitn(3, '-').map(|p| p.parse::<i64>().ok());
    let (y, m, day) = (d.next()??, d.next()??, d.next()??);
    let (hms, frac) = time.split_once('.').unwrap_or((time, ""));
    let mut t = hms.splitn(3, ':').map(|p| p.parse::<u64>().ok());
    let (hh, mm, ss) = (t.next()??, t.next()??, t.next()??);
    if !(1..=12).contains(&m) || !(1..=31).contains(&day) || hh > 23 || mm > 59 || ss > 60 {
        return None;
    }
    let micros = if frac.is_empty() {
        0
    } else {
        let digits: String = frac.chars().take(6).collect();
        if !digits.chars().all(|c| c.is_ascii_digit()) {
            return None;
        }
        format!("{digits:0<6}").parse::<u64>().ok()?
    };
    // Days since the epoch (H. Hinnant's days_from_civil).
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = u64::try_from(era * 146_097 + doe - 719_468).ok()?;
    Some(((days * 86_400 + hh * 3600 + mm * 60 + ss) * 1_000_000) + micros)
}

/// A source instant and the sink time at which every table held it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Cut {
    /// The source instant (raw hybrid time of the source).
    pub source_time: SourceTime,
    /// The sink hybrid time (raw).
    pub sink_time: SinkTime,
}

/// One sink table's position: its last window end and the cut it gives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TablePosition {
    /// The sink table.
    pub table: String,
    /// Its cut (`last_end`, `last_end_sink_time`).
    pub cut: Cut,
}

/// Picks the cut for `target` from the tables' positions and the known
/// cuts (pure; the error says why none fits).
pub fn pick(target: Target, positions: &[TablePosition], cuts: &[Cut]) -> Result<Cut, String> {
    let Some(oldest) = positions.iter().min_by_key(|p| p.cut.source_time) else {
        return Err("no sink table of the job has a position".into());
    };
    let Target::Time(t) = target else {
        return Ok(oldest.cut);
    };
    let ceiling = oldest.cut.source_time.min(t);
    positions
        .iter()
        .map(|p| p.cut)
        .chain(cuts.iter().copied())
        .filter(|c| c.source_time <= ceiling)
        .max_by_key(|c| c.source_time)
        .ok_or_else(|| {
            let known = cuts
                .iter()
                .map(|c| c.source_time)
                .chain(positions.iter().map(|p| p.cut.source_time))
                .min();
            format!(
                "no cut at or before {t} is known (the oldest known is {}): the sink cannot be rewound that far",
                known.map_or("none".into(), |k| k.to_string())
            )
        })
}

/// The job's sink tables: `job.tableName`'s names with `job.tableSuffix`
/// (or `job.sinkTableName` for one table). A `job.tablePattern` cannot be
/// resolved without the source.
pub fn sink_tables(cfg: &JobConfig) -> Result<Vec<String>, String> {
    if let Some(p) = &cfg.tables.pattern {
        return Err(format!(
            "the job selects its tables by job.tablePattern '{p}', which needs the source cluster to resolve; name the tables with --job.tableName a,b,c"
        ));
    }
    if cfg.tables.is_single() {
        return Ok(vec![cfg.sink_table_name()]);
    }
    Ok(cfg
        .tables
        .names
        .iter()
        .map(|n| format!("{n}{}", cfg.table_suffix))
        .collect())
}

/// What `--to` did.
#[derive(Debug, Clone, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ToReport {
    /// `consistent` or `time`.
    pub target: String,
    /// The cut rewound to.
    pub cut: Cut,
    /// The cut's source instant in UTC.
    pub cut_utc: String,
    /// Whether nothing was written.
    pub dry_run: bool,
    /// Per table.
    pub tables: Vec<RewindReport>,
    /// The source clock, for printing.
    #[serde(skip)]
    pub clock: SourceClock,
}

impl fmt::Display for ToReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let verb = if self.dry_run {
            "would rewind"
        } else {
            "rewound"
        };
        writeln!(
            f,
            "Cut ({}): source time {} ({}), sink time {}",
            self.target, self.cut.source_time, self.cut_utc, self.cut.sink_time
        )?;
        for t in &self.tables {
            writeln!(
                f,
                "  {}: {verb} {} row(s) to their value at the cut, deleted {} row(s){}",
                t.table,
                t.rewritten,
                t.deleted,
                if self.dry_run || t.equal_after {
                    ""
                } else {
                    " — NOT equal to the cut afterwards"
                }
            )?;
        }
        Ok(())
    }
}

/// Reads the cuts of `job_id` from the cuts table (none when it does not
/// exist).
async fn read_cuts(sink: &KuduClient, table: &str, job_id: &str) -> Result<Vec<Cut>> {
    let opened = match sink.open_table(table).await {
        Ok(t) => t,
        Err(kudu_client::Error::TableNotFound(_)) => return Ok(Vec::new()),
        Err(e) => return Err(e).with_context(|| format!("opening the cuts table '{table}'")),
    };
    let spec = ScanSpec::new()
        .projection(&["source_time", "sink_time"])
        .predicate(Predicate::comparison(
            "job_id",
            ComparisonOp::Equal,
            Value::String(job_id.to_owned()),
        ))
        .timeout(Duration::from_secs(30));
    let mut scanner = sink
        .scan_builder(&opened)
        .with_spec(spec)
        .build()
        .with_context(|| format!("reading the cuts table '{table}'"))?;
    let mut out = Vec::new();
    while let Some(batch) = scanner
        .next_batch()
        .await
        .with_context(|| format!("reading the cuts table '{table}'"))?
    {
        for row in batch.rows() {
            let (s, k) = (row.get_i64(0)?, row.get_i64(1)?);
            out.push(Cut {
                source_time: SourceTime::from_raw(s as u64),
                sink_time: SinkTime::from_raw(k as u64),
            });
        }
    }
    Ok(out)
}

/// `ferry failover --to …`: picks the cut, rewinds every sink table to it
/// (or counts, with `--dry-run`) and prints the report.
pub async fn rewind_to(args: &DrArgs, target: Target) -> Result<()> {
    let cfg = &args.run.config;
    let tables = sink_tables(cfg).map_err(anyhow::Error::msg)?;
    let Some(position_table) = &cfg.position_table else {
        bail!("job.positionTable is off: without sink positions the sink cannot say which source instant it holds");
    };
    let (_, sink) = crate::wiring::clients(cfg)?;
    let mut positions = Vec::new();
    let mut job_id = None;
    for table in &tables {
        let p = PositionTable::lookup(&sink, position_table, table)
            .await
            .with_context(|| format!("reading the sink position of '{table}'"))?;
        let Some(p) = p else {
            bail!("sink table '{table}' has no position in '{position_table}' (missing, or the table was recreated since the job wrote it)");
        };
        let (Some(end), Some(at)) = (p.last_end, p.last_end_sink_time) else {
            bail!("the sink position of '{table}' has no completed window with a sink time: there is no cut to rewind it to");
        };
        job_id.get_or_insert(p.job_id.clone());
        positions.push(TablePosition {
            table: table.clone(),
            cut: Cut {
                source_time: end,
                sink_time: at,
            },
        });
    }
    let cuts = match (&job_id, target) {
        (Some(job), Target::Time(_)) => read_cuts(&sink, &args.cuts_table, job).await?,
        _ => Vec::new(),
    };
    let cut = pick(target, &positions, &cuts).map_err(anyhow::Error::msg)?;
    let clock = crate::wiring::source_clock(cfg);
    let mut reports = Vec::new();
    for table in &tables {
        let mut opts = RewindOptions::new(
            sink.clone(),
            table.clone(),
            HybridTime::from_raw(cut.sink_time.raw()),
        );
        opts.dry_run = args.dry_run;
        let report = rewind(opts)
            .await
            .with_context(|| format!("rewinding sink table '{table}'"))?;
        reports.push(report);
    }
    let report = ToReport {
        target: match target {
            Target::Consistent => "consistent".into(),
            Target::Time(t) => format!("time {t}"),
        },
        cut,
        cut_utc: utc(clock, cut.source_time),
        dry_run: args.dry_run,
        tables: reports,
        clock,
    };
    if args.json {
        crate::say!("{}", serde_json::to_string(&report)?);
    } else {
        crate::say!("{}", report.to_string().trim_end());
    }
    if !args.dry_run && report.tables.iter().any(|t| !t.equal_after) {
        bail!("a table is not equal to the cut after the rewind (something else writes to it: stop the job and the applications, then run again)");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cut(s: u64, k: u64) -> Cut {
        Cut {
            source_time: SourceTime::from_raw(s),
            sink_time: SinkTime::from_raw(k),
        }
    }

    fn pos(table: &str, s: u64, k: u64) -> TablePosition {
        TablePosition {
            table: table.into(),
            cut: cut(s, k),
        }
    }

    #[test]
    fn consistent_is_the_oldest_table_position() {
        let p = [pos("a", 30, 300), pos("b", 10, 100), pos("c", 20, 200)];
        assert_eq!(pick(Target::Consistent, &p, &[]), Ok(cut(10, 100)));
        assert!(pick(Target::Consistent, &[], &[]).is_err());
    }

    #[test]
    fn to_time_is_the_newest_cut_at_or_before_it_within_the_consistent_cut() {
        let p = [pos("a", 30, 300), pos("b", 25, 250)];
        let cuts = [cut(5, 50), cut(12, 120), cut(18, 180), cut(28, 280)];
        let at = |t| pick(Target::Time(SourceTime::from_raw(t)), &p, &cuts);
        assert_eq!(at(13), Ok(cut(12, 120)));
        assert_eq!(at(12), Ok(cut(12, 120)));
        // Past the oldest table's position: that position.
        assert_eq!(at(29), Ok(cut(25, 250)));
        assert!(at(4).unwrap_err().contains("oldest known is 5"));
    }

    #[test]
    fn times_parse_raw_or_utc() {
        assert_eq!(
            Target::parse_time("12345"),
            Ok(Target::Time(SourceTime::from_raw(12345)))
        );
        let us = 1_796_325_294_553_000;
        assert_eq!(
            Target::parse_time("2026-12-03T19:14:54.553Z"),
            Ok(Target::Time(SourceTime::from_raw(
                HybridTime::from_micros(us).raw()
            )))
        );
        assert!(Target::parse_time("yesterday").is_err());
        assert!(Target::parse_to("latest").is_err());
        assert_eq!(Target::parse_to("consistent"), Ok(Target::Consistent));
    }
}
