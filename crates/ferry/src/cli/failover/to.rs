//! `ferry failover --to consistent | --to-time T`: with the source lost,
//! rewind every sink table of the job to one source instant, using the
//! sink's own history (`ferry_verify::rewind`).
//!
//! A *cut* is a pair (source time, sink time): at that sink hybrid time a
//! sink table held exactly its source as of the source time. Each table
//! of a job has its own window chain, so a cut is a table's: from its sink
//! position record (`last_end`, `last_end_sink_time`), or from a row of
//! the cuts history table on the sink cluster (`ferry_cuts`, one row per
//! window), which names the tables it holds for (every table of the job
//! when it names none). The target instant is the smallest `last_end` of
//! the job's tables (`consistent`) or the given time capped to it
//! (`--to-time`); each table is rewound to its newest cut at or before it
//! (`--dry-run` only counts). When the tables' windows ended together
//! there, every table holds that one instant; the report says whether
//! they do, and each table's instant.
//!
//! The job must be stopped (nothing else writing to the sink tables); the
//! applications are moved to the sink afterwards.

use super::DrArgs;
use crate::cli::failover::report::utc;
use anyhow::{bail, Context, Result};
use ferry_engine::config::JobConfig;
use ferry_engine::{SinkTime, SourceTime};
use ferry_kudu::cuts::CutsTable;
use ferry_kudu::position::PositionTable;
use ferry_verify::rewind::{rewind, RewindOptions, RewindReport};
use kudu_client::{HybridTime, KuduClient};
use std::fmt;

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

/// A source instant and the sink time at which a table (or every table
/// of the job) held the source as of it.
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

/// A row of the cuts table: a cut and the sink tables it holds for
/// (`None`: every table of the job).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KnownCut {
    /// The cut.
    pub cut: Cut,
    /// The tables it covers.
    pub tables: Option<Vec<String>>,
}

impl KnownCut {
    fn covers(&self, table: &str) -> bool {
        self.tables
            .as_ref()
            .is_none_or(|t| t.iter().any(|x| x == table))
    }
}

/// What `--to` rewinds each table to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    /// The source instant asked for: the smallest last window end of the
    /// job's tables (`consistent`), or the given time capped to it.
    pub target: SourceTime,
    /// Per sink table, the newest cut known for it at or before `target`.
    pub tables: Vec<(String, Cut)>,
}

impl Plan {
    /// Whether every table is rewound to the same source instant (the
    /// tables' windows ended together there).
    pub fn one_instant(&self) -> bool {
        self.tables
            .windows(2)
            .all(|w| w[0].1.source_time == w[1].1.source_time)
    }
}

/// Picks the cut of each table for `target` from the tables' positions
/// and the known cuts (pure; the error names a table without one).
///
/// Each table's windows are its own (one chain per table): a cut holds for
/// the table whose position gave it, or for the tables a cuts-table row
/// names. A time later than the smallest last end is capped to it: no
/// later instant is held by every table.
pub fn pick(
    target: Target,
    positions: &[TablePosition],
    cuts: &[KnownCut],
) -> Result<Plan, String> {
    let Some(oldest) = positions.iter().map(|p| p.cut.source_time).min() else {
        return Err("no sink table of the job has a position".into());
    };
    let target = match target {
        Target::Consistent => oldest,
        Target::Time(t) => t.min(oldest),
    };
    let mut tables = Vec::new();
    for p in positions {
        // The table's own position last: it wins a tie (max_by_key keeps
        // the last maximum).
        let cut = cuts
            .iter()
            .filter(|c| c.covers(&p.table))
            .map(|c| c.cut)
            .chain(std::iter::once(p.cut))
            .filter(|c| c.source_time <= target)
            .max_by_key(|c| c.source_time);
        let Some(cut) = cut else {
            let known = cuts
                .iter()
                .filter(|c| c.covers(&p.table))
                .map(|c| c.cut.source_time)
                .chain([p.cut.source_time])
                .min()
                .unwrap_or(p.cut.source_time);
            return Err(format!(
                "no cut of sink table '{}' at or before source time {target} is known (its oldest known is {known}; the cuts table holds the older ones): it cannot be rewound that far",
                p.table
            ));
        };
        tables.push((p.table.clone(), cut));
    }
    Ok(Plan { target, tables })
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

/// One table of the report.
#[derive(Debug, Clone, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TableRewind {
    /// The cut the table was rewound to.
    pub cut: Cut,
    /// Its source instant in UTC.
    pub cut_utc: String,
    /// What the rewind did.
    #[serde(flatten)]
    pub rewind: RewindReport,
}

