//! The drill's verify section: every table of the job (or those of
//! `--verify-tables`) compared with its source at one consistent cut, by
//! the tablet servers' checksums (`ferry_verify`, read-only: no repair).
//!
//! The cut is the one `ferry failover --to consistent` would rewind to:
//! the target instant is the smallest last window end of the job's
//! tables, and each table is read at its newest known cut at or before
//! it — the newest row of the cuts table (`job.cutsTable`, one source
//! instant for every table) when it is that recent, else the table's own
//! sink position (`last_end`, `last_end_sink_time`). Both sides are read
//! at hybrid times in the past, so the running job's later writes do not
//! count as differences.

use super::report::{mark, ms};
use super::rpo::{Positions, CLUSTER_TIMEOUT};
use super::Ctx;
use crate::cli::failover::report::utc;
use crate::cli::failover::to::{pick, Cut, KnownCut, Target};
use ferry_engine::SourceTime;
use ferry_kudu::cuts::CutsTable;
use ferry_verify::{At, Side, VerifyOptions};
use kudu_client::HybridTime;
use std::fmt;
use std::time::Instant;

/// Differences listed per table in the report (all are counted).
const LISTED: usize = 10;

/// One table's verification.
#[derive(Debug, Clone, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TableVerify {
    /// The sink table.
    pub table: String,
    /// Its source table.
    pub source_table: String,
    /// The cut it was read at.
    pub cut: Option<Cut>,
    /// The cut's source instant in UTC.
    pub cut_utc: Option<String>,
    /// Equal at the cut (`None`: not verified, see `error`).
    pub equal: Option<bool>,
    /// Rows compared (source side).
    pub rows_compared: u64,
    /// Rows that differ (missing + extra + differing).
    pub differences: u64,
    /// Keys on the source only.
    pub missing: u64,
    /// Keys on the sink only.
    pub extra: u64,
    /// Keys whose values differ.
    pub differing: u64,
    /// The first differences, as `ferry verify --json` lists them.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub listed: Vec<ferry_verify::Difference>,
    /// How long it took.
    pub elapsed_ms: u64,
    /// Why it was not verified.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// The verify section.
#[derive(Debug, Clone, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct VerifySection {
    /// Every verified table equal (true when skipped).
    pub ok: bool,
    /// Why nothing was verified (`--no-verify`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub skipped: Option<String>,
    /// Where the cut came from.
    pub origin: Option<String>,
    /// The target source instant (raw hybrid time).
    pub target: Option<SourceTime>,
    /// It in UTC.
    pub target_utc: Option<String>,
    /// Whether every table was read at that one instant.
    pub one_instant: bool,
    /// Per table.
    pub tables: Vec<TableVerify>,
    /// Why no cut could be picked.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl VerifySection {
    fn empty(ok: bool) -> Self {
        VerifySection {
            ok,
            skipped: None,
            origin: None,
            target: None,
            target_utc: None,
            one_instant: false,
            tables: Vec::new(),
            error: None,
        }
    }
}

/// The newest row of the cuts table for `job_id`, if the table is on and
/// has one; the error says why it could not be read.
async fn newest_cut(ctx: &Ctx<'_>, job_id: &str) -> Result<Option<KnownCut>, String> {
    let Some(name) = &ctx.cfg().cuts_table else {
        return Ok(None);
    };
    let read = async {
        let Some(cuts) = CutsTable::open(&ctx.sink, name).await? else {
            return Ok(None);
        };
        cuts.newest(job_id).await
    };
    let row = match tokio::time::timeout(CLUSTER_TIMEOUT, read).await {
        Ok(Ok(row)) => row,
        Ok(Err(e)) => return Err(format!("cannot read the cuts table '{name}': {e}")),
        Err(_) => {
            return Err(format!(
                "the sink cluster did not answer within {} s",
                CLUSTER_TIMEOUT.as_secs()
            ))
        }
    };
    Ok(row.map(|r| KnownCut {
        cut: Cut {
            source_time: r.source_time,
            sink_time: r.sink_time,
        },
        tables: (!r.tables.is_empty()).then_some(r.tables),
    }))
}