/// What `--to` did.
#[derive(Debug, Clone, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ToReport {
    /// `consistent` or `time T`.
    pub mode: String,
    /// The source instant asked for (see [`Plan::target`]).
    pub target: SourceTime,
    /// It in UTC.
    pub target_utc: String,
    /// Whether every table holds the same source instant afterwards.
    pub one_instant: bool,
    /// Whether nothing was written.
    pub dry_run: bool,
    /// Per table.
    pub tables: Vec<TableRewind>,
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
            "Rewind ({}) to source time {} ({}){}",
            self.mode,
            self.target,
            self.target_utc,
            if self.one_instant {
                ": every table at this one instant"
            } else {
                ": the tables' windows did not end together, each table at its newest cut before it"
            }
        )?;
        for t in &self.tables {
            writeln!(
                f,
                "  {}: cut source time {} ({}), sink time {}: {verb} {} row(s) to their value then, deleted {} row(s){}",
                t.rewind.table,
                t.cut.source_time,
                t.cut_utc,
                t.cut.sink_time,
                t.rewind.rewritten,
                t.rewind.deleted,
                if self.dry_run || t.rewind.equal_after {
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
/// exist): the job's own history, written by its windows
/// (`ferry_kudu::cuts`).
async fn read_cuts(sink: &KuduClient, table: &str, job_id: &str) -> Result<Vec<KnownCut>> {
    let what = || format!("reading the cuts table '{table}'");
    let Some(cuts) = CutsTable::open(sink, table).await.with_context(what)? else {
        return Ok(Vec::new());
    };
    let rows = cuts.all(job_id).await.with_context(what)?;
    Ok(rows
        .into_iter()
        .map(|r| KnownCut {
            cut: Cut {
                source_time: r.source_time,
                sink_time: r.sink_time,
            },
            // An empty list means every table of the job.
            tables: (!r.tables.is_empty()).then_some(r.tables),
        })
        .collect())
}

/// Each sink table's position (its last end and sink time), and the job
/// that wrote them.
async fn positions(
    sink: &KuduClient,
    position_table: &str,
    tables: &[String],
) -> Result<(Vec<TablePosition>, Option<String>)> {
    let mut positions = Vec::new();
    let mut job_id = None;
    for table in tables {
        let p = PositionTable::lookup(sink, position_table, table)
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
    Ok((positions, job_id))
}

/// `ferry failover --to …`: picks the cuts, rewinds every sink table (or
/// counts, with `--dry-run`) and prints the report.
pub async fn rewind_to(args: &DrArgs, target: Target) -> Result<()> {
    let cfg = &args.run.config;
    let tables = sink_tables(cfg).map_err(anyhow::Error::msg)?;
    let Some(position_table) = &cfg.position_table else {
        bail!("job.positionTable is off: without sink positions the sink cannot say which source instant it holds");
    };
    let (_, sink) = crate::wiring::clients(cfg)?;
    let (positions, job_id) = positions(&sink, position_table, &tables).await?;
    let cuts = match &job_id {
        // The job's own cuts history (job.cutsTable; none when off).
        Some(job) => match &cfg.cuts_table {
            Some(table) => read_cuts(&sink, table, job).await?,
            None => Vec::new(),
        },
        None => Vec::new(),
    };
    let plan = pick(target, &positions, &cuts).map_err(anyhow::Error::msg)?;
    let clock = crate::wiring::source_clock(cfg);
    let mut done = Vec::new();
    for (table, cut) in &plan.tables {
        let at = HybridTime::from_raw(cut.sink_time.raw());
        let mut opts = RewindOptions::new(sink.clone(), table.clone(), at);
        opts.dry_run = args.dry_run;
        let rewind = rewind(opts)
            .await
            .with_context(|| format!("rewinding sink table '{table}'"))?;
        done.push(TableRewind {
            cut: *cut,
            cut_utc: utc(clock, cut.source_time),
            rewind,
        });
    }
    let report = ToReport {
        mode: match target {
            Target::Consistent => "consistent".into(),
            Target::Time(t) => format!("time {t}"),
        },
        target: plan.target,
        target_utc: utc(clock, plan.target),
        one_instant: plan.one_instant(),
        dry_run: args.dry_run,
        tables: done,
    };
    if args.json {
        crate::say!("{}", serde_json::to_string(&report)?);
    } else {
        crate::say!("{}", report.to_string().trim_end());
    }
    if !args.dry_run && report.tables.iter().any(|t| !t.rewind.equal_after) {
        bail!("a table is not equal to its cut after the rewind (something else writes to it: stop the job and the applications, then run again)");
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

    fn known(s: u64, k: u64, tables: Option<&[&str]>) -> KnownCut {
        KnownCut {
            cut: cut(s, k),
            tables: tables.map(|t| t.iter().map(|x| x.to_string()).collect()),
        }
    }

    #[test]
    fn consistent_is_the_oldest_last_end_and_each_table_its_newest_cut_before_it() {
        let p = [pos("a", 30, 300), pos("b", 10, 100), pos("c", 20, 200)];
        // Job-wide cuts: every table at 10.
        let cuts = [known(10, 101, None), known(5, 50, None)];
        let plan = pick(Target::Consistent, &p, &cuts).unwrap();
        assert_eq!(plan.target, SourceTime::from_raw(10));
        let picked: Vec<Cut> = plan.tables.iter().map(|t| t.1).collect();
        assert_eq!(picked, [cut(10, 101), cut(10, 100), cut(10, 101)]);
        assert!(plan.one_instant());
        // Per-table cuts only: each table at its own, not one instant.
        let cuts = [known(8, 80, Some(&["a"])), known(9, 90, Some(&["c", "x"]))];
        let plan = pick(Target::Consistent, &p, &cuts).unwrap();
        let picked: Vec<Cut> = plan.tables.iter().map(|t| t.1).collect();
        assert_eq!(picked, [cut(8, 80), cut(10, 100), cut(9, 90)]);
        assert!(!plan.one_instant());
        // A table without a cut that old: refused, naming it.
        let err = pick(Target::Consistent, &p, &cuts[..1]).unwrap_err();
        assert!(err.contains("'c'"), "{err}");
        assert!(pick(Target::Consistent, &[], &[]).is_err());
    }

    #[test]
    fn to_time_is_the_newest_cut_at_or_before_it_within_the_oldest_last_end() {
        let p = [pos("a", 30, 300), pos("b", 25, 250)];
        let cuts = [
            known(5, 50, None),
            known(12, 120, None),
            known(18, 180, None),
            known(28, 280, None),
        ];
        let at = |t| pick(Target::Time(SourceTime::from_raw(t)), &p, &cuts);
        let first = |t| at(t).map(|plan| plan.tables[0].1);
        assert_eq!(first(13), Ok(cut(12, 120)));
        assert_eq!(first(12), Ok(cut(12, 120)));
        // Past the oldest last end: capped to it.
        let plan = at(29).unwrap();
        assert_eq!(plan.target, SourceTime::from_raw(25));
        assert_eq!(plan.tables[0].1, cut(18, 180));
        assert_eq!(plan.tables[1].1, cut(25, 250));
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