/// Picks the cut and verifies the tables.
pub(super) async fn section(ctx: &Ctx<'_>, positions: &Positions) -> VerifySection {
    if ctx.args.no_verify {
        let mut s = VerifySection::empty(true);
        s.skipped = Some("--no-verify".into());
        return s;
    }
    let fail = |error: String| {
        let mut s = VerifySection::empty(false);
        s.error = Some(error);
        s
    };
    let Some(job_id) = &positions.job_id else {
        return fail(
            "no sink table has a position with a completed window: there is no cut to verify at"
                .into(),
        );
    };
    let newest = match newest_cut(ctx, job_id).await {
        Ok(newest) => newest,
        Err(e) => return fail(e),
    };
    let known: Vec<KnownCut> = newest.iter().cloned().collect();
    let plan = match pick(Target::Consistent, &positions.tables, &known) {
        Ok(plan) => plan,
        Err(e) => return fail(e),
    };
    let clock = ctx.clock();
    let from_cuts = newest.as_ref().is_some_and(|n| {
        plan.tables
            .iter()
            .any(|(_, c)| *c == n.cut && c.source_time == plan.target)
    });
    let mut section = VerifySection {
        ok: true,
        skipped: None,
        origin: Some(if from_cuts {
            format!(
                "the newest cut in '{}'",
                ctx.cfg().cuts_table.as_deref().unwrap_or_default()
            )
        } else {
            "each table's sink position (last_end, last_end_sink_time)".to_string()
        }),
        target: Some(plan.target),
        target_utc: Some(utc(clock, plan.target)),
        one_instant: plan.one_instant(),
        tables: Vec::new(),
        error: None,
    };
    for pair in &ctx.tables {
        if let Some(only) = &ctx.args.verify_tables {
            if !only.contains(&pair.sink) {
                continue;
            }
        }
        let cut = plan
            .tables
            .iter()
            .find(|(t, _)| t == &pair.sink)
            .map(|(_, c)| *c);
        let row = verify_table(ctx, &pair.source, &pair.sink, cut).await;
        section.ok &= row.equal == Some(true);
        section.tables.push(row);
    }
    section
}

async fn verify_table(ctx: &Ctx<'_>, source: &str, sink: &str, cut: Option<Cut>) -> TableVerify {
    let clock = ctx.clock();
    let mut row = TableVerify {
        table: sink.to_string(),
        source_table: source.to_string(),
        cut,
        cut_utc: cut.map(|c| utc(clock, c.source_time)),
        equal: None,
        rows_compared: 0,
        differences: 0,
        missing: 0,
        extra: 0,
        differing: 0,
        listed: Vec::new(),
        elapsed_ms: 0,
        error: None,
    };
    let Some(cut) = cut else {
        row.error = Some("no cut: the table has no sink position with a completed window".into());
        return row;
    };
    let mut opts = VerifyOptions::new(
        Side {
            client: ctx.source.clone(),
            table: source.to_string(),
            at: At::Time(HybridTime::from_raw(cut.source_time.raw())),
        },
        Side {
            client: ctx.sink.clone(),
            table: sink.to_string(),
            at: At::Time(HybridTime::from_raw(cut.sink_time.raw())),
        },
    );
    opts.parallelism = ctx.args.parallelism;
    opts.max_listed = LISTED;
    let began = Instant::now();
    match ferry_verify::verify(opts).await {
        Ok(report) => {
            row.equal = Some(report.equal);
            row.rows_compared = report.rows_compared;
            row.differences = report.differences;
            row.missing = report.missing;
            row.extra = report.extra;
            row.differing = report.differing;
            row.listed = report.listed;
        }
        Err(e) => row.error = Some(e.to_string()),
    }
    row.elapsed_ms = ms(began.elapsed());
    row
}

impl fmt::Display for VerifySection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(why) = &self.skipped {
            return writeln!(f, "[SKIPPED] Verify at a consistent cut ({why})");
        }
        writeln!(f, "[{}] Verify at a consistent cut", mark(self.ok))?;
        if let Some(e) = &self.error {
            writeln!(f, "  cannot verify: {e}")?;
        }
        if let (Some(t), Some(at), Some(origin)) = (self.target, &self.target_utc, &self.origin) {
            writeln!(
                f,
                "  cut: source time {t} ({at}), from {origin}{}",
                if self.one_instant {
                    "; every table at this one instant"
                } else {
                    "; the tables' windows did not end together, each at its newest cut before it"
                }
            )?;
        }
        for t in &self.tables {
            match (t.equal, &t.error) {
                (Some(true), _) => writeln!(
                    f,
                    "  {}: EQUAL, {} rows compared ({} ms)",
                    t.table, t.rows_compared, t.elapsed_ms
                )?,
                (Some(false), _) => writeln!(
                    f,
                    "  {}: DIFFERS, {} of {} rows ({} missing, {} extra, {} differing); `ferry verify` lists them",
                    t.table, t.differences, t.rows_compared, t.missing, t.extra, t.differing
                )?,
                (None, Some(e)) => writeln!(f, "  {}: not verified — {e}", t.table)?,
                (None, None) => writeln!(f, "  {}: not verified", t.table)?,
            }
        }
        Ok(())
    }
}
